// The spec's "Publishing" section: publish, confirm and return.
#include <algorithm>

#include "protocol/reply_codes.h"
#include "reference-broker/session/session.h"

namespace firemq {

void Session::on_publish(op::Publish& p, Carried carried) {
  const ByteView body = carried.payload;
  has_published_ = true;
  count(&MessageCounters::published);  // flow control pauses connections that publish
  // "seq: Client-assigned sequence number, starting at 1 and increasing by 1." A seq that does not increase
  // cannot be confirmed unambiguously by {upto}: it is nacked (docs/spec-notes.md, "seq discipline").
  if (p.seq != 0 && p.seq <= last_seq_) {
    // Refused with an error frame, not a confirm: that seq was already confirmed (or is still to be), and a
    // second confirm for it would break "exactly once".
    return fail(make_error(ReplyCode::precondition_failed, "publish refused: seq " + std::to_string(p.seq) + " after " +
                                                               std::to_string(last_seq_) + ", seq must increase"));
  }
  if (p.seq != 0) last_seq_ = p.seq;
  // A transaction's publish was checked when it arrived (route_held_publish); the exchange may be gone since.
  if (carried.routed_to == nullptr) {
    if (Status refused = publish_refusal(p)) return reject_publish(p.seq, *refused);
  }
  if (Status no_reply_consumer = direct_reply_to(p)) return reject_publish(p.seq, *no_reply_consumer);
  Result<Route> route = carried.routed_to ? Result<Route>(vhost_->route_again(*carried.routed_to))
                                          : vhost_->route(p.exchange, p.key, p.headers);
  if (!route) return reject_publish(p.seq, route.error());
  remove_blind_copies(
      p.headers);  // RabbitMQ's sender-selected distribution: BCC routes, and is not delivered nor returned
  if (route->queues.empty()) {
    // "Sent for a mandatory publish that no queue received, with code 312 (no-route). The return is sent before
    // the publish's confirm." An unroutable publish is still confirmed: the broker has dealt with it.
    count(p.mandatory ? &MessageCounters::returned : &MessageCounters::unroutable_dropped);
    if (p.mandatory) {
      out_.send_message(op::Return{p.seq, static_cast<std::uint64_t>(ReplyCode::no_route), "NO_ROUTE", p.exchange,
                                   p.key, p.props, p.headers},
                        body, MessageExtras{p.persistent, carried.amqp_headers.get()});
    }
    return confirm(p.seq);
  }
  Journal* journal = env_.core.journal();
  const std::uint64_t log_before = journal ? journal->end_position() : 0;
  const MessagePtr message = BrokerMessage::make(MessageParts{std::move(p.exchange), std::move(p.key),
                                                              std::move(p.props), std::move(p.headers), p.persistent,
                                                              carried.header_bytes, carried.amqp_headers},
                                                 body);
  count(&MessageCounters::routed);
  std::string refused_by;
  for (Queue* queue : route->queues) {
    // "the other queues the message was routed to still get it"
    if (queue->enqueue(message)) {
      count(&MessageCounters::enqueued);
    } else if (refused_by.empty()) {
      refused_by = queue->name();
    }
  }
  // Persistent and routed to a durable queue: the store appended its records, and the confirm waits for them.
  const std::uint64_t log_after = journal ? journal->end_position() : 0;
  // The store gave it an id: it was written for a durable queue (other records, such as a drop-head's removal of
  // an older message, do not make a transient publish wait for the disk).
  const bool needs_disk = message->store_id() != 0 && log_after > log_before;
  if (needs_disk && !journal->failure().empty()) {
    return reject_publish(p.seq,
                          make_error(ReplyCode::internal_error, "message not written to disk: " + journal->failure()));
  }
  if (refused_by.empty()) return confirm(p.seq, needs_disk ? log_after : 0);
  // x-overflow reject-publish: "a confirm nack with a code and msg" (resource-error: the queue is full).
  reject_publish(p.seq, make_error(ReplyCode::resource_error,
                                   "queue '" + refused_by + "' is full and its x-overflow refuses new messages"));
}

Result<std::vector<std::string>> Session::route_held_publish(const op::Publish& p) const {
  if (Status refused = publish_refusal(p)) return std::move(*refused);
  Result<Route> route = vhost_->route(p.exchange, p.key, p.headers);
  if (!route) return route.error();
  std::vector<std::string> names;
  for (const Queue* queue : route->queues) names.push_back(queue->name());
  return names;
}

void Session::publish_routed(op::Publish&& p, ByteView body, std::shared_ptr<const amqp::FieldTable> amqp_headers,
                             const std::vector<std::string>& queue_names) {
  if (state_ != State::open) return;
  Message message(std::move(p));
  on_request(message, {body, 0, std::move(amqp_headers), &queue_names});
}

Status Session::direct_reply_to(op::Publish& p) const {
  for (MapEntry& e : p.props.entries) {
    const auto* reply_to = e.key == Value("reply_to") ? e.value.get_if<std::string>() : nullptr;
    if (reply_to == nullptr || *reply_to != kDirectReplyTo) continue;
    if (!has_reply_consumer()) {
      return make_error(ReplyCode::precondition_failed, "fast reply consumer does not exist");
    }
    e.value = Value(reply_queue_);
  }
  return Status();
}

Status Session::publish_target_refusal(const std::string& exchange) const {
  if (Status denied = allowed(Access::write, "exchange", exchange)) return denied;
  return vhost_->publish_target_refusal(exchange);
}

// RabbitMQ's order (rabbit_channel, basic.publish), which AMQP clients see when a publish is wrong twice: the
// write permission, the exchange (missing, internal), then the properties (user_id, expiration).
Status Session::publish_refusal(const op::Publish& p) const {
  if (Status refused = publish_target_refusal(p.exchange)) return refused;
  // "user_id ... When set, it must equal the connection's user."
  if (const Value* user = p.props.get("user_id");
      user != nullptr && user->is<std::string>() && *user->get_if<std::string>() != user_) {
    return make_error(ReplyCode::precondition_failed, "user_id property set to '" + *user->get_if<std::string>() +
                                                          "' but authenticated user was '" + user_ + "'");
  }
  return Status();
}

void Session::confirm(std::uint64_t seq, std::uint64_t durable_at) {
  if (seq == 0) return;
  count(&MessageCounters::confirmed);
  const bool message_on_disk = durable_at != 0;
  // An earlier request's records (an ack) are durable before this confirm goes (docs/durability.md); after a
  // store failure nothing more becomes durable, and only the publishes that needed the disk themselves wait.
  if (Journal* journal = env_.core.journal();
      journal && journal->failure().empty() && own_records_end_ > journal->durable_position()) {
    durable_at = std::max(durable_at, own_records_end_);
  }
  if (durable_at == 0 && awaiting_disk_.empty()) {
    pending_upto_ = seq;  // sent by flush(), one {upto} for the batch
    return;
  }
  // {upto} confirms every seq up to it, so one waiting for the disk holds back the ones after it.
  awaiting_disk_.push_back({seq, durable_at, message_on_disk});
  if (!waiting_on_journal_) {
    env_.core.journal()->add_waiter(this);
    waiting_on_journal_ = true;
  }
}

void Session::release_durable(std::uint64_t durable_position) {
  while (!awaiting_disk_.empty() && awaiting_disk_.front().durable_at <= durable_position) {
    pending_upto_ = awaiting_disk_.front().seq;
    awaiting_disk_.pop_front();
  }
  if (awaiting_disk_.empty()) stop_waiting_for_disk();
}

void Session::on_durable(std::uint64_t position) {
  release_durable(position);
  flush();
}

void Session::on_store_failed(std::uint64_t durable_position, const std::string& reason) {
  // What reached the disk is confirmed, and so are the publishes that needed no disk of their own (they only
  // waited for an earlier ack's record); what never will reach it is nacked, before the upto that covers it.
  for (const AwaitingDisk& waiting : awaiting_disk_) {
    if (waiting.message_on_disk && waiting.durable_at > durable_position) {
      out_.send(op::Confirm{0, waiting.seq, true, static_cast<std::uint64_t>(ReplyCode::internal_error),
                            "message not written to disk: " + reason});
    } else {
      pending_upto_ = waiting.seq;
    }
  }
  awaiting_disk_.clear();
  stop_waiting_for_disk();
  flush();
}

void Session::stop_waiting_for_disk() {
  if (!waiting_on_journal_) return;
  env_.core.journal()->remove_waiter(this);
  waiting_on_journal_ = false;
}

void Session::reject_publish(std::uint64_t seq, const Error& error) {
  if (seq == 0) {
    // No confirm is wanted, and a publish has no rid: the refusal is an error frame not tied to a request.
    Error e = error;
    e.rid = 0;
    return fail(std::move(e));
  }
  // "A nack for a sequence number is always sent before any upto that covers it": the held-back upto covers
  // only earlier seqs, so the nack may go first.
  out_.send(op::Confirm{0, seq, true, error.code, error.msg});
}

void Session::flush() {
  if (waiting_on_journal_) release_durable(env_.core.journal()->durable_position());
  if (pending_upto_ == 0 || state_ != State::open) return;
  out_.send(op::Confirm{pending_upto_, 0, false, 0, ""});
  pending_upto_ = 0;
}

}  // namespace firemq
