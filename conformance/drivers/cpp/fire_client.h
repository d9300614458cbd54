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

#include "fire_link.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/url.h"

namespace firemq::example {

// Rules the client breaks on purpose (--break NAME): proof that the client cases catch each one.
struct Breaks {
  bool seq_from_2 = false;      // numbers publishes 2, 3, 4, ... ("starting at 1")
  bool no_pong = false;         // ignores the server's pings ("A peer that receives ping replies pong.")
  bool no_close_reply = false;  // closes the socket on the server's close without its own close
  bool no_rid = false;          // sends requests without a rid ("Requests carry a request id (rid)")
  bool publish_while_paused = false;  // ignores flow ("Clients stop publishing until pause: false.")
  bool no_ping = false;               // never pings ("each side sends ping when it has sent nothing for h / 2")
  bool never_declares_dead = false;   // waits on a silent server forever ("considers the peer dead ... 2 x h")
  bool fmq1_on_websocket = false;     // sends FMQ1 over ws and wss too ("without `FMQ1`")
  bool close_not_200 = false;         // a normal shutdown's close says 320 ("Code 200 means a normal shutdown.")
  bool close_without_frame = false;   // a normal shutdown just ends the socket (the lifecycle's close exchange)
  bool keep_socket_after_close = false;  // keeps the socket after the close exchange ("... and closes the socket")
  bool ignore_fatal = false;          // goes on after a fatal error ("the server closes the connection after this frame")
  bool same_sub = false;              // every subscription is sub 1 ("unique on the connection")
  bool ack_ignores_multiple = false;  // an ack or nack with multiple settles only its own tag
  bool ping_every_h = false;          // pings after h of silence, not h / 2 ("when it has sent nothing for h / 2")
  bool upto_confirms_one = false;     // upto n settles seq n alone ("confirms every outstanding publish with seq <= n")
  bool nack_rejects_all = false;      // a nack settles every outstanding seq up to it ("rejects one publish")
};

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
  Result<bool, std::string> publish(op::Publish publish, const std::string& body, bool confirm, Clock::time_point deadline);
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
  std::unique_ptr<Link> link_;  // null when not connected
  std::unique_ptr<Link> lingering_;  // --break keep-socket-after-close: the closed connection, never ended
  FrameDecoder decoder_{StreamSide::client, kDefaultMaxFrame};
  std::size_t max_frame_ = kMaxFrameBeforeWelcome;  // the largest frame the server accepts: welcome.max_frame
  std::uint64_t next_rid_ = 1;
  std::uint64_t next_seq_ = 1;
  std::optional<Message> reply_;              // the reply to the request in flight
  bool confirmed(std::uint64_t seq) const;
  std::uint64_t confirmed_upto_ = 0;          // every seq up to this one is confirmed
  std::set<std::uint64_t> nacked_;
  std::set<std::uint64_t> confirmed_one_;     // --break upto-confirms-one: the seqs an upto named
  bool awaiting_reply_ = false;               // a request (or hello) is in flight: an error without rid is its reply
  bool closing_ = false;                      // we sent close: the server's close is its reply
  bool close_replied_ = false;                // the server's close after ours
  bool paused_ = false;                       // the server's last flow said pause: true
  std::string last_get_body_;
  std::chrono::milliseconds heartbeat_{0};    // welcome.heartbeat; 0: no heartbeats
  Clock::time_point last_sent_{};
  Clock::time_point last_received_{};
};

}  // namespace firemq::example
