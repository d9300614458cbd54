// Users, vhosts and permissions: who may connect, to which vhost. Loaded from a definitions file in a JSON
// shape close to RabbitMQ's definitions export:
//
//   {"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
//    "vhosts": [{"name": "/"}],
//    "permissions": [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]}
//
// Without a file, the broker has user guest (password guest) with every permission on vhost "/".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/error.h"

namespace firemq {

struct Permission {
  std::string configure = ".*";  // regular expressions over resource names, as RabbitMQ's
  std::string write = ".*";
  std::string read = ".*";
};

struct User {
  std::string name;
  std::string password;
  std::vector<std::string> tags;
  std::map<std::string, Permission> permissions;  // by vhost
};

class Definitions {
 public:
  // guest/guest with every permission on "/".
  static Definitions defaults();
  // Reads a definitions file; the error names the file and what is wrong with it.
  static Result<Definitions, std::string> load(const std::string& path);
  static Result<Definitions, std::string> parse(const std::string& json_text);
  // The users, vhosts and permissions in the shape parse() reads (the data directory keeps a copy).
  nlohmann::json to_json() const;

  // The user whose name and password match, or nullptr. Passwords are compared in constant time.
  const User* authenticate(const std::string& name, const std::string& password) const;
  bool has_vhost(const std::string& vhost) const;
  const std::vector<std::string>& vhost_names() const { return vhosts_; }
  const Permission* permission(const User& user, const std::string& vhost) const;

 private:
  std::map<std::string, User> users_;
  std::vector<std::string> vhosts_;
};

}  // namespace firemq
