#include "harness/run/scenario.h"

#include <algorithm>
#include <thread>

#include "harness/rules/frame_text.h"
#include "harness/run/amqp_side.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/plain_json.h"
#include "protocol/typed_json.h"
#include "protocol/url.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;
constexpr int kDefaultWithinMs = 2000;
constexpr int kDefaultCloseWithinMs = 3000;

std::optional<std::uint8_t> op_code(const Json& op) {
  if (op.is_number_unsigned() && op.get<std::uint64_t>() <= 0xff) return static_cast<std::uint8_t>(op.get<int>());
  if (!op.is_string()) return std::nullopt;
  for (const OpInfo& info : kOps) {
    if (info.name == op.get<std::string>()) return static_cast<std::uint8_t>(info.code);
  }
  return std::nullopt;
}

std::string join_codes(const std::vector<std::uint64_t>& codes) {
  std::string out;
  for (auto c : codes) out += (out.empty() ? "" : " or ") + std::to_string(c);
  return out;
}

// expect_close's "ws_close_code" (a code or a list): on a WebSocket connection, the broker's close frame must
// carry one of them. The TCP and TLS framings have no such code: there the argument is not checked.
StepOutcome check_ws_close_code(Scenario::Conn& c, const Scenario::Received& r, const Json& args) {
  if (!args.contains("ws_close_code") || !is_websocket(c.wire.transport())) return StepOutcome::ok();
  const std::vector<std::uint64_t> codes = codes_of(args.at("ws_close_code"));
  if (!r.ws_close_code) {
    return StepOutcome::fail("expected a WebSocket close " + join_codes(codes) +
                             ", the connection closed without one (" + r.detail + ")");
  }
  if (std::find(codes.begin(), codes.end(), *r.ws_close_code) == codes.end()) {
    return StepOutcome::fail("expected a WebSocket close " + join_codes(codes) + ", got " + r.detail);
  }
  return StepOutcome::ok();
}

Bytes payload_of(const Json& args) {
  if (!args.contains("payload")) return {};
  const Json& p = args.at("payload");
  if (p.is_string()) {
    const std::string text = p.get<std::string>();  // one string: begin() and end() must be of the same one
    return Bytes(text.begin(), text.end());
  }
  if (p.is_object() && p.contains("hex")) return from_hex(p.at("hex").get<std::string>()).value_or(Bytes{});
  if (p.is_object() && p.contains("size")) return Bytes(p.at("size").get<std::size_t>(), 0x5a);
  return {};
}

const std::uint64_t* uint_field(const Value& header, const char* key) {
  const auto* map = header.get_if<Map>();
  const Value* v = map ? find(*map, key) : nullptr;
  return v ? v->get_if<std::uint64_t>() : nullptr;
}

bool bool_field(const Value& header, const char* key) {
  const auto* map = header.get_if<Map>();
  const Value* v = map ? find(*map, key) : nullptr;
  return v && v->is<bool>() && *v->get_if<bool>();
}

// ws_send's "frames": each {op, header, payload} framed for WebSocket (without len), all in one message, which
// is what the spec rules out ("one binary WebSocket message per frame"). `what` describes them.
Result<Bytes, std::string> frames_in_one_message(const Json& frames, std::string& what) {
  Bytes message;
  for (const Json& f : frames) {
    const auto op = op_code(f.at("op"));
    if (!op) return "unknown op " + f.at("op").dump();
    auto header = value_from_typed_json(f.value("header", Json::object()));
    if (!header || !header->is<Map>()) return std::string("a frame's header must be a typed-JSON object");
    Bytes encoded;
    encode_value(*header, encoded);
    const Bytes one = frame_message(*op, encoded, payload_of(f));
    message.insert(message.end(), one.begin(), one.end());
    what += (what.empty() ? "" : " + ") + op_label(*op) + " " + header_text(encoded);
  }
  what = "one binary message of " + std::to_string(frames.size()) + " frames: " + what;
  return message;
}

// Adds an unknown key ("x-pad", a str) to `header` so that the frame of `op` with it and `payload` is exactly
// `size` bytes (4 + len). Unknown keys are ignored by receivers, so the frame means the same.
Result<Bytes, std::string> padded_frame(std::uint8_t op, Map header, ByteView payload, std::size_t size) {
  header.push_back({Value("x-pad"), Value(std::string())});
  for (int attempt = 0; attempt < 4; ++attempt) {
    Bytes encoded;
    encode_map(header, encoded);
    const std::size_t frame = kMinFrameSize + encoded.size() + payload.size();
    if (frame == size) return frame_stream(op, encoded, payload);
    auto& pad = std::get<std::string>(header.back().value.v);
    if (frame > size && frame - size > pad.size()) break;
    pad.resize(pad.size() + size - frame);  // may change the str's length prefix: measured again
  }
  return "cannot pad a frame to exactly " + std::to_string(size) + " bytes";
}

}  // namespace

std::vector<std::uint64_t> codes_of(const Json& codes) {
  std::vector<std::uint64_t> out;
  if (codes.is_array()) {
    for (const Json& c : codes) out.push_back(c.get<std::uint64_t>());
  } else {
    out.push_back(codes.get<std::uint64_t>());
  }
  return out;
}

