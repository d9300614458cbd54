#include "reference-broker/amqp/amqp_channel.h"

#include <algorithm>

#include "protocol/reply_codes.h"
#include "reference-broker/amqp/amqp_interop.h"

namespace firemq {
namespace {

namespace m = amqp::method;
using amqp::Method;

// AMQP 0-9-1's soft errors, raised as channel exceptions (channel.close); every other code is a hard error that
// closes the connection (the spec's "Error codes" constants, as RabbitMQ applies them).
bool is_channel_error(std::uint16_t code) {
  return code == amqp::kContentTooLarge || code == amqp::kNoRoute || code == amqp::kNoConsumers ||
         code == amqp::kAccessRefused || code == amqp::kNotFound || code == amqp::kResourceLocked ||
         code == amqp::kPreconditionFailed;
}

Error hard_error(std::uint16_t code, std::string msg) { return Error{code, std::move(msg), true, 0}; }

}  // namespace

std::string amqp_reply_text(std::uint16_t code, const std::string& msg) {
  std::string name;
  if (const ReplyCodeInfo* info = find_reply_code(code)) name = std::string(info->name);
  if (code == amqp::kChannelError) name = "channel-error";
  if (code == amqp::kUnexpectedFrame) name = "unexpected-frame";
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return c == '-' ? '_' : static_cast<char>(std::toupper(c)); });
  return name.empty() ? msg : name + " - " + msg;
}

const AmqpChannel::Route AmqpChannel::kRoutes[] = {
    {m::kChannelClose, &AmqpChannel::on_channel_close},
    {m::kChannelCloseOk, &AmqpChannel::on_channel_close_ok},
    {m::kChannelFlow, &AmqpChannel::on_channel_flow},
    {m::kAccessRequest, &AmqpChannel::on_access_request},
    {m::kExchangeDeclare, &AmqpChannel::on_exchange_declare},
    {m::kExchangeDelete, &AmqpChannel::on_exchange_delete},
    {m::kExchangeBind, &AmqpChannel::on_exchange_bind},
    {m::kExchangeUnbind, &AmqpChannel::on_exchange_bind},
    {m::kQueueDeclare, &AmqpChannel::on_queue_declare},
    {m::kQueueBind, &AmqpChannel::on_queue_bind},
    {m::kQueueUnbind, &AmqpChannel::on_queue_bind},
    {m::kQueuePurge, &AmqpChannel::on_queue_purge},
    {m::kQueueDelete, &AmqpChannel::on_queue_delete},
    {m::kBasicQos, &AmqpChannel::on_basic_qos},
    {m::kBasicConsume, &AmqpChannel::on_basic_consume},
    {m::kBasicCancel, &AmqpChannel::on_basic_cancel},
    {m::kBasicPublish, &AmqpChannel::on_basic_publish},
    {m::kBasicGet, &AmqpChannel::on_basic_get},
    {m::kBasicAck, &AmqpChannel::on_basic_ack},
    {m::kBasicReject, &AmqpChannel::on_basic_reject},
    {m::kBasicNack, &AmqpChannel::on_basic_nack},
    {m::kBasicRecover, &AmqpChannel::on_basic_recover},
    {m::kBasicRecoverAsync, &AmqpChannel::on_basic_recover},
    {m::kConfirmSelect, &AmqpChannel::on_confirm_select},
    {m::kTxSelect, &AmqpChannel::on_tx_select},
    {m::kTxCommit, &AmqpChannel::on_tx_commit},
    {m::kTxRollback, &AmqpChannel::on_tx_rollback},
};

AmqpChannel::AmqpChannel(std::uint16_t number, SessionEnv env, AmqpChannelHost& host, const std::string& connection,
                         TransportHints hints, op::Hello login)
    : number_(number),
      host_(host),
      login_(std::move(login)),
      max_body_(env.config.max_frame),
      faults_(env.config.amqp_faults) {
  // The AMQP connection is counted against max-connections once, at connection.open (AmqpConnectionCore), not
  // once per channel; and it owns the channel's exclusive queues, which it deletes when it ends.
  session_.emplace(env, static_cast<Outbox&>(*this), connection + " (" + std::to_string(number) + ")", std::move(hints),
                   Session::Counting::by_transport, connection);
}

AmqpChannel::~AmqpChannel() = default;  // the session requeues what it held (Session::~Session)

void AmqpChannel::open() {
  current_ = m::kChannelOpen;
  to_session(login_);  // welcome: channel.open-ok (on send)
}

// --- Frames ------------------------------------------------------------------------------------------------

void AmqpChannel::on_frame(const amqp::FrameView& frame) {
  if (state_ == State::closed) return;
  switch (frame.type) {
    case amqp::FrameType::method: {
      // An open channel outside a publish takes its hot methods in place; everything else, and anything these do
      // not read, goes through the generic codec, which also names what is wrong with a bad method.
      if (state_ == State::open && !publishing_ && on_message_method(frame.payload)) return;
      auto method = amqp::decode_method(frame.payload);
      if (!method) return host_.connection_error(method.error(), {});
      return on_method(*method);
    }
    case amqp::FrameType::header: return on_content_header(frame);
    case amqp::FrameType::body: return on_body(frame);
    case amqp::FrameType::heartbeat: break;  // the connection's: never on a channel
  }
}

