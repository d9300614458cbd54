// The management API's routing, authentication and reads (management_api.h). Writes: management_writes.cpp.
#include "reference-broker/management/management_api.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "protocol/plain_json.h"
#include "protocol/url.h"
#include "reference-broker/core/exchange_routing.h"
#include "reference-broker/core/log.h"
#include "reference-broker/core/memory_account.h"
#include "reference-broker/management/management_query.h"
#include "reference-broker/management/management_ui.h"

namespace firemq {
namespace {

using Json = nlohmann::json;
namespace http = boost::beast::http;

// The tags RabbitMQ's management plugin knows; a user with none of them may not use the API.
bool has_tag(const User& user, std::string_view tag) {
  return std::find(user.tags.begin(), user.tags.end(), tag) != user.tags.end();
}

// Basic auth's user:password, or nullopt when the header's value is not base64.
std::optional<std::string> basic_credentials(std::string_view encoded) {
  const std::optional<Bytes> bytes = from_base64(encoded);
  if (!bytes) return std::nullopt;
  return std::string(bytes->begin(), bytes->end());
}

// The peer's port from the endpoints as the transports describe them, "PEER:PORT -> LOCAL:PORT" (the AMQP
// connection's name). The port follows the last colon before the arrow; the address alone cannot be split at a
// colon, since an IPv6 one ("::1") is full of them.
std::uint64_t peer_port_of(std::string_view endpoints) {
  const std::string_view peer = endpoints.substr(0, endpoints.find(" -> "));
  const auto colon = peer.rfind(':');
  std::uint64_t port = 0;
  if (colon != std::string_view::npos) std::from_chars(peer.data() + colon + 1, peer.data() + peer.size(), port);
  return port;
}

// The overview's message_stats, in the order MessageHistory keeps their values (then kLengths: the queue totals).
const std::vector<const char*> kOverviewStats{"publish", "deliver_get", "deliver",           "deliver_no_ack",
                                              "get",     "get_no_ack",  "get_empty",         "redeliver",
                                              "ack",     "confirm",     "return_unroutable", "drop_unroutable"};
const std::vector<const char*> kLengths{"messages", "messages_ready", "messages_unacknowledged"};
// A queue's message_stats (then kLengths: its depths).
const std::vector<const char*> kQueueStats{"publish", "deliver_get", "redeliver", "ack"};

std::vector<std::uint64_t> overview_values(const MessageCounters& c, std::uint64_t ready, std::uint64_t unacked) {
  return {c.published,
          c.delivered,
          c.consumed_manual_ack,
          c.consumed_auto_ack,
          c.got_manual_ack,
          c.got_auto_ack,
          c.get_empty,
          c.redelivered,
          c.acknowledged,
          c.confirmed,
          c.returned,
          c.unroutable_dropped,
          ready + unacked,
          ready,
          unacked};
}

std::vector<std::uint64_t> queue_values(const Queue& q) {
  const QueueCounters& c = q.counters();
  return {c.published,     c.delivered,      c.redelivered, c.acknowledged, q.ready_count() + q.unacked_count(),
          q.ready_count(), q.unacked_count()};
}

// {names[i]: values[first + i]}.
Json named_values(const std::vector<const char*>& names, const std::vector<std::uint64_t>& values, std::size_t first) {
  Json out = Json::object();
  for (std::size_t i = 0; i < names.size(); ++i) out[names[i]] = values[first + i];
  return out;
}

// The keys of the series MessageHistory keeps: the broker's totals, a vhost's, a queue's (length-prefixed, so that
// no vhost and queue name pair can look like another).
const std::string kTotalsKey = "*";
std::string vhost_key(const std::string& vhost) { return "v" + vhost; }
std::string queue_key(const std::string& vhost, const std::string& name) {
  return "q" + std::to_string(vhost.size()) + ":" + vhost + name;
}

// What a queue's rates are drawn from: the history, and the ranges asked for (none on lists: message_history.h).
struct QueueStats {
  const MessageHistory& history;
  std::optional<StatsRange> msg_rates;
  std::optional<StatsRange> lengths;
};

// The policy of `kind` named `name` in the vhost, or null.
const Policy* named_policy(const Vhost& vhost, PolicyKind kind, const std::string& name) {
  const auto found = vhost.policies(kind).find(name);
  return found == vhost.policies(kind).end() ? nullptr : &found->second;
}

Json queue_json(const std::string& vhost, const Vhost& in, const Queue& q, const QueueStats& stats) {
  const QueueSettings& s = q.settings();
  const Policy* policy = named_policy(in, PolicyKind::user, q.policy_name());
  const Policy* operator_policy = named_policy(in, PolicyKind::operator_policy, q.operator_policy_name());
  const std::vector<std::uint64_t> values = queue_values(q);
  const std::vector<std::string> keys{queue_key(vhost, q.name())};
  // As RabbitMQ's queue message_stats: counters since the queue was declared, and their rates over time.
  Json message_stats = named_values(kQueueStats, values, 0);
  add_stats_details(message_stats, kQueueStats, 0, stats.history, keys, stats.msg_rates);
  Json out{{"name", q.name()},
           {"policy", q.policy_name()},
           {"operator_policy", q.operator_policy_name()},
           {"effective_policy_definition", effective_definition(policy, operator_policy)},
           {"vhost", vhost},
           {"durable", s.durable},
           {"auto_delete", s.auto_delete},
           {"exclusive", q.exclusive()},
           {"arguments", plain_json(s.args)},
           {"message_bytes_ready", q.ready_bytes()},
           {"consumers", q.consumer_count()},
           {"message_stats", std::move(message_stats)},
           {"state", "running"},
           {"type", "classic"}};
  out.update(named_values(kLengths, values, kQueueStats.size()));
  add_stats_details(out, kLengths, kQueueStats.size(), stats.history, keys, stats.lengths);
  return out;
}

// An AMQP connection as RabbitMQ shows it; its name is RabbitMQ's too ("peer:port -> local:port").
Json amqp_connection_json(const Connection& c) {
  const AmqpConnectionCore& core = *c.amqp_core();
  const std::string peer_host = core.hints().peer_address.value_or("");
  const std::uint64_t peer_port = peer_port_of(core.name());
  return {{"name", core.name()},
          {"user", core.login().auth.user},
          {"vhost", core.login().vhost},
          {"protocol", "AMQP 0-9-1"},
          {"transport", c.transport().scheme()},
          {"ssl", c.transport().scheme() == "amqps"},
          {"peer_host", peer_host},
          {"peer_port", peer_port},
          {"client_properties", plain_json(core.login().client)},
          {"connected_at", c.connected_at_ms()},
          {"timeout", core.heartbeat().count()},
          {"channels", core.open_channel_count()},
          {"auth_mechanism", "PLAIN"},
          {"state", "running"},
          {"type", "network"},
          {"node", "firemq@localhost"}};
}

// One AMQP channel, in RabbitMQ's shape: "CONN (N)", its connection, and its consumers and unacknowledged count.
Json amqp_channel_json(const AmqpConnectionCore& connection, const AmqpChannel& channel) {
  const std::string peer_host = connection.hints().peer_address.value_or("");
  const std::uint64_t peer_port = peer_port_of(connection.name());
  return {{"name", connection.name() + " (" + std::to_string(channel.number()) + ")"},
          {"number", channel.number()},
          {"connection_details", {{"name", connection.name()}, {"peer_host", peer_host}, {"peer_port", peer_port}}},
          {"user", connection.login().auth.user},
          {"vhost", connection.login().vhost},
          {"consumer_count", channel.consumer_count()},
          {"messages_unacknowledged", channel.unacknowledged()},
          {"prefetch_count", channel.prefetch()},
          {"confirm", channel.confirm_mode()},
          {"transactional", channel.transactional()},
          {"state", "running"},
          {"node", "firemq@localhost"}};
}

// A subscription as /api/consumers shows it, FireMQ's or an AMQP channel's (whose session carries the consumer).
Json consumer_json(const Subscription& subscription, const std::string& vhost, const Json& channel_details,
                   std::uint64_t prefetch) {
  const op::Subscribe& r = subscription.request();
  return {{"consumer_tag", r.tag},  // "Defaults to fire-<sub>", "shown in the management API"
          {"queue", {{"name", r.queue}, {"vhost", vhost}}},
          {"channel_details", channel_details},
          {"ack_required", !r.no_ack},
          {"exclusive", r.exclusive},
          {"prefetch_count", prefetch},
          {"active", true},
          {"arguments", plain_json(r.args)}};
}

Json exchange_json(const std::string& vhost, const Exchange& x) {
  return {{"name", x.name},
          {"vhost", vhost},
          {"type", std::string(exchange_type_name(x.type))},
          {"durable", x.durable},
          {"auto_delete", x.auto_delete},
          {"internal", x.internal},
          {"policy", x.policy},
          {"arguments", plain_json(x.args)}};
}

// RabbitMQ's properties_key: the routing key percent-encoded (so "~" stands only for an empty one), and a hash of the arguments when there are
// any; what DELETE /api/bindings/.../{props} names a binding by.
std::string properties_key(const Binding& b) {
  std::string key = b.key.empty() ? "~" : percent_encode(b.key);
  // "~" is unreserved in RFC 3986, but here it stands for the empty key and separates the arguments' hash.
  for (std::size_t at = key.find('~'); !b.key.empty() && at != std::string::npos; at = key.find('~', at)) {
    key.replace(at, 1, "%7E");
  }
  if (!b.args.empty()) key += "~" + std::to_string(std::hash<std::string>{}(plain_json(b.args).dump()));
  return key;
}

Json binding_json(const std::string& vhost, const std::string& source, const Binding& b) {
  return {{"source", source},
          {"vhost", vhost},
          {"destination", b.destination},
          {"destination_type", b.to_exchange ? "exchange" : "queue"},
          {"routing_key", b.key},
          {"arguments", plain_json(b.args)},
          {"properties_key", properties_key(b)}};
}

// The base64 SHA-256 of the text between the page's first `open` tag and the `close` after it, as CSP's
// 'sha256-...' source names an inline script or style (CSP Level 2, "hash-source"): the UI keeps its one
// inline <script> and <style>, and no other inline code can run.
std::string inline_hash(std::string_view page, std::string_view open, std::string_view close) {
  const auto begin = page.find(open);
  if (begin == std::string_view::npos) return {};
  const auto start = begin + open.size();
  const std::string_view inner = page.substr(start, page.find(close, start) - start);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(inner.data()), inner.size(), digest);
  std::string base64(4 * ((SHA256_DIGEST_LENGTH + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(base64.data()), digest, SHA256_DIGEST_LENGTH);
  base64.resize(static_cast<std::size_t>(n));
  return "'sha256-" + base64 + "'";
}

// The management UI's Content-Security-Policy: its own inline script and style by hash, API calls to the same
// origin, the data: favicon; nothing else, and no framing (clickjacking; frame-ancestors is CSP's X-Frame-Options).
const std::string& ui_content_security_policy() {
  static const std::string policy = "default-src 'none'; script-src " +
                                    inline_hash(kManagementPage, "<script>", "</script>") + "; style-src " +
                                    inline_hash(kManagementPage, "<style>", "</style>") +
                                    "; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                                    "frame-ancestors 'none'";
  return policy;
}

}  // namespace

HttpAnswer api_error(http::status status, const std::string& error, const std::string& reason) {
  return api_json(status, Json{{"error", error}, {"reason", reason}});
}

HttpAnswer not_found() { return api_error(http::status::not_found, "Object Not Found", "Not Found"); }

std::string exchange_name(const std::string& path_name) {
  return path_name == "amq.default" ? std::string() : path_name;
}

HttpAnswer api_json(http::status status, const Json& body) {
  HttpAnswer answer;
  answer.status = status;
  answer.content_type = "application/json";
  // Names and headers are peers' bytes and need not be UTF-8: what is not is shown as U+FFFD rather than failing
  // the whole listing.
  answer.text = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  return answer;
}

bool ManagementApi::serves(std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/" || path == "/index.html" || path == "/api" || path.starts_with("/api/") || path == "/metrics" ||
         path == "/metrics/detailed";
}

HttpAnswer ManagementApi::handle(const HttpRequest& request, const std::optional<std::string>& peer_address) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  // The UI's page holds nothing secret: it asks for credentials and sends them with each API call.
  if (path == "/" || path == "/index.html") {
    if (request.method() != http::verb::get)
      return api_error(http::status::method_not_allowed, "bad_request", "GET only");
    HttpAnswer answer;
    answer.content_type = "text/html; charset=utf-8";
    answer.text = std::string(kManagementPage);
    answer.content_security_policy = ui_content_security_policy();
    return answer;
  }
  // Prometheus scrapes without credentials, as rabbitmq_prometheus serves it (the metrics name no message content).
  if (path == "/metrics" || path == "/metrics/detailed") {
    return metrics_answer(request, path, target.substr(std::min(target.size(), path.size() + 1)));
  }
  // Authorization: Basic base64(user:password), checked as a login is (loopback users included).
  const auto header = request.find(http::field::authorization);
  std::optional<std::string> credentials;
  if (header != request.end()) {
    const std::string_view value(header->value().data(), header->value().size());
    if (value.starts_with("Basic ")) credentials = basic_credentials(value.substr(6));
  }
  const auto colon = credentials ? credentials->find(':') : std::string::npos;
  const User* user = colon == std::string::npos
                         ? nullptr
                         : env_.definitions.authenticate(credentials->substr(0, colon), credentials->substr(colon + 1));
  if (user == nullptr || !env_.config.loopback.admits(user->name, peer_address)) {
    // Logged as the FireMQ and AMQP listeners log a refused login (log.h), and as RabbitMQ logs "HTTP access
    // denied": a request that offered credentials is a login attempt; one without them is a browser asking.
    if (colon != std::string::npos) {
      const std::string name = credentials->substr(0, colon);
      log_refused_login("HTTP login", 401, peer_address, name,
                        user == nullptr ? "unknown user or wrong password"
                                        : "user '" + name + "' may only connect over loopback (loopback_users)");
    }
    HttpAnswer answer = api_error(http::status::unauthorized, "not_authorized", "Login failed");
    // A browser asked with WWW-Authenticate opens its own login dialog over the UI; the UI's requests say they are
    // scripted (X-Requested-With, the usual convention) and handle the 401 themselves.
    answer.ask_for_credentials = request.find("X-Requested-With") == request.end();
    return answer;
  }
  ApiUser who{user, has_tag(*user, "administrator") || has_tag(*user, "monitoring"), has_tag(*user, "administrator"),
              has_tag(*user, "administrator") || has_tag(*user, "policymaker"), credentials->substr(colon + 1)};
  if (!who.sees_everything && !has_tag(*user, "management") && !has_tag(*user, "policymaker")) {
    log_refused_login("HTTP login", 401, peer_address, user->name, "the user has no management tag");
    return api_error(http::status::unauthorized, "not_authorized", "Not management user");
  }
  Route route;
  std::string_view rest = path.substr(std::min(path.size(), std::string_view("/api/").size()));
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    // Names are UTF-8 on every protocol (spec section 3); one that is not would also end the broker where the
    // definitions are written as JSON (found by fuzz_management: PUT /api/users/%8E).
    auto part = percent_decode(rest.substr(0, slash));
    if (!part) return api_error(http::status::bad_request, "bad_request", "the path: " + part.error().reason);
    route.parts.push_back(std::move(*part));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return dispatch(request, route, who, peer_address);
}

HttpAnswer ManagementApi::dispatch(const HttpRequest& request, const Route& route, const ApiUser& who,
                                   const std::optional<std::string>& peer_address) {
  if (route.size() == 0) return not_found();
  if (request.method() == http::verb::get && route[0] == "aliveness-test")
    return aliveness_test(route, who, peer_address);
  if (request.method() == http::verb::get) {
    const std::string_view target(request.target().data(), request.target().size());
    const auto mark = target.find('?');
    Result<ListQuery, HttpAnswer> query = list_query(mark == std::string_view::npos ? "" : target.substr(mark + 1));
    if (!query) return query.error();
    return read(route, who, *query);
  }
  return write(request, route, who, peer_address);
}

HttpAnswer ManagementApi::metrics_answer(const HttpRequest& request, std::string_view path,
                                         std::string_view query) const {
  if (request.method() != http::verb::get)
    return api_error(http::status::method_not_allowed, "bad_request", "GET only");
  HttpAnswer answer;
  answer.content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (path == "/metrics") {
    answer.text = metrics();
    return answer;
  }
  std::set<std::string> families, vhosts;
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query = pair.size() == query.size() ? std::string_view() : query.substr(pair.size() + 1);
    const auto equals = pair.find('=');
    const std::string_view key = pair.substr(0, equals);
    if (key != "family" && key != "vhost") continue;  // as rabbitmq_prometheus, which reads only these
    auto value = percent_decode(equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1));
    if (!value)
      return api_error(http::status::bad_request, "bad_request",
                       "the query's " + std::string(key) + ": " + value.error().reason);
    (key == "family" ? families : vhosts).insert(std::move(*value));
  }
  answer.text = detailed_metrics(families, vhosts);
  return answer;
}