Scenario::Scenario(const CaseSpec& spec, const Target& target, std::string unique_prefix)
    : spec_(spec), target_(target), amqp_(std::make_unique<AmqpSide>(*this, target.amqp)) {
  vars_["user"] = Value(target.user);
  vars_["password"] = Value(target.password);
  vars_["vhost"] = Value(target.vhost);
  vars_["unique"] = Value(std::move(unique_prefix));
}

Scenario::~Scenario() = default;

CaseResult Scenario::run() {
  CaseResult result = result_for(spec_);
  started_ = Clock::now();
  case_deadline_ = started_ + std::chrono::milliseconds(spec_.timeout_ms);
  std::vector<StepRecord> records;
  for (std::size_t i = 0; i < spec_.steps.size(); ++i) {
    const Json& step = spec_.steps[i];
    StepOutcome outcome;
    try {
      outcome = run_step(step.begin().key(), substitute(step.begin().value()));
    } catch (const Json::exception& e) {
      outcome = StepOutcome::error(std::string("malformed step: ") + e.what());
    }
    if (outcome.is_ok() && Clock::now() > case_deadline_) {
      outcome = StepOutcome::fail("the case ran past its timeout of " + std::to_string(spec_.timeout_ms) + " ms");
    }
    records.push_back({static_cast<int>(i), std::move(outcome), ms_since_start()});
    // The first thing that went wrong ends the case: this step, or a rule the monitor saw broken during it.
    const CaseVerdict so_far = decide_verdict(records, all_violations());
    if (so_far.verdict != Verdict::pass) {
      if (so_far.violation != nullptr) note(so_far.violation->connection, so_far.message);
      break;
    }
  }
  for (auto& [name, c] : conns_) c->wire.disconnect();
  amqp_->drop_all();
  clear_alarm_left_raised();
  result.violations = all_violations();
  record_verdict(decide_verdict(records, result.violations), spec_.steps, result);
  result.duration_ms = ms_since_start();
  result.transcript = std::move(transcript_);
  return result;
}

double Scenario::ms_since_start() const {
  return std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
}

// The wire monitor ---------------------------------------------------------------------------------------------

// A connection replaced by a new one of the same name keeps what its monitor found.
void Scenario::retire(const std::string& name) {
  Conn* old = conn(name);
  if (old == nullptr || old->wire.monitor() == nullptr) return;
  const auto& found = old->wire.monitor()->violations();
  retired_violations_.insert(retired_violations_.end(), found.begin(), found.end());
}

std::vector<MonitorViolation> Scenario::all_violations() const {
  std::vector<MonitorViolation> all = retired_violations_;
  for (const auto& [name, c] : conns_) {
    if (c->wire.monitor() == nullptr) continue;
    const auto& found = c->wire.monitor()->violations();
    all.insert(all.end(), found.begin(), found.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
  return all;
}

StepOutcome Scenario::run_step(const std::string& verb, const Json& args) {
  static const std::map<std::string, StepOutcome (Scenario::*)(const Json&)> kSteps = {
      {"connect", &Scenario::step_connect},
      {"hello", &Scenario::step_hello},
      {"handshake", &Scenario::step_handshake},
      {"send", &Scenario::step_send},
      {"send_raw", &Scenario::step_send_raw},
      {"expect", &Scenario::step_expect},
      {"expect_error", &Scenario::step_expect_error},
      {"expect_close", &Scenario::step_expect_close},
      {"expect_none", &Scenario::step_expect_none},
      {"sleep", &Scenario::step_sleep},
      {"disconnect", &Scenario::step_disconnect},
      {"auto_pong", &Scenario::step_auto_pong},
      {"check", &Scenario::step_check},
      {"stop_broker", &Scenario::step_stop_broker},
      {"restart_broker", &Scenario::step_restart_broker},
      {"alarm", &Scenario::step_alarm},
      {"ws_send", &Scenario::step_ws_send},
      {"expect_ws_pong", &Scenario::step_expect_ws_pong},
      {"expect_http_status", &Scenario::step_expect_http_status},
      {"http", &Scenario::step_http},
  };
  if (verb.starts_with("amqp_")) return amqp_->run(verb, args);
  auto it = kSteps.find(verb);
  if (it == kSteps.end()) return StepOutcome::error("unknown verb " + verb);
  return (this->*(it->second))(args);
}

const std::vector<std::string>& step_verbs() {
  static const std::vector<std::string> verbs = {"connect",     "hello",          "handshake",          "send",
                                                 "send_raw",    "expect",         "expect_error",       "expect_close",
                                                 "expect_none", "sleep",          "disconnect",         "auto_pong",
                                                 "check",       "stop_broker",    "restart_broker",     "alarm",
                                                 "ws_send",     "expect_ws_pong", "expect_http_status", "http"};
  static const std::vector<std::string> with_amqp = [] {
    std::vector<std::string> all = verbs;
    all.insert(all.end(), amqp_step_verbs().begin(), amqp_step_verbs().end());
    return all;
  }();
  return with_amqp;
}

// Variables ------------------------------------------------------------------------------------------------

Json Scenario::substitute(const Json& j) const {
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) out[k] = substitute(v);
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& v : j) out.push_back(substitute(v));
    return out;
  }
  if (!j.is_string()) return j;
  std::string text = j.get<std::string>();
  // "${name}" alone becomes the variable's value with its type; inside a longer string, its text.
  if (text.starts_with("${") && text.ends_with("}") && text.find("${", 2) == std::string::npos) {
    auto it = vars_.find(text.substr(2, text.size() - 3));
    if (it != vars_.end()) return typed_json_from_value(it->second);
  }
  for (std::size_t at = text.find("${"); at != std::string::npos; at = text.find("${", at + 1)) {
    const std::size_t end = text.find('}', at);
    if (end == std::string::npos) break;
    auto it = vars_.find(text.substr(at + 2, end - at - 2));
    if (it == vars_.end()) continue;
    const auto* s = it->second.get_if<std::string>();
    const std::string replacement = s ? *s : typed_json_from_value(it->second).dump();
    text.replace(at, end - at + 1, replacement);
  }
  return text;
}

