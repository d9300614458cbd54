// The example driver for client certification (docs/client-certification.md): it reads the harness's commands
// as JSON lines on stdin, performs each through a client library (here the small FireClient of fire_client.h;
// in your SDK, your public API), and writes replies and events as JSON lines on stdout. Copy it, replace
// FireClient with your SDK, keep the JSON.
//
//   firemq-example-driver [--break NAME]...
//
// --break makes the client break one rule on purpose, to show that the client cases catch it (breaks.h lists
// the names and what each breaks; conformance/client-breaks.json the cases each must fail). Without one,
// nothing of breaks.h changes anything.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <string>

#include "fire_client.h"
#include "protocol/msgpack_codec.h"
#include "protocol/typed_json.h"

namespace {

using Json = nlohmann::json;
using firemq::example::FireClient;
namespace op = firemq::op;

constexpr int kProtocolVersion = 2;  // the driver protocol this driver speaks (2: publish_batch)
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
  return {{"scheme", u.scheme},     {"tls", u.tls},     {"websocket", u.websocket},
          {"host", u.host},         {"port", u.port},   {"user", u.user},
          {"password", u.password}, {"vhost", u.vhost}, {"path", u.path}};
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
    return {{"ok", true},
            {"name", ok->name},
            {"messages", ok->messages},
            {"consumers", ok->consumers},
            {"empty", ok->empty}};
  }
  return {{"ok", true}};
}

// decode_frame and encode_frame: the codec on its own (docs/client-certification.md, "Codec commands"). With a
// codec break (breaks.h), CodecBreaks rewrites what the real codec reads and writes.
class CodecCommands {
 public:
  explicit CodecCommands(const firemq::example::Breaks& breaks) : broken_(breaks) {}

  // The bytes cut into frames as the client reads a server's (stream: no preamble; message: one WebSocket
  // message), each header decoded for its op. The first refusal is the reply, with the codec's code.
  Json decode(const Json& c) const {
    auto hex = firemq::from_hex(c.value("bytes", ""));
    if (!hex) return error_json("bytes must be hex");
    const bool message_framing = c.value("framing", "stream") == "message";
    const firemq::Bytes bytes = broken_.as_read(std::move(*hex), message_framing);
    const std::size_t max_frame = broken_.max_frame(c.value("max_frame", std::uint64_t{firemq::kDefaultMaxFrame}));
    std::vector<firemq::RawFrame> raws;
    const firemq::Status refused = message_framing
                                       ? cut_message(bytes, max_frame, raws)
                                       : cut_stream(bytes, max_frame, c.value("end_of_stream", false), raws);
    if (refused) return refusal(*refused);
    Json frames = Json::array();
    for (firemq::RawFrame& raw : raws) {
      if (auto kept = broken_.accepts_anyway(raw)) raw = std::move(*kept);
      auto message = firemq::decode_frame(raw);
      if (!message) return refusal(message.error());
      if (auto broken = broken_.refuses(raw, *message)) return refusal(*broken);
      // A typed decoder's view: the op's fields, zero ones left out, unknown keys ignored (vectors/README.md)
      const firemq::Value header = broken_.keeps(firemq::header_to_map(*message));
      frames.push_back({{"op", raw.op()},
                        {"header", firemq::typed_json_from_value(header)},
                        {"payload", firemq::to_hex(broken_.payload(raw.payload()))}});
    }
    return {{"ok", true}, {"frames", frames}};
  }

  // A header in typed JSON, read as the op's message (so held to its field types), then written as a frame.
  Json encode(const Json& c) const {
    auto header = firemq::value_from_typed_json(c.value("header", Json::object()));
    if (!header || !header->is<firemq::Map>()) return error_json("header must be a typed-JSON map");
    auto payload = firemq::from_hex(c.value("payload", ""));
    if (!payload) return error_json("payload must be hex");
    firemq::Bytes header_bytes;
    firemq::encode_value(broken_.keeps(*header), header_bytes);
    auto message = firemq::decode_header(c.at("op").get<std::uint8_t>(), header_bytes);
    if (!message) return refusal(message.error());
    const bool message_framing = c.value("framing", "stream") == "message";
    const firemq::Bytes body = broken_.payload(*payload);
    const firemq::Bytes frame = message_framing ? firemq::encode_message_frame(*message, body)
                                                : firemq::encode_frame(*message, body);
    return {{"ok", true}, {"bytes", firemq::to_hex(broken_.as_written(frame, message_framing))}};
  }

