// What an operator allows a vhost or a user to hold, as RabbitMQ's vhost limits (`max-connections`,
// `max-queues`) and user limits (`max-connections`), and the live connection counts they are checked against.
// No I/O; runs on the broker thread.
//
// In a definitions file they take RabbitMQ's shapes: a vhost's as a parameter of component "vhost-limits",
//   {"parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits",
//                    "value": {"max-connections": 100, "max-queues": 1000}}]}
// and a user's inside the user, {"name": "app", ..., "limits": {"max-connections": 10}}. As in RabbitMQ, a
// negative value means no limit, and 0 allows none. The flags --vhost-limit and --user-limit set the same.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "protocol/error.h"

namespace firemq {

struct VhostLimits {
  std::optional<std::uint64_t> max_connections;  // none: no limit
  std::optional<std::uint64_t> max_queues;
  bool operator==(const VhostLimits&) const = default;
};

struct UserLimits {
  std::optional<std::uint64_t> max_connections;
  bool operator==(const UserLimits&) const = default;
};

// A "value" or "limits" object: each key must be one the kind of limit has; the error names the one that is not.
Result<VhostLimits, std::string> parse_vhost_limits(const nlohmann::json& value);
Result<UserLimits, std::string> parse_user_limits(const nlohmann::json& value);
// Back to that shape, leaving out what has no limit.
nlohmann::json to_json(const VhostLimits& limits);
nlohmann::json to_json(const UserLimits& limits);

// A --vhost-limit or --user-limit flag, `NAME:KEY=N` (the last ':' ends the name, since a vhost name may hold
// one): the name and a one-key limits object, or an error that quotes the flag.
struct LimitFlag {
  std::string name;
  nlohmann::json value;
};
Result<LimitFlag, std::string> parse_limit_flag(const std::string& flag);

// The connections open per vhost and per user. A connection is counted from its login to its end; the AMQP
// listener counts one per connection, not per channel, as RabbitMQ does.
class ConnectionCounts {
 public:
  // The connection limits of `vhost` and `user`, against what is open now: a 506 error that names the limit
  // reached, or the connection is counted.
  Status admit(const std::string& user, const UserLimits& user_limits, const std::string& vhost,
               const VhostLimits& vhost_limits);
  // An admitted connection ended.
  void release(const std::string& user, const std::string& vhost);
  std::uint64_t on_vhost(const std::string& vhost) const;
  std::uint64_t of_user(const std::string& user) const;
  // Every connection admitted, and every one released, since the start: rabbitmq_connections_opened_total and
  // _closed_total. A login that fails is neither (RabbitMQ counts it closed but never opened).
  std::uint64_t opened_total() const { return opened_total_; }
  std::uint64_t closed_total() const { return closed_total_; }

 private:
  std::uint64_t opened_total_ = 0;
  std::uint64_t closed_total_ = 0;
  std::map<std::string, std::uint64_t> by_vhost_;
  std::map<std::string, std::uint64_t> by_user_;
};

}  // namespace firemq