// Connections and frames ------------------------------------------------------------------------------------

Scenario::Conn* Scenario::conn(const std::string& name) {
  auto it = conns_.find(name);
  return it == conns_.end() ? nullptr : it->second.get();
}

Result<Scenario::Conn*, std::string> Scenario::conn_for(const Json& args) {
  const std::string name = args.value("conn", "main");
  Conn* c = conn(name);
  if (c == nullptr) return "no connection named \"" + name + "\": connect it first";
  if (c->dead) return "connection \"" + name + "\" was closed by restart_broker: connect it again";
  return c;
}

Clock::time_point Scenario::deadline_after(const Json& args, const char* key, int default_ms) const {
  const auto wanted = Clock::now() + std::chrono::milliseconds(args.value(key, default_ms));
  return std::min(wanted, case_deadline_);
}

void Scenario::note(const std::string& conn, const std::string& text) {
  const double at = ms_since_start();
  transcript_.push_back({at, conn, "note", "", text, 0, ""});
}

void Scenario::log_frame(const std::string& conn, const std::string& direction, std::uint8_t op, ByteView header,
                         ByteView payload) {
  const double at = ms_since_start();
  transcript_.push_back({at, conn, direction, op_label(op), header_summary(header), payload.size(), preview(payload)});
}

// Stream bytes (FMQ1, len-prefixed frames): on WebSocket, each complete frame leaves as one message.
bool Scenario::send_bytes(Conn& c, const Bytes& bytes, const std::string& op, const std::string& text,
                          ByteView payload) {
  const double at = ms_since_start();
  transcript_.push_back({at, c.name, "sent", op, text, payload.size(), preview(payload)});
  const bool ok = c.wire.send(bytes, std::min(Clock::now() + std::chrono::seconds(5), case_deadline_));
  if (ok && c.wire.held_back() > 0) {
    note(c.name, std::to_string(c.wire.held_back()) + " bytes held back until their frame is complete (one "
                                                      "WebSocket message per frame)");
  }
  return ok;
}

// One frame, framed for the connection's transport.
bool Scenario::send_framed(Conn& c, std::uint8_t op, ByteView header, ByteView payload, const std::string& text) {
  const double at = ms_since_start();
  transcript_.push_back({at, c.name, "sent", op_label(op), text, payload.size(), preview(payload)});
  return c.wire.send_frame(op, header, payload, std::min(Clock::now() + std::chrono::seconds(5), case_deadline_));
}

bool Scenario::send_message(Conn& c, const Message& m, ByteView payload) {
  const Bytes header = encode_header(m);
  return send_framed(c, static_cast<std::uint8_t>(op_of(m)), header, payload, header_text(header));
}

// How a send step ends: bytes with no WebSocket form are the case's error (it is stream-only); a connection
// the broker closed while the frame was written is a failure unless the step allows it (may_be_cut).
StepOutcome Scenario::sent(Conn& c, bool ok, const Json& args) {
  if (ok) return StepOutcome::ok();
  if (!c.wire.untranslatable().empty()) {
    return StepOutcome::error("these bytes cannot be sent over " + std::string(transport_name(c.wire.transport())) +
                              ": " + c.wire.untranslatable() +
                              ". A case whose bytes only the TCP framing can carry is stream-only: declare "
                              "\"transports\": [\"fire\", \"fires\"]");
  }
  if (args.value("may_be_cut", false)) return StepOutcome::ok();
  return StepOutcome::fail("the connection closed while sending");
}

Scenario::Received Scenario::next(Conn& c, Clock::time_point deadline, bool want_ping) {
  while (true) {
    WireEvent event = c.wire.receive(deadline);
    if (std::holds_alternative<TimeoutEvent>(event)) return {Received::Kind::timeout, {}, {}, "", {}};
    if (auto* closed = std::get_if<ClosedEvent>(&event)) {
      note(c.name, "connection closed by the broker (" + closed->how + ")");
      return {Received::Kind::closed, {}, {}, closed->how, closed->ws_close_code};
    }
    if (auto* bad = std::get_if<BadFramingEvent>(&event)) {
      note(c.name, "could not frame the broker's bytes: " + bad->error.msg);
      return {Received::Kind::bad_framing, {}, {}, bad->error.msg, {}};
    }
    RawFrame frame = std::move(std::get<FrameEvent>(event).frame);  // in the transcript since it arrived
    if (frame.op() == static_cast<std::uint8_t>(OpCode::ping) && c.auto_pong && !want_ping) {
      send_message(c, op::Pong{});
      continue;
    }
    Value header = Value(Map{});
    if (!frame.header().empty()) {
      auto decoded = decode_value(frame.header());
      header = decoded ? *decoded : Value(Nil{});
    }
    return {Received::Kind::frame, std::move(frame), std::move(header), "", {}};
  }
}

