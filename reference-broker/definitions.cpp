#include "reference-broker/definitions.h"
#include "reference-broker/permissions.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace firemq {
namespace {

using Json = nlohmann::json;

// Compares without returning early, so the time taken does not tell how much of a password was right.
bool equal_in_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (std::size_t i = 0; i < longer.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string string_field(const Json& object, const char* key, const std::string& fallback = "") {
  if (!object.contains(key)) return fallback;
  return object.at(key).get<std::string>();
}

}  // namespace

Definitions Definitions::defaults() {
  Definitions d;
  User guest{"guest", "guest", {"administrator"}, {{"/", Permission{}}}};
  d.users_.emplace(guest.name, guest);
  d.vhosts_.push_back("/");
  return d;
}

Result<Definitions, std::string> Definitions::parse(const std::string& json_text) {
  // nlohmann reports type and syntax errors by exception; they are caught here, at the file's one entry point.
  try {
    const Json root = Json::parse(json_text);
    Definitions d;
    for (const Json& v : root.value("vhosts", Json::array())) d.vhosts_.push_back(v.at("name").get<std::string>());
    for (const Json& u : root.value("users", Json::array())) {
      User user{u.at("name").get<std::string>(), string_field(u, "password"), {}, {}};
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
    root["users"].push_back({{"name", name}, {"password", user.password}, {"tags", user.tags}});
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
  auto it = users_.find(name);
  if (it == users_.end()) return nullptr;
  return equal_in_constant_time(it->second.password, password) ? &it->second : nullptr;
}

bool Definitions::has_vhost(const std::string& vhost) const {
  return std::find(vhosts_.begin(), vhosts_.end(), vhost) != vhosts_.end();
}

const Permission* Definitions::permission(const User& user, const std::string& vhost) const {
  auto it = user.permissions.find(vhost);
  return it == user.permissions.end() ? nullptr : &it->second;
}

}  // namespace firemq
