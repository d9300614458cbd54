// The spec's "Consuming" section: subscribe with credit, deliver, ack and nack, unsubscribe, cancelled, get.
#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "protocol/reply_codes.h"
#include "reference-broker/core/argument_bounds.h"
#include "reference-broker/session/session.h"

namespace firemq {

bool Subscription::can_take() const {
  // A channel-wide prefetch that is used up holds no-ack consumers too, though their deliveries do not count
  // towards it: RabbitMQ's limiter refuses every delivery at the limit (rabbit_limiter's can_send).
  return credit_ > 0 && !session_.deliveries_held();
}

Result<std::int64_t> consumer_priority(const Map& args, const std::string& consumer) {
  const Value* priority = nullptr;
  for (const MapEntry& e : args) {
    if (e.key == Value("x-priority")) priority = &e.value;
  }
  if (priority == nullptr) return std::int64_t{0};
  if (const auto* i = priority->get_if<std::int64_t>()) return *i;
  if (const auto* u = priority->get_if<std::uint64_t>()) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(*u, std::numeric_limits<std::int64_t>::max()));
  }
  return make_error(ReplyCode::precondition_failed,
                    "invalid arg 'x-priority' for " + consumer + ": expected an integer");
}

void Subscription::take(QueuedMessage message, Queue& queue) {
  --credit_;  // "The server sends at most as many deliver frames as the credit granted so far."
  session_.deliver(*this, std::move(message), queue);
}

void Subscription::on_queue_deleted(Queue& queue) { session_.on_subscription_cancelled(*this, queue); }

void Session::on_subscribe(const op::Subscribe& r) {
  if (subscriptions_.count(r.sub)) {
    return refuse(r.rid, make_error(ReplyCode::not_allowed, "sub " + std::to_string(r.sub) + " is already in use"));
  }
  op::Subscribe request = r;
  if (request.tag.empty()) request.tag = "fire-" + std::to_string(r.sub);  // "Defaults to fire-<sub>."
  for (const auto& [sub, s] : subscriptions_) {
    if (s->request().tag == request.tag) {
      return refuse(r.rid, make_error(ReplyCode::not_allowed, "consumer tag '" + request.tag + "' is already in use"));
    }
  }
  if (subscriptions_.size() >= env_.config.bounds.subscriptions) {
    return refuse(r.rid, make_error(ReplyCode::resource_error, "this connection has reached its limit of " +
                                                                   std::to_string(env_.config.bounds.subscriptions) +
                                                                   " subscriptions (--max-subscriptions)"));
  }
  if (Status denied = allowed(Access::read, "queue", r.queue)) return refuse(r.rid, *denied);
  if (Status big = check_arguments(r.args, "consumer '" + request.tag + "'")) return refuse(r.rid, *big);
  Result<std::int64_t> priority = consumer_priority(r.args, "consumer '" + request.tag + "'");
  if (!priority) return refuse(r.rid, priority.error());
  if (r.queue == kDirectReplyTo) {
    Result<std::string> reply_queue = open_reply_queue(r);
    if (!reply_queue) return refuse(r.rid, reply_queue.error());
    request.queue = *reply_queue;
  }
  Result<Queue*> queue = vhost_->usable_queue(request.queue, exclusive_owner_);
  if (!queue) return refuse(r.rid, queue.error());
  Queue& q = **queue;
  // "exclusive: Fail with 405 if the queue has other consumers, and block new ones."
  if (q.has_exclusive_consumer() || (r.exclusive && q.consumer_count() > 0)) {
    return refuse(r.rid, make_error(ReplyCode::resource_locked,
                                    "queue '" + request.queue + "' in vhost '" + vhost_name_ + "' " +
                                        std::string(kInExclusiveUse) + " (it has " +
                                        (q.has_exclusive_consumer() ? "an exclusive consumer)" : "other consumers)")));
  }
  auto subscription = std::make_unique<Subscription>(*this, std::move(request), q.weak_from_this(), *priority);
  Subscription& s = *subscription;
  subscriptions_.emplace(r.sub, std::move(subscription));
  q.add_consumer(&s, r.exclusive);
  reply_ok(r.rid);
  q.dispatch();  // deliveries come after the ok
}

