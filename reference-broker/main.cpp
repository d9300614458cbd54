// firemq-broker: the FireMQ reference broker. `firemq-broker --help` lists every flag.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iostream>

#include "reference-broker/broker.h"
#include "reference-broker/storage_io.h"

namespace po = boost::program_options;

namespace {

struct Parsed {
  firemq::BrokerConfig config;
  bool help = false;
};

// The data directory's definitions file: read, or set aside when it cannot be read (reported; the broker starts
// without what it held rather than not at all, and a later save does not overwrite the damaged file).
nlohmann::json read_stored_definitions(const std::filesystem::path& file) {
  auto stored = firemq::DurableTopology::read(file);
  if (stored) return *stored;
  const std::filesystem::path aside = file.string() + ".unreadable";
  std::error_code ec;
  std::filesystem::rename(file, aside, ec);
  std::cerr << "firemq-broker: " << stored.error() << "; set aside as " << aside.string()
            << "; starting without its exchanges, queues and bindings" << std::endl;
  return nlohmann::json();
}

// --definitions wins (as RabbitMQ's load_definitions at boot); else what the data directory kept; else guest.
firemq::Result<firemq::Definitions, std::string> choose_definitions(const firemq::BrokerConfig& config,
                                                                    const nlohmann::json& stored) {
  if (!config.definitions_file.empty()) return firemq::Definitions::load(config.definitions_file);
  if (stored.is_object() && stored.contains("users")) {
    auto kept = firemq::Definitions::parse(stored.dump());
    if (!kept) return "the data directory's definitions: " + kept.error();
    return kept;
  }
  return firemq::Definitions::defaults();
}

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
      ("segment-bytes", po::value(&c.segment_bytes)->default_value(c.segment_bytes),
       "the message store starts a new segment file once the current one holds this many bytes")
      ("storage-fault", po::value<std::string>(),
       "testing: fail the Nth write or fsync of the data directory (write:N or fsync:N)")
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
  if (config.max_frame < firemq::kMaxFrameBeforeWelcome || config.max_frame > firemq::kMaxFrameLimit) {
    std::cerr << "firemq-broker: --max-frame must be at least " << firemq::kMaxFrameBeforeWelcome << " and at most "
              << firemq::kMaxFrameLimit << "\n";
    return 2;
  }
  config.handshake_timeout = std::chrono::milliseconds(handshake_ms);
  if (vm.count("storage-fault")) {
    if (firemq::Status bad = firemq::storage_faults().configure(vm["storage-fault"].as<std::string>())) {
      std::cerr << "firemq-broker: " << bad->msg << "\n";
      return 2;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    std::cerr << "firemq-broker: cannot create --data-dir " << config.data_dir << ": " << ec.message() << "\n";
    return 2;
  }
  if (firemq::IoStatus in_use = firemq::lock_data_directory(config.data_dir)) {
    std::cerr << "firemq-broker: " << *in_use << "\n";
    return 2;
  }
  config.alarms.disk_path = config.data_dir;  // the disk free limit guards the disk the store writes to

  const nlohmann::json stored = read_stored_definitions(std::filesystem::path(config.data_dir) / "definitions.json");
  auto definitions = choose_definitions(config, stored);
  if (!definitions) {
    std::cerr << "firemq-broker: " << definitions.error() << "\n";
    return 2;
  }
  firemq::Broker broker(config, std::move(*definitions));
  if (auto opened = broker.open_storage(stored); !opened) {
    std::cerr << "firemq-broker: " << opened.error() << "\n";
    return 1;
  }
  auto port = broker.listen();
  if (!port) {
    std::cerr << "firemq-broker: " << port.error() << "\n";
    return 1;
  }
  return broker.run();
}
