#include "harness/client_mode/client_mode.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "harness/client/wire.h"
#include "harness/client_mode/client_proxy.h"
#include "harness/model/verdict.h"
#include "harness/process/driver_process.h"
#include "harness/rules/client_rules.h"
#include "harness/run/runner.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/typed_json.h"
#include "protocol/url.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;

// How long a driver has to say it is ready, and to exit once its stdin is closed.
constexpr std::chrono::seconds kDriverStartTime{10};
constexpr std::chrono::seconds kDriverExitTime{3};
// The longest stderr tail a failure message quotes (the transcript keeps the whole of it).
constexpr std::size_t kStderrInMessage = 600;

// A typed-JSON map of a command, as a Value (an empty map when the command leaves it out or it is no map: the
// command's own checks say so).
Value asked_map(const Json& command, const char* key) {
  if (!command.contains(key)) return Value(Map{});
  auto value = value_from_typed_json(command.at(key));
  return value && value->is<Map>() ? *value : Value(Map{});
}

// A publish as the application gave it: what its frame must carry (client_rules.h, AskedField). The seq of a
// publish that wants no confirm is 0; the props and headers given reach the frame unchanged.
AskedFrame publish_asked(const Json& message, bool confirm) {
  AskedFrame asked{static_cast<std::uint8_t>(OpCode::publish), {}};
  if (!confirm) asked.fields.push_back({"seq", Value(std::uint64_t{0}), "publish.seq.zero-no-confirm"});
  asked.fields.push_back({"props", asked_map(message, "props"), "publish.props"});
  asked.fields.push_back({"headers", asked_map(message, "headers"), "publish.headers.any-type"});
  return asked;
}

// The hello a connect to `url` asks for: the URL's user and password in auth, and over fire and fires its vhost in
// vhost ("Empty means `/`", so "" keeps "/"). Over ws and wss the vhost is the upgrade's query parameter, and a
// client may leave hello's out (docs/spec-notes.md, Q12): hello's vhost is not asked there. Nothing when the URL
// does not parse (the client may refuse it; the case says).
std::vector<AskedFrame> hello_asked_by(const Json& connect) {
  auto url = parse_url(connect.value("url", ""));
  if (!url) return {};
  Map auth{{Value(std::string("user")), Value(url->user)}, {Value(std::string("pass")), Value(url->password)}};
  AskedFrame hello{static_cast<std::uint8_t>(OpCode::hello), {}};
  hello.fields.push_back({"auth", Value(std::move(auth)), kUrlUserinfo});
  if (!url->websocket) {
    const auto same_as = url->vhost == "/" ? std::optional<Value>(Value(std::string())) : std::nullopt;
    hello.fields.push_back({"vhost", Value(url->vhost), kUrlVhostFromPath, same_as});
  }
  return {hello};
}

// The frames a command asks the client to send, with the fields they must carry and the defaults of the driver
// protocol (docs/client-certification.md: multiple false, requeue true, no_ack false).
std::vector<AskedFrame> frames_asked_by(const Json& cmd) {
  const std::string name = cmd.value("cmd", "");
  const auto flag = [&](const char* key, bool otherwise) { return Value(cmd.value(key, otherwise)); };
  const auto tag = [&] { return Value(cmd.value("delivery_tag", std::uint64_t{0})); };
  if (name == "publish") return {publish_asked(cmd, cmd.value("confirm", false))};
  if (name == "publish_batch") {
    std::vector<AskedFrame> frames;
    for (const Json& message : cmd.value("messages", Json::array())) frames.push_back(publish_asked(message, true));
    return frames;
  }
  if (name == "ack")
    return {{static_cast<std::uint8_t>(OpCode::ack),
             {{"tag", tag(), "ack.fields"}, {"multiple", flag("multiple", false), "ack.fields"}}}};
  if (name == "nack") {
    return {{static_cast<std::uint8_t>(OpCode::nack),
             {{"tag", tag(), "ack.nack.fields"},
              {"multiple", flag("multiple", false), "ack.nack.fields"},
              {"requeue", flag("requeue", true), "ack.nack.fields"}}}};
  }
  if (name == "get") {
    return {
        {static_cast<std::uint8_t>(OpCode::get),
         {{"queue", Value(cmd.value("queue", "")), "get.fields"}, {"no_ack", flag("no_ack", false), "get.fields"}}}};
  }
  return {};
}

// ${name} replaced in every string of `j`.
Json substituted(const Json& j, const std::vector<std::pair<std::string, std::string>>& vars) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (const auto& [name, value] : vars) {
      const std::string token = "${" + name + "}";
      for (auto at = s.find(token); at != std::string::npos; at = s.find(token, at + value.size()))
        s.replace(at, token.size(), value);
    }
    return s;
  }
  if (j.is_object() || j.is_array()) {
    Json out = j;
    for (auto& item : out) item = substituted(item, vars);
    return out;
  }
  return j;
}

const OpInfo* find_op_by_name(std::string_view name) {
  for (const OpInfo& info : kOps) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string transports_text(const std::set<Transport>& transports) {
  std::string out;
  for (Transport t : transports) out += (out.empty() ? "" : ", ") + std::string(transport_name(t));
  return out;
}

std::string ms_since(Clock::time_point origin) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - origin).count());
}

// How many failing vectors a codec step's message explains; the rest are named only.
constexpr std::size_t kFailuresInFull = 5;

// A typed-JSON header read as op's message, as the project's codec reads it.
Result<Message, std::string> message_of(std::uint8_t op, const Json& header) {
  auto value = value_from_typed_json(header);
  if (!value) return std::string("not typed JSON: ") + value.error();
  if (!value->is<Map>()) return std::string("not a map");
  Bytes bytes;
  encode_map(*value->get_if<Map>(), bytes);
  auto message = decode_header(op, bytes);
  if (!message) return message.error().msg;
  return std::move(*message);
}

