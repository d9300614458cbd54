// The client-only rules (client_rules.h) on hand-made conversations: each fires on its violation and stays
// quiet on what the spec allows; and the driver replies' matcher of client mode.
#include "harness/rules/client_rules.h"

#include <gtest/gtest.h>

#include "harness/client_mode/client_mode.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

namespace firemq::conform {
namespace {

using std::chrono::milliseconds;

RawFrame frame(OpCode op, Map header = {}) {
  Bytes encoded;
  encode_map(header, encoded);
  return RawFrame(frame_message(static_cast<std::uint8_t>(op), encoded, {}));
}

Map with(const char* key, std::uint64_t value) { return {{Value(key), Value(value)}}; }

// Every conversation starts with a good hello: the rules below are about what comes after it.
class ClientRulesTest : public ::testing::Test {
 protected:
  void SetUp() override { client(OpCode::hello, with("ver", 1)); }
  void client(OpCode op, Map header = {}) { feed(Side::client, frame(op, std::move(header))); }
  void server(OpCode op, Map header = {}) { feed(Side::server, frame(op, std::move(header))); }
  void feed(Side from, const RawFrame& f) {
    now_ += milliseconds(10);
    rules_.observe(from, f, now_);
  }
  std::vector<std::string> broken() const {
    std::vector<std::string> ids;
    for (const MonitorViolation& v : rules_.violations()) ids.push_back(v.rule);
    return ids;
  }
  Clock::time_point now_{};
  ClientRules rules_{"client-1", Clock::time_point{}};
};

TEST(ClientRulesHello, FrameBeforeHelloAndHelloOtherThanVersion1AreFlagged) {
  ClientRules rules("c", Clock::time_point{});
  rules.observe(Side::client, frame(OpCode::ping), Clock::time_point{});
  rules.observe(Side::client, frame(OpCode::hello, {{Value("ver"), Value(2)}, {Value("caps"), Value("confirms")}}),
                Clock::time_point{});
  std::vector<std::string> ids;
  for (const MonitorViolation& v : rules.violations()) ids.push_back(v.rule);
  EXPECT_EQ(ids, (std::vector<std::string>{"lifecycle.hello-first", "hello.ver.must-be-1", "hello.caps"}));
}

TEST_F(ClientRulesTest, FieldOfTheWrongTypeInAnOpWithAFieldsSentenceIsFlagged) {
  client(OpCode::ack, with("tag", 1));
  EXPECT_EQ(broken(), std::vector<std::string>{});
  client(OpCode::close, {{Value("code"), Value("200")}});
  EXPECT_EQ(broken(), std::vector<std::string>{"close.fields"});
}

TEST_F(ClientRulesTest, FrameAsTheApplicationAskedIsQuietAndOtherwiseFlagged) {
  const Map props = {{Value("content_type"), Value("text/plain")}};
  const Map headers = {{Value("a"), Value(std::uint64_t{1})}, {Value("b"), Value("x")}};
  rules_.application_sends({static_cast<std::uint8_t>(OpCode::publish),
                            {{"seq", Value(std::uint64_t{0}), "publish.seq.zero-no-confirm"},
                             {"props", Value(props), "publish.props"},
                             {"headers", Value(headers), "publish.headers.any-type"}}});
  // Headers in another order, with one the SDK added, and the props: as asked.
  Map sent_headers = {{Value("b"), Value("x")}, {Value("sdk"), Value(true)}, {Value("a"), Value(std::uint64_t{1})}};
  client(OpCode::publish, {{Value("props"), Value(props)}, {Value("headers"), Value(sent_headers)}});
  EXPECT_EQ(broken(), std::vector<std::string>{});
  rules_.application_sends({static_cast<std::uint8_t>(OpCode::ack), {{"multiple", Value(true), "ack.fields"}}});
  client(OpCode::ack, with("tag", 2));  // multiple left out: false
  EXPECT_EQ(broken(), std::vector<std::string>{"ack.fields"});
}

AskedFrame ack_asked(std::uint64_t tag) {
  return {static_cast<std::uint8_t>(OpCode::ack),
          {{"tag", Value(tag), "ack.fields"}, {"multiple", Value(false), "ack.fields"}}};
}

TEST_F(ClientRulesTest, AcksMergedIntoOneMultipleAreBlamedForMultipleNotForTheirTags) {
  for (std::uint64_t tag : {1, 2, 3}) rules_.application_sends(ack_asked(tag));
  client(OpCode::ack, {{Value("tag"), Value(std::uint64_t{3})}, {Value("multiple"), Value(true)}});
  ASSERT_EQ(rules_.violations().size(), 1u);
  EXPECT_NE(rules_.violations()[0].message.find("multiple true where the application gave false"), std::string::npos)
      << rules_.violations()[0].message;
  rules_.application_closes();
  client(OpCode::close, with("code", 200));  // tags 1 and 2 were settled by the multiple ack: not owed
  EXPECT_EQ(broken(), std::vector<std::string>{"ack.fields"});
}

TEST_F(ClientRulesTest, AckTheApplicationAskedForAndTheClientNeverSentIsFlaggedAtTheNormalClose) {
  rules_.application_sends(ack_asked(1));
  rules_.application_sends(ack_asked(2));
  client(OpCode::ack, with("tag", 2));  // paired with the ask of its own tag, not the first
  EXPECT_EQ(broken(), std::vector<std::string>{});
  rules_.application_closes();
  client(OpCode::close, with("code", 200));
  ASSERT_EQ(broken(), std::vector<std::string>{"ack.fields"});
  EXPECT_NE(rules_.violations()[0].message.find("never sent the ack"), std::string::npos)
      << rules_.violations()[0].message;
}

TEST_F(ClientRulesTest, AskedFrameIsOwedNothingOnceTheServerClosed) {
  rules_.application_sends(ack_asked(1));
  server(OpCode::close, with("code", 320));
  rules_.application_closes();
  client(OpCode::close, with("code", 200));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, FrameOfACommandThatFailedIsOwedNoMore) {
  AskedFrame asked{
      static_cast<std::uint8_t>(OpCode::publish), {{"seq", Value(std::uint64_t{0}), "publish.seq.zero-no-confirm"}}, 7};
  rules_.application_sends(asked);
  rules_.application_withdraws(7);
  client(OpCode::publish, with("seq", 1));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, PreambleOtherThanFmq1IsFlagged) {
  const std::string bad = "FMQ2";
  rules_.observe_preamble(Bytes(bad.begin(), bad.end()), now_);
  EXPECT_EQ(broken(), std::vector<std::string>{"transport.tcp.preamble"});
}

TEST_F(ClientRulesTest, Fmq1PreambleIsQuiet) {
  const std::string good = "FMQ1";
  rules_.observe_preamble(Bytes(good.begin(), good.end()), now_);
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, Fmq1OnWebSocketIsFlaggedAloneOrBeforeTheFirstFrame) {
  const std::string alone = "FMQ1";
  rules_.observe_first_message(Bytes(alone.begin(), alone.end()), now_);
  EXPECT_EQ(broken(), std::vector<std::string>{"transport.websocket.no-preamble"});
  ClientRules glued("c", now_);
  const Bytes hello = frame_message(static_cast<std::uint8_t>(OpCode::hello), {}, {});
  Bytes message = {'F', 'M', 'Q', '1'};
  message.insert(message.end(), hello.begin(), hello.end());
  glued.observe_first_message(message, now_);
  EXPECT_EQ(glued.violations().size(), 1u);
}

TEST_F(ClientRulesTest, WebSocketFirstFrameWithoutFmq1IsQuiet) {
  rules_.observe_first_message(frame_message(static_cast<std::uint8_t>(OpCode::hello), {}, {}), now_);
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, SequenceNumbersFromOneByOneAreQuietAndSeqZeroDoesNotCount) {
  client(OpCode::publish, with("seq", 0));
  client(OpCode::publish, with("seq", 1));
  client(OpCode::publish, {});
  client(OpCode::publish, with("seq", 2));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, FirstSequenceNumberOtherThanOneIsFlagged) {
  client(OpCode::publish, with("seq", 2));
  EXPECT_EQ(broken(), std::vector<std::string>{"publish.seq.numbering"});
}

TEST_F(ClientRulesTest, SkippedSequenceNumberIsFlagged) {
  client(OpCode::publish, with("seq", 1));
  client(OpCode::publish, with("seq", 3));
  EXPECT_EQ(broken(), std::vector<std::string>{"publish.seq.numbering"});
}

TEST_F(ClientRulesTest, RequestWithoutRidIsFlagged) {
  client(OpCode::declare_queue, {});
  EXPECT_EQ(broken(), std::vector<std::string>{"design.request.rid"});
}

TEST_F(ClientRulesTest, RequestWithRidZeroIsFlaggedAsHavingNone) {
  client(OpCode::declare_queue, with("rid", 0));
  EXPECT_EQ(broken(), std::vector<std::string>{"design.request.rid"});
}

Map both(const char* a, std::uint64_t x, const char* b, std::uint64_t y) {
  return {{Value(a), Value(x)}, {Value(b), Value(y)}};
}

TEST_F(ClientRulesTest, ApplicationCloseWithCode200IsQuietAndAnyOtherCodeIsFlagged) {
  rules_.application_closes();
  client(OpCode::close, with("code", 200));
  rules_.finish(now_);
  EXPECT_EQ(broken(), std::vector<std::string>{});
  ClientRules other("c", now_);
  other.observe(Side::client, frame(OpCode::hello, with("ver", 1)), now_);
  other.application_closes();
  other.observe(Side::client, frame(OpCode::close, with("code", 320)), now_);
  ASSERT_EQ(other.violations().size(), 1u);
  EXPECT_EQ(other.violations()[0].rule, "close.code-200-normal");
}

TEST_F(ClientRulesTest, ApplicationCloseWithoutACloseFrameIsFlaggedAtTheEnd) {
  rules_.application_closes();
  rules_.observe_client_end(now_);
  rules_.finish(now_);
  EXPECT_EQ(broken(), std::vector<std::string>{"lifecycle.close-handshake"});
}

TEST_F(ClientRulesTest, ReplyToTheServersCloseNeedNotSay200EvenIfTheApplicationAsked) {
  server(OpCode::close, with("code", 320));
  rules_.application_closes();
  client(OpCode::close, with("code", 320));
  rules_.finish(now_);
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, SubInUseIsFlaggedAndFreedByAnErrorOrAnUnsubscribe) {
  client(OpCode::subscribe, both("rid", 1, "sub", 7));
  server(OpCode::error, with("rid", 1));  // refused: 7 is free again
  client(OpCode::subscribe, both("rid", 2, "sub", 7));
  server(OpCode::ok, with("rid", 2));
  client(OpCode::unsubscribe, both("rid", 3, "sub", 7));
  server(OpCode::ok, with("rid", 3));
  client(OpCode::subscribe, both("rid", 4, "sub", 7));
  client(OpCode::subscribe, both("rid", 5, "sub", 8));
  EXPECT_EQ(broken(), std::vector<std::string>{});
  client(OpCode::subscribe, both("rid", 6, "sub", 8));
  EXPECT_EQ(broken(), std::vector<std::string>{"subscribe.sub.unique"});
}

TEST_F(ClientRulesTest, SubEndedByTheServersCancelledIsFree) {
  client(OpCode::subscribe, both("rid", 1, "sub", 3));
  server(OpCode::ok, with("rid", 1));
  server(OpCode::cancelled, with("sub", 3));
  client(OpCode::subscribe, both("rid", 2, "sub", 3));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, RidOfARequestAwaitingItsReplyIsFlaggedButReuseAfterTheReplyIsQuiet) {
  client(OpCode::declare_queue, with("rid", 1));
  server(OpCode::ok, with("rid", 1));
  client(OpCode::bind, with("rid", 1));
  EXPECT_EQ(broken(), std::vector<std::string>{});
  client(OpCode::get, with("rid", 1));
  EXPECT_EQ(broken(), std::vector<std::string>{"design.request.rid"});
}

TEST_F(ClientRulesTest, PingAnsweredWithPongIsQuiet) {
  server(OpCode::ping);
  client(OpCode::pong);
  rules_.finish(now_ + milliseconds(5000));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(ClientRulesTest, PingNeverAnsweredIsFlaggedAtTheEnd) {
  server(OpCode::ping);
  rules_.finish(now_);
  EXPECT_EQ(broken(), std::vector<std::string>{"heartbeat.pong"});
}

TEST_F(ClientRulesTest, PingLeftUnansweredWhileTheClientGoesOnSendingIsFlagged) {
  server(OpCode::ping);
  now_ += kPongTolerance;
  client(OpCode::publish, {});
  EXPECT_EQ(broken(), std::vector<std::string>{"heartbeat.pong"});
}

TEST_F(ClientRulesTest, PingAfterTheCloseIsOwedNothing) {
  server(OpCode::close, with("code", 320));
  server(OpCode::ping);
  rules_.finish(now_);
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

// The wire monitor judging a client (Side::client): a close that answers the judged side's own close asks
// for no other close (wire_monitor_test.cpp has the server's close left unanswered).
TEST(WireMonitorJudgingAClient, ServerCloseAnsweringTheClientsCloseIsOwedNothing) {
  WireMonitor monitor(Side::client, "client-1", Clock::time_point{});
  monitor.observe(Side::client, frame(OpCode::close, with("code", 200)), Clock::time_point{} + milliseconds(10));
  monitor.observe(Side::server, frame(OpCode::close, with("code", 200)), Clock::time_point{} + milliseconds(20));
  monitor.observe_end(Side::client, Clock::time_point{} + milliseconds(30));
  EXPECT_TRUE(monitor.violations().empty());
}

TEST(SubsetMismatch, ExtraKeysAndAnyAreAcceptedMissingOrDifferentValuesAreNot) {
  const auto actual = nlohmann::json::parse(R"({"ok": true, "name": "q", "messages": 2, "props": {"a": 1, "b": 2}})");
  EXPECT_EQ(subset_mismatch(nlohmann::json::parse(R"({"ok": true, "props": {"a": 1}, "name": "$any"})"), actual), "");
  EXPECT_NE(subset_mismatch(nlohmann::json::parse(R"({"messages": 3})"), actual), "");
  EXPECT_NE(subset_mismatch(nlohmann::json::parse(R"({"consumers": 0})"), actual), "");
  EXPECT_NE(subset_mismatch(nlohmann::json::parse(R"({"props": {"a": "1"}})"), actual), "");
}

TEST_F(ClientRulesTest, PublishWhilePausedByFlowIsFlaggedAndAfterResumeIsQuiet) {
  client(OpCode::publish, with("seq", 1));
  server(OpCode::flow, {{Value("pause"), Value(true)}});
  client(OpCode::publish, with("seq", 2));
  EXPECT_EQ(broken(), std::vector<std::string>{"flow.client-stops-publishing"});
  server(OpCode::flow, {{Value("pause"), Value(false)}});
  client(OpCode::publish, with("seq", 3));
  EXPECT_EQ(broken().size(), 1u);
}

TEST_F(ClientRulesTest, OtherFramesWhilePausedAreQuiet) {
  server(OpCode::flow, {{Value("pause"), Value(true)}});
  client(OpCode::ping);
  client(OpCode::ack, with("tag", 1));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

// The dead peer: with heartbeat 1 s and a server silent since its welcome, the client ends the connection
// between 2 s less kDeadPeerEarly and 2 s plus kDeadPeerLate.
class DeadPeerTest : public ClientRulesTest {
 protected:
  void SetUp() override {
    ClientRulesTest::SetUp();
    server(OpCode::welcome, with("heartbeat", 1));
    silent_since_ = now_;
    rules_.server_silent(silent_since_);
  }
  Clock::time_point silent_since_;
};

TEST_F(DeadPeerTest, EndAfterTwiceTheIntervalIsQuiet) {
  client(OpCode::ping);
  rules_.observe_client_end(silent_since_ + milliseconds(2050));
  rules_.finish(silent_since_ + milliseconds(9000));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

TEST_F(DeadPeerTest, EndBeforeTwiceTheIntervalIsFlagged) {
  rules_.observe_client_end(silent_since_ + milliseconds(1500));
  EXPECT_EQ(broken(), std::vector<std::string>{"heartbeat.dead-peer"});
}

TEST_F(DeadPeerTest, EndLongAfterTwiceTheIntervalIsFlagged) {
  rules_.observe_client_end(silent_since_ + milliseconds(2000) + kDeadPeerLate + milliseconds(100));
  EXPECT_EQ(broken(), std::vector<std::string>{"heartbeat.dead-peer"});
}

TEST_F(DeadPeerTest, StillConnectedWhenTheCaseEndsLateIsFlaggedButNotEarly) {
  rules_.finish(silent_since_ + milliseconds(1000));
  EXPECT_EQ(broken(), std::vector<std::string>{});
  rules_.finish(silent_since_ + milliseconds(2000) + kDeadPeerLate + milliseconds(100));
  EXPECT_EQ(broken(), std::vector<std::string>{"heartbeat.dead-peer"});
}

TEST_F(ClientRulesTest, SilentServerWithoutHeartbeatIsOwedNothing) {
  server(OpCode::welcome, with("heartbeat", 0));
  rules_.server_silent(now_);
  rules_.observe_client_end(now_ + milliseconds(100));
  rules_.finish(now_ + milliseconds(60000));
  EXPECT_EQ(broken(), std::vector<std::string>{});
}

}  // namespace
}  // namespace firemq::conform
