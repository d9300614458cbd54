// firemq-broker: the FireMQ reference broker. `firemq-broker --help` lists every flag.
#include <boost/program_options.hpp>

#include <iostream>

#include "reference-broker/broker.h"

namespace po = boost::program_options;

namespace {

struct Parsed {
  firemq::BrokerConfig config;
  bool help = false;
};

po::options_description describe_flags(firemq::BrokerConfig& c, std::uint64_t& handshake_ms) {
  po::options_description flags("firemq-broker [flags]");
  flags.add_options()
      ("help,h", "print this help and exit")
      ("bind", po::value(&c.bind_address)->default_value(c.bind_address), "address to listen on")
      ("port", po::value(&c.port)->default_value(c.port), "TCP port for fire://; 0 picks a free port")
      ("port-file", po::value(&c.port_file), "once listening, write {\"fire\": PORT} to this file")
      ("definitions", po::value(&c.definitions_file),
       "users, vhosts and permissions (JSON, RabbitMQ's shape); default: guest/guest on vhost /")
      ("data-dir", po::value(&c.data_dir)->default_value(c.data_dir),
       "where durable exchanges, queues, bindings and persistent messages are kept; created if missing")
      ("heartbeat", po::value(&c.heartbeat_seconds)->default_value(c.heartbeat_seconds),
       "the server's heartbeat interval in seconds; 0 lets the client's value stand")
      ("max-frame", po::value(&c.max_frame)->default_value(c.max_frame),
       "largest frame accepted after welcome, in bytes (welcome.max_frame)")
      ("handshake-timeout-ms", po::value(&handshake_ms)->default_value(handshake_ms),
       "close a connection that has not sent hello within this time")
      ("memory-high-watermark", po::value(&c.alarms.memory_high_watermark)->default_value(0),
       "flow control: pause publishers while messages and unsent frames hold this many bytes; 0: 60% of RAM")
      ("disk-free-limit", po::value(&c.alarms.disk_free_limit)->default_value(c.alarms.disk_free_limit),
       "flow control: pause publishers while the working directory's filesystem has less free; 0: off");
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  firemq::BrokerConfig config;
  std::uint64_t handshake_ms = static_cast<std::uint64_t>(config.handshake_timeout.count());
  const po::options_description flags = describe_flags(config, handshake_ms);
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "firemq-broker: " << e.what() << "\n\n" << flags << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  if (config.max_frame < firemq::kMaxFrameBeforeWelcome) {
    std::cerr << "firemq-broker: --max-frame must be at least " << firemq::kMaxFrameBeforeWelcome << "\n";
    return 2;
  }
  config.handshake_timeout = std::chrono::milliseconds(handshake_ms);

  auto definitions = config.definitions_file.empty() ? firemq::Result<firemq::Definitions, std::string>(
                                                           firemq::Definitions::defaults())
                                                     : firemq::Definitions::load(config.definitions_file);
  if (!definitions) {
    std::cerr << "firemq-broker: " << definitions.error() << "\n";
    return 2;
  }
  firemq::Broker broker(config, std::move(*definitions));
  auto port = broker.listen();
  if (!port) {
    std::cerr << "firemq-broker: " << port.error() << "\n";
    return 1;
  }
  return broker.run();
}
