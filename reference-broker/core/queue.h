// A queue: its ready messages in order, its consumers, fair dispatch among those that have credit, and the
// queue arguments that shape all of that (TTL, length limits and overflow, dead-lettering, priorities, single
// active consumer, expiry when unused). Runs on the broker thread only. A Consumer registered here must be
// removed before it is destroyed.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/value.h"
#include "reference-broker/core/broker_message.h"
#include "reference-broker/core/consumer_line.h"
#include "reference-broker/core/journal.h"
#include "reference-broker/core/pager.h"
#include "reference-broker/core/queue_arguments.h"
#include "reference-broker/core/time_source.h"

namespace firemq {

struct Policy;  // policy.h

// What has passed through one queue since it was declared: the management API's message_stats of a queue, from
// which the UI draws the queue's message rates. They only grow.
struct QueueCounters {
  std::uint64_t published = 0;     // messages enqueued
  std::uint64_t delivered = 0;     // handed to a consumer or to a get
  std::uint64_t redelivered = 0;   // of those, the ones delivered before
  std::uint64_t acknowledged = 0;  // settled for good by an ack (or no_ack)
};

class Queue;

// A message in a queue. `position` is its place in the queue's order, kept when it is requeued, so that "nack
// with requeue puts the message back at its original position"; so are its priority and its expiry.
struct QueuedMessage {
  MessagePtr message;
  std::uint64_t position = 0;
  bool redelivered = false;
  std::uint8_t priority = 0;
  std::optional<std::uint64_t> expires_at_ms;  // the lower of the queue's TTL and the message's expiration
};

// A queue's ready messages in delivery order: higher priority first, then by position (FIFO within a priority).
// What it costs per message is a few words and no allocation of its own: each priority level appends publishes to
// a deque. A message delivered before (requeued, or restored as delivered), or one that comes out of position
// order, goes to the level's `returned` instead, a map by position that is empty but for the messages in that
// state; they were delivered from the head, so their positions are almost always below every published one, and
// the level's head is whichever of the two comes first by position.
class ReadyMessages {
 public:
  void push(QueuedMessage message);
  // The next message in delivery order, removed; the set must not be empty.
  QueuedMessage pop();
  // When the next message expires; nullopt when it does not (or the set is empty).
  std::optional<std::uint64_t> head_expires_at() const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  static constexpr std::uint64_t kNever = UINT64_MAX;  // expires_at_ms of a message without expiry
  // A message never delivered: a QueuedMessage without its priority (the level's), its redelivered flag (false)
  // and its expiry (in the level's `expiries`), two words.
  struct Published {
    MessagePtr message;
    std::uint64_t position;
  };
  struct Level {
    std::deque<Published> published;  // by position, appended to
    // The expiry of each of `published`, index for index, or kNever. Empty until a message with an expiry comes
    // to the level, so that a queue without TTLs pays nothing for them; from then on as long as `published`,
    // until the two empty together.
    std::deque<std::uint64_t> expiries;
    std::map<std::uint64_t, QueuedMessage> returned;  // by position
    bool empty() const { return published.empty() && returned.empty(); }
    bool head_is_returned() const {
      return !returned.empty() && (published.empty() || returned.begin()->first < published.front().position);
    }
  };
  const Level* head_level() const;

  std::map<std::uint8_t, Level, std::greater<>> levels_;  // by priority, highest first; made on first use
  std::size_t size_ = 0;
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
  // RabbitMQ's consumer priorities (the consumer argument x-priority): while a consumer of a higher priority can
  // take a message, one of a lower priority gets none. 0 unless the consumer asked.
  virtual std::int64_t priority() const { return 0; }
  // Its consumer tag: a deleted queue cancels its consumers in the order of their tags, as RabbitMQ's channel
  // does (it keeps its consumers in a map by tag).
  virtual std::string_view tag() const { return {}; }
};

enum class DeathReason { rejected, expired, maxlen };

// Where a queue sends the messages it dead-letters (the vhost, which knows the exchanges).
class DeadLetterer {
 public:
  virtual ~DeadLetterer() = default;
  virtual void dead_letter(const Queue& from, const QueuedMessage& message, DeathReason reason) = 0;
};

struct QueueSettings {
  std::string vhost;
  std::string name;
  bool durable = false;
  bool auto_delete = false;
  std::string exclusive_owner;  // the owning connection's id; empty when not exclusive
  Map args;                     // as declared, for redeclare comparisons
  QueueArguments arguments;     // parsed from args
};

// Owned by a shared_ptr (the vhost's), so that deliveries not yet acknowledged can refer to it weakly.
class Queue : public std::enable_shared_from_this<Queue> {
 public:
  // `time`, `dead_letterer`, `journal` and `pager` must outlive the queue; dead_letterer may be null (messages are
  // then dropped); journal is null unless the queue is durable and the broker keeps a message store; pager is null
  // where nothing is paged (unit tests).
  Queue(QueueSettings settings, const TimeSource& time, DeadLetterer* dead_letterer = nullptr,
        Journal* journal = nullptr, Pager* pager = nullptr);

