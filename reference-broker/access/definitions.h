// Users, vhosts and permissions: who may connect, to which vhost. Loaded from a definitions file in a JSON
// shape close to RabbitMQ's definitions export:
//
//   {"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
//    "vhosts": [{"name": "/"}],
//    "permissions": [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
//    "parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 10}}]}
//
// Users may carry RabbitMQ's user limits ("limits": {"max-connections": N}); vhosts carry theirs as parameters of
// component "vhost-limits" (limits.h), the only component this broker has.
//
// A user's password is given either in clear text ("password") or as RabbitMQ stores it ("password_hash" and
// "hashing_algorithm", password_hash.h); either way only the hash is kept. to_json() writes the hash alone.
//
// Without a file, the broker has user guest (password guest) with every permission on vhost "/".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/error.h"
#include "reference-broker/access/limits.h"
#include "reference-broker/access/password_hash.h"

namespace firemq {

struct Permission {
  std::string configure = ".*";  // regular expressions over resource names, as RabbitMQ's
  std::string write = ".*";
  std::string read = ".*";
};

struct User {
  std::string name;
  std::optional<PasswordHash> password;  // none: the user cannot log in with a password (as RabbitMQ's)
  std::vector<std::string> tags;
  std::map<std::string, Permission> permissions;  // by vhost
  UserLimits limits;
};

class Definitions {
 public:
  // guest/guest with every permission on "/". The error says the random generator for its salt failed.
  static Result<Definitions, std::string> defaults();
  // Reads a definitions file; the error names the file and what is wrong with it.
  static Result<Definitions, std::string> load(const std::string& path);
  static Result<Definitions, std::string> parse(const std::string& json_text);
  // The users, vhosts and permissions in the shape parse() reads (the data directory keeps a copy).
  nlohmann::json to_json() const;

  // The user whose name and password match, or nullptr. Takes as long for an unknown user as for a known one
  // (the password is hashed either way), and compares digests in constant time.
  const User* authenticate(const std::string& name, const std::string& password) const;
  bool has_vhost(const std::string& vhost) const;
  const std::vector<std::string>& vhost_names() const { return vhosts_; }
  const Permission* permission(const User& user, const std::string& vhost) const;
  // No limits for a name that has none (or does not exist).
  const VhostLimits& vhost_limits(const std::string& vhost) const;
  const UserLimits& user_limits(const std::string& user) const;
  // --vhost-limit and --user-limit: `value` is merged into what the definitions set. The error names what is
  // wrong (an unknown vhost or user, an unknown limit).
  std::optional<std::string> set_vhost_limits(const std::string& vhost, const nlohmann::json& value);
  std::optional<std::string> set_user_limits(const std::string& user, const nlohmann::json& value);

  // Changes at run time (the management API), as RabbitMQ's definitions import merges: each user, vhost,
  // permission and vhost-limits parameter of `incoming` (parse()'s shape) replaces the one of the same name (user
  // and vhost for a permission), or is added; the rest stays. A user given without "limits" keeps its limits.
  // All or nothing: the error names what is wrong and nothing changed. Pointers to users are invalidated.
  std::optional<std::string> merge(const nlohmann::json& incoming);
  // Each returns whether there was something to remove. A vhost takes its permissions and limits with it.
  bool remove_vhost(const std::string& vhost);
  bool remove_user(const std::string& user);
  bool remove_permission(const std::string& user, const std::string& vhost);
  const User* find_user(const std::string& name) const;

 private:
  // One entry of "parameters".
  std::optional<std::string> add_parameter(const nlohmann::json& parameter);

  std::map<std::string, User> users_;
  std::vector<std::string> vhosts_;
  std::map<std::string, VhostLimits> vhost_limits_;
};

}  // namespace firemq