void AmqpChannel::on_method(const Method& method) {
  if (state_ == State::closing) {
    // "After sending channel.close, any received methods except close and close-ok MUST be discarded." A close
    // that crossed ours is answered, and the channel still waits for the close-ok of ours, as RabbitMQ does: the
    // client's close-ok must not arrive on a channel that is gone (504, which would end the connection).
    if (method.id() == m::kChannelClose) reply(Method::of(m::kChannelCloseOk));
    if (method.id() == m::kChannelCloseOk || (faults_.crossing_close_ends_channel && method.id() == m::kChannelClose)) {
      state_ = State::closed;
    }
    return;
  }
  if (publishing_) {
    return host_.connection_error(hard_error(amqp::kUnexpectedFrame,
                                             "expected content header for class 60, got " + std::string(method.name())),
                                  method.id());
  }
  current_ = method.id();
  for (const Route& route : kRoutes) {
    if (route.id == method.id()) return (this->*route.handler)(method);
  }
  // A method the server sends, or connection.* on a channel.
  host_.connection_error(hard_error(amqp::kCommandInvalid,
                                    std::string(method.name()) + " is not a method a client sends on a channel"),
                         method.id());
}

bool AmqpChannel::on_message_method(ByteView payload) {
  const amqp::MethodId id = amqp::method_id_of(payload);
  if (id == m::kBasicPublish) {
    auto fields = amqp::read_basic_publish(payload);
    if (!fields) return false;
    current_ = id;
    begin_publish(*fields);
    return true;
  }
  if (id == m::kBasicAck || id == m::kBasicNack || id == m::kBasicReject) {
    auto fields = amqp::read_basic_settle(payload);
    if (!fields) return false;
    current_ = id;
    const std::optional<bool> requeue = id == m::kBasicAck ? std::nullopt : std::optional<bool>(fields->requeue);
    settle(fields->delivery_tag, fields->multiple, requeue);
    return true;
  }
  return false;
}

void AmqpChannel::on_content_header(const amqp::FrameView& frame) {
  if (state_ == State::closing) return;  // the content of a discarded publish
  if (!publishing_ || publishing_->has_header) {
    return host_.connection_error(hard_error(amqp::kUnexpectedFrame, "content header without basic.publish"),
                                  m::kBasicPublish);
  }
  amqp::ContentHeader& header = publishing_->header;  // decoded where it is kept
  if (Status bad = amqp::decode_content_header_into(frame.payload, header)) {
    return host_.connection_error(*bad, m::kBasicPublish);
  }
  if (header.class_id != amqp::kBasicClass) {
    return host_.connection_error(hard_error(amqp::kUnexpectedFrame,
                                             "content header of class " + std::to_string(header.class_id) + ", not 60"),
                                  m::kBasicPublish);
  }
  // A FireMQ body "must fit in one frame": the same limit holds over AMQP, as RabbitMQ's max_message_size.
  const std::size_t max = max_body_;
  if (header.body_size > max) {
    const std::uint64_t size = header.body_size;
    publishing_.reset();
    return close_channel(amqp::kPreconditionFailed,
                         "message size " + std::to_string(size) + " is larger than max size " + std::to_string(max),
                         m::kBasicPublish);
  }
  publishing_->has_header = true;
  if (header.body_size == 0) publish(*std::exchange(publishing_, std::nullopt), {});
}

void AmqpChannel::on_body(const amqp::FrameView& frame) {
  if (state_ == State::closing) return;
  if (!publishing_ || !publishing_->has_header) {
    return host_.connection_error(hard_error(amqp::kUnexpectedFrame, "body frame without content header"),
                                  m::kBasicPublish);
  }
  Bytes& body = publishing_->body;
  if (body.size() + frame.payload.size() > publishing_->header.body_size) {
    return host_.connection_error(hard_error(amqp::kUnexpectedFrame,
                                             "body frames exceed the content header's body size " +
                                                 std::to_string(publishing_->header.body_size)),
                                  m::kBasicPublish);
  }
  // A body in one frame, the common case, is published from where it lies; only one in pieces is gathered.
  if (body.empty() && frame.payload.size() == publishing_->header.body_size) {
    return publish(*std::exchange(publishing_, std::nullopt), frame.payload);
  }
  if (body.empty()) body.reserve(publishing_->header.body_size);
  body.insert(body.end(), frame.payload.begin(), frame.payload.end());
  if (body.size() == publishing_->header.body_size) {
    Publishing done = *std::exchange(publishing_, std::nullopt);
    publish(std::move(done), done.body);  // an rvalue reference: done.body is still there
  }
}