std::string Scenario::describe(const Received& r) const {
  switch (r.kind) {
    case Received::Kind::timeout: return "nothing arrived";
    case Received::Kind::closed: return "the connection closed (" + r.detail + ")";
    case Received::Kind::bad_framing: return "bytes that are not a frame (" + r.detail + ")";
    case Received::Kind::frame: break;
  }
  return op_label(r.frame.op()) + " " + header_text(r.frame.header());
}

// Steps ------------------------------------------------------------------------------------------------------

// The target's address, with the WebSocket endpoint and vhost parameter a step may override: "path", and
// "vhost_query" (a value, or null for no ?vhost= at all).
WireAddress Scenario::address_for(const Json& args) const {
  WireAddress address = target_.address();
  if (args.contains("path")) address.path = args.at("path").get<std::string>();
  if (args.contains("vhost_query")) {
    const Json& v = args.at("vhost_query");
    address.vhost_query = v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>());
  }
  return address;
}

static std::string describe_address(const WireAddress& a) {
  std::string out = std::string(transport_name(a.transport)) + "://" + a.host + ":" + std::to_string(a.port);
  if (is_websocket(a.transport)) out += a.path + (a.vhost_query ? "?vhost=" + percent_encode(*a.vhost_query) : "");
  return out;
}

StepOutcome Scenario::step_connect(const Json& args) {
  const std::string name = args.value("conn", "main");
  const WireAddress address = address_for(args);
  const bool stream = !is_websocket(address.transport);
  if (!stream && args.contains("preamble_hex")) {
    return StepOutcome::error("preamble_hex: WebSocket has no preamble; a case about the preamble is stream-only "
                              "(\"transports\": [\"fire\", \"fires\"])");
  }
  auto c = std::make_unique<Conn>();
  c->name = name;
  c->wire.watch(std::make_unique<WireMonitor>(Side::server, name, started_));
  // Every frame the broker sends is in the transcript, at its arrival, read by a step or not.
  c->wire.on_received(
      [this, name](const RawFrame& f) { log_frame(name, "received", f.op(), f.header(), f.payload()); });
  auto connected = c->wire.connect(address, deadline_after(args, "within_ms", 5000));
  if (!connected) {
    // Not reaching the target is the harness's error; a server that answers the upgrade wrongly fails.
    const ConnectFailure& why = connected.error();
    return why.reached ? StepOutcome::fail(why.message) : StepOutcome::error(why.message);
  }
  note(name, "connected to " + describe_address(address));
  Conn& ref = *c;
  retire(name);
  conns_[name] = std::move(c);
  // FMQ1 opens the TCP and TLS framings only: "without FMQ1" on WebSocket.
  if (!stream || !args.value("preamble", true)) return StepOutcome::ok();
  const Bytes preamble = args.contains("preamble_hex")
                             ? from_hex(args.at("preamble_hex").get<std::string>()).value_or(Bytes{})
                             : Bytes(kPreamble.begin(), kPreamble.end());
  if (!send_bytes(ref, preamble, "", "preamble " + preview(preamble), {})) {
    return StepOutcome::fail("the broker closed the connection before the preamble was sent");
  }
  return StepOutcome::ok();
}

StepOutcome Scenario::step_hello(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  Json header = {{"ver", args.value("ver", 1)},
                 {"vhost", args.value("vhost", target_.vhost)},
                 {"auth",
                  {{"mech", args.value("mech", "plain")},
                   {"user", args.value("user", target_.user)},
                   {"pass", args.value("pass", target_.password)}}},
                 {"heartbeat", args.value("heartbeat", 0)},
                 {"client", {{"name", "firemq-conform"}, {"case", spec_.id}}}};
  const Json extra = args.value("header", Json::object());  // a named copy: items() would dangle on a temporary
  for (const auto& [k, v] : extra.items()) header[k] = v;
  for (const Json& k : args.value("omit", Json::array())) header.erase(k.get<std::string>());
  auto map = value_from_typed_json(header);
  if (!map) return StepOutcome::error("hello header: " + map.error());
  Bytes encoded;
  encode_value(*map, encoded);
  send_framed(**c, static_cast<std::uint8_t>(OpCode::hello), encoded, {}, header_text(encoded));
  return StepOutcome::ok();
}

StepOutcome Scenario::step_handshake(const Json& args) {
  if (StepOutcome o = step_connect(args); o.kind != StepOutcome::Kind::ok) return o;
  if (StepOutcome o = step_hello(args); o.kind != StepOutcome::Kind::ok) return o;
  Conn& c = *conn(args.value("conn", "main"));
  const Received r = next(c, deadline_after(args, "within_ms", kDefaultWithinMs));
  if (r.kind != Received::Kind::frame || r.frame.op() != static_cast<std::uint8_t>(OpCode::welcome)) {
    return StepOutcome::fail("expected welcome in answer to a valid hello, got " + describe(r));
  }
  vars_["welcome"] = r.header;
  if (const auto* max_frame = uint_field(r.header, "max_frame")) vars_["welcome_max_frame"] = Value(*max_frame);
  const auto* heartbeat = uint_field(r.header, "heartbeat");
  vars_["welcome_heartbeat"] = Value(heartbeat ? *heartbeat : std::uint64_t{0});
  return StepOutcome::ok();
}

