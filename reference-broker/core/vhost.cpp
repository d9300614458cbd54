#include "reference-broker/core/vhost.h"

#include <algorithm>
#include <deque>

#include "protocol/reply_codes.h"
#include "reference-broker/core/argument_bounds.h"

namespace firemq {
namespace {

Error refused(ReplyCode code, std::string msg) { return make_error(code, std::move(msg)); }

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

std::string exchange_label(const std::string& name) {
  return name.empty() ? "the default exchange" : "exchange " + in_quotes(name);
}

bool reserved_name(const std::string& name) { return name.starts_with("amq."); }

// The binding a bind or unbind request names: to its queue, or to its to_exchange.
Binding binding_of(const op::BindFields& r) {
  const bool to_exchange = !r.to_exchange.empty();
  return Binding{to_exchange ? r.to_exchange : r.queue, to_exchange, r.key, r.args};
}

// "Redeclaring an existing exchange with different type, durable, auto_delete or internal fails with 406."
Status compare_exchange(const Exchange& existing, const op::DeclareExchange& r, ExchangeType type) {
  auto mismatch = [&](const char* what, const std::string& received, const std::string& current) {
    return refused(ReplyCode::precondition_failed, "inequivalent arg '" + std::string(what) + "' for " +
                                                       exchange_label(existing.name) + ": received '" + received +
                                                       "' but current is '" + current + "'");
  };
  auto text = [](bool b) { return std::string(b ? "true" : "false"); };
  if (existing.type != type) {
    return mismatch("type", std::string(exchange_type_name(type)), std::string(exchange_type_name(existing.type)));
  }
  if (existing.durable != r.durable) return mismatch("durable", text(r.durable), text(existing.durable));
  if (existing.auto_delete != r.auto_delete)
    return mismatch("auto_delete", text(r.auto_delete), text(existing.auto_delete));
  if (existing.internal != r.internal) return mismatch("internal", text(r.internal), text(existing.internal));
  const Value* was = find(existing.args, "alternate-exchange");
  const Value* now = find(r.args, "alternate-exchange");
  if (!((was == nullptr && now == nullptr) || (was && now && *was == *now))) {
    auto name = [](const Value* v) {
      return v && v->is<std::string>() ? *v->get_if<std::string>() : std::string("none");
    };
    return mismatch("alternate-exchange", name(now), name(was));
  }
  return std::nullopt;
}

}  // namespace

Vhost::Vhost(std::string name, const TimeSource& time) : name_(std::move(name)), time_(time) {
  // The built-ins of every vhost, as RabbitMQ's (docs/spec-notes.md, "Built-in exchanges").
  add_builtin("", ExchangeType::direct);
  add_builtin("amq.direct", ExchangeType::direct);
  add_builtin("amq.fanout", ExchangeType::fanout);
  add_builtin("amq.topic", ExchangeType::topic);
  add_builtin("amq.headers", ExchangeType::headers);
  add_builtin("amq.match", ExchangeType::headers);
}

void Vhost::add_builtin(const std::string& name, ExchangeType type) {
  Exchange e;
  e.name = name;
  e.type = type;
  e.durable = true;
  e.builtin = true;
  apply_policy(exchanges_.emplace(name, std::move(e)).first->second);
}

// Exchanges -------------------------------------------------------------------------------------------------

Status Vhost::declare_exchange(const op::DeclareExchange& r) {
  if (r.name.empty()) return refused(ReplyCode::access_refused, "the default exchange cannot be declared");
  auto it = exchanges_.find(r.name);
  if (r.passive) {
    if (it == exchanges_.end())
      return refused(ReplyCode::not_found, "no " + exchange_label(r.name) + " in vhost " + in_quotes(name_));
    return std::nullopt;
  }
  if (Status text = check_text("exchange name", r.name)) return text;
  if (Status bad = check_arguments(r.args, exchange_label(r.name) + " in vhost " + in_quotes(name_))) return bad;
  const auto type = parse_exchange_type(r.type);
  if (!type) {
    return refused(ReplyCode::precondition_failed,
                   "unknown exchange type '" + r.type + "': expected direct, fanout, topic or headers");
  }
  if (const Value* ae = find(r.args, "alternate-exchange"); ae && !ae->is<std::string>()) {
    return refused(ReplyCode::precondition_failed, "invalid arg 'alternate-exchange' for " + exchange_label(r.name) +
                                                       ": expected a str, got " + std::string(type_name(*ae)));
  }
  if (it != exchanges_.end()) return compare_exchange(it->second, r, *type);
  if (reserved_name(r.name)) {
    return refused(ReplyCode::access_refused,
                   "exchange name " + in_quotes(r.name) + " uses the reserved prefix 'amq.'");
  }
  Exchange e;
  e.name = r.name;
  e.type = *type;
  e.durable = r.durable;
  e.auto_delete = r.auto_delete;
  e.internal = r.internal;
  e.args = r.args;
  apply_policy(exchanges_.emplace(r.name, std::move(e)).first->second);
  note_change(r.durable);
  return std::nullopt;
}

Status Vhost::delete_exchange(const op::DeleteExchange& r) {
  auto it = exchanges_.find(r.name);
  if (it == exchanges_.end()) return std::nullopt;  // deleting what is not there succeeds, as in RabbitMQ
  if (it->second.builtin) {
    return refused(ReplyCode::not_allowed, exchange_label(r.name) + " is built in and cannot be deleted");
  }
  if (r.if_unused && !it->second.bindings.empty()) {
    return refused(ReplyCode::precondition_failed, exchange_label(r.name) + " is in use (it has bindings): if_unused");
  }
  remove_exchange(r.name);
  return std::nullopt;
}

void Vhost::remove_exchange(const std::string& name) {
  auto it = exchanges_.find(name);
  if (it == exchanges_.end()) return;
  note_change(it->second.durable);
  exchanges_.erase(it);
  remove_bindings_to(name, true);
}

void Vhost::remove_bindings_to(const std::string& destination, bool to_exchange) {
  std::vector<std::string> emptied;
  for (auto& [source, e] : exchanges_) {
    const auto before = e.bindings.size();
    std::erase_if(e.bindings,
                  [&](const Binding& b) { return b.destination == destination && b.to_exchange == to_exchange; });
    if (e.bindings.size() != before) note_change(e.durable);
    if (e.bindings.size() != before && e.bindings.empty()) emptied.push_back(source);
  }
  for (const std::string& source : emptied) delete_exchange_if_auto_delete_due(source);
}

void Vhost::delete_exchange_if_auto_delete_due(const std::string& name) {
  // "auto_delete: Deleted when its last binding is removed", its last binding as the source, as in RabbitMQ.
  auto it = exchanges_.find(name);
  if (it != exchanges_.end() && it->second.auto_delete && it->second.bindings.empty() && !it->second.builtin) {
    remove_exchange(name);
  }
}

// Queues ----------------------------------------------------------------------------------------------------

std::string Vhost::server_named_queue(const std::string& prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  while (true) {
    std::string name = prefix;
    for (int i = 0; i < 22; ++i) name += kAlphabet[random_() % 64];
    if (!queues_.count(name)) return name;
  }
}

Result<Queue*> Vhost::usable_queue(const std::string& name, const std::string& conn_id) {
  auto it = queues_.find(name);
  if (it == queues_.end())
    return refused(ReplyCode::not_found, "no queue " + in_quotes(name) + " in vhost " + in_quotes(name_));
  Queue& q = *it->second;
  if (q.exclusive() && q.settings().exclusive_owner != conn_id) {
    return refused(ReplyCode::resource_locked, "queue " + in_quotes(name) + " is exclusive to another connection");
  }
  return &q;
}

Result<op::Ok> Vhost::declare_queue(const op::DeclareQueue& r, const std::string& conn_id) {
  if (!r.passive) {
    const std::string owner = "queue " + in_quotes(r.name.empty() ? "(server-named)" : r.name) + " in vhost " +
                              in_quotes(name_);
    if (Status text = check_text("queue name", r.name)) return std::move(*text);
    if (Status bad = check_arguments(r.args, owner)) return std::move(*bad);
  }
  // Direct reply-to's pseudo-queue exists for a passive declare, as in RabbitMQ, and holds nothing.
  if (r.passive && r.name == kDirectReplyTo) return op::Ok{r.rid, r.name, 0, 0, false};
  if (r.passive || (!r.name.empty() && queues_.count(r.name))) {
    auto q = usable_queue(r.name, conn_id);
    if (!q) return q.error();
    const QueueSettings& s = (*q)->settings();
    // Exclusivity first, as RabbitMQ checks it: a redeclare that differs in it and in durable is 405, not 406.
    if (!r.passive && r.exclusive != (*q)->exclusive()) {
      return refused(ReplyCode::resource_locked,
                     "queue " + in_quotes(r.name) + " exists with exclusive " + ((*q)->exclusive() ? "true" : "false"));
    }
    if (!r.passive && s.durable != r.durable) {
      return refused(ReplyCode::precondition_failed, "inequivalent arg 'durable' for queue " + in_quotes(r.name) +
                                                         ": received '" + (r.durable ? "true" : "false") +
                                                         "' but current is '" + (s.durable ? "true" : "false") + "'");
    }
    if (!r.passive && s.auto_delete != r.auto_delete) {
      return refused(ReplyCode::precondition_failed, "inequivalent arg 'auto_delete' for queue " + in_quotes(r.name) +
                                                         ": received '" + (r.auto_delete ? "true" : "false") +
                                                         "' but current is '" + (s.auto_delete ? "true" : "false") +
                                                         "'");
    }
    if (!r.passive) {
      if (Status bad = compare_queue_arguments(s.args, r.args, r.name, name_)) return std::move(*bad);
    }
    (*q)->touch();  // x-expires: a declare counts as use
    (*q)->expire_messages();
    if (!r.passive) count(&ChurnCounters::queues_declared);
    return op::Ok{r.rid, r.name, (*q)->ready_count(), (*q)->consumer_count(), false};
  }
  if (reserved_name(r.name)) {
    return refused(ReplyCode::access_refused, "queue name " + in_quotes(r.name) + " uses the reserved prefix 'amq.'");
  }
  Result<op::Ok> created = create_queue(r, r.name.empty() ? server_named_queue("amq.gen-") : r.name, conn_id);
  if (created) count(&ChurnCounters::queues_declared);
  return created;
}

std::string Vhost::declare_reply_queue(const std::string& conn_id) {
  op::DeclareQueue reply;
  reply.exclusive = true, reply.auto_delete = true;  // ends with its consumer, or its connection
  return create_queue(reply, server_named_queue(std::string(kDirectReplyTo) + "."), conn_id)->name;
}

Result<op::Ok> Vhost::create_queue(const op::DeclareQueue& r, const std::string& name, const std::string& conn_id) {
  Result<QueueArguments> arguments = parse_queue_arguments(r.args, name, name_);
  if (!arguments) return arguments.error();
  QueueSettings settings{name_,  name,      r.durable, r.auto_delete, r.exclusive ? conn_id : std::string(),
                         r.args, *arguments};
  // "durable: Survives a broker restart"; an exclusive queue ends with its connection, so never does.
  const bool kept = r.durable && !r.exclusive;
  auto queue = std::make_shared<Queue>(std::move(settings), time_, static_cast<DeadLetterer*>(this),
                                       kept ? journal_ : nullptr, pager_);
  // What the store holds for a durable queue of this name comes back into it (at start, and after a restart
  // that could not declare it: docs/durability.md).
  if (kept && journal_ != nullptr) journal_->restore_into(*queue);
  apply_policies(*queue);
  const std::uint64_t messages = queue->ready_count();
  queues_.emplace(name, std::move(queue));
  count(&ChurnCounters::queues_created);
  note_change(kept);
  return op::Ok{r.rid, name, messages, 0, false};
}

Result<std::uint64_t> Vhost::delete_queue(const op::DeleteQueue& r, const std::string& conn_id) {
  if (!queues_.count(r.name)) return std::uint64_t{0};  // "deleting a missing queue is ok with 0", as RabbitMQ
  auto q = usable_queue(r.name, conn_id);
  if (!q) return q.error();
  if (r.if_unused && (*q)->consumer_count() > 0) {
    return refused(ReplyCode::precondition_failed,
                   "queue " + in_quotes(r.name) + " is in use (it has consumers): if_unused");
  }
  if (r.if_empty && (*q)->ready_count() > 0) {
    return refused(ReplyCode::precondition_failed, "queue " + in_quotes(r.name) + " is not empty: if_empty");
  }
  const std::uint64_t messages = (*q)->ready_count();
  remove_queue(r.name);
  return messages;
}

void Vhost::remove_queue(const std::string& name) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return;
  std::shared_ptr<Queue> queue = std::move(it->second);
  queues_.erase(it);
  count(&ChurnCounters::queues_deleted);
  const bool kept = queue->settings().durable && !queue->exclusive();
  if (kept && journal_ != nullptr) journal_->queue_deleted(*queue);
  note_change(kept);
  queue->cancel_consumers();  // "cancelled ... for example because its queue was deleted"
  remove_bindings_to(name, false);
}

