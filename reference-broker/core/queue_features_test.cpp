// The queue arguments with the clock in the test's hand: TTL, x-expires, length limits and overflow,
// dead-lettering with x-death, priorities, single active consumer, alternate exchanges, argument checks.
#include <gtest/gtest.h>

#include <limits>

#include "protocol/reply_codes.h"
#include "reference-broker/core/vhost.h"

namespace firemq {
namespace {

struct TestConsumer : Consumer {
  std::uint64_t credit = 100;
  std::int64_t priority_ = 0;
  std::vector<QueuedMessage> taken;
  bool can_take() const override { return credit > 0; }
  std::int64_t priority() const override { return priority_; }
  void take(QueuedMessage m, Queue&) override {
    --credit;
    taken.push_back(std::move(m));
  }
  void on_queue_deleted(Queue&) override {}
};

class QueueFeatures : public ::testing::Test {
 protected:
  Queue& declare(const std::string& name, Map args) {
    op::DeclareQueue d;
    d.name = name;
    d.args = std::move(args);
    auto ok = vhost_.declare_queue(d, "conn");
    EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().msg);
    return *vhost_.usable_queue(name, "conn").value();
  }
  Status declare_status(const std::string& name, Map args) {
    op::DeclareQueue d;
    d.name = name;
    d.args = std::move(args);
    auto ok = vhost_.declare_queue(d, "conn");
    return ok ? Status() : ok.error();
  }
  void exchange(const std::string& name, const std::string& type, Map args = {}) {
    op::DeclareExchange d;
    d.name = name;
    d.type = type;
    d.args = std::move(args);
    ASSERT_FALSE(vhost_.declare_exchange(d));
  }
  void bind(const std::string& exchange, const std::string& queue, const std::string& key) {
    op::BindFields b;
    b.exchange = exchange;
    b.queue = queue;
    b.key = key;
    ASSERT_FALSE(vhost_.bind(b, "conn"));
  }
  static MessagePtr message(std::string body, Map props = {}) {
    return BrokerMessage::make(MessageParts{"src", "rk", Props{std::move(props)}, {}, false}, as_bytes(body));
  }
  static std::string body(const QueuedMessage& m) {
    return std::string(m.message->body().bytes().begin(), m.message->body().bytes().end());
  }

  ManualTime time_;
  Vhost vhost_{"/", time_};
};

Map args(std::initializer_list<MapEntry> entries) { return Map(entries); }

TEST_F(QueueFeatures, ARedeclareThatDiffersInExclusiveAndInDurableIs405ExclusiveBeingCheckedFirst) {
  declare("q", {});
  op::DeclareQueue again;
  again.name = "q";
  again.exclusive = true;
  again.durable = true;
  auto refused = vhost_.declare_queue(again, "conn");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, static_cast<std::uint16_t>(ReplyCode::resource_locked));  // as RabbitMQ: not 406
}

TEST_F(QueueFeatures, ExpiredMessagesAreNeverDeliveredNorReturnedByGet) {
  Queue& q = declare("q", args({{Value("x-message-ttl"), Value(100)}}));
  q.enqueue(message("old"));
  time_.advance(100);
  EXPECT_FALSE(q.take_next().has_value());
  q.enqueue(message("new"));
  time_.advance(99);
  EXPECT_EQ(body(*q.take_next()), "new");
}

TEST_F(QueueFeatures, TheLowerOfQueueTtlAndMessageExpirationWins) {
  Queue& q = declare("q", args({{Value("x-message-ttl"), Value(1000)}}));
  q.enqueue(message("short", args({{Value("expiration"), Value(50)}})));
  time_.advance(50);
  vhost_.tick();
  EXPECT_EQ(q.ready_count(), 0u);
}

TEST_F(QueueFeatures, AHugeExpirationDoesNotWrapAroundToExpireAtOnce) {
  Queue& q = declare("q", {});
  q.enqueue(message("m", args({{Value("expiration"), Value(std::numeric_limits<std::uint64_t>::max())}})));
  time_.advance(1000);
  vhost_.tick();
  EXPECT_EQ(q.ready_count(), 1u);
}