bool Session::single_active_consumer_queue(const std::string& queue) const {
  if (vhost_ == nullptr) return false;
  auto it = vhost_->queues().find(queue);
  return it != vhost_->queues().end() && it->second->settings().arguments.single_active_consumer;
}

// Direct reply-to (RabbitMQ's): a reply consumer must be no-ack, and a session has one at a time (406 otherwise,
// RabbitMQ's words).
Result<std::string> Session::open_reply_queue(const op::Subscribe& r) {
  if (!r.no_ack) return make_error(ReplyCode::precondition_failed, "reply consumer cannot acknowledge");
  if (has_reply_consumer()) return make_error(ReplyCode::precondition_failed, "reply consumer already set");
  reply_queue_ = vhost_->declare_reply_queue(exclusive_owner_);
  return reply_queue_;
}

bool Session::has_reply_consumer() const { return !reply_queue_.empty() && vhost_->queues().count(reply_queue_) != 0; }

void Session::on_unsubscribe(const op::Unsubscribe& r) {
  // Unsubscribing an unknown sub succeeds, as AMQP's basic.cancel of an unknown consumer does.
  end_subscription(r.sub);
  reply_ok(r.rid);
}

void Session::end_subscription(std::uint64_t sub) {
  auto it = subscriptions_.find(sub);
  if (it == subscriptions_.end()) return;
  std::unique_ptr<Subscription> s = std::move(it->second);
  subscriptions_.erase(it);
  // "Unacknowledged deliveries stay unacknowledged until the client acks them or the connection closes."
  if (std::shared_ptr<Queue> q = s->queue()) {
    q->remove_consumer(s.get());
    vhost_->delete_if_auto_delete_due(*q);
  }
}

void Session::on_credit(const op::Credit& r) {
  auto it = subscriptions_.find(r.sub);
  if (it == subscriptions_.end()) return;  // may race a cancelled: ignored (docs/spec-notes.md)
  it->second->add_credit(r.credit);
  if (std::shared_ptr<Queue> q = it->second->queue()) q->dispatch();
}

std::uint64_t Session::track(QueuedMessage& message, Queue& queue, bool no_ack, std::uint64_t sub) {
  const std::uint64_t tag = next_tag_++;
  count(&MessageCounters::delivered);
  if (message.redelivered) count(&MessageCounters::redelivered);
  if (no_ack) {
    queue.acknowledge(message);  // "Messages count as acknowledged once sent."
    // Durable before this connection's next confirm, as an ack is (a delivery may come from another's publish).
    if (Journal* journal = env_.core.journal()) own_records_end_ = journal->end_position();
  } else {
    unacked_.emplace(tag, Unacked{message, queue.weak_from_this(), sub});
  }
  return tag;
}

void Session::deliver(Subscription& subscription, QueuedMessage message, Queue& queue) {
  const op::Subscribe& sub = subscription.request();
  const std::uint64_t tag = track(message, queue, sub.no_ack, sub.sub);
  count(sub.no_ack ? &MessageCounters::consumed_auto_ack : &MessageCounters::consumed_manual_ack);
  const BrokerMessage& m = *message.message;
  const DeliverView deliver{sub.sub, tag, message.redelivered, m.exchange(), m.routing_key(), m.props(), m.headers()};
  out_.send_deliver(deliver, m.body().bytes(), MessageExtras{m.persistent(), m.amqp_headers()});
}

