// A queue: its ready messages in order, its consumers, and fair dispatch among those that have credit.
// Runs on the broker thread only. A Consumer registered here must be removed before it is destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/value.h"
#include "reference-broker/broker_message.h"

namespace firemq {

class Queue;

// A message in a queue. `position` is its place in the queue's order, kept when it is requeued, so that "nack
// with requeue puts the message back at its original position".
struct QueuedMessage {
  MessagePtr message;
  std::uint64_t position = 0;
  bool redelivered = false;
};

// A subscription as the queue sees it (the session implements it).
class Consumer {
 public:
  virtual ~Consumer() = default;
  // Whether it may take one more message now (it has credit).
  virtual bool can_take() const = 0;
  // Takes a message: sends deliver, and keeps it unacknowledged unless the subscription is no_ack.
  virtual void take(QueuedMessage message, Queue& queue) = 0;
  // The queue is going away (deleted): the subscription ends.
  virtual void on_queue_deleted(Queue& queue) = 0;
};

struct QueueSettings {
  std::string name;
  bool durable = false;
  bool auto_delete = false;
  std::string exclusive_owner;  // the owning connection's id; empty when not exclusive
  Map args;
};

class Queue {
 public:
  explicit Queue(QueueSettings settings) : settings_(std::move(settings)) {}

  const QueueSettings& settings() const { return settings_; }
  const std::string& name() const { return settings_.name; }
  bool exclusive() const { return !settings_.exclusive_owner.empty(); }

  void enqueue(MessagePtr message);
  // A message that was delivered and not acknowledged goes back to its original position, redelivered.
  void requeue(QueuedMessage message);
  // The next ready message, for get, counted as unacknowledged; nullopt when none is ready.
  std::optional<QueuedMessage> take_next();
  // Drops the ready messages; returns how many.
  std::size_t purge();

  // Consumers, in the order they subscribed (round-robin dispatch follows it).
  void add_consumer(Consumer* consumer, bool exclusive);
  void remove_consumer(Consumer* consumer);
  std::size_t consumer_count() const { return consumers_.size(); }
  bool has_exclusive_consumer() const { return exclusive_consumer_; }
  // An auto_delete queue goes once its last consumer goes, but only if it ever had one.
  bool auto_delete_due() const { return settings_.auto_delete && ever_had_consumer_ && consumers_.empty(); }

  // Hands ready messages to consumers with credit, in turn, until either runs out.
  void dispatch();
  // The queue is being deleted: every consumer is told, and forgotten.
  void cancel_consumers();

  std::size_t ready_count() const { return ready_.size(); }
  std::size_t unacked_count() const { return unacked_; }
  void on_settled() { if (unacked_ > 0) --unacked_; }  // an unacknowledged delivery was acked or dropped

 private:
  Consumer* next_consumer_with_credit();

  QueueSettings settings_;
  std::map<std::uint64_t, QueuedMessage> ready_;  // by position
  std::uint64_t next_position_ = 1;
  std::size_t unacked_ = 0;
  std::vector<Consumer*> consumers_;
  std::size_t round_robin_ = 0;
  bool exclusive_consumer_ = false;
  bool ever_had_consumer_ = false;
  bool dispatching_ = false;
};

}  // namespace firemq