void Vhost::forget_new_queue(const std::string& name) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return;
  std::shared_ptr<Queue> queue = std::move(it->second);
  queues_.erase(it);
  count(&ChurnCounters::queues_deleted);
  note_change(queue->settings().durable && !queue->exclusive());
  queue->cancel_consumers();
  remove_bindings_to(name, false);
}

bool Vhost::is_durable_queue(const std::string& name) const {
  auto it = queues_.find(name);
  return it != queues_.end() && it->second->settings().durable && !it->second->exclusive();
}

bool Vhost::is_durable_exchange(const std::string& name) const {
  auto it = exchanges_.find(name);
  return it != exchanges_.end() && it->second.durable;
}

Result<std::uint64_t> Vhost::purge_queue(const std::string& name, const std::string& conn_id) {
  auto q = usable_queue(name, conn_id);
  if (!q) return q.error();
  return static_cast<std::uint64_t>((*q)->purge());
}

void Vhost::delete_if_auto_delete_due(Queue& queue) {
  if (queue.auto_delete_due()) remove_queue(queue.name());
}

void Vhost::tick() {
  std::vector<std::string> unused;
  for (const auto& [name, q] : queues_) {
    if (!q->has_timers()) continue;
    q->expire_messages();
    // "x-expires: the queue is deleted after being unused that long"; its messages are not dead-lettered.
    if (q->expired_unused()) unused.push_back(name);
  }
  for (const std::string& name : unused) remove_queue(name);
}