// `body` may lie in `p` (a body gathered from several frames), which is why p is not moved from before it is used.
void AmqpChannel::publish(Publishing&& p, ByteView body) {
  current_ = m::kBasicPublish;
  apply_faults(p.header, faults_);
  auto content = from_amqp_properties(p.header);
  if (!content) {
    // A missing exchange or a missing permission is what RabbitMQ refuses first, whatever the properties.
    Status target = session_ && !faults_.properties_before_exchange ? session_->publish_target_refusal(p.exchange)
                                                                    : Status();
    return fail(target ? *target : content.error(), m::kBasicPublish);
  }
  op::Publish publish;
  // "seq: Client-assigned sequence number, starting at 1 ... 0 means no confirm is wanted": in confirm mode,
  // AMQP numbers the publishes of a channel from 1 too, so the two numbers are the same.
  publish.seq = confirm_mode_ ? ++publish_seq_ : 0;
  publish.exchange = std::move(p.exchange);
  publish.key = std::move(p.routing_key);
  publish.mandatory = p.mandatory;
  publish.persistent = content->persistent;
  publish.props = std::move(content->props);
  publish.headers = std::move(content->headers);
  if (tx_) {
    // RabbitMQ refuses a transaction's publish to a missing or internal exchange, or with another user_id, at
    // once, and routes it at once too: a binding made before tx.commit does not count. Only enqueueing waits.
    if (!session_) return;
    auto routed = session_->route_held_publish(publish);
    if (!routed) return fail(routed.error(), m::kBasicPublish);
    return hold(HeldPublish{std::move(publish), Bytes(body.begin(), body.end()), std::move(content->amqp_headers),
                            std::move(*routed)},
                body.size());
  }
  to_session(std::move(publish), body, std::move(content->amqp_headers));
}

void AmqpChannel::flush() {
  if (session_ && state_ == State::open) session_->flush();
  if (release_session_) end_session();
}

// --- Client methods ------------------------------------------------------------------------------------------

void AmqpChannel::on_channel_close(const Method&) {
  flush();  // the confirms of what was published before the close go before close-ok
  reply(Method::of(m::kChannelCloseOk));
  state_ = State::closed;
  end_session();
}

void AmqpChannel::on_channel_close_ok(const Method&) {
  host_.connection_error(hard_error(amqp::kCommandInvalid, "channel.close-ok without channel.close"),
                         m::kChannelCloseOk);
}

void AmqpChannel::on_channel_flow(const Method& method) {
  // RabbitMQ does not let a client stop deliveries with channel.flow: active=false is refused (540).
  if (!method.flag("active")) return on_not_implemented(method);
  reply(Method::of(m::kChannelFlowOk).set("active", true));
}

void AmqpChannel::on_access_request(const Method&) {
  reply(Method::of(m::kAccessRequestOk).set("reserved_1", std::uint64_t{1}));  // deprecated: any ticket is fine
}

void AmqpChannel::on_exchange_declare(const Method& method) {
  op::DeclareExchange r;
  r.rid = request(method, {});
  r.name = method.text("exchange"), r.type = method.text("type");
  r.durable = method.flag("durable"), r.auto_delete = method.flag("auto_delete");
  r.internal = method.flag("internal"), r.passive = method.flag("passive");
  r.args = to_firemq_map(method.table("arguments"));
  to_session(std::move(r));
}

void AmqpChannel::on_exchange_delete(const Method& method) {
  // FireMQ refuses this with 530, a connection error in AMQP; RabbitMQ's is a channel error, 403.
  const std::string& name = method.text("exchange");
  const bool refused_here = !faults_.system_exchange_delete_as_fire;
  if (refused_here && name.empty())
    return close_channel(amqp::kAccessRefused, "operation not permitted on the default exchange", method.id());
  if (refused_here && name.starts_with("amq.")) {
    return close_channel(amqp::kAccessRefused, "deletion of system exchange '" + name + "' not allowed", method.id());
  }
  op::DeleteExchange r{request(method, {}), name, method.flag("if_unused")};
  to_session(std::move(r));
}

void AmqpChannel::on_exchange_bind(const Method& method) {
  op::BindFields f{request(method, {}),        method.text("source"),      "",
                   method.text("destination"), method.text("routing_key"), to_firemq_map(method.table("arguments"))};
  if (method.id() == m::kExchangeBind) return to_session(op::Bind{f});
  to_session(op::Unbind{f});
}

void AmqpChannel::on_queue_declare(const Method& method) {
  op::DeclareQueue r;
  r.rid = request(method, {});
  r.name = method.text("queue");
  r.durable = method.flag("durable"), r.exclusive = method.flag("exclusive");
  r.auto_delete = method.flag("auto_delete"), r.passive = method.flag("passive");
  r.args = to_firemq_map(method.table("arguments"));
  to_session(std::move(r));
}

void AmqpChannel::on_queue_bind(const Method& method) {
  auto queue = queue_of(method);
  if (!queue) return;
  // With neither a queue nor a routing key, the key is the last declared queue's name too (RabbitMQ).
  const bool both_empty = method.text("queue").empty() && method.text("routing_key").empty();
  op::BindFields f{request(method, {}),
                   method.text("exchange"),
                   *queue,
                   "",
                   both_empty ? *queue : method.text("routing_key"),
                   to_firemq_map(method.table("arguments"))};
  if (method.id() == m::kQueueBind) return to_session(op::Bind{f});
  to_session(op::Unbind{f});
}

