// A client connection over TCP: the transport around one Session. Three coroutines on the broker thread:
// reader() turns socket bytes into frames for the session, writer() drains the session's bounded outbound
// queue, heartbeat() sends pings and notices a dead peer. Only this layer touches the socket.
//
// Runs on the broker thread only. Each coroutine holds a shared_ptr to the Connection, so it lives until the
// last of them ends; the ConnectionRegistry holds plain pointers and is told in stop().
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_set>

#include "protocol/frame.h"
#include "reference-broker/asio.h"
#include "reference-broker/heartbeat.h"
#include "reference-broker/session.h"

namespace firemq {

class Connection;

// Every open connection, for graceful shutdown (as Asio's connection_manager::stop_all).
class ConnectionRegistry {
 public:
  void add(Connection* c) { connections_.insert(c); }
  void remove(Connection* c) { connections_.erase(c); }
  // SIGTERM: every client gets close 320; each connection closes once its queue is flushed.
  void shutdown_all();
  bool empty() const { return connections_.empty(); }
  // Flow control: every connection is told when the alarms start or all clear.
  void set_alarm(bool active);
  bool alarm() const { return alarm_; }

 private:
  std::unordered_set<Connection*> connections_;
  bool alarm_ = false;
};

class Connection : public std::enable_shared_from_this<Connection>, private Outbox {
 public:
  Connection(asio::ip::tcp::socket socket, SessionEnv env, ConnectionRegistry& registry);

  void start();
  void shutdown() { session_.on_shutdown(); }
  void on_alarm_changed();

 private:
  awaitable<void> reader();
  awaitable<void> writer();
  awaitable<void> heartbeat();
  awaitable<void> handshake_deadline();
  awaitable<void> lingering_close();

  void consume(ByteView bytes);
  bool paused_by_alarm() const { return registry_.alarm() && session_.has_published(); }
  void tell_flow();
  void write_out_journal() {
    if (Journal* journal = env_core_.journal()) journal->write_out();
  }
  void send(const Message& message, ByteView payload) override;
  void close_after_flush() override;
  void stop();

  static std::string describe(const asio::ip::tcp::socket& socket);

  asio::ip::tcp::socket socket_;
  ConnectionRegistry& registry_;
  Core& env_core_;  // for the message store
  FrameDecoder decoder_{StreamSide::server};
  Session session_;
  HeartbeatMonitor heartbeat_;
  bool heartbeat_started_ = false;

  std::deque<Bytes> queue_;        // frames waiting to be written
  std::size_t pending_bytes_ = 0;  // bounded by kMaxPendingBytes: see reader()
  bool close_after_flush_ = false;
  bool told_pause_ = false;        // flow {pause: true} was sent and not yet lifted
  bool stopped_ = false;
  asio::steady_timer writer_wakeup_;
  asio::steady_timer reader_wakeup_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer handshake_timer_;
};

}  // namespace firemq
