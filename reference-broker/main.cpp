// firemq-broker: the FireMQ reference broker. `firemq-broker --help` lists every flag.
#include <boost/program_options.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "reference-broker/broker.h"
#include "reference-broker/core/log.h"
#include "reference-broker/store/storage_io.h"

namespace po = boost::program_options;

namespace {

// The flags whose values main() checks after parsing.
struct RawFlags {
  std::uint64_t handshake_ms = 0;
  std::uint64_t statistics_interval_ms = 0;
  std::string fire_port = "5673", fires_port = "5674", ws_port = "15672", wss_port = "15671";
  std::string amqp_port = "5672", amqps_port = "5671";
  std::string loopback_users = "guest";
  std::string loopback_addresses = "127.0.0.0/8,::1";
  std::string trusted_origins = "loopback";
  std::vector<std::string> vhost_limits, user_limits;  // NAME:KEY=N each
};

// A listener's port flag: a port number (0: a free one) or "off".
firemq::Result<std::optional<std::uint16_t>, std::string> parse_port(const std::string& flag,
                                                                     const std::string& value) {
  if (value == "off") return std::optional<std::uint16_t>();
  std::size_t used = 0;
  unsigned long port = 0;
  try {
    port = std::stoul(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || port > 65535) {
    return "--" + flag + " " + value + ": expected a port number (0 picks a free port) or off";
  }
  return std::optional<std::uint16_t>(static_cast<std::uint16_t>(port));
}

// The data directory's definitions file: read, or set aside when it cannot be read (reported; the broker starts
// without what it held rather than not at all, and a later save does not overwrite the damaged file).
nlohmann::json read_stored_definitions(const std::filesystem::path& file) {
  auto stored = firemq::DurableTopology::read(file);
  if (stored) return *stored;
  const std::filesystem::path aside = file.string() + ".unreadable";
  std::error_code ec;
  std::filesystem::rename(file, aside, ec);
  firemq::log_line(stored.error() + "; set aside as " + aside.string() +
                   "; starting without its exchanges, queues and bindings");
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

po::options_description describe_flags(firemq::BrokerConfig& c, RawFlags& raw) {
  po::options_description flags("firemq-broker [flags]");
  flags.add_options()("help,h", "print this help and exit")(
      "bind", po::value(&c.bind_address)->default_value(c.bind_address),
      "address to listen on")("port", po::value(&raw.fire_port)->default_value(raw.fire_port),
                              "TCP port for fire://; 0 picks a free port; off: no TCP listener")(
      "tls-port", po::value(&raw.fires_port)->default_value(raw.fires_port),
      "TLS port for fires:// (needs --tls-cert and --tls-key); 0 picks a free port; off: none")(
      "ws-port", po::value(&raw.ws_port)->default_value(raw.ws_port),
      "HTTP port for WebSocket, ws://host:PORT/fire; 0 picks a free port; off: none")(
      "wss-port", po::value(&raw.wss_port)->default_value(raw.wss_port),
      "HTTPS port for WebSocket over TLS, wss://host:PORT/fire (needs --tls-cert and --tls-key); 0: free; off: none")(
      "amqp-port", po::value(&raw.amqp_port)->default_value(raw.amqp_port),
      "TCP port for AMQP 0-9-1 clients, sharing the broker with FireMQ; 0 picks a free port; off: none")(
      "amqps-port", po::value(&raw.amqps_port)->default_value(raw.amqps_port),
      "TLS port for AMQP 0-9-1 clients, amqps:// (needs --tls-cert and --tls-key); 0 picks a free port; off: none")(
      "tls-cert", po::value(&c.tls.certificate),
      "PEM certificate (chain) of the TLS listeners; without it fires://, wss:// and amqps:// are off")(
      "tls-key", po::value(&c.tls.private_key), "PEM private key of --tls-cert")(
      "tls-ciphers", po::value(&c.tls.ciphers)->default_value(c.tls.ciphers, "forward-secret AEAD suites"),
      "the TLS listeners' TLS 1.2 cipher suites, OpenSSL cipher-list syntax, in the server's order of preference; "
      "the default: ECDHE and DHE with AES-GCM and ChaCha20-Poly1305 (Mozilla's intermediate list); TLS 1.3's "
      "suites are OpenSSL's")(
      "tls-ca", po::value(&c.tls.client_ca),
      "PEM CA certificates: TLS clients must present a certificate signed by one (default: not asked)")(
      "port-file", po::value(&c.port_file),
      "once listening, write the bound ports to this file: {\"fire\": P, \"fires\": P, \"ws\": P, \"wss\": P, "
      "\"amqp\": P, \"amqps\": P}")(
      "definitions", po::value(&c.definitions_file),
      "users, vhosts and permissions (JSON, RabbitMQ's shape); default: guest/guest on vhost /")(
      "loopback-users", po::value(&raw.loopback_users)->default_value(raw.loopback_users),
      "users who may log in only from a loopback address (RabbitMQ's loopback_users), comma-separated; \"\": none")(
      "loopback-addresses", po::value(&raw.loopback_addresses)->default_value(raw.loopback_addresses),
      "for tests and unusual setups: the address ranges (CIDR, comma-separated) that count as loopback")(
      "trusted-origins", po::value(&raw.trusted_origins)->default_value(raw.trusted_origins),
      "WebSocket Origin headers under which a loopback-only user may log in, comma-separated: origins "
      "(https://app.example.com) and/or loopback (http(s)://localhost, 127.x, [::1], any port); the list replaces "
      "the default, so keep loopback in it to add to it; \"\": only upgrades without an Origin")(
      "data-dir", po::value(&c.data_dir)->default_value(c.data_dir),
      "where durable exchanges, queues, bindings and persistent messages are kept; created if missing")(
      "segment-bytes", po::value(&c.segment_bytes)->default_value(c.segment_bytes),
      "the message store starts a new segment file once the current one holds this many bytes")(
      "websocket-fault", po::value<std::string>(),
      "testing: break the WebSocket transport one way (accept-text, ignore-url-vhost or pack-frames)")(
      "amqp-fault", po::value<std::string>(),
      "testing: break the AMQP side one way (drop-delivery-mode, decimal-ignores-scale, crossing-close-ends-channel, "
      "nack-refused-publishes, global-qos-per-consumer, lossy-header-types, empty-queue-name-as-given, "
      "tx-routes-at-commit, properties-before-exchange, empty-headers-dropped, system-exchange-delete-as-fire, "
      "exclusive-consume-on-sac, exclusive-consumer-conflict-405, reject-publish-closes or tx-unknown-tag-at-commit)")(
      "storage-fault", po::value<std::string>(),
      "testing: fail the Nth write or fsync of the data directory with EIO or ENOSPC (write:N or fsync:N, then "
      "optionally :eio or :enospc)")("heartbeat", po::value(&c.heartbeat_seconds)->default_value(c.heartbeat_seconds),
                                     "the server's heartbeat interval in seconds; 0 lets the client's value stand")(
      "max-frame", po::value(&c.max_frame)->default_value(c.max_frame),
      "largest frame accepted after welcome, in bytes (welcome.max_frame)")(
      "collect-statistics-interval-ms",
      po::value(&raw.statistics_interval_ms)->default_value(raw.statistics_interval_ms),
      "how often the management API samples message rates and queue depths for its history (RabbitMQ's "
      "collect_statistics_interval; at least 100); it keeps the last 120 samples")(
      "handshake-timeout-ms", po::value(&raw.handshake_ms)->default_value(raw.handshake_ms),
      "close a connection that has not finished TLS, the WebSocket upgrade and hello within this time")(
      "memory-high-watermark", po::value(&c.alarms.memory_high_watermark)->default_value(0),
      "flow control: pause publishers while messages and unsent frames hold this many bytes; 0: 60% of RAM")(
      "paging-ratio", po::value(&c.paging_ratio)->default_value(c.paging_ratio, "0.5"),
      "page queued message bodies out to disk past this share of the memory high watermark; above 1: paging off")(
      "disk-free-limit", po::value(&c.alarms.disk_free_limit)->default_value(c.alarms.disk_free_limit),
      "flow control: pause publishers while the working directory's filesystem has less free; 0: off")(
      "vhost-limit", po::value(&raw.vhost_limits)->composing(),
      "VHOST:max-connections=N or VHOST:max-queues=N (RabbitMQ's vhost limits; -1: none); repeat for more")(
      "user-limit", po::value(&raw.user_limits)->composing(),
      "USER:max-connections=N (RabbitMQ's user limits; -1: none); repeat for more")(
      "max-handshakes", po::value(&c.bounds.handshakes)->default_value(c.bounds.handshakes),
      "connections that may be in their handshake at once; past it the longest waiting is dropped")(
      "max-subscriptions", po::value(&c.bounds.subscriptions)->default_value(c.bounds.subscriptions),
      "subscriptions per connection")(
      "max-unacked", po::value(&c.bounds.unacked)->default_value(c.bounds.unacked),
      "unacknowledged deliveries per connection: deliveries wait past it, whatever the credit")(
      "max-queues", po::value(&c.bounds.queues_per_vhost)->default_value(c.bounds.queues_per_vhost),
      "queues per vhost (a vhost's max-queues limit may set fewer)")(
      "max-exchanges", po::value(&c.bounds.exchanges_per_vhost)->default_value(c.bounds.exchanges_per_vhost),
      "exchanges per vhost, the built-in ones included")(
      "max-bindings", po::value(&c.bounds.bindings_per_vhost)->default_value(c.bounds.bindings_per_vhost),
      "bindings per vhost");
  return flags;
}

}  // namespace

firemq::Result<firemq::WebSocketFaults, std::string> parse_websocket_fault(const std::string& name) {
  firemq::WebSocketFaults faults;
  if (name == "accept-text") {
    faults.accept_text = true;
  } else if (name == "ignore-url-vhost") {
    faults.ignore_url_vhost = true;
  } else if (name == "pack-frames") {
    faults.pack_frames = true;
  } else {
    return "--websocket-fault " + name + ": expected accept-text, ignore-url-vhost or pack-frames";
  }
  return faults;
}

firemq::Result<firemq::AmqpFaults, std::string> parse_amqp_fault(const std::string& name) {
  firemq::AmqpFaults faults;
  const std::pair<const char*, bool firemq::AmqpFaults::*> known[] = {
      {"drop-delivery-mode", &firemq::AmqpFaults::drop_delivery_mode},
      {"decimal-ignores-scale", &firemq::AmqpFaults::decimal_ignores_scale},
      {"crossing-close-ends-channel", &firemq::AmqpFaults::crossing_close_ends_channel},
      {"nack-refused-publishes", &firemq::AmqpFaults::nack_refused_publishes},
      {"global-qos-per-consumer", &firemq::AmqpFaults::global_qos_per_consumer},
      {"lossy-header-types", &firemq::AmqpFaults::lossy_header_types},
      {"empty-queue-name-as-given", &firemq::AmqpFaults::empty_queue_name_as_given},
      {"tx-routes-at-commit", &firemq::AmqpFaults::tx_routes_at_commit},
      {"properties-before-exchange", &firemq::AmqpFaults::properties_before_exchange},
      {"empty-headers-dropped", &firemq::AmqpFaults::empty_headers_dropped},
      {"system-exchange-delete-as-fire", &firemq::AmqpFaults::system_exchange_delete_as_fire},
      {"exclusive-consume-on-sac", &firemq::AmqpFaults::exclusive_consume_on_sac},
      {"exclusive-consumer-conflict-405", &firemq::AmqpFaults::exclusive_consumer_conflict_405},
      {"reject-publish-closes", &firemq::AmqpFaults::reject_publish_closes},
      {"tx-unknown-tag-at-commit", &firemq::AmqpFaults::tx_unknown_tag_at_commit},
  };
  std::string names;
  for (const auto& [known_name, flag] : known) {
    if (name == known_name) {
      faults.*flag = true;
      return faults;
    }
    names += names.empty() ? known_name : std::string(", ") + known_name;
  }
  return "--amqp-fault " + name + ": expected one of " + names;
}

// The listeners' ports and TLS files, checked together; the error says which flag is wrong.
firemq::IoStatus apply_listener_flags(const RawFlags& raw, firemq::BrokerConfig& config) {
  const std::pair<const char*, const std::string*> flags[] = {
      {"port", &raw.fire_port},    {"tls-port", &raw.fires_port}, {"ws-port", &raw.ws_port},
      {"wss-port", &raw.wss_port}, {"amqp-port", &raw.amqp_port}, {"amqps-port", &raw.amqps_port}};
  std::optional<std::uint16_t>* ports[] = {&config.ports.fire, &config.ports.fires, &config.ports.ws,
                                           &config.ports.wss,  &config.ports.amqp,  &config.ports.amqps};
  for (std::size_t i = 0; i < std::size(ports); ++i) {
    auto port = parse_port(flags[i].first, *flags[i].second);
    if (!port) return port.error();
    *ports[i] = *port;
  }
  if (config.tls.certificate.empty() != config.tls.private_key.empty()) {
    return std::string("--tls-cert and --tls-key go together: give both or neither");
  }
  if (!config.tls.client_ca.empty() && config.tls.certificate.empty()) {
    return std::string("--tls-ca needs --tls-cert and --tls-key");
  }
  return firemq::IoStatus::done();
}

// --loopback-users, --loopback-addresses and --trusted-origins; the error names the entry that is wrong.
firemq::IoStatus apply_loopback_flags(const RawFlags& raw, firemq::BrokerConfig& config) {
  config.loopback.users = firemq::split_names(raw.loopback_users);
  auto ranges = firemq::parse_address_ranges(raw.loopback_addresses);
  if (!ranges) return "--loopback-addresses: " + ranges.error();
  config.loopback.addresses = std::move(*ranges);
  auto origins = firemq::parse_trusted_origins(raw.trusted_origins);
  if (!origins) return "--trusted-origins: " + origins.error();
  config.trusted_origins = std::move(*origins);
  return firemq::IoStatus::done();
}

// --vhost-limit and --user-limit, over what the definitions set; the error quotes the flag that is wrong.
firemq::IoStatus apply_limit_flags(const RawFlags& raw, firemq::Definitions& definitions) {
  using Setter = std::optional<std::string> (firemq::Definitions::*)(const std::string&, const nlohmann::json&);
  const std::pair<const char*, Setter> kinds[] = {{"vhost-limit", &firemq::Definitions::set_vhost_limits},
                                                  {"user-limit", &firemq::Definitions::set_user_limits}};
  const std::vector<std::string>* values[] = {&raw.vhost_limits, &raw.user_limits};
  for (std::size_t i = 0; i < 2; ++i) {
    for (const std::string& value : *values[i]) {
      auto flag = firemq::parse_limit_flag(value);
      if (!flag) return "--" + std::string(kinds[i].first) + " " + flag.error();
      if (auto bad = (definitions.*kinds[i].second)(flag->name, flag->value)) {
        return "--" + std::string(kinds[i].first) + " " + value + ": " + *bad;
      }
    }
  }
  return firemq::IoStatus::done();
}

// Bounds of zero would refuse everything (or, for handshakes, drop every connection but the newest).
firemq::IoStatus check_bounds(const firemq::ClientBounds& b) {
  const std::pair<const char*, std::size_t> bounds[] = {{"max-handshakes", b.handshakes},
                                                        {"max-subscriptions", b.subscriptions},
                                                        {"max-unacked", b.unacked},
                                                        {"max-queues", b.queues_per_vhost},
                                                        {"max-exchanges", b.exchanges_per_vhost},
                                                        {"max-bindings", b.bindings_per_vhost}};
  for (const auto& [flag, value] : bounds) {
    if (value == 0) return "--" + std::string(flag) + " must be at least 1";
  }
  return firemq::IoStatus::done();
}

// Each connection holds a descriptor: the soft limit (often 1024) is raised to the hard one, as RabbitMQ's
// packages do, so that the bounds above, not the descriptor table, decide how many clients fit. The limit it
// runs with is logged, since it decides how many connections fit (listener.cpp keeps kReservedDescriptors free).
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t soft = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      firemq::log_line(std::string("could not raise the descriptor limit: ") + std::strerror(errno));
      limit.rlim_cur = soft;
    }
  }
  const auto shown = [](rlim_t n) { return n == RLIM_INFINITY ? std::string("unlimited") : std::to_string(n); };
  firemq::log_notice("descriptor limit (RLIMIT_NOFILE) " + shown(limit.rlim_cur) +
                     (limit.rlim_cur != soft ? " (raised from " + shown(soft) + ")" : std::string()));
}