void AmqpChannel::on_queue_purge(const Method& method) {
  auto queue = queue_of(method);
  if (!queue) return;
  to_session(op::PurgeQueue{request(method, {}), *queue});
}

void AmqpChannel::on_queue_delete(const Method& method) {
  auto queue = queue_of(method);
  if (!queue) return;
  to_session(op::DeleteQueue{request(method, {}), *queue, method.flag("if_unused"), method.flag("if_empty")});
}

// AMQP 0-9-1: "If the queue name is empty, the server uses the last queue declared on the channel." With none
// declared yet, RabbitMQ closes the channel with 404, and so does this (nullopt: the channel is closing).
std::optional<std::string> AmqpChannel::queue_of(const Method& method) {
  const std::string& name = method.text("queue");
  if (!name.empty() || faults_.empty_queue_name_as_given) return name;
  if (last_declared_queue_.empty()) {
    close_channel(amqp::kNotFound, "no previously declared queue", method.id());
    return std::nullopt;
  }
  return last_declared_queue_;
}

void AmqpChannel::on_basic_qos(const Method& method) {
  // As RabbitMQ 3: global=false is each new consumer's credit, global=true a limit shared by the channel's
  // consumers, in force at once; a global one after a per-consumer one holds beside it, but a per-consumer one
  // lifts the global one, as RabbitMQ 3.10's basic.qos handler does (rabbit_limiter:unlimit_prefetch;
  // docs/spec-notes.md, "AMQP prefetch as credit"). No byte limit, as RabbitMQ.
  if (method.number("prefetch_size") != 0) {
    return host_.connection_error(
        hard_error(amqp::kNotImplemented, "prefetch_size!=0 (" + std::to_string(method.number("prefetch_size")) + ")"),
        m::kBasicQos);
  }
  const auto count = static_cast<std::uint16_t>(method.number("prefetch_count"));
  if (!method.flag("global") || faults_.global_qos_per_consumer) {
    prefetch_ = count;
    if (session_) session_->set_shared_prefetch(0);
  } else if (session_) {
    session_->set_shared_prefetch(count);
  }
  reply(Method::of(m::kBasicQosOk));
}

void AmqpChannel::on_basic_consume(const Method& method) {
  std::string tag = method.text("consumer_tag");
  const std::uint64_t sub = next_sub_++;
  if (tag.empty()) tag = "amq.ctag-" + std::to_string(number_) + "-" + std::to_string(sub);
  if (subs_by_tag_.count(tag) != 0) {
    return host_.connection_error(hard_error(amqp::kNotAllowed, "attempt to reuse consumer tag '" + tag + "'"),
                                  m::kBasicConsume);
  }
  auto queue = queue_of(method);
  if (!queue) return;
  if (method.flag("exclusive") && !faults_.exclusive_consume_on_sac && session_ &&
      session_->single_active_consumer_queue(*queue)) {
    // RabbitMQ: an exclusive consumer would stop the single active consumer's hand-over.
    return close_channel(amqp::kAccessRefused,
                         "queue '" + *queue + "' in vhost '" + session_->vhost() + "' " + std::string(kInExclusiveUse) +
                             " (it has x-single-active-consumer)",
                         method.id());
  }
  const bool no_ack = method.flag("no_ack");
  // A per-consumer prefetch does not apply to no-ack consumers (RabbitMQ; a used-up global one does, in the
  // session); 0 is "no limit". Credit saturates at UINT64_MAX.
  const bool limited = !no_ack && prefetch_ != 0;
  consumers_[sub] = {tag, limited, no_ack};
  subs_by_tag_[tag] = sub;
  op::Subscribe s;
  s.rid = request(method, {method.id(), method.flag("no_wait"), false, tag});
  s.sub = sub, s.queue = *queue, s.no_ack = no_ack, s.exclusive = method.flag("exclusive");
  s.credit = limited ? prefetch_ : UINT64_MAX;
  s.tag = tag;
  s.args = to_firemq_map(method.table("arguments"));
  to_session(std::move(s));
}

void AmqpChannel::on_basic_cancel(const Method& method) {
  const std::string& tag = method.text("consumer_tag");
  auto it = subs_by_tag_.find(tag);
  if (it == subs_by_tag_.end()) {
    // RabbitMQ answers cancel-ok for a tag it does not know (the consumer may have been cancelled already).
    if (!method.flag("no_wait")) reply(Method::of(m::kBasicCancelOk).set("consumer_tag", tag));
    return;
  }
  const std::uint64_t sub = it->second;
  to_session(op::Unsubscribe{request(method, {method.id(), method.flag("no_wait"), false, tag}), sub});
}

void AmqpChannel::on_basic_publish(const Method& method) {
  begin_publish(
      {method.text("exchange"), method.text("routing_key"), method.flag("mandatory"), method.flag("immediate")});
}

