#include "reference-broker/access/definitions.h"
#include "protocol/bounded_json.h"
#include "reference-broker/access/permissions.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace firemq {
namespace {

using Json = nlohmann::json;

std::string string_field(const Json& object, const char* key, const std::string& fallback = "") {
  if (!object.contains(key)) return fallback;
  return object.at(key).get<std::string>();
}

// A user's password: "password" in clear text (hashed here under a fresh salt), or RabbitMQ's "password_hash"
// under "hashing_algorithm" (absent: RabbitMQ's default, SHA-256). Neither, or an empty hash: no password.
Result<std::optional<PasswordHash>, std::string> password_of(const Json& user) {
  if (user.contains("password")) {
    auto hashed = hash_new_password(user.at("password").get<std::string>());
    if (!hashed) return hashed.error();
    return std::optional<PasswordHash>(*hashed);
  }
  const std::string hash = string_field(user, "password_hash");
  if (hash.empty()) return std::optional<PasswordHash>();
  auto decoded = decode_password_hash(hash, string_field(user, "hashing_algorithm", kSha256HashingAlgorithm));
  if (!decoded) return decoded.error();
  return std::optional<PasswordHash>(*decoded);
}

// Merges a limits object into `limits`: the keys it names replace theirs, the others stay.
template <typename Limits, typename Parse>
std::optional<std::string> merge_limits(Limits& limits, const Json& value, Parse parse) {
  Json merged = to_json(limits);
  if (value.is_object()) merged.update(value);
  auto parsed = parse(value.is_object() ? merged : value);
  if (!parsed) return parsed.error();
  limits = *parsed;
  return std::nullopt;
}

// Puts each of `incoming` into `into`, replacing the entry that `same` says is the same one.
template <typename Same>
void replace_or_add(Json& into, const Json& incoming, Same same) {
  for (const Json& entry : incoming) {
    auto it = std::find_if(into.begin(), into.end(), [&](const Json& e) { return same(e, entry); });
    if (it == into.end()) {
      into.push_back(entry);
    } else {
      *it = entry;
    }
  }
}

bool same_field(const Json& a, const Json& b, const char* key) {
  return a.contains(key) && b.contains(key) && a[key] == b[key];
}

}  // namespace

Result<Definitions, std::string> Definitions::defaults() {
  return parse(R"({"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
                   "vhosts": [{"name": "/"}],
                   "permissions": [{"user": "guest", "vhost": "/"}]})");
}

Result<Definitions, std::string> Definitions::parse(const std::string& json_text) {
  // The file may come from anyone an operator trusts too much (a management import, a copied export), and what is
  // done with it recurses, so its nesting is bounded as the data directory's is (bounded_json.h).
  Result<Json, std::string> parsed = parse_bounded_json(json_text, kMaxDefinitionsNesting);
  if (!parsed) return parsed.error();
  // nlohmann reports type errors by exception; they are caught here, at the file's one entry point.
  try {
    const Json& root = *parsed;
    Definitions d;
    for (const Json& v : root.value("vhosts", Json::array())) d.vhosts_.push_back(v.at("name").get<std::string>());
    for (const Json& u : root.value("users", Json::array())) {
      User user{u.at("name").get<std::string>(), {}, {}, {}, {}};
      auto password = password_of(u);
      if (!password) return "user '" + user.name + "': " + password.error();
      user.password = *password;
      for (const Json& tag : u.value("tags", Json::array())) user.tags.push_back(tag.get<std::string>());
      if (u.contains("limits")) {
        auto limits = parse_user_limits(u.at("limits"));
        if (!limits) return "user '" + user.name + "': " + limits.error();
        user.limits = *limits;
      }
      d.users_[user.name] = std::move(user);
    }
    for (const Json& p : root.value("permissions", Json::array())) {
      const std::string user = p.at("user").get<std::string>();
      auto it = d.users_.find(user);
      if (it == d.users_.end()) return "permission for unknown user '" + user + "'";
      const std::string vhost = p.at("vhost").get<std::string>();
      if (!d.has_vhost(vhost)) return "permission on unknown vhost '" + vhost + "'";
      Permission permission{string_field(p, "configure", ".*"), string_field(p, "write", ".*"),
                            string_field(p, "read", ".*")};
      for (const std::string* pattern : {&permission.configure, &permission.write, &permission.read}) {
        if (Status bad = check_permission_pattern(*pattern)) return "user '" + user + "': " + bad->msg;
      }
      it->second.permissions[vhost] = std::move(permission);
    }
    for (const Json& p : root.value("parameters", Json::array())) {
      if (auto bad = d.add_parameter(p)) return *bad;
    }
    return d;
  } catch (const Json::exception& e) {
    return std::string(e.what());
  }
}

Json Definitions::to_json() const {
  Json root{{"users", Json::array()},
            {"vhosts", Json::array()},
            {"permissions", Json::array()},
            {"parameters", Json::array()}};
  for (const std::string& vhost : vhosts_) root["vhosts"].push_back({{"name", vhost}});
  for (const auto& [name, user] : users_) {
    // As RabbitMQ's export: the hash and its algorithm, never the password ("" for a user without one).
    root["users"].push_back({{"name", name},
                             {"password_hash", user.password ? encode_password_hash(*user.password) : ""},
                             {"hashing_algorithm", kSha256HashingAlgorithm},
                             {"tags", user.tags},
                             {"limits", firemq::to_json(user.limits)}});
    for (const auto& [vhost, p] : user.permissions) {
      root["permissions"].push_back(
          {{"user", name}, {"vhost", vhost}, {"configure", p.configure}, {"write", p.write}, {"read", p.read}});
    }
  }
  for (const auto& [vhost, limits] : vhost_limits_) {
    if (limits == VhostLimits{}) continue;
    root["parameters"].push_back(
        {{"vhost", vhost}, {"component", "vhost-limits"}, {"name", "limits"}, {"value", firemq::to_json(limits)}});
  }
  return root;
}