// The names of op's fields (its fields() list in messages.h), to tell them from keys the spec does not define.
std::vector<std::string> field_names(const Message& message) {
  std::vector<std::string> names;
  std::visit(
      [&names](const auto& m) {
        std::decay_t<decltype(m)>::fields(m,
                                          [&names](std::string_view name, const auto&) { names.emplace_back(name); });
      },
      message);
  return names;
}

// A typed-JSON tag ({"$float32": 1.5}, ...): compared whole, never key by key.
bool is_tag(const Json& j) { return j.is_object() && j.size() == 1 && j.begin().key().starts_with("$"); }

std::string shown(const Json& j) { return j.is_null() ? "absent" : j.dump(); }

// The first place where two typed-JSON values differ, as "path is X, expected Y" (null standing for absent), so
// that a failure inside a large map names the one entry; empty when they are equal.
std::string json_difference(const std::string& path, const Json& want, const Json& got) {
  if (want == got) return "";
  if (want.is_object() && got.is_object() && !is_tag(want) && !is_tag(got)) {
    for (const auto& [key, value] : want.items()) {
      if (std::string bad = json_difference(path + "/" + key, value, got.value(key, Json())); !bad.empty()) return bad;
    }
    for (const auto& [key, value] : got.items()) {
      if (!want.contains(key)) return path + "/" + key + " is " + value.dump() + ", expected absent";
    }
  }
  if (want.is_array() && got.is_array() && want.size() == got.size()) {
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::string bad = json_difference(path + "/" + std::to_string(i), want[i], got[i]); !bad.empty()) return bad;
    }
  }
  return path + " is " + shown(got) + ", expected " + shown(want);
}

// How the header a codec made (`actual`) differs from the vector's (`expected`), in the ways vectors/README.md
// does not allow: a field of the op must hold the same value, where absent and its zero value are the same (a
// typed decoder may drop zero fields, an encoder may leave them out); a key the op does not define may be absent
// (a typed decoder ignores it) but when present must be the vector's. Values compare as typed JSON: type and
// value, so a float32 is not a float64 nor 2.0 the int 2 (the spec: "Decoders must decode every vector to the
// listed header"); key order counts only inside $map. Empty when they agree.
std::string header_difference(std::uint8_t op, const Json& expected, const Json& actual) {
  auto want = message_of(op, expected);
  if (!want) return "the vector's header does not read as its op: " + want.error();
  auto got = message_of(op, actual);
  if (!got) return "the header " + actual.dump() + " does not read as its op: " + got.error();
  const Json want_fields = typed_json_from_value(Value(header_to_map(*want)));
  const Json got_fields = typed_json_from_value(Value(header_to_map(*got)));
  const std::vector<std::string> fields = field_names(*want);
  for (const std::string& field : fields) {
    if (std::string bad = json_difference(field, want_fields.value(field, Json()), got_fields.value(field, Json()));
        !bad.empty()) {
      return bad;
    }
  }
  for (const auto& [key, value] : actual.items()) {
    if (std::find(fields.begin(), fields.end(), key) != fields.end()) continue;
    if (!expected.contains(key)) return "the key " + key + " is not in the frame";
    if (std::string bad = json_difference(key, expected.at(key), value); !bad.empty()) return bad;
  }
  return "";
}