void Vhost::on_connection_closed(const std::string& conn_id) {
  std::vector<std::string> owned;
  for (const auto& [name, q] : queues_) {
    if (q->settings().exclusive_owner == conn_id) owned.push_back(name);
  }
  for (const std::string& name : owned) remove_queue(name);
}

// Bindings --------------------------------------------------------------------------------------------------

Status Vhost::check_bind_target(const op::BindFields& r, const std::string& conn_id) {
  if (r.queue.empty() == r.to_exchange.empty()) {
    return refused(ReplyCode::precondition_failed, "exactly one of queue and to_exchange must be set");
  }
  if (r.exchange.empty()) return refused(ReplyCode::access_refused, "the default exchange cannot be bound");
  if (Status text = check_text("binding key", r.key)) return text;
  if (Status bad = check_arguments(r.args, "a binding of " + exchange_label(r.exchange))) return bad;
  auto source = exchanges_.find(r.exchange);
  if (source == exchanges_.end())
    return refused(ReplyCode::not_found, "no " + exchange_label(r.exchange) + " in vhost " + in_quotes(name_));
  if (!r.queue.empty()) {
    auto q = usable_queue(r.queue, conn_id);
    if (!q) return q.error();
  } else if (!exchanges_.count(r.to_exchange)) {
    return refused(ReplyCode::not_found, "no " + exchange_label(r.to_exchange) + " in vhost " + in_quotes(name_));
  }
  if (source->second.type == ExchangeType::headers) return check_headers_binding(r.args);
  return std::nullopt;
}

