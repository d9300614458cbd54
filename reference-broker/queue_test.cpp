// Queue dispatch and credit accounting, with no sockets: consumers are plain test objects.
#include "reference-broker/queue.h"

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
  return std::make_shared<BrokerMessage>(
      BrokerMessage{"", "q", {}, {}, Bytes(body.begin(), body.end()), false, AccountedBytes(body.size())});
}

std::string body(const QueuedMessage& m) { return std::string(m.message->body.begin(), m.message->body.end()); }

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

}  // namespace
}  // namespace firemq
