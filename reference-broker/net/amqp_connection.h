// The AMQP 0-9-1 listener's connection engine: the socket around one AmqpConnectionCore. A reader feeds what it
// reads to the core, a writer drains the core's bounded outbound queue, a heartbeat coroutine sends heartbeat
// frames and notices a dead peer, and a deadline bounds the handshake.
//
// It is an engine of its own rather than a Transport under Connection (connection.h): that engine drives exactly
// one Session, and an AMQP connection carries one session per channel, with a handshake of its own. It applies
// the same policies with the same named bounds: kMaxPendingBytes on the outbound queue (the reader stops while
// it is exceeded), the memory account, the alarm pause of a publishing connection, heartbeats through
// HeartbeatMonitor, the store's write-out before frames leave, and the lingering close within kMaxClosingTime
// (docs/ARCHITECTURE.md).
//
// Runs on the broker thread only. Each coroutine holds a shared_ptr to the connection.
#pragma once

#include <deque>
#include <memory>
#include <unordered_set>

#include "reference-broker/amqp/amqp_connection_core.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/net/connection.h"
#include "reference-broker/session/heartbeat.h"

namespace firemq {

class AmqpConnection;

// Every open AMQP connection, for graceful shutdown and the alarms (as ConnectionRegistry for FireMQ's). Those in
// their handshake (from accept to connection.open-ok) are in FireMQ's registry's handshake list, under the one
// --max-handshakes bound: a flood of stalled connections is dropped whichever listener it comes through.
class AmqpConnectionRegistry {
 public:
  explicit AmqpConnectionRegistry(ConnectionRegistry& handshakes) : handshakes_(handshakes) {}
  void add(AmqpConnection* c);
  void handshake_done(AmqpConnection* c);
  void remove(AmqpConnection* c);
  void shutdown_all();
  void set_alarm(bool active);
  bool alarm() const { return alarm_; }
  bool empty() const { return connections_.empty(); }
  const std::unordered_set<AmqpConnection*>& all() const { return connections_; }

 private:
  std::unordered_set<AmqpConnection*> connections_;
  ConnectionRegistry& handshakes_;
  bool alarm_ = false;
};

class AmqpConnection : public std::enable_shared_from_this<AmqpConnection>, public InHandshake, private AmqpWire {
 public:
  AmqpConnection(asio::ip::tcp::socket socket, SessionEnv env, AmqpConnectionRegistry& registry);

  void start();
  void shutdown();
  void on_alarm_changed();
  void drop_in_handshake() override;
  // The management API: connection.close 320 with `reason`.
  void close_by_operator(const std::string& reason) { core_.close_forced(reason); }
  const AmqpConnectionCore& core() const { return core_; }
  std::int64_t connected_at_ms() const { return connected_at_ms_; }

 private:
  // Runs one of the coroutines below on the connection's executor; one that throws stops the connection (asio.h).
  void spawn(awaitable<void> (AmqpConnection::*coroutine)(), const char* what);
  awaitable<void> reader();
  awaitable<void> writer();
  awaitable<void> heartbeat();
  awaitable<void> handshake_deadline();
  awaitable<void> lingering_close();
  awaitable<void> wait_until_readable();
  void end_batch();
  void start_heartbeat();
  bool paused_by_alarm() const { return registry_.alarm() && core_.has_published(); }
  void write_out_journal();
  void write(Bytes bytes) override;
  void close_after_flush() override;
  void stop();

  asio::ip::tcp::socket socket_;
  AmqpConnectionRegistry& registry_;
  Core& core_model_;  // for the message store
  AmqpConnectionCore core_;
  HeartbeatMonitor heartbeat_;
  bool heartbeat_started_ = false;
  std::deque<Bytes> queue_;
  std::size_t pending_bytes_ = 0;  // bounded by kMaxPendingBytes
  bool close_after_flush_ = false;
  bool stopped_ = false;
  std::array<std::uint8_t, 65536> chunk_{};
  asio::steady_timer writer_wakeup_;
  asio::steady_timer reader_wakeup_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer linger_timer_;
  asio::steady_timer closing_deadline_;  // bounds the whole close (kMaxClosingTime)
  std::int64_t connected_at_ms_;         // wall clock, as the management API shows it
};

}  // namespace firemq