Status Vhost::bind(const op::BindFields& r, const std::string& conn_id) {
  if (Status bad = check_bind_target(r, conn_id)) return bad;
  Binding b = binding_of(r);
  auto& bindings = exchanges_.at(r.exchange).bindings;
  if (std::find(bindings.begin(), bindings.end(), b) == bindings.end()) bindings.push_back(std::move(b));
  note_change(exchanges_.at(r.exchange).durable);
  return std::nullopt;
}

void Vhost::forget_new_binding(const op::BindFields& r) {
  // Not unbind(): that would also delete an auto-delete exchange whose only binding this was.
  auto source = exchanges_.find(r.exchange);
  if (source == exchanges_.end()) return;
  std::erase(source->second.bindings, binding_of(r));
  note_change(source->second.durable);
}

std::size_t Vhost::binding_count() const {
  std::size_t count = 0;
  for (const auto& [name, exchange] : exchanges_) count += exchange.bindings.size();
  return count;
}

bool Vhost::is_bound(const op::BindFields& r) const {
  auto source = exchanges_.find(r.exchange);
  if (source == exchanges_.end()) return false;
  const Binding b = binding_of(r);
  return std::find(source->second.bindings.begin(), source->second.bindings.end(), b) != source->second.bindings.end();
}

Status Vhost::unbind(const op::BindFields& r, const std::string& conn_id) {
  if (r.queue.empty() == r.to_exchange.empty()) {
    return refused(ReplyCode::precondition_failed, "exactly one of queue and to_exchange must be set");
  }
  // The default exchange's bindings are implicit (one per queue): they cannot be removed, as RabbitMQ says.
  if (r.exchange.empty()) return refused(ReplyCode::access_refused, "the default exchange cannot be unbound");
  if (!r.queue.empty() && queues_.count(r.queue)) {
    auto q = usable_queue(r.queue, conn_id);
    if (!q) return q.error();
  }
  auto source = exchanges_.find(r.exchange);
  if (source == exchanges_.end()) return std::nullopt;  // unbinding what is not bound succeeds, as RabbitMQ
  const Binding b = binding_of(r);
  auto& bindings = source->second.bindings;
  const auto before = bindings.size();
  std::erase(bindings, b);
  if (bindings.size() != before) note_change(source->second.durable);
  if (bindings.size() != before && bindings.empty()) delete_exchange_if_auto_delete_due(r.exchange);
  return std::nullopt;
}