namespace {
// A read's 200: the body shaped as the query asks (columns, and for lists filter, sort and page).
HttpAnswer answer_shaped(const ListQuery& query, Json body) {
  Result<Json, HttpAnswer> out = shaped(query, std::move(body));
  if (!out) return out.error();
  return api_json(http::status::ok, *out);
}
}  // namespace

HttpAnswer ManagementApi::read(const Route& route, const ApiUser& who, const ListQuery& query) {
  const std::string& what = route[0];
  if (what == "health" || what == "nodes") {
    // The node's state names files of the data directory: for administrator and monitoring users, as RabbitMQ.
    if (!who.sees_everything) return api_error(http::status::unauthorized, "not_authorized", "Not monitor user");
    if (what == "health") return health_check(route);
  }
  if (what == "policies" || what == "operator-policies") {
    Result<Json, HttpAnswer> set = policies(route, who,
                                            what == "policies" ? PolicyKind::user : PolicyKind::operator_policy);
    if (!set) return set.error();
    return answer_shaped(query, std::move(*set));
  }
  if (what == "vhost-limits" || what == "user-limits") {
    Result<Json, HttpAnswer> set = limits(route, who);
    if (!set) return set.error();
    return answer_shaped(query, std::move(*set));
  }
  if (std::optional<Result<Json, HttpAnswer>> part = related(route, who)) {
    if (!*part) return part->error();
    return answer_shaped(query, std::move(**part));
  }
  // /api/vhosts/NAME, /api/users/NAME, /api/connections/NAME, /api/nodes/NAME; the others are /api/KIND/VHOST/NAME.
  const bool named_first = what == "vhosts" || what == "users" || what == "connections" || what == "nodes" ||
                           what == "channels";
  const std::optional<std::string> vhost = named_first ? std::nullopt : route.at(1);
  std::optional<std::string> name = named_first ? route.at(1) : route.at(2);
  if (what == "exchanges" && name) name = exchange_name(*name);  // amq.default in paths, "" in the JSON
  if (route.size() > (named_first ? 2u : 3u) || (vhost && !env_.core.vhost(*vhost))) return not_found();
  if (what == "queues" && vhost && name) {
    Result<Json, HttpAnswer> one = queue(who, *vhost, *name, query);
    if (!one) return one.error();
    return answer_shaped(query, std::move(*one));
  }
  Result<Json, HttpAnswer> body = collection(what, who, vhost, query);
  if (!body) return body.error();
  if (!name || what == "bindings") return answer_shaped(query, std::move(*body));
  if (!body->is_array()) return not_found();  // /api/overview/X and the like name nothing
  // A permission is named by its vhost and user (/api/permissions/V/U), the rest by their name.
  const char* key = what == "permissions" ? "user" : "name";
  for (const Json& item : *body) {
    if (item.is_object() && item.value(key, "") == *name && (!vhost || item.value("vhost", "") == *vhost)) {
      return answer_shaped(query, item);
    }
  }
  return not_found();
}