void AmqpChannel::begin_publish(const amqp::BasicPublishFields& fields) {
  if (fields.immediate) {
    return host_.connection_error(hard_error(amqp::kNotImplemented, "immediate=true"), m::kBasicPublish);
  }
  publishing_ = Publishing{
      std::string(fields.exchange), std::string(fields.routing_key), fields.mandatory, false, {}, {}};
}

void AmqpChannel::on_basic_get(const Method& method) {
  auto queue = queue_of(method);
  if (!queue) return;
  const bool no_ack = method.flag("no_ack");
  to_session(op::Get{request(method, {method.id(), false, no_ack, ""}), *queue, no_ack});
}

void AmqpChannel::on_basic_ack(const Method& method) {
  settle(method.number("delivery_tag"), method.flag("multiple"), std::nullopt);
}

void AmqpChannel::on_basic_reject(const Method& method) {
  settle(method.number("delivery_tag"), false, method.flag("requeue"));
}

void AmqpChannel::on_basic_nack(const Method& method) {
  settle(method.number("delivery_tag"), method.flag("multiple"), method.flag("requeue"));
}

void AmqpChannel::on_basic_recover(const Method& method) {
  // RabbitMQ requeues every unacknowledged delivery of the channel; requeue=false is not implemented there.
  if (!method.flag("requeue")) return on_not_implemented(method);
  // At once, in tx mode too: RabbitMQ requeues without waiting for tx.commit, and leaves out what the
  // transaction already settled (its tx.commit still acks, nacks or rejects them).
  if (!tx_) {
    if (!unsettled_.empty()) settle_now(unsettled_.rbegin()->first, true, true);
  } else {
    std::vector<std::uint64_t> open;
    for (const auto& [tag, sub] : unsettled_) {
      if (!held_in_transaction(tag)) open.push_back(tag);
    }
    for (std::uint64_t tag : open) settle_now(tag, false, true);
  }
  if (method.id() == m::kBasicRecover && state_ == State::open) reply(Method::of(m::kBasicRecoverOk));
}

void AmqpChannel::on_confirm_select(const Method& method) {
  if (tx_) {  // RabbitMQ: "cannot switch from tx to confirm mode"
    return close_channel(amqp::kPreconditionFailed, "cannot switch from tx to confirm mode", method.id());
  }
  confirm_mode_ = true;
  if (!method.flag("no_wait")) reply(Method::of(m::kConfirmSelectOk));
}

// AMQP's tx class, as RabbitMQ implements it: publishes, acks, nacks and rejects are held by the channel and
// carried out at tx.commit, in order; tx.rollback drops them. tx.commit-ok goes once the committed publishes
// are confirmed: on disk when persistent and routed to a durable queue, as a FireMQ confirm says.
void AmqpChannel::on_tx_select(const Method& method) {
  if (confirm_mode_)
    return close_channel(amqp::kPreconditionFailed, "cannot switch from confirm to tx mode", method.id());
  if (!tx_) tx_.emplace();
  reply(Method::of(m::kTxSelectOk));
}

void AmqpChannel::on_tx_commit(const Method& method) {
  if (!tx_) return close_channel(amqp::kPreconditionFailed, "channel is not transactional", method.id());
  auto held = std::move(tx_->held);
  tx_->held.clear();
  tx_->bytes = 0;
  const std::uint64_t seq_before = publish_seq_;
  for (auto& action : held) {
    if (state_ != State::open) return;  // an error closed the channel: the rest of the transaction is dropped
    if (auto* settlement = std::get_if<Settlement>(&action)) {
      settle(settlement->tag, settlement->multiple, settlement->requeue);
      continue;
    }
    auto& held_publish = std::get<HeldPublish>(action);
    // The confirm machinery says when the commit is done; the client never sees these sequence numbers.
    held_publish.publish.seq = ++publish_seq_;
    to_session(std::move(held_publish));
  }
  // Commits answer in order: one without publishes waits for the commits before it, if any.
  if (publish_seq_ == seq_before && tx_->commits.empty()) return reply(Method::of(m::kTxCommitOk));
  tx_->commits.push_back({seq_before + 1, publish_seq_});
  finish_commits();  // its publishes may all be settled already, during to_session
}

void AmqpChannel::on_tx_rollback(const Method& method) {
  if (!tx_) return close_channel(amqp::kPreconditionFailed, "channel is not transactional", method.id());
  tx_->held.clear();
  tx_->bytes = 0;
  reply(Method::of(m::kTxRollbackOk));
}

void AmqpChannel::hold(std::variant<HeldPublish, Settlement> action, std::size_t bytes) {
  if (tx_->bytes + bytes > kMaxTransactionBytes) {
    return close_channel(
        amqp::kPreconditionFailed,
        "transaction holds more than " + std::to_string(kMaxTransactionBytes) + " bytes: commit more often", current_);
  }
  tx_->bytes += bytes;
  tx_->held.push_back(std::move(action));
}

// Whether a settlement the transaction holds already covers this delivery: a second one would name a tag that
// RabbitMQ has already taken off the channel's unacknowledged list.
bool AmqpChannel::held_in_transaction(std::uint64_t tag) const {
  for (const auto& action : tx_->held) {
    const auto* s = std::get_if<Settlement>(&action);
    if (s && (s->tag == tag || (s->multiple && (s->tag == 0 || s->tag >= tag)))) return true;
  }
  return false;
}