// A frame a codec reported (decoded, or decoded back from its encoding) against the vector's.
std::string frame_difference(const Json& vector, int op, const std::string& payload, const Json& header) {
  if (op != vector.at("op").get<int>()) return "op is " + std::to_string(op) + ", expected " + vector.at("op").dump();
  std::string want_payload = vector.at("payload").get<std::string>(), got_payload = payload;
  std::transform(got_payload.begin(), got_payload.end(), got_payload.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (got_payload != want_payload) return "payload is " + payload + ", expected " + want_payload;
  return header_difference(static_cast<std::uint8_t>(op), vector.at("header"), header);
}

// A check's verdict from a difference ("" when there is none, as json_difference and frame_difference say it).
StepOutcome fails_on(std::string difference) {
  return difference.empty() ? StepOutcome::ok() : StepOutcome::fail(std::move(difference));
}

// Whether a driver's reply says ok. A reply is only read through checks like this one: a driver may write any
// JSON, and nlohmann's value() throws on a field of another type than asked.
bool said_ok(const Json& reply) { return reply.value("ok", Json()) == true; }

// Exactly one frame in `bytes`, as a client reads a server's stream.
Result<RawFrame> one_stream_frame(const Bytes& bytes) {
  FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
  const auto step = decoder.feed(bytes);
  if (step.state == FrameDecoder::State::error) return decoder.error();
  if (step.state != FrameDecoder::State::frame) return Error{0, "the bytes end inside a frame"};
  if (step.consumed != bytes.size())
    return Error{0, std::to_string(bytes.size() - step.consumed) + " byte(s) after the frame"};
  return decoder.take_frame();
}

// One client case: its driver, its proxy, its steps.
class ClientCase {
 public:
  ClientCase(const CaseSpec& spec, const ClientRunOptions& options, std::string unique)
      : spec_(spec), options_(options), unique_(std::move(unique)), result_(result_for(spec)) {}
  CaseResult run();

 private:
  bool start();
  StepOutcome run_step(const Json& step);
  StepOutcome command(const Json& args);
  StepOutcome expect_event(const Json& args);
  StepOutcome server_send(const Json& args);
  StepOutcome expect_client_frame(const Json& args);
  StepOutcome idle(const Json& args);
  StepOutcome expect_client_end(const Json& args);
  StepOutcome broker_delete_queue(const Json& args);
  StepOutcome unexpected_errors();
  StepOutcome server_quirks(const Json& args);
  StepOutcome within_silence_window(const Json& window, Clock::time_point at);
  StepOutcome url_vectors(const Json& args);
  StepOutcome codec_vectors(const Json& args);
  static StepOutcome vector_failures(const std::vector<std::string>& failures, int checked,
                                     const std::string& file_name);
  StepOutcome decoded(const Json& vector, const std::string& framing, std::string& driver_gone);
  StepOutcome encoded(const Json& vector, const std::string& framing, std::string& driver_gone);
  StepOutcome refused(const Json& vector, bool exact_code, std::string& driver_gone);
  // One command and its reply, whatever it says; empty when the driver gave none (`why` says why).
  std::optional<Json> ask(Json command, std::string& why);
  // The reply to command `id`; events that come first are kept for expect_event. Empty: see `why`.
  std::optional<Json> reply_to(int id, std::string& why);
  std::optional<Json> next_line(Clock::time_point deadline, std::string& why);
  bool send(Json command);
  void note(const std::string& text);
  void run_steps(std::vector<StepRecord>& records);
  void finish(std::vector<StepRecord> records, bool started);
  double elapsed_ms() const;
  Clock::time_point deadline(const Json& args) const;

  const CaseSpec& spec_;
  const ClientRunOptions& options_;
  std::string unique_;
  CaseResult result_;
  Clock::time_point origin_ = Clock::now();
  Clock::time_point case_deadline_ = origin_ + std::chrono::milliseconds(spec_.timeout_ms);
  std::unique_ptr<ClientProxy> proxy_;
  std::unique_ptr<DriverProcess> driver_;
  // Events the driver reported that no step has matched yet, with when the harness read each.
  std::deque<std::pair<Json, Clock::time_point>> events_;
  int driver_protocol_ = 0;  // from the ready line
  int next_id_ = 1;
  std::vector<TranscriptLine> notes_;
  // server_send with delay_ms: sent from these threads while later steps run; declared last, so they are
  // joined before the proxy they write through is destroyed.
  std::vector<std::jthread> delayed_sends_;
};

void ClientCase::note(const std::string& text) {
  TranscriptLine line;
  line.at_ms = elapsed_ms();
  line.connection = "driver";
  line.direction = "note";
  line.header_json = text;
  notes_.push_back(std::move(line));
}

bool ClientCase::send(Json command) {
  note("to the driver: " + command.dump());
  return driver_->send(command);
}

std::optional<Json> ClientCase::next_line(Clock::time_point deadline, std::string& why) {
  auto line = driver_->next_line(std::min(deadline, case_deadline_));
  if (!line.json) {
    why = line.error;
    return std::nullopt;
  }
  note("from the driver: " + line.json->dump());
  return line.json;
}

Clock::time_point ClientCase::deadline(const Json& args) const {
  if (!args.contains("timeout_ms")) return case_deadline_;
  return std::min(case_deadline_, Clock::now() + std::chrono::milliseconds(args.at("timeout_ms").get<int>()));
}

// Who connects to which vhost: `${url}` is guest on /, a connect's `url_parts` says otherwise.
struct UrlParts {
  std::string user = "guest";
  std::string pass = "guest";
  std::string vhost = "/";
};

// The proxy's URL for the run's transport, as the spec's Transports section writes one: the vhost as the path
// (fire, fires) or the vhost query parameter (ws, wss), / being the empty path or no parameter.
std::string proxy_url(Transport transport, std::uint16_t port, const UrlParts& parts = {}) {
  const std::string vhost = parts.vhost == "/" ? std::string() : percent_encode(parts.vhost);
  const std::string path = is_websocket(transport) ? "/fire" + (vhost.empty() ? "" : "?vhost=" + vhost) : "/" + vhost;
  return std::string(transport_name(transport)) + "://" + percent_encode(parts.user) + ":" +
         percent_encode(parts.pass) + "@127.0.0.1:" + std::to_string(port) + path;
}

// The driver protocol a case's commands need: 2 when it sends publish_batch.
int protocol_needed(const CaseSpec& spec) {
  for (const Json& step : spec.steps) {
    const Json* send = step.contains("command") ? &step.at("command").at("send") : nullptr;
    if (send != nullptr && send->value("cmd", "") == "publish_batch") return 2;
  }
  return 1;
}

// The driver starts, says it is ready and which protocol version it speaks; the proxy listens.
bool ClientCase::start() {
  auto proxy = ClientProxy::start(options_.broker_host, options_.broker_port, {options_.transport, options_.tls}, {},
                                  origin_);
  if (!proxy) {
    result_.verdict = Verdict::error;
    result_.message = proxy.error();
    return false;
  }
  proxy_ = std::move(*proxy);
  auto driver = DriverProcess::start(options_.driver);
  if (!driver) {
    result_.verdict = Verdict::error;
    result_.message = "cannot start the driver: " + driver.error();
    return false;
  }
  driver_ = std::move(*driver);
  std::string why;
  auto ready = next_line(Clock::now() + kDriverStartTime, why);
  if (!ready) {
    result_.verdict = Verdict::fail;
    result_.message = "the driver did not say it was ready: " + why;
    return false;
  }
  const Json protocol = ready->value("protocol", Json());
  driver_protocol_ = protocol.is_number_integer() ? protocol.get<int>() : 0;
  if (ready->value("event", "") != "ready" || driver_protocol_ < kOldestDriverProtocolVersion ||
      driver_protocol_ > kDriverProtocolVersion) {
    result_.verdict = Verdict::fail;
    result_.message = "the driver's first line must be {\"event\": \"ready\", \"protocol\": " +
                      std::to_string(kOldestDriverProtocolVersion) + " to " + std::to_string(kDriverProtocolVersion) +
                      "}, got " + ready->dump();
    return false;
  }
  if (const int needed = protocol_needed(spec_); driver_protocol_ < needed) {
    result_.verdict = Verdict::skipped;
    result_.message = "needs driver protocol " + std::to_string(needed) + " (publish_batch); the driver speaks " +
                      std::to_string(driver_protocol_);
    return false;
  }
  // A run over a transport the driver does not declare (--transport named it) tests nothing of the client.
  const Json declared = ready->value("transports", Json::array({"fire"}));
  if (declared.is_array() && std::find(declared.begin(), declared.end(), result_.transport) == declared.end()) {
    result_.verdict = Verdict::skipped;
    result_.message = "the driver does not declare " + result_.transport +
                      " in its ready line (\"transports\": " + declared.dump() + ")";
    return false;
  }
  return true;
}

std::optional<Json> ClientCase::reply_to(int id, std::string& why) {
  while (auto line = next_line(case_deadline_, why)) {
    if (line->contains("event")) {
      events_.emplace_back(std::move(*line), Clock::now());
      continue;
    }
    if (line->value("id", -1) == id) return line;
    why = "the driver answered a command it was not sent: " + line->dump();
    return std::nullopt;
  }
  return std::nullopt;
}

// {"send": {command}, "expect": {pattern of the reply}}: the reply must have what expect has; without expect,
// {"ok": true}.
StepOutcome ClientCase::command(const Json& args) {
  const int id = next_id_++;
  Json cmd = args.at("send");
  cmd["id"] = id;
  // {"cmd": "connect", "url_parts": {"user", "pass", "vhost"}}: the proxy's URL with these, for the transport.
  if (cmd.value("cmd", "") == "connect" && cmd.contains("url_parts")) {
    const Json parts = cmd.at("url_parts");
    const UrlParts asked{parts.value("user", "guest"), parts.value("pass", "guest"), parts.value("vhost", "/")};
    cmd["url"] = proxy_url(options_.transport, proxy_->port(), asked);
    cmd.erase("url_parts");
  }
  // Over TLS the proxy's certificate is the harness's own: the driver is told which CA to trust.
  if (cmd.value("cmd", "") == "connect" && uses_tls(options_.transport) && !cmd.contains("ca_file")) {
    cmd["ca_file"] = options_.ca_file;
  }
  // The application asks for a normal shutdown: the client's close must say 200 (client_rules.h).
  if (cmd.value("cmd", "") == "close") proxy_->application_closes();
  // What the application asked for must reach the wire as asked (client_rules.h, application_sends).
  for (AskedFrame& asked : frames_asked_by(cmd)) {
    asked.command = id;
    proxy_->application_sends(std::move(asked));
  }
  if (cmd.value("cmd", "") == "connect") {
    std::vector<AskedFrame> hello = hello_asked_by(cmd);
    for (AskedFrame& asked : hello) asked.command = id;
    proxy_->application_connects(std::move(hello));
  }
  if (!send(cmd)) return StepOutcome::fail("the driver no longer reads its stdin");
  std::string why;
  auto reply = reply_to(id, why);
  if (!reply) return StepOutcome::fail("no reply to " + cmd.value("cmd", "?") + ": " + why);
  if (!said_ok(*reply)) proxy_->application_withdraws(id);
  const Json expected = args.value("expect", Json{{"ok", true}});
  if (std::string bad = subset_mismatch(expected, *reply); !bad.empty()) {
    return StepOutcome::fail(cmd.value("cmd", "?") + ": the reply " + reply->dump() + " does not match " +
                             expected.dump() + ": " + bad);
  }
  return StepOutcome::ok();
}

// {"match": {pattern}, "timeout_ms"?, "after_server_silent_ms"?: {"min", "max"}}: an event the driver reports,
// earlier or within the time; with after_server_silent_ms, it must come that long after the last byte the
// client got before the server went silent (a dead server declared neither early nor late).
StepOutcome ClientCase::expect_event(const Json& args) {
  const Json& pattern = args.at("match");
  const auto matches = [&](const Json& e) { return subset_mismatch(pattern, e).empty(); };
  const auto timed = [&](Clock::time_point at) {
    return args.contains("after_server_silent_ms") ? within_silence_window(args.at("after_server_silent_ms"), at)
                                                   : StepOutcome::ok();
  };
  if (auto it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return matches(e.first); });
      it != events_.end()) {
    StepOutcome late_or_early = timed(it->second);
    events_.erase(it);
    return late_or_early;
  }
  std::string why;
  const auto until = deadline(args);
  while (auto line = next_line(until, why)) {
    if (line->contains("event") && matches(*line)) return timed(Clock::now());
    if (line->contains("event")) events_.emplace_back(std::move(*line), Clock::now());
    else return StepOutcome::fail("the driver wrote a reply no command awaits: " + line->dump());
  }
  return StepOutcome::fail("no event " + pattern.dump() + " from the driver: " + why);
}