// The lists RabbitMQ serves below one object: a queue's bindings (/api/queues/V/Q/bindings), an exchange's as
// source or destination (/api/exchanges/V/X/bindings/source), a vhost's connections and channels
// (/api/vhosts/V/connections), a vhost's or a user's permissions, a connection's channels. Nullopt: the route is
// none of them.
std::optional<Result<Json, HttpAnswer>> ManagementApi::related(const Route& route, const ApiUser& who) const {
  const std::string& what = route[0];
  if (std::optional<Result<Json, HttpAnswer>> listed = permissions_of(route, who)) return listed;
  if (what == "users" && route.size() == 2 && route[1] == "without-permissions") {
    if (!who.administrator) return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
    Json out = Json::array();
    const Json granted = permissions();
    for (Json& user : users()) {
      const bool has_any = std::any_of(granted.begin(), granted.end(),
                                       [&](const Json& p) { return p["user"] == user["name"]; });
      if (!has_any) out.push_back(std::move(user));
    }
    return out;
  }
  if (what == "connections" && route.size() == 3 && route[2] == "channels") {
    if (find_connection(route[1]) == nullptr) return not_found();
    Json out = Json::array();
    for (Json& channel : channels(who)) {
      if (channel["connection_details"]["name"] == route[1]) out.push_back(std::move(channel));
    }
    return out;  // a FireMQ connection has none; another user's AMQP connection shows none to a management user
  }
  const bool queue_bindings = what == "queues" && route.size() == 4 && route[3] == "bindings";
  const bool exchange_bindings = what == "exchanges" && route.size() == 5 && route[3] == "bindings" &&
                                 (route[4] == "source" || route[4] == "destination");
  const bool vhost_list = what == "vhosts" && route.size() == 3 &&
                          (route[2] == "connections" || route[2] == "channels");
  if (!queue_bindings && !exchange_bindings && !vhost_list) return std::nullopt;
  Vhost* vhost = env_.core.vhost(route[1]);
  if (vhost == nullptr || !may_see(who, route[1])) return not_found();
  Json out = Json::array();
  if (vhost_list) {
    for (Json& item : route[2] == "connections" ? connections(who) : channels(who)) {
      if (item["vhost"] == route[1]) out.push_back(std::move(item));
    }
    return out;
  }
  const std::string name = exchange_bindings ? exchange_name(route[2]) : route[2];
  if (queue_bindings ? vhost->queues().count(name) == 0 : vhost->exchanges().count(name) == 0) return not_found();
  for (Json& b : bindings(who, route[1])) {
    const bool match = queue_bindings         ? b["destination_type"] == "queue" && b["destination"] == name
                       : route[4] == "source" ? b["source"] == name
                                              : b["destination_type"] == "exchange" && b["destination"] == name;
    if (match) out.push_back(std::move(b));
  }
  return out;
}

