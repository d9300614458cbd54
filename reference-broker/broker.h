// The broker process: one io_context on one thread owns all broker state (as Redis does), the listeners, the
// connection registry, and the signal handling. SIGTERM or SIGINT: stop accepting, close 320 to every client,
// flush, exit 0.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "protocol/error.h"
#include "reference-broker/access/definitions.h"
#include "reference-broker/core/config.h"
#include "reference-broker/core/core.h"
#include "reference-broker/management/management_api.h"
#include "reference-broker/net/amqp_protocol.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/net/connection.h"
#include "reference-broker/net/fire_protocol.h"
#include "reference-broker/net/http_server.h"
#include "reference-broker/net/listener.h"
#include "reference-broker/store/durable_topology.h"
#include "reference-broker/store/message_store.h"

namespace firemq {

class Broker {
 public:
  Broker(BrokerConfig config, Definitions definitions);

  // Brings back what the data directory holds (durable exchanges, queues, bindings, then persistent messages)
  // and starts the message store; `stored` is the data directory's definitions file (null when none). What
  // could not be restored is reported on stderr and the rest still comes back; the error is for a data
  // directory that cannot be used at all.
  IoStatus open_storage(const nlohmann::json& stored);
  // Binds every listener that is on and reports the bound ports (stdout, and port_file when set). The error
  // says which listener could not be bound, and why, or which TLS file could not be used.
  IoStatus listen();
  // Serves until a shutdown signal; returns the process exit code.
  int run();

 private:
  IoStatus add_listener(std::optional<std::uint16_t> port, std::string scheme, Listener::OnAccept on_accept);
  // A connection speaking `Protocol` (FireProtocol, AmqpProtocol) over `transport`.
  template <class Protocol>
  void start_connection(std::unique_ptr<Transport> transport);
  awaitable<void> tick_loop();
  awaitable<void> statistics_loop();
  void begin_shutdown();
  awaitable<void> finish_shutdown();
  IoStatus write_port_file() const;
  void report_unclaimed_messages() const;

  BrokerConfig config_;
  Definitions definitions_;
  SystemTime time_;
  Alarms alarms_{config_.alarms};
  Core core_{definitions_, time_};
  // Before store_ (which pages out through it to its last write_out): a queue longer than memory (paging.h).
  BodyPager pager_{PagingOptions{paging_threshold(config_.paging_ratio, alarms_.memory_high_watermark()),
                                 config_.data_dir + "/paging"}};
  // Before io_, so that they outlive it: the coroutines io_ destroys last (an HTTP connection waiting for a
  // request) leave the handshake list as they go.
  ConnectionRegistry registry_{config_.bounds.handshakes};
  asio::io_context io_{1};
  std::unique_ptr<asio::ssl::context> tls_;  // null without a certificate: no fires, wss and amqps listeners
  // The management API on the HTTP listeners; it lists the listeners that are bound.
  ManagementApi management_{ManagementEnv{config_, definitions_, core_, registry_, alarms_, [this] {
                                            std::vector<ListenerInfo> out;
                                            for (const auto& l : listeners_) out.push_back({l->scheme(), l->port()});
                                            return out;
                                          }}};
  HttpServerEnv http_env_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  asio::signal_set signals_{io_, SIGTERM, SIGINT};
  bool shutting_down_ = false;
  // After io_: destroyed first, while io_ still exists for the storage thread's last completion.
  std::unique_ptr<DurableTopology> topology_;
  std::unique_ptr<store::MessageStore> store_;
};

}  // namespace firemq