StepOutcome Scenario::step_send(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  const auto op = op_code(args.at("op"));
  if (!op) return StepOutcome::error("unknown op " + args.at("op").dump());
  const Bytes payload = payload_of(args);
  Bytes header;
  if (args.contains("header_hex")) {
    header = from_hex(args.at("header_hex").get<std::string>()).value_or(Bytes{});
  } else {
    auto value = value_from_typed_json(args.value("header", Json::object()));
    if (!value || !value->is<Map>()) return StepOutcome::error("header must be a typed-JSON object");
    encode_value(*value, header);
  }
  if (!args.contains("pad_to")) {
    const std::string text = header_summary(header);
    return sent(**c, send_framed(**c, *op, header, payload, text), args);
  }
  auto map = decode_value(header);
  // pad_to: a size, or {"size": n, "add": k} (variables are substituted first: "${welcome_max_frame}").
  const Json& pad = args.at("pad_to");
  const std::size_t size = pad.is_object() ? pad.at("size").get<std::size_t>() + pad.value("add", 0)
                                           : pad.get<std::size_t>();
  const Map* fields = map ? map->get_if<Map>() : nullptr;
  auto padded = padded_frame(*op, fields ? *fields : Map{}, payload, size);
  if (!padded) return StepOutcome::error(padded.error());
  const Bytes& frame = *padded;
  // The padded size counts the len field on every transport (4 + len): on WebSocket the message is 4 bytes
  // shorter, as the spec's limits count it.
  const std::string text = frame.size() > 4096 ? "(" + std::to_string(frame.size()) + "-byte frame)"
                                               : header_text(header);
  // A broker may refuse a frame and close before all of it is written; the next step judges what it said.
  return sent(**c, send_bytes(**c, frame, op_label(*op), text, payload), args);
}

StepOutcome Scenario::step_send_raw(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  auto bytes = from_hex(args.at("hex").get<std::string>());
  if (!bytes) return StepOutcome::error("send_raw: \"hex\" is not hex");
  const std::string text = "raw " + to_hex(ByteView(*bytes).first(std::min<std::size_t>(bytes->size(), 64)));
  return sent(**c, send_bytes(**c, *bytes, "", text, {}), args);
}

StepOutcome Scenario::step_expect(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  // "op" is one op, or {"$one_of": [...]} when the spec allows several replies.
  std::vector<std::uint8_t> ops;
  const Json& op_arg = args.at("op");
  for (const Json& o : op_arg.is_object() ? op_arg.value("$one_of", Json::array()) : Json::array({op_arg})) {
    if (auto code = op_code(o)) ops.push_back(*code);
  }
  if (ops.empty()) return StepOutcome::error("unknown op " + op_arg.dump());
  const std::optional<std::uint8_t> op = ops.front();
  const bool want_ping = *op == static_cast<std::uint8_t>(OpCode::ping);
  // "skip": ops that may come first (an alternative the spec allows, e.g. an error before a nack).
  std::vector<std::uint8_t> skip;
  for (const Json& s : args.value("skip", Json::array())) {
    if (auto code = op_code(s)) skip.push_back(*code);
  }
  const auto deadline = deadline_after(args, "within_ms", kDefaultWithinMs);
  Received r = next(**c, deadline, want_ping);
  auto wanted_op = [&ops](std::uint8_t got) { return std::count(ops.begin(), ops.end(), got) > 0; };
  while (r.kind == Received::Kind::frame && !wanted_op(r.frame.op()) &&
         std::count(skip.begin(), skip.end(), r.frame.op())) {
    r = next(**c, deadline, want_ping);
  }
  std::string wanted;
  for (std::uint8_t o : ops) wanted += (wanted.empty() ? "" : " or ") + op_label(o);
  if (r.kind != Received::Kind::frame) return StepOutcome::fail("expected " + wanted + ", " + describe(r));
  if (!wanted_op(r.frame.op())) return StepOutcome::fail("expected " + wanted + ", received " + describe(r));
  if (r.header.is<Nil>()) return StepOutcome::fail("the " + wanted + " header is not a MessagePack map");
  if (args.contains("header")) {
    if (std::string bad = match_value(args.at("header"), &r.header, "", vars_); !bad.empty()) {
      return StepOutcome::fail(wanted + " " + bad);
    }
  }
  if (args.contains("payload")) {
    const Bytes expected = payload_of(args);
    if (!std::equal(expected.begin(), expected.end(), r.frame.payload().begin(), r.frame.payload().end())) {
      return StepOutcome::fail(wanted + " payload: expected " + preview(expected) + ", got " +
                               preview(r.frame.payload()));
    }
  }
  return StepOutcome::ok();
}

