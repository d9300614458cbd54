// The management API's administration (management_api.h): vhosts, users, permissions and the definitions import,
// for users tagged administrator, as in RabbitMQ. Users, vhosts and permissions change in Definitions (merged as
// RabbitMQ's import merges) and vhosts in the Core; either way the data directory's definitions file is rewritten
// before the answer, as for a durable declare, so that a restart comes back with them. Passwords are hashed on
// arrival (password_hash.h): only the salted hash is ever kept.
#include <charconv>
#include <map>
#include <set>
#include <sstream>

#include "reference-broker/management/management_api.h"
#include "reference-broker/store/durable_topology.h"

namespace firemq {
namespace {

using Json = nlohmann::json;
namespace http = boost::beast::http;

HttpAnswer bad_request(const std::string& reason) {
  return api_error(http::status::bad_request, "bad_request", reason);
}

// RabbitMQ's API takes a user's tags as a list or as one comma-separated string ("administrator,monitoring", as
// rabbitmqadmin sends them); Definitions takes the list.
Result<Json, std::string> tags_list(const Json& tags) {
  if (tags.is_null()) return Json::array();
  if (tags.is_array()) {
    for (const Json& t : tags) {
      if (!t.is_string()) return std::string("'tags' must be strings");
    }
    return tags;
  }
  if (!tags.is_string()) return std::string("'tags' must be a list or a comma-separated string");
  Json out = Json::array();
  std::stringstream text(tags.get<std::string>());
  for (std::string tag; std::getline(text, tag, ',');) {
    const auto first = tag.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    out.push_back(tag.substr(first, tag.find_last_not_of(' ') - first + 1));
  }
  return out;
}

// A user as Definitions reads it, from PUT /api/users/NAME's body or an import's entry: the password in clear
// text (hashed on arrival) or RabbitMQ's password_hash and hashing_algorithm; neither gives a user who cannot log
// in with a password, as RabbitMQ documents.
Result<Json, std::string> user_entry(const std::string& name, const Json& body) {
  Json user{{"name", name}};
  for (const char* key : {"password", "password_hash", "hashing_algorithm"}) {
    if (!body.contains(key)) continue;
    if (!body[key].is_string()) return "'" + std::string(key) + "' must be a string";
    user[key] = body[key];
  }
  if (user.contains("password") && user.contains("password_hash")) {
    return std::string("give 'password' or 'password_hash', not both");
  }
  auto tags = tags_list(body.value("tags", Json()));
  if (!tags) return tags.error();
  user["tags"] = *tags;
  if (body.contains("limits")) user["limits"] = body["limits"];
  return user;
}

// What of an import this broker cannot honour: refused by name rather than dropped without a word.
std::optional<std::string> unsupported_part(const Json& body) {
  for (const char* kind : {"topic_permissions"}) {
    if (body.contains(kind) && !(body[kind].is_array() && body[kind].empty())) {
      return "'" + std::string(kind) + "' are not supported by this broker";
    }
  }
  for (const char* kind : {"users", "vhosts", "permissions", "parameters", "policies", "operator_policies", "exchanges",
                           "queues", "bindings"}) {
    if (body.contains(kind) && !body[kind].is_array()) return "'" + std::string(kind) + "' must be a list";
  }
  return std::nullopt;
}

// How many exchanges, queues and bindings an import would leave in one vhost (new names only: one that exists
// is redeclared), to hold them to the same limits as a client's declares (session_topology.cpp).
struct TopologyCounts {
  std::set<std::string> exchanges, queues;
  std::size_t bindings = 0;  // every entry counts: a binding that exists already only makes this stricter
};

std::map<std::string, TopologyCounts> counts_after_import(const Json& body, Core& core) {
  std::map<std::string, TopologyCounts> counts;
  for (auto& [name, vhost] : core.vhosts()) {
    for (const auto& [exchange, _] : vhost->exchanges()) counts[name].exchanges.insert(exchange);
    for (const auto& [queue, _] : vhost->queues()) counts[name].queues.insert(queue);
    counts[name].bindings = vhost->binding_count();
  }
  // Counted before the import checks the entries' shapes (it refuses them with a reason): a field that is no
  // string counts as "" here rather than throw (fuzz_management: {"queues": [{"name": {}}]}).
  const auto entries = [&](const char* kind) {
    const auto it = body.find(kind);
    return it != body.end() && it->is_array() ? *it : Json::array();
  };
  const auto text = [](const Json& e, const char* key) {
    const auto it = e.is_object() ? e.find(key) : e.end();
    return e.is_object() && it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (const Json& e : entries("exchanges")) counts[text(e, "vhost")].exchanges.insert(text(e, "name"));
  for (const Json& q : entries("queues")) counts[text(q, "vhost")].queues.insert(text(q, "name"));
  for (const Json& b : entries("bindings")) ++counts[text(b, "vhost")].bindings;
  return counts;
}

// The first limit the import would pass, as a 506 would name it to a client: the vhost's max-queues, or the
// broker's --max-queues, --max-exchanges and --max-bindings.
std::optional<std::string> over_a_limit(const Json& body, Core& core, const Definitions& definitions,
                                        const ClientBounds& bounds) {
  for (const auto& [vhost, c] : counts_after_import(body, core)) {
    const std::string in = "vhost '" + vhost + "' would have ";
    const auto limit = definitions.vhost_limits(vhost).max_queues;
    if (limit && c.queues.size() > *limit) {
      return in + std::to_string(c.queues.size()) + " queues, over its max-queues of " + std::to_string(*limit);
    }
    if (c.queues.size() > bounds.queues_per_vhost) {
      return in + std::to_string(c.queues.size()) + " queues, over --max-queues " +
             std::to_string(bounds.queues_per_vhost);
    }
    if (c.exchanges.size() > bounds.exchanges_per_vhost) {
      return in + std::to_string(c.exchanges.size()) + " exchanges, over --max-exchanges " +
             std::to_string(bounds.exchanges_per_vhost);
    }
    if (c.bindings > bounds.bindings_per_vhost) {
      return in + std::to_string(c.bindings) + " bindings, over --max-bindings " +
             std::to_string(bounds.bindings_per_vhost);
    }
  }
  return std::nullopt;
}

}  // namespace

HttpAnswer ManagementApi::administer(const HttpRequest& request, const Route& route, const ApiUser& who) {
  if (!who.administrator) return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
  auto body = api_body(request);
  if (!body) return body.error();
  const http::verb method = request.method();
  const std::string& what = route[0];
  if (what == "vhosts" && route.size() == 2) {
    if (method == http::verb::put) return put_vhost(route[1]);
    if (method == http::verb::delete_) return delete_vhost(route[1]);
  }
  if (what == "users" && route.size() == 2 && route[1] == "bulk-delete" && method == http::verb::post) {
    return delete_users(*body);
  }
  if (what == "users" && route.size() == 2) {
    if (method == http::verb::put) return put_user(route[1], *body);
    if (method == http::verb::delete_) return delete_user(route[1]);
  }
  if (what == "permissions" && route.size() == 3) {
    if (method == http::verb::put) return put_permission(route[1], route[2], *body);
    if (method == http::verb::delete_) return delete_permission(route[1], route[2]);
  }
  if ((what == "vhost-limits" || what == "user-limits") && route.size() == 3) {
    if (method == http::verb::put) return put_limit(route, *body);
    if (method == http::verb::delete_) return delete_limit(route);
  }
  if (what == "definitions" && route.size() == 1 && method == http::verb::post) return import_definitions(*body);
  if (what == "definitions" && route.size() == 2 && method == http::verb::post) {
    return import_vhost_definitions(route[1], *body);
  }
  return api_error(http::status::method_not_allowed, "bad_request", "no such route for this method");
}

HttpAnswer ManagementApi::put_vhost(const std::string& name) {
  const bool existed = env_.definitions.has_vhost(name);
  if (auto bad = env_.definitions.merge(Json{{"vhosts", Json::array({Json{{"name", name}}})}}))
    return bad_request(*bad);
  env_.core.add_vhost(name);
  return saved(existed ? http::status::no_content : http::status::created);
}

HttpAnswer ManagementApi::delete_vhost(const std::string& name) {
  if (!env_.definitions.has_vhost(name)) return not_found();
  // As RabbitMQ: its clients are disconnected, then its queues (and their messages) and exchanges go.
  close_connections([&](const std::string&, const std::string& vhost) { return vhost == name; },
                    "vhost '" + name + "' is deleted");
  env_.core.remove_vhost(name);
  env_.definitions.remove_vhost(name);
  return saved(http::status::no_content);
}

HttpAnswer ManagementApi::put_user(const std::string& name, const Json& body) {
  auto user = user_entry(name, body);
  if (!user) return bad_request(user.error());
  const bool existed = env_.definitions.find_user(name) != nullptr;
  if (auto bad = env_.definitions.merge(Json{{"users", Json::array({*user})}})) return bad_request(*bad);
  return saved(existed ? http::status::no_content : http::status::created);
}

HttpAnswer ManagementApi::delete_user(const std::string& name) {
  if (!env_.definitions.remove_user(name)) return not_found();
  // As RabbitMQ: a deleted user's connections are closed.
  close_connections([&](const std::string& user, const std::string&) { return user == name; },
                    "user '" + name + "' is deleted");
  return saved(http::status::no_content);
}

// RabbitMQ's POST /api/users/bulk-delete {"users": [NAME...]}: each user that exists is deleted as DELETE does;
// the names are all checked first (a list of strings), and a name that is no user is passed over, as RabbitMQ's.
HttpAnswer ManagementApi::delete_users(const Json& body) {
  const auto names = body.find("users");
  if (names == body.end() || !names->is_array()) return bad_request("'users' must be a list of user names");
  for (const Json& name : *names) {
    if (!name.is_string()) return bad_request("'users' must be a list of user names, not " + name.dump());
  }
  for (const Json& name : *names) {
    const std::string user = name.get<std::string>();
    if (!env_.definitions.remove_user(user)) continue;
    close_connections([&](const std::string& who, const std::string&) { return who == user; },
                      "user '" + user + "' is deleted");
  }
  return saved(http::status::no_content);
}

HttpAnswer ManagementApi::put_permission(const std::string& vhost, const std::string& user, const Json& body) {
  if (!env_.definitions.has_vhost(vhost))
    return api_error(http::status::not_found, "not_found", "no vhost '" + vhost + "'");
  if (env_.definitions.find_user(user) == nullptr) {
    return api_error(http::status::not_found, "not_found", "no user '" + user + "'");
  }
  Json permission{{"user", user}, {"vhost", vhost}};
  // RabbitMQ requires all three regular expressions ("" grants nothing).
  for (const char* key : {"configure", "write", "read"}) {
    if (!body.contains(key) || !body[key].is_string())
      return bad_request("'" + std::string(key) + "' must be a string (a regular expression)");
    permission[key] = body[key];
  }
  const User* existing = env_.definitions.find_user(user);
  const bool existed = env_.definitions.permission(*existing, vhost) != nullptr;
  if (auto bad = env_.definitions.merge(Json{{"permissions", Json::array({permission})}})) return bad_request(*bad);
  return saved(existed ? http::status::no_content : http::status::created);
}

HttpAnswer ManagementApi::delete_permission(const std::string& vhost, const std::string& user) {
  if (!env_.definitions.remove_permission(user, vhost)) return not_found();
  return saved(http::status::no_content);
}

Result<Json, HttpAnswer> ManagementApi::limits(const Route& route, const ApiUser& who) const {
  const bool of_vhosts = route[0] == "vhost-limits";
  if (route.size() > 2) return not_found();
  const std::optional<std::string> only = route.at(1);
  // A vhost's limits are seen by whoever sees the vhost; users' by administrators, as RabbitMQ's.
  if (!of_vhosts && !who.administrator) {
    return api_error(http::status::unauthorized, "not_authorized", "Not administrator user");
  }
  if (only && (of_vhosts ? !env_.definitions.has_vhost(*only) : env_.definitions.find_user(*only) == nullptr)) {
    return not_found();
  }
  Json out = Json::array();
  const auto add = [&](const char* key, const std::string& name, Json value) {
    if (!value.empty() && (!only || name == *only)) out.push_back({{key, name}, {"value", std::move(value)}});
  };
  if (of_vhosts) {
    for (const std::string& vhost : env_.definitions.vhost_names()) {
      if (may_see(who, vhost)) add("vhost", vhost, firemq::to_json(env_.definitions.vhost_limits(vhost)));
    }
    return out;
  }
  const Json users = env_.definitions.to_json()["users"];  // held: a temporary's element would dangle in the loop
  for (const Json& user : users) add("user", user["name"], user["limits"]);
  return out;
}

namespace {
// A limit's "value": an integer, or its decimal text (as rabbitmqadmin and forms send counts); negative is none.
Result<Json, std::string> limit_value(const Json& body) {
  const auto it = body.find("value");
  if (it == body.end()) return std::string("'value' is required: the limit, an integer (negative for none)");
  if (it->is_number_integer()) return *it;
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    std::int64_t n = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (error == std::errc() && end == text.data() + text.size() && !text.empty()) return Json(n);
  }
  return "'value' must be an integer, not " + it->dump();
}
}  // namespace

HttpAnswer ManagementApi::put_limit(const Route& route, const Json& body) {
  const bool of_vhost = route[0] == "vhost-limits";
  if (of_vhost ? !env_.definitions.has_vhost(route[1]) : env_.definitions.find_user(route[1]) == nullptr) {
    return not_found();
  }
  auto value = limit_value(body);
  if (!value) return bad_request(value.error());
  const Json one{{route[2], *value}};
  const auto bad = of_vhost ? env_.definitions.set_vhost_limits(route[1], one)
                            : env_.definitions.set_user_limits(route[1], one);
  if (bad) return bad_request(*bad);
  return saved(http::status::no_content);
}

HttpAnswer ManagementApi::delete_limit(const Route& route) {
  // Cleared as RabbitMQ's clear_vhost_limits: a negative value is no limit (limits.h).
  Json none;
  none["value"] = -1;
  return put_limit(route, none);
}

HttpAnswer ManagementApi::import_definitions(const Json& body) {
  if (auto bad = unsupported_part(body)) return bad_request(*bad);
  Json accounts{{"vhosts", body.value("vhosts", Json::array())},
                {"permissions", body.value("permissions", Json::array())},
                {"parameters", body.value("parameters", Json::array())},
                {"users", Json::array()}};
  for (const Json& u : body.value("users", Json::array())) {
    if (!u.is_object() || !u.contains("name") || !u["name"].is_string()) return bad_request("a user without a 'name'");
    auto user = user_entry(u["name"].get<std::string>(), u);
    if (!user) return bad_request("user '" + u["name"].get<std::string>() + "': " + user.error());
    accounts["users"].push_back(*user);
  }
  // Users, vhosts, permissions and limits first, all or nothing; then the topology in those vhosts, each entry
  // declared as a client's declare would be (an inequivalent one is refused, and reported).
  if (auto bad = env_.definitions.merge(accounts)) return bad_request(*bad);
  for (const std::string& vhost : env_.definitions.vhost_names()) env_.core.add_vhost(vhost);
  // The topology is held to the limits in force after the accounts (an import may set max-queues), whole: none
  // of it is declared when any vhost would go over.
  if (auto over = over_a_limit(body, env_.core, env_.definitions, env_.config.bounds)) {
    if (HttpAnswer unsaved = saved(http::status::no_content); unsaved.status != http::status::no_content)
      return unsaved;
    return bad_request("imported the users, vhosts, permissions and limits, but none of the exchanges, queues and "
                       "bindings: " +
                       *over);
  }
  const std::vector<std::string> problems = DurableTopology::restore(body, env_.core,
                                                                     DurableTopology::Arguments::plain);
  HttpAnswer answer = saved(http::status::no_content);
  if (answer.status != http::status::no_content || problems.empty()) return answer;
  std::string reason = "imported, except:";
  for (const std::string& p : problems) reason += " " + p + ";";
  return bad_request(reason);
}

// RabbitMQ's POST /api/definitions/V: the per-vhost kinds of an export (its entries without a "vhost"), all into V.
HttpAnswer ManagementApi::import_vhost_definitions(const std::string& vhost, const Json& body) {
  if (!env_.definitions.has_vhost(vhost)) return not_found();
  Json scoped = Json::object();
  for (const char* kind : kVhostDefinitionKinds) {
    const auto entries = body.find(kind);
    if (entries == body.end()) continue;
    if (!entries->is_array()) return bad_request("'" + std::string(kind) + "' must be a list");
    for (Json entry : *entries) {
      if (!entry.is_object()) return bad_request("a '" + std::string(kind) + "' entry is not an object");
      entry["vhost"] = vhost;
      scoped[kind].push_back(std::move(entry));
    }
  }
  return import_definitions(scoped);
}

HttpAnswer ManagementApi::saved(http::status done) {
  if (Status unsaved = env_.core.save_definitions()) {
    return api_error(http::status::internal_server_error, "internal_error", unsaved->msg);
  }
  HttpAnswer answer;
  answer.status = done;
  return answer;
}

void ManagementApi::close_connections(const std::function<bool(const std::string&, const std::string&)>& matches,
                                      const std::string& reason) {
  // Copied first: a connection may leave its registry while it closes.
  const std::vector<Connection*> all(env_.connections.all().begin(), env_.connections.all().end());
  for (Connection* c : all) {
    if (auto owner = connection_owner(*c); owner && matches(owner->user, owner->vhost)) c->close_by_operator(reason);
  }
}

}  // namespace firemq