void Session::on_subscription_cancelled(Subscription& subscription, Queue& queue) {
  // "cancelled: The server ended a subscription, for example because its queue was deleted."
  const std::uint64_t sub = subscription.request().sub;
  out_.send(
      op::Cancelled{sub, static_cast<std::uint64_t>(ReplyCode::not_found), "queue '" + queue.name() + "' was deleted"});
  subscriptions_.erase(sub);
}

Result<std::vector<std::uint64_t>> Session::settled_tags(std::uint64_t tag, bool multiple) {
  std::vector<std::uint64_t> tags;
  if (tag >= next_tag_) {
    // Never issued: unknown, with or without multiple.
    return make_error(ReplyCode::precondition_failed, "unknown delivery tag " + std::to_string(tag));
  }
  if (multiple) {
    // "With multiple, acknowledges every unacknowledged delivery with a tag up to and including tag"; tag 0 with
    // multiple means all of them, as in AMQP.
    for (const auto& [t, u] : unacked_) {
      if (tag != 0 && t > tag) break;
      tags.push_back(t);
    }
    if (!tags.empty() || tag == 0) return tags;
  } else if (unacked_.count(tag)) {
    return std::vector<std::uint64_t>{tag};
  }
  // "An unknown tag produces a non-fatal error with code 406."
  return make_error(ReplyCode::precondition_failed, "unknown delivery tag " + std::to_string(tag));
}

void Session::on_ack(const op::Ack& r) {
  Result<std::vector<std::uint64_t>> tags = settled_tags(r.tag, r.multiple);
  if (!tags) return fail(tags.error());
  const bool were_held = deliveries_held();
  for (std::uint64_t tag : *tags) {
    auto it = unacked_.find(tag);
    if (std::shared_ptr<Queue> q = it->second.queue.lock()) q->acknowledge(it->second.message);
    unacked_.erase(it);
    count(&MessageCounters::acknowledged);
  }
  resume_deliveries_if(were_held);
}

void Session::set_shared_prefetch(std::uint64_t count) {
  const bool were_held = deliveries_held();
  shared_prefetch_ = count;
  resume_deliveries_if(were_held);
}

void Session::resume_deliveries_if(bool were_held) {
  if (!were_held || unacked_full()) return;  // a shared prefetch still full refuses again in can_take
  // The queues skipped this session's subscriptions while it was full; they look again now. A copy, since a
  // delivery can end a subscription (its queue deleted by x-expires or a dead-letter cycle).
  std::vector<std::shared_ptr<Queue>> queues;
  for (const auto& [sub, s] : subscriptions_) {
    if (std::shared_ptr<Queue> q = s->queue()) queues.push_back(std::move(q));
  }
  for (const auto& q : queues) q->dispatch();
}

void Session::on_nack(const op::Nack& r) {
  Result<std::vector<std::uint64_t>> tags = settled_tags(r.tag, r.multiple);
  if (!tags) return fail(tags.error());
  const bool were_held = deliveries_held();
  std::vector<Unacked> requeued;
  for (std::uint64_t tag : *tags) {
    auto it = unacked_.find(tag);
    Unacked u = std::move(it->second);
    unacked_.erase(it);
    if (r.requeue) {
      requeued.push_back(std::move(u));  // "delivered again with redelivered: true", at its original position
    } else if (std::shared_ptr<Queue> q = u.queue.lock()) {
      q->reject(u.message);  // "dead-lettered when the queue has a dead-letter exchange, and dropped otherwise"
    }
  }
  requeue_in_batches(std::move(requeued), true);
  resume_deliveries_if(were_held);
}

