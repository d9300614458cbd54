// The example driver for client certification (docs/client-certification.md): it reads the harness's commands
// as JSON lines on stdin, performs each through a client library (here the small FireClient of fire_client.h;
// in your SDK, your public API), and writes replies and events as JSON lines on stdout. Copy it, replace
// FireClient with your SDK, keep the JSON.
//
//   firemq-example-driver [--break seq-from-2|no-pong|no-close-reply|no-rid|publish-while-paused|fmq1-on-websocket]
//
// --break makes the client break one rule on purpose, to show that the client cases catch it
// (conformance/client-breaks.json lists the cases each must fail).
#include <poll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <string>

#include "fire_client.h"
#include "protocol/typed_json.h"

namespace {

using Json = nlohmann::json;
using firemq::example::FireClient;
namespace op = firemq::op;

constexpr int kProtocolVersion = 1;  // the driver protocol this driver speaks
// How long one command may take: the harness has its own deadline per case; this only stops a driver
// waiting forever.
constexpr std::chrono::seconds kCommandTime{20};

void write_line(const Json& j) {
  // Bodies are bytes; a byte that is not UTF-8 is replaced rather than lost in an exception.
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n" << std::flush;
}

firemq::Map map_from(const Json& command, const char* key) {
  if (!command.contains(key)) return {};
  auto value = firemq::value_from_typed_json(command.at(key));
  if (!value || !value->is<firemq::Map>()) throw std::invalid_argument(std::string(key) + " must be a typed-JSON map");
  return *value->get_if<firemq::Map>();
}

Json url_json(const firemq::Url& u) {
  return {{"scheme", u.scheme}, {"tls", u.tls}, {"websocket", u.websocket}, {"host", u.host}, {"port", u.port},
          {"user", u.user}, {"password", u.password}, {"vhost", u.vhost}, {"path", u.path}};
}

Json error_json(const std::string& msg, std::uint64_t code = 0) {
  Json e = {{"msg", msg}};
  if (code != 0) e["code"] = code;
  return {{"ok", false}, {"error", e}};
}

// A reply of the server as the command's result: ok's fields, or the error's code and text.
Json reply_json(const firemq::Message& reply) {
  if (const auto* error = std::get_if<op::Error>(&reply)) return error_json(error->msg, error->code);
  if (const auto* ok = std::get_if<op::Ok>(&reply)) {
    return {{"ok", true}, {"name", ok->name}, {"messages", ok->messages}, {"consumers", ok->consumers}, {"empty", ok->empty}};
  }
  return {{"ok", true}};
}

class Driver {
 public:
  explicit Driver(firemq::example::Breaks breaks) : client_(breaks, write_line) {}

  // Runs until stdin ends: one command at a time; between commands, what the server sends is handled (pings
  // answered, deliveries reported).
  void run() {
    // "transports": what the harness runs the client cases over (fire alone when a driver names none).
    write_line({{"event", "ready"}, {"protocol", kProtocolVersion}, {"client", {{"name", "firemq-example-cpp"}, {"version", "0.1.0"}}},
                {"transports", {"fire", "fires", "ws", "wss"}}});
    std::string line;
    while (true) {
      if (!wait_for_stdin()) continue;
      if (!std::getline(std::cin, line)) break;
      const Json command = Json::parse(line, nullptr, false);
      Json reply;
      try {
        reply = command.is_object() ? perform(command) : error_json("not a JSON object: " + line);
      } catch (const std::exception& e) {  // a field of the wrong type in the command: the harness's bug, said back
        reply = error_json(std::string("bad command: ") + e.what());
      }
      reply["id"] = command.is_object() ? command.value("id", 0) : 0;
      write_line(reply);
    }
    if (!client_.connected()) return;
    if (auto closed = client_.close(deadline()); !closed) std::cerr << "close at the end: " << closed.error() << "\n";
  }

 private:
  static FireClient::Clock::time_point deadline() { return FireClient::Clock::now() + kCommandTime; }

  // True when stdin has a line; meanwhile the connection is served.
  bool wait_for_stdin() {
    if (std::cin.rdbuf()->in_avail() > 0) return true;
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {client_.fd(), POLLIN, 0}};
    ::poll(fds, client_.connected() ? 2 : 1, -1);
    if (client_.connected() && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      // A connection the server broke is reported as a closed event; anything else goes to stderr.
      if (auto pumped = client_.pump(FireClient::Clock::now()); !pumped) std::cerr << pumped.error() << "\n";
    }
    return (fds[0].revents & (POLLIN | POLLHUP)) != 0;
  }

  template <class T>
  static Json ok_or_error(const firemq::Result<T, std::string>& r) {
    return r ? Json{{"ok", true}} : error_json(r.error());
  }

