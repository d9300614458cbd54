// Operator limits (max-connections per vhost and user, max-queues per vhost) and the bounds no client can push
// past (config.h ClientBounds): parsed as RabbitMQ writes them, and enforced by the session with 506.
#include "reference-broker/access/limits.h"
#include "reference-broker/core/argument_bounds.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "reference-broker/session/session.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

TEST(Limits, VhostLimitsAsRabbitMqWritesThem) {
  auto limits = parse_vhost_limits(Json::parse(R"({"max-connections": 10, "max-queues": -1})"));
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->max_connections, 10u);
  EXPECT_FALSE(limits->max_queues);  // negative: no limit, as in RabbitMQ
  EXPECT_EQ(to_json(*limits), Json::parse(R"({"max-connections": 10})"));
}

TEST(Limits, AnUnknownLimitOrAWrongTypeIsNamed) {
  auto unknown = parse_user_limits(Json::parse(R"({"max-channels": 5})"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown user limit 'max-channels' (known: max-connections)"), std::string::npos);
  auto text = parse_vhost_limits(Json::parse(R"({"max-queues": "ten"})"));
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().find("'max-queues' must be an integer"), std::string::npos);
}

TEST(Limits, FlagsSplitAtTheLastColon) {
  auto flag = parse_limit_flag("a:b:max-queues=3");
  ASSERT_TRUE(flag);
  EXPECT_EQ(flag->name, "a:b");
  EXPECT_EQ(flag->value, Json::parse(R"({"max-queues": 3})"));
  EXPECT_FALSE(parse_limit_flag("max-queues=3"));
  auto bad = parse_limit_flag("/:max-queues=many");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("'many' is not an integer"), std::string::npos);
}

TEST(Limits, ConnectionCountsRefuseAtTheLimitAndFreeOnRelease) {
  ConnectionCounts counts;
  const VhostLimits two{2, {}};
  EXPECT_FALSE(counts.admit("a", {}, "/", two));
  EXPECT_FALSE(counts.admit("b", {}, "/", two));
  Status full = counts.admit("c", {}, "/", two);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->code, 506u);
  EXPECT_NE(full->msg.find("vhost '/' has reached its limit of 2 connections (max-connections)"), std::string::npos);
  counts.release("a", "/");
  EXPECT_FALSE(counts.admit("c", {}, "/", two));
  EXPECT_EQ(counts.on_vhost("/"), 2u);

  const UserLimits one{1};
  EXPECT_FALSE(counts.admit("u", one, "other", {}));
  Status user_full = counts.admit("u", one, "other", {});
  ASSERT_TRUE(user_full);
  EXPECT_NE(user_full->msg.find("user 'u' has reached its limit of 1 connection (max-connections)"), std::string::npos);
  EXPECT_EQ(counts.on_vhost("other"), 1u);  // a refused connection is not counted
}

TEST(Limits, DefinitionsKeepLimitsInRabbitMqsShapes) {
  const char* text = R"({
      "users": [{"name": "app", "password": "pw", "limits": {"max-connections": 3}}],
      "vhosts": [{"name": "/"}],
      "parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits",
                      "value": {"max-connections": 5, "max-queues": 7}}]})";
  auto d = Definitions::parse(text);
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->user_limits("app").max_connections, 3u);
  EXPECT_EQ(d->vhost_limits("/"), (VhostLimits{5, 7}));
  // Written back as read, so the data directory's copy keeps them.
  auto again = Definitions::parse(d->to_json().dump());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->vhost_limits("/"), (VhostLimits{5, 7}));
  EXPECT_EQ(again->user_limits("app").max_connections, 3u);
}

TEST(Limits, DefinitionsRefuseWhatTheyCannotApply) {
  auto shovel = Definitions::parse(R"({"vhosts": [{"name": "/"}],
      "parameters": [{"vhost": "/", "component": "shovel", "name": "s", "value": {}}]})");
  ASSERT_FALSE(shovel);
  EXPECT_NE(shovel.error().find("component 'shovel': only vhost-limits is supported"), std::string::npos);
  auto unknown_vhost = Definitions::parse(R"({"vhosts": [{"name": "/"}],
      "parameters": [{"vhost": "x", "component": "vhost-limits", "name": "limits", "value": {}}]})");
  ASSERT_FALSE(unknown_vhost);
  EXPECT_NE(unknown_vhost.error().find("unknown vhost 'x'"), std::string::npos);
}