TEST_F(QueueFeatures, TtlZeroDeliversOnlyWhatAConsumerTakesAtOnce) {
  Queue& q = declare("q", args({{Value("x-message-ttl"), Value(0)}}));
  q.enqueue(message("nobody there"));
  EXPECT_EQ(q.ready_count(), 0u);
  TestConsumer c;
  q.add_consumer(&c, false);
  q.enqueue(message("taken"));
  ASSERT_EQ(c.taken.size(), 1u);
  EXPECT_EQ(body(c.taken[0]), "taken");
}

TEST_F(QueueFeatures, AMessageThatExpiredBehindTheHeadIsNotDeliveredAfterIt) {
  Queue& q = declare("q", {});
  q.enqueue(message("lasting"));
  q.enqueue(message("short", args({{Value("expiration"), Value(1)}})));
  time_.advance(5);
  TestConsumer c;
  q.add_consumer(&c, false);
  q.dispatch();
  ASSERT_EQ(c.taken.size(), 1u);
  EXPECT_EQ(body(c.taken[0]), "lasting");
  EXPECT_EQ(q.ready_count(), 0u);
}

TEST_F(QueueFeatures, ExpiredMessagesAreDeadLetteredWithXDeath) {
  exchange("dlx", "fanout");
  Queue& dead = declare("dead", {});
  bind("dlx", "dead", "");
  Queue& q = declare("q", args({{Value("x-message-ttl"), Value(10)}, {Value("x-dead-letter-exchange"), Value("dlx")}}));
  q.enqueue(message("m", args({{Value("expiration"), Value(5)}})));
  time_.advance(10);
  vhost_.tick();
  ASSERT_EQ(dead.ready_count(), 1u);
  const QueuedMessage got = *dead.take_next();  // holds the message alive
  const BrokerMessage& m = *got.message;
  EXPECT_EQ(m.exchange(), "dlx");
  EXPECT_EQ(m.routing_key(), "rk");  // no DLK: the original key
  EXPECT_EQ(m.props().get("expiration"), nullptr);
  const Array& deaths = *find(m.headers(), "x-death")->get_if<Array>();
  ASSERT_EQ(deaths.size(), 1u);
  const Map& d = *deaths[0].get_if<Map>();
  EXPECT_EQ(*find(d, "count"), Value(1));
  EXPECT_EQ(*find(d, "reason"), Value("expired"));
  EXPECT_EQ(*find(d, "queue"), Value("q"));
  EXPECT_EQ(*find(d, "exchange"), Value("src"));
  EXPECT_EQ(*find(d, "routing-keys"), Value(Array{Value("rk")}));
  EXPECT_EQ(*find(d, "original-expiration"), Value(5));
  EXPECT_EQ(*find(d, "time"), Value(time_.unix_seconds()));
  EXPECT_EQ(*find(m.headers(), "x-first-death-reason"), Value("expired"));
  EXPECT_EQ(*find(m.headers(), "x-last-death-queue"), Value("q"));
}

TEST_F(QueueFeatures, RepeatedDeathsCountAndMoveToTheFront) {
  exchange("dlx", "direct");
  Queue& q = declare("q", args({{Value("x-dead-letter-exchange"), Value("dlx")},
                                {Value("x-dead-letter-routing-key"), Value("back")}}));
  bind("dlx", "q", "back");
  q.enqueue(message("m"));
  for (int i = 0; i < 2; ++i) {
    QueuedMessage taken = *q.take_next();
    q.reject(taken);  // rejected deaths may cycle: a client takes part each time
  }
  const QueuedMessage got = *q.take_next();
  const BrokerMessage& m = *got.message;
  const Array& deaths = *find(m.headers(), "x-death")->get_if<Array>();
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(*find(*deaths[0].get_if<Map>(), "count"), Value(2));
  EXPECT_EQ(m.routing_key(), "back");
}

