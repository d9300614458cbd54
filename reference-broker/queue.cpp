#include "reference-broker/queue.h"

#include <algorithm>

namespace firemq {

void Queue::enqueue(MessagePtr message) {
  const std::uint64_t position = next_position_++;
  ready_.emplace(position, QueuedMessage{std::move(message), position, false});
  dispatch();
}

void Queue::requeue(QueuedMessage message) {
  on_settled();
  message.redelivered = true;
  ready_.emplace(message.position, std::move(message));
  dispatch();
}

std::optional<QueuedMessage> Queue::take_next() {
  if (ready_.empty()) return std::nullopt;
  QueuedMessage next = std::move(ready_.begin()->second);
  ready_.erase(ready_.begin());
  ++unacked_;  // as dispatch(): settled at once by the session when the get is no_ack
  return next;
}

std::size_t Queue::purge() {
  const std::size_t purged = ready_.size();
  ready_.clear();
  return purged;
}

void Queue::add_consumer(Consumer* consumer, bool exclusive) {
  consumers_.push_back(consumer);
  exclusive_consumer_ = exclusive_consumer_ || exclusive;
  ever_had_consumer_ = true;
}

void Queue::remove_consumer(Consumer* consumer) {
  auto it = std::find(consumers_.begin(), consumers_.end(), consumer);
  if (it == consumers_.end()) return;
  consumers_.erase(it);
  if (consumers_.empty()) exclusive_consumer_ = false;
  if (round_robin_ >= consumers_.size()) round_robin_ = 0;
}

Consumer* Queue::next_consumer_with_credit() {
  // "messages go round the consumers that have credit; one without credit never holds up the rest"
  for (std::size_t tried = 0; tried < consumers_.size(); ++tried) {
    Consumer* candidate = consumers_[round_robin_];
    round_robin_ = (round_robin_ + 1) % consumers_.size();
    if (candidate->can_take()) return candidate;
  }
  return nullptr;
}

void Queue::dispatch() {
  if (dispatching_) return;  // a consumer's take() may lead back here; the loop below already covers it
  dispatching_ = true;
  while (!ready_.empty() && !consumers_.empty()) {
    Consumer* consumer = next_consumer_with_credit();
    if (consumer == nullptr) break;
    QueuedMessage message = std::move(ready_.begin()->second);
    ready_.erase(ready_.begin());
    ++unacked_;  // the consumer settles it at once if its subscription is no_ack
    consumer->take(std::move(message), *this);
  }
  dispatching_ = false;
}

void Queue::cancel_consumers() {
  std::vector<Consumer*> consumers;
  consumers.swap(consumers_);
  for (Consumer* c : consumers) c->on_queue_deleted(*this);
}

}  // namespace firemq
