// One client's protocol session: it takes frames and decides what to answer. No I/O: the transport
// (connection.cpp) feeds it frames and carries out what it puts in its Outbox. Runs on the broker thread only.
//
// States, after the spec's "Connection lifecycle":
//   awaiting_hello  only hello (and close) is accepted; the 65,536-byte limit applies
//   open            welcome sent; requests are served; the limit is welcome.max_frame
//   closing         a close or a fatal error was sent: nothing more is read, the socket closes after the flush
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "protocol/error.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "reference-broker/config.h"
#include "reference-broker/definitions.h"

namespace firemq {

// Where a session's frames go. The transport frames them for its wire (TCP or WebSocket) and writes them.
class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(const Message& message, ByteView payload = {}) = 0;
  // Close the socket once every frame queued so far is written.
  virtual void close_after_flush() = 0;
};

// What a session needs from the broker. Both must outlive the session.
struct SessionEnv {
  const BrokerConfig& config;
  const Definitions& definitions;
};

class Session {
 public:
  enum class State { awaiting_hello, open, closing };

  Session(SessionEnv env, Outbox& out, std::string conn_id);

  void on_frame(const RawFrame& frame);
  // The transport's decoder refused the bytes (always 501, fatal).
  void on_framing_error(const Error& error);
  // SIGTERM: "close 320 to every client".
  void on_shutdown();

  State state() const { return state_; }
  // The frame-size limit the transport's decoder must apply now.
  std::size_t max_frame() const;
  // Negotiated in welcome; zero before it and when disabled.
  std::chrono::seconds heartbeat() const { return std::chrono::seconds(heartbeat_); }
  const std::string& conn_id() const { return conn_id_; }
  const std::string& user() const { return user_; }
  const std::string& vhost() const { return vhost_; }

 private:
  void on_message(Message&& message, const RawFrame& frame);
  void on_hello(const op::Hello& hello);
  void on_close(const op::Close& close);
  void on_request(const Message& message);
  Status check_hello(const op::Hello& hello) const;
  void send_welcome();
  void fail(Error error);

  SessionEnv env_;
  Outbox& out_;
  std::string conn_id_;
  State state_ = State::awaiting_hello;
  std::uint64_t heartbeat_ = 0;
  std::string user_;
  std::string vhost_;
};

}  // namespace firemq