TEST_F(QueueFeatures, ACycleWithoutRejectionIsBroken) {
  exchange("dlx", "fanout");
  Queue& q = declare("q", args({{Value("x-message-ttl"), Value(10)}, {Value("x-dead-letter-exchange"), Value("dlx")}}));
  bind("dlx", "q", "");
  q.enqueue(message("m"));
  time_.advance(10);
  vhost_.tick();
  EXPECT_EQ(q.ready_count(), 0u);  // expired back into itself: dropped, not looping
}

TEST_F(QueueFeatures, ARejectionBeforeTheTargetsLastDeathDoesNotBreakTheCycle) {
  // Dead-letters into itself: rejected once (no cycle check), then dropped from the head (maxlen) back into itself.
  Queue& q = declare("q", args({{Value("x-max-length"), Value(1)},
                                {Value("x-dead-letter-exchange"), Value("")},
                                {Value("x-dead-letter-routing-key"), Value("q")}}));
  q.enqueue(message("looping"));
  q.reject(*q.take_next());
  ASSERT_EQ(q.ready_count(), 1u);
  q.enqueue(message("pushing"));
  ASSERT_EQ(q.ready_count(), 1u);
  EXPECT_EQ(body(*q.take_next()), "pushing");
}

TEST_F(QueueFeatures, MissingDeadLetterExchangeDropsTheMessage) {
  Queue& q = declare("q", args({{Value("x-dead-letter-exchange"), Value("nowhere")}}));
  q.enqueue(message("m"));
  q.reject(*q.take_next());
  EXPECT_EQ(q.ready_count(), 0u);
}

TEST_F(QueueFeatures, DropHeadKeepsTheNewestAndDeadLettersTheOldest) {
  exchange("dlx", "fanout");
  Queue& dead = declare("dead", {});
  bind("dlx", "dead", "");
  Queue& q = declare("q", args({{Value("x-max-length"), Value(2)}, {Value("x-dead-letter-exchange"), Value("dlx")}}));
  for (const char* b : {"1", "2", "3"}) EXPECT_TRUE(q.enqueue(message(b)));
  EXPECT_EQ(q.ready_count(), 2u);
  EXPECT_EQ(body(*q.take_next()), "2");
  ASSERT_EQ(dead.ready_count(), 1u);
  const QueuedMessage got = *dead.take_next();  // holds the message alive
  const BrokerMessage& m = *got.message;
  EXPECT_EQ(*find(*find(m.headers(), "x-death")->get_if<Array>()->front().get_if<Map>(), "reason"), Value("maxlen"));
}

TEST_F(QueueFeatures, ARequeueOverMaxLengthDropsTheHeadWithDropHeadOnly) {
  Queue& dropping = declare("dropping", args({{Value("x-max-length"), Value(1)}}));
  dropping.enqueue(message("first"));
  QueuedMessage first = *dropping.take_next();
  dropping.enqueue(message("second"));
  dropping.requeue(std::move(first));
  ASSERT_EQ(dropping.ready_count(), 1u);
  EXPECT_EQ(body(*dropping.take_next()), "second");  // the requeued message was the head, back at its position

  Queue& refusing = declare("refusing",
                            args({{Value("x-max-length"), Value(1)}, {Value("x-overflow"), Value("reject-publish")}}));
  refusing.enqueue(message("first"));
  QueuedMessage taken = *refusing.take_next();
  refusing.enqueue(message("second"));
  refusing.requeue(std::move(taken));
  EXPECT_EQ(refusing.ready_count(), 2u);  // reject-publish refuses publishes only
}

TEST_F(QueueFeatures, MaxLengthBytesCountsBodyBytesOfReadyMessages) {
  Queue& q = declare("q", args({{Value("x-max-length-bytes"), Value(5)}}));
  q.enqueue(message("abc"));
  q.enqueue(message("def"));
  EXPECT_EQ(q.ready_count(), 1u);
  EXPECT_EQ(q.ready_bytes(), 3u);
}

