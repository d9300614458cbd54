// A virtual host: its exchanges, queues and bindings, the topology rules of the spec's "Topology" section, and
// routing. Runs on the broker thread only. Errors are values: each refusal carries the reply code the spec (or,
// where it is silent, RabbitMQ) gives, and says what was wrong.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "protocol/error.h"
#include "protocol/messages.h"
#include "reference-broker/core/counters.h"
#include "reference-broker/core/exchange_routing.h"
#include "reference-broker/core/policy.h"
#include "reference-broker/core/queue.h"
#include "reference-broker/core/time_source.h"

namespace firemq {

// The pseudo-queue of RabbitMQ's direct reply-to: consumed from, and named as a publish's reply_to.
inline constexpr std::string_view kDirectReplyTo = "amq.rabbitmq.reply-to";

struct Binding {
  std::string destination;  // a queue, or an exchange when to_exchange
  bool to_exchange = false;
  std::string key;
  Map args;
  bool operator==(const Binding&) const = default;
};

struct Exchange {
  std::string name;
  ExchangeType type = ExchangeType::direct;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  bool builtin = false;
  Map args;
  std::vector<Binding> bindings;                         // this exchange as the source
  std::string policy;                                    // the policy that applies (policy.h); empty: none
  std::optional<std::string> policy_alternate_exchange;  // its alternate-exchange, when args give none
  // The alternate exchange in force: the argument's, else the policy's (the argument wins, as RabbitMQ's).
  const std::string* alternate_exchange() const;
};

// What a publish routed to: each queue once, however many paths lead there.
struct Route {
  std::vector<Queue*> queues;
};

class Vhost : private DeadLetterer {
 public:
  // `time` must outlive the vhost.
  Vhost(std::string name, const TimeSource& time);

  const std::string& name() const { return name_; }
  // This vhost's share of Core::counters(): the management API shows a user the rates of the vhosts it sees.
  MessageCounters& counters() { return counters_; }
  const MessageCounters& counters() const { return counters_; }

  Status declare_exchange(const op::DeclareExchange& request);
  Status delete_exchange(const op::DeleteExchange& request);
  // The ok reply's name, messages and consumers.
  Result<op::Ok> declare_queue(const op::DeclareQueue& request, const std::string& conn_id);
  Result<std::uint64_t> delete_queue(const op::DeleteQueue& request, const std::string& conn_id);
  Result<std::uint64_t> purge_queue(const std::string& name, const std::string& conn_id);
  Status bind(const op::BindFields& request, const std::string& conn_id);
  Status unbind(const op::BindFields& request, const std::string& conn_id);
  // Undoing a declare or bind whose save failed (session_topology.cpp), so that the broker holds what the
  // definitions file holds and no publish is confirmed into a queue a restart would not have. The queue goes
  // without a record in the store: messages it took back from the store stay there, for the next start.
  void forget_new_queue(const std::string& name);
  void forget_new_exchange(const std::string& name) { remove_exchange(name); }
  void forget_new_binding(const op::BindFields& request);
  // Whether a request would change what the definitions file holds (checked before it is made, so that a
  // broker whose store failed can refuse it without a trace).
  bool is_durable_queue(const std::string& name) const;
  bool is_durable_exchange(const std::string& name) const;
  // For the bounds on what a vhost holds (config.h): every binding of every exchange, and whether this one exists.
  std::size_t binding_count() const;
  bool is_bound(const op::BindFields& request) const;

  // A missing or internal exchange refuses a publish before any routing.
  Status publish_target_refusal(const std::string& exchange) const;
  // The queues a message published to `exchange` with `key` and `headers` reaches; 404 for a missing exchange,
  // 403 for an internal one.
  Result<Route> route(const std::string& exchange, const std::string& key, const Map& headers) const;
  // The queues named by an earlier route that still exist now: an AMQP transaction routes a publish at
  // basic.publish and enqueues it at tx.commit, as RabbitMQ's channel does.
  Route route_again(const std::vector<std::string>& queue_names) const;