StepOutcome ClientCase::within_silence_window(const Json& window, Clock::time_point at) {
  const auto since = proxy_->silent_since();
  if (!since) return StepOutcome::fail("after_server_silent_ms: the server is not silent (server_quirks silent first)");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - *since).count();
  const auto min = window.value("min", 0), max = window.value("max", 0);
  if (ms >= min && ms <= max) {
    note("the event came " + std::to_string(ms) + " ms into the server's silence");
    return StepOutcome::ok();
  }
  return StepOutcome::fail("the event came " + std::to_string(ms) +
                           " ms after the last byte the client got from the server, outside " + std::to_string(min) +
                           " to " + std::to_string(max) + " ms");
}

// {"op": "ping"|"close"|..., "header": {typed JSON}, "delay_ms"?, "end_after_ms"?}: the proxy sends it to the
// client as the server; with delay_ms, that much later while the next steps run (a flow resume while the
// driver's publish waits for it); with end_after_ms, a fatal error's connection is ended that much later, so
// that a client which ignores `fatal` is seen still connected.
StepOutcome ClientCase::server_send(const Json& args) {
  // "op_code" instead of "op": an op version 1 does not define (a later version's, such as 0x39 commit_offset).
  const std::string name = args.contains("op_code") ? "op " + std::to_string(args.at("op_code").get<int>())
                                                    : args.at("op").get<std::string>();
  const OpInfo* info = args.contains("op_code") ? nullptr : find_op_by_name(name);
  if (info == nullptr && !args.contains("op_code")) return StepOutcome::fail("server_send: unknown op " + name);
  auto header = value_from_typed_json(args.value("header", Json::object()));
  if (!header || !header->is<Map>()) return StepOutcome::fail("server_send: the header must be a typed-JSON map");
  const auto op = info != nullptr ? static_cast<std::uint8_t>(info->code) : args.at("op_code").get<std::uint8_t>();
  if (const int delay_ms = args.value("delay_ms", 0); delay_ms > 0) {
    // Not after the case's own deadline, and not at all once the case is over (finish() stops and joins it).
    const auto at = std::min(Clock::now() + std::chrono::milliseconds(delay_ms), case_deadline_);
    delayed_sends_.emplace_back([this, op, map = *header->get_if<Map>(), at](std::stop_token stop) {
      std::mutex mutex;
      std::condition_variable_any never_notified;
      std::unique_lock lock(mutex);
      never_notified.wait_until(lock, stop, at, [] { return false; });
      if (!stop.stop_requested()) proxy_->send_to_client(op, map);  // a client already gone: later steps see it
    });
    return StepOutcome::ok();
  }
  if (!proxy_->send_to_client(op, *header->get_if<Map>(), std::chrono::milliseconds(args.value("end_after_ms", 0)))) {
    return StepOutcome::fail("server_send: the client has no connection to send " + name + " on");
  }
  return StepOutcome::ok();
}

