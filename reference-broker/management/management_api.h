// The management HTTP API, in the shape of RabbitMQ's management plugin so that its tools (rabbitmqadmin) and
// its users' habits work: JSON under /api/ on the HTTP listeners (15672, and 15671 inside TLS), HTTP basic auth
// against the broker's users, vhosts percent-encoded in paths (%2F), errors as {"error", "reason"}. And the
// Prometheus metrics at /metrics. docs/management.md lists every route.
//
// Reads look at the broker's model directly; every write that a client could also make (declare, delete, bind,
// publish, get) goes through a Session of its own logged in as the HTTP user, so that the same rules, permissions
// and bounds apply as on the wire (management_writes.cpp). Runs on the broker thread; no I/O of its own
// (http_server.cpp reads the request and writes the answer).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference-broker/access/definitions.h"
#include "reference-broker/amqp/amqp_connection_core.h"
#include "reference-broker/core/alarms.h"
#include "reference-broker/core/config.h"
#include "reference-broker/core/core.h"
#include "reference-broker/management/message_history.h"
#include "reference-broker/net/connection.h"
#include "reference-broker/net/http_routes.h"
#include "reference-broker/net/http_server.h"

namespace firemq {

struct ListQuery;  // management_query.h

// A listener as the overview shows it.
struct ListenerInfo {
  std::string protocol;  // "fire", "fires", "ws", "wss", "amqp", "amqps", as RabbitMQ names its own ("amqp", "http")
  std::uint16_t port;
};

struct ManagementEnv {
  const BrokerConfig& config;
  Definitions& definitions;  // changed by the administrator's writes (management_admin.cpp)
  Core& core;
  ConnectionRegistry& connections;  // both protocols'
  const Alarms& alarms;  // flow control: the memory watermark and the disk free limit, and whether they fired
  std::function<std::vector<ListenerInfo>()> listeners;
};

// The process's own figures, as rabbitmq_prometheus gives the Erlang VM's (management_metrics.cpp): descriptors and
// sockets open, the soft RLIMIT_NOFILE (raised at start; every socket takes a descriptor, so it bounds the sockets
// too), and the resident set. /metrics names them rabbitmq_process_*; /api/nodes fd_used, fd_total, sockets_used,
// sockets_total, as RabbitMQ's node does.
struct ProcessFigures {
  std::uint64_t open_fds = 0;
  std::uint64_t open_sockets = 0;
  std::uint64_t max_fds = 0;
  std::uint64_t resident_bytes = 0;
};
ProcessFigures process_figures();

// Answers in RabbitMQ's shapes: a JSON body, an error {"error", "reason"}, and 404 "Object Not Found".
HttpAnswer api_json(boost::beast::http::status status, const nlohmann::json& body);
HttpAnswer api_error(boost::beast::http::status status, const std::string& error, const std::string& reason);
HttpAnswer not_found();
// The model's name of the exchange a path names: RabbitMQ's API calls the default exchange amq.default.
std::string exchange_name(const std::string& path_name);
// A write's body: a JSON object (empty when none); a POST must say Content-Type: application/json.
Result<nlohmann::json, HttpAnswer> api_body(const HttpRequest& request);

// Who is asking: an authenticated user with a management tag.
struct ApiUser {
  const User* user = nullptr;
  bool sees_everything = false;  // administrator or monitoring: every vhost and connection
  bool administrator = false;    // may change vhosts, users and permissions, and close any connection
  bool policymaker = false;      // administrator or policymaker: may see and set policies (of the vhosts it may use)
  std::string password;          // for the request's own session (management_writes.cpp), then forgotten
};

// Who an open connection of either protocol belongs to: its name (as RabbitMQ names connections), user and vhost.
struct ConnectionOwner {
  std::string name;
  std::string user;
  std::string vhost;
};
// Nullopt while it is in its handshake or closing: not a client yet, or no more.
std::optional<ConnectionOwner> connection_owner(const Connection& c);

class ManagementApi final : public HttpApplication {
 public:
  explicit ManagementApi(ManagementEnv env) : env_(std::move(env)), history_(env_.config.statistics_interval.count()) {}

  // Whether a request target is the API's: /api/..., /metrics and /metrics/detailed.
  bool serves(std::string_view target) const override;
  HttpAnswer handle(const HttpRequest& request, const std::optional<std::string>& peer_address) override;
  // One collection of the message rates' history (message_history.h), every config.statistics_interval.
  void collect_statistics(std::int64_t now_ms);

 private:
  // The request's path after /api/, split at '/' and percent-decoded: {"queues", "/", "orders"}.
  struct Route {
    std::vector<std::string> parts;
    std::size_t size() const { return parts.size(); }
    const std::string& operator[](std::size_t i) const { return parts[i]; }
    std::optional<std::string> at(std::size_t i) const {
      return i < parts.size() ? std::optional<std::string>(parts[i]) : std::nullopt;
    }
  };
  HttpAnswer dispatch(const HttpRequest& request, const Route& route, const ApiUser& who,
                      const std::optional<std::string>& peer_address);
  HttpAnswer read(const Route& route, const ApiUser& who, const ListQuery& query);
  std::optional<Result<nlohmann::json, HttpAnswer>> related(const Route& route, const ApiUser& who) const;
  std::optional<Result<nlohmann::json, HttpAnswer>> permissions_of(const Route& route, const ApiUser& who) const;
  Result<nlohmann::json, HttpAnswer> collection(const std::string& what, const ApiUser& who,
                                                const std::optional<std::string>& vhost, const ListQuery& query) const;
  HttpAnswer write(const HttpRequest& request, const Route& route, const ApiUser& who,
                   const std::optional<std::string>& peer_address);
  // DELETE /api/connections/NAME: closes it, as an operator's close (320).
  HttpAnswer close_connection(const HttpRequest& request, const Route& route, const ApiUser& who);

