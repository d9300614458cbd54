// RabbitMQ's policies: an operator sets queue and exchange arguments by name pattern rather than in each client's
// declare (docs/management.md, "Policies"). A policy belongs to one vhost and has a name, a regular expression
// searched for in the names it may apply to, what it applies to (queues, exchanges or all), a priority and a
// definition. Of the policies that match an object, the one of the highest priority applies, alone (ties: the name
// that sorts first); it applies to the queues and exchanges that exist when it is set, and to those declared later.
//
// The definition's keys are RabbitMQ's, less the x- of the arguments. Where a client's argument names the same
// thing, RabbitMQ's rule decides (rabbit_amqqueue_process's table): the lower of the two for max-length,
// max-length-bytes, message-ttl and expires; the client's argument for overflow, dead-letter-exchange,
// dead-letter-routing-key and alternate-exchange. A key this broker cannot honour (ha-mode, queue-mode, ...) is
// refused by name rather than kept and ignored.
//
// Operator policies are RabbitMQ's caps an administrator puts on the queues of a vhost whatever the users' policies
// say: they apply to queues only, take expires, message-ttl, max-length, max-length-bytes and overflow, and apply
// beside the policy (each kind picks its own by priority): of a numeric key the lower of the two wins (then the
// client's argument, by the rule above), of overflow the operator policy's (rabbit_policies:merge_policy_value).
// No I/O; runs on the broker thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "protocol/error.h"
#include "protocol/value.h"
#include "reference-broker/core/queue_arguments.h"

namespace firemq {

enum class PolicyTarget { queues, exchanges, all };
// An ordinary policy (a policymaker's), or an operator policy (an administrator's cap on queues).
enum class PolicyKind { user, operator_policy };

// The keys of a definition, parsed; absent: the policy does not set it.
struct PolicyDefinition {
  std::optional<std::uint64_t> max_length;
  std::optional<std::uint64_t> max_length_bytes;
  std::optional<std::uint64_t> message_ttl_ms;
  std::optional<std::uint64_t> expires_ms;
  std::optional<Overflow> overflow;
  std::optional<std::string> dead_letter_exchange;
  std::optional<std::string> dead_letter_routing_key;
  std::optional<std::string> alternate_exchange;
};

struct Policy {
  PolicyKind kind = PolicyKind::user;
  std::string vhost;
  std::string name;
  std::string pattern;
  PolicyTarget apply_to = PolicyTarget::all;
  std::int64_t priority = 0;
  nlohmann::json definition;  // as given: what the API shows and the definitions file keeps
  PolicyDefinition parsed;
  std::regex regex;  // the pattern, searched for anywhere in a name (as RabbitMQ's re:run)

  bool matches(PolicyTarget target, const std::string& object_name) const;
};

// The longest pattern taken: a regular expression runs on every declare of the vhost.
inline constexpr std::size_t kMaxPolicyPattern = 1024;

// A policy in RabbitMQ's JSON shape, as the API's PUT body and a definitions file's "policies" entry give it:
// {"pattern": str, "definition": {...}, "priority": int (default 0), "apply-to": "queues" | "exchanges" | "all"
// (default all)}; `vhost` and `name` come from the path or the entry. The error names the field and what is wrong.
// An operator policy: apply-to "queues" or "all" (which means its queues), and the operator keys only.
Result<Policy, std::string> parse_policy(const std::string& vhost, const std::string& name, const nlohmann::json& body,
                                         PolicyKind kind = PolicyKind::user);
// Back to that shape, with vhost and name.
nlohmann::json to_json(const Policy& policy);

// The policy that applies to an object of `kind` named `object_name`, or nullptr.
const Policy* policy_for(const std::map<std::string, Policy>& policies, PolicyTarget kind,
                         const std::string& object_name);

// A queue's arguments under `policy` and `operator_policy` (either may be null): `declared` as parsed from the
// client's `args`, and the policies' keys by RabbitMQ's rules above.
QueueArguments effective_arguments(const QueueArguments& declared, const Map& args, const Policy* policy,
                                   const Policy* operator_policy = nullptr);
// The definition in force of a policy and an operator policy (either may be null), as a queue's
// effective_policy_definition shows it: the policy's keys, and the operator policy's merged by the rule above.
nlohmann::json effective_definition(const Policy* policy, const Policy* operator_policy);

}  // namespace firemq