  // Direct reply-to (RabbitMQ's extension): a consumer of kDirectReplyTo gets a queue of its own, exclusive to its
  // connection and auto-deleted with its consumer, named kDirectReplyTo + "." + 22 random characters: the name
  // its requests carry as reply_to, to which a responder publishes through the default exchange.
  std::string declare_reply_queue(const std::string& conn_id);

  // A queue this connection may use: 404 when missing, 405 when another connection's exclusive queue.
  Result<Queue*> usable_queue(const std::string& name, const std::string& conn_id);
  // Deletes the queue if it is auto_delete and its last consumer went.
  void delete_if_auto_delete_due(Queue& queue);
  // The connection closed: its exclusive queues go.
  void on_connection_closed(const std::string& conn_id);
  // Time passes: expired messages leave their queues, queues unused for their x-expires are deleted.
  void tick();

  // The message store that durable queues write their persistent messages to (null: none).
  void set_journal(Journal* journal) { journal_ = journal; }
  void set_pager(Pager* pager) { pager_ = pager; }  // for the queues declared from now on
  // Where its queues' declares, creations and deletions are counted (the Core's, which outlive a deleted vhost).
  void set_churn(ChurnCounters* churn) { churn_ = churn; }
  // Whether durable exchanges, queues or bindings changed since the last call (the definitions file is due).
  bool take_durable_change() { return std::exchange(durable_changed_, false); }
  // The save after a change failed: the next request or tick tries again.
  void keep_durable_change() { durable_changed_ = true; }

  // Policies and operator policies (policy.h, by policy.kind), by name: one set replaces the one of its name of its
  // kind; either way every queue and exchange of the vhost is given the policies that now apply to it. The caller
  // saves the definitions.
  void set_policy(Policy policy);
  bool delete_policy(const std::string& name, PolicyKind kind = PolicyKind::user);
  const std::map<std::string, Policy>& policies(PolicyKind kind = PolicyKind::user) const {
    return kind == PolicyKind::user ? policies_ : operator_policies_;
  }

  const std::map<std::string, Exchange>& exchanges() const { return exchanges_; }
  const std::map<std::string, std::shared_ptr<Queue>>& queues() const { return queues_; }

 private:
  void add_builtin(const std::string& name, ExchangeType type);
  void dead_letter(const Queue& from, const QueuedMessage& message, DeathReason reason) override;
  void route_keys(const Exchange& start, const std::string& key, const std::vector<std::string>& also,
                  const Map& headers, std::set<std::string>& visited, std::set<Queue*>& reached, Route& route) const;
  void route_from(const Exchange& exchange, const std::string& key, const Map& headers, std::set<std::string>& visited,
                  std::set<Queue*>& reached, Route& route) const;
  void remove_queue(const std::string& name);
  void remove_exchange(const std::string& name);
  void remove_bindings_to(const std::string& destination, bool to_exchange);
  void delete_exchange_if_auto_delete_due(const std::string& name);
  Status check_bind_target(const op::BindFields& request, const std::string& conn_id);
  std::string server_named_queue(const std::string& prefix);
  // declare_queue's creating half, once the request is checked and the name chosen.
  Result<op::Ok> create_queue(const op::DeclareQueue& r, const std::string& name, const std::string& conn_id);
  void note_change(bool durable) { durable_changed_ = durable_changed_ || durable; }
  void apply_policies();
  void apply_policies(Queue& queue) const;
  void apply_policy(Exchange& exchange) const;
  void count(std::uint64_t ChurnCounters::*what) {
    if (churn_ != nullptr) ++(churn_->*what);
  }

  std::string name_;
  MessageCounters counters_;
  const TimeSource& time_;
  std::map<std::string, Exchange> exchanges_;
  std::map<std::string, Policy> policies_;
  std::map<std::string, Policy> operator_policies_;
  // Shared so that unacknowledged deliveries can refer to their queue weakly: a deleted queue is gone for them too.
  std::map<std::string, std::shared_ptr<Queue>> queues_;
  std::mt19937_64 random_{std::random_device{}()};
  Journal* journal_ = nullptr;
  Pager* pager_ = nullptr;
  ChurnCounters* churn_ = nullptr;  // none in a vhost of its own (the unit tests)
  bool durable_changed_ = false;
};

}  // namespace firemq
