// RabbitMQ's health checks (GET /api/health/checks/...), in its shapes:
// 200 {"status": "ok"}, or 503 {"status": "failed", "reason", ...} with what failed, so that the load balancers'
// and orchestrators' probes written for RabbitMQ read them. This broker is one node: the cluster-wide checks and
// the node-local ones are the same check.
#include "reference-broker/management/management_api.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>

#include <openssl/pem.h>
#include <openssl/x509.h>

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

// A certificate file's notAfter, in seconds since the epoch; the error says why it cannot be read.
Result<std::int64_t, std::string> certificate_expiry(const std::string& path) {
  const std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "r"), &std::fclose);
  if (!file) return "cannot open " + path;
  const std::unique_ptr<X509, void (*)(X509*)> cert(PEM_read_X509(file.get(), nullptr, nullptr, nullptr), &X509_free);
  std::tm expiry{};
  if (!cert || ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &expiry) != 1) return path + " holds no certificate";
  return static_cast<std::int64_t>(timegm(&expiry));
}

// RabbitMQ's WITHIN/UNIT of certificate-expiration, in seconds (a month taken as 30 days, a year as 365).
std::optional<std::int64_t> within_seconds(const std::string& within, const std::string& unit) {
  static const std::map<std::string, std::int64_t> kUnits = {
      {"days", 86'400}, {"weeks", 7 * 86'400}, {"months", 30 * 86'400}, {"years", 365 * 86'400}};
  std::int64_t n = -1;
  auto [end, ec] = std::from_chars(within.data(), within.data() + within.size(), n);
  const auto u = kUnits.find(unit);
  if (ec != std::errc() || end != within.data() + within.size() || n < 0 || n > 1000 || u == kUnits.end()) {
    return std::nullopt;
  }
  return n * u->second;
}

}  // namespace

// RabbitMQ's GET /api/health/checks/certificate-expiration/WITHIN/UNIT: 503 naming the TLS listeners (fires, wss)
// whose certificate expires within that time, as Kubernetes probes and monitoring ask it.
HttpAnswer ManagementApi::certificate_check(const std::string& within, const std::string& unit) const {
  const std::optional<std::int64_t> seconds = within_seconds(within, unit);
  if (!seconds) {
    return api_error(http::status::bad_request, "bad_request",
                     "certificate-expiration/WITHIN/UNIT: WITHIN a whole number from 0 to 1000, UNIT days, weeks, "
                     "months or years");
  }
  const std::string& path = env_.config.tls.certificate;
  Json expiring = Json::array();
  for (const ListenerInfo& l : env_.listeners()) {
    if (l.protocol != "fires" && l.protocol != "wss") continue;  // the listeners that present the certificate
    Result<std::int64_t, std::string> expiry = certificate_expiry(path);
    if (!expiry) return failed("Certificate unreadable: " + expiry.error());
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (*expiry > now + *seconds) continue;
    char date[32];
    const std::time_t at = *expiry;
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&at));
    expiring.push_back({{"node", kNodeName},
                        {"protocol", l.protocol},
                        {"port", l.port},
                        {"certfile", path},
                        {"expiration_date", date}});
  }
  if (expiring.empty()) return ok();
  return failed("Certificates expiring", {{"expired", expiring}});
}

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
  if (route.size() == 5 && check == "certificate-expiration") return certificate_check(route[3], route[4]);
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
