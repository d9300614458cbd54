#include "reference-broker/core/policy.h"

#include <algorithm>
#include <vector>

namespace firemq {
namespace {

using Json = nlohmann::json;

const std::map<std::string, PolicyTarget>& targets() {
  static const std::map<std::string, PolicyTarget> kTargets = {
      {"queues", PolicyTarget::queues}, {"exchanges", PolicyTarget::exchanges}, {"all", PolicyTarget::all}};
  return kTargets;
}

std::string target_name(PolicyTarget target) {
  for (const auto& [name, t] : targets()) {
    if (t == target) return name;
  }
  return "all";
}

// One definition key's value, checked as RabbitMQ's policy validators check it; the error names the key.
class DefinitionReader {
 public:
  explicit DefinitionReader(const Json& definition) : definition_(definition) {}

  std::optional<std::uint64_t> integer(const char* key, std::uint64_t min, std::uint64_t max) {
    const Json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer() || (v->is_number_integer() && !v->is_number_unsigned() && v->get<std::int64_t>() < 0) ||
        v->get<std::uint64_t>() < min || v->get<std::uint64_t>() > max) {
      fail(key, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", not " + v->dump());
      return std::nullopt;
    }
    return v->get<std::uint64_t>();
  }

  std::optional<std::string> text(const char* key) {
    const Json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      fail(key, "must be a string, not " + v->dump());
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  std::optional<Overflow> overflow() {
    std::optional<std::string> v = text("overflow");
    if (!v) return std::nullopt;
    if (*v == "drop-head") return Overflow::drop_head;
    if (*v == "reject-publish") return Overflow::reject_publish;
    if (*v == "reject-publish-dlx") return Overflow::reject_publish_dlx;
    fail("overflow", "must be drop-head, reject-publish or reject-publish-dlx, not '" + *v + "'");
    return std::nullopt;
  }

  const std::optional<std::string>& error() const { return error_; }

 private:
  const Json* find(const char* key) const {
    auto it = definition_.find(key);
    return it == definition_.end() || error_ ? nullptr : &*it;
  }
  void fail(const char* key, const std::string& why) {
    if (!error_) error_ = "definition key '" + std::string(key) + "' " + why;
  }

  const Json& definition_;
  std::optional<std::string> error_;
};

const std::vector<std::string> kKnownKeys = {
    "max-length",           "max-length-bytes",        "message-ttl",       "expires", "overflow",
    "dead-letter-exchange", "dead-letter-routing-key", "alternate-exchange"};
// RabbitMQ's operator policy keys that this broker has; its others (max-in-memory-length, max-in-memory-bytes,
// delivery-limit) are refused as keys this broker does not support.
const std::vector<std::string> kOperatorKeys = {"expires", "message-ttl", "max-length", "max-length-bytes", "overflow"};
const std::vector<std::string> kOperatorOnlyElsewhere = {"max-in-memory-length", "max-in-memory-bytes",
                                                         "delivery-limit"};

bool listed(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}
std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// A key the kind of policy cannot have: why, or nullopt when it may.
std::optional<std::string> refused_key(const std::string& key, PolicyKind kind) {
  if (kind == PolicyKind::user) {
    if (listed(kKnownKeys, key)) return std::nullopt;
    return "definition key '" + key + "' is not supported by this broker (supported: " + joined(kKnownKeys) + ")";
  }
  if (listed(kOperatorKeys, key)) return std::nullopt;
  if (listed(kOperatorOnlyElsewhere, key)) {
    return "definition key '" + key +
           "' is not supported by this broker (operator policies here: " + joined(kOperatorKeys) + ")";
  }
  return "definition key '" + key + "' is not allowed in an operator policy (allowed: " + joined(kOperatorKeys) + ")";
}

Result<PolicyDefinition, std::string> parse_definition(const Json& definition, PolicyKind kind) {
  if (!definition.is_object() || definition.empty()) return std::string("'definition' must be a non-empty object");
  for (const auto& [key, value] : definition.items()) {
    if (std::optional<std::string> why = refused_key(key, kind)) return *why;
  }
  DefinitionReader read(definition);
  PolicyDefinition d;
  d.max_length = read.integer("max-length", 0, INT64_MAX);
  d.max_length_bytes = read.integer("max-length-bytes", 0, INT64_MAX);
  d.message_ttl_ms = read.integer("message-ttl", 0, kMaxTtlMs);
  d.expires_ms = read.integer("expires", 1, kMaxTtlMs);  // 0 is invalid, as for x-expires
  d.overflow = read.overflow();
  d.dead_letter_exchange = read.text("dead-letter-exchange");
  d.dead_letter_routing_key = read.text("dead-letter-routing-key");
  d.alternate_exchange = read.text("alternate-exchange");
  if (read.error()) return *read.error();
  return d;
}

// The lower of a client's argument and a policy's value, either of which may be absent.
std::optional<std::uint64_t> lower(std::optional<std::uint64_t> argument, std::optional<std::uint64_t> policy) {
  if (argument && policy) return std::min(*argument, *policy);
  return argument ? argument : policy;
}

}  // namespace

bool Policy::matches(PolicyTarget target, const std::string& object_name) const {
  if (apply_to != PolicyTarget::all && apply_to != target) return false;
  return std::regex_search(object_name, regex);
}

Result<Policy, std::string> parse_policy(const std::string& vhost, const std::string& name, const Json& body,
                                         PolicyKind kind) {
  if (!body.is_object()) return std::string("a policy must be a JSON object");
  if (name.empty()) return std::string("a policy needs a name");
  Policy p;
  p.kind = kind;
  p.vhost = vhost;
  p.name = name;
  const auto pattern = body.find("pattern");
  if (pattern == body.end() || !pattern->is_string())
    return std::string("'pattern' must be a string (a regular expression)");
  p.pattern = pattern->get<std::string>();
  if (p.pattern.size() > kMaxPolicyPattern) {
    return "'pattern' is " + std::to_string(p.pattern.size()) + " bytes, over the limit of " +
           std::to_string(kMaxPolicyPattern);
  }
  try {
    p.regex = std::regex(p.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return "'pattern' is not a regular expression: " + std::string(e.what());
  }
  if (const auto target = body.find("apply-to"); target != body.end()) {
    const auto known = target->is_string() ? targets().find(target->get<std::string>()) : targets().end();
    if (known == targets().end()) return "'apply-to' must be queues, exchanges or all, not " + target->dump();
    p.apply_to = known->second;
    if (kind == PolicyKind::operator_policy && p.apply_to == PolicyTarget::exchanges) {
      return std::string("'apply-to': operator policies apply to queues only");
    }
  }
  if (const auto priority = body.find("priority"); priority != body.end()) {
    if (!priority->is_number_integer()) return "'priority' must be an integer, not " + priority->dump();
    p.priority = priority->get<std::int64_t>();
  }
  const auto definition = body.find("definition");
  if (definition == body.end()) return std::string("'definition' is required");
  Result<PolicyDefinition, std::string> parsed = parse_definition(*definition, kind);
  if (!parsed) return parsed.error();
  p.parsed = std::move(*parsed);
  p.definition = *definition;
  return p;
}

Json to_json(const Policy& policy) {
  return {{"vhost", policy.vhost},       {"name", policy.name},
          {"pattern", policy.pattern},   {"apply-to", target_name(policy.apply_to)},
          {"priority", policy.priority}, {"definition", policy.definition}};
}

const Policy* policy_for(const std::map<std::string, Policy>& policies, PolicyTarget kind,
                         const std::string& object_name) {
  const Policy* best = nullptr;
  // The map is in name order, so on equal priority the first name stays.
  for (const auto& [name, policy] : policies) {
    if ((best == nullptr || policy.priority > best->priority) && policy.matches(kind, object_name)) best = &policy;
  }
  return best;
}

// The policy's definition with the operator policy's keys merged in (rabbit_policies:merge_policy_value): the
// lower of a numeric key, the operator's overflow.
PolicyDefinition merged_definition(const Policy* policy, const Policy* operator_policy) {
  PolicyDefinition d = policy ? policy->parsed : PolicyDefinition{};
  if (operator_policy == nullptr) return d;
  const PolicyDefinition& o = operator_policy->parsed;
  d.max_length = lower(d.max_length, o.max_length);
  d.max_length_bytes = lower(d.max_length_bytes, o.max_length_bytes);
  d.message_ttl_ms = lower(d.message_ttl_ms, o.message_ttl_ms);
  d.expires_ms = lower(d.expires_ms, o.expires_ms);
  if (o.overflow) d.overflow = o.overflow;
  return d;
}

Json effective_definition(const Policy* policy, const Policy* operator_policy) {
  Json out = policy ? policy->definition : Json::object();
  if (operator_policy == nullptr) return out;
  for (const auto& [key, value] : operator_policy->definition.items()) {
    // Every operator key but overflow is a non-negative integer (parse_definition checked it).
    const bool keep_lower = key != "overflow" && out.contains(key);
    out[key] = keep_lower ? Json(std::min(out[key].get<std::uint64_t>(), value.get<std::uint64_t>())) : value;
  }
  return out;
}

QueueArguments effective_arguments(const QueueArguments& declared, const Map& args, const Policy* policy,
                                   const Policy* operator_policy) {
  if (policy == nullptr && operator_policy == nullptr) return declared;
  const PolicyDefinition d = merged_definition(policy, operator_policy);
  QueueArguments a = declared;
  a.max_length = lower(declared.max_length, d.max_length);
  a.max_length_bytes = lower(declared.max_length_bytes, d.max_length_bytes);
  a.message_ttl_ms = lower(declared.message_ttl_ms, d.message_ttl_ms);
  a.expires_ms = lower(declared.expires_ms, d.expires_ms);
  // The client's argument wins where it gave one.
  if (find(args, "x-overflow") == nullptr && d.overflow) a.overflow = *d.overflow;
  if (!declared.dead_letter_exchange && d.dead_letter_exchange) a.dead_letter_exchange = d.dead_letter_exchange;
  if (!declared.dead_letter_routing_key && d.dead_letter_routing_key) {
    a.dead_letter_routing_key = d.dead_letter_routing_key;
  }
  return a;
}

}  // namespace firemq
