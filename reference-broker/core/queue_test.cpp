// Queue dispatch and credit accounting, with no sockets: consumers are plain test objects.
#include "reference-broker/core/queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace firemq {
namespace {

struct TestConsumer : Consumer {
  std::uint64_t credit = 0;
  std::vector<QueuedMessage> taken;
  bool deleted = false;
  bool can_take() const override { return credit > 0; }
  void take(QueuedMessage m, Queue&) override {
    --credit;
    taken.push_back(std::move(m));
  }
  void on_queue_deleted(Queue&) override { deleted = true; }
};

QueueSettings settings(std::string name) {
  QueueSettings s;
  s.name = std::move(name);
  return s;
}

ManualTime time_;

MessagePtr message(std::string body) {
  return BrokerMessage::make(MessageParts{"", "q", {}, {}, false}, as_bytes(body));
}

std::string body(const QueuedMessage& m) {
  return std::string(m.message->body().bytes().begin(), m.message->body().bytes().end());
}

TEST(QueueDispatch, NeverMoreThanTheCreditGranted) {
  Queue q(settings("q"), time_);
  TestConsumer c;
  c.credit = 2;
  q.add_consumer(&c, false);
  for (const char* b : {"1", "2", "3", "4"}) q.enqueue(message(b));
  EXPECT_EQ(c.taken.size(), 2u);
  EXPECT_EQ(q.ready_count(), 2u);
  c.credit += 1;
  q.dispatch();
  EXPECT_EQ(c.taken.size(), 3u);
  EXPECT_EQ(body(c.taken.back()), "3");
}

TEST(QueueDispatch, RoundRobinAmongConsumersWithCredit) {
  Queue q(settings("q"), time_);
  TestConsumer a, b, starved;
  a.credit = b.credit = 10;
  q.add_consumer(&a, false);
  q.add_consumer(&starved, false);  // no credit: never holds up the rest
  q.add_consumer(&b, false);
  for (int i = 0; i < 6; ++i) q.enqueue(message(std::to_string(i)));
  EXPECT_EQ(a.taken.size(), 3u);
  EXPECT_EQ(b.taken.size(), 3u);
  EXPECT_TRUE(starved.taken.empty());
}

// The bodies each consumer took, in order, a consumer's after another's: "13|2|".
std::string taken_by(std::initializer_list<const TestConsumer*> consumers) {
  std::string taken;
  for (const TestConsumer* consumer : consumers) {
    for (const QueuedMessage& m : consumer->taken) taken += body(m);
    taken += "|";
  }
  return taken;
}

// RabbitMQ's order (consumer_line.h): the consumer served goes to the back of the line and a new one joins behind
// it, so after one delivery to a of (a, b), a new c comes after a: b, a, c. A cursor over the consumers in the order
// they subscribed would serve b, then c.
TEST(QueueDispatch, ANewConsumerJoinsBehindTheOneJustServed) {
  Queue q(settings("q"), time_);
  TestConsumer a, b, c;
  a.credit = b.credit = c.credit = 10;
  q.add_consumer(&a, false);
  q.add_consumer(&b, false);
  q.enqueue(message("1"));
  q.add_consumer(&c, false);
  q.enqueue(message("2"));
  q.enqueue(message("3"));
  q.enqueue(message("4"));
  EXPECT_EQ(taken_by({&a, &b, &c}), "13|2|4|");
}

// One that could not take when its turn came leaves the line, and rejoins at the back once it can (RabbitMQ's
// blocked consumer, unblocked by an ack): after those served while it waited.
TEST(QueueDispatch, AConsumerThatCouldNotTakeRejoinsAtTheBack) {
  Queue q(settings("q"), time_);
  TestConsumer a, b, c;
  a.credit = 1;
  b.credit = c.credit = 10;
  q.add_consumer(&a, false);
  q.add_consumer(&b, false);
  q.add_consumer(&c, false);
  for (const char* m : {"1", "2", "3", "4"}) q.enqueue(message(m));  // a, b, c, then b: a is full
  a.credit = 1;
  q.dispatch();  // the line is c, b, a now
  for (const char* m : {"5", "6", "7"}) q.enqueue(message(m));
  EXPECT_EQ(taken_by({&a, &b, &c}), "17|246|35|");
}

TEST(QueueDispatch, RequeuedMessageGoesBackToItsOriginalPosition) {
  Queue q(settings("q"), time_);
  for (const char* b : {"1", "2", "3"}) q.enqueue(message(b));
  QueuedMessage first = *q.take_next();
  EXPECT_EQ(q.unacked_count(), 1u);  // until acked, requeued, or settled at once for no_ack
  q.requeue(first);
  EXPECT_EQ(q.unacked_count(), 0u);
  QueuedMessage again = *q.take_next();
  EXPECT_EQ(body(again), "1");
  EXPECT_TRUE(again.redelivered);
  EXPECT_EQ(body(*q.take_next()), "2");
}

TEST(QueueDispatch, PurgeRemovesReadyMessagesOnly) {
  Queue q(settings("q"), time_);
  TestConsumer c;
  c.credit = 1;
  q.add_consumer(&c, false);
  for (const char* b : {"1", "2", "3"}) q.enqueue(message(b));
  EXPECT_EQ(q.purge(), 2u);
  EXPECT_EQ(q.unacked_count(), 1u);
}

TEST(QueueDispatch, AutoDeleteIsDueOnlyAfterAConsumerCameAndWent) {
  QueueSettings auto_delete = settings("q");
  auto_delete.auto_delete = true;
  Queue q(auto_delete, time_);
  EXPECT_FALSE(q.auto_delete_due());
  TestConsumer c;
  q.add_consumer(&c, false);
  EXPECT_FALSE(q.auto_delete_due());
  q.remove_consumer(&c);
  EXPECT_TRUE(q.auto_delete_due());
}

TEST(QueueDispatch, DeletingTheQueueTellsEveryConsumer) {
  Queue q(settings("q"), time_);
  TestConsumer a, b;
  q.add_consumer(&a, false);
  q.add_consumer(&b, false);
  q.cancel_consumers();
  EXPECT_TRUE(a.deleted && b.deleted);
  EXPECT_EQ(q.consumer_count(), 0u);
}

// Whatever order unacknowledged messages come back in (a nack of one, then the connection's close requeueing the
// rest in tag order), they are delivered again in their original order, before what was published after them.
TEST(QueueDispatch, RequeuedMessagesComeBackInPositionOrderWhateverOrderTheyAreRequeuedIn) {
  Queue q(settings("q"), time_);
  for (const char* b : {"1", "2", "3", "4", "5", "6"}) q.enqueue(message(b));
  std::vector<QueuedMessage> taken;
  for (int i = 0; i < 4; ++i) taken.push_back(*q.take_next());
  for (int i : {2, 0, 3, 1}) q.requeue(taken[i]);
  q.enqueue(message("7"));
  std::string order;
  while (auto m = q.take_next()) order += body(*m);
  EXPECT_EQ(order, "1234567");
}

// With nothing left ready, the first message requeued starts the order again; one with a lower position requeued
// after it still goes before it, and a later publish after both.
TEST(QueueDispatch, RequeuedIntoAnEmptyQueueKeepsPositionOrder) {
  Queue q(settings("q"), time_);
  for (const char* b : {"1", "2", "3"}) q.enqueue(message(b));
  std::vector<QueuedMessage> taken;
  while (auto m = q.take_next()) taken.push_back(*m);
  q.requeue(taken[2]);
  q.requeue(taken[0]);
  q.enqueue(message("4"));
  q.requeue(taken[1]);
  std::string order, redelivered;
  while (auto m = q.take_next()) {
    order += body(*m);
    redelivered += m->redelivered ? "r" : "-";
  }
  EXPECT_EQ(order, "1234");
  EXPECT_EQ(redelivered, "rrr-");
}

// The set alone: priority first, then position, and the head's expiry is the message that comes first, wherever
// it is kept (a requeued one below the published ones included).
TEST(ReadyMessagesOrder, HigherPriorityFirstThenPositionAndTheHeadsExpiry) {
  ReadyMessages ready;
  auto push = [&](std::uint64_t position, std::uint8_t priority, std::optional<std::uint64_t> expires) {
    QueuedMessage m;
    m.message = message(std::to_string(position));
    m.position = position;
    m.priority = priority;
    m.expires_at_ms = expires;
    ready.push(std::move(m));
  };
  push(5, 0, std::nullopt);
  push(6, 1, 60);
  push(7, 0, std::nullopt);
  push(2, 0, 20);  // requeued: below the published ones of its level
  EXPECT_EQ(ready.size(), 4u);
  EXPECT_EQ(ready.head_expires_at(), std::optional<std::uint64_t>(60));
  std::string order;
  std::vector<std::uint8_t> priorities;
  while (!ready.empty()) {
    if (order.size() == 1) {
      EXPECT_EQ(ready.head_expires_at(), std::optional<std::uint64_t>(20));
    } else if (order.size() == 2) {
      EXPECT_EQ(ready.head_expires_at(), std::nullopt);
    }
    QueuedMessage m = ready.pop();
    order += body(m);
    priorities.push_back(m.priority);
  }
  EXPECT_EQ(order, "6257");
  EXPECT_EQ(priorities, (std::vector<std::uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(ready.head_expires_at(), std::nullopt);
}

// A level keeps expiries only from its first message with one: the messages published before it have none, those
// after it keep theirs, and once the level drains a new message without expiry starts without the column again.
TEST(ReadyMessagesOrder, ExpiriesStartWithTheFirstMessageThatHasOneAndKeepEveryMessagesOwn) {
  ReadyMessages ready;
  auto push = [&](std::uint64_t position, std::optional<std::uint64_t> expires) {
    QueuedMessage m;
    m.message = message(std::to_string(position));
    m.position = position;
    m.expires_at_ms = expires;
    ready.push(std::move(m));
  };
  push(1, std::nullopt);
  push(2, std::nullopt);
  push(3, 30);
  push(4, std::nullopt);
  push(5, 50);
  const std::vector<std::optional<std::uint64_t>> expected{std::nullopt, std::nullopt, 30, std::nullopt, 50};
  for (const auto& expiry : expected) {
    EXPECT_EQ(ready.head_expires_at(), expiry);
    QueuedMessage m = ready.pop();
    EXPECT_EQ(m.expires_at_ms, expiry) << "message " << body(m);
  }
  push(6, std::nullopt);
  EXPECT_EQ(ready.head_expires_at(), std::nullopt);
  EXPECT_EQ(ready.pop().expires_at_ms, std::nullopt);
  EXPECT_TRUE(ready.empty());
}

}  // namespace
}  // namespace firemq
