// The heartbeat rules of the spec's "Heartbeats" section, with time passed in (no clock, no timer), so that
// tests drive it: "each side sends ping when it has sent nothing for h / 2 seconds. Each side considers the
// peer dead when it has received nothing for 2 x h seconds."
#pragma once

#include <chrono>
#include <cstdint>

namespace firemq {

using Clock = std::chrono::steady_clock;

// welcome.heartbeat: "the smaller non-zero value of the client's and the server's", where a client's 0
// "disables heartbeats" (docs/spec-notes.md, "Heartbeat 0 from the client").
std::uint64_t negotiate_heartbeat(std::uint64_t client_seconds, std::uint64_t server_seconds);

class HeartbeatMonitor {
 public:
  enum class Due { nothing, send_ping, peer_dead };

  // Starts the clocks at `now`; interval 0 means no heartbeats.
  void start(std::chrono::seconds interval, Clock::time_point now);
  void on_sent(Clock::time_point now) { last_sent_ = now; }
  void on_received(Clock::time_point now) { last_received_ = now; }

  // What is due at `now`. The caller sends the ping (which counts as sent) or closes the connection.
  Due due(Clock::time_point now) const;
  // When due() next has something to say: h / 2 after the last frame sent (a ping) or 2 h after the last one
  // received (a dead peer), whichever comes first. A frame in between only moves it later, so a timer set for
  // it never fires late: a ping leaves at h / 2 of silence, not a timer tick after it ("Heartbeats").
  Clock::time_point next_due() const;
  bool enabled() const { return interval_.count() > 0; }

 private:
  std::chrono::milliseconds interval_{0};
  Clock::time_point last_sent_{};
  Clock::time_point last_received_{};
};

}  // namespace firemq