  // management_admin.cpp: vhosts, users, permissions and the definitions import, for administrators.
  HttpAnswer administer(const HttpRequest& request, const Route& route, const ApiUser& who);
  HttpAnswer put_vhost(const std::string& name);
  HttpAnswer delete_vhost(const std::string& name);
  HttpAnswer put_user(const std::string& name, const nlohmann::json& body);
  HttpAnswer delete_user(const std::string& name);
  HttpAnswer delete_users(const nlohmann::json& body);
  HttpAnswer put_permission(const std::string& vhost, const std::string& user, const nlohmann::json& body);
  HttpAnswer delete_permission(const std::string& vhost, const std::string& user);
  // RabbitMQ's /api/vhost-limits[/V] and /api/user-limits[/U]: the limits that are set, as [{"vhost" or "user",
  // "value": {NAME: N}}]; PUT .../NAME {"value": N} sets one (negative: none), DELETE .../NAME clears it.
  Result<nlohmann::json, HttpAnswer> limits(const Route& route, const ApiUser& who) const;
  HttpAnswer put_limit(const Route& route, const nlohmann::json& body);
  HttpAnswer delete_limit(const Route& route);
  // RabbitMQ's /api/policies[/V[/NAME]] (policy.h): GET lists, PUT .../V/NAME sets, DELETE removes; for
  // administrators and policymakers with permissions on V, as RabbitMQ's.
  // And RabbitMQ's /api/operator-policies[/V[/NAME]] the same way, for administrators only, as RabbitMQ's.
  Result<nlohmann::json, HttpAnswer> policies(const Route& route, const ApiUser& who, PolicyKind kind) const;
  HttpAnswer write_policy(const HttpRequest& request, const Route& route, const ApiUser& who, PolicyKind kind);
  // Who may not read or set that kind of policy: RabbitMQ's 401 and reason; nullopt when `who` may.
  static std::optional<HttpAnswer> policy_refusal(const ApiUser& who, PolicyKind kind);
  HttpAnswer import_definitions(const nlohmann::json& body);
  // RabbitMQ's /api/definitions/V: what of the definitions belongs to one vhost, its entries without "vhost".
  static constexpr const char* kVhostDefinitionKinds[] = {"parameters", "policies", "queues", "exchanges", "bindings"};
  nlohmann::json vhost_definitions(const ApiUser& who, const std::string& vhost) const;
  HttpAnswer import_vhost_definitions(const std::string& vhost, const nlohmann::json& body);
  // The definitions changed: saved to the data directory (when there is one) before the answer, as a declare's.
  HttpAnswer saved(boost::beast::http::status done);
  // Closes with 320 every connection, FireMQ's and AMQP's, that `matches` (its user and vhost) picks.
  void close_connections(const std::function<bool(const std::string& user, const std::string& vhost)>& matches,
                         const std::string& reason);

  // management_api.cpp: the JSON of what the broker holds, limited to what `who` may see.
  bool may_see(const ApiUser& who, const std::string& vhost) const;
  nlohmann::json overview(const ApiUser& who, const ListQuery& query) const;
  Result<nlohmann::json, HttpAnswer> queue(const ApiUser& who, const std::string& vhost, const std::string& name,
                                           const ListQuery& query) const;
  static constexpr const char* kNodeName = "firemq@localhost";
  static constexpr const char* kClusterName = "firemq";  // RabbitMQ's /api/cluster-name; one node, not renamed
  nlohmann::json node() const;
  nlohmann::json alarms_in_effect() const;
  HttpAnswer alarms_check() const;
  // management_health.cpp: GET /api/health/checks/..., RabbitMQ's health checks.
  HttpAnswer health_check(const Route& route) const;
  HttpAnswer certificate_check(const std::string& within, const std::string& unit) const;
  // management_writes.cpp: GET /api/aliveness-test/VHOST, the one GET that writes, as RabbitMQ's.
  HttpAnswer aliveness_test(const Route& route, const ApiUser& who, const std::optional<std::string>& peer_address);
  nlohmann::json vhosts(const ApiUser& who) const;
  nlohmann::json users() const;
  nlohmann::json permissions() const;
  nlohmann::json connections(const ApiUser& who) const;
  // AMQP connections past connection.open-ok that `who` may see (their own unless they see everything).
  std::vector<const Connection*> amqp_connections(const ApiUser& who) const;
  nlohmann::json channels(const ApiUser& who) const;
  nlohmann::json exchanges(const ApiUser& who, const std::optional<std::string>& vhost) const;
  nlohmann::json queues(const ApiUser& who, const std::optional<std::string>& vhost) const;
  nlohmann::json bindings(const ApiUser& who, const std::optional<std::string>& vhost) const;
  nlohmann::json consumers(const ApiUser& who, const std::optional<std::string>& vhost) const;
  nlohmann::json definitions(const ApiUser& who) const;
  Connection* find_connection(const std::string& name) const;

  // management_metrics.cpp: GET /metrics, Prometheus's text exposition format, aggregated; and GET
  // /metrics/detailed?family=F&vhost=V (each repeatable), the families asked for, per queue of those vhosts (all
  // when none is named), as rabbitmq_prometheus serves them.
  std::string metrics() const;
  std::string detailed_metrics(const std::set<std::string>& families, const std::set<std::string>& vhosts) const;
  HttpAnswer metrics_answer(const HttpRequest& request, std::string_view path, std::string_view query) const;

  ManagementEnv env_;
  MessageHistory history_;
};

}  // namespace firemq
