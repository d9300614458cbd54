// The wire monitor's rules on hand-made frame sequences: each fires on its violation, and stays quiet on the
// conversation the spec allows around it.
#include "harness/rules/wire_monitor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/model/case_model.h"
#include "harness/rules/client_rules.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

namespace firemq::conform {
namespace {

using std::chrono::milliseconds;

RawFrame frame(OpCode op, Map header = {}, const std::string& payload = "") {
  Bytes encoded;
  encode_map(header, encoded);
  return RawFrame(frame_message(static_cast<std::uint8_t>(op), encoded, Bytes(payload.begin(), payload.end())));
}

RawFrame frame_with_header_bytes(OpCode op, const Bytes& header) {
  return RawFrame(frame_message(static_cast<std::uint8_t>(op), header, {}));
}

Value u(std::uint64_t v) { return Value(v); }

// A broker-mode monitor (judging the server) with helpers that feed it a conversation, 10 ms a frame.
class MonitorTest : public ::testing::Test {
 protected:
  void client(OpCode op, Map header = {}, const std::string& payload = "") {
    feed(Side::client, frame(op, std::move(header), payload));
  }
  void server(OpCode op, Map header = {}, const std::string& payload = "") {
    feed(Side::server, frame(op, std::move(header), payload));
  }
  void feed(Side from, const RawFrame& f) {
    now_ += milliseconds(10);
    monitor_.observe(from, f, now_);
  }
  void handshake(std::uint64_t heartbeat = 0) {
    client(OpCode::hello, {{Value("ver"), u(1)}});
    server(OpCode::welcome, {{Value("ver"), u(1)}, {Value("max_frame"), u(4096)}, {Value("heartbeat"), u(heartbeat)}});
  }
  void subscribe(std::uint64_t sub, std::uint64_t credit, std::uint64_t rid) {
    client(OpCode::subscribe, {{Value("rid"), u(rid)}, {Value("sub"), u(sub)}, {Value("credit"), u(credit)}});
    server(OpCode::ok, {{Value("rid"), u(rid)}});
  }
  void deliver(std::uint64_t sub, std::uint64_t tag) {
    server(OpCode::deliver, {{Value("sub"), u(sub)}, {Value("tag"), u(tag)}}, "body");
  }
  std::vector<std::string> rules() const {
    std::vector<std::string> out;
    for (const auto& v : monitor_.violations()) out.push_back(v.rule);
    return out;
  }