TEST(Limits, FlagsMergeIntoTheDefinitions) {
  Definitions d = *Definitions::defaults();
  EXPECT_FALSE(d.set_vhost_limits("/", Json::parse(R"({"max-queues": 4})")));
  EXPECT_FALSE(d.set_vhost_limits("/", Json::parse(R"({"max-connections": 2})")));
  EXPECT_EQ(d.vhost_limits("/"), (VhostLimits{2, 4}));
  EXPECT_TRUE(d.set_vhost_limits("nope", Json::parse(R"({"max-queues": 4})")));
  EXPECT_TRUE(d.set_user_limits("nobody", Json::parse(R"({"max-connections": 1})")));
}

// Sessions over one core, as a broker's connections are, with small bounds.
class BoundsTest : public ::testing::Test {
 protected:
  struct Client : Outbox {
    std::vector<Message> sent;
    bool closing = false;
    std::unique_ptr<Session> session;
    void send(const Message& m, ByteView) override { sent.push_back(m); }
    void close_after_flush() override { closing = true; }
    void receive(Message m) { session->on_message(std::move(m), {}); }
    const op::Error* last_error() const { return std::get_if<op::Error>(&sent.back()); }
    std::size_t delivered() const {
      std::size_t n = 0;
      for (const Message& m : sent) n += std::holds_alternative<op::Deliver>(m);
      return n;
    }
  };

  BoundsTest() {
    config_.bounds = {.handshakes = 8,
                      .subscriptions = 2,
                      .unacked = 3,
                      .queues_per_vhost = 100,
                      .exchanges_per_vhost = 100,
                      .bindings_per_vhost = 2};
  }

  Client& connect(const std::string& user = "guest") {
    auto client = std::make_unique<Client>();
    client->session = std::make_unique<Session>(SessionEnv{config_, definitions_, core_}, *client,
                                                "conn-" + std::to_string(clients_.size()));
    op::Hello hello;
    hello.ver = 1;
    hello.auth = {"plain", user, user == "guest" ? "guest" : "pw"};
    client->receive(hello);
    clients_.push_back(std::move(client));
    return *clients_.back();
  }
  static op::DeclareQueue queue(std::uint64_t rid, const std::string& name) {
    op::DeclareQueue q;
    q.rid = rid;
    q.name = name;
    return q;
  }
  static op::Publish publish_to(const std::string& queue) {
    op::Publish p;
    p.key = queue;
    return p;
  }

  BrokerConfig config_;
  Definitions definitions_ = *Definitions::parse(R"({
      "users": [{"name": "guest", "password": "guest"}, {"name": "app", "password": "pw", "limits": {"max-connections": 1}}],
      "vhosts": [{"name": "/"}],
      "permissions": [{"user": "guest", "vhost": "/"}, {"user": "app", "vhost": "/"}],
      "parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits",
                      "value": {"max-connections": 3, "max-queues": 2}}]})");
  ManualTime time_;
  Core core_{definitions_, time_};
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(BoundsTest, AVhostsConnectionLimitRefusesTheNextLoginWith506Fatal) {
  connect();
  connect();
  Client& third = connect();
  EXPECT_TRUE(std::holds_alternative<op::Welcome>(third.sent.back()));
  Client& fourth = connect();
  ASSERT_TRUE(fourth.last_error());
  EXPECT_EQ(fourth.last_error()->code, 506u);
  EXPECT_TRUE(fourth.last_error()->fatal);
  EXPECT_TRUE(fourth.closing);
  third.receive(op::Close{200, "bye"});  // a closed connection frees its place
  EXPECT_TRUE(std::holds_alternative<op::Welcome>(connect().sent.back()));
}