// The commits whose publishes are all settled now: tx.commit-ok, or, when a full reject-publish queue refused one
// of them, channel.close 406 "partial tx completion" (RabbitMQ's answer: the other queues kept the message).
void AmqpChannel::finish_commits() {
  AmqpTransaction& tx = *tx_;
  // A nack comes before any upto that covers it ("A nack for a sequence number is always sent before any upto
  // that covers it"), so the nacked ones just after the settled ones are settled too.
  while (tx.nacked.count(tx.settled_seq + 1)) ++tx.settled_seq;
  while (!tx.commits.empty() && tx.commits.front().last_seq <= tx.settled_seq) {
    const AmqpTransaction::Commit done = tx.commits.front();
    tx.commits.pop_front();
    const auto refused = tx.nacked.lower_bound(done.first_seq);
    const bool partial = refused != tx.nacked.end() && *refused <= done.last_seq;
    tx.nacked.erase(tx.nacked.begin(), tx.nacked.upper_bound(done.last_seq));
    if (partial) return close_channel(amqp::kPreconditionFailed, "partial tx completion", m::kTxCommit);
    reply(Method::of(m::kTxCommitOk));
  }
}

void AmqpChannel::on_not_implemented(const Method& method) {
  host_.connection_error(hard_error(amqp::kNotImplemented, std::string(method.name()) + " is not implemented"),
                         method.id());
}

// --- Towards the session -------------------------------------------------------------------------------------

std::uint64_t AmqpChannel::request(const Method& m, Pending pending) {
  pending.method = m.id();
  if (pending.method != m::kBasicConsume && pending.method != m::kBasicCancel && pending.method != m::kBasicGet) {
    pending.no_wait = m.flag("no_wait");
  }
  const std::uint64_t rid = next_rid_++;
  pending_[rid] = std::move(pending);
  return rid;
}

void AmqpChannel::to_session(Message message, ByteView payload, std::shared_ptr<const amqp::FieldTable> amqp_headers) {
  if (!session_) return;
  session_->on_message(std::move(message), payload, 0, std::move(amqp_headers));
  if (release_session_) end_session();
}

void AmqpChannel::to_session(HeldPublish held) {
  if (faults_.tx_routes_at_commit) return to_session(std::move(held.publish), held.body, std::move(held.amqp_headers));
  if (!session_) return;
  session_->publish_routed(std::move(held.publish), held.body, std::move(held.amqp_headers), held.routed_to);
  if (release_session_) end_session();
}

// basic.ack, basic.nack, basic.reject: `requeue` absent for an ack. Delivery tag 0 with multiple is "every
// outstanding delivery" in AMQP.
void AmqpChannel::settle(std::uint64_t tag, bool multiple, std::optional<bool> requeue) {
  if (tx_ && current_ != m::kTxCommit) {
    // An unknown tag is refused at once, as outside a transaction (RabbitMQ), not at tx.commit.
    const bool known = (tag == 0 && multiple) || (unsettled_.count(tag) != 0 && !held_in_transaction(tag));
    if (!known && !faults_.tx_unknown_tag_at_commit) {
      return close_channel(amqp::kPreconditionFailed, "unknown delivery tag " + std::to_string(tag), current_);
    }
    return hold(Settlement{tag, multiple, requeue}, 0);
  }
  settle_now(tag, multiple, requeue);
}

void AmqpChannel::settle_now(std::uint64_t tag, bool multiple, std::optional<bool> requeue) {
  if (tag == 0 && multiple) {
    if (unsettled_.empty()) return;
    tag = unsettled_.rbegin()->first;
  }
  if (requeue) {
    to_session(op::Nack{tag, multiple, *requeue});
  } else {
    to_session(op::Ack{tag, multiple});
  }
  return_credit(tag, multiple);
}

// Prefetch as credit: each settled delivery of a limited consumer gives it one more. The settled ones leave
// unsettled_ first; the credit goes after, since giving it may deliver (or end the session) at once.
void AmqpChannel::return_credit(std::uint64_t tag, bool multiple) {
  auto it = multiple ? unsettled_.begin() : unsettled_.find(tag);
  const auto last = multiple ? unsettled_.upper_bound(tag) : (it == unsettled_.end() ? it : std::next(it));
  credit_to_return_.clear();  // a member, so that a settlement allocates nothing once it has grown
  while (it != last) {
    const std::uint64_t sub = it->second;
    it = unsettled_.erase(it);
    auto consumer = consumers_.find(sub);
    if (consumer == consumers_.end() || !consumer->second.limited) continue;
    if (credit_to_return_.empty() || credit_to_return_.back().first != sub) credit_to_return_.push_back({sub, 0});
    ++credit_to_return_.back().second;
  }
  for (const auto& [sub, credit] : credit_to_return_) to_session(op::Credit{sub, credit});
}

// --- From the session ----------------------------------------------------------------------------------------