  Clock::time_point start_ = Clock::now();
  Clock::time_point now_ = start_;
  WireMonitor monitor_{Side::server, "main", start_};
};

using Rules = std::vector<std::string>;

TEST_F(MonitorTest, AConversationTheSpecAllowsHasNoViolations) {
  handshake();
  client(OpCode::declare_queue, {{Value("rid"), u(1)}, {Value("name"), Value("q")}});
  server(OpCode::ok, {{Value("rid"), u(1)}, {Value("name"), Value("q")}});
  subscribe(7, 2, 2);
  client(OpCode::publish, {{Value("seq"), u(1)}, {Value("mandatory"), Value(true)}}, "a");
  server(OpCode::return_, {{Value("seq"), u(1)}, {Value("code"), u(312)}}, "a");
  client(OpCode::publish, {{Value("seq"), u(2)}}, "b");
  client(OpCode::publish, {{Value("seq"), u(3)}}, "c");
  server(OpCode::confirm, {{Value("seq"), u(2)}, {Value("nack"), Value(true)}});
  server(OpCode::confirm, {{Value("upto"), u(3)}});
  deliver(7, 1);
  deliver(7, 2);
  client(OpCode::get, {{Value("rid"), u(3)}, {Value("queue"), Value("q")}});
  server(OpCode::get_ok, {{Value("rid"), u(3)}, {Value("tag"), u(3)}}, "c");
  client(OpCode::close, {{Value("code"), u(200)}});
  server(OpCode::close, {{Value("code"), u(200)}});
  monitor_.observe_end(Side::server, now_ + milliseconds(5));
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, ClientFramesAreContextNotJudgedInBrokerMode) {
  client(OpCode::ok, {{Value("rid"), u(1)}}, "a payload ok never carries");
  feed(Side::client, frame_with_header_bytes(OpCode::publish, Bytes{0x91, 0x01}));  // an array, not a map
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, HeaderThatIsNoMapOrHasANonStringKey) {
  handshake();
  feed(Side::server, frame_with_header_bytes(OpCode::pong, Bytes{0x91, 0x01}));
  server(OpCode::pong, {{u(1), Value("x")}});
  EXPECT_EQ(rules(), (Rules{"framing.header.msgpack-map", "framing.header.string-keys"}));
}

TEST_F(MonitorTest, PayloadOnlyOnBodyOps) {
  handshake();
  server(OpCode::deliver, {}, "fine");  // no subscription: also beyond credit
  server(OpCode::pong, {}, "not fine");
  EXPECT_EQ(rules().back(), "framing.payload.only-body-ops");
}

TEST_F(MonitorTest, OpsSentTheWrongWayQuoteTheirRowOfTheTable) {
  handshake();
  server(OpCode::ping);
  server(OpCode::publish, {}, "x");
  ASSERT_EQ(rules(), Rules{"ops.direction"});
  EXPECT_EQ(monitor_.violations()[0].spec.quote, "`0x20`\t`publish`\tclient → server");
}

TEST_F(MonitorTest, FrameLimitsBeforeAndAfterWelcome) {
  client(OpCode::hello);
  server(OpCode::welcome, {{Value("max_frame"), u(4096)}, {Value("x-pad"), Value(std::string(70000, 'p'))}});
  server(OpCode::get_ok, {{Value("rid"), u(0)}}, std::string(4000, 'b'));  // fits 4096
  server(OpCode::deliver, {}, std::string(5000, 'b'));
  const Rules r = rules();
  EXPECT_EQ(r.front(), "framing.limit.pre-welcome");
  EXPECT_NE(std::find(r.begin(), r.end(), "framing.limit.max-frame"), r.end());
}

TEST_F(MonitorTest, UnframeableBytesNameTheirFraming) {
  monitor_.observe_unframeable(Side::server, "len 3 is less than 5", false, now_);
  EXPECT_EQ(rules(), Rules{"framing.len.counts"});
  WireMonitor ws(Side::server, "main", start_);
  ws.observe_unframeable(Side::server, "a text message", true, now_);
  EXPECT_EQ(ws.violations().at(0).rule, "transport.websocket.one-message-per-frame");
}

TEST_F(MonitorTest, OneWelcomeInAnswerToHello) {
  server(OpCode::welcome);
  EXPECT_EQ(rules(), Rules{"lifecycle.welcome-or-error"});
  WireMonitor twice(Side::server, "main", start_);
  twice.observe(Side::client, frame(OpCode::hello), now_);
  twice.observe(Side::server, frame(OpCode::welcome), now_);
  EXPECT_TRUE(twice.violations().empty());
  twice.observe(Side::server, frame(OpCode::welcome), now_);
  EXPECT_EQ(twice.violations().at(0).message, "the server sent a second welcome on the connection");
}

TEST_F(MonitorTest, ExactlyOneReplyPerRequest) {
  handshake();
  client(OpCode::purge_queue, {{Value("rid"), u(4)}, {Value("name"), Value("q")}});
  server(OpCode::error, {{Value("code"), u(406)}});  // no rid: not tied to a request
  server(OpCode::ok, {{Value("rid"), u(4)}});
  EXPECT_EQ(rules(), Rules{});
  server(OpCode::ok, {{Value("rid"), u(4)}});
  EXPECT_EQ(rules(), Rules{"design.request.one-reply"});
}

TEST_F(MonitorTest, AnUnknownOpWithARidMayGetItsErrorWithThatRid) {
  handshake();
  feed(Side::client, RawFrame(frame_message(0x7f,
                                            [] {
                                              Bytes b;
                                              encode_map({{Value("rid"), u(9)}}, b);
                                              return b;
                                            }(),
                                            {})));
  server(OpCode::error, {{Value("rid"), u(9)}, {Value("code"), u(540)}});
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, NothingThatNeedsTheClientsContextIsJudgedOnceItIsLost) {
  handshake();
  monitor_.observe_untracked(Side::client);
  server(OpCode::ok, {{Value("rid"), u(12)}});
  deliver(3, 1);
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, ANackForASeqTheUptoCoveredIsLate) {
  handshake();
  client(OpCode::publish, {{Value("seq"), u(1)}});
  client(OpCode::publish, {{Value("seq"), u(2)}});
  server(OpCode::confirm, {{Value("upto"), u(2)}});
  server(OpCode::confirm, {{Value("seq"), u(2)}, {Value("nack"), Value(true)}});
  EXPECT_EQ(rules(), Rules{"confirm.nack.before-upto"});
}

TEST_F(MonitorTest, ASeqIsConfirmedOnce) {
  handshake();
  client(OpCode::publish, {{Value("seq"), u(1)}});
  server(OpCode::confirm, {{Value("seq"), u(1)}, {Value("nack"), Value(true)}});
  server(OpCode::confirm, {{Value("upto"), u(1)}});  // covers nothing outstanding: allowed
  EXPECT_EQ(rules(), Rules{});
  server(OpCode::confirm, {{Value("seq"), u(1)}, {Value("nack"), Value(true)}});
  EXPECT_EQ(rules(), Rules{"confirm.exactly-once"});
}

TEST_F(MonitorTest, AReturnAfterItsConfirmIsLate) {
  handshake();
  client(OpCode::publish, {{Value("seq"), u(1)}, {Value("mandatory"), Value(true)}});
  server(OpCode::confirm, {{Value("upto"), u(1)}});
  server(OpCode::return_, {{Value("seq"), u(1)}, {Value("code"), u(312)}}, "x");
  EXPECT_EQ(rules(), Rules{"return.before-confirm"});
}

TEST_F(MonitorTest, TagsStartAt1AndIncrease) {
  handshake();
  subscribe(1, 10, 1);
  deliver(1, 2);
  EXPECT_EQ(rules(), Rules{"deliver.tag.starts-at-1"});
  deliver(1, 3);
  deliver(1, 3);
  EXPECT_EQ(rules(), (Rules{"deliver.tag.starts-at-1", "deliver.tag.unique-increasing"}));
}

TEST_F(MonitorTest, DeliveriesWithinTheCreditGrantedSoFar) {
  handshake();
  subscribe(1, 1, 1);
  deliver(1, 1);
  client(OpCode::credit, {{Value("sub"), u(1)}, {Value("credit"), u(1)}});
  deliver(1, 2);
  EXPECT_EQ(rules(), Rules{});
  deliver(1, 3);
  EXPECT_EQ(rules(), Rules{"credit.limit"});
}

TEST_F(MonitorTest, NoDeliveriesAfterTheUnsubscribesOk) {
  handshake();
  subscribe(1, 5, 1);
  client(OpCode::unsubscribe, {{Value("rid"), u(2)}, {Value("sub"), u(1)}});
  deliver(1, 1);  // before the ok: allowed
  server(OpCode::ok, {{Value("rid"), u(2)}});
  EXPECT_EQ(rules(), Rules{});
  deliver(1, 2);
  EXPECT_EQ(rules(), Rules{"unsubscribe.no-more-deliveries"});
}

TEST_F(MonitorTest, NoDeliveriesAfterCancelledUntilSubscribedAgain) {
  handshake();
  subscribe(1, 5, 1);
  server(OpCode::cancelled, {{Value("sub"), u(1)}, {Value("code"), u(404)}});
  subscribe(1, 5, 2);
  deliver(1, 1);
  EXPECT_EQ(rules(), Rules{});
  server(OpCode::cancelled, {{Value("sub"), u(1)}, {Value("code"), u(404)}});
  deliver(1, 2);
  EXPECT_EQ(rules(), Rules{"cancelled.server-ended"});
}

TEST_F(MonitorTest, HeartbeatSilenceIsJudgedOnlyWhenProven) {
  handshake(2);  // a ping is due after 1 s of silence, + the tolerance
  monitor_.observe_quiet(Side::server, now_ + milliseconds(1000) + kHeartbeatTolerance);
  EXPECT_EQ(rules(), Rules{});
  server(OpCode::ping);
  monitor_.observe_quiet(Side::server, now_ + milliseconds(1001) + kHeartbeatTolerance);
  EXPECT_EQ(rules(), Rules{"heartbeat.send-ping"});
}

TEST_F(MonitorTest, NoHeartbeatRuleWithoutHeartbeats) {
  handshake(0);
  monitor_.observe_quiet(Side::server, now_ + std::chrono::seconds(60));
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, CloseIsAnsweredWithClose) {
  handshake();
  client(OpCode::close, {{Value("code"), u(200)}});
  monitor_.observe_end(Side::server, now_);
  EXPECT_EQ(rules(), Rules{"close.reply-close"});
}

TEST_F(MonitorTest, TheClientsReplyToTheServersCloseAsksForNoCloseBack) {
  handshake();
  server(OpCode::close, {{Value("code"), u(320)}});  // an operator closed the connection
  client(OpCode::close, {{Value("code"), u(200)}});  // the client's reply
  monitor_.observe_end(Side::server, now_);
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, TheCloseReplyIsTheLastFrame) {
  handshake();
  client(OpCode::close, {{Value("code"), u(200)}});
  server(OpCode::close, {{Value("code"), u(200)}});
  server(OpCode::ping);
  EXPECT_EQ(rules(), Rules{"close.close-socket"});
}

TEST_F(MonitorTest, AClosingHarnessIsNotAnsweredAfterItLeft) {
  handshake();
  client(OpCode::close, {{Value("code"), u(200)}});
  monitor_.observe_end(Side::client, now_);
  monitor_.observe_end(Side::server, now_);
  EXPECT_EQ(rules(), Rules{});
}

TEST_F(MonitorTest, AFatalErrorIsTheLastFrameAndTheSocketCloses) {
  handshake();
  server(OpCode::error, {{Value("code"), u(502)}, {Value("fatal"), Value(true)}});
  server(OpCode::close, {{Value("code"), u(502)}});                                 // a close may still come
  monitor_.observe_quiet(Side::server, now_ + kCloseTolerance - milliseconds(10));  // 3 s after the error
  EXPECT_EQ(rules(), Rules{});
  server(OpCode::pong);
  EXPECT_EQ(rules(), Rules{"error.fatal.closes-connection"});
}

TEST_F(MonitorTest, AFatalErrorsSocketMustCloseWithinTheTolerance) {
  handshake();
  server(OpCode::error, {{Value("code"), u(502)}, {Value("fatal"), Value(true)}});
  monitor_.observe_quiet(Side::server, now_ + kCloseTolerance + milliseconds(1));
  EXPECT_EQ(rules(), Rules{"error.fatal.closes-connection"});
}

TEST_F(MonitorTest, AViolationShowsTheFramesAroundIt) {
  handshake();
  server(OpCode::ok, {{Value("rid"), u(5)}});
  server(OpCode::pong);
  server(OpCode::pong);
  server(OpCode::pong);
  const auto& v = monitor_.violations().at(0);
  ASSERT_EQ(v.context.size(), 5u);  // hello, welcome, the ok, then two frames after it
  EXPECT_EQ(v.context[2].op, "ok");
  EXPECT_EQ(v.context[0].header_json.find("pass"), std::string::npos);
}

// Judging a client: the same rules, the server's duties left out.
TEST(MonitorJudgingAClient, TheSameRulesBindTheClientWhereTheSpecSaysBoth) {
  const auto start = Clock::now();
  WireMonitor monitor(Side::client, "client", start);
  monitor.observe(Side::client, frame(OpCode::ok, {{Value("rid"), Value(std::uint64_t{1})}}), start);
  monitor.observe(Side::server, frame(OpCode::close, {{Value("code"), Value(std::uint64_t{320})}}), start);
  monitor.observe_end(Side::client, start);
  std::vector<std::string> rules;
  for (const auto& v : monitor.violations()) rules.push_back(v.rule);
  EXPECT_EQ(rules, (std::vector<std::string>{"ops.direction", "close.reply-close"}));
}

// Every rule (the monitor's, and client mode's client-only ones) is a requirement of the catalog, and its quote
// is the spec's text, word for word.
TEST(MonitorRules, AreCatalogRequirementsQuotingTheSpec) {
  const std::filesystem::path conformance = FIREMQ_CONFORMANCE_DIR;
  auto catalog = load_requirements(conformance / "requirements.json");
  ASSERT_TRUE(catalog) << catalog.error();
  std::ifstream in(conformance.parent_path() / "spec" / "firemq-protocol-v1.txt");
  std::stringstream spec;
  spec << in.rdbuf();
  ASSERT_FALSE(spec.str().empty());
  const auto squeeze = [](const std::string& s) { return std::regex_replace(s, std::regex("\\s+"), " "); };
  const std::string text = squeeze(spec.str());
  std::vector<MonitorRule> rules = monitor_rules();
  rules.insert(rules.end(), client_rules().begin(), client_rules().end());
  for (const MonitorRule& rule : rules) {
    const bool listed = std::any_of(catalog->begin(), catalog->end(),
                                    [&](const Requirement& r) { return r.id == rule.id; });
    EXPECT_TRUE(listed) << rule.id << " is not in requirements.json";
    EXPECT_NE(text.find(squeeze(std::string(rule.quote))), std::string::npos) << rule.id << ": " << rule.quote;
  }
}

}  // namespace
}  // namespace firemq::conform
