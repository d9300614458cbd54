#include "reference-broker/broker.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "reference-broker/core/log.h"
#include "reference-broker/net/stream_transport.h"

namespace firemq {
namespace {
using boost::system::error_code;
}

Broker::Broker(BrokerConfig config, Definitions definitions)
    : config_(std::move(config)), definitions_(std::move(definitions)) {
  core_.attach_pager(&pager_);
}

IoStatus Broker::open_storage(const nlohmann::json& stored) {
  const std::filesystem::path dir = config_.data_dir;
  const auto started = std::chrono::steady_clock::now();
  store::RecoveryReport report;
  auto post = [this](std::function<void()> work) { asio::post(io_, std::move(work)); };
  auto opened = store::MessageStore::open({dir / "messages", config_.segment_bytes}, time_, post, report);
  if (!opened) return opened.error();
  store_ = std::move(*opened);
  store_->set_pager(&pager_);
  for (const std::string& problem : report.problems) log_line("message store: " + problem);
  // Attached first: the durable queues declared next take back their messages from the store, and write new
  // ones to it like any other.
  topology_ = std::make_unique<DurableTopology>(dir / "definitions.json", core_, definitions_);
  core_.attach_storage(store_.get(), topology_.get());
  for (const std::string& problem : DurableTopology::restore(stored, core_)) {
    log_line("not restored: " + problem);
  }
  report_unclaimed_messages();
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                             started);
  // The whole of recovery: reading the log (report.elapsed) and putting the messages back in their queues.
  log_notice("recovered " + std::to_string(report.messages) + " messages from " + std::to_string(report.segments) +
             " segments (" + std::to_string(report.records) + " records) in " + std::to_string(elapsed.count()) +
             " ms (reading the log " + std::to_string(report.elapsed.count()) + " ms)");
  // The users, vhosts and permissions in use now are kept too (a restart without --definitions finds them).
  if (Status unsaved = topology_->save()) return unsaved->msg;
  return IoStatus::done();
}

void Broker::report_unclaimed_messages() const {
  // Their queues were not declared again (definitions.json set aside, a vhost gone): the messages stay in the
  // store, and come back into a durable queue of that name when one is declared.
  for (const auto& [key, messages] : store_->unclaimed()) {
    const auto names = store::split_queue_key(key);
    log_line("message store: " + std::to_string(messages.size()) + " messages of durable queue " +
             (names ? "'" + printable(names->second) + "' in vhost '" + printable(names->first) + "'" : "?") +
             " kept: the queue was not restored; declare it (durable) to get them back");
  }
}

IoStatus Broker::listen() {
  const ListenerPorts& ports = config_.ports;
  http_env_ = {config_.handshake_timeout,
               config_.websocket_faults,
               [this](std::unique_ptr<Transport> t) { start_connection<FireProtocol>(std::move(t)); },
               &management_,
               &registry_,
               &config_.trusted_origins};
  if (!config_.tls.certificate.empty()) {
    auto tls = make_tls_context(config_.tls);
    if (!tls) return tls.error();
    tls_ = std::move(*tls);
  } else if (ports.fires || ports.wss || ports.amqps) {
    log_notice("no TLS certificate (--tls-cert, --tls-key): fires://, wss:// and amqps:// are off");
  }
  auto tcp = [this](asio::ip::tcp::socket s) { start_connection<FireProtocol>(make_tcp_transport(std::move(s))); };
  auto tls = [this](asio::ip::tcp::socket s) {
    start_connection<FireProtocol>(make_tls_transport(std::move(s), *tls_));
  };
  auto ws = [this](asio::ip::tcp::socket s) { serve_http(std::move(s), http_env_); };
  auto wss = [this](asio::ip::tcp::socket s) { serve_https(std::move(s), *tls_, http_env_); };
  if (auto bound = add_listener(ports.fire, "fire", tcp); !bound) return bound;
  if (auto bound = add_listener(tls_ ? ports.fires : std::nullopt, "fires", tls); !bound) return bound;
  if (auto bound = add_listener(ports.ws, "ws", ws); !bound) return bound;
  if (auto bound = add_listener(tls_ ? ports.wss : std::nullopt, "wss", wss); !bound) return bound;
  auto amqp = [this](asio::ip::tcp::socket s) {
    start_connection<AmqpProtocol>(make_tcp_transport(std::move(s), "amqp"));
  };
  auto amqps = [this](asio::ip::tcp::socket s) {
    start_connection<AmqpProtocol>(make_tls_transport(std::move(s), *tls_, "amqps"));
  };
  if (auto bound = add_listener(ports.amqp, "amqp", amqp); !bound) return bound;
  if (auto bound = add_listener(tls_ ? ports.amqps : std::nullopt, "amqps", amqps); !bound) return bound;
  if (listeners_.empty()) return std::string("every listener is off: nothing to serve");
  if (IoStatus written = write_port_file(); !written) return written;
  for (const auto& listener : listeners_) {
    const bool websocket = listener->scheme() == "ws" || listener->scheme() == "wss";
    log_notice("listening on " + listener->scheme() + "://" + config_.bind_address + ":" +
               std::to_string(listener->port()) + (websocket ? std::string(kWebSocketPath) : "") + " (version " +
               kServerVersion + ")");
  }
  return IoStatus::done();
}

