#include "reference-broker/access/limits.h"

#include <charconv>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

using Json = nlohmann::json;
using LimitSlot = std::optional<std::uint64_t>;

// One limit's value: an integer; negative means no limit, as in RabbitMQ.
Result<LimitSlot, std::string> limit_value(const std::string& key, const Json& value) {
  if (!value.is_number_integer()) return "limit '" + key + "' must be an integer, not " + value.dump();
  if (value.is_number_unsigned()) return LimitSlot(value.get<std::uint64_t>());
  const std::int64_t n = value.get<std::int64_t>();
  return n < 0 ? LimitSlot() : LimitSlot(static_cast<std::uint64_t>(n));
}

// Walks `value`'s keys, handing each known one's parsed value to its slot.
std::optional<std::string> fill(const Json& value, const std::map<std::string, LimitSlot*>& slots, const char* kind) {
  if (!value.is_object()) return std::string(kind) + " limits must be an object, not " + value.dump();
  for (const auto& [key, v] : value.items()) {
    auto slot = slots.find(key);
    if (slot == slots.end()) {
      std::string known;
      for (const auto& [name, unused] : slots) known += (known.empty() ? "" : ", ") + name;
      return "unknown " + std::string(kind) + " limit '" + key + "' (known: " + known + ")";
    }
    auto parsed = limit_value(key, v);
    if (!parsed) return parsed.error();
    *slot->second = *parsed;
  }
  return std::nullopt;
}

void put(Json& out, const char* key, const LimitSlot& slot) {
  if (slot) out[key] = *slot;
}

std::string limit_reached(const std::string& what, std::uint64_t limit) {
  return what + " has reached its limit of " + std::to_string(limit) + " connection" + (limit == 1 ? "" : "s") +
         " (max-connections)";
}

}  // namespace

Result<VhostLimits, std::string> parse_vhost_limits(const Json& value) {
  VhostLimits limits;
  if (auto bad = fill(value, {{"max-connections", &limits.max_connections}, {"max-queues", &limits.max_queues}},
                      "vhost")) {
    return *bad;
  }
  return limits;
}

Result<UserLimits, std::string> parse_user_limits(const Json& value) {
  UserLimits limits;
  if (auto bad = fill(value, {{"max-connections", &limits.max_connections}}, "user")) return *bad;
  return limits;
}

Json to_json(const VhostLimits& limits) {
  Json out = Json::object();
  put(out, "max-connections", limits.max_connections);
  put(out, "max-queues", limits.max_queues);
  return out;
}

Json to_json(const UserLimits& limits) {
  Json out = Json::object();
  put(out, "max-connections", limits.max_connections);
  return out;
}

Result<LimitFlag, std::string> parse_limit_flag(const std::string& flag) {
  const auto colon = flag.rfind(':');
  const auto equals = flag.find('=', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || equals == std::string::npos) {
    return "'" + flag + "' is not NAME:KEY=N (for example /:max-connections=100)";
  }
  const std::string key = flag.substr(colon + 1, equals - colon - 1);
  const std::string number = flag.substr(equals + 1);
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || end != number.data() + number.size()) {
    return "'" + flag + "': '" + number + "' is not an integer";
  }
  return LimitFlag{flag.substr(0, colon), Json{{key, n}}};
}

Status ConnectionCounts::admit(const std::string& user, const UserLimits& user_limits, const std::string& vhost,
                               const VhostLimits& vhost_limits) {
  if (vhost_limits.max_connections && on_vhost(vhost) >= *vhost_limits.max_connections) {
    return make_error(ReplyCode::resource_error, limit_reached("vhost '" + vhost + "'", *vhost_limits.max_connections));
  }
  if (user_limits.max_connections && of_user(user) >= *user_limits.max_connections) {
    return make_error(ReplyCode::resource_error, limit_reached("user '" + user + "'", *user_limits.max_connections));
  }
  ++by_vhost_[vhost];
  ++by_user_[user];
  ++opened_total_;
  return std::nullopt;
}

void ConnectionCounts::release(const std::string& user, const std::string& vhost) {
  // Entries go when they reach zero, so that the maps hold only what is open.
  auto drop = [](std::map<std::string, std::uint64_t>& counts, const std::string& name) {
    auto it = counts.find(name);
    if (it != counts.end() && --it->second == 0) counts.erase(it);
  };
  drop(by_vhost_, vhost);
  drop(by_user_, user);
  ++closed_total_;
}

std::uint64_t ConnectionCounts::on_vhost(const std::string& vhost) const {
  auto it = by_vhost_.find(vhost);
  return it == by_vhost_.end() ? 0 : it->second;
}

std::uint64_t ConnectionCounts::of_user(const std::string& user) const {
  auto it = by_user_.find(user);
  return it == by_user_.end() ? 0 : it->second;
}

}  // namespace firemq
