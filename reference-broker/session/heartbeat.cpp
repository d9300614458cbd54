#include "reference-broker/session/heartbeat.h"

#include <algorithm>

namespace firemq {

std::uint64_t negotiate_heartbeat(std::uint64_t client_seconds, std::uint64_t server_seconds) {
  if (client_seconds == 0) return 0;  // the client's "0 disables heartbeats"
  if (server_seconds == 0) return client_seconds;
  return std::min(client_seconds, server_seconds);
}

void HeartbeatMonitor::start(std::chrono::seconds interval, Clock::time_point now) {
  interval_ = interval;
  last_sent_ = now;
  last_received_ = now;
}

HeartbeatMonitor::Due HeartbeatMonitor::due(Clock::time_point now) const {
  if (!enabled()) return Due::nothing;
  if (now - last_received_ >= 2 * interval_) return Due::peer_dead;
  if (now - last_sent_ >= interval_ / 2) return Due::send_ping;
  return Due::nothing;
}

Clock::time_point HeartbeatMonitor::next_due() const {
  return std::min(last_sent_ + interval_ / 2, last_received_ + 2 * interval_);
}

}  // namespace firemq
