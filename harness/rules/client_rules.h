// The duties of a client that the wire monitor (wire_monitor.h) does not check, judged on the frames a client
// sends when the harness plays its server (client mode, docs/client-certification.md). The monitor's rules
// that bind both sides (framing, limits, directions, the close reply, heartbeats) run beside these on the same
// frames; these are the sentences of the spec that only a client's frames can break, plus the pong, which
// broker mode leaves to its heartbeat cases, and the dead peer, seen when the proxy makes the server silent.
//
// No I/O and no clock of its own: the caller says when each thing happened. One connection, one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/model/clock.h"
#include "harness/model/run_result.h"
#include "harness/rules/wire_monitor.h"
#include "protocol/frame.h"

namespace firemq::conform {

// The rules, as MonitorRule (requirement id, section, the spec's words); server_only is false for all.
const std::vector<MonitorRule>& client_rules();

// How long a client may take to answer a ping before the check says it never did.
inline constexpr std::chrono::milliseconds kPongTolerance{2000};
// How far from 2 x h of the server's silence a client may end the connection: a little early for timer
// granularity (the broker's heartbeat_dead_peer check allows as much), and later by the wire monitor's
// heartbeat tolerance.
inline constexpr std::chrono::milliseconds kDeadPeerEarly{300};
inline constexpr std::chrono::milliseconds kDeadPeerLate = kHeartbeatTolerance;

// The requirements a connect's hello keeps when it carries the URL's credentials and (fire, fires) vhost.
inline constexpr const char* kUrlUserinfo = "url.userinfo";
inline constexpr const char* kUrlVhostFromPath = "url.fire.vhost-from-path";

// One field of a frame the application asked for, and the rule a client breaks when the frame does not carry it.
// A map field (props, headers) is asked as a subset: each key the application gave must be there with its value;
// an SDK may add its own. Any other field must equal the value, an absent field being its zero value.
struct AskedField {
  std::string key;
  Value value;
  const char* rule;
  std::optional<Value> same_as = std::nullopt;  // a value the spec makes mean the same (hello: "Empty means `/`")
};
struct AskedFrame {
  std::uint8_t op = 0;
  std::vector<AskedField> fields;
  int command = 0;  // the driver command that asked for it: a command the client refused sends nothing
};

class ClientRules {
 public:
  ClientRules(std::string connection, Clock::time_point origin) : connection_(std::move(connection)), origin_(origin) {}

  // The first bytes the client sent on a TCP connection, as soon as there are 4 (or fewer, at its end).
  void observe_preamble(ByteView first_bytes, Clock::time_point at);
  // The first message the client sent on a WebSocket connection, whatever it holds.
  void observe_first_message(ByteView message, Clock::time_point at);
  // A complete frame from `from`, decodable or not.
  void observe(Side from, const RawFrame& frame, Clock::time_point at);
  // Nothing more will be seen (the connection ended, or the case is over): owed pongs are judged now.
  void finish(Clock::time_point at);
  // The server went silent (the proxy passes the client nothing more) after its last byte at `since`: with a
  // negotiated heartbeat the client must end the connection 2 x h after it, neither much before nor after.
  void server_silent(Clock::time_point since);
  // The client ended its side of the connection (not the proxy stopping).
  void observe_client_end(Clock::time_point at);
  // The application asked for a normal shutdown (the driver's close command): the client's close must say 200,
  // and come before its socket ends. Nothing is asked once a close was sent either way.
  void application_closes();
  // The application asked the client to send a frame (a publish, an ack, a nack, a get): the next frame of that
  // op the client sends must carry each field as asked (client_mode.cpp says which, and which rule each keeps).
  void application_sends(AskedFrame asked);
  // The command failed (the client refused it, or the server did): the frames it asked for are owed no more.
  void application_withdraws(int command);

  const std::vector<MonitorViolation>& violations() const { return violations_; }

 private:
  void violation(const char* rule, const std::string& message, Clock::time_point at);
  void check_rid(std::uint8_t op, const Map& header, Clock::time_point at);
  void check_seq(const Map& header, Clock::time_point at);
  void check_close(const Map& header, Clock::time_point at);
  void check_sub(std::uint8_t op, const Map& header, Clock::time_point at);
  void check_hello(const Map& header, Clock::time_point at);
  void check_field_types(const RawFrame& frame, Clock::time_point at);
  void check_asked(std::uint8_t op, const Map& header, Clock::time_point at);
  void check_asked_all_sent(Clock::time_point at);
  void settle_subscription(std::uint64_t rid, bool ok);
  void check_pongs_owed(Clock::time_point at);
  void check_dead_peer(Clock::time_point at, bool ended);

  std::string connection_;
  Clock::time_point origin_;
  std::vector<MonitorViolation> violations_;
  std::set<std::uint64_t> rids_awaiting_reply_;
  std::uint64_t last_seq_ = 0;
  std::deque<Clock::time_point> pings_unanswered_;  // the server's pings the client has not answered yet
  bool closing_ = false;                            // a close was sent: pings after it are owed nothing
  bool client_closed_ = false;                      // the client sent close
  bool server_ended_ = false;                       // the server sent close, or a fatal error
  bool normal_close_asked_ = false;                 // the application asked for a normal shutdown
  std::set<std::uint64_t> subs_in_use_;             // subs from their subscribe until freed (check_sub)
  std::map<std::uint64_t, std::uint64_t> subscribing_, unsubscribing_;  // rid -> sub, until the reply
  // Since when the server has paused the client's publishing (flow with pause: true), until pause: false. The
  // rule counts from the moment the proxy wrote the pause: the flow case sends it while the client is idle, so
  // no publish can be already on its way.
  std::optional<Clock::time_point> paused_since_;
  std::uint64_t heartbeat_s_ = 0;                  // welcome.heartbeat, as the client got it
  std::optional<Clock::time_point> silent_since_;  // the server's last byte before it went silent
  bool dead_peer_judged_ = false;
  bool frame_seen_ = false;       // the client sent a frame (the first must be hello)
  std::deque<AskedFrame> asked_;  // frames the application asked for, not sent yet
};

}  // namespace firemq::conform
