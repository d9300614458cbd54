// RabbitMQ's health checks (GET /api/health/checks/...), in its shapes:
// 200 {"status": "ok"}, or 503 {"status": "failed", "reason", ...} with what failed, so that the load balancers'
// and orchestrators' probes written for RabbitMQ read them. This broker is one node: the cluster-wide checks and
// the node-local ones are the same check.
#include "reference-broker/management/management_api.h"

#include <charconv>

namespace firemq {
namespace {

using Json = nlohmann::json;
namespace http = boost::beast::http;

HttpAnswer ok() { return api_json(http::status::ok, {{"status", "ok"}}); }

HttpAnswer failed(const std::string& reason, Json details = Json::object()) {
  details["status"] = "failed";
  details["reason"] = reason;
  return api_json(http::status::service_unavailable, details);
}

// RabbitMQ names its HTTP listeners http and https; this broker's serve the API beside WebSocket (ws, wss).
std::string listener_scheme(const std::string& protocol) {
  if (protocol == "http") return "ws";
  if (protocol == "https") return "wss";
  return protocol;
}

}  // namespace

HttpAnswer ManagementApi::health_check(const Route& route) const {
  if (route.size() < 3 || route[1] != "checks") return not_found();
  const std::string& check = route[2];
  if (route.size() == 3 && (check == "alarms" || check == "local-alarms")) return alarms_check();
  // Every vhost this broker has is running (there is no per-vhost supervisor that could have stopped one), and no
  // queue is replicated, so no node is critical to a quorum: both checks pass, as on a single RabbitMQ node.
  if (route.size() == 3 && (check == "virtual-hosts" || check == "node-is-quorum-critical")) return ok();
  const std::vector<ListenerInfo> listeners = env_.listeners();
  if (route.size() == 4 && check == "port-listener") {
    std::uint16_t port = 0;
    const std::string& text = route[3];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return api_error(http::status::bad_request, "bad_request", "the port must be a number from 0 to 65535");
    }
    Json ports = Json::array();
    for (const ListenerInfo& l : listeners) {
      if (l.port == port) return ok();
      ports.push_back(l.port);
    }
    return failed("No active listener", {{"missing", port}, {"ports", ports}});
  }
  if (route.size() == 4 && check == "protocol-listener") {
    Json protocols = Json::array();
    for (const ListenerInfo& l : listeners) {
      if (l.protocol == listener_scheme(route[3])) return ok();
      protocols.push_back(l.protocol);
    }
    return failed("No active listener", {{"missing", route[3]}, {"protocols", protocols}});
  }
  return not_found();
}

}  // namespace firemq