// {"op": "pong", "timeout_ms"?}: the client sends a frame of op (since the last server_send).
StepOutcome ClientCase::expect_client_frame(const Json& args) {
  const std::string name = args.at("op").get<std::string>();
  const OpInfo* info = find_op_by_name(name);
  if (info == nullptr) return StepOutcome::fail("expect_client_frame: unknown op " + name);
  if (!proxy_->wait_for_client(static_cast<std::uint8_t>(info->code), deadline(args))) {
    return StepOutcome::fail("the client sent no " + name + " in time");
  }
  return StepOutcome::ok();
}

// {"ms": N}: the harness sends the driver nothing for N ms (within the case's time) while the proxy watches the
// client: what an idle application's connection does on its own (heartbeats).
StepOutcome ClientCase::idle(const Json& args) {
  const auto until = std::min(case_deadline_, Clock::now() + std::chrono::milliseconds(args.at("ms").get<int>()));
  std::this_thread::sleep_until(until);
  return StepOutcome::ok();
}

// {"timeout_ms"?}: the client ends its connection (closes its socket) on its own within the time: "The
// receiver replies with its own close and closes the socket."
StepOutcome ClientCase::expect_client_end(const Json& args) {
  if (!proxy_->wait_for_client_end(deadline(args)))
    return StepOutcome::fail("the client did not close its socket in time");
  return StepOutcome::ok();
}

// {"queue": name, "timeout_ms"?}: the queue is deleted at the broker by another application (the harness, over
// a connection of its own, as guest on /), so that the broker itself ends the client's subscriptions to it:
// "cancelled {"sub", "code", "msg"}. The server ended a subscription, for example because its queue was
// deleted." What the client does next is judged by the steps that follow.
StepOutcome ClientCase::broker_delete_queue(const Json& args) {
  const std::string queue = args.at("queue").get<std::string>();
  const Clock::time_point until = deadline(args);
  auto session = open_session(Endpoint{options_.broker_host, options_.broker_port, "guest", "guest", "/"},
                              "firemq-conform (broker_delete_queue)", until);
  if (!session)
    return StepOutcome::fail("broker_delete_queue: the harness's own connection to the broker failed: " +
                             session.error());
  WireConnection& wire = **session;
  // One request and its reply: the reply frame, or why there is none.
  const auto ask_broker = [&](const Bytes& frame, const std::string& what) -> Result<RawFrame, std::string> {
    if (!wire.send(frame, until)) return std::string("broker_delete_queue: the broker closed the harness's connection");
    const WireEvent event = wire.receive(until);
    const auto* reply = std::get_if<FrameEvent>(&event);
    if (reply == nullptr) return "broker_delete_queue: the broker did not answer the " + what + " of " + queue;
    if (reply->frame.op() != static_cast<std::uint8_t>(OpCode::ok)) {
      return "broker_delete_queue: the broker refused the " + what + " of " + queue + " (op " +
             std::to_string(reply->frame.op()) + ")";
    }
    return reply->frame;
  };
  // The queue must be there with the client's consumer on it: a delete of a missing queue is ok on the wire too,
  // and would let the case pass this step with no cancelled sent.
  op::DeclareQueue passive;
  passive.rid = 1;
  passive.name = queue;
  passive.passive = true;
  auto found = ask_broker(encode_frame(passive), "passive declare");
  if (!found) return StepOutcome::fail(found.error());
  const auto declared = decode_frame(*found);
  const auto* ok = declared ? std::get_if<op::Ok>(&*declared) : nullptr;
  if (ok == nullptr || ok->consumers == 0) {
    return StepOutcome::fail("broker_delete_queue: queue " + queue +
                             " has no consumer at the broker, so its delete would send no cancelled");
  }
  op::DeleteQueue request;
  request.rid = 2;
  request.name = queue;
  if (auto deleted = ask_broker(encode_frame(request), "delete"); !deleted) return StepOutcome::fail(deleted.error());
  note("the harness deleted queue " + queue + " at the broker");
  wire.disconnect();
  return StepOutcome::ok();
}