// RabbitMQ's /api/vhosts/V/permissions and /api/users/U/permissions, for administrators; nullopt: neither route.
std::optional<Result<Json, HttpAnswer>> ManagementApi::permissions_of(const Route& route, const ApiUser& who) const {
  const bool of_vhost = route[0] == "vhosts", of_user = route[0] == "users";
  if (!(of_vhost || of_user) || route.size() != 3 || route[2] != "permissions") return std::nullopt;
  if (!who.administrator) return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
  const bool exists = of_vhost ? env_.definitions.has_vhost(route[1]) : env_.definitions.find_user(route[1]) != nullptr;
  if (!exists) return not_found();
  Json out = Json::array();
  for (Json& p : permissions()) {
    if (p[of_vhost ? "vhost" : "user"] == route[1]) out.push_back(std::move(p));
  }
  return out;
}

Result<Json, HttpAnswer> ManagementApi::collection(const std::string& what, const ApiUser& who,
                                                   const std::optional<std::string>& vhost,
                                                   const ListQuery& query) const {
  if (what == "overview") return overview(who, query);
  if (what == "whoami") return Json{{"name", who.user->name}, {"tags", who.user->tags}};
  if (what == "cluster-name") return Json{{"name", kClusterName}};
  if (what == "nodes") return Json::array({node()});
  if (what == "vhosts") return vhosts(who);
  if (what == "users" || what == "permissions") {
    if (!who.administrator) return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
    return what == "users" ? users() : permissions();
  }
  if (what == "connections") return connections(who);
  if (what == "channels") return channels(who);
  if (what == "extensions") return Json::array();
  if (what == "exchanges") return exchanges(who, vhost);
  if (what == "queues") return queues(who, vhost);
  if (what == "bindings") return bindings(who, vhost);
  if (what == "consumers") return consumers(who, vhost);
  if (what == "definitions") {
    // It holds every user's password hash: administrators only, as in RabbitMQ.
    if (!who.administrator) return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
    return vhost ? vhost_definitions(who, *vhost) : definitions(who);
  }
  return not_found();
}