  // settings().arguments are the arguments in force: the declared ones (settings().args) under the queue's policy.
  const QueueSettings& settings() const { return settings_; }
  // policy.h: the policy that applies now (null: none), effective at once: a lower max-length drops from the head
  // (drop-head), a lower message-ttl applies to the messages enqueued from now on, as RabbitMQ's.
  // The operator policy (may be null) caps it beside the policy (policy.h).
  void apply_policy(const Policy* policy, const Policy* operator_policy = nullptr);
  const std::string& policy_name() const { return policy_name_; }
  const std::string& operator_policy_name() const { return operator_policy_name_; }
  const std::string& name() const { return settings_.name; }
  const std::string& store_key() const { return store_key_; }  // queue_store_key(vhost, name)
  bool exclusive() const { return !settings_.exclusive_owner.empty(); }

  // Enqueues a published message; false when the queue refused it (x-overflow reject-publish[-dlx], full).
  bool enqueue(MessagePtr message);
  // A message recovered from the message store at startup, at its stored position; `expires_at_ms` on this
  // queue's clock.
  void restore(MessagePtr message, std::uint64_t position, bool redelivered,
               std::optional<std::uint64_t> expires_at_ms);
  // A delivery was acknowledged (or was no_ack): it leaves the queue for good.
  void acknowledge(const QueuedMessage& message);
  // A message that was delivered and not acknowledged goes back to its original position, redelivered.
  void requeue(QueuedMessage message);
  // Several at once, then one dispatch: RabbitMQ's queue takes a channel's requeue of a consumer's deliveries (or
  // of all its deliveries, when the channel closes) as one batch, so the consumers get them in their line's order.
  void requeue(std::vector<QueuedMessage> messages);
  // A delivery settled without requeue: dead-lettered (reason rejected) when the queue has a dead-letter exchange.
  void reject(const QueuedMessage& message);
  // The next ready message, for get, counted as unacknowledged; nullopt when none is ready.
  std::optional<QueuedMessage> take_next();
  // Drops the ready messages; returns how many.
  std::size_t purge();

  // Consumers; dispatch serves them in the order of consumer_line.h.
  void add_consumer(Consumer* consumer, bool exclusive);
  void remove_consumer(Consumer* consumer);
  std::size_t consumer_count() const { return consumers_.size(); }
  bool has_exclusive_consumer() const { return exclusive_consumer_; }
  // An auto_delete queue goes once its last consumer goes, but only if it ever had one.
  bool auto_delete_due() const { return settings_.auto_delete && ever_had_consumer_ && consumers_.empty(); }

  // Hands ready messages to consumers with credit, in turn, until either runs out. Call it whenever a consumer
  // may have become able to take again (credit, an ack): that is when it rejoins the line.
  void dispatch();
  // The queue is being deleted: every consumer is told, and forgotten.
  void cancel_consumers();

  // Expiry: messages whose TTL passed leave from the head; x-expires: the queue is unused for that long.
  void expire_messages();
  void touch() { last_used_ms_ = time_.now_ms(); }  // a declare, a get, a consumer: "used"
  bool expired_unused() const;
  bool has_timers() const {
    return settings_.arguments.message_ttl_ms || settings_.arguments.expires_ms || has_expiring_;
  }

  std::size_t ready_count() const { return ready_.size(); }
  std::uint64_t ready_bytes() const { return ready_bytes_; }
  std::size_t unacked_count() const { return unacked_; }
  const QueueCounters& counters() const { return counters_; }

 private:
  void insert_ready(QueuedMessage message);
  // requeue: a message back at its position, redelivered; then the limits and a dispatch, once per batch.
  void take_back(QueuedMessage message);
  void dispatch_after_requeue();
  QueuedMessage pop_head();
  std::optional<QueuedMessage> pop_for_delivery();
  void dispatch_ready();
  void drop_head_while_over_limits();
  bool over_limits(std::size_t extra_count, std::uint64_t extra_bytes) const;
  Consumer* next_consumer_with_credit();
  QueuedMessage make_queued(MessagePtr message);
  void count_settled() {
    if (unacked_ > 0) --unacked_;
  }  // an unacknowledged delivery was settled
  void count_delivery(const QueuedMessage& m) {
    ++counters_.delivered;
    counters_.redelivered += m.redelivered;
  }
  // The message store hears of persistent messages only ("persistent: Write the message to disk").
  bool journaled(const QueuedMessage& m) const { return journal_ != nullptr && m.message->persistent(); }
  void dead_letter_then_leave(const QueuedMessage& message, DeathReason reason);
  void leave_for_good(const QueuedMessage& m) {
    if (journaled(m)) journal_->removed(*this, m);
  }

  QueueSettings settings_;
  QueueArguments declared_;  // parsed from settings_.args, before any policy
  std::string policy_name_;
  std::string operator_policy_name_;
  std::string store_key_;
  const TimeSource& time_;
  DeadLetterer* dead_letterer_;
  Journal* journal_;
  Pager* pager_;
  ReadyMessages ready_;
  std::uint64_t ready_bytes_ = 0;
  std::uint64_t next_position_ = 1;
  std::size_t unacked_ = 0;
  QueueCounters counters_;
  std::vector<Consumer*> consumers_;   // in the order they subscribed
  ConsumerLine line_;                  // whom dispatch serves next
  Consumer* single_active_ = nullptr;  // x-single-active-consumer: the one served; null without that argument
  bool exclusive_consumer_ = false;
  bool ever_had_consumer_ = false;
  bool dispatching_ = false;
  bool has_expiring_ = false;  // a message with its own expiration was enqueued
  std::uint64_t last_used_ms_;
};

}  // namespace firemq
