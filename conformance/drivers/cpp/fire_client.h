// A small FireMQ client over fire://, fires://, ws:// and wss:// (fire_link.h carries the frames over each),
// written for the example driver (driver.cpp): enough of the
// protocol to pass every client case, and short enough to read in one sitting. An SDK author reads it as a
// sketch of what a client owes the server; the rules it keeps are named beside the code that keeps them.
//
// Single-threaded and blocking: every wait has a deadline and pumps the socket, so pings are answered and
// deliveries reported while the client waits for a reply. With a negotiated heartbeat a wait also ends when a
// heartbeat falls due; an application waiting for something else (the driver, for its next command) polls the
// socket with heartbeat_wait_ms() and pumps, so that the client pings and notices a dead server meanwhile.
// Frames that are not replies become events, given to the `on_event` callback as JSON (the driver protocol's
// events).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "breaks.h"
#include "fire_link.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/url.h"

namespace firemq::example {

class FireClient {
 public:
  using Clock = std::chrono::steady_clock;
  using EventSink = std::function<void(const nlohmann::json&)>;

  FireClient(Breaks breaks, EventSink on_event) : breaks_(breaks), on_event_(std::move(on_event)) {}
  ~FireClient();

  // The transport (fire_link.h), hello, then welcome or error. `ca_file`: the CAs a TLS server's certificate
  // must chain to (PEM; empty: the system's). The error says what went wrong.
  Result<op::Welcome, std::string> connect(const Url& url, std::uint64_t heartbeat, const std::string& ca_file,
                                           Clock::time_point deadline);
  // A request (its rid is set here) and its one reply: ok, error or get_ok.
  Result<Message, std::string> request(Message request, Clock::time_point deadline);
  // A publish; with `confirm`, waits for its confirm and returns whether it was confirmed (true) or nacked.
  Result<bool, std::string> publish(op::Publish publish, const std::string& body, bool confirm,
                                    Clock::time_point deadline);
  // The same in two halves, so that several publishes are in flight: the publish goes out (its seq, 0 without
  // confirm), then its confirm is awaited (true: confirmed, false: nacked).
  Result<std::uint64_t, std::string> send_publish(op::Publish publish, const std::string& body, bool confirm,
                                                  Clock::time_point deadline);
  Result<bool, std::string> await_confirm(std::uint64_t seq, Clock::time_point deadline);
  // A frame that has no reply (ack, nack, credit).
  Result<bool, std::string> send(const Message& message);
  // close 200 and the server's close in reply.
  Result<bool, std::string> close(Clock::time_point deadline);

  bool connected() const { return link_ != nullptr; }
  int fd() const { return link_ ? link_->fd() : -1; }
  // Reads and handles what the server sent, waiting at most until `deadline` for something to come; then
  // keeps the heartbeat (a ping, or a dead server closed).
  Result<bool, std::string> pump(Clock::time_point deadline);
  // How long until the heartbeat needs pump() again, in milliseconds for poll(); -1 without heartbeats.
  int heartbeat_wait_ms() const;
  // The body of the last get_ok (requests return the header only).
  const std::string& last_get_body() const { return last_get_body_; }

 private:
  void handle(const RawFrame& frame);
  void emit_closed(const char* by, std::uint64_t code, const std::string& msg);
  bool write(const Bytes& bytes);
  Bytes close_frame(std::uint64_t code, const std::string& msg) const;
  Bytes hello_frame(const op::Hello& hello) const;
  void send_pong();
  static Bytes raw_frame(OpCode code, const Value& header);
  void drop_connection();
  // Waits for the reply to what was just sent (welcome, ok, error, get_ok).
  Result<bool, std::string> await_reply(Clock::time_point deadline);
  template <class Done>
  Result<bool, std::string> wait_until(Done done, Clock::time_point deadline);
  // When the next heartbeat duty falls due: a ping, or declaring the server dead.
  std::optional<Clock::time_point> heartbeat_due() const;
  Result<bool, std::string> keep_heartbeat();
  void start_connection_state();

  Breaks breaks_;
  EventSink on_event_;
  std::unique_ptr<Link> link_;       // null when not connected
  std::unique_ptr<Link> lingering_;  // --break keep-socket-after-close: the closed connection, never ended
  FrameDecoder decoder_{StreamSide::client, kDefaultMaxFrame};
  std::size_t max_frame_ = kMaxFrameBeforeWelcome;  // the largest frame the server accepts: welcome.max_frame
  std::uint64_t next_rid_ = 1;
  std::uint64_t next_seq_ = 1;
  std::optional<Message> reply_;  // the reply to the request in flight
  bool confirmed(std::uint64_t seq) const;
  std::uint64_t confirmed_upto_ = 0;  // every seq up to this one is confirmed
  std::set<std::uint64_t> nacked_;
  std::set<std::uint64_t> confirmed_one_;  // --break upto-confirms-one: the seqs an upto named
  bool awaiting_reply_ = false;            // a request (or hello) is in flight: an error without rid is its reply
  bool closing_ = false;                   // we sent close: the server's close is its reply
  bool close_replied_ = false;             // the server's close after ours
  bool paused_ = false;                    // the server's last flow said pause: true
  std::string last_get_body_;
  std::chrono::milliseconds heartbeat_{0};  // welcome.heartbeat; 0: no heartbeats
  Clock::time_point last_sent_{};
  Clock::time_point last_received_{};
};

}  // namespace firemq::example
