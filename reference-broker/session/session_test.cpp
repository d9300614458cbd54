// The session's rules with no socket: decoded messages (or raw frames, for the decoding rules) in, frames out.
#include "reference-broker/session/session.h"

#include <gtest/gtest.h>

#include <vector>

namespace firemq {
namespace {

struct RecordingOutbox : Outbox {
  std::vector<Message> sent;
  bool closing = false;
  void send(const Message& m, ByteView) override { sent.push_back(m); }
  void close_after_flush() override { closing = true; }
};

op::Hello good_hello() {
  op::Hello h;
  h.ver = 1;
  h.auth = {"plain", "guest", "guest"};
  h.heartbeat = 30;
  return h;
}

Definitions test_definitions() {
  return *Definitions::parse(R"({
      "users": [{"name": "guest", "password": "guest"}, {"name": "nobody", "password": "pw"}],
      "vhosts": [{"name": "/"}, {"name": "other"}],
      "permissions": [{"user": "guest", "vhost": "/"}]})");
}

class SessionTest : public ::testing::Test {
 protected:
  void receive(Message m, ByteView payload = {}) { session_.on_message(std::move(m), payload); }
  const op::Error& last_error() { return std::get<op::Error>(out_.sent.back()); }
  // After hello: queue "q", and a publish with seq 1 to it whose confirm is held for the batch (not flushed).
  op::Publish open_and_publish_seq_1() {
    receive(good_hello());
    op::DeclareQueue declare;
    declare.rid = 1;
    declare.name = "q";
    receive(declare);
    op::Publish p;
    p.seq = 1;
    p.key = "q";
    receive(p);
    return p;
  }

  BrokerConfig config_;
  Definitions definitions_ = test_definitions();
  ManualTime time_;
  Core core_{definitions_, time_};
  RecordingOutbox out_;
  Session session_{SessionEnv{config_, definitions_, core_}, out_, "test-conn"};
};

TEST_F(SessionTest, HelloGetsWelcomeWithTheNegotiatedValues) {
  receive(good_hello());
  ASSERT_EQ(out_.sent.size(), 1u);
  const auto& welcome = std::get<op::Welcome>(out_.sent[0]);
  EXPECT_EQ(welcome.ver, 1u);
  EXPECT_EQ(welcome.server.name, "firemq");
  EXPECT_EQ(welcome.conn_id, "test-conn");
  EXPECT_EQ(welcome.heartbeat, 30u);
  EXPECT_EQ(welcome.max_frame, kDefaultMaxFrame);
  EXPECT_EQ(welcome.caps, (StrList{"confirms", "credit", "mandatory", "exchange-bindings", "dead-letter", "ttl"}));
  EXPECT_EQ(session_.state(), Session::State::open);
  EXPECT_EQ(session_.vhost(), "/");
  EXPECT_EQ(session_.max_frame(), kDefaultMaxFrame);
}

TEST_F(SessionTest, LimitBeforeWelcomeIs64KiB) { EXPECT_EQ(session_.max_frame(), kMaxFrameBeforeWelcome); }

TEST_F(SessionTest, BadPasswordIsFatal403) {
  op::Hello h = good_hello();
  h.auth.pass = "wrong";
  receive(h);
  EXPECT_EQ(last_error().code, 403u);
  EXPECT_TRUE(last_error().fatal);
  EXPECT_TRUE(out_.closing);
  EXPECT_EQ(session_.state(), Session::State::closing);
}

TEST_F(SessionTest, UnknownVhostIsFatal403) {
  op::Hello h = good_hello();
  h.vhost = "missing";
  receive(h);
  EXPECT_EQ(last_error().code, 403u);
  EXPECT_NE(last_error().msg.find("'missing' does not exist"), std::string::npos);
}

TEST_F(SessionTest, UserWithoutPermissionOnTheVhostIsFatal403) {
  op::Hello h = good_hello();
  h.vhost = "other";
  receive(h);
  EXPECT_EQ(last_error().code, 403u);
  EXPECT_TRUE(out_.closing);
}

TEST_F(SessionTest, UnsupportedMechanismIsFatal403) {
  op::Hello h = good_hello();
  h.auth.mech = "scram";
  receive(h);
  EXPECT_EQ(last_error().code, 403u);
}

TEST_F(SessionTest, VersionOtherThanOneIsRefusedAndFatal) {
  op::Hello h = good_hello();
  h.ver = 2;
  receive(h);
  EXPECT_EQ(last_error().code, 540u);
  EXPECT_TRUE(last_error().fatal);
  EXPECT_TRUE(out_.closing);
}

TEST_F(SessionTest, RequestBeforeHelloIsFatal503) {
  receive(op::DeclareQueue{5, "q", false, false, false, false, {}});
  EXPECT_EQ(last_error().code, 503u);
  EXPECT_EQ(last_error().rid, 5u);
  EXPECT_TRUE(last_error().fatal);
}

TEST_F(SessionTest, SecondHelloIsFatal503) {
  receive(good_hello());
  receive(good_hello());
  EXPECT_EQ(last_error().code, 503u);
  EXPECT_TRUE(out_.closing);
}

TEST_F(SessionTest, PingGetsPong) {
  receive(good_hello());
  receive(op::Ping{});
  EXPECT_TRUE(std::holds_alternative<op::Pong>(out_.sent.back()));
}

TEST_F(SessionTest, CloseGetsCloseAndTheSocketClosesAfterIt) {
  receive(good_hello());
  receive(op::Close{200, "bye"});
  EXPECT_EQ(std::get<op::Close>(out_.sent.back()).code, 200u);
  EXPECT_TRUE(out_.closing);
  receive(op::Ping{});  // nothing more is answered
  EXPECT_TRUE(std::holds_alternative<op::Close>(out_.sent.back()));
}

TEST_F(SessionTest, UnknownOpIs540AndTheConnectionStaysOpen) {
  receive(good_hello());
  session_.on_frame(RawFrame(Bytes{0x7f, 0, 0, 0, 0}));
  EXPECT_EQ(last_error().code, 540u);
  EXPECT_FALSE(last_error().fatal);
  EXPECT_FALSE(out_.closing);
  receive(op::Ping{});
  EXPECT_TRUE(std::holds_alternative<op::Pong>(out_.sent.back()));
}

TEST_F(SessionTest, ServerOnlyOpFromAClientIsFatal503) {
  receive(good_hello());
  receive(op::Deliver{});
  EXPECT_EQ(last_error().code, 503u);
  EXPECT_TRUE(last_error().fatal);
}

TEST_F(SessionTest, WrongFieldTypeIsFatal502EchoingTheRid) {
  receive(good_hello());
  Bytes header = {0x82, 0xa3, 'r', 'i', 'd', 0x09, 0xa4, 'n', 'a', 'm', 'e', 0x05};
  Bytes body = {0x12, 0, 0, 0, static_cast<std::uint8_t>(header.size())};
  body.insert(body.end(), header.begin(), header.end());
  session_.on_frame(RawFrame(body));
  EXPECT_EQ(last_error().code, 502u);
  EXPECT_EQ(last_error().rid, 9u);
  EXPECT_TRUE(out_.closing);
}

TEST_F(SessionTest, ShutdownSendsClose320) {
  receive(good_hello());
  session_.on_shutdown();
  EXPECT_EQ(std::get<op::Close>(out_.sent.back()).code, 320u);
  EXPECT_TRUE(out_.closing);
}

}  // namespace
}  // namespace firemq

