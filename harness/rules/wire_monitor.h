// The wire monitor (docs/ARCHITECTURE.md, "The wire monitor"): one per connection, it sees every frame both
// ways and checks the spec's connection-wide rules on the frames of one side, the judged side. In broker mode
// that is the server; a harness that plays the server will judge a client with the same rules.
//
// Frames of the other side are context, never judged: its requests, publishes, subscribes and credit say what
// the judged side owes. When that context cannot be followed (raw bytes that are no frames, a header that is
// no map), the rules that need it stop for the rest of the connection: the monitor flags only what is certain.
//
// No I/O and no clock of its own: the caller says when each thing happened. One connection, one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/model/clock.h"
#include "harness/model/run_result.h"
#include "protocol/frame.h"
#include "protocol/value.h"

namespace firemq::conform {

enum class Side { client, server };

// One rule: the requirement it checks (conformance/requirements.json) and the spec's sentence, verbatim.
struct MonitorRule {
  std::string_view id;
  std::string_view section;
  std::string_view quote;
  bool server_only;  // a duty of servers only ("applies_to": "server"); the others bind both sides
};
const std::vector<MonitorRule>& monitor_rules();
const MonitorRule* find_monitor_rule(std::string_view id);
// Whether `op` is a request: it carries a rid and gets one reply (the spec's "Design rules").
bool is_request(std::uint8_t op);

// How late the judged side's heartbeat ping may be: beyond h / 2 of its silence, for timer granularity and a
// loaded CI machine (the same slack as the heartbeat_ping check).
inline constexpr std::chrono::milliseconds kHeartbeatTolerance{1000};
// How long after a fatal error, or after its reply to a close, the judged side may keep the socket open.
inline constexpr std::chrono::milliseconds kCloseTolerance{3000};

class WireMonitor {
 public:
  WireMonitor(Side judged, std::string connection, Clock::time_point origin);

  // A frame `from` one side, complete, at `at`.
  void observe(Side from, const RawFrame& frame, Clock::time_point at);
  // Bytes from `from` that are no frame: `what` says why. Over WebSocket the message is the frame.
  void observe_unframeable(Side from, const std::string& what, bool websocket, Clock::time_point at);
  // Bytes from `from` the monitor cannot follow (raw bytes, WebSocket control frames sent by hand).
  void observe_untracked(Side from);
  // Proven: nothing came from `from` after its last frame, until `at` (a receive that waited and timed out).
  void observe_quiet(Side from, Clock::time_point at);
  // The stream from `from` ended (its socket closed, or the harness closed its own).
  void observe_end(Side from, Clock::time_point at);

  const std::vector<MonitorViolation>& violations() const { return violations_; }

 private:
  struct Subscription {
    std::uint64_t credit = 0;  // granted so far: at subscribe, then by credit frames
    std::uint64_t delivered = 0;
    const char* ended_by = nullptr;  // the rule that forbids more deliveries, once unsubscribed or cancelled
  };

  bool judged(Side from) const { return from == judged_; }
  bool applies(std::string_view rule) const;
  void violation(std::string_view rule, const std::string& message, Clock::time_point at,
                 const std::string& quote = {});
  void remember(Side from, const RawFrame& frame, Clock::time_point at);

  // Rules on every frame of the judged side, whatever its op.
  bool check_layout(const RawFrame& frame, const Value* header, Clock::time_point at);
  void check_timing(Side from, Clock::time_point at);
  void check_after_last_frame(const RawFrame& frame, Clock::time_point at);
  // What the other side's frames ask of the judged side.
  void note_request(std::uint8_t op, const Map& header);
  // The judged side's frames, by what they answer.
  void check_reply(std::uint8_t op, const Map& header, Clock::time_point at);
  void check_welcome(Clock::time_point at);
  void check_confirm(const Map& header, Clock::time_point at);
  void check_return(const Map& header, Clock::time_point at);
  void check_delivery(std::uint8_t op, const Map& header, Clock::time_point at);
  void note_state(Side from, std::uint8_t op, const Map& header);

  Side judged_;
  std::string connection_;
  Clock::time_point origin_;
  std::vector<MonitorViolation> violations_;
  std::deque<TranscriptLine> recent_;  // the last frames both ways, for a violation's context
  std::size_t context_to_follow_ = 0;  // frames still to add to the last violation's context

  // The handshake and the frame limit (the same for both sides).
  bool welcomed_ = false;
  std::size_t max_frame_ = kMaxFrameBeforeWelcome;
  std::uint64_t heartbeat_s_ = 0;
  std::optional<Clock::time_point> last_from_judged_;
  bool heartbeat_flagged_ = false;

  // Context from the other side; `untracked_` once it cannot be followed.
  bool untracked_ = false;
  int hellos_ = 0;
  std::map<std::uint64_t, int> pending_rids_;                // requests awaiting their reply, by rid
  std::map<std::uint64_t, std::uint64_t> unsubscribe_rids_;  // rid -> sub
  std::map<std::uint64_t, int> outstanding_seqs_;            // publishes awaiting their confirm, by seq
  std::map<std::uint64_t, const char*> confirmed_by_;        // seq -> "upto" or "nack"
  std::map<std::uint64_t, Subscription> subs_;
  std::uint64_t last_tag_ = 0;

  // The end of the conversation.
  bool peer_closed_ = false;          // the other side sent close first
  bool judged_closed_first_ = false;  // the judged side sent close first: the other side's close is its reply
  std::optional<Clock::time_point> judged_last_frame_at_;  // its close reply, or its fatal error
  const char* last_frame_rule_ = nullptr;                  // the rule that made that frame its last
  bool ended_ = false;
};

}  // namespace firemq::conform
