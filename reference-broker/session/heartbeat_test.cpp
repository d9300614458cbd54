#include "reference-broker/session/heartbeat.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

using namespace std::chrono_literals;

TEST(NegotiateHeartbeat, TakesTheSmallerNonZeroValue) {
  EXPECT_EQ(negotiate_heartbeat(30, 60), 30u);
  EXPECT_EQ(negotiate_heartbeat(90, 60), 60u);
}

TEST(NegotiateHeartbeat, ClientZeroDisablesHeartbeats) { EXPECT_EQ(negotiate_heartbeat(0, 60), 0u); }

TEST(NegotiateHeartbeat, ServerZeroLetsTheClientsValueStand) { EXPECT_EQ(negotiate_heartbeat(10, 0), 10u); }

TEST(HeartbeatMonitor, PingIsDueAfterHalfTheIntervalWithNothingSent) {
  HeartbeatMonitor hb;
  const Clock::time_point t0{};
  hb.start(10s, t0);
  EXPECT_EQ(hb.due(t0 + 4999ms), HeartbeatMonitor::Due::nothing);
  EXPECT_EQ(hb.due(t0 + 5s), HeartbeatMonitor::Due::send_ping);
  hb.on_sent(t0 + 5s);
  EXPECT_EQ(hb.due(t0 + 9s), HeartbeatMonitor::Due::nothing);
}

TEST(HeartbeatMonitor, PeerIsDeadAfterTwiceTheIntervalWithNothingReceived) {
  HeartbeatMonitor hb;
  const Clock::time_point t0{};
  hb.start(10s, t0);
  hb.on_sent(t0 + 19s);
  EXPECT_NE(hb.due(t0 + 19999ms), HeartbeatMonitor::Due::peer_dead);
  EXPECT_EQ(hb.due(t0 + 20s), HeartbeatMonitor::Due::peer_dead);
  hb.on_received(t0 + 20s);
  EXPECT_NE(hb.due(t0 + 21s), HeartbeatMonitor::Due::peer_dead);
}

TEST(HeartbeatMonitor, NextDueIsThePingOrTheDeadPeerWhicheverComesFirst) {
  HeartbeatMonitor hb;
  const Clock::time_point t0{};
  hb.start(10s, t0);
  EXPECT_EQ(hb.next_due(), t0 + 5s);  // h / 2 of silence: exactly when the ping is due, not a tick later
  hb.on_sent(t0 + 3s);
  EXPECT_EQ(hb.next_due(), t0 + 8s);
  hb.on_sent(t0 + 18s);
  EXPECT_EQ(hb.next_due(), t0 + 20s);  // nothing received since t0: the peer is dead before the next ping
  EXPECT_EQ(hb.due(hb.next_due()), HeartbeatMonitor::Due::peer_dead);
}

TEST(HeartbeatMonitor, IntervalZeroNeverFires) {
  HeartbeatMonitor hb;
  hb.start(0s, Clock::time_point{});
  EXPECT_FALSE(hb.enabled());
  EXPECT_EQ(hb.due(Clock::time_point{} + 1000h), HeartbeatMonitor::Due::nothing);
}

}  // namespace
}  // namespace firemq