// Routing ---------------------------------------------------------------------------------------------------

namespace {

bool binding_matches(const Exchange& e, const Binding& b, const std::string& key, const Map& headers) {
  switch (e.type) {
    case ExchangeType::direct: return b.key == key;
    case ExchangeType::fanout: return true;
    case ExchangeType::topic: return topic_matches(b.key, key);
    case ExchangeType::headers: return headers_match(b.args, headers);
  }
  return false;
}

}  // namespace

Status Vhost::publish_target_refusal(const std::string& exchange) const {
  auto it = exchanges_.find(exchange);
  if (it == exchanges_.end())
    return refused(ReplyCode::not_found, "no " + exchange_label(exchange) + " in vhost " + in_quotes(name_));
  if (it->second.internal)
    return refused(ReplyCode::access_refused, "cannot publish to internal " + exchange_label(exchange));
  return std::nullopt;
}

namespace {

// The message's own routing key, then those its CC and BCC headers add.
template <class F>
void for_each_key(const std::string& key, const std::vector<std::string>& also, F&& f) {
  f(key);
  for (const std::string& k : also) f(k);
}

}  // namespace

Result<Route> Vhost::route(const std::string& exchange, const std::string& key, const Map& headers) const {
  if (Status refusal = publish_target_refusal(exchange)) return std::move(*refusal);
  // Sender-selected distribution (RabbitMQ): the CC and BCC headers' keys route as the message's own key does.
  Result<std::vector<std::string>> also = sender_selected_keys(headers);
  if (!also) return also.error();
  auto it = exchanges_.find(exchange);
  Route route;
  std::set<Queue*> reached;
  if (exchange.empty()) {  // "the default exchange, which routes to the queue named by key"
    for_each_key(key, *also, [&](const std::string& k) {
      auto q = queues_.find(k);
      if (q != queues_.end() && reached.insert(q->second.get()).second) route.queues.push_back(q->second.get());
    });
    return route;
  }
  std::set<std::string> visited{exchange};
  route_keys(it->second, key, *also, headers, visited, reached, route);
  // alternate-exchange: "unroutable messages go to it, chains stop at a repeat"; a message routed through it
  // counts as routed (for mandatory).
  std::set<std::string> alternates{exchange};
  const Exchange* current = &it->second;
  while (route.queues.empty()) {
    const std::string* ae_name = current->alternate_exchange();
    if (ae_name == nullptr || !alternates.insert(*ae_name).second) break;
    auto next = exchanges_.find(*ae_name);
    if (next == exchanges_.end()) break;  // "A missing AE is not an error."
    current = &next->second;
    visited.insert(*ae_name);
    route_keys(*current, key, *also, headers, visited, reached, route);
  }
  return route;
}