TEST_F(QueueFeatures, RejectPublishRefusesWhenFull) {
  Queue& q = declare("q", args({{Value("x-max-length"), Value(1)}, {Value("x-overflow"), Value("reject-publish")}}));
  EXPECT_TRUE(q.enqueue(message("1")));
  EXPECT_FALSE(q.enqueue(message("2")));
  EXPECT_EQ(body(*q.take_next()), "1");
}

TEST_F(QueueFeatures, RejectPublishDlxDeadLettersTheRefusedMessage) {
  exchange("dlx", "fanout");
  Queue& dead = declare("dead", {});
  bind("dlx", "dead", "");
  Queue& q = declare("q", args({{Value("x-max-length"), Value(1)},
                                {Value("x-overflow"), Value("reject-publish-dlx")},
                                {Value("x-dead-letter-exchange"), Value("dlx")}}));
  q.enqueue(message("1"));
  EXPECT_FALSE(q.enqueue(message("2")));
  ASSERT_EQ(dead.ready_count(), 1u);
  EXPECT_EQ(body(*dead.take_next()), "2");
}

TEST_F(QueueFeatures, HigherPriorityFirstFifoWithinAPriorityAndAboveMaxCountsAsMax) {
  Queue& q = declare("q", args({{Value("x-max-priority"), Value(5)}}));
  auto prio = [](int p) { return args({{Value("priority"), Value(p)}}); };
  q.enqueue(message("low-1", prio(1)));
  q.enqueue(message("none"));
  q.enqueue(message("max-a", prio(9)));  // above the maximum: counts as 5
  q.enqueue(message("max-b", prio(5)));
  q.enqueue(message("low-2", prio(1)));
  std::vector<std::string> order;
  while (auto m = q.take_next()) order.push_back(body(*m));
  EXPECT_EQ(order, (std::vector<std::string>{"max-a", "max-b", "low-1", "low-2", "none"}));
}

TEST_F(QueueFeatures, RequeuedMessagesKeepTheirPriority) {
  Queue& q = declare("q", args({{Value("x-max-priority"), Value(5)}}));
  q.enqueue(message("high", args({{Value("priority"), Value(4)}})));
  QueuedMessage high = *q.take_next();
  q.enqueue(message("low", args({{Value("priority"), Value(1)}})));
  q.requeue(high);
  EXPECT_EQ(body(*q.take_next()), "high");
}

TEST_F(QueueFeatures, SingleActiveConsumerHandsOverInRegistrationOrder) {
  Queue& q = declare("q", args({{Value("x-single-active-consumer"), Value(true)}}));
  TestConsumer first, second;
  q.add_consumer(&first, false);
  q.add_consumer(&second, false);
  q.enqueue(message("1"));
  q.enqueue(message("2"));
  EXPECT_EQ(first.taken.size(), 2u);
  EXPECT_TRUE(second.taken.empty());
  q.remove_consumer(&first);
  q.enqueue(message("3"));
  ASSERT_EQ(second.taken.size(), 1u);
  EXPECT_EQ(body(second.taken[0]), "3");
}

// RabbitMQ 3.10: the first consumer is active whatever the priorities; when it goes, the waiting consumer of the
// highest x-priority takes over, the first of those to have subscribed.
TEST_F(QueueFeatures, SingleActiveConsumerHandsOverToTheHighestPriorityWaiting) {
  Queue& q = declare("q", args({{Value("x-single-active-consumer"), Value(true)}}));
  TestConsumer first, low, high_a, high_b;
  high_a.priority_ = high_b.priority_ = 3;
  q.add_consumer(&first, false);
  q.add_consumer(&low, false);
  q.add_consumer(&high_a, false);
  q.add_consumer(&high_b, false);
  q.enqueue(message("1"));
  ASSERT_EQ(first.taken.size(), 1u);
  q.remove_consumer(&first);
  q.enqueue(message("2"));
  EXPECT_TRUE(low.taken.empty());
  EXPECT_EQ(high_a.taken.size(), 1u);
  EXPECT_TRUE(high_b.taken.empty());
}