StepOutcome Scenario::step_expect_error(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  const std::vector<std::uint64_t> codes = codes_of(args.at("code"));
  const bool or_close = args.value("or_close", false);
  const Received r = next(**c, deadline_after(args, "within_ms", kDefaultWithinMs));
  const std::string wanted = "error " + join_codes(codes);
  if (r.kind == Received::Kind::closed && or_close) {
    note((*c)->name, "accepted: the broker closed the connection instead of sending " + wanted);
    return StepOutcome::ok();
  }
  if (r.kind != Received::Kind::frame) return StepOutcome::fail("expected " + wanted + ", " + describe(r));
  const std::uint64_t* code = uint_field(r.header, "code");
  const bool code_ok = code && std::find(codes.begin(), codes.end(), *code) != codes.end();
  if (r.frame.op() == static_cast<std::uint8_t>(OpCode::close) && or_close && code_ok) {
    // An AMQP-style broker may close the connection with the code instead of sending error first.
    send_message(**c, op::Close{static_cast<std::uint64_t>(200), "closing"});
    return expect_closed_after_fatal(**c, "close " + std::to_string(*code),
                                     deadline_after(args, "close_within_ms", kDefaultCloseWithinMs));
  }
  if (r.frame.op() != static_cast<std::uint8_t>(OpCode::error))
    return StepOutcome::fail("expected " + wanted + ", received " + describe(r));
  if (!code_ok) return StepOutcome::fail("expected " + wanted + ", received " + describe(r));
  if (args.contains("rid")) {
    if (std::string bad = match_value(args.at("rid"), find(*r.header.get_if<Map>(), "rid"), "rid", vars_);
        !bad.empty()) {
      return StepOutcome::fail("error " + bad);
    }
  }
  if (args.contains("header")) {
    if (std::string bad = match_value(args.at("header"), &r.header, "", vars_); !bad.empty())
      return StepOutcome::fail("error " + bad);
  }
  const bool fatal = bool_field(r.header, "fatal");
  if (args.contains("fatal") && args.at("fatal").get<bool>() != fatal) {
    return StepOutcome::fail("expected the error to be " + std::string(fatal ? "not fatal" : "fatal") +
                             ", got fatal: " + (fatal ? "true" : "false") + " in " + describe(r));
  }
  // The fatal flag must tell the truth either way: "true when the server closes the connection after this frame".
  const auto deadline = deadline_after(args, "close_within_ms", kDefaultCloseWithinMs);
  return fatal ? expect_closed_after_fatal(**c, "a fatal error", deadline) : expect_still_open(**c, deadline);
}

StepOutcome Scenario::expect_closed_after_fatal(Conn& c, const std::string& what, Clock::time_point deadline) {
  while (true) {
    const Received r = next(c, deadline);
    if (r.kind == Received::Kind::closed) return StepOutcome::ok();
    if (r.kind == Received::Kind::timeout) {
      return StepOutcome::fail("after " + what + " the broker must close the connection; it was still open");
    }
    if (r.kind == Received::Kind::frame && r.frame.op() == static_cast<std::uint8_t>(OpCode::close)) continue;
    return StepOutcome::fail("after " + what + " the broker must close the connection, but sent " + describe(r));
  }
}

StepOutcome Scenario::expect_still_open(Conn& c, Clock::time_point deadline) {
  // A non-fatal error leaves the connection usable: a ping must still get its pong.
  send_message(c, op::Ping{});
  const Received r = next(c, deadline);
  if (r.kind == Received::Kind::frame && r.frame.op() == static_cast<std::uint8_t>(OpCode::pong))
    return StepOutcome::ok();
  return StepOutcome::fail("after a non-fatal error (fatal: false) the connection must stay open; a ping got " +
                           describe(r));
}

StepOutcome Scenario::step_expect_close(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  std::vector<std::uint8_t> allowed;
  for (const Json& op : args.value("allow", Json::array({"close", "error"}))) {
    if (auto code = op_code(op)) allowed.push_back(*code);
  }
  const auto deadline = deadline_after(args, "within_ms", kDefaultCloseWithinMs);
  while (true) {
    const Received r = next(**c, deadline);
    if (r.kind == Received::Kind::closed) return check_ws_close_code(**c, r, args);
    if (r.kind == Received::Kind::frame && std::count(allowed.begin(), allowed.end(), r.frame.op())) continue;
    return StepOutcome::fail("expected the broker to close the connection, " +
                             std::string(r.kind == Received::Kind::timeout ? "it stayed open" : "got " + describe(r)));
  }
}

StepOutcome Scenario::step_expect_none(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  const Received r = next(**c, deadline_after(args, "for_ms", 500));
  if (r.kind == Received::Kind::timeout) return StepOutcome::ok();
  return StepOutcome::fail("expected nothing, but " + std::string(r.kind == Received::Kind::frame ? "received " : "") +
                           describe(r));
}

StepOutcome Scenario::step_sleep(const Json& args) {
  const auto until = deadline_after(args, "ms", 0);
  std::this_thread::sleep_until(until);
  return StepOutcome::ok();
}

StepOutcome Scenario::step_disconnect(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  (*c)->wire.disconnect();
  note((*c)->name, "disconnected by the harness");
  return StepOutcome::ok();
}

StepOutcome Scenario::step_auto_pong(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  (*c)->auto_pong = args.value("enabled", true);
  return StepOutcome::ok();
}

StepOutcome Scenario::step_stop_broker(const Json& args) {
  if (!stop_broker_) return StepOutcome::error("stop_broker needs a broker of the case's own (broker_args)");
  // The broker's frames to this case's connections wait in their sockets while it stops.
  const int status = stop_broker_();
  note("", "broker stopped with SIGTERM, exit status " + std::to_string(status));
  if (args.value("expect_exit", 0) != status) {
    return StepOutcome::fail("after SIGTERM the broker exited with status " + std::to_string(status) + ", expected " +
                             std::to_string(args.value("expect_exit", 0)));
  }
  return StepOutcome::ok();
}