// Which consumer gets a requeued message next depends on how many the queue takes back before it dispatches
// again. RabbitMQ's channel sends each queue one batch per consumer tag, in the order of the tags (a nack,
// reject or recover: rabbit_channel's foreach_per_queue over {queue, consumer tag}), or one batch of all it holds
// when the channel closes; each batch is dispatched before the next arrives. A message whose queue was deleted
// went with it.
void Session::requeue_in_batches(std::vector<Unacked> settled, bool per_consumer) {
  if (settled.size() == 1) {  // the usual nack or reject: one message, one batch
    if (std::shared_ptr<Queue> q = settled.front().queue.lock()) q->requeue(std::move(settled.front().message));
    return;
  }
  // By tag, then queue; each batch in the order of the delivery tags.
  std::map<std::pair<std::string, Queue*>, std::vector<QueuedMessage>> batches;
  std::map<Queue*, std::shared_ptr<Queue>> alive;  // kept alive until each has its batch
  for (Unacked& u : settled) {
    std::shared_ptr<Queue> q = u.queue.lock();
    if (!q) continue;
    const std::string tag(per_consumer ? tag_of(u.sub) : std::string_view());
    batches[{tag, q.get()}].push_back(std::move(u.message));
    alive.emplace(q.get(), std::move(q));
  }
  for (auto& [key, messages] : batches) key.second->requeue(std::move(messages));
}

std::string_view Session::tag_of(std::uint64_t sub) const {
  auto it = subscriptions_.find(sub);
  return it == subscriptions_.end() ? std::string_view() : std::string_view(it->second->request().tag);
}

void Session::on_get(const op::Get& r) {
  if (Status denied = allowed(Access::read, "queue", r.queue)) return refuse(r.rid, *denied);
  Result<Queue*> queue = vhost_->usable_queue(r.queue, exclusive_owner_);
  if (!queue) return refuse(r.rid, queue.error());
  Queue& q = **queue;
  if (!r.no_ack && unacked_full()) {
    return refuse(r.rid,
                  make_error(ReplyCode::resource_error,
                             "this connection has reached its limit of " + std::to_string(env_.config.bounds.unacked) +
                                 " unacknowledged deliveries (--max-unacked): ack some first"));
  }
  std::optional<QueuedMessage> next = q.take_next();
  if (!next) {
    count(&MessageCounters::get_empty);
    out_.send(op::Ok{r.rid, "", 0, 0, true});  // "When the queue is empty, the reply is ok with empty: true."
    return;
  }
  const std::uint64_t tag = track(*next, q, r.no_ack, 0);
  count(r.no_ack ? &MessageCounters::got_auto_ack : &MessageCounters::got_manual_ack);
  const BrokerMessage& m = *next->message;
  out_.send_message(op::GetOk{r.rid, tag, next->redelivered, std::string(m.exchange()), std::string(m.routing_key()),
                              q.ready_count(), m.props(), m.headers()},
                    m.body().bytes(), MessageExtras{m.persistent(), m.amqp_headers()});
}

void Session::on_connection_lost() {
  awaiting_disk_.clear();  // no one is left to confirm to
  stop_waiting_for_disk();
  if (vhost_ == nullptr) return;
  Vhost& vhost = *vhost_;
  vhost_ = nullptr;  // once only
  ++env_.core.churn().channels_closed;
  if (counting_ == Counting::by_session) env_.core.connection_counts().release(user_, vhost_name_);
  std::vector<std::shared_ptr<Queue>> left;
  // First stop them all: removing one consumer dispatches to the others, and none of them may be this session's.
  for (auto& [sub, s] : subscriptions_) s->stop();
  for (auto& [sub, s] : subscriptions_) {
    if (std::shared_ptr<Queue> q = s->queue()) {
      q->remove_consumer(s.get());
      left.push_back(q);
    }
  }
  subscriptions_.clear();
  // "... or the connection closes, when they are requeued."
  std::vector<Unacked> held;
  for (auto& [tag, u] : unacked_) held.push_back(std::move(u));
  unacked_.clear();
  requeue_in_batches(std::move(held), false);
  for (const auto& q : left) vhost.delete_if_auto_delete_due(*q);
  // "exclusive: ... deleted when it closes"; an AMQP channel's are its connection's, deleted when that ends.
  if (exclusive_owner_ == conn_id_) vhost.on_connection_closed(conn_id_);
}

}  // namespace firemq
