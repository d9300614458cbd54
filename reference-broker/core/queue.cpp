#include "reference-broker/core/queue.h"

#include <algorithm>

#include "reference-broker/core/log.h"
#include "reference-broker/core/policy.h"

namespace firemq {
namespace {

// props.expiration: "expiration, in milliseconds" (a uint, present to count; docs/spec-notes.md Q29).
std::optional<std::uint64_t> message_expiration(const BrokerMessage& m) {
  const Value* v = m.props().get("expiration");
  const auto* ms = v ? v->get_if<std::uint64_t>() : nullptr;
  return ms ? std::optional<std::uint64_t>(*ms) : std::nullopt;
}

// props.priority; "a priority above the maximum counts as the maximum"; none is 0.
std::uint8_t message_priority(const BrokerMessage& m, std::uint8_t max_priority) {
  if (max_priority == 0) return 0;
  const Value* v = m.props().get("priority");
  const auto* p = v ? v->get_if<std::uint64_t>() : nullptr;
  return static_cast<std::uint8_t>(std::min<std::uint64_t>(p ? *p : 0, max_priority));
}

}  // namespace

// ---- ReadyMessages ----

void ReadyMessages::push(QueuedMessage m) {
  Level& level = levels_[m.priority];
  if (!m.redelivered && (level.published.empty() || m.position > level.published.back().position)) {
    const bool keeps_expiries = !level.expiries.empty() || m.expires_at_ms;
    if (level.expiries.empty() && m.expires_at_ms) level.expiries.assign(level.published.size(), kNever);
    if (keeps_expiries) level.expiries.push_back(m.expires_at_ms.value_or(kNever));
    level.published.push_back({std::move(m.message), m.position});
  } else {
    level.returned.emplace(m.position, std::move(m));
  }
  ++size_;
}

const ReadyMessages::Level* ReadyMessages::head_level() const {
  for (const auto& [priority, level] : levels_) {
    if (!level.empty()) return &level;
  }
  return nullptr;
}

QueuedMessage ReadyMessages::pop() {
  auto it = levels_.begin();
  while (it->second.empty()) ++it;
  Level& level = it->second;
  --size_;
  if (level.head_is_returned()) {
    QueuedMessage m = std::move(level.returned.begin()->second);
    level.returned.erase(level.returned.begin());
    return m;
  }
  Published& head = level.published.front();
  QueuedMessage m;
  m.message = std::move(head.message);
  m.position = head.position;
  m.priority = it->first;
  if (!level.expiries.empty()) {
    if (level.expiries.front() != kNever) m.expires_at_ms = level.expiries.front();
    level.expiries.pop_front();
  }
  level.published.pop_front();
  return m;
}

std::optional<std::uint64_t> ReadyMessages::head_expires_at() const {
  const Level* level = head_level();
  if (level == nullptr) return std::nullopt;
  if (level->head_is_returned()) return level->returned.begin()->second.expires_at_ms;
  const std::uint64_t at = level->expiries.empty() ? kNever : level->expiries.front();
  return at == kNever ? std::nullopt : std::optional<std::uint64_t>(at);
}

// ---- Queue ----

Queue::Queue(QueueSettings settings, const TimeSource& time, DeadLetterer* dead_letterer, Journal* journal,
             Pager* pager)
    : settings_(std::move(settings)),
      declared_(settings_.arguments),
      store_key_(queue_store_key(settings_.vhost, settings_.name)),
      time_(time),
      dead_letterer_(dead_letterer),
      journal_(journal),
      pager_(pager),
      last_used_ms_(time.now_ms()) {}

void Queue::apply_policy(const Policy* policy, const Policy* operator_policy) {
  policy_name_ = policy ? policy->name : std::string();
  operator_policy_name_ = operator_policy ? operator_policy->name : std::string();
  settings_.arguments = effective_arguments(declared_, settings_.args, policy, operator_policy);
  expire_messages();
  if (settings_.arguments.overflow == Overflow::drop_head) drop_head_while_over_limits();
}

QueuedMessage Queue::make_queued(MessagePtr message) {
  QueuedMessage q;
  q.position = next_position_++;
  q.priority = message_priority(*message, settings_.arguments.max_priority);
  // "the lower of the two wins": the queue's x-message-ttl and the message's expiration.
  std::optional<std::uint64_t> ttl = settings_.arguments.message_ttl_ms;
  if (auto own = message_expiration(*message)) {
    ttl = ttl ? std::min(*ttl, *own) : *own;
    has_expiring_ = true;
  }
  // A peer's expiration is clamped to the longest TTL a queue accepts, so the sum cannot wrap around.
  if (ttl) q.expires_at_ms = time_.now_ms() + std::min(*ttl, kMaxTtlMs);
  q.message = std::move(message);
  return q;
}

void Queue::insert_ready(QueuedMessage message) {
  ready_bytes_ += message.message->body().size();
  ready_.push(std::move(message));
}

QueuedMessage Queue::pop_head() {
  QueuedMessage head = ready_.pop();
  ready_bytes_ -= head.message->body().size();
  return head;
}

std::optional<QueuedMessage> Queue::pop_for_delivery() {
  while (!ready_.empty()) {
    QueuedMessage head = pop_head();
    // A paged-out body comes back into memory first (paging.h).
    IoStatus paged_in = head.message->body().page_in();
    if (paged_in) return head;
    // Nothing can be delivered in its place: the message leaves memory, and the log says so. Its record stays in
    // the message store (no removal is journaled): a persistent message comes back after a restart, when the
    // file may be readable again.
    log_line("queue '" + printable(name()) +
             "' lost a message: its paged-out body could not be read back: " + paged_in.error());
  }
  return std::nullopt;
}

bool Queue::over_limits(std::size_t extra_count, std::uint64_t extra_bytes) const {
  const QueueArguments& a = settings_.arguments;
  return (a.max_length && ready_.size() + extra_count > *a.max_length) ||
         (a.max_length_bytes && ready_bytes_ + extra_bytes > *a.max_length_bytes);
}

bool Queue::enqueue(MessagePtr message) {
  expire_messages();
  const QueueArguments& a = settings_.arguments;
  if (a.overflow != Overflow::drop_head && over_limits(1, message->body().size())) {
    // reject-publish: refused, the publisher is nacked; reject-publish-dlx dead-letters it too.
    if (a.overflow == Overflow::reject_publish_dlx && dead_letterer_) {
      dead_letterer_->dead_letter(*this, make_queued(std::move(message)), DeathReason::maxlen);
    }
    return false;
  }
  QueuedMessage queued = make_queued(std::move(message));
  ++counters_.published;
  if (journaled(queued)) journal_->enqueued(*this, queued);
  MessagePtr may_page = pager_ != nullptr && pager_->paging() ? queued.message : nullptr;
  insert_ready(std::move(queued));
  dispatch_ready();
  // Not all delivered at once (so this message most likely waits), while memory is short: its body may leave
  // memory until its turn comes (write_out skips it if it was delivered and settled by then).
  if (may_page && !ready_.empty()) pager_->page_out_later(may_page);
  drop_head_while_over_limits();
  // TTL 0: what no consumer could take at once expires now.
  expire_messages();
  return true;
}

void Queue::dead_letter_then_leave(const QueuedMessage& message, DeathReason reason) {
  // In this order: the store writes the copy's publish before the original's removal, so that a log cut short
  // between the two (a crash) keeps the message twice rather than not at all.
  if (dead_letterer_) dead_letterer_->dead_letter(*this, message, reason);
  leave_for_good(message);
}

void Queue::drop_head_while_over_limits() {
  // drop-head: "drop or dead-letter from the head, reason maxlen" while over either limit.
  while (!ready_.empty() && over_limits(0, 0)) {
    QueuedMessage dropped = pop_head();
    dead_letter_then_leave(dropped, DeathReason::maxlen);
  }
}

void Queue::expire_messages() {
  if (!has_timers()) return;
  const std::uint64_t now = time_.now_ms();
  // "Expired messages are never delivered or returned by get", removed from the head.
  while (!ready_.empty()) {
    const std::optional<std::uint64_t> expires_at = ready_.head_expires_at();
    if (!expires_at || *expires_at > now) break;
    QueuedMessage expired = pop_head();
    dead_letter_then_leave(expired, DeathReason::expired);
  }
}

bool Queue::expired_unused() const {
  const auto& expires = settings_.arguments.expires_ms;
  return expires && consumers_.empty() && time_.now_ms() - last_used_ms_ >= *expires;
}

void Queue::restore(MessagePtr message, std::uint64_t position, bool redelivered,
                    std::optional<std::uint64_t> expires_at_ms) {
  QueuedMessage q;
  q.priority = message_priority(*message, settings_.arguments.max_priority);
  q.message = std::move(message);
  q.position = position;
  q.redelivered = redelivered;
  q.expires_at_ms = expires_at_ms;
  next_position_ = std::max(next_position_, position + 1);
  if (expires_at_ms) has_expiring_ = true;
  if (pager_ != nullptr) pager_->page_out_later(q.message);  // a long queue recovered need not fit in memory
  insert_ready(std::move(q));
}

void Queue::acknowledge(const QueuedMessage& message) {
  ++counters_.acknowledged;
  count_settled();
  leave_for_good(message);
}

void Queue::requeue(QueuedMessage message) {
  take_back(std::move(message));
  dispatch_after_requeue();
}

void Queue::requeue(std::vector<QueuedMessage> messages) {
  for (QueuedMessage& message : messages) take_back(std::move(message));
  dispatch_after_requeue();
}

void Queue::take_back(QueuedMessage message) {
  count_settled();
  message.redelivered = true;
  insert_ready(std::move(message));
}

void Queue::dispatch_after_requeue() {
  // A requeued message counts against x-max-length again, as RabbitMQ's: with drop-head the head goes (most
  // likely the requeued message itself, back at its position); reject-publish refuses only publishes.
  if (settings_.arguments.overflow == Overflow::drop_head) drop_head_while_over_limits();
  dispatch();
}

void Queue::reject(const QueuedMessage& message) {
  count_settled();
  dead_letter_then_leave(message, DeathReason::rejected);
}

std::optional<QueuedMessage> Queue::take_next() {
  touch();
  expire_messages();
  std::optional<QueuedMessage> head = pop_for_delivery();
  if (!head) return std::nullopt;
  ++unacked_;  // as dispatch(): settled at once by the session when the get is no_ack
  count_delivery(*head);
  if (journaled(*head)) journal_->delivered(*this, *head);
  return head;
}

std::size_t Queue::purge() {
  const std::size_t purged = ready_.size();
  while (!ready_.empty()) leave_for_good(ready_.pop());  // in delivery order, as the store's removals go
  ready_bytes_ = 0;
  return purged;
}

void Queue::add_consumer(Consumer* consumer, bool exclusive) {
  consumers_.push_back(consumer);
  line_.join(consumer);
  // x-single-active-consumer: the first to subscribe while none is active becomes active, whatever its priority
  // (RabbitMQ 3.10's classic queue switches only when the active one goes).
  if (settings_.arguments.single_active_consumer && single_active_ == nullptr) single_active_ = consumer;
  exclusive_consumer_ = exclusive_consumer_ || exclusive;
  ever_had_consumer_ = true;
  touch();
}

void Queue::remove_consumer(Consumer* consumer) {
  auto it = std::find(consumers_.begin(), consumers_.end(), consumer);
  if (it == consumers_.end()) return;
  consumers_.erase(it);
  line_.leave(consumer);
  // The active consumer goes: the next is the waiting one of the highest x-priority, the first of those to have
  // subscribed (RabbitMQ 3.10's rabbit_queue_consumers:get_consumer, the front of its line).
  if (consumer == single_active_) single_active_ = line_.front();
  if (consumers_.empty()) exclusive_consumer_ = false;
  touch();
  dispatch();  // with a single active consumer, the next one takes over now
}

Consumer* Queue::next_consumer_with_credit() {
  // x-single-active-consumer: "one consumer at a time gets messages", and no other while it cannot take.
  if (settings_.arguments.single_active_consumer) {
    return single_active_ != nullptr && single_active_->can_take() ? single_active_ : nullptr;
  }
  // x-priority comes with the line's order: a lower priority is served only once every higher one is blocked.
  return line_.next_to_serve();
}

void Queue::dispatch() {
  line_.unblock_those_that_can_take();
  expire_messages();
  dispatch_ready();
}

void Queue::dispatch_ready() {
  if (dispatching_) return;  // a consumer's take() may lead back here; the loop below already covers it
  dispatching_ = true;
  while (!ready_.empty()) {
    Consumer* consumer = next_consumer_with_credit();
    if (consumer == nullptr) break;
    std::optional<QueuedMessage> head = pop_for_delivery();
    if (!head) break;
    ++unacked_;  // the consumer settles it at once if its subscription is no_ack
    count_delivery(*head);
    if (journaled(*head)) journal_->delivered(*this, *head);
    consumer->take(std::move(*head), *this);
    // "Expired messages are never delivered": the next head may have expired while it waited behind this one,
    // which the expiry before the first delivery could not see. (Not before the first: enqueue hands a TTL 0
    // message to a consumer that can take it at once.)
    expire_messages();
  }
  dispatching_ = false;
}

void Queue::cancel_consumers() {
  std::vector<Consumer*> consumers;
  consumers.swap(consumers_);
  line_ = ConsumerLine();
  single_active_ = nullptr;
  std::stable_sort(consumers.begin(), consumers.end(),
                   [](const Consumer* a, const Consumer* b) { return a->tag() < b->tag(); });
  for (Consumer* c : consumers) c->on_queue_deleted(*this);
}

}  // namespace firemq
