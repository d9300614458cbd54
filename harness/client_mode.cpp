#include "harness/client_mode.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "harness/client_proxy.h"
#include "harness/client_rules.h"
#include "harness/driver_process.h"
#include "harness/runner.h"
#include "protocol/ops.h"
#include "protocol/typed_json.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;

// How long a driver has to say it is ready, and to exit once its stdin is closed.
constexpr std::chrono::seconds kDriverStartTime{10};
constexpr std::chrono::seconds kDriverExitTime{3};
// The longest stderr tail a failure message quotes (the transcript keeps the whole of it).
constexpr std::size_t kStderrInMessage = 600;

// ${name} replaced in every string of `j`.
Json substituted(const Json& j, const std::vector<std::pair<std::string, std::string>>& vars) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (const auto& [name, value] : vars) {
      const std::string token = "${" + name + "}";
      for (auto at = s.find(token); at != std::string::npos; at = s.find(token, at + value.size())) s.replace(at, token.size(), value);
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

// One client case: its driver, its proxy, its steps.
class ClientCase {
 public:
  ClientCase(const CaseSpec& spec, const ClientRunOptions& options, std::string unique)
      : spec_(spec), options_(options), unique_(std::move(unique)), result_(result_for(spec)) {}
  CaseResult run();

 private:
  bool start();
  std::string run_step(const Json& step);
  std::string command(const Json& args);
  std::string expect_event(const Json& args);
  std::string server_send(const Json& args);
  std::string expect_client_frame(const Json& args);
  std::string url_vectors(const Json& args);
  // The reply to command `id`; events that come first are kept for expect_event. Empty: see `why`.
  std::optional<Json> reply_to(int id, std::string& why);
  std::optional<Json> next_line(Clock::time_point deadline, std::string& why);
  bool send(Json command);
  void note(const std::string& text);
  void finish();
  Clock::time_point deadline(const Json& args) const;

  const CaseSpec& spec_;
  const ClientRunOptions& options_;
  std::string unique_;
  CaseResult result_;
  Clock::time_point origin_ = Clock::now();
  Clock::time_point case_deadline_ = origin_ + std::chrono::milliseconds(spec_.timeout_ms);
  std::unique_ptr<ClientProxy> proxy_;
  std::unique_ptr<DriverProcess> driver_;
  std::deque<Json> events_;  // events the driver reported that no step has matched yet
  int next_id_ = 1;
  std::vector<TranscriptLine> notes_;
  // server_send with delay_ms: sent from these threads while later steps run; declared last, so they are
  // joined before the proxy they write through is destroyed.
  std::vector<std::jthread> delayed_sends_;
};

void ClientCase::note(const std::string& text) {
  TranscriptLine line;
  line.at_ms = std::chrono::duration<double, std::milli>(Clock::now() - origin_).count();
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

// `${url}`: the proxy's URL for the run's transport, user guest, vhost / (on WebSocket: no ?vhost=, so /).
std::string proxy_url(Transport transport, std::uint16_t port) {
  return std::string(transport_name(transport)) + "://guest:guest@127.0.0.1:" + std::to_string(port) +
         (is_websocket(transport) ? "/fire" : "/");
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
  if (ready->value("event", "") != "ready" || ready->value("protocol", 0) != kDriverProtocolVersion) {
    result_.verdict = Verdict::fail;
    result_.message = "the driver's first line must be {\"event\": \"ready\", \"protocol\": " +
                      std::to_string(kDriverProtocolVersion) + "}, got " + ready->dump();
    return false;
  }
  // A run over a transport the driver does not declare (--transport named it) tests nothing of the client.
  const Json declared = ready->value("transports", Json::array({"fire"}));
  if (declared.is_array() && std::find(declared.begin(), declared.end(), result_.transport) == declared.end()) {
    result_.verdict = Verdict::skipped;
    result_.message = "the driver does not declare " + result_.transport + " in its ready line (\"transports\": " +
                      declared.dump() + ")";
    return false;
  }
  return true;
}

std::optional<Json> ClientCase::reply_to(int id, std::string& why) {
  while (auto line = next_line(case_deadline_, why)) {
    if (line->contains("event")) {
      events_.push_back(std::move(*line));
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
std::string ClientCase::command(const Json& args) {
  const int id = next_id_++;
  Json cmd = args.at("send");
  cmd["id"] = id;
  // Over TLS the proxy's certificate is the harness's own: the driver is told which CA to trust.
  if (cmd.value("cmd", "") == "connect" && uses_tls(options_.transport) && !cmd.contains("ca_file")) {
    cmd["ca_file"] = options_.ca_file;
  }
  if (!send(cmd)) return "the driver no longer reads its stdin";
  std::string why;
  auto reply = reply_to(id, why);
  if (!reply) return "no reply to " + cmd.value("cmd", "?") + ": " + why;
  const Json expected = args.value("expect", Json{{"ok", true}});
  if (std::string bad = subset_mismatch(expected, *reply); !bad.empty()) {
    return cmd.value("cmd", "?") + ": the reply " + reply->dump() + " does not match " + expected.dump() + ": " + bad;
  }
  return "";
}

// {"match": {pattern}, "timeout_ms"?}: an event the driver reports, earlier or within the time.
std::string ClientCase::expect_event(const Json& args) {
  const Json& pattern = args.at("match");
  const auto matches = [&](const Json& e) { return subset_mismatch(pattern, e).empty(); };
  if (auto it = std::find_if(events_.begin(), events_.end(), matches); it != events_.end()) {
    events_.erase(it);
    return "";
  }
  std::string why;
  const auto until = deadline(args);
  while (auto line = next_line(until, why)) {
    if (line->contains("event") && matches(*line)) return "";
    if (line->contains("event")) events_.push_back(std::move(*line));
    else return "the driver wrote a reply no command awaits: " + line->dump();
  }
  return "no event " + pattern.dump() + " from the driver: " + why;
}

// {"op": "ping"|"close"|..., "header": {typed JSON}, "delay_ms"?}: the proxy sends it to the client as the
// server; with delay_ms, that much later while the next steps run (a flow resume while the driver's publish
// waits for it).
std::string ClientCase::server_send(const Json& args) {
  const std::string name = args.at("op").get<std::string>();
  const OpInfo* info = find_op_by_name(name);
  if (info == nullptr) return "server_send: unknown op " + name;
  auto header = value_from_typed_json(args.value("header", Json::object()));
  if (!header || !header->is<Map>()) return "server_send: the header must be a typed-JSON map";
  const auto op = static_cast<std::uint8_t>(info->code);
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
    return "";
  }
  if (!proxy_->send_to_client(op, *header->get_if<Map>())) {
    return "server_send: the client has no connection to send " + name + " on";
  }
  return "";
}

// {"op": "pong", "timeout_ms"?}: the client sends a frame of op (since the last server_send).
std::string ClientCase::expect_client_frame(const Json& args) {
  const std::string name = args.at("op").get<std::string>();
  const OpInfo* info = find_op_by_name(name);
  if (info == nullptr) return "expect_client_frame: unknown op " + name;
  if (!proxy_->wait_for_client(static_cast<std::uint8_t>(info->code), deadline(args))) {
    return "the client sent no " + name + " in time";
  }
  return "";
}

// {"file": "urls.json", "valid": true|false}: every valid vector parses to its expect, every invalid one is
// refused. One command per vector; the first mismatch fails the step.
std::string ClientCase::url_vectors(const Json& args) {
  std::ifstream in(options_.vectors_dir / args.at("file").get<std::string>());
  const Json file = Json::parse(in, nullptr, false);
  if (file.is_discarded()) return "cannot read the vector file " + args.at("file").get<std::string>();
  const bool valid = args.at("valid").get<bool>();
  int checked = 0;
  for (const Json& vector : file.at("vectors")) {
    if (vector.contains("expect") != valid) continue;
    Json step = {{"send", {{"cmd", "parse_url"}, {"url", vector.at("url")}}}};
    step["expect"] = valid ? Json{{"ok", true}, {"url", vector.at("expect")}} : Json{{"ok", false}};
    if (std::string bad = command(step); !bad.empty()) return vector.at("name").get<std::string>() + ": " + bad;
    ++checked;
  }
  note(std::to_string(checked) + " URL vectors checked");
  return checked == 0 ? "no vector checked" : "";
}

std::string ClientCase::run_step(const Json& step) {
  const std::string verb = step.begin().key();
  const Json args = substituted(step.begin().value(), {{"url", proxy_url(options_.transport, proxy_->port())},
                                                      {"unique", unique_}});
  if (verb == "command") return command(args);
  if (verb == "expect_event") return expect_event(args);
  if (verb == "server_send") return server_send(args);
  if (verb == "expect_client_frame") return expect_client_frame(args);
  if (verb == "server_quirks") {
    proxy_->set_quirks({args.value("single_bytes", false), args.value("unknown_header_keys", false),
                        args.value("max_frame", std::uint64_t{0})});
    return "";
  }
  if (verb == "url_vectors") return url_vectors(args);
  return "unknown verb " + verb;  // load_cases refuses these; kept for a case built by hand
}

// The driver is told the commands are over and must exit; then the proxy judges what is still owed.
void ClientCase::finish() {
  if (driver_) {
    const std::string how = driver_->finish(Clock::now() + kDriverExitTime);
    note("the driver ended: " + how);
    const std::string err = driver_->stderr_text();
    if (!err.empty()) note("the driver's stderr:\n" + err);
    if (!driver_->exited_cleanly() && result_.verdict == Verdict::pass) {
      result_.verdict = Verdict::fail;
      result_.message = "the driver " + how + " once its stdin closed";
    }
    if (result_.verdict == Verdict::fail && !err.empty()) {
      result_.message += "; its stderr ends: " + err.substr(err.size() > kStderrInMessage ? err.size() - kStderrInMessage : 0);
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
  if (!result_.violations.empty() && result_.verdict == Verdict::pass) {
    const MonitorViolation& v = result_.violations.front();
    result_.verdict = Verdict::fail;
    result_.message = v.rule + ": " + v.message + " (spec, " + v.spec.section + ": \"" + v.spec.quote + "\")";
  }
}

CaseResult ClientCase::run() {
  result_.transport = std::string(transport_name(options_.transport));
  if (!spec_.transports.count(options_.transport)) {
    result_.verdict = Verdict::skipped;
    result_.message = "runs over " + transports_text(spec_.transports) + " only; this run is over " + result_.transport;
    return result_;
  }
  if (start()) {
    for (std::size_t i = 0; i < spec_.steps.size(); ++i) {
      const std::string bad = run_step(spec_.steps[i]);
      if (bad.empty()) continue;
      result_.verdict = Verdict::fail;
      result_.message = "step " + std::to_string(i + 1) + ": " + bad + " (after " + ms_since(origin_) + " ms)";
      result_.failed_step = static_cast<int>(i);
      result_.failed_step_text = spec_.steps[i].dump();
      break;
    }
  }
  finish();
  result_.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - origin_).count();
  return result_;
}

}  // namespace

const std::vector<std::string>& client_step_verbs() {
  static const std::vector<std::string> verbs = {"command", "expect_event", "server_send", "expect_client_frame",
                                                 "server_quirks", "url_vectors"};
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
    if (!actual.is_array() || actual.size() != pattern.size()) return where + " is " + actual.dump() + ", expected " + pattern.dump();
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (std::string bad = subset_mismatch(pattern[i], actual[i], path + "/" + std::to_string(i)); !bad.empty()) return bad;
    }
    return "";
  }
  if (pattern.is_number() && actual.is_number()) {
    return pattern.get<double>() == actual.get<double>() ? "" : where + " is " + actual.dump() + ", expected " + pattern.dump();
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