TEST_F(QueueFeatures, ConsumerPrioritiesServeTheHighestThatCanTakeAndRoundRobinWithinIt) {
  Queue& q = declare("q", {});
  TestConsumer low, high_a, high_b;
  low.priority_ = -1, high_a.priority_ = 5, high_b.priority_ = 5;
  high_a.credit = high_b.credit = 2;
  q.add_consumer(&low, false);
  q.add_consumer(&high_a, false);
  q.add_consumer(&high_b, false);
  for (const char* b : {"1", "2", "3", "4", "5"}) q.enqueue(message(b));
  EXPECT_EQ(high_a.taken.size(), 2u);  // the two of priority 5 take turns until both are full
  EXPECT_EQ(high_b.taken.size(), 2u);
  ASSERT_EQ(low.taken.size(), 1u);  // only then the lower one
  EXPECT_EQ(body(low.taken[0]), "5");
}

TEST_F(QueueFeatures, XExpiresDeletesAQueueUnusedThatLong) {
  declare("q", args({{Value("x-expires"), Value(1000)}}));
  time_.advance(999);
  vhost_.tick();
  EXPECT_TRUE(vhost_.usable_queue("q", "conn").ok());
  time_.advance(1);
  vhost_.tick();
  EXPECT_FALSE(vhost_.usable_queue("q", "conn").ok());
}

TEST_F(QueueFeatures, XExpiresIsResetByAGetAndHeldOffByAConsumer) {
  Queue& q = declare("q", args({{Value("x-expires"), Value(1000)}}));
  time_.advance(900);
  (void)q.take_next();
  time_.advance(900);
  vhost_.tick();
  ASSERT_TRUE(vhost_.usable_queue("q", "conn").ok());
  TestConsumer c;
  q.add_consumer(&c, false);
  time_.advance(5000);
  vhost_.tick();
  EXPECT_TRUE(vhost_.usable_queue("q", "conn").ok());
  q.remove_consumer(&c);
}

TEST_F(QueueFeatures, AlternateExchangeTakesUnroutableMessagesAndChainsStopAtARepeat) {
  exchange("ae", "fanout", args({{Value("alternate-exchange"), Value("main")}}));
  exchange("main", "direct", args({{Value("alternate-exchange"), Value("ae")}}));
  Route none = *vhost_.route("main", "k", {});  // ae has no binding: main -> ae -> (main again): stop
  EXPECT_TRUE(none.queues.empty());
  declare("caught", {});
  bind("ae", "caught", "");
  Route caught = *vhost_.route("main", "k", {});
  ASSERT_EQ(caught.queues.size(), 1u);
  EXPECT_EQ(caught.queues[0]->name(), "caught");
}

TEST_F(QueueFeatures, ArgumentsOfTheWrongTypeOrValueAre406NamingTheArgument) {
  const std::vector<std::pair<MapEntry, std::string>> bad = {
      {{Value("x-message-ttl"), Value("100")}, "'x-message-ttl'"},
      {{Value("x-message-ttl"), Value(-1)}, "'x-message-ttl'"},
      {{Value("x-expires"), Value(0)}, "'x-expires'"},
      {{Value("x-max-length"), Value(1.5)}, "'x-max-length'"},
      {{Value("x-overflow"), Value("drop-tail")}, "'x-overflow'"},
      {{Value("x-single-active-consumer"), Value("yes")}, "'x-single-active-consumer'"},
      {{Value("x-max-priority"), Value(256)}, "'x-max-priority'"},
      {{Value("x-dead-letter-routing-key"), Value("k")}, "'x-dead-letter-routing-key'"},
  };
  for (const auto& [arg, name] : bad) {
    Status s = declare_status("q", Map{arg});
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(s->code, 406);
    EXPECT_NE(s->msg.find(name), std::string::npos) << s->msg;
  }
}

TEST_F(QueueFeatures, RedeclareWithDifferentArgumentsIs406NamingTheArgument) {
  declare("q", args({{Value("x-max-length"), Value(10)}}));
  EXPECT_FALSE(declare_status("q", args({{Value("x-max-length"), Value(std::uint64_t{10})}})));  // widths compare equal
  Status changed = declare_status("q", args({{Value("x-max-length"), Value(11)}}));
  ASSERT_TRUE(changed);
  EXPECT_NE(changed->msg.find("inequivalent arg 'x-max-length'"), std::string::npos);
  Status missing = declare_status("q", {});
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->msg.find("'x-max-length'"), std::string::npos);
}

}  // namespace
}  // namespace firemq