TEST_F(BoundsTest, AUsersConnectionLimitCountsThatUserOnly) {
  EXPECT_TRUE(std::holds_alternative<op::Welcome>(connect("app").sent.back()));
  Client& second = connect("app");
  ASSERT_TRUE(second.last_error());
  EXPECT_NE(second.last_error()->msg.find("user 'app' has reached its limit of 1 connection"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<op::Welcome>(connect().sent.back()));
}

TEST_F(BoundsTest, MaxQueuesRefusesANewQueueNotARedeclare) {
  Client& c = connect();
  c.receive(queue(1, "a"));
  c.receive(queue(2, "b"));
  c.receive(queue(3, "c"));
  ASSERT_TRUE(c.last_error());
  EXPECT_EQ(c.last_error()->code, 506u);
  EXPECT_FALSE(c.last_error()->fatal);
  EXPECT_NE(c.last_error()->msg.find("vhost '/' has reached its limit of 2 (max-queues)"), std::string::npos);
  c.receive(queue(4, "a"));  // what exists may be declared again
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
  c.receive(op::DeleteQueue{5, "b", false, false});
  c.receive(queue(6, "c"));
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
}

TEST_F(BoundsTest, ExchangesAndBindingsPerVhostAreBounded) {
  Client& c = connect();
  // Two more than the built-in exchanges, which count.
  config_.bounds.exchanges_per_vhost = core_.vhost("/")->exchanges().size() + 2;
  for (std::uint64_t rid : {1, 2, 3}) {
    op::DeclareExchange x;
    x.rid = rid;
    x.name = "x" + std::to_string(rid);
    x.type = "fanout";
    c.receive(x);
  }
  ASSERT_TRUE(c.last_error());
  EXPECT_NE(c.last_error()->msg.find("(exchanges per vhost, --max-exchanges)"), std::string::npos);
  ASSERT_TRUE(core_.vhost("/")->declare_queue(queue(0, "q"), ""));
  for (std::uint64_t rid : {4, 5, 6}) c.receive(op::Bind{{rid, "x1", "q", "", "k" + std::to_string(rid), {}}});
  ASSERT_TRUE(c.last_error());
  EXPECT_EQ(c.last_error()->code, 506u);
  EXPECT_NE(c.last_error()->msg.find("(bindings per vhost, --max-bindings)"), std::string::npos);
  c.receive(op::Bind{{7, "x1", "q", "", "k4", {}}});  // binding what is bound adds nothing
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
}

TEST_F(BoundsTest, SubscriptionsPerConnectionAreBounded) {
  Client& c = connect();
  c.receive(queue(1, "q"));
  c.receive(op::Subscribe{2, 1, "q", 1, false, false, "", {}});
  c.receive(op::Subscribe{3, 2, "q", 1, false, false, "", {}});
  c.receive(op::Subscribe{4, 3, "q", 1, false, false, "", {}});
  ASSERT_TRUE(c.last_error());
  EXPECT_EQ(c.last_error()->code, 506u);
  EXPECT_NE(c.last_error()->msg.find("limit of 2 subscriptions (--max-subscriptions)"), std::string::npos);
  c.receive(op::Unsubscribe{5, 1});
  c.receive(op::Subscribe{6, 3, "q", 1, false, false, "", {}});
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
}

// Arguments whose MessagePack encoding is `bytes` long (near 64 KiB): a fixmap of one entry (1 byte), the fixstr
// key "x-pad" (6) and a str16 (3 bytes of header) of the rest.
Map arguments_of_size(std::size_t bytes) { return Map{{Value("x-pad"), Value(std::string(bytes - 1 - 6 - 3, 'a'))}}; }

TEST_F(BoundsTest, ArgumentsAreBoundedInSizeOnEveryKindOfRequest) {
  Client& c = connect();
  op::DeclareQueue fits = queue(1, "fits");
  fits.args = arguments_of_size(kMaxArgumentsBytes);
  c.receive(fits);
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
  op::DeclareQueue big = queue(2, "big");
  big.args = arguments_of_size(kMaxArgumentsBytes + 1);
  c.receive(big);
  ASSERT_TRUE(c.last_error());
  EXPECT_EQ(c.last_error()->code, 506u);
  EXPECT_FALSE(c.last_error()->fatal);
  EXPECT_EQ(c.last_error()->msg, "the arguments of queue 'big' in vhost '/' are 65537 bytes, over the limit of 65536 "
                                 "(MessagePack-encoded)");
  EXPECT_FALSE(core_.vhost("/")->queues().count("big"));

  op::DeclareExchange x;
  x.rid = 3;
  x.name = "x";
  x.type = "headers";
  x.args = big.args;
  c.receive(x);
  ASSERT_TRUE(c.last_error());
  EXPECT_NE(c.last_error()->msg.find("the arguments of exchange 'x' in vhost '/' are 65537 bytes"), std::string::npos);
  x.args = {};
  c.receive(x);
  c.receive(op::Bind{{4, "x", "fits", "", "", big.args}});
  ASSERT_TRUE(c.last_error());
  EXPECT_NE(c.last_error()->msg.find("the arguments of a binding of exchange 'x' are 65537 bytes"), std::string::npos);
  c.receive(op::Subscribe{5, 1, "fits", 1, false, false, "", big.args});
  ASSERT_TRUE(c.last_error());
  EXPECT_NE(c.last_error()->msg.find("the arguments of consumer 'fire-1' are 65537 bytes"), std::string::npos);
  c.receive(op::Subscribe{6, 1, "fits", 1, false, false, "", fits.args});
  EXPECT_TRUE(std::holds_alternative<op::Ok>(c.sent.back()));
}

// What the broker keeps is text in definitions.json and the API: a name, a binding key or a str among the
// arguments that is not UTF-8 is a 502 syntax-error (fatal, as every 502: docs/spec-notes.md) on the request, not
// an exception out of the durable save (issue 27).
TEST_F(BoundsTest, NamesKeysAndArgumentsKeptMustBeUtf8) {
  const std::string not_utf8 = "q\x8e";
  auto expect_refused = [&](Client& c, const std::string& msg) {
    ASSERT_TRUE(c.last_error());
    EXPECT_EQ(c.last_error()->code, 502u);
    EXPECT_TRUE(c.last_error()->fatal);
    EXPECT_EQ(c.last_error()->msg, msg);
  };
  op::DeclareQueue bad_name = queue(1, not_utf8);
  bad_name.durable = true;
  Client& first = connect();
  first.receive(bad_name);
  expect_refused(first, "the queue name is not UTF-8");
  EXPECT_FALSE(core_.vhost("/")->queues().count(not_utf8));

  op::DeclareQueue bad_argument = queue(2, "q");
  bad_argument.args = {{Value(std::string("x-dead-letter-exchange")), Value(not_utf8)}};
  Client& second = connect();
  second.receive(bad_argument);
  expect_refused(second, "the arguments of queue 'q' in vhost '/' hold a str that is not UTF-8");

  op::DeclareExchange x;
  x.rid = 3;
  x.name = not_utf8;
  x.type = "direct";
  Client& third = connect();
  third.receive(x);
  expect_refused(third, "the exchange name is not UTF-8");

  Client& fourth = connect();
  fourth.receive(queue(4, "q"));
  fourth.receive(op::Bind{{5, "amq.direct", "q", "", "gr\xc3\xbc\xc3\x9f", {}}});  // UTF-8 beyond ASCII is text
  EXPECT_TRUE(std::holds_alternative<op::Ok>(fourth.sent.back()));
  fourth.receive(op::Bind{{6, "amq.direct", "q", "", not_utf8, {}}});
  expect_refused(fourth, "the binding key is not UTF-8");
}

TEST_F(BoundsTest, DeliveriesWaitAtTheUnackedBoundWhateverTheCredit) {
  Client& c = connect();
  c.receive(queue(1, "q"));
  for (int i = 0; i < 5; ++i) c.receive(publish_to("q"));
  c.receive(op::Subscribe{2, 1, "q", 100, false, false, "", {}});
  EXPECT_EQ(c.delivered(), 3u);
  c.receive(op::Get{3, "q", false});  // a get that would add a fourth is refused
  ASSERT_TRUE(c.last_error());
  EXPECT_NE(c.last_error()->msg.find("limit of 3 unacknowledged deliveries (--max-unacked)"), std::string::npos);
  c.receive(op::Ack{2, true});  // two acked: two more come
  EXPECT_EQ(c.delivered(), 5u);
}

}  // namespace
}  // namespace firemq