namespace firemq {
namespace {

TEST_F(SessionTest, NothingIsDeliveredAfterTheCloseReply) {
  // A single-active-consumer queue hands over to the next consumer when the active one goes; while this
  // session closes, that next consumer is its own, and must get nothing.
  receive(good_hello());
  op::DeclareQueue declare;
  declare.rid = 1;
  declare.name = "q";
  declare.args = Map{{Value("x-single-active-consumer"), Value(true)}};
  receive(declare);
  receive(op::Subscribe{2, 1, "q", 1, false, false, "", {}});
  receive(op::Subscribe{3, 2, "q", 5, false, false, "", {}});
  for (int i = 0; i < 3; ++i) {
    op::Publish p;
    p.key = "q";
    receive(p);
  }
  receive(op::Close{200, "bye"});
  ASSERT_TRUE(std::holds_alternative<op::Close>(out_.sent.back()));
  // The three messages: one delivered before the close (to sub 1), two requeued, none sent after the close.
  Queue& q = **core_.vhost("/")->usable_queue("q", "test-conn");
  EXPECT_EQ(q.ready_count(), 3u);
}

}  // namespace
}  // namespace firemq

namespace firemq {
namespace {

TEST_F(SessionTest, ASeqThatDoesNotIncreaseIsRefusedWithoutASecondConfirm) {
  const op::Publish p = open_and_publish_seq_1();
  session_.flush();
  EXPECT_EQ(std::get<op::Confirm>(out_.sent.back()).upto, 1u);
  receive(p);  // seq 1 again
  session_.flush();
  ASSERT_TRUE(std::holds_alternative<op::Error>(out_.sent.back()));
  EXPECT_EQ(last_error().code, 406u);
  EXPECT_FALSE(last_error().fatal);
}

TEST_F(SessionTest, ConfirmsHeldForTheBatchGoBeforeTheCloseReply) {
  open_and_publish_seq_1();  // its confirm is held until the batch ends; the close ends it first
  receive(op::Close{200, "bye"});
  ASSERT_GE(out_.sent.size(), 2u);
  EXPECT_EQ(std::get<op::Confirm>(out_.sent[out_.sent.size() - 2]).upto, 1u);
  EXPECT_EQ(std::get<op::Close>(out_.sent.back()).code, 200u);
}

TEST_F(SessionTest, ConfirmsHeldForTheBatchGoBeforeAFatalError) {
  open_and_publish_seq_1();
  receive(op::Hello{});  // a second hello: 503, fatal
  ASSERT_GE(out_.sent.size(), 2u);
  EXPECT_EQ(std::get<op::Confirm>(out_.sent[out_.sent.size() - 2]).upto, 1u);
  EXPECT_TRUE(last_error().fatal);
}

TEST_F(SessionTest, AckWithMultipleOfATagNeverIssuedIsAnUnknownTag) {
  receive(good_hello());
  receive(op::Ack{1000, true});
  EXPECT_EQ(last_error().code, 406u);
  EXPECT_NE(last_error().msg.find("unknown delivery tag 1000"), std::string::npos);
}

TEST(SubscriptionCredit, HugeGrantsSaturateInsteadOfWrapping) {
  struct NullOutbox : Outbox {
    void send(const Message&, ByteView) override {}
    void close_after_flush() override {}
  } out;
  BrokerConfig config;
  Definitions definitions = *Definitions::defaults();
  ManualTime time;
  Core core(definitions, time);
  Session session(SessionEnv{config, definitions, core}, out, "c");
  Subscription s(session, op::Subscribe{1, 1, "q", UINT64_MAX, false, false, "", {}}, {}, 0);
  s.add_credit(2);  // UINT64_MAX + 2 would wrap to 1
  EXPECT_EQ(s.credit(), UINT64_MAX);
}

}  // namespace
}  // namespace firemq