  Json perform(const Json& c) {
    const std::string cmd = c.at("cmd").get<std::string>();
    if (cmd == "parse_url") {
      auto url = firemq::parse_url(c.at("url").get<std::string>());
      return url ? Json{{"ok", true}, {"url", url_json(*url)}} : error_json(url.error());
    }
    if (cmd == "connect") return connect(c);
    if (!client_.connected()) return error_json("not connected");
    if (cmd == "declare_queue") return request(declare_queue(c));
    if (cmd == "bind") return request(bind(c));
    if (cmd == "publish") return publish(c);
    if (cmd == "subscribe") return subscribe(c);
    const auto tag = [&c] { return c.at("delivery_tag").get<std::uint64_t>(); };
    if (cmd == "ack") return ok_or_error(client_.send(op::Ack{tag(), c.value("multiple", false)}));
    if (cmd == "nack") return ok_or_error(client_.send(op::Nack{tag(), c.value("multiple", false), c.value("requeue", true)}));
    if (cmd == "get") return get(c);
    if (cmd == "close") return ok_or_error(client_.close(deadline()));
    return error_json("unknown command " + cmd);
  }

  Json connect(const Json& c) {
    auto url = firemq::parse_url(c.at("url").get<std::string>());
    if (!url) return error_json(url.error());
    auto welcome = client_.connect(*url, c.value("heartbeat", std::uint64_t{0}), c.value("ca_file", ""), deadline());
    if (!welcome) return error_json(welcome.error());
    return {{"ok", true}, {"server", {{"name", welcome->server.name}, {"version", welcome->server.version}}},
            {"heartbeat", welcome->heartbeat}, {"max_frame", welcome->max_frame}, {"caps", welcome->caps}};
  }

  static op::DeclareQueue declare_queue(const Json& c) {
    op::DeclareQueue d;
    d.name = c.value("name", "");
    d.durable = c.value("durable", false);
    d.exclusive = c.value("exclusive", false);
    d.auto_delete = c.value("auto_delete", false);
    d.args = map_from(c, "args");
    return d;
  }

  static op::Bind bind(const Json& c) {
    op::Bind b;
    b.exchange = c.value("exchange", "");
    b.queue = c.at("queue").get<std::string>();
    b.key = c.value("key", "");
    b.args = map_from(c, "args");
    return b;
  }

  Json request(firemq::Message m) {
    auto reply = client_.request(std::move(m), deadline());
    return reply ? reply_json(*reply) : error_json(reply.error());
  }

  Json publish(const Json& c) {
    op::Publish p;
    p.exchange = c.value("exchange", "");
    p.key = c.value("key", "");
    p.mandatory = c.value("mandatory", false);
    p.persistent = c.value("persistent", false);
    p.props.entries = map_from(c, "props");
    p.headers = map_from(c, "headers");
    const bool confirm = c.value("confirm", false);
    auto outcome = client_.publish(std::move(p), c.value("body", ""), confirm, deadline());
    if (!outcome) return error_json(outcome.error());
    return confirm ? Json{{"ok", true}, {"confirmed", *outcome}} : Json{{"ok", true}};
  }

  Json subscribe(const Json& c) {
    op::Subscribe s;
    s.sub = next_sub_++;
    s.queue = c.at("queue").get<std::string>();
    s.credit = c.value("credit", std::uint64_t{100});
    s.no_ack = c.value("no_ack", false);
    Json reply = request(s);
    if (reply.value("ok", false)) reply["subscription"] = s.sub;
    return reply;
  }

  Json get(const Json& c) {
    auto reply = client_.request(op::Get{0, c.at("queue").get<std::string>(), c.value("no_ack", false)}, deadline());
    if (!reply) return error_json(reply.error());
    const auto* got = std::get_if<op::GetOk>(&*reply);
    if (got == nullptr) return reply_json(*reply);  // ok with empty: true, or an error
    return {{"ok", true}, {"empty", false}, {"delivery_tag", got->tag}, {"redelivered", got->redelivered},
            {"exchange", got->exchange}, {"key", got->key}, {"remaining", got->remaining},
            {"props", firemq::typed_json_from_value(firemq::Value(got->props.entries))},
            {"headers", firemq::typed_json_from_value(firemq::Value(got->headers))}, {"body", client_.last_get_body()}};
  }

  FireClient client_;
  std::uint64_t next_sub_ = 1;  // "Client-chosen subscription id, unique on the connection."
};

}  // namespace

int main(int argc, char** argv) {
  firemq::example::Breaks breaks;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg == "--break" && i + 1 < argc ? argv[++i] : "";
    if (name == "seq-from-2") breaks.seq_from_2 = true;
    else if (name == "no-pong") breaks.no_pong = true;
    else if (name == "no-close-reply") breaks.no_close_reply = true;
    else if (name == "no-rid") breaks.no_rid = true;
    else if (name == "publish-while-paused") breaks.publish_while_paused = true;
    else if (name == "fmq1-on-websocket") breaks.fmq1_on_websocket = true;
    else {
      std::cerr << "usage: " << argv[0]
                << " [--break seq-from-2|no-pong|no-close-reply|no-rid|publish-while-paused|fmq1-on-websocket]\n";
      return 2;
    }
  }
  std::ios::sync_with_stdio(false);
  Driver(breaks).run();
  return 0;
}
