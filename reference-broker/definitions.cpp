#include "reference-broker/definitions.h"
#include "reference-broker/permissions.h"

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

}  // namespace

Result<Definitions, std::string> Definitions::defaults() {
  return parse(R"({"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
                   "vhosts": [{"name": "/"}],
                   "permissions": [{"user": "guest", "vhost": "/"}]})");
}

Result<Definitions, std::string> Definitions::parse(const std::string& json_text) {
  // nlohmann reports type and syntax errors by exception; they are caught here, at the file's one entry point.
  try {
    const Json root = Json::parse(json_text);
    Definitions d;
    for (const Json& v : root.value("vhosts", Json::array())) d.vhosts_.push_back(v.at("name").get<std::string>());
    for (const Json& u : root.value("users", Json::array())) {
      User user{u.at("name").get<std::string>(), {}, {}, {}};
      auto password = password_of(u);
      if (!password) return "user '" + user.name + "': " + password.error();
      user.password = *password;
      for (const Json& tag : u.value("tags", Json::array())) user.tags.push_back(tag.get<std::string>());
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
    return d;
  } catch (const Json::exception& e) {
    return std::string(e.what());
  }
}

Json Definitions::to_json() const {
  Json root{{"users", Json::array()}, {"vhosts", Json::array()}, {"permissions", Json::array()}};
  for (const std::string& vhost : vhosts_) root["vhosts"].push_back({{"name", vhost}});
  for (const auto& [name, user] : users_) {
    // As RabbitMQ's export: the hash and its algorithm, never the password ("" for a user without one).
    root["users"].push_back({{"name", name},
                             {"password_hash", user.password ? encode_password_hash(*user.password) : ""},
                             {"hashing_algorithm", kSha256HashingAlgorithm},
                             {"tags", user.tags}});
    for (const auto& [vhost, p] : user.permissions) {
      root["permissions"].push_back(
          {{"user", name}, {"vhost", vhost}, {"configure", p.configure}, {"write", p.write}, {"read", p.read}});
    }
  }
  return root;
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
