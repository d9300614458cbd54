// One AMQP 0-9-1 connection without its socket: bytes in (feed), bytes out (OutboundBuffer). It runs the connection's
// handshake (protocol header, start/start-ok, tune/tune-ok, open, as the 0-9-1 spec's section 2.2.4 and RabbitMQ
// do it) and hands each channel's frames to its AmqpChannel, which maps the channel onto a core Session.
// Connection exceptions (connection.close with RabbitMQ's reply codes and the failing class and method) are
// decided here. The I/O around it (reads, the bounded write queue, timers) is the connection engine
// (net/connection.h), which drives it through net/amqp_protocol.h.
//
// Runs on the broker thread only.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/amqp/frame.h"
#include "reference-broker/amqp/amqp_channel.h"
#include "reference-broker/core/outbound_buffer.h"

namespace firemq {

// What the broker proposes in connection.tune.
inline constexpr std::uint16_t kAmqpChannelMax = 2047;  // RabbitMQ's default channel_max
inline constexpr std::uint32_t kAmqpFrameMax = 131072;  // RabbitMQ's default frame_max

class AmqpConnectionCore : private AmqpChannelHost {
 public:
  enum class State { awaiting_header, awaiting_start_ok, awaiting_tune_ok, awaiting_open, open, closing };

  // `name` names the connection ("peer:port -> local:port"); its channels are "name (N)".
  AmqpConnectionCore(SessionEnv env, OutboundBuffer& wire, std::string name, TransportHints hints);
  ~AmqpConnectionCore() override;

  // What was read from the socket, in order: at most `max_frames` frames of it are acted on, and the bytes taken
  // are returned (the rest is fed again later; a frame cut by the end of `bytes` is kept and taken whole).
  // Nothing is acted on once the connection is closing: every byte is taken then.
  std::size_t feed(ByteView bytes, std::size_t max_frames = SIZE_MAX);
  // After each read: the channels' coalesced confirms.
  void flush();
  // SIGTERM: connection.close 320 (connection-forced).
  void on_shutdown() { close_forced("broker shutting down"); }
  // connection.close 320 "CONNECTION_FORCED - <reason>" (SIGTERM, or the management API closing it).
  void close_forced(const std::string& reason);
  // The connection ends (closing, or the socket is gone): every channel's session ends (deliveries requeued),
  // then its count against max-connections and its exclusive queues go, once.
  void on_connection_lost();
  // Flow control: connection.blocked while an alarm holds and this connection has published, connection.unblocked
  // once all alarms clear; only for clients that take them (capability connection.blocked).
  void tell_alarm(bool alarm);

  State state() const { return state_; }
  std::chrono::seconds heartbeat() const { return std::chrono::seconds(heartbeat_); }
  bool has_published() const;

  // For the management API, once open: the connection's name, who it logged in as (client: start-ok's
  // client_properties), and its channels by number.
  const std::string& name() const { return name_; }
  const op::Hello& login() const { return login_; }
  const TransportHints& hints() const { return hints_; }
  const std::map<std::uint16_t, std::unique_ptr<AmqpChannel>>& channels() const { return channels_; }
  // Those past channel.open-ok and not closing: what the management API lists and counts.
  std::size_t open_channel_count() const;

 private:
  void on_frame(const amqp::FrameView& frame);
  void on_connection_method(const amqp::Method& m);
  void on_channel_frame(const amqp::FrameView& frame);
  void open_channel(std::uint16_t number);
  void send_start();
  void on_start_ok(const amqp::Method& m);
  void on_tune_ok(const amqp::Method& m);
  void on_update_secret(const amqp::Method& m);
  void on_open(const amqp::Method& m);
  void on_close(const amqp::Method& m);
  void send(std::uint16_t channel, const amqp::Method& m);
  void close_connection(std::uint16_t code, const std::string& text, amqp::MethodId method);
  // No connection.close: the socket closes once what was written has gone (a login refused without
  // authentication_failure_close, a wrong protocol header).
  void close_socket();
  // A login refused at start-ok or open: logged (log_refused_login), then the connection error.
  void refuse_login(std::string_view step, const std::string& user, const Error& error, amqp::MethodId method);

  // AmqpChannelHost
  OutboundBuffer& wire() override { return wire_; }
  void connection_error(const Error& error, amqp::MethodId method) override;
  std::size_t frame_max() const override { return frame_max_; }
  bool consumer_cancel_notify() const override { return cancel_notify_; }

  SessionEnv env_;
  OutboundBuffer& wire_;
  std::string name_;
  TransportHints hints_;
  amqp::FrameDecoder decoder_;
  State state_ = State::awaiting_header;
  op::Hello login_;  // what start-ok and open said; every channel's session logs in with it
  std::size_t frame_max_ = amqp::kFrameMinSize;
  std::uint16_t channel_max_ = kAmqpChannelMax;
  std::uint64_t heartbeat_ = 0;
  bool cancel_notify_ = false;
  bool blocked_notify_ = false;
  bool told_blocked_ = false;
  std::map<std::uint16_t, std::unique_ptr<AmqpChannel>> channels_;
  // Who the connection counts for against max-connections, from connection.open until it ends.
  struct Counted {
    std::string user;
    std::string vhost;
  };
  std::optional<Counted> counted_;
};

// The user and password of connection.start-ok's response: PLAIN ("\0user\0password", RFC 4616) or AMQPLAIN (a
// field table without its size, with LOGIN and PASSWORD). 403 when the response does not parse; 503 for another
// mechanism (RabbitMQ's "unknown authentication mechanism").
struct Credentials {
  std::string user;
  std::string password;
};
Result<Credentials> parse_credentials(const std::string& mechanism, const std::string& response);

}  // namespace firemq