StepOutcome Scenario::step_restart_broker(const Json& args) {
  if (!restart_broker_) {
    return StepOutcome::error("restart_broker needs the feature \"restart\" (declare it in the case's requires)");
  }
  const bool kill = args.value("kill", false);
  note("", kill ? "restarting the broker: kill -9" : "restarting the broker: SIGTERM");
  amqp_->drop_all();  // closed first: a later amqp_open with the same name opens a fresh one
  StepOutcome outcome = restart_broker_(kill, case_deadline_, [this] { close_after_shutdown(case_deadline_); });
  // The case's connections went with the old process, whatever it sent them last: a later connect with the
  // same name opens a fresh one.
  for (auto& [name, c] : conns_) {
    c->wire.disconnect();
    c->dead = true;
  }
  if (outcome.kind == StepOutcome::Kind::ok) note("", "broker restarted: " + outcome.message);
  return outcome.kind == StepOutcome::Kind::ok ? StepOutcome::ok() : outcome;
}

StepOutcome Scenario::step_alarm(const Json& args) {
  if (!alarm_) return StepOutcome::error("alarm needs the feature \"alarm\" (declare it in the case's requires)");
  if (!args.contains("raise") || !args.at("raise").is_boolean()) {
    return StepOutcome::error("alarm: give {\"raise\": true} to raise the alarm or {\"raise\": false} to clear it");
  }
  const bool raise = args.at("raise").get<bool>();
  StepOutcome outcome = alarm_(raise, case_deadline_);
  alarm_raised_ = raise || outcome.kind != StepOutcome::Kind::ok;  // a clear that failed may have left it raised
  if (outcome.kind == StepOutcome::Kind::ok) note("", (raise ? "alarm raised: " : "alarm cleared: ") + outcome.message);
  return outcome.kind == StepOutcome::Kind::ok ? StepOutcome::ok() : outcome;
}

// A case that failed while its alarm held must not leave the target paused for the runs after it.
void Scenario::clear_alarm_left_raised() {
  if (!alarm_raised_) return;
  alarm_raised_ = false;
  const StepOutcome cleared = alarm_(false, Clock::now() + std::chrono::seconds(10));
  note("", cleared.kind == StepOutcome::Kind::ok
               ? "the alarm the case left raised was cleared"
               : "the alarm the case left raised could not be cleared: " + cleared.message);
}

// A broker shutting down gracefully sends close to every client (320 for the reference broker) and waits for
// them: each connection answers it as a client does, and goes. Frames before the close (deliveries in
// flight) are logged and left unanswered.
void Scenario::close_after_shutdown(Clock::time_point deadline) {
  const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(kDefaultCloseWithinMs));
  for (auto& [name, c] : conns_) {
    while (c->wire.is_open()) {
      const Received r = next(*c, until);
      if (r.kind != Received::Kind::frame) break;
      if (r.frame.op() == static_cast<std::uint8_t>(OpCode::close)) {
        send_message(*c, op::Close{static_cast<std::uint64_t>(200), "closing"});
        break;
      }
    }
    c->wire.disconnect();
  }
}

StepOutcome Scenario::step_check(const Json& args) {
  const std::string name = args.at("name").get<std::string>();
  auto it = named_checks().find(name);
  if (it == named_checks().end()) return StepOutcome::error("unknown check \"" + name + "\"");
  return it->second(*this, args.value("args", Json::object()));
}

// WebSocket-only steps ------------------------------------------------------------------------------------------

// ws_send: what only WebSocket can say. One of "text" (a text message), "hex" (a binary message, or text
// with "binary": false), "frames" (several FireMQ frames in one binary message), "ping" (a control ping, hex
// payload), "close" (a close frame with this code, "reason" optional), "raw_hex" (bytes as they are);
// "fragments": N sends a message as N frames.
StepOutcome Scenario::step_ws_send(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  WireConnection& wire = (*c)->wire;
  if (!is_websocket(wire.transport())) return StepOutcome::error("ws_send is for WebSocket connections (ws, wss)");
  const auto deadline = std::min(Clock::now() + std::chrono::seconds(5), case_deadline_);
  const std::size_t fragments = args.value("fragments", 1);
  auto as_bytes = [](const std::string& text) { return Bytes(text.begin(), text.end()); };
  std::string what;
  bool ok = false;
  if (args.contains("text")) {
    const Bytes text = as_bytes(args.at("text").get<std::string>());
    what = "text message " + preview(text);
    ok = wire.ws_send_message(WsOpcode::text, text, fragments, deadline);
  } else if (args.contains("hex")) {
    auto bytes = from_hex(args.at("hex").get<std::string>());
    if (!bytes) return StepOutcome::error("ws_send: \"hex\" is not hex");
    const bool binary = args.value("binary", true);
    what = std::string(binary ? "binary" : "text") + " message " +
           to_hex(ByteView(*bytes).first(std::min<std::size_t>(bytes->size(), 64)));
    ok = wire.ws_send_message(binary ? WsOpcode::binary : WsOpcode::text, *bytes, fragments, deadline);
  } else if (args.contains("frames")) {
    auto message = frames_in_one_message(args.at("frames"), what);
    if (!message) return StepOutcome::error("ws_send: " + message.error());
    ok = wire.ws_send_message(WsOpcode::binary, *message, fragments, deadline);
  } else if (args.contains("ping")) {
    auto bytes = from_hex(args.at("ping").get<std::string>());
    if (!bytes) return StepOutcome::error("ws_send: \"ping\" is not hex");
    what = "WebSocket ping " + to_hex(*bytes);
    ok = wire.ws_send_frame(true, static_cast<std::uint8_t>(WsOpcode::ping), *bytes, deadline);
  } else if (args.contains("close")) {
    const auto code = args.at("close").get<std::uint16_t>();
    what = "WebSocket close " + std::to_string(code);
    ok = wire.ws_send_frame(true, static_cast<std::uint8_t>(WsOpcode::close),
                            close_payload(code, args.value("reason", "")), deadline);
  } else if (args.contains("raw_hex")) {
    auto bytes = from_hex(args.at("raw_hex").get<std::string>());
    if (!bytes) return StepOutcome::error("ws_send: \"raw_hex\" is not hex");
    what = "raw " + to_hex(ByteView(*bytes).first(std::min<std::size_t>(bytes->size(), 64)));
    ok = wire.ws_send_raw(*bytes, deadline);
  } else {
    return StepOutcome::error("ws_send needs one of text, hex, frames, ping, close, raw_hex");
  }
  if (fragments > 1) what += " in " + std::to_string(fragments) + " fragments";
  const double at = ms_since_start();
  transcript_.push_back({at, (*c)->name, "sent", "ws", what, 0, ""});
  return sent(**c, ok, args);
}