#include "reference-broker/core/alarms.h"

namespace firemq {
namespace {

TEST(MemoryAccounting, AMessageCountsItsAllocationAndItsBodyWhileItLivesAndACopyCountsAgain) {
  const std::size_t before = MemoryAccount::in_use();
  {
    const MessagePtr small = BrokerMessage::make(MessageParts{"x", "key", {}, {}, false}, as_bytes("sixteen bytes..."));
    EXPECT_TRUE(small->body().kept_inline());
    EXPECT_EQ(small->accounted_bytes(), sizeof(BrokerMessage) + 1 + 3 + 16) << "one allocation: fields, names, body";
    EXPECT_EQ(MemoryAccount::in_use(), before + small->accounted_bytes());
    const Bytes large(1000, 1);
    const MessagePtr big = BrokerMessage::make(MessageParts{"", "k", {}, {}, false}, large);
    EXPECT_FALSE(big->body().kept_inline());
    EXPECT_EQ(big->accounted_bytes(), sizeof(BrokerMessage) + 1) << "the body on the heap counts on its own";
    const std::size_t both = small->accounted_bytes() + big->accounted_bytes() + 1000;
    EXPECT_EQ(MemoryAccount::in_use(), before + both);
    const MessagePtr copy = BrokerMessage::make(big->parts(), big->body());  // a dead-lettered copy holds its own body
    EXPECT_EQ(MemoryAccount::in_use(), before + both + big->accounted_bytes() + 1000);
    const MessagePtr another_holder = copy;  // shared, not copied: counts nothing
    EXPECT_EQ(MemoryAccount::in_use(), before + both + big->accounted_bytes() + 1000);
    const MessagePtr with_props = BrokerMessage::make(
        MessageParts{"", "k", Props{Map{{Value("priority"), Value(1)}}}, {}, false, 20}, ByteView{});
    EXPECT_GT(with_props->accounted_bytes(), sizeof(BrokerMessage) + 1 + 8 * 20) << "props count their estimate";
  }
  EXPECT_EQ(MemoryAccount::in_use(), before);
}

TEST(MessagePtr, CopiesShareTheMessageAndTheLastHolderFreesIt) {
  const std::size_t before = MemoryAccount::in_use();
  MessagePtr first = BrokerMessage::make(MessageParts{"", "k", {}, {}, false}, as_bytes("body"));
  EXPECT_EQ(first.use_count(), 1u);
  MessagePtr second = first;
  EXPECT_EQ(first.use_count(), 2u);
  EXPECT_EQ(second.get(), first.get());
  MessagePtr moved = std::move(second);
  EXPECT_FALSE(second);
  EXPECT_EQ(moved.use_count(), 2u);
  first.reset();
  EXPECT_EQ(moved.use_count(), 1u);
  EXPECT_GT(MemoryAccount::in_use(), before) << "alive while one holds it";
  EXPECT_EQ(moved->routing_key(), "k");
  moved = nullptr;
  EXPECT_EQ(MemoryAccount::in_use(), before) << "freed with its last holder";
}

TEST(BrokerMessageLayout, TheFieldsOfAMessageTakeFourWords) {
  // A transient 16 B message routed by an 18-character key then takes one 80-byte chunk of the allocator's; the
  // queue's entry for it is two more words (docs/benchmarks.md, "A message in four words").
  EXPECT_EQ(sizeof(BrokerMessage), 32u);
  EXPECT_EQ(sizeof(MessagePtr), sizeof(void*));
  EXPECT_LE(sizeof(MessageBody), 16u);
}

TEST(BrokerMessageLayout, OnlyAPersistentMessageHasAStoreIdAndOnlyOneWithPropsOrHeadersTheirSlot) {
  const Props props{Map{{Value("priority"), Value(3)}}};
  const Map headers{{Value("h"), Value("v")}};
  const MessagePtr transient = BrokerMessage::make(MessageParts{"ex", "key", {}, {}, false}, as_bytes("body"));
  const MessagePtr persistent = BrokerMessage::make(MessageParts{"ex", "key", {}, {}, true}, as_bytes("body"));
  const MessagePtr both = BrokerMessage::make(MessageParts{"ex", "key", props, headers, true, 10}, as_bytes("body"));
  EXPECT_EQ(persistent->accounted_bytes(), transient->accounted_bytes() + sizeof(std::uint64_t));
  EXPECT_EQ(transient->store_id(), 0u);
  EXPECT_EQ(persistent->store_id(), 0u) << "not written yet";
  persistent->set_store_id(42);
  both->set_store_id(7);
  EXPECT_EQ(persistent->store_id(), 42u);
  EXPECT_EQ(both->store_id(), 7u);
  for (const MessagePtr* m : {&transient, &persistent, &both}) {  // the names and the body after the slots
    EXPECT_EQ((*m)->exchange(), "ex");
    EXPECT_EQ((*m)->routing_key(), "key");
    EXPECT_EQ(std::string((*m)->body().bytes().begin(), (*m)->body().bytes().end()), "body");
  }
  EXPECT_TRUE(transient->props().entries.empty());
  EXPECT_TRUE(persistent->headers().empty());
  EXPECT_EQ(both->props(), props);
  EXPECT_EQ(both->headers(), headers);
  const MessageParts parts = both->parts();
  EXPECT_EQ(parts.header_bytes, 10u);
  EXPECT_TRUE(parts.persistent);
}

TEST(Alarms, MemoryAlarmRisesAtTheWatermarkAndClearsBelowIt) {
  AlarmLimits limits;
  limits.memory_high_watermark = MemoryAccount::in_use() + 1000;
  limits.disk_free_limit = 0;  // off
  Alarms alarms(limits);
  EXPECT_FALSE(alarms.update());
  EXPECT_FALSE(alarms.active());
  {
    AccountedBytes held(1000);
    EXPECT_TRUE(alarms.update());  // changed
    EXPECT_TRUE(alarms.memory());
    EXPECT_FALSE(alarms.update());  // unchanged
  }
  EXPECT_TRUE(alarms.update());
  EXPECT_FALSE(alarms.active());
}

TEST(Alarms, DiskAlarmRisesWhenFreeSpaceIsBelowTheLimit) {
  AlarmLimits limits;
  limits.memory_high_watermark = SIZE_MAX;
  limits.disk_free_limit = UINT64_MAX;  // no filesystem has that much free
  Alarms alarms(limits);
  EXPECT_TRUE(alarms.update());
  EXPECT_TRUE(alarms.disk());
}

// A failed message store is the disk alarm, and it never clears: the store is not trusted again until a restart.
TEST(Alarms, AFailedStoreRaisesTheDiskAlarmForGood) {
  AlarmLimits limits;
  limits.memory_high_watermark = SIZE_MAX;
  limits.disk_free_limit = 0;  // free space is not what fails here
  Alarms alarms(limits);
  EXPECT_FALSE(alarms.update());
  EXPECT_TRUE(alarms.update("fsync /data/messages/segment-000000000001.log: Input/output error"));
  EXPECT_TRUE(alarms.active());
  EXPECT_TRUE(alarms.disk());
  EXPECT_FALSE(alarms.disk_free_low());
  EXPECT_NE(alarms.describe().find("segment-000000000001.log: Input/output error"), std::string::npos);
  EXPECT_FALSE(alarms.update("write /data/messages/segment-000000000002.log: No space left on device"));
  EXPECT_FALSE(alarms.update());
  EXPECT_TRUE(alarms.active()) << "cleared without a restart";
  EXPECT_NE(alarms.storage_failure().find("segment-000000000001"), std::string::npos) << "the first failure is kept";
}

}  // namespace
}  // namespace firemq
