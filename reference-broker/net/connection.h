// The connection engine: one client connection, of either protocol, over any Transport (TCP, TLS, WebSocket,
// WSS). It owns the policy every connection shares: the handshake deadline, the bounded outbound queue and its
// memory accounting, the flow-control pause, heartbeats, the message store's write-out before frames leave, and
// the close after a close or a fatal error. What the protocol decides is a ConnectionProtocol
// (connection_protocol.h): FireMQ's (fire_protocol.h) or AMQP 0-9-1's (amqp_protocol.h). Coroutines on the broker
// thread: reader() hands what the transport read to the protocol, writer() drains the outbound buffer the
// protocol encodes frames into, heartbeat() sends heartbeats and notices a dead peer. Only the transport touches
// the socket.
//
// Runs on the broker thread only. Each coroutine holds a shared_ptr to the Connection, so it lives until the
// last of them ends; the ConnectionRegistry holds plain pointers and is told in stop().
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "reference-broker/net/asio.h"
#include "reference-broker/net/connection_protocol.h"
#include "reference-broker/net/transport.h"
#include "reference-broker/session/heartbeat.h"
#include "reference-broker/session/session.h"

namespace firemq {

class Connection;

// A connection in its handshake, of either protocol: what the handshake bound may drop.
class InHandshake {
 public:
  virtual ~InHandshake() = default;
  // The registry's handshake bound was reached and this connection has waited longest: it is closed.
  virtual void drop_in_handshake() = 0;
};

// Every open connection of either protocol, for graceful shutdown (as Asio's connection_manager::stop_all), the
// alarms and the management API, and those still in their handshake (accepted, not yet open), which are bounded.
class ConnectionRegistry {
 public:
  // ClientBounds::handshakes: at most this many connections may be in their handshake at once.
  explicit ConnectionRegistry(std::size_t max_handshakes) : max_handshakes_(max_handshakes) {}
  // A new connection, in its handshake (begin_handshake).
  void add(Connection* c);
  // A connection in its handshake (of either protocol, or an HTTP connection before its request): one bound.
  // Past the bound, the one that has waited longest is dropped: a flood of connections that never finish cannot
  // hold descriptors and memory, and a real client, whose handshake takes milliseconds, is not the one dropped.
  void begin_handshake(InHandshake* c);
  void handshake_done(InHandshake* c) { handshaking_.remove(c); }
  // Descriptors are short (listener.cpp): the connection that has waited longest in its handshake is dropped.
  // False: none is in its handshake.
  bool drop_oldest_handshake();
  void remove(Connection* c);
  std::size_t in_handshake() const { return handshaking_.size(); }
  const std::unordered_set<Connection*>& all() const { return connections_; }
  // SIGTERM: every client gets close 320; each connection closes once its queue is flushed.
  void shutdown_all();
  bool empty() const { return connections_.empty(); }
  // Flow control: every connection is told when the alarms start or all clear.
  void set_alarm(bool active);
  bool alarm() const { return alarm_; }

 private:
  std::unordered_set<Connection*> connections_;
  std::list<InHandshake*> handshaking_;  // oldest first
  std::size_t max_handshakes_;
  bool alarm_ = false;
};

class Connection : public std::enable_shared_from_this<Connection>, public InHandshake, private ConnectionOutput {
 public:
  // Makes the protocol the connection speaks, once the engine (its output) and the transport exist.
  using MakeProtocol = std::function<std::unique_ptr<ConnectionProtocol>(ConnectionOutput&, const Transport&)>;

  Connection(std::unique_ptr<Transport> transport, const MakeProtocol& make_protocol, SessionEnv env,
             ConnectionRegistry& registry, asio::any_io_executor executor);

  void start();
  void shutdown();
  void on_alarm_changed();
  void drop_in_handshake() override;
  const Transport& transport() const { return *transport_; }
  // The FireMQ session or the AMQP connection this engine carries: the other is nullptr.
  const Session* fire_session() const { return protocol_->fire_session(); }
  const AmqpConnectionCore* amqp_core() const { return protocol_->amqp_core(); }
  // When it was accepted (ms since the epoch), as the management API's connected_at.
  std::int64_t connected_at_ms() const { return connected_at_ms_; }
  // DELETE /api/connections/NAME: close 320 with the operator's reason (before the handshake: closed at once).
  void close_by_operator(const std::string& reason);

 private:
  // Runs one of the coroutines below on the connection's executor; one that throws stops the connection (asio.h).
  void spawn(awaitable<void> (Connection::*coroutine)(), const char* what);
  awaitable<void> reader();
  awaitable<void> writer();
  awaitable<void> heartbeat();
  awaitable<void> handshake_deadline();
  awaitable<void> lingering_close();
  awaitable<void> wait_until_readable();
  // Hands the protocol one turn's worth of what the transport read: true when more is waiting (kFramesPerTurn).
  bool take_input();
  void end_batch();
  void hold_batch();
  void start_heartbeat();
  bool paused_by_alarm() const { return registry_.alarm() && protocol_->has_published(); }
  bool closing() const { return protocol_->phase() == ConnectionProtocol::Phase::closing; }
  void write_out_journal() {
    if (Journal* journal = env_core_.journal()) journal->write_out();
  }
  // ConnectionOutput
  Bytes* outbound() override { return stopped_ ? nullptr : &outbound_; }
  void queued(std::size_t bytes) override;
  void close_after_flush() override;
  void stop();

  std::unique_ptr<Transport> transport_;
  ConnectionRegistry& registry_;
  Core& env_core_;  // for the message store
  std::unique_ptr<ConnectionProtocol> protocol_;
  HeartbeatMonitor heartbeat_;
  bool heartbeat_started_ = false;

  // Frames waiting to be written, back to back in their stream form: each is encoded straight into it, so a
  // frame has no buffer of its own, and the writer writes them all at once.
  Bytes outbound_;
  std::size_t pending_bytes_ = 0;  // bounded by kMaxPendingBytes: see reader()
  bool close_after_flush_ = false;
  bool opened_ = false;  // the transport's handshake is done: frames may be written
  bool stopped_ = false;
  asio::steady_timer writer_wakeup_;
  asio::steady_timer reader_wakeup_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer linger_timer_;
  asio::steady_timer closing_deadline_;  // bounds the whole close (kMaxClosingTime)
  asio::steady_timer batch_timer_;       // ends a held batch (hold_batch)
  bool batch_held_ = false;
  std::int64_t connected_at_ms_;
};

// A connection speaking `Protocol` (FireProtocol, AmqpProtocol) over `transport`, not started yet.
template <class Protocol>
std::shared_ptr<Connection> make_connection(std::unique_ptr<Transport> transport, SessionEnv env,
                                            ConnectionRegistry& registry, asio::any_io_executor executor) {
  auto speak = [env](ConnectionOutput& output, const Transport& t) -> std::unique_ptr<ConnectionProtocol> {
    return std::make_unique<Protocol>(env, output, t);
  };
  return std::make_shared<Connection>(std::move(transport), speak, env, registry, std::move(executor));
}

}  // namespace firemq