StepOutcome Scenario::step_expect_ws_pong(const Json& args) {
  auto c = conn_for(args);
  if (!c) return StepOutcome::error(c.error());
  switch ((*c)->wire.wait_ws_pong(deadline_after(args, "within_ms", kDefaultWithinMs))) {
    case WireConnection::PongWait::pong: note((*c)->name, "WebSocket pong received"); return StepOutcome::ok();
    case WireConnection::PongWait::timeout: return StepOutcome::fail("expected a WebSocket pong, nothing arrived");
    case WireConnection::PongWait::closed: return StepOutcome::fail("expected a WebSocket pong, the connection closed");
    case WireConnection::PongWait::not_websocket: break;
  }
  return StepOutcome::error("expect_ws_pong is for WebSocket connections (ws, wss)");
}

// expect_http_status: the upgrade request (with "path" and "vhost_query" as for connect) gets this HTTP
// status instead of 101; nothing is upgraded.
StepOutcome Scenario::step_expect_http_status(const Json& args) {
  const WireAddress address = address_for(args);
  if (!is_websocket(address.transport)) return StepOutcome::error("expect_http_status is for ws and wss targets");
  const std::vector<std::uint64_t> statuses = codes_of(args.at("status"));
  const std::string name = args.value("conn", "main");
  WireConnection wire;
  auto connected = wire.connect(address, deadline_after(args, "within_ms", 5000));
  if (connected) {
    note(name, "upgraded: " + describe_address(address));
    return StepOutcome::fail("expected HTTP " + join_codes(statuses) + " for " + describe_address(address) +
                             ", the server upgraded the connection (101)");
  }
  const ConnectFailure& why = connected.error();
  note(name, describe_address(address) + ": " + why.message);
  if (!why.reached) return StepOutcome::error(why.message);
  if (std::find(statuses.begin(), statuses.end(), static_cast<std::uint64_t>(why.http_status)) == statuses.end()) {
    return StepOutcome::fail("expected HTTP " + join_codes(statuses) + " for " + describe_address(address) +
                             ", got: " + why.message);
  }
  return StepOutcome::ok();
}

// http: one request to the target's management API (feature management). `path` is used as it is, or
// `path_parts` are percent-encoded one by one and joined ("/", "api", "connections", "${conn_id}" names are safe
// whatever they hold); `body` is sent as JSON. The status must be one of `status` (default 200, 201 or 204), and
// the JSON answer must match `expect` (a pattern, with $some for "a list holding ...").
StepOutcome Scenario::step_http(const Json& args) {
  if (!target_.management) return StepOutcome::error("http needs the target's management API (feature management)");
  std::string path = args.value("path", "");
  if (args.contains("path_parts")) {
    for (const Json& part : args.at("path_parts")) path += "/" + percent_encode(part.get<std::string>());
  }
  const std::string method = args.value("method", "GET");
  const std::string body = args.contains("body") ? args.at("body").dump() : "";
  const auto deadline = deadline_after(args, "within_ms", 5000);
  auto response = http_request(*target_.management, method, path, body, deadline);
  if (!response) return StepOutcome::error(response.error());
  note("http", method + " " + path + (body.empty() ? "" : " " + body) + " -> " + std::to_string(response->status) +
                   " " + response->body.substr(0, 500));
  const std::vector<std::uint64_t> statuses = args.contains("status") ? codes_of(args.at("status"))
                                                                      : std::vector<std::uint64_t>{200, 201, 204};
  if (std::find(statuses.begin(), statuses.end(), static_cast<std::uint64_t>(response->status)) == statuses.end()) {
    return StepOutcome::fail("expected HTTP " + join_codes(statuses) + " for " + method + " " + path + ", got " +
                             std::to_string(response->status) + ": " + response->body.substr(0, 300));
  }
  if (!args.contains("expect")) return StepOutcome::ok();
  const Json answer = Json::parse(response->body, nullptr, false);
  if (answer.is_discarded())
    return StepOutcome::fail(method + " " + path + " did not answer JSON: " + response->body.substr(0, 300));
  auto value = value_from_plain_json(answer);
  if (!value) return StepOutcome::fail(method + " " + path + ": " + value.error());
  if (std::string bad = match_value(args.at("expect"), &*value, "answer", vars_); !bad.empty()) {
    return StepOutcome::fail(method + " " + path + ": " + bad);
  }
  return StepOutcome::ok();
}

}  // namespace firemq::conform