bool ManagementApi::may_see(const ApiUser& who, const std::string& vhost) const {
  return who.sees_everything || env_.definitions.permission(*who.user, vhost) != nullptr;
}

Json ManagementApi::overview(const ApiUser& who, const ListQuery& query) const {
  std::uint64_t ready = 0, unacked = 0, queue_count = 0, exchange_count = 0, consumer_count = 0;
  // As RabbitMQ's overview: a user who does not see every vhost sees the message rates of its own vhosts only.
  MessageCounters c = who.sees_everything ? env_.core.counters() : MessageCounters{};
  std::vector<std::string> keys;
  if (who.sees_everything) keys.push_back(kTotalsKey);
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if (!may_see(who, name)) continue;
    if (!who.sees_everything) c += vhost->counters(), keys.push_back(vhost_key(name));
    exchange_count += vhost->exchanges().size();
    for (const auto& [qname, q] : vhost->queues()) {
      ++queue_count;
      ready += q->ready_count();
      unacked += q->unacked_count();
      consumer_count += q->consumer_count();
    }
  }
  const std::vector<std::uint64_t> values = overview_values(c, ready, unacked);
  Json message_stats = named_values(kOverviewStats, values, 0);
  add_stats_details(message_stats, kOverviewStats, 0, history_, keys, query.msg_rates);
  Json queue_totals = named_values(kLengths, values, kOverviewStats.size());
  add_stats_details(queue_totals, kLengths, kOverviewStats.size(), history_, keys, query.lengths);
  Json listeners = Json::array();
  for (const ListenerInfo& l : env_.listeners()) listeners.push_back({{"protocol", l.protocol}, {"port", l.port}});
  return {{"product_name", "FireMQ"},
          {"product_version", kServerVersion},
          {"management_version", kServerVersion},
          {"rabbitmq_version", kServerVersion},
          {"cluster_name", kClusterName},
          {"node", kNodeName},
          {"queue_totals", std::move(queue_totals)},
          {"object_totals",
           {{"connections", connections(who).size()},
            {"channels", channels(who).size()},
            {"exchanges", exchange_count},
            {"queues", queue_count},
            {"consumers", consumer_count}}},
          {"message_stats", std::move(message_stats)},
          {"statistics_interval", history_.interval_ms()},
          {"listeners", listeners},
          {"alarms", alarms_in_effect()}};
}

