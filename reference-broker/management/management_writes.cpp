// The management API's writes (management_api.h). What a client could also do (declare, delete, purge, bind,
// unbind, publish, get) is done through a Session of the API's own, logged in as the HTTP user from the HTTP
// client's address, so that permissions, loopback users, the topology rules and the bounds are the same ones as on
// the wire, and durable changes are saved as a client's are.
#include <charconv>

#include "protocol/bounded_json.h"
#include "protocol/msgpack_codec.h"
#include "protocol/plain_json.h"
#include "protocol/reply_codes.h"
#include "reference-broker/management/management_api.h"

namespace firemq {
namespace {

using Json = nlohmann::json;
namespace http = boost::beast::http;

// One request's session: hello, then each op and the frames it brought back.
class ApiSession : private Outbox {
 public:
  struct Reply {
    Message message;
    Bytes payload;
    bool persistent = false;  // a delivery's: the API shows it as RabbitMQ's delivery_mode
  };

  ApiSession(const ManagementEnv& env, const ApiUser& who, const std::string& vhost,
             const std::optional<std::string>& peer_address)
      : session_(SessionEnv{env.config, env.definitions, env.core}, *this,
                 "management API " + peer_address.value_or("(no peer)"),
                 TransportHints{std::nullopt, peer_address, std::nullopt}) {
    op::Hello hello;
    hello.ver = 1;
    hello.vhost = vhost;
    hello.auth = {"plain", who.user->name, who.password};
    hello.client = Map{{Value("product"), Value("FireMQ management API")}};
    session_.on_message(hello, {});
  }

  // The session's answer to hello: nothing (welcome) or the error.
  std::optional<op::Error> refusal() const {
    if (const auto* e = std::get_if<op::Error>(&replies_.front().message)) return *e;
    return std::nullopt;
  }

  // Sends one op; the frames it caused (the reply, and for a publish a return).
  std::vector<Reply> request(Message message, ByteView payload = {}) {
    replies_.clear();
    session_.on_message(std::move(message), payload);
    session_.flush();
    return std::move(replies_);
  }

 private:
  void send(const Message& message, ByteView payload) override {
    replies_.push_back({message, Bytes(payload.begin(), payload.end())});
  }
  void send_message(const Message& message, ByteView body, const MessageExtras& extras) override {
    replies_.push_back({message, Bytes(body.begin(), body.end()), extras.persistent});
  }
  void close_after_flush() override {}