 private:
  static firemq::Status cut_stream(const firemq::Bytes& bytes, std::size_t max_frame, bool end_of_stream,
                                   std::vector<firemq::RawFrame>& out) {
    firemq::FrameDecoder decoder(firemq::StreamSide::client, max_frame);
    for (firemq::ByteView rest(bytes); !rest.empty();) {
      const auto step = decoder.feed(rest);
      rest = rest.subspan(step.consumed);
      if (step.state == firemq::FrameDecoder::State::error) return decoder.error();
      if (step.state == firemq::FrameDecoder::State::frame) out.push_back(decoder.take_frame());
    }
    return end_of_stream ? decoder.finish() : std::nullopt;  // "then the peer closes": inside a frame, a 501
  }

  static firemq::Status cut_message(const firemq::Bytes& bytes, std::size_t max_frame,
                                    std::vector<firemq::RawFrame>& out) {
    auto raw = firemq::decode_message_frame(bytes, max_frame);
    if (!raw) return raw.error();
    out.push_back(std::move(*raw));
    return std::nullopt;
  }

  static Json refusal(const firemq::Error& e) {
    return {{"ok", false}, {"error", {{"code", e.code}, {"msg", e.msg}, {"fatal", e.fatal}}}};
  }

  firemq::example::CodecBreaks broken_;
};

class Driver {
 public:
  explicit Driver(firemq::example::Breaks breaks) : breaks_(breaks), client_(breaks, write_line), codec_(breaks_) {}