// Off the data path: reads, on the management side's own timer, counters and depths the broker keeps anyway (a
// publish or an ack costs nothing more), as RabbitMQ's collectors sample every collect_statistics_interval.
void ManagementApi::collect_statistics(std::int64_t now_ms) {
  history_.begin_tick(now_ms);
  std::uint64_t ready = 0, unacked = 0;
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    std::uint64_t vhost_ready = 0, vhost_unacked = 0;
    for (const auto& [qname, q] : vhost->queues()) {
      history_.record(queue_key(name, qname), queue_values(*q), kQueueStats.size());
      vhost_ready += q->ready_count();
      vhost_unacked += q->unacked_count();
    }
    history_.record(vhost_key(name), overview_values(vhost->counters(), vhost_ready, vhost_unacked),
                    kOverviewStats.size());
    ready += vhost_ready;
    unacked += vhost_unacked;
  }
  history_.record(kTotalsKey, overview_values(env_.core.counters(), ready, unacked), kOverviewStats.size());
  history_.end_tick();  // the series of deleted queues and vhosts go
}

// GET /api/queues/V/NAME: the one queue, with the samples the query's ranges ask for.
Result<Json, HttpAnswer> ManagementApi::queue(const ApiUser& who, const std::string& vhost_name,
                                              const std::string& name, const ListQuery& query) const {
  const Vhost* vhost = env_.core.vhost(vhost_name);
  if (vhost == nullptr || !may_see(who, vhost_name)) return not_found();
  const auto found = vhost->queues().find(name);
  if (found == vhost->queues().end()) return not_found();
  return queue_json(vhost_name, *vhost, *found->second, QueueStats{history_, query.msg_rates, query.lengths});
}

// FireMQ's: the resources whose alarm holds ("memory", "disk"), for the UI's banner; any management user sees
// them (the failed file itself is in /api/nodes, for monitoring users).
Json ManagementApi::alarms_in_effect() const {
  Json alarms = Json::array();
  if (env_.alarms.memory()) alarms.push_back("memory");
  if (env_.alarms.disk()) alarms.push_back("disk");
  return alarms;
}

// The one node, with RabbitMQ's alarm fields: mem_alarm, and disk_free_alarm, which a failed message store raises
// as well as low free space (both mean the broker cannot write); storage_failure says which file failed and how.
Json ManagementApi::node() const {
  std::error_code ec;
  const auto space = std::filesystem::space(env_.config.alarms.disk_path, ec);
  const std::string& failure = env_.alarms.storage_failure();
  const ProcessFigures process = process_figures();
  return {{"name", kNodeName},
          {"type", "disc"},
          {"running", true},
          {"mem_used", MemoryAccount::in_use()},
          {"mem_limit", env_.alarms.memory_high_watermark()},
          {"mem_alarm", env_.alarms.memory()},
          {"disk_free", ec ? 0 : static_cast<std::uint64_t>(space.available)},
          {"disk_free_limit", env_.config.alarms.disk_free_limit},
          {"disk_free_alarm", env_.alarms.disk()},
          {"storage_failure", failure.empty() ? Json() : Json(failure)},
          {"fd_used", process.open_fds},
          {"fd_total", process.max_fds},
          {"sockets_used", process.open_sockets},
          {"sockets_total", process.max_fds},
          {"mem_resident", process.resident_bytes}};
}

// RabbitMQ's GET /api/health/checks/alarms: 200 {"status": "ok"}, or 503 with the alarms in effect.
HttpAnswer ManagementApi::alarms_check() const {
  if (!env_.alarms.active()) return api_json(http::status::ok, {{"status", "ok"}});
  Json alarms = Json::array();
  if (env_.alarms.memory()) alarms.push_back({{"node", kNodeName}, {"resource", "memory"}});
  if (env_.alarms.disk()) {
    const std::string& failure = env_.alarms.storage_failure();
    alarms.push_back({{"node", kNodeName},
                      {"resource", "disk"},
                      {"reason", failure.empty() ? "disk free limit reached" : "message store failed: " + failure}});
  }
  return api_json(http::status::service_unavailable,
                  {{"status", "failed"}, {"reason", "There are alarms in effect in the cluster"}, {"alarms", alarms}});
}