  std::vector<Reply> replies_;
  Session session_;
};

// An error frame as RabbitMQ's API answers the same refusal: 401 for access, 404 for what is missing, 400 else.
HttpAnswer refused(const op::Error& e) {
  if (e.code == static_cast<std::uint64_t>(ReplyCode::access_refused)) {
    return api_error(http::status::unauthorized, "not_authorized", e.msg);
  }
  if (e.code == static_cast<std::uint64_t>(ReplyCode::not_found))
    return api_error(http::status::not_found, "not_found", e.msg);
  return api_error(http::status::bad_request, "bad_request", e.msg);
}

// The outcome of a request that answers ok or error: `done` for ok (201 or 204), the refusal else.
HttpAnswer answer_of(const std::vector<ApiSession::Reply>& replies, http::status done) {
  for (const auto& r : replies) {
    if (const auto* e = std::get_if<op::Error>(&r.message)) return refused(*e);
  }
  HttpAnswer answer;
  answer.status = done;
  return answer;
}

}  // namespace

Result<Json, HttpAnswer> api_body(const HttpRequest& request) {
  // A web page elsewhere can make a browser that holds basic-auth credentials for this API POST a form (a "simple"
  // request, with no preflight; PUT and DELETE always ask CORS first, which this API never allows). It cannot send
  // application/json without that preflight, so a POST must say application/json.
  const auto type = request.find(http::field::content_type);
  const bool json = type != request.end() &&
                    std::string_view(type->value().data(), type->value().size()).starts_with("application/json");
  if (request.method() == http::verb::post && !json) {
    return api_error(http::status::unsupported_media_type, "bad_request",
                     "writes must send Content-Type: application/json");
  }
  if (request.body().empty()) return Json::object();
  // The wire's nesting bound (msgpack_codec.h) holds for HTTP JSON too, checked while parsing (bounded_json.h):
  // a body nested 50,000 deep would overflow the stack in anything that walks it afterwards.
  Result<Json, std::string> body = parse_bounded_json(request.body(), kMaxNesting);
  if (!body) return api_error(http::status::bad_request, "bad_request", "the body is " + body.error());
  if (!body->is_object()) return api_error(http::status::bad_request, "bad_request", "the body is not a JSON object");
  return std::move(*body);
}

namespace {

// A boolean or a count may come as text ("false", "5"), as rabbitmqadmin sends them and RabbitMQ's API takes them.
std::optional<bool> as_bool(const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v == "true") return true;
  if (v == "false") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> as_count(const Json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (!v.is_string() || v.get<std::string>().empty()) return std::nullopt;
  const std::string text = v.get<std::string>();
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

// A field of the body with its JSON type checked: the error names the field and the type it must have.
template <class T>
Result<T, HttpAnswer> field(const Json& body, const char* name, T fallback) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const Json& v = body[name];
  if constexpr (std::is_same_v<T, bool>) {
    if (auto b = as_bool(v)) return *b;
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (auto n = as_count(v)) return *n;
  } else {
    if (v.is_string()) return v.get<std::string>();
  }
  {
    return api_error(http::status::bad_request, "bad_request",
                     std::string("'") + name + "' must be " +
                         (std::is_same_v<T, bool>          ? "a boolean"
                          : std::is_same_v<T, std::string> ? "a string"
                                                           : "a non-negative integer"));
  }
  return v.get<T>();
}

Result<Map, HttpAnswer> arguments_of(const Json& body) {
  auto args = map_from_plain_json(body.value("arguments", Json()));
  if (!args) return api_error(http::status::bad_request, "bad_request", "'arguments': " + args.error());
  return *args;
}

bool exists(const Core& core, const std::string& vhost, const std::string& kind, const std::string& name) {
  const Vhost* v = const_cast<Core&>(core).vhost(vhost);
  return kind == "queues" ? v->queues().count(name) > 0 : v->exchanges().count(name) > 0;
}

// RabbitMQ's message properties in the API's JSON, as FireMQ props and headers: delivery_mode 2 is persistent and
// expiration a decimal string of milliseconds ("props.expiration (uint ms) <-> expiration (decimal string)").
struct ApiMessage {
  Props props;
  Map headers;
  bool persistent = false;
};

Result<ApiMessage, HttpAnswer> message_of(const Json& properties) {
  ApiMessage m;
  if (properties.is_null()) return m;
  if (!properties.is_object())
    return api_error(http::status::bad_request, "bad_request", "'properties' must be an object");
  for (const auto& [key, value] : properties.items()) {
    if (key == "delivery_mode") {
      m.persistent = value == 2;
    } else if (key == "headers") {
      auto headers = map_from_plain_json(value);
      if (!headers) return api_error(http::status::bad_request, "bad_request", "'headers': " + headers.error());
      m.headers = std::move(*headers);
    } else if (key == "expiration" && value.is_string()) {
      try {
        m.props.entries.push_back(
            {Value("expiration"), Value(static_cast<std::uint64_t>(std::stoull(value.get<std::string>())))});
      } catch (const std::exception&) {
        return api_error(http::status::bad_request, "bad_request",
                         "'expiration' must be a decimal number of milliseconds");
      }
    } else {
      auto v = value_from_plain_json(value);
      if (!v) return api_error(http::status::bad_request, "bad_request", "'" + key + "': " + v.error());
      m.props.entries.push_back({Value(key), std::move(*v)});
    }
  }
  return m;
}

Result<Bytes, HttpAnswer> payload_of(const Json& body) {
  auto payload = field<std::string>(body, "payload", "");
  auto encoding = field<std::string>(body, "payload_encoding", "string");
  if (!payload) return payload.error();
  if (!encoding) return encoding.error();
  if (*encoding == "string") return Bytes(payload->begin(), payload->end());
  if (*encoding != "base64") {
    return api_error(http::status::bad_request, "bad_request", "'payload_encoding' must be string or base64");
  }
  std::optional<Bytes> decoded = from_base64(*payload);
  if (!decoded) return api_error(http::status::bad_request, "bad_request", "'payload' is not base64");
  return *decoded;
}

// A message taken by POST .../get, as RabbitMQ shows it: its properties with delivery_mode (2 persistent, 1 not)
// and expiration as the decimal string AMQP carries, whatever FireMQ's props hold as a number.
Json got_message_json(const op::GetOk& g, const Bytes& payload, bool persistent) {
  Json properties = plain_json(g.props.entries);
  if (!properties.is_object()) properties = Json::object();
  if (!g.headers.empty()) properties["headers"] = plain_json(g.headers);
  properties["delivery_mode"] = persistent ? 2 : 1;
  if (properties.contains("expiration") && properties["expiration"].is_number()) {
    properties["expiration"] = properties["expiration"].dump();
  }
  const bool text = std::all_of(payload.begin(), payload.end(), [](std::uint8_t c) { return c >= 0x20 && c < 0x7f; });
  const std::string encoded = text ? std::string() : to_base64(payload);
  return {{"payload_bytes", payload.size()},
          {"redelivered", g.redelivered},
          {"exchange", g.exchange},
          {"routing_key", g.key},
          {"message_count", g.remaining},
          {"properties", properties},
          {"payload", text ? std::string(payload.begin(), payload.end()) : encoded},
          {"payload_encoding", text ? "string" : "base64"}};
}

HttpAnswer publish(ApiSession& session, const std::string& exchange, const Json& body) {
  auto message = message_of(body.value("properties", Json()));
  if (!message) return message.error();
  auto payload = payload_of(body);
  if (!payload) return payload.error();
  auto key = field<std::string>(body, "routing_key", "");
  if (!key) return key.error();
  op::Publish p;
  p.seq = 1;  // confirmed, so that a refusal comes back as a nack with its reason
  p.exchange = exchange;
  p.key = *key;
  p.mandatory = true;  // RabbitMQ's answer says whether it was routed: a return says it was not
  p.persistent = message->persistent;
  p.props = std::move(message->props);
  p.headers = std::move(message->headers);
  bool routed = true;
  for (const auto& r : session.request(std::move(p), *payload)) {
    if (std::holds_alternative<op::Return>(r.message)) routed = false;
    if (const auto* c = std::get_if<op::Confirm>(&r.message); c != nullptr && c->nack) {
      return api_error(http::status::bad_request, "bad_request", c->msg);
    }
    if (const auto* e = std::get_if<op::Error>(&r.message)) return refused(*e);
  }
  return api_json(http::status::ok, Json{{"routed", routed}});
}

HttpAnswer get_messages(ApiSession& session, const std::string& queue, const Json& body) {
  auto count = field<std::uint64_t>(body, "count", 1);
  auto ackmode = field<std::string>(body, "ackmode", "ack_requeue_true");
  if (!count) return count.error();
  if (!ackmode) return ackmode.error();
  const std::string& mode = *ackmode;
  if (mode != "ack_requeue_true" && mode != "ack_requeue_false" && mode != "reject_requeue_true" &&
      mode != "reject_requeue_false") {
    return api_error(
        http::status::bad_request, "bad_request",
        "'ackmode' must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false");
  }
  Json out = Json::array();
  std::uint64_t last_tag = 0;
  for (std::uint64_t i = 0; i < *count; ++i) {
    auto replies = session.request(op::Get{i + 1, queue, false});
    if (replies.empty()) break;
    if (const auto* e = std::get_if<op::Error>(&replies.front().message)) return refused(*e);
    const auto* got = std::get_if<op::GetOk>(&replies.front().message);
    if (got == nullptr) break;  // ok with empty: true
    out.push_back(got_message_json(*got, replies.front().payload, replies.front().persistent));
    last_tag = got->tag;
  }
  // As RabbitMQ: the messages taken go back to the queue (requeue), or are acknowledged or rejected for good.
  if (last_tag != 0) {
    if (mode == "ack_requeue_false") {
      session.request(op::Ack{last_tag, true});
    } else {
      session.request(op::Nack{last_tag, true, mode.ends_with("requeue_true")});
    }
  }
  return api_json(http::status::ok, out);
}

}  // namespace

// As RabbitMQ's aliveness test, what Kubernetes probes and monitoring call: in the vhost, as the API's user,
// declare the queue aliveness-test (transient, kept for the next test), publish a message to it through the
// default exchange and get it back. 200 {"status": "ok"}, or 503 {"status": "failed", "reason"} naming the step
// that failed; a user who may not use the vhost gets the refusal (401), a vhost that does not exist 404.
HttpAnswer ManagementApi::aliveness_test(const Route& route, const ApiUser& who,
                                         const std::optional<std::string>& peer_address) {
  if (route.size() != 2 || env_.core.vhost(route[1]) == nullptr) return not_found();
  const auto failed = [](const std::string& reason) {
    return api_json(http::status::service_unavailable, Json{{"status", "failed"}, {"reason", reason}});
  };
  if (env_.alarms.active()) return failed("a memory or disk alarm is in effect: publishing is paused");
  ApiSession session(env_, who, route[1], peer_address);
  if (auto refusal = session.refusal()) return refused(*refusal);
  constexpr const char* kQueue = "aliveness-test";
  constexpr std::string_view kBody = "test_message";  // RabbitMQ's
  for (const auto& r : session.request(op::DeclareQueue{1, kQueue, false, false, false, false, {}})) {
    if (const auto* e = std::get_if<op::Error>(&r.message)) return failed("declaring the queue: " + e->msg);
  }
  op::Publish p;
  p.seq = 1;
  p.key = kQueue;
  for (const auto& r : session.request(std::move(p), as_bytes(kBody))) {
    if (const auto* c = std::get_if<op::Confirm>(&r.message); c != nullptr && c->nack)
      return failed("publishing: " + c->msg);
    if (const auto* e = std::get_if<op::Error>(&r.message)) return failed("publishing: " + e->msg);
  }
  // Anything left from an earlier test that failed halfway comes first: taken until the message just sent.
  for (std::uint64_t rid = 2; rid < 1000; ++rid) {
    const auto replies = session.request(op::Get{rid, kQueue, true});
    const auto* got = replies.empty() ? nullptr : std::get_if<op::GetOk>(&replies.front().message);
    if (got == nullptr) return failed("the message published to queue 'aliveness-test' did not come back");
    if (replies.front().payload == Bytes(kBody.begin(), kBody.end()))
      return api_json(http::status::ok, Json{{"status", "ok"}});
  }
  return failed("queue 'aliveness-test' holds more than 1000 messages");
}

namespace {

// /api/bindings/VHOST/e/SOURCE/q/QUEUE (or /e/EXCHANGE), and for DELETE a last part: the properties_key, looked up
// in `listed`, the vhost's bindings as GET lists them.
HttpAnswer bind_or_unbind(ApiSession& session, const std::vector<std::string>& route, http::verb method,
                          const Json& body, const Json& listed) {
  if (route.size() < 6 || route[2] != "e" || (route[4] != "q" && route[4] != "e")) return not_found();
  op::BindFields r;
  r.rid = 1;
  r.exchange = exchange_name(route[3]);
  (route[4] == "q" ? r.queue : r.to_exchange) = route[5];
  if (method == http::verb::post && route.size() == 6) {
    auto key = field<std::string>(body, "routing_key", "");
    auto args = arguments_of(body);
    if (!key) return key.error();
    if (!args) return args.error();
    r.key = *key;
    r.args = std::move(*args);
    return answer_of(session.request(op::Bind{r}), http::status::created);
  }
  if (method == http::verb::delete_ && route.size() == 7) {
    for (const Json& b : listed) {
      if (b["source"] == r.exchange && b["destination"] == route[5] && b["properties_key"] == route[6] &&
          (b["destination_type"] == "queue") == (route[4] == "q")) {
        r.key = b["routing_key"];
        r.args = *map_from_plain_json(b["arguments"]);
        return answer_of(session.request(op::Unbind{r}), http::status::no_content);
      }
    }
    return not_found();
  }
  return api_error(http::status::method_not_allowed, "bad_request", "no such route for this method");
}

}  // namespace

namespace {

// A write to a queue or an exchange (/api/queues/V/NAME[/ACTION], /api/exchanges/V/NAME[/ACTION]), as the
// route table below hands it to its handler: through a session of the API user's, as a client's would go.
struct ObjectWrite {
  ApiSession& session;
  const std::string& name;  // as the route gives it (exchange_name() turns "amq.default" into "")
  const Json& body;
  http::status created;  // for a declare: 201, or 204 when it already existed (RabbitMQ's answers)
  bool alarm_in_effect;  // a memory or disk alarm: publishing is paused
};

HttpAnswer declare_queue(ObjectWrite& w) {
  op::DeclareQueue r{1, w.name, false, false, false, false, {}};
  auto durable = field<bool>(w.body, "durable", false);
  auto auto_delete = field<bool>(w.body, "auto_delete", false);
  auto args = arguments_of(w.body);
  if (!durable) return durable.error();
  if (!auto_delete) return auto_delete.error();
  if (!args) return args.error();
  r.durable = *durable;
  r.auto_delete = *auto_delete;
  r.args = std::move(*args);
  return answer_of(w.session.request(r), w.created);
}

HttpAnswer delete_queue(ObjectWrite& w) {
  return answer_of(w.session.request(op::DeleteQueue{1, w.name, false, false}), http::status::no_content);
}

HttpAnswer purge_queue(ObjectWrite& w) {
  return answer_of(w.session.request(op::PurgeQueue{1, w.name}), http::status::no_content);
}

HttpAnswer get_from_queue(ObjectWrite& w) { return get_messages(w.session, w.name, w.body); }

HttpAnswer declare_exchange(ObjectWrite& w) {
  op::DeclareExchange r;
  r.rid = 1;
  r.name = w.name;
  auto type = field<std::string>(w.body, "type", "direct");
  auto durable = field<bool>(w.body, "durable", false);
  auto auto_delete = field<bool>(w.body, "auto_delete", false);
  auto internal = field<bool>(w.body, "internal", false);
  auto args = arguments_of(w.body);
  if (!type) return type.error();
  if (!durable) return durable.error();
  if (!auto_delete) return auto_delete.error();
  if (!internal) return internal.error();
  if (!args) return args.error();
  r.type = *type;
  r.durable = *durable;
  r.auto_delete = *auto_delete;
  r.internal = *internal;
  r.args = std::move(*args);
  return answer_of(w.session.request(r), w.created);
}

HttpAnswer delete_exchange(ObjectWrite& w) {
  return answer_of(w.session.request(op::DeleteExchange{1, exchange_name(w.name), false}), http::status::no_content);
}

HttpAnswer publish_to_exchange(ObjectWrite& w) {
  // Flow control holds for the API as for any publisher: while an alarm is in effect, nothing is taken in.
  if (w.alarm_in_effect) {
    return api_error(http::status::service_unavailable, "service_unavailable",
                     "a memory or disk alarm is in effect: publishing is paused");
  }
  return publish(w.session, exchange_name(w.name), w.body);
}

// RabbitMQ's write routes on queues and exchanges: the kind, what follows the name ("" for the object itself),
// the method, and the handler.
struct ObjectWriteRoute {
  std::string_view kind;
  std::string_view action;
  http::verb method;
  HttpAnswer (*handle)(ObjectWrite&);
};
const ObjectWriteRoute kObjectWrites[] = {
    {"queues", "", http::verb::put, declare_queue},
    {"queues", "", http::verb::delete_, delete_queue},
    {"queues", "contents", http::verb::delete_, purge_queue},
    {"queues", "get", http::verb::post, get_from_queue},
    {"exchanges", "", http::verb::put, declare_exchange},
    {"exchanges", "", http::verb::delete_, delete_exchange},
    {"exchanges", "publish", http::verb::post, publish_to_exchange},
};

const ObjectWriteRoute* object_write_route(const std::vector<std::string>& route, http::verb method) {
  if (route.size() != 3 && route.size() != 4) return nullptr;
  const std::string_view action = route.size() == 4 ? std::string_view(route[3]) : std::string_view();
  for (const ObjectWriteRoute& r : kObjectWrites) {
    if (r.kind == route[0] && r.action == action && r.method == method) return &r;
  }
  return nullptr;
}

HttpAnswer no_such_route() {
  return api_error(http::status::method_not_allowed, "bad_request", "no such route for this method");
}

}  // namespace

// The writes, by the route's first part: closing a connection, the administrator's objects, policies, then
// queues, exchanges and bindings in a vhost (kObjectWrites, bind_or_unbind).
HttpAnswer ManagementApi::write(const HttpRequest& request, const Route& route, const ApiUser& who,
                                const std::optional<std::string>& peer_address) {
  const std::string& what = route[0];
  if (what == "connections") return close_connection(request, route, who);
  if (what == "vhosts" || what == "users" || what == "permissions" || what == "definitions" || what == "vhost-limits" ||
      what == "user-limits") {
    return administer(request, route, who);
  }
  if (what == "policies") return write_policy(request, route, who, PolicyKind::user);
  if (what == "operator-policies") return write_policy(request, route, who, PolicyKind::operator_policy);
  if (route.size() < 3 || !env_.core.vhost(route[1])) return not_found();
  auto body = api_body(request);
  if (!body) return body.error();
  ApiSession session(env_, who, route[1], peer_address);
  if (auto refusal = session.refusal()) return refused(*refusal);
  if (what == "bindings") return bind_or_unbind(session, route.parts, request.method(), *body, bindings(who, route[1]));
  const ObjectWriteRoute* handler = object_write_route(route.parts, request.method());
  if (handler == nullptr) return no_such_route();
  const std::string& name = route[2];
  const bool existed = exists(env_.core, route[1], what, what == "exchanges" ? exchange_name(name) : name);
  // As RabbitMQ: deleting what is not there is 404 (a client's delete of a missing queue is fine on the wire).
  if (route.size() == 3 && request.method() == http::verb::delete_ && !existed) return not_found();
  ObjectWrite w{session, name, *body, existed ? http::status::no_content : http::status::created, env_.alarms.active()};
  return handler->handle(w);
}

HttpAnswer ManagementApi::close_connection(const HttpRequest& request, const Route& route, const ApiUser& who) {
  if (route.size() != 2 || request.method() != http::verb::delete_) return not_found();
  // RabbitMQ's words for the same close; an AMQP client gets connection.close 320 with them.
  const std::string reason = "Closed via management plugin";
  Connection* c = find_connection(route[1]);
  if (c == nullptr || (!who.administrator && connection_owner(*c)->user != who.user->name)) return not_found();
  c->close_by_operator(reason);
  HttpAnswer answer;
  answer.status = http::status::no_content;
  return answer;
}

HttpAnswer ManagementApi::write_policy(const HttpRequest& request, const Route& route, const ApiUser& who,
                                       PolicyKind kind) {
  if (std::optional<HttpAnswer> refused = policy_refusal(who, kind)) return *refused;
  Vhost* vhost = route.size() == 3 ? env_.core.vhost(route[1]) : nullptr;
  if (vhost == nullptr || !may_see(who, route[1])) return not_found();
  const http::verb method = request.method();
  if (method == http::verb::delete_) {
    if (!vhost->delete_policy(route[2], kind)) return not_found();
    return saved(http::status::no_content);
  }
  if (method != http::verb::put) return api_error(http::status::method_not_allowed, "bad_request", "PUT or DELETE");
  auto body = api_body(request);
  if (!body) return body.error();
  // rabbitmqadmin and forms may send the priority as text.
  if (auto p = body->find("priority"); p != body->end() && p->is_string()) {
    auto number = field<std::uint64_t>(*body, "priority", 0);
    if (!number) return number.error();
    *p = *number;
  }
  Result<Policy, std::string> policy = parse_policy(route[1], route[2], *body, kind);
  if (!policy) return api_error(http::status::bad_request, "bad_request", policy.error());
  const bool existed = vhost->policies(kind).count(route[2]) > 0;
  vhost->set_policy(std::move(*policy));
  return saved(existed ? http::status::no_content : http::status::created);
}

}  // namespace firemq