// After the last step: an `error` event that no step expected fails the case. It is the SDK telling the
// application that something went wrong; a case that provokes one says so with expect_event.
StepOutcome ClientCase::unexpected_errors() {
  std::string why;
  while (auto line = next_line(Clock::now(), why)) {  // what the driver already wrote, without waiting
    if (line->contains("event")) events_.emplace_back(std::move(*line), Clock::now());
  }
  for (const auto& [event, at] : events_) {
    if (event.value("event", "") == "error")
      return StepOutcome::fail("the driver reported an error no step expected: " + event.dump());
  }
  return StepOutcome::ok();
}

// How the server behaves from now on (client_proxy.h, ServerQuirks); every quirk not given is off.
StepOutcome ClientCase::server_quirks(const Json& args) {
  proxy_->set_quirks({args.value("single_bytes", false), args.value("unknown_header_keys", false),
                      args.value("max_frame", std::uint64_t{0}), args.value("no_pings", false),
                      args.value("silent", false), args.value("coalesce_confirms", false)});
  return StepOutcome::ok();
}

// {"file": "urls.json", "valid": true|false}: every valid vector parses to its expect, every invalid one is
// refused. One command per vector; every vector is tried, and the failure lists each one that failed.
StepOutcome ClientCase::url_vectors(const Json& args) {
  const std::string file_name = args.at("file").get<std::string>();
  std::ifstream in(options_.vectors_dir / file_name);
  const Json file = Json::parse(in, nullptr, false);
  if (file.is_discarded()) return StepOutcome::fail("cannot read the vector file " + file_name);
  const bool valid = args.at("valid").get<bool>();
  std::vector<std::string> failures;
  int checked = 0;
  for (const Json& vector : file.at("vectors")) {
    if (vector.contains("expect") != valid) continue;
    Json step = {{"send", {{"cmd", "parse_url"}, {"url", vector.at("url")}}}};
    step["expect"] = valid ? Json{{"ok", true}, {"url", vector.at("expect")}} : Json{{"ok", false}};
    if (StepOutcome parsed = command(step); !parsed.is_ok())
      failures.push_back(vector.at("name").get<std::string>() + ": " + parsed.message);
    ++checked;
  }
  note(std::to_string(checked) + " URL vectors checked, " + std::to_string(failures.size()) + " failed");
  if (checked == 0) return StepOutcome::fail("no vector checked");
  return vector_failures(failures, checked, file_name);
}

// "" when none failed; otherwise how many, each named, the first kFailuresInFull with their reason.
StepOutcome ClientCase::vector_failures(const std::vector<std::string>& failures, int checked,
                                        const std::string& file_name) {
  if (failures.empty()) return StepOutcome::ok();
  std::string message = std::to_string(failures.size()) + " of " + std::to_string(checked) + " vectors of " +
                        file_name + " failed";
  for (std::size_t i = 0; i < failures.size(); ++i) {
    message += (i == 0 ? ": " : "; ") +
               (i < kFailuresInFull ? failures[i] : failures[i].substr(0, failures[i].find(':')));
  }
  return StepOutcome::fail(message);
}

std::optional<Json> ClientCase::ask(Json cmd, std::string& why) {
  const int id = next_id_++;
  cmd["id"] = id;
  if (!send(cmd)) {
    why = "the driver no longer reads its stdin";
    return std::nullopt;
  }
  auto reply = reply_to(id, why);
  if (!reply) why = "no reply to " + cmd.value("cmd", "?") + ": " + why;
  return reply;
}

// {"file", "direction": "decode"|"encode", "framing": "stream"|"message", "basis", "exact_code"}: every vector of
// the file through the driver's codec (docs/client-certification.md, "Codec cases"). Valid files (frames.json,
// encodings.json): decode_frame must give the vector's op, header and payload, or encode_frame bytes that the
// project's decoder reads back to them. invalid.json (the vectors of `basis`, preamble ones aside: a client
// never reads a preamble): decode_frame must refuse, with the listed code when exact_code. Every vector is
// tried; the failure lists each one that failed.
StepOutcome ClientCase::codec_vectors(const Json& args) {
  const std::string file_name = args.at("file").get<std::string>();
  std::ifstream in(options_.vectors_dir / file_name);
  const Json file = Json::parse(in, nullptr, false);
  if (file.is_discarded()) return StepOutcome::fail("cannot read the vector file " + file_name);
  const bool invalid = args.contains("basis");
  const std::string framing = args.value("framing", "stream");
  const bool encode = args.value("direction", "decode") == "encode";
  std::vector<std::string> failures;
  int checked = 0;
  for (const Json& vector : file.at("vectors")) {
    if (invalid && (vector.value("includes_preamble", false) || vector.value("basis", "") != args.at("basis")))
      continue;
    std::string driver_gone;
    const StepOutcome checked_one = invalid  ? refused(vector, args.value("exact_code", true), driver_gone)
                                    : encode ? encoded(vector, framing, driver_gone)
                                             : decoded(vector, framing, driver_gone);
    if (!driver_gone.empty()) return StepOutcome::fail(vector.at("name").get<std::string>() + ": " + driver_gone);
    if (!checked_one.is_ok()) failures.push_back(vector.at("name").get<std::string>() + ": " + checked_one.message);
    ++checked;
  }
  note(std::to_string(checked) + " vectors of " + file_name + " checked, " + std::to_string(failures.size()) +
       " failed");
  if (checked == 0) return StepOutcome::fail("no vector checked");
  return vector_failures(failures, checked, file_name);
}