int main(int argc, char** argv) {
  firemq::BrokerConfig config;
  RawFlags raw;
  raw.handshake_ms = static_cast<std::uint64_t>(config.handshake_timeout.count());
  raw.statistics_interval_ms = static_cast<std::uint64_t>(config.statistics_interval.count());
  const po::options_description flags = describe_flags(config, raw);
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    firemq::log_line(e.what());
    std::cerr << "\n" << flags << "\n";  // the usage, as --help prints it
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  if (config.max_frame < firemq::kMaxFrameBeforeWelcome || config.max_frame > firemq::kMaxFrameLimit) {
    firemq::log_line("--max-frame must be at least " + std::to_string(firemq::kMaxFrameBeforeWelcome) +
                     " and at most " + std::to_string(firemq::kMaxFrameLimit));
    return 2;
  }
  if (!(config.paging_ratio > 0)) {
    std::ostringstream given;
    given << config.paging_ratio;
    firemq::log_line("--paging-ratio must be above 0 (a share of the memory high watermark), not " + given.str());
    return 2;
  }
  config.handshake_timeout = std::chrono::milliseconds(raw.handshake_ms);
  if (raw.statistics_interval_ms < 100) {
    firemq::log_line("--collect-statistics-interval-ms must be at least 100");
    return 2;
  }
  config.statistics_interval = std::chrono::milliseconds(raw.statistics_interval_ms);
  if (auto applied = apply_listener_flags(raw, config); !applied) {
    firemq::log_line(applied.error());
    return 2;
  }
  if (auto applied = apply_loopback_flags(raw, config); !applied) {
    firemq::log_line(applied.error());
    return 2;
  }
  if (auto checked = check_bounds(config.bounds); !checked) {
    firemq::log_line(checked.error());
    return 2;
  }
  if (vm.count("websocket-fault")) {
    auto faults = parse_websocket_fault(vm["websocket-fault"].as<std::string>());
    if (!faults) {
      firemq::log_line(faults.error());
      return 2;
    }
    config.websocket_faults = *faults;
  }
  if (vm.count("amqp-fault")) {
    auto faults = parse_amqp_fault(vm["amqp-fault"].as<std::string>());
    if (!faults) {
      firemq::log_line(faults.error());
      return 2;
    }
    config.amqp_faults = *faults;
  }
  if (vm.count("storage-fault")) {
    if (firemq::Status bad = firemq::storage_faults().configure(vm["storage-fault"].as<std::string>())) {
      firemq::log_line(bad->msg);
      return 2;
    }
  }
  if (firemq::IoStatus created = firemq::create_private_directories(config.data_dir); !created) {
    firemq::log_line("cannot create --data-dir: " + created.error());
    return 2;
  }
  if (firemq::IoStatus locked = firemq::lock_data_directory(config.data_dir); !locked) {
    firemq::log_line(locked.error());
    return 2;
  }
  config.alarms.disk_path = config.data_dir;  // the disk free limit guards the disk the store writes to

  const nlohmann::json stored = read_stored_definitions(std::filesystem::path(config.data_dir) / "definitions.json");
  auto definitions = choose_definitions(config, stored);
  if (!definitions) {
    firemq::log_line(definitions.error());
    return 2;
  }
  if (auto applied = apply_limit_flags(raw, *definitions); !applied) {
    firemq::log_line(applied.error());
    return 2;
  }
  raise_descriptor_limit();
  firemq::Broker broker(config, std::move(*definitions));
  if (auto opened = broker.open_storage(stored); !opened) {
    firemq::log_line(opened.error());
    return 1;
  }
  if (auto listening = broker.listen(); !listening) {
    firemq::log_line(listening.error());
    return 1;
  }
  return broker.run();
}
