// The connection engine: one client connection around one Session, over any Transport (TCP, TLS, WebSocket,
// WSS). It owns the policy every transport shares: the handshake deadline, the bounded outbound queue and its
// memory accounting, the flow-control pause, heartbeats, the message store's write-out before frames leave, and
// the close after a close or a fatal error. Coroutines on the broker thread: reader() feeds the transport's
// frames to the session, writer() drains the session's outbound queue, heartbeat() sends pings and notices a
// dead peer. Only the transport touches the socket.
//
// Runs on the broker thread only. Each coroutine holds a shared_ptr to the Connection, so it lives until the
// last of them ends; the ConnectionRegistry holds plain pointers and is told in stop().
#pragma once

#include <list>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "protocol/frame.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/session/heartbeat.h"
#include "reference-broker/session/session.h"
#include "reference-broker/net/transport.h"

namespace firemq {

class Connection;

// A connection in its handshake, of either protocol: what the handshake bound may drop.
class InHandshake {
 public:
  virtual ~InHandshake() = default;
  // The registry's handshake bound was reached and this connection has waited longest: it is closed.
  virtual void drop_in_handshake() = 0;
};

// Every open connection, for graceful shutdown (as Asio's connection_manager::stop_all), and those still in their
// handshake (accepted, no welcome yet), which are bounded.
class ConnectionRegistry {
 public:
  // ClientBounds::handshakes: at most this many connections may be in their handshake at once.
  explicit ConnectionRegistry(std::size_t max_handshakes) : max_handshakes_(max_handshakes) {}
  // A new connection, in its handshake (begin_handshake).
  void add(Connection* c);
  // A connection in its handshake, FireMQ's or (through AmqpConnectionRegistry) AMQP's: one bound for the broker.
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

class Connection : public std::enable_shared_from_this<Connection>, public InHandshake, private Outbox {
 public:
  Connection(std::unique_ptr<Transport> transport, SessionEnv env, ConnectionRegistry& registry,
             asio::any_io_executor executor);

  void start();
  void shutdown();
  void on_alarm_changed();
  void drop_in_handshake() override;
  const Transport& transport() const { return *transport_; }
  const Session& session() const { return session_; }
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
  // Hands the transport's frames to the session until it needs more bytes, or `max_frames` were taken: true
  // in the second case (frames may remain; kFramesPerTurn).
  bool consume_frames(std::size_t max_frames);
  void end_batch();
  void hold_batch();
  void start_heartbeat();
  bool paused_by_alarm() const { return registry_.alarm() && session_.has_published(); }
  void tell_flow();
  void write_out_journal() {
    if (Journal* journal = env_core_.journal()) journal->write_out();
  }
  void send(const Message& message, ByteView payload) override;
  void send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& extras) override;
  void close_after_flush() override;
  // Both sends: the frame `append` puts on the end of the outbound buffer is counted and the writer woken.
  template <class Append>
  void queue_frame(Append&& append);
  void stop();

  std::unique_ptr<Transport> transport_;
  ConnectionRegistry& registry_;
  Core& env_core_;  // for the message store
  Session session_;
  HeartbeatMonitor heartbeat_;
  bool heartbeat_started_ = false;

  // Frames waiting to be written, back to back in their stream form: each is encoded straight into it, so a
  // frame has no buffer of its own, and the writer writes them all at once.
  Bytes outbound_;
  std::size_t pending_bytes_ = 0;  // bounded by kMaxPendingBytes: see reader()
  bool close_after_flush_ = false;
  bool told_pause_ = false;        // flow {pause: true} was sent and not yet lifted
  bool opened_ = false;           // the transport's handshake is done: frames may be written
  bool stopped_ = false;
  asio::steady_timer writer_wakeup_;
  asio::steady_timer reader_wakeup_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer linger_timer_;
  asio::steady_timer closing_deadline_;  // bounds the whole close (kMaxClosingTime)
  asio::steady_timer batch_timer_;  // ends a held batch (hold_batch)
  bool batch_held_ = false;
  std::int64_t connected_at_ms_;
};

}  // namespace firemq