std::optional<std::string> Definitions::add_parameter(const Json& parameter) {
  const std::string component = string_field(parameter, "component");
  const std::string vhost = string_field(parameter, "vhost");
  // RabbitMQ's other components (federation, shovels, ...) configure plugins this broker does not have; taking
  // a file that sets them and doing nothing would hide that, so the file is refused.
  if (component != "vhost-limits") return "parameter of component '" + component + "': only vhost-limits is supported";
  if (!has_vhost(vhost)) return "vhost-limits on unknown vhost '" + vhost + "'";
  auto limits = parse_vhost_limits(parameter.value("value", Json::object()));
  if (!limits) return "vhost-limits of vhost '" + vhost + "': " + limits.error();
  vhost_limits_[vhost] = *limits;
  return std::nullopt;
}

const VhostLimits& Definitions::vhost_limits(const std::string& vhost) const {
  static const VhostLimits kNone;
  auto it = vhost_limits_.find(vhost);
  return it == vhost_limits_.end() ? kNone : it->second;
}

const UserLimits& Definitions::user_limits(const std::string& user) const {
  static const UserLimits kNone;
  auto it = users_.find(user);
  return it == users_.end() ? kNone : it->second.limits;
}

std::optional<std::string> Definitions::set_vhost_limits(const std::string& vhost, const Json& value) {
  if (!has_vhost(vhost)) return "no vhost '" + vhost + "'";
  return merge_limits(vhost_limits_[vhost], value, parse_vhost_limits);
}

std::optional<std::string> Definitions::set_user_limits(const std::string& user, const Json& value) {
  auto it = users_.find(user);
  if (it == users_.end()) return "no user '" + user + "'";
  return merge_limits(it->second.limits, value, parse_user_limits);
}

std::optional<std::string> Definitions::merge(const Json& incoming) {
  if (!incoming.is_object()) return std::string("definitions must be a JSON object");
  Json merged = to_json();
  for (const char* kind : {"users", "vhosts", "permissions", "parameters"}) {
    if (incoming.contains(kind) && !incoming[kind].is_array()) return "'" + std::string(kind) + "' must be a list";
  }
  Json users = incoming.value("users", Json::array());
  for (Json& user : users) {
    // A user's limits are set apart from the user (as RabbitMQ's user-limits): an update keeps them.
    const User* existing = user.is_object() && user.contains("name") && user["name"].is_string()
                               ? find_user(user["name"].get<std::string>())
                               : nullptr;
    if (existing != nullptr && !user.contains("limits")) user["limits"] = firemq::to_json(existing->limits);
  }
  auto by_name = [](const Json& a, const Json& b) { return same_field(a, b, "name"); };
  replace_or_add(merged["users"], users, by_name);
  replace_or_add(merged["vhosts"], incoming.value("vhosts", Json::array()), by_name);
  replace_or_add(merged["permissions"], incoming.value("permissions", Json::array()),
                 [](const Json& a, const Json& b) { return same_field(a, b, "user") && same_field(a, b, "vhost"); });
  replace_or_add(merged["parameters"], incoming.value("parameters", Json::array()), [](const Json& a, const Json& b) {
    return same_field(a, b, "vhost") && same_field(a, b, "component") && same_field(a, b, "name");
  });
  auto parsed = parse(merged.dump());
  if (!parsed) return parsed.error();
  *this = std::move(*parsed);
  return std::nullopt;
}

bool Definitions::remove_vhost(const std::string& vhost) {
  if (!has_vhost(vhost)) return false;
  std::erase(vhosts_, vhost);
  vhost_limits_.erase(vhost);
  for (auto& [name, user] : users_) user.permissions.erase(vhost);
  return true;
}

bool Definitions::remove_user(const std::string& user) { return users_.erase(user) > 0; }

bool Definitions::remove_permission(const std::string& user, const std::string& vhost) {
  auto it = users_.find(user);
  return it != users_.end() && it->second.permissions.erase(vhost) > 0;
}

const User* Definitions::find_user(const std::string& name) const {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

Result<Definitions, std::string> Definitions::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "cannot read definitions file '" + path + "'";
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse(text.str());
  if (!parsed) return "definitions file '" + path + "': " + parsed.error();
  return parsed;
}

const User* Definitions::authenticate(const std::string& name, const std::string& password) const {
  // An unknown user, or one without a password, is checked against a hash no password has (a zero digest), so
  // that the time taken does not tell which user names exist.
  static const PasswordHash kNoPassword{};
  auto it = users_.find(name);
  const bool known = it != users_.end() && it->second.password;
  const bool matches = password_matches(known ? *it->second.password : kNoPassword, password);
  return known && matches ? &it->second : nullptr;
}

bool Definitions::has_vhost(const std::string& vhost) const {
  return std::find(vhosts_.begin(), vhosts_.end(), vhost) != vhosts_.end();
}

const Permission* Definitions::permission(const User& user, const std::string& vhost) const {
  auto it = user.permissions.find(vhost);
  return it == user.permissions.end() ? nullptr : &it->second;
}

}  // namespace firemq
