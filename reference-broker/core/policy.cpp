#include "reference-broker/core/policy.h"

#include <algorithm>

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

constexpr const char* kKnownKeys[] = {"max-length",       "max-length-bytes",     "message-ttl",
                                      "expires",          "overflow",             "dead-letter-exchange",
                                      "dead-letter-routing-key", "alternate-exchange"};

Result<PolicyDefinition, std::string> parse_definition(const Json& definition) {
  if (!definition.is_object() || definition.empty()) return std::string("'definition' must be a non-empty object");
  for (const auto& [key, value] : definition.items()) {
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) == std::end(kKnownKeys)) {
      std::string known;
      for (const char* k : kKnownKeys) known += (known.empty() ? "" : ", ") + std::string(k);
      return "definition key '" + key + "' is not supported by this broker (supported: " + known + ")";
    }
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

bool Policy::matches(PolicyTarget kind, const std::string& object_name) const {
  if (apply_to != PolicyTarget::all && apply_to != kind) return false;
  return std::regex_search(object_name, regex);
}

Result<Policy, std::string> parse_policy(const std::string& vhost, const std::string& name, const Json& body) {
  if (!body.is_object()) return std::string("a policy must be a JSON object");
  if (name.empty()) return std::string("a policy needs a name");
  Policy p;
  p.vhost = vhost;
  p.name = name;
  const auto pattern = body.find("pattern");
  if (pattern == body.end() || !pattern->is_string()) return std::string("'pattern' must be a string (a regular expression)");
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
  }
  if (const auto priority = body.find("priority"); priority != body.end()) {
    if (!priority->is_number_integer()) return "'priority' must be an integer, not " + priority->dump();
    p.priority = priority->get<std::int64_t>();
  }
  const auto definition = body.find("definition");
  if (definition == body.end()) return std::string("'definition' is required");
  Result<PolicyDefinition, std::string> parsed = parse_definition(*definition);
  if (!parsed) return parsed.error();
  p.parsed = std::move(*parsed);
  p.definition = *definition;
  return p;
}

Json to_json(const Policy& policy) {
  return {{"vhost", policy.vhost},      {"name", policy.name},
          {"pattern", policy.pattern},  {"apply-to", target_name(policy.apply_to)},
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

QueueArguments effective_arguments(const QueueArguments& declared, const Map& args, const Policy* policy) {
  if (policy == nullptr) return declared;
  const PolicyDefinition& d = policy->parsed;
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