Json ManagementApi::vhosts(const ApiUser& who) const {
  Json out = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if (!may_see(who, name)) continue;
    std::uint64_t ready = 0, unacked = 0;
    for (const auto& [qname, q] : vhost->queues()) {
      ready += q->ready_count();
      unacked += q->unacked_count();
    }
    // As RabbitMQ's vhosts: the vhost's message_stats and depths, each with its rate (from the history).
    const std::vector<std::uint64_t> values = overview_values(vhost->counters(), ready, unacked);
    const std::vector<std::string> keys{vhost_key(name)};
    Json item{{"name", name},
              {"message_stats", named_values(kOverviewStats, values, 0)},
              {"tracing", false},
              {"limits", firemq::to_json(env_.definitions.vhost_limits(name))}};
    add_stats_details(item["message_stats"], kOverviewStats, 0, history_, keys, std::nullopt);
    item.update(named_values(kLengths, values, kOverviewStats.size()));
    add_stats_details(item, kLengths, kOverviewStats.size(), history_, keys, std::nullopt);
    out.push_back(std::move(item));
  }
  return out;
}

Json ManagementApi::users() const {
  // The export's shape: the hash, never a password.
  return env_.definitions.to_json()["users"];
}

Json ManagementApi::permissions() const { return env_.definitions.to_json()["permissions"]; }

Json ManagementApi::connections(const ApiUser& who) const {
  Json out = Json::array();
  for (const Connection* c : env_.connections.all()) {
    if (c->fire_session() == nullptr) continue;  // AMQP's: below
    const Session& s = *c->fire_session();
    if (s.state() != Session::State::open) continue;  // in its handshake, or closing: not a client yet
    if (!who.sees_everything && s.user() != who.user->name) continue;
    const std::string peer_host = s.transport_hints().peer_address.value_or("");
    const std::uint64_t peer_port = peer_port_of(c->transport().describe());
    const std::string_view transport = c->transport().scheme();
    out.push_back({{"name", s.conn_id()},
                   {"user", s.user()},
                   {"vhost", s.vhost()},
                   {"protocol", "FireMQ 1"},
                   {"transport", transport},
                   {"ssl", transport == "fires" || transport == "wss"},
                   {"peer_host", peer_host},
                   {"peer_port", peer_port},
                   {"client_properties", plain_json(s.client_properties())},
                   {"connected_at", c->connected_at_ms()},
                   {"timeout", s.heartbeat().count()},
                   {"channels", 1},
                   {"state", "running"},
                   {"type", "network"},
                   {"node", "firemq@localhost"}});
  }
  for (const Connection* c : amqp_connections(who)) out.push_back(amqp_connection_json(*c));
  return out;
}

std::vector<const Connection*> ManagementApi::amqp_connections(const ApiUser& who) const {
  std::vector<const Connection*> out;
  for (const Connection* c : env_.connections.all()) {
    if (c->amqp_core() == nullptr) continue;
    const AmqpConnectionCore& core = *c->amqp_core();
    if (core.state() != AmqpConnectionCore::State::open) continue;  // in its handshake, or closing
    if (!who.sees_everything && core.login().auth.user != who.user->name) continue;
    out.push_back(c);
  }
  return out;
}

Json ManagementApi::channels(const ApiUser& who) const {
  // FireMQ connections have no channels; AMQP's are listed as RabbitMQ lists them.
  Json out = Json::array();
  for (const Connection* c : amqp_connections(who)) {
    for (const auto& [number, channel] : c->amqp_core()->channels()) {
      if (channel->state() == AmqpChannel::State::open) out.push_back(amqp_channel_json(*c->amqp_core(), *channel));
    }
  }
  return out;
}

Json ManagementApi::exchanges(const ApiUser& who, const std::optional<std::string>& only) const {
  Json out = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if (!may_see(who, name) || (only && *only != name)) continue;
    for (const auto& [xname, x] : vhost->exchanges()) out.push_back(exchange_json(name, x));
  }
  return out;
}

Json ManagementApi::queues(const ApiUser& who, const std::optional<std::string>& only) const {
  Json out = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if (!may_see(who, name) || (only && *only != name)) continue;
    // Lists answer rates without samples: with them, 10,000 queues would be ~100 MB of JSON (message_history.h).
    const QueueStats stats{history_, std::nullopt, std::nullopt};
    for (const auto& [qname, q] : vhost->queues()) out.push_back(queue_json(name, *vhost, *q, stats));
  }
  return out;
}

Json ManagementApi::bindings(const ApiUser& who, const std::optional<std::string>& only) const {
  Json out = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if (!may_see(who, name) || (only && *only != name)) continue;
    // Every queue is bound to the default exchange by its name, as RabbitMQ lists it.
    for (const auto& [qname, q] : vhost->queues()) {
      out.push_back(binding_json(name, "", Binding{qname, false, qname, {}}));
    }
    for (const auto& [xname, x] : vhost->exchanges()) {
      for (const Binding& b : x.bindings) out.push_back(binding_json(name, xname, b));
    }
  }
  return out;
}