Route Vhost::route_again(const std::vector<std::string>& queue_names) const {
  Route route;
  for (const std::string& name : queue_names) {
    auto q = queues_.find(name);
    if (q != queues_.end()) route.queues.push_back(q->second.get());
  }
  return route;
}

// Each key from `start`, every exchange visited once per key (a key is a routing of its own); each queue is reached
// once over all of them.
void Vhost::route_keys(const Exchange& start, const std::string& key, const std::vector<std::string>& also,
                       const Map& headers, std::set<std::string>& visited, std::set<Queue*>& reached,
                       Route& route) const {
  if (also.empty()) return route_from(start, key, headers, visited, reached, route);
  const std::set<std::string> visited_before = visited;
  for_each_key(key, also, [&](const std::string& k) {
    std::set<std::string> visited_by_key = visited_before;
    route_from(start, k, headers, visited_by_key, reached, route);
    visited.insert(visited_by_key.begin(), visited_by_key.end());
  });
}

void Vhost::route_from(const Exchange& start, const std::string& key, const Map& headers,
                       std::set<std::string>& visited, std::set<Queue*>& reached, Route& route) const {
  // Exchange-to-exchange bindings may form loops and diamonds: each exchange is visited once, each queue is
  // reached once.
  std::deque<const Exchange*> pending{&start};
  while (!pending.empty()) {
    const Exchange& e = *pending.front();
    pending.pop_front();
    for (const Binding& b : e.bindings) {
      if (!binding_matches(e, b, key, headers)) continue;
      if (b.to_exchange) {
        auto next = exchanges_.find(b.destination);
        if (next != exchanges_.end() && visited.insert(b.destination).second) pending.push_back(&next->second);
      } else if (auto q = queues_.find(b.destination); q != queues_.end() && reached.insert(q->second.get()).second) {
        route.queues.push_back(q->second.get());
      }
    }
  }
}

const std::string* Exchange::alternate_exchange() const {
  const Value* ae = find(args, "alternate-exchange");
  if (const auto* own = ae ? ae->get_if<std::string>() : nullptr) return own;
  return policy_alternate_exchange ? &*policy_alternate_exchange : nullptr;
}

void Vhost::set_policy(Policy policy) {
  std::string name = policy.name;
  (policy.kind == PolicyKind::user ? policies_ : operator_policies_)
      .insert_or_assign(std::move(name), std::move(policy));
  apply_policies();
}

bool Vhost::delete_policy(const std::string& name, PolicyKind kind) {
  if ((kind == PolicyKind::user ? policies_ : operator_policies_).erase(name) == 0) return false;
  apply_policies();
  return true;
}

void Vhost::apply_policies() {
  for (auto& [name, exchange] : exchanges_) apply_policy(exchange);
  // A lower max-length may dead-letter into other queues of this vhost; no queue is added or removed meanwhile.
  for (auto& [name, queue] : queues_) apply_policies(*queue);
}

void Vhost::apply_policies(Queue& queue) const {
  queue.apply_policy(policy_for(policies_, PolicyTarget::queues, queue.name()),
                     policy_for(operator_policies_, PolicyTarget::queues, queue.name()));
}

void Vhost::apply_policy(Exchange& exchange) const {
  const Policy* policy = policy_for(policies_, PolicyTarget::exchanges, exchange.name);
  exchange.policy = policy ? policy->name : std::string();
  exchange.policy_alternate_exchange = policy ? policy->parsed.alternate_exchange : std::nullopt;
}

}  // namespace firemq