// decode_frame of a valid vector: one frame, the vector's op, header and payload.
StepOutcome ClientCase::decoded(const Json& vector, const std::string& framing, std::string& driver_gone) {
  const std::string hex = vector.at("frame").get<std::string>();
  auto reply = ask({{"cmd", "decode_frame"},
                    {"bytes", framing == "message" ? hex.substr(2 * kLenSize) : hex},
                    {"framing", framing},
                    {"max_frame", kDefaultMaxFrame}},
                   driver_gone);
  if (!reply) return StepOutcome::fail(driver_gone);
  if (!said_ok(*reply)) return StepOutcome::fail("refused: " + reply->value("error", Json()).dump());
  const Json frames = reply->value("frames", Json());
  if (!frames.is_array() || frames.size() != 1) return StepOutcome::fail("expected one frame, got " + frames.dump());
  const Json& frame = frames[0];
  if (!frame.is_object() || !frame.value("op", Json()).is_number_integer() ||
      !frame.value("payload", Json()).is_string()) {
    return StepOutcome::fail("the frame is not {op, header, payload}: " + frame.dump());
  }
  return fails_on(frame_difference(vector, frame.at("op").get<int>(), frame.at("payload").get<std::string>(),
                                   frame.value("header", Json())));
}

// encode_frame of a valid vector's op, header and payload: the project's decoder must read the bytes back to
// them ("Encoders do not have to reproduce the bytes exactly").
StepOutcome ClientCase::encoded(const Json& vector, const std::string& framing, std::string& driver_gone) {
  auto reply = ask({{"cmd", "encode_frame"},
                    {"op", vector.at("op")},
                    {"header", vector.at("header")},
                    {"payload", vector.at("payload")},
                    {"framing", framing}},
                   driver_gone);
  if (!reply) return StepOutcome::fail(driver_gone);
  if (!said_ok(*reply)) return StepOutcome::fail("refused: " + reply->value("error", Json()).dump());
  const Json hex = reply->value("bytes", Json());
  const auto bytes = hex.is_string() ? from_hex(hex.get<std::string>()) : std::nullopt;
  if (!bytes) return StepOutcome::fail("bytes is not hex: " + hex.dump());
  auto raw = framing == "message" ? decode_message_frame(*bytes, kDefaultMaxFrame) : one_stream_frame(*bytes);
  if (!raw) return StepOutcome::fail("the bytes " + to_hex(*bytes) + " are no frame: " + raw.error().msg);
  if (auto message = decode_frame(*raw); !message)
    return StepOutcome::fail("the header of " + to_hex(*bytes) + " does not decode: " + message.error().msg);
  auto header = raw->header().empty() ? Result<Value>(Value(Map{})) : decode_value(raw->header());
  if (!header) return StepOutcome::fail("the header does not decode: " + header.error().msg);
  return fails_on(frame_difference(vector, raw->op(), to_hex(raw->payload()), typed_json_from_value(*header)));
}

// decode_frame of an invalid vector: refused, with its code (and its fatality, if the driver says).
StepOutcome ClientCase::refused(const Json& vector, bool exact_code, std::string& driver_gone) {
  auto reply = ask({{"cmd", "decode_frame"},
                    {"bytes", vector.at("input")},
                    {"framing", vector.at("framing")},
                    {"max_frame", vector.at("max_frame")},
                    {"end_of_stream", vector.at("end_of_stream")}},
                   driver_gone);
  if (!reply) return StepOutcome::fail(driver_gone);
  if (said_ok(*reply)) return StepOutcome::fail("not refused: decoded to " + reply->value("frames", Json()).dump());
  if (!exact_code) return StepOutcome::ok();
  const Json error = reply->value("error", Json());
  if (!error.is_object()) return StepOutcome::fail("refused without an error object: " + reply->dump());
  if (error.value("code", Json()) != vector.at("code")) {
    return StepOutcome::fail("refused with " +
                             (error.contains("code") ? "code " + error.at("code").dump() : std::string("no code")) +
                             ", expected " + vector.at("code").dump());
  }
  if (error.contains("fatal") && error.at("fatal") != vector.at("fatal")) {
    return StepOutcome::fail("refused with fatal " + error.at("fatal").dump() + ", expected " +
                             vector.at("fatal").dump());
  }
  return StepOutcome::ok();
}

StepOutcome ClientCase::run_step(const Json& step) {
  const std::string verb = step.begin().key();
  const Json args = substituted(step.begin().value(),
                                {{"url", proxy_url(options_.transport, proxy_->port())}, {"unique", unique_}});
  if (verb == "command") return command(args);
  if (verb == "expect_event") return expect_event(args);
  if (verb == "server_send") return server_send(args);
  if (verb == "expect_client_frame") return expect_client_frame(args);
  if (verb == "server_quirks") return server_quirks(args);
  if (verb == "idle") return idle(args);
  if (verb == "expect_client_end") return expect_client_end(args);
  if (verb == "broker_delete_queue") return broker_delete_queue(args);
  if (verb == "url_vectors") return url_vectors(args);
  if (verb == "codec_vectors") return codec_vectors(args);
  return StepOutcome::fail("unknown verb " + verb);  // load_cases refuses these; kept for a case built by hand
}

// The steps, in order, up to the first that fails; then the driver's unexpected errors, when none did.
void ClientCase::run_steps(std::vector<StepRecord>& records) {
  for (std::size_t i = 0; i < spec_.steps.size(); ++i) {
    StepOutcome outcome = run_step(spec_.steps[i]);
    const bool ok = outcome.is_ok();
    if (!ok)
      outcome.message = "step " + std::to_string(i + 1) + ": " + outcome.message + " (after " + ms_since(origin_) +
                        " ms)";
    records.push_back({static_cast<int>(i), std::move(outcome), elapsed_ms()});
    if (!ok) return;
  }
  StepOutcome errors = unexpected_errors();
  if (!errors.is_ok()) errors.message += " (after " + ms_since(origin_) + " ms)";
  records.push_back({-1, std::move(errors), elapsed_ms()});
}

