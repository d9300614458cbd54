// The broker process: one io_context on one thread owns all broker state (as Redis does), the listeners, the
// connection registry, and the signal handling. SIGTERM or SIGINT: stop accepting, close 320 to every client,
// flush, exit 0.
#pragma once

#include <memory>
#include <string>

#include "protocol/error.h"
#include "reference-broker/asio.h"
#include "reference-broker/config.h"
#include "reference-broker/connection.h"
#include "reference-broker/core.h"
#include "reference-broker/definitions.h"
#include "reference-broker/durable_topology.h"
#include "reference-broker/message_store.h"

namespace firemq {

class Broker {
 public:
  Broker(BrokerConfig config, Definitions definitions);

  // Brings back what the data directory holds (durable exchanges, queues, bindings, then persistent messages)
  // and starts the message store; `stored` is the data directory's definitions file (null when none). What
  // could not be restored is reported on stderr and the rest still comes back; the error is for a data
  // directory that cannot be used at all.
  Result<bool, std::string> open_storage(const nlohmann::json& stored);
  // Binds the listeners and reports the bound ports (stdout, and port_file when set). The error says which
  // address could not be bound, and why.
  Result<std::uint16_t, std::string> listen();
  // Serves until a shutdown signal; returns the process exit code.
  int run();

 private:
  awaitable<void> accept_loop();
  awaitable<void> tick_loop();
  void begin_shutdown();
  awaitable<void> finish_shutdown();
  Status write_port_file(std::uint16_t port) const;
  void report_unclaimed_messages() const;

  BrokerConfig config_;
  Definitions definitions_;
  SystemTime time_;
  Alarms alarms_{config_.alarms};
  Core core_{definitions_, time_};
  asio::io_context io_{1};
  asio::ip::tcp::acceptor acceptor_{io_};
  asio::signal_set signals_{io_, SIGTERM, SIGINT};
  ConnectionRegistry registry_;
  bool shutting_down_ = false;
  // After io_: destroyed first, while io_ still exists for the storage thread's last completion.
  std::unique_ptr<DurableTopology> topology_;
  std::unique_ptr<store::MessageStore> store_;
};

}  // namespace firemq