IoStatus Broker::add_listener(std::optional<std::uint16_t> port, std::string scheme, Listener::OnAccept on_accept) {
  if (!port) return IoStatus::done();  // off
  auto listener = Listener::bind(io_, config_.bind_address, *port, std::move(scheme), std::move(on_accept));
  if (!listener) return listener.error();
  (*listener)->on_descriptors_short([this] { return registry_.drop_oldest_handshake(); });
  listeners_.push_back(std::move(*listener));
  return IoStatus::done();
}

template <class Protocol>
void Broker::start_connection(std::unique_ptr<Transport> transport) {
  if (shutting_down_) return transport->abort();  // an upgrade that completed after SIGTERM
  make_connection<Protocol>(std::move(transport), SessionEnv{config_, definitions_, core_}, registry_,
                            io_.get_executor())
      ->start();
}

IoStatus Broker::write_port_file() const {
  if (config_.port_file.empty()) return IoStatus::done();
  // Written whole, then renamed, so that a reader polling for the file never sees half of it.
  const std::string temporary = config_.port_file + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << "{";
    for (std::size_t i = 0; i < listeners_.size(); ++i) {
      out << (i ? ", " : "") << "\"" << listeners_[i]->scheme() << "\": " << listeners_[i]->port();
    }
    out << "}\n";
    if (!out) return "cannot write port file '" + temporary + "'";
  }
  std::error_code ec;
  std::filesystem::rename(temporary, config_.port_file, ec);
  if (ec) return "cannot write port file '" + config_.port_file + "': " + ec.message();
  return IoStatus::done();
}

int Broker::run() {
  signals_.async_wait([this](error_code ec, int) {
    if (!ec) begin_shutdown();
  });
  for (const auto& listener : listeners_) listener->start();
  asio::co_spawn(io_, tick_loop(), asio::detached);
  asio::co_spawn(io_, statistics_loop(), asio::detached);
  io_.run();
  if (store_) store_->write_out();  // what the last connections did is written before the store's final fsync
  return 0;
}

awaitable<void> Broker::tick_loop() {
  // The precision of message TTL and x-expires (docs/spec-notes.md, Q40).
  asio::steady_timer timer(io_);
  while (!shutting_down_) {
    timer.expires_after(kTickInterval);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    core_.tick();
    // x-expires and auto-delete removals change the durable topology outside any request. Not once the store has
    // failed: no save can succeed until a restart, and each try would log again every tick.
    const bool store_failed = store_ && !store_->failure().empty();
    if (Status unsaved = store_failed ? Status() : core_.save_topology()) {
      log_line(unsaved->msg);
    }
    if (store_) store_->write_out();  // expiries' records
    // A failed store is the disk alarm too: a broker that cannot write pauses its publishers (as RabbitMQ's disk
    // alarm does), rather than leaving them to learn it one nack at a time.
    if (alarms_.update(store_ ? store_->failure() : std::string())) {
      log_notice(alarms_.active() ? "alarm: " + alarms_.describe() : "alarms cleared");
      registry_.set_alarm(alarms_.active());
    }
  }
}

awaitable<void> Broker::statistics_loop() {
  // The management API's history of message rates (message_history.h): a timer of its own, not the 20 ms tick, and
  // nothing on the publish and deliver paths; the first sample at once, so that a rate exists one interval later.
  asio::steady_timer timer(io_);
  while (!shutting_down_) {
    management_.collect_statistics(static_cast<std::int64_t>(time_.unix_ms()));
    timer.expires_after(config_.statistics_interval);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

void Broker::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  log_notice("shutting down");
  for (const auto& listener : listeners_) listener->close();
  registry_.shutdown_all();
  asio::co_spawn(io_, finish_shutdown(), asio::detached);
}

awaitable<void> Broker::finish_shutdown() {
  // Each connection closes once its close 320 is written; give them the grace period, then stop regardless.
  asio::steady_timer poll(io_);
  const auto deadline = Clock::now() + config_.shutdown_grace;
  while (!registry_.empty() && Clock::now() < deadline) {
    poll.expires_after(std::chrono::milliseconds(20));
    error_code ec;
    co_await poll.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  io_.stop();
}

}  // namespace firemq