// The driver is told the commands are over and must exit; then the proxy judges what is still owed, and the
// verdict follows from the steps and what the proxy's monitor saw (model/verdict.h), when the case started.
void ClientCase::finish(std::vector<StepRecord> records, bool started) {
  std::string err;
  if (driver_) {
    const std::string how = driver_->finish(Clock::now() + kDriverExitTime);
    note("the driver ended: " + how);
    err = driver_->stderr_text();
    if (!err.empty()) note("the driver's stderr:\n" + err);
    if (!driver_->exited_cleanly()) {
      records.push_back({-1, StepOutcome::fail("the driver " + how + " once its stdin closed"), elapsed_ms()});
    }
  }
  delayed_sends_.clear();  // joins them: nothing more is sent once the case is over
  if (!proxy_) return;
  proxy_->stop();
  result_.violations = proxy_->violations();
  result_.transcript = proxy_->transcript();
  result_.transcript.insert(result_.transcript.end(), notes_.begin(), notes_.end());
  std::stable_sort(result_.transcript.begin(), result_.transcript.end(),
                   [](const TranscriptLine& a, const TranscriptLine& b) { return a.at_ms < b.at_ms; });
  if (started) record_verdict(decide_verdict(records, result_.violations), spec_.steps, result_);  // else start()'s
  if (result_.verdict == Verdict::fail && !err.empty()) {
    result_.message += "; its stderr ends: " +
                       err.substr(err.size() > kStderrInMessage ? err.size() - kStderrInMessage : 0);
  }
}

double ClientCase::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(Clock::now() - origin_).count();
}

CaseResult ClientCase::run() {
  result_.transport = std::string(transport_name(options_.transport));
  if (!spec_.transports.count(options_.transport)) {
    result_.verdict = Verdict::skipped;
    result_.message = "runs over " + transports_text(spec_.transports) + " only; this run is over " + result_.transport;
    return result_;
  }
  const bool started = start();
  std::vector<StepRecord> records;
  if (started) run_steps(records);
  finish(std::move(records), started);
  result_.duration_ms = elapsed_ms();
  return result_;
}

}  // namespace

const std::vector<std::string>& client_step_verbs() {
  static const std::vector<std::string> verbs = {
      "command",     "expect_event", "server_send",   "expect_client_frame", "server_quirks",
      "url_vectors", "idle",         "codec_vectors", "expect_client_end",   "broker_delete_queue"};
  return verbs;
}

std::vector<MonitorRule> rules_judging_clients() {
  std::vector<MonitorRule> rules;
  for (const MonitorRule& r : monitor_rules()) {
    if (!r.server_only) rules.push_back(r);
  }
  rules.insert(rules.end(), client_rules().begin(), client_rules().end());
  return rules;
}

std::string subset_mismatch(const Json& pattern, const Json& actual, const std::string& path) {
  const std::string where = path.empty() ? "the top" : path;
  if (pattern.is_string() && pattern.get<std::string>() == "$any") return "";
  if (pattern.is_object()) {
    if (!actual.is_object()) return where + " is " + actual.dump() + ", not an object";
    for (const auto& [key, value] : pattern.items()) {
      if (!actual.contains(key)) return path + "/" + key + " is missing";
      if (std::string bad = subset_mismatch(value, actual.at(key), path + "/" + key); !bad.empty()) return bad;
    }
    return "";
  }
  if (pattern.is_array()) {
    if (!actual.is_array() || actual.size() != pattern.size())
      return where + " is " + actual.dump() + ", expected " + pattern.dump();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (std::string bad = subset_mismatch(pattern[i], actual[i], path + "/" + std::to_string(i)); !bad.empty())
        return bad;
    }
    return "";
  }
  if (pattern.is_number() && actual.is_number()) {
    return pattern.get<double>() == actual.get<double>()
               ? ""
               : where + " is " + actual.dump() + ", expected " + pattern.dump();
  }
  return pattern == actual ? "" : where + " is " + actual.dump() + ", expected " + pattern.dump();
}

std::optional<std::set<Transport>> driver_transports(const std::vector<std::string>& driver) {
  auto process = DriverProcess::start(driver);
  if (!process) return std::nullopt;
  const auto ready = (*process)->next_line(Clock::now() + kDriverStartTime);
  (*process)->finish(Clock::now() + kDriverExitTime);
  if (!ready.json || ready.json->value("event", "") != "ready") return std::nullopt;
  const Json declared = ready.json->value("transports", Json::array({"fire"}));
  if (!declared.is_array()) return std::nullopt;
  std::set<Transport> transports;
  for (const Json& name : declared) {
    const auto t = name.is_string() ? transport_from_name(name.get<std::string>()) : std::nullopt;
    if (!t) return std::nullopt;  // the schema's four names only: the cases' ready check says the rest
    transports.insert(*t);
  }
  return transports;
}

std::vector<CaseResult> run_client_cases(const std::vector<const CaseSpec*>& cases, const ClientRunOptions& options) {
  std::vector<CaseResult> results(cases.size());
  std::atomic<std::size_t> next{0};
  std::mutex progress;
  std::size_t done = 0;
  auto worker = [&] {
    for (std::size_t i = next++; i < cases.size(); i = next++) {
      CaseResult r = ClientCase(*cases[i], options, "conform-client-" + options.run_id + "-" + std::to_string(i)).run();
      apply_known_failures(r, options.known_failures);
      results[i] = std::move(r);
      std::lock_guard lock(progress);
      ++done;
      if (options.on_case_done) options.on_case_done(results[i], done, cases.size());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.jobs); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace firemq::conform