void AmqpChannel::dispatch(const Message& message, ByteView payload, const MessageExtras& extras) {
  if (state_ == State::closed) return;
  std::visit(
      [&](const auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, op::Welcome>) {
          state_ = State::open;
          reply(Method::of(m::kChannelOpenOk));
        } else if constexpr (std::is_same_v<T, op::Ok>) {
          on_ok(op);
        } else if constexpr (std::is_same_v<T, op::Error>) {
          on_error(op);
        } else if constexpr (std::is_same_v<T, op::Deliver>) {
          on_deliver(DeliverView{op.sub, op.tag, op.redelivered, op.exchange, op.key, op.props, op.headers}, payload,
                     extras);
        } else if constexpr (std::is_same_v<T, op::GetOk>) {
          on_get_ok(op, payload, extras);
        } else if constexpr (std::is_same_v<T, op::Return>) {
          on_return(op, payload, extras);
        } else if constexpr (std::is_same_v<T, op::Confirm>) {
          on_confirm(op);
        } else if constexpr (std::is_same_v<T, op::Cancelled>) {
          on_cancelled(op);
        }
        // flow: the connection says connection.blocked; close, pong: the connection's own, not the session's.
      },
      message);
}

void AmqpChannel::on_ok(const op::Ok& ok) {
  auto it = pending_.find(ok.rid);
  if (it == pending_.end()) return;
  const Pending p = std::move(it->second);
  pending_.erase(it);
  if (p.method == m::kBasicCancel) forget_consumer(p.consumer_tag);
  if (p.no_wait) return;
  const auto ok_of = [](amqp::MethodId id) {
    return Method::of({id.class_id, static_cast<std::uint16_t>(id.method_id + 1)});
  };
  if (p.method == m::kQueueDeclare) {
    last_declared_queue_ = ok.name;
    return reply(
        ok_of(p.method).set("queue", ok.name).set("message_count", ok.messages).set("consumer_count", ok.consumers));
  }
  if (p.method == m::kQueuePurge || p.method == m::kQueueDelete)
    return reply(ok_of(p.method).set("message_count", ok.messages));
  if (p.method == m::kBasicConsume || p.method == m::kBasicCancel)
    return reply(ok_of(p.method).set("consumer_tag", p.consumer_tag));
  if (p.method == m::kBasicGet) return reply(Method::of(m::kBasicGetEmpty));           // "empty: true"
  if (p.method == m::kExchangeUnbind) return reply(Method::of(m::kExchangeUnbindOk));  // 40.51, not 40.41
  reply(ok_of(p.method));
}

void AmqpChannel::on_error(const op::Error& error) {
  amqp::MethodId method = current_;
  if (auto it = pending_.find(error.rid); error.rid != 0 && it != pending_.end()) {
    method = it->second.method;
    if (method == m::kBasicConsume) forget_consumer(it->second.consumer_tag);  // it was never created
    pending_.erase(it);
  }
  std::uint16_t code = static_cast<std::uint16_t>(error.code);
  // A full reject-publish queue drops a publish that wants no confirm, silently, in RabbitMQ: a FireMQ error
  // frame, but no AMQP error (506 would close the whole connection).
  if (method == m::kBasicPublish && code == amqp::kResourceError && !error.fatal && !faults_.reject_publish_closes) {
    return;
  }
  // A consumer refused for an exclusive consumer: 405 on FireMQ, 403 access-refused in AMQP (RabbitMQ).
  if (method == m::kBasicConsume && code == amqp::kResourceLocked && !faults_.exclusive_consumer_conflict_405 &&
      error.msg.find(kInExclusiveUse) != std::string::npos) {
    code = amqp::kAccessRefused;
  }
  fail(Error{code, error.msg, error.fatal, error.rid}, method);
}

void AmqpChannel::send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& extras) {
  if (state_ != State::closed) on_deliver(deliver, body, extras);
}

// basic.deliver and its content, encoded straight onto the connection's buffer (message_methods.h).
void AmqpChannel::on_deliver(const DeliverView& d, ByteView body, const MessageExtras& extras) {
  auto it = consumers_.find(d.sub);
  if (it == consumers_.end()) return;
  if (!it->second.no_ack) unsettled_.insert_or_assign(unsettled_.end(), d.tag, d.sub);  // tags grow: at the end
  const amqp::ContentHeader header = content_header_of(d.props, d.headers, extras);
  host_.wire().queue([&](Bytes& out) {
    amqp::append_basic_deliver(out, number_, it->second.tag, d.tag, d.redelivered, d.exchange, d.key);
    amqp::append_content(out, number_, header, body, host_.frame_max());
  });
}

void AmqpChannel::on_get_ok(const op::GetOk& g, ByteView body, const MessageExtras& extras) {
  auto it = pending_.find(g.rid);
  if (it == pending_.end()) return;
  if (!it->second.no_ack) unsettled_[g.tag] = 0;
  pending_.erase(it);
  Method get_ok = Method::of(m::kBasicGetOk);
  get_ok.set("delivery_tag", g.tag).set("redelivered", g.redelivered).set("exchange", g.exchange);
  get_ok.set("routing_key", g.key).set("message_count", g.remaining);
  send_content(get_ok, g.props, g.headers, body, extras);
}