  // Runs until stdin ends: one command at a time; between commands, what the server sends is handled (pings
  // answered, deliveries reported) and the heartbeat kept (pings sent, a silent server declared dead).
  void run() {
    // "transports": what the harness runs the client cases over (fire alone when a driver names none).
    write_line({{"event", "ready"},
                {"protocol", kProtocolVersion},
                {"client", {{"name", "firemq-example-cpp"}, {"version", "0.1.0"}}},
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

  // True when stdin has a line; meanwhile the connection is served. The wait ends when stdin or the socket has
  // something, or when a heartbeat falls due: an idle application's client still pings, and still notices a
  // dead server.
  bool wait_for_stdin() {
    if (std::cin.rdbuf()->in_avail() > 0) return true;
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {client_.fd(), POLLIN, 0}};
    ::poll(fds, client_.connected() ? 2 : 1, client_.connected() ? client_.heartbeat_wait_ms() : -1);
    if (client_.connected()) {
      // A connection the server broke, or a server gone silent, is reported as a closed event; anything else
      // goes to stderr.
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
      auto url = firemq::example::parse_url_with(breaks_, c.at("url").get<std::string>());
      return url ? Json{{"ok", true}, {"url", url_json(*url)}} : error_json(url.error());
    }
    if (cmd == "decode_frame") return codec_.decode(c);
    if (cmd == "encode_frame") return codec_.encode(c);
    if (cmd == "connect") return connect(c);
    if (!client_.connected()) return error_json("not connected");
    if (cmd == "declare_queue") return request(declare_queue(c));
    if (cmd == "bind") return request(bind(c));
    if (cmd == "publish") return publish(c);
    if (cmd == "publish_batch") return publish_batch(c);
    if (cmd == "subscribe") return subscribe(c);
    const auto tag = [&c] { return c.at("delivery_tag").get<std::uint64_t>(); };
    const bool multiple = c.value("multiple", false) && !breaks_.ack_ignores_multiple;
    if (cmd == "ack" && breaks_.ack_not_sent) return Json{{"ok", true}};
    if (cmd == "ack") return ok_or_error(client_.send(op::Ack{tag(), multiple}));
    if (cmd == "nack")
      return ok_or_error(
          client_.send(op::Nack{tag(), multiple, c.value("requeue", true) && !breaks_.nack_without_requeue}));
    if (cmd == "get") return get(c);
    if (cmd == "close") return ok_or_error(client_.close(deadline()));
    return error_json("unknown command " + cmd);
  }

  Json connect(const Json& c) {
    auto url = firemq::parse_url(c.at("url").get<std::string>());
    if (!url) return error_json(url.error());
    auto welcome = client_.connect(*url, c.value("heartbeat", std::uint64_t{0}), c.value("ca_file", ""), deadline());
    if (!welcome) return error_json(welcome.error());
    return {{"ok", true},
            {"server", {{"name", welcome->server.name}, {"version", welcome->server.version}}},
            {"heartbeat", welcome->heartbeat},
            {"max_frame", welcome->max_frame},
            {"caps", welcome->caps}};
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

  op::Publish publish_of(const Json& c) const {
    op::Publish p;
    p.exchange = c.value("exchange", "");
    p.key = c.value("key", "");
    p.mandatory = c.value("mandatory", false);
    p.persistent = c.value("persistent", false);
    if (!breaks_.props_dropped) p.props.entries = map_from(c, "props");
    p.headers = map_from(c, "headers");
    if (breaks_.headers_as_strings) {
      for (firemq::MapEntry& e : p.headers) e.value = firemq::Value(firemq::typed_json_from_value(e.value).dump());
    }
    return p;
  }

  Json publish(const Json& c) {
    const bool confirm = c.value("confirm", false);
    auto outcome = client_.publish(publish_of(c), c.value("body", ""), confirm, deadline());
    if (!outcome) return error_json(outcome.error());
    return confirm ? Json{{"ok", true}, {"confirmed", *outcome}} : Json{{"ok", true}};
  }

  // Driver protocol 2: every message goes out with a confirm before any outcome is awaited, so that several
  // are in flight and one upto, or a nack among them, settles them. The outcomes in order.
  Json publish_batch(const Json& c) {
    std::vector<std::uint64_t> seqs;
    for (const Json& m : c.value("messages", Json::array())) {
      auto seq = client_.send_publish(publish_of(m), m.value("body", ""), true, deadline());
      if (!seq) return error_json(seq.error());
      seqs.push_back(*seq);
    }
    Json confirmed = Json::array();
    for (const std::uint64_t seq : seqs) {
      auto outcome = client_.await_confirm(seq, deadline());
      if (!outcome) return error_json(outcome.error());
      confirmed.push_back(*outcome);
    }
    return {{"ok", true}, {"confirmed", confirmed}};
  }

  Json subscribe(const Json& c) {
    op::Subscribe s;
    s.sub = breaks_.same_sub ? 1 : next_sub_++;  // "Client-chosen subscription id, unique on the connection."
    s.queue = c.at("queue").get<std::string>();
    s.credit = c.value("credit", std::uint64_t{100});
    s.no_ack = c.value("no_ack", false);
    Json reply = request(s);
    if (reply.value("ok", false)) reply["subscription"] = s.sub;
    return reply;
  }

  Json get(const Json& c) {
    const bool no_ack = c.value("no_ack", false) != breaks_.get_no_ack_inverted;
    auto reply = client_.request(op::Get{0, c.at("queue").get<std::string>(), no_ack}, deadline());
    if (!reply) return error_json(reply.error());
    if (breaks_.get_empty_as_error && std::holds_alternative<op::Ok>(*reply)) return error_json("the queue is empty");
    const auto* got = std::get_if<op::GetOk>(&*reply);
    if (got == nullptr) return reply_json(*reply);  // ok with empty: true, or an error
    return {{"ok", true},
            {"empty", false},
            {"delivery_tag", got->tag},
            {"redelivered", got->redelivered},
            {"exchange", got->exchange},
            {"key", got->key},
            {"remaining", got->remaining},
            {"props", firemq::typed_json_from_value(firemq::Value(got->props.entries))},
            {"headers", firemq::typed_json_from_value(firemq::Value(got->headers))},
            {"body", client_.last_get_body()}};
  }

  firemq::example::Breaks breaks_;
  FireClient client_;
  CodecCommands codec_;
  std::uint64_t next_sub_ = 1;  // "Client-chosen subscription id, unique on the connection."
};

}  // namespace

int main(int argc, char** argv) {
  // A write to a connection the server has reset must be an error to handle, not the end of the driver: TCP
  // sends pass MSG_NOSIGNAL, but OpenSSL's writes (SSL_write, SSL_shutdown's close_notify) cannot.
  ::signal(SIGPIPE, SIG_IGN);
  firemq::example::Breaks breaks;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg == "--break" && i + 1 < argc ? argv[++i] : "";
    if (!firemq::example::set_break(breaks, name)) {
      std::cerr << "usage: " << argv[0] << " [--break NAME]..., NAME one of:";
      for (const std::string& n : firemq::example::break_names()) std::cerr << " " << n;
      std::cerr << "\n";
      return 2;
    }
  }
  std::ios::sync_with_stdio(false);
  Driver(breaks).run();
  return 0;
}