Json ManagementApi::consumers(const ApiUser& who, const std::optional<std::string>& only) const {
  Json out = Json::array();
  for (const Connection* c : env_.connections.all()) {
    if (c->fire_session() == nullptr) continue;  // AMQP's: below
    const Session& s = *c->fire_session();
    if (s.state() != Session::State::open || !may_see(who, s.vhost()) || (only && *only != s.vhost())) continue;
    const Json details{{"connection_name", s.conn_id()}, {"name", s.conn_id() + " (1)"}, {"user", s.user()}};
    for (const auto& [sub, subscription] : s.subscriptions()) {
      out.push_back(consumer_json(*subscription, s.vhost(), details, subscription->credit()));  // the credit left
    }
  }
  for (const Connection* c : amqp_connections(who)) {
    const AmqpConnectionCore& core = *c->amqp_core();
    if (!may_see(who, core.login().vhost) || (only && *only != core.login().vhost)) continue;
    for (const auto& [number, channel] : core.channels()) {
      const Session* s = channel->session();
      if (s == nullptr) continue;
      const Json details{{"connection_name", core.name()},
                         {"name", core.name() + " (" + std::to_string(number) + ")"},
                         {"number", number},
                         {"user", core.login().auth.user}};
      for (const auto& [sub, subscription] : s->subscriptions()) {
        out.push_back(consumer_json(*subscription, core.login().vhost, details, channel->prefetch()));
      }
    }
  }
  return out;
}

Json ManagementApi::definitions(const ApiUser& who) const {
  Json out = env_.definitions.to_json();
  out["firemq_version"] = kServerVersion;
  out["exchanges"] = Json::array();
  out["queues"] = Json::array();
  out["bindings"] = Json::array();
  for (const Json& x : exchanges(who, std::nullopt)) {
    // Built-in exchanges (the default and amq.*) are not definitions, as in RabbitMQ's export.
    const std::string name = x["name"];
    if (name.empty() || name.starts_with("amq.")) continue;
    out["exchanges"].push_back(x);
  }
  for (const Json& q : queues(who, std::nullopt)) {
    if (q["exclusive"].get<bool>()) continue;
    out["queues"].push_back({{"name", q["name"]},
                             {"vhost", q["vhost"]},
                             {"durable", q["durable"]},
                             {"auto_delete", q["auto_delete"]},
                             {"arguments", q["arguments"]}});
  }
  for (const Json& b : bindings(who, std::nullopt)) {
    if (b["source"] == "") continue;
    out["bindings"].push_back(b);
  }
  out["policies"] = Json::array();
  out["operator_policies"] = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    for (const auto& [pname, policy] : vhost->policies()) out["policies"].push_back(to_json(policy));
    for (const auto& [pname, policy] : vhost->policies(PolicyKind::operator_policy)) {
      out["operator_policies"].push_back(to_json(policy));
    }
  }
  return out;
}

std::optional<HttpAnswer> ManagementApi::policy_refusal(const ApiUser& who, PolicyKind kind) {
  if (kind == PolicyKind::operator_policy && !who.administrator) {
    return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
  }
  if (!who.policymaker) return api_error(http::status::unauthorized, "not_authorized", "Not policymaker user");
  return std::nullopt;
}

Json ManagementApi::vhost_definitions(const ApiUser& who, const std::string& vhost) const {
  const Json all = definitions(who);
  Json out{{"firemq_version", kServerVersion},
           {"rabbitmq_version", kServerVersion},
           {"product_name", "FireMQ"},
           {"product_version", kServerVersion}};
  for (const char* kind : kVhostDefinitionKinds) {
    out[kind] = Json::array();
    for (Json entry : all.value(kind, Json::array())) {
      if (entry.value("vhost", "") != vhost) continue;
      entry.erase("vhost");
      out[kind].push_back(std::move(entry));
    }
  }
  return out;
}

Result<Json, HttpAnswer> ManagementApi::policies(const Route& route, const ApiUser& who, PolicyKind kind) const {
  if (std::optional<HttpAnswer> refused = policy_refusal(who, kind)) return *refused;
  if (route.size() > 3) return not_found();
  const std::optional<std::string> only = route.at(1);
  const Vhost* one = only ? env_.core.vhost(*only) : nullptr;
  if (only && (one == nullptr || !may_see(who, *only))) return not_found();
  Json out = Json::array();
  for (const auto& [name, vhost] : env_.core.vhosts()) {
    if ((one != nullptr && vhost.get() != one) || !may_see(who, name)) continue;
    for (const auto& [pname, policy] : vhost->policies(kind)) out.push_back(to_json(policy));
  }
  if (route.size() < 3) return out;
  for (Json& policy : out) {
    if (policy["name"] == route[2]) return std::move(policy);
  }
  return not_found();
}

std::optional<ConnectionOwner> connection_owner(const Connection& c) {
  if (const Session* s = c.fire_session(); s != nullptr && s->state() == Session::State::open) {
    return ConnectionOwner{s->conn_id(), s->user(), s->vhost()};
  }
  if (const AmqpConnectionCore* core = c.amqp_core();
      core != nullptr && core->state() == AmqpConnectionCore::State::open) {
    return ConnectionOwner{core->name(), core->login().auth.user, core->login().vhost};
  }
  return std::nullopt;
}

Connection* ManagementApi::find_connection(const std::string& name) const {
  for (Connection* c : env_.connections.all()) {
    if (auto owner = connection_owner(*c); owner && owner->name == name) return c;
  }
  return nullptr;
}

}  // namespace firemq