void AmqpChannel::on_return(const op::Return& r, ByteView body, const MessageExtras& extras) {
  Method ret = Method::of(m::kBasicReturn);
  // RabbitMQ's reply text for an unroutable mandatory message is "NO_ROUTE".
  ret.set("reply_code", r.code).set("reply_text", std::string(r.code == amqp::kNoRoute ? "NO_ROUTE" : r.msg));
  ret.set("exchange", r.exchange).set("routing_key", r.key);
  send_content(ret, r.props, r.headers, body, extras);
}

void AmqpChannel::on_confirm(const op::Confirm& c) {
  if (tx_) {
    // A transaction's own publishes: the commit is done once each of them is confirmed or nacked.
    if (c.nack) {
      tx_->nacked.insert(c.seq);
    } else {
      tx_->settled_seq = std::max(tx_->settled_seq, c.upto);
    }
    return finish_commits();
  }
  // A publish refused before routing (a missing or internal exchange, another user_id) closes the channel in
  // RabbitMQ, confirm mode or not; only a full queue or the disk nacks it.
  const auto refused_before_routing = [](std::uint64_t code) {
    return code == amqp::kAccessRefused || code == amqp::kNotFound || code == amqp::kPreconditionFailed;
  };
  if (c.nack && refused_before_routing(c.code) && !faults_.nack_refused_publishes) {
    return close_channel(static_cast<std::uint16_t>(c.code), c.msg, m::kBasicPublish);
  }
  // {upto: n} is AMQP's basic.ack with multiple; a FireMQ nack names one seq.
  if (c.nack) return reply(Method::of(m::kBasicNack).set("delivery_tag", c.seq));
  host_.wire().queue([&](Bytes& out) { amqp::append_basic_ack(out, number_, c.upto, true); });
}

void AmqpChannel::on_cancelled(const op::Cancelled& c) {
  auto it = consumers_.find(c.sub);
  if (it == consumers_.end()) return;
  const std::string tag = it->second.tag;
  forget_consumer(tag);
  // RabbitMQ's consumer cancel notification: basic.cancel from the server, for clients that asked for it.
  if (host_.consumer_cancel_notify()) reply(Method::of(m::kBasicCancel).set("consumer_tag", tag).set("no_wait", true));
}

// --- Towards the client --------------------------------------------------------------------------------------

void AmqpChannel::reply(const Method& method) {
  host_.wire().write(amqp::encode_frame(amqp::FrameType::method, number_, amqp::encode_method(method)));
}

void AmqpChannel::send_content(const Method& method, const Props& props, const Map& headers, ByteView body,
                               const MessageExtras& extras) {
  const amqp::ContentHeader header = content_header_of(props, headers, extras);
  host_.wire().queue([&](Bytes& out) {
    const Bytes encoded = amqp::encode_method(method);  // basic.get-ok and basic.return: not the hot path
    const std::size_t at = amqp::begin_frame(out, amqp::FrameType::method, number_);
    out.insert(out.end(), encoded.begin(), encoded.end());
    amqp::end_frame(out, at);
    amqp::append_content(out, number_, header, body, host_.frame_max());
  });
}

amqp::ContentHeader AmqpChannel::content_header_of(const Props& props, const Map& headers,
                                                   const MessageExtras& extras) const {
  amqp::ContentHeader header = to_amqp_properties(props, headers, extras.persistent,
                                                  faults_.lossy_header_types ? nullptr : extras.amqp_headers);
  apply_faults(header, faults_);
  return header;
}

void AmqpChannel::fail(const Error& error, amqp::MethodId method) {
  if (is_channel_error(error.code) && !error.fatal) return close_channel(error.code, error.msg, method);
  host_.connection_error(Error{error.code, error.msg, true, 0}, method);
}

// A channel exception: channel.close to the client, then only close and close-ok are read. What the session held
// is released now (its unacknowledged deliveries are requeued), as RabbitMQ releases a closed channel's.
void AmqpChannel::close_channel(std::uint16_t code, const std::string& text, amqp::MethodId method) {
  if (state_ != State::open && state_ != State::opening) return;
  Method close = Method::of(m::kChannelClose);
  close.set("reply_code", std::uint64_t{code}).set("reply_text", amqp_reply_text(code, text));
  close.set("class_id", std::uint64_t{method.class_id}).set("method_id", std::uint64_t{method.method_id});
  reply(close);
  state_ = State::closing;
  publishing_.reset();
  release_session_ = true;
}

// Its unsettled deliveries stay unacknowledged, but give no more credit: the consumer is gone.
void AmqpChannel::forget_consumer(const std::string& tag) {
  auto it = subs_by_tag_.find(tag);
  if (it == subs_by_tag_.end()) return;
  consumers_.erase(it->second);
  subs_by_tag_.erase(it);
}

void AmqpChannel::end_session() {
  release_session_ = false;
  session_.reset();
  pending_.clear();
  consumers_.clear();
  subs_by_tag_.clear();
  unsettled_.clear();
}

}  // namespace firemq
