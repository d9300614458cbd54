// The spec's "Topology" section: declare and delete exchanges and queues, purge, bind and unbind. The rules
// themselves live in vhost.cpp; the session turns outcomes into replies.
#include "protocol/reply_codes.h"
#include "reference-broker/session/session.h"

namespace firemq {
namespace {

Status check_queue_arguments(const Map& args) {
  if (const Value* type = find(args, "x-queue-type")) {
    const auto* name = type->get_if<std::string>();
    if (name && *name == "stream") {
      // "Reserved for later versions": answered cleanly, as the spec allows (docs/spec-notes.md).
      return make_error(ReplyCode::not_implemented, "x-queue-type 'stream' is reserved for a later protocol version");
    }
  }
  return std::nullopt;
}

// "506 resource-error: Server out of a resource": a bound of config.h or an operator's limit (limits.h) reached.
Error bound_reached(const std::string& what, std::size_t bound, const std::string& name) {
  return make_error(ReplyCode::resource_error,
                    what + " has reached its limit of " + std::to_string(bound) + " (" + name + ")");
}

// Saves the definitions file if durable topology changed. Once the store has failed no save can succeed; a change
// still due then is an older request's (a request that would change durable topology now is refused before it
// does, Session::check_store_for), so it stays due and fails no one else's request: transient topology goes on.
Status save_unless_store_failed(Core& core) {
  const Journal* journal = core.journal();
  if (journal != nullptr && !journal->failure().empty()) return std::nullopt;
  return core.save_topology();
}

}  // namespace

// After the message store failed, the durable topology cannot change until a restart: the log can no longer be
// made durable before the definitions file (docs/durability.md). Refused before anything changes, so that what
// the client is told (541) is what a restart finds.
Status Session::check_store_for(bool durable_change) const {
  const Journal* journal = env_.core.journal();
  if (!durable_change || journal == nullptr || journal->failure().empty()) return std::nullopt;
  return make_error(ReplyCode::internal_error,
                    "durable topology cannot change until the broker restarts: the message store failed: " +
                        journal->failure());
}

// Whether a new exchange, queue or binding fits within the vhost's bounds; checked only for what a request would
// add, so that redeclaring what exists always succeeds.
Status Session::check_room_for_exchange(const op::DeclareExchange& r) const {
  const std::size_t bound = env_.config.bounds.exchanges_per_vhost;
  if (r.passive || vhost_->exchanges().count(r.name) || vhost_->exchanges().size() < bound) return std::nullopt;
  return bound_reached("vhost '" + vhost_name_ + "'", bound, "exchanges per vhost, --max-exchanges");
}

Status Session::check_room_for_queue(const op::DeclareQueue& r) const {
  if (r.passive || (!r.name.empty() && vhost_->queues().count(r.name))) return std::nullopt;
  const std::size_t count = vhost_->queues().size();
  if (const auto& limit = env_.definitions.vhost_limits(vhost_name_).max_queues; limit && count >= *limit) {
    return bound_reached("vhost '" + vhost_name_ + "'", *limit, "max-queues");
  }
  const std::size_t bound = env_.config.bounds.queues_per_vhost;
  if (count >= bound) return bound_reached("vhost '" + vhost_name_ + "'", bound, "queues per vhost, --max-queues");
  return std::nullopt;
}

Status Session::check_room_for_binding(const op::BindFields& r) const {
  const std::size_t bound = env_.config.bounds.bindings_per_vhost;
  if (vhost_->binding_count() < bound || vhost_->is_bound(r)) return std::nullopt;
  return bound_reached("vhost '" + vhost_name_ + "'", bound, "bindings per vhost, --max-bindings");
}

void Session::on_declare_exchange(const op::DeclareExchange& r) {
  if (Status denied = r.passive ? Status() : allowed(Access::configure, "exchange", r.name))
    return refuse(r.rid, *denied);
  if (Status full = check_room_for_exchange(r)) return refuse(r.rid, *full);
  const bool creates = !r.passive && !vhost_->exchanges().count(r.name);
  if (Status failed = check_store_for(creates && r.durable)) return refuse(r.rid, *failed);
  if (Status bad = vhost_->declare_exchange(r)) return refuse(r.rid, *bad);
  if (Status unsaved = save_unless_store_failed(env_.core)) {
    if (creates) vhost_->forget_new_exchange(r.name);  // told it failed: not there now, nor after a restart
    return refuse(r.rid, *unsaved);
  }
  reply_ok(r.rid);
}

void Session::on_delete_exchange(const op::DeleteExchange& r) {
  if (Status denied = allowed(Access::configure, "exchange", r.name)) return refuse(r.rid, *denied);
  if (Status failed = check_store_for(vhost_->is_durable_exchange(r.name))) return refuse(r.rid, *failed);
  if (Status bad = vhost_->delete_exchange(r)) return refuse(r.rid, *bad);
  if (Status unsaved = save_unless_store_failed(env_.core)) return refuse(r.rid, *unsaved);
  reply_ok(r.rid);
}

void Session::on_declare_queue(const op::DeclareQueue& r) {
  if (Status bad = check_queue_arguments(r.args)) return refuse(r.rid, *bad);
  // A server-named queue's name is not known yet; RabbitMQ checks amq.gen-* names the same way, after naming.
  if (Status denied = r.passive ? Status()
                                : allowed(Access::configure, "queue", r.name.empty() ? "amq.gen-" : r.name)) {
    return refuse(r.rid, *denied);
  }
  if (Status full = check_room_for_queue(r)) return refuse(r.rid, *full);
  const bool creates = !r.passive && (r.name.empty() || !vhost_->queues().count(r.name));
  if (Status failed = check_store_for(creates && r.durable && !r.exclusive)) return refuse(r.rid, *failed);
  Result<op::Ok> ok = vhost_->declare_queue(r, exclusive_owner_);
  if (!ok) return refuse(r.rid, ok.error());
  // "durable: Survives a broker restart": the definitions file holds it before the reply goes. If it cannot,
  // the queue goes too: publishes to it would be confirmed, then be gone after a restart.
  if (Status unsaved = save_unless_store_failed(env_.core)) {
    if (creates) vhost_->forget_new_queue(ok->name);
    return refuse(r.rid, *unsaved);
  }
  out_.send(*ok);  // "Reply: ok with name, messages and consumers."
}

void Session::on_delete_queue(const op::DeleteQueue& r) {
  if (Status denied = allowed(Access::configure, "queue", r.name)) return refuse(r.rid, *denied);
  if (Status failed = check_store_for(vhost_->is_durable_queue(r.name))) return refuse(r.rid, *failed);
  Result<std::uint64_t> deleted = vhost_->delete_queue(r, exclusive_owner_);
  if (!deleted) return refuse(r.rid, deleted.error());
  if (Status unsaved = save_unless_store_failed(env_.core)) return refuse(r.rid, *unsaved);
  out_.send(op::Ok{r.rid, "", *deleted, 0, false});  // "ok with messages, the number of messages deleted"
}

void Session::on_purge_queue(const op::PurgeQueue& r) {
  if (Status denied = allowed(Access::read, "queue", r.name)) return refuse(r.rid, *denied);
  Result<std::uint64_t> purged = vhost_->purge_queue(r.name, exclusive_owner_);
  if (!purged) return refuse(r.rid, purged.error());
  out_.send(op::Ok{r.rid, "", *purged, 0, false});
}

void Session::on_bind(const op::BindFields& r, bool bind) {
  // Write on the destination, read on the source, as RabbitMQ.
  const bool to_queue = !r.queue.empty();
  if (Status denied = allowed(Access::write, to_queue ? "queue" : "exchange", to_queue ? r.queue : r.to_exchange)) {
    return refuse(r.rid, *denied);
  }
  if (Status denied = allowed(Access::read, "exchange", r.exchange)) return refuse(r.rid, *denied);
  if (Status full = bind ? check_room_for_binding(r) : Status()) return refuse(r.rid, *full);
  // Kept in the definitions file when both ends are (durable_topology.cpp).
  const bool durable = vhost_->is_durable_exchange(r.exchange) &&
                       (to_queue ? vhost_->is_durable_queue(r.queue) : vhost_->is_durable_exchange(r.to_exchange));
  if (Status failed = check_store_for(durable)) return refuse(r.rid, *failed);
  const bool adds = bind && !vhost_->is_bound(r);
  Status bad = bind ? vhost_->bind(r, exclusive_owner_) : vhost_->unbind(r, exclusive_owner_);
  if (bad) return refuse(r.rid, *bad);
  if (Status unsaved = save_unless_store_failed(env_.core)) {
    if (adds) vhost_->forget_new_binding(r);
    return refuse(r.rid, *unsaved);
  }
  reply_ok(r.rid);
}

}  // namespace firemq
