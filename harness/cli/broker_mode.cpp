// Broker mode: see broker_mode.h.
#include "harness/cli/broker_mode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "harness/proxy/fault_proxy.h"
#include "harness/reports/reports.h"
#include "harness/rules/wire_monitor.h"
#include "harness/run/amqp_side.h"
#include "harness/run/runner.h"
#include "protocol/url.h"

namespace fs = std::filesystem;

namespace firemq::conform::cli {

namespace {

// Where the cases connect: the target itself, or the fault proxy in front of it.
Target through_proxy(const Target& target, const FaultProxy& proxy, const Fault& fault) {
  Target t = target;
  t.port = proxy.port();
  t.description = target.description + " through the fault proxy (" + fault.name + ")";
  return t;
}

// --management-url: http://[user:pass@]host[:port][/]; the credentials default to the broker URL's.
firemq::Result<HttpEndpoint, std::string> management_endpoint(const std::string& url, const Target& target) {
  constexpr std::string_view kScheme = "http://";
  if (!std::string_view(url).starts_with(kScheme))
    return std::string("expected http://host:port (https is not supported)");
  std::string rest = url.substr(kScheme.size());
  if (rest.ends_with("/")) rest.pop_back();
  if (rest.find('/') != std::string::npos) return std::string("expected no path after host:port");
  HttpEndpoint e{"", 80, target.user, target.password};
  if (const auto at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    const auto colon = userinfo.find(':');
    e.user = userinfo.substr(0, colon);
    e.password = colon == std::string::npos ? "" : userinfo.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  const auto colon = rest.rfind(':');
  e.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port) > 65535) {
      return "'" + port + "' is not a port";
    }
    e.port = static_cast<std::uint16_t>(std::stoul(port));
  }
  if (e.host.empty()) return std::string("no host");
  return e;
}

// --url amqp://...: a target that speaks AMQP 0-9-1 only (RabbitMQ, or another AMQP broker), for the AMQP-only
// cases; every case that opens a FireMQ connection is skipped, saying so.
std::optional<Target> amqp_only_target(const Options& o, bool transport_given) {
  if (!o.fault.empty() || !o.fault_check.empty() || !o.restart_command.empty() || !o.alarm_command.empty()) {
    std::cerr << "firemq-conform: --fault, --fault-check, --restart-command and --alarm-command act on FireMQ "
                 "frames and FireMQ cases; "
                 "a --url amqp://... target runs the AMQP-only cases alone\n";
    return std::nullopt;
  }
  if (transport_given || !o.amqp_url.empty()) {
    std::cerr << "firemq-conform: --url amqp://... is the AMQP target itself: give neither --transport nor --amqp-url "
                 "with it (for a broker that speaks both, give its FireMQ URL as --url and this one as --amqp-url)\n";
    return std::nullopt;
  }
  auto amqp = parse_amqp_url(o.url, {o.ca_file, o.insecure});
  if (!amqp) {
    std::cerr << "firemq-conform: --url " << o.url << ": " << amqp.error() << "\n";
    return std::nullopt;
  }
  Target t;
  t.description = o.url;
  t.speaks_fire = false;
  t.host = amqp->host;
  t.port = amqp->port;
  t.user = amqp->user;
  t.password = amqp->password;
  t.vhost = amqp->vhost;
  t.amqp = *amqp;
  t.features.insert("amqp");
  for (const std::string& f : o.features) t.features.insert(f);
  return t;
}

std::optional<Target> target_from_url(const Options& o, bool transport_given) {
  if (o.url.starts_with("amqp://") || o.url.starts_with("amqps://")) return amqp_only_target(o, transport_given);
  auto url = firemq::parse_url(o.url);
  if (!url) {
    std::cerr << "firemq-conform: --url " << o.url << ": " << url.error() << "\n";
    return std::nullopt;
  }
  if (transport_given && o.transport != url->scheme) {
    std::cerr << "firemq-conform: --transport " << o.transport << " with --url " << url->scheme
              << "://...: the URL's scheme is the transport (test each transport with its own URL)\n";
    return std::nullopt;
  }
  Target t = target_at(*url, {o.ca_file, o.insecure});
  t.description = o.url;
  for (const std::string& f : o.features) {
    if (f == "restart" || f == "alarm" || f == "amqp") {
      const char* flag = f == "restart" ? "--restart-command" : f == "alarm" ? "--alarm-command" : "--amqp-url";
      std::cerr << "firemq-conform: the feature " << f << " comes with " << flag << ", not --features\n";
      return std::nullopt;
    }
    t.features.insert(f);
  }
  if (!o.restart_command.empty()) t.features.insert("restart");
  if (!o.alarm_command.empty()) t.features.insert("alarm");
  if (!o.management_url.empty()) {
    auto management = management_endpoint(o.management_url, t);
    if (!management) {
      std::cerr << "firemq-conform: --management-url " << o.management_url << ": " << management.error() << "\n";
      return std::nullopt;
    }
    t.management = *management;
    t.features.insert("management");
  }
  if (!o.amqp_url.empty()) {
    auto amqp = parse_amqp_url(o.amqp_url, {o.ca_file, o.insecure});
    if (!amqp) {
      std::cerr << "firemq-conform: --amqp-url " << o.amqp_url << ": " << amqp.error() << "\n";
      return std::nullopt;
    }
    t.amqp = *amqp;
    t.features.insert("amqp");
  }
  return t;
}

RunResult run_once(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                   const Target& target, const std::string& run_id, const std::vector<std::string>& known, bool quiet,
                   const Fault* fault = nullptr, const TestCertificates* certificates = nullptr) {
  RunResult result;
  result.run_id = run_id;
  result.started_at = iso_now();
  result.target = target.description;
  result.harness_version = kVersion;
  result.requirements = binding(suite.requirements, "server");  // the client's own duties are client mode's
  for (const MonitorRule& rule : monitor_rules()) result.monitor_rules.emplace_back(rule.id);  // broker mode: all apply
  const auto started = std::chrono::steady_clock::now();
  auto server = probe_server(target);
  if (!server) {
    std::cerr << "firemq-conform: cannot reach the target " << target.description << ": " << server.error() << "\n";
    result.duration_ms = 0;
    return result;  // no case executed: the run fails
  }
  result.server_name = server->name;
  result.server_version = server->version;
  result.server_caps = server->caps;
  RunOptions ro;
  ro.jobs = o.jobs;
  ro.known_failures = known;
  // Names cases create start with conform-<pid>-<run>-<case>: unique among concurrent harnesses (the pid) and
  // among the runs of one harness against one broker (--fault-check runs the suite once per fault).
  static int runs = 0;
  ro.run_id = run_id.substr(run_id.rfind('-') + 1) + "-" + std::to_string(++runs);
  if (!quiet)
    ro.on_case_done = [&](const CaseResult& r, std::size_t d, std::size_t n) { print_progress(r, d, n, o.verbose); };
  if (o.url.empty()) {
    // A case's own broker listens on the run's transport only, with the run's certificate.
    ro.start_broker = [&o, run_id, transport = target.transport, certificates](const std::vector<std::string>& args) {
      static std::atomic<int> own_brokers{0};
      EmbeddedOptions eo;
      eo.broker_path = o.broker;
      eo.definitions_file = (fs::path(o.conformance_dir) / "definitions.json").string();
      eo.work_dir = fs::temp_directory_path() / ("firemq-conform-" + run_id + "-own-" + std::to_string(++own_brokers));
      eo.extra_args = args;
      eo.listeners = {transport};
      if (certificates != nullptr) {
        eo.tls_cert = certificates->cert_file;
        eo.tls_key = certificates->key_file;
      }
      return EmbeddedBroker::start(eo);
    };
  }
  if (!o.url.empty() && !o.restart_command.empty()) {
    // Wait for the broker itself to come back, not for a fault proxy in front of it (which always listens).
    auto url = firemq::parse_url(o.url);
    ro.restart_command = RestartCommand{o.restart_command, url->host, url->port};
  }
  if (!o.alarm_command.empty()) ro.alarm_command = o.alarm_command;
  if (fault != nullptr) {
    ro.through = [fault](Target& t) -> std::shared_ptr<void> {
      auto proxy = FaultProxy::start(*fault, t.host, t.port);
      if (!proxy) return nullptr;
      t.port = (*proxy)->port();
      return std::shared_ptr<FaultProxy>(std::move(*proxy));
    };
  }
  result.cases = run_cases(selected, target, *server, ro);
  result.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return result;
}

// --fault-check: what one entry of faults.json expects (docs/case-format.md, "Faults").
struct FaultExpectation {
  std::string fault;
  std::vector<std::string> cases;   // id globs the fault runs; empty: every selected case
  std::set<std::string> must_fail;  // these fail, for the case's own reason or the monitor's
  std::set<std::string> may_fail;   // these may fail or pass: what they catch depends on timing the spec leaves open
  std::string must_fail_rule;       // a wire monitor rule: at least one case fails naming it, none names another
};

FaultExpectation fault_expectation(const nlohmann::json& entry) {
  FaultExpectation e;
  e.fault = entry.at("fault").get<std::string>();
  for (const auto& glob : entry.value("cases", nlohmann::json::array())) e.cases.push_back(glob.get<std::string>());
  for (const auto& id : entry.value("must_fail", nlohmann::json::array())) e.must_fail.insert(id.get<std::string>());
  for (const auto& id : entry.value("may_fail", nlohmann::json::array())) e.may_fail.insert(id.get<std::string>());
  e.must_fail_rule = entry.value("must_fail_rule", "");
  return e;
}

bool names_rule(const CaseResult& c, const std::string& rule) {
  return std::any_of(c.violations.begin(), c.violations.end(),
                     [&](const MonitorViolation& v) { return v.rule == rule; });
}

// What the fault's run got wrong against its expectation, one line each; none when it matches. Every failing
// case must be listed or (with must_fail_rule) fail naming the rule: nothing fails for an unrelated reason.
std::vector<std::string> fault_check_problems(const FaultExpectation& e, const RunResult& r) {
  std::vector<std::string> problems;
  if (r.cases.empty()) problems.push_back("no case ran");
  bool rule_named = false;
  for (const CaseResult& c : r.cases) {
    const bool failed = c.verdict != Verdict::pass && c.verdict != Verdict::skipped;
    const bool listed = e.must_fail.count(c.id) > 0;
    const bool may = e.may_fail.count(c.id) > 0;
    const bool named = !e.must_fail_rule.empty() && names_rule(c, e.must_fail_rule);
    rule_named = rule_named || named;
    if (listed && !failed) problems.push_back("should have failed but passed: " + c.id);
    if (failed && !listed && !named && !may) {
      problems.push_back("failed but is not listed: " + c.id + " (" + verdict_name(c.verdict) + ": " + c.message + ")");
    }
    for (const MonitorViolation& v : c.violations) {
      if (!e.must_fail_rule.empty() && v.rule != e.must_fail_rule) {
        problems.push_back(c.id + " names another rule than " + e.must_fail_rule + ": " + v.rule + ": " + v.message);
      }
    }
  }
  if (!e.must_fail_rule.empty() && !rule_named) problems.push_back("no case failed naming " + e.must_fail_rule);
  return problems;
}

std::vector<const CaseSpec*> cases_for(const FaultExpectation& e, const std::vector<const CaseSpec*>& selected) {
  if (e.cases.empty()) return selected;
  std::vector<const CaseSpec*> out;
  for (const CaseSpec* c : selected) {
    if (std::any_of(e.cases.begin(), e.cases.end(), [&](const std::string& g) { return glob_match(g, c->id); }))
      out.push_back(c);
  }
  return out;
}

// --fault-check: each fault must make exactly its listed cases fail, or fail naming its monitor rule.
int run_fault_check(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                    const Target& target, const std::string& run_id) {
  std::ifstream in(o.fault_check);
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded()) {
    std::cerr << "firemq-conform: cannot read " << o.fault_check << "\n";
    return kExitUsage;
  }
  bool all_ok = true;
  for (const auto& entry : json.at("faults")) {
    const FaultExpectation expected = fault_expectation(entry);
    const Fault* fault = find_fault(expected.fault);
    if (fault == nullptr) {
      std::cerr << "fault-check: unknown fault " << expected.fault << "\n";
      return kExitUsage;
    }
    auto proxy = FaultProxy::start(*fault, target.host, target.port);
    if (!proxy) {
      std::cerr << "fault-check: " << proxy.error() << "\n";
      return kExitUsage;
    }
    // Most cases under a fault wait out a timeout, idle: more of them run side by side than cores.
    Options wide = o;
    wide.jobs = std::max(o.jobs, 8);
    const RunResult r = run_once(wide, suite, cases_for(expected, selected), through_proxy(target, **proxy, *fault),
                                 run_id, {}, true, fault);
    const auto failed = std::count_if(r.cases.begin(), r.cases.end(), [](const CaseResult& c) {
      return c.verdict != Verdict::pass && c.verdict != Verdict::skipped;
    });
    const std::vector<std::string> problems = fault_check_problems(expected, r);
    all_ok = all_ok && problems.empty();
    std::cout << (problems.empty() ? "ok    " : "WRONG ") << expected.fault << " (" << fault->description
              << "): " << failed << " of " << r.cases.size() << " cases fail"
              << (expected.must_fail_rule.empty() ? "" : "; its rule: " + expected.must_fail_rule) << "\n";
    for (const std::string& p : problems) std::cout << "      " << p << "\n";
  }
  std::cout << (all_ok ? "fault-check: every fault is caught by exactly its listed cases and rules\n"
                       : "fault-check: FAILED\n");
  return all_ok ? kExitPassed : kExitFailed;
}

}  // namespace

int run_broker_mode(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                    const std::vector<std::string>& known, bool transport_given, const std::string& command_line) {
  if (o.url.empty() && !o.restart_command.empty()) {
    std::cerr << "firemq-conform: --restart-command is for --url targets; the embedded broker is restarted by the "
                 "harness\n";
    return kExitUsage;
  }
  if (o.url.empty() && !o.alarm_command.empty()) {
    std::cerr << "firemq-conform: --alarm-command is for --url targets; the embedded broker's flow cases raise "
                 "their alarms with a low --memory-high-watermark of their own\n";
    return kExitUsage;
  }
  const std::vector<Transport> transports = transports_named(o.transport);
  if (transports.empty()) {
    std::cerr << "firemq-conform: --transport " << o.transport << ": one of fire, fires, ws, wss, all\n";
    return kExitUsage;
  }
  const std::string run_id = run_id_now();
  std::optional<Embedded> embedded;
  std::vector<Target> targets;
  if (o.url.empty()) {
    embedded = start_embedded(o, run_id, transports);
    if (!embedded) return kExitUsage;
    targets = embedded->targets;
  } else {
    auto t = target_from_url(o, transport_given);
    if (!t) return kExitUsage;
    targets = {*t};
  }
  const bool altered = !o.fault_check.empty() || !o.fault.empty();
  if (altered && (targets.size() != 1 || targets.front().transport != Transport::fire)) {
    std::cerr << "firemq-conform: --fault and --fault-check alter frames of the TCP framing: fire:// only\n";
    return kExitUsage;
  }
  if (!o.fault_check.empty()) return run_fault_check(o, suite, selected, targets.front(), run_id);

  std::unique_ptr<FaultProxy> proxy;
  const Fault* fault = nullptr;
  if (!o.fault.empty()) {
    fault = find_fault(o.fault);
    if (fault == nullptr) {
      std::cerr << "firemq-conform: unknown fault '" << o.fault << "'; known:";
      for (const Fault& f : faults()) std::cerr << " " << f.name;
      std::cerr << "\n";
      return kExitUsage;
    }
    auto started = FaultProxy::start(*fault, targets.front().host, targets.front().port);
    if (!started) return kExitUsage;
    proxy = std::move(*started);
    targets.front() = through_proxy(targets.front(), *proxy, *fault);
  }

  const TestCertificates* certificates = embedded && embedded->certificates ? &*embedded->certificates : nullptr;
  std::vector<RunResult> runs;
  for (const Target& target : targets) {
    if (targets.size() > 1)
      std::cerr << "firemq-conform: over " << transport_name(target.transport) << ": " << target.description << "\n";
    runs.push_back(run_once(o, suite, selected, target, run_id, known, false, fault, certificates));
  }
  RunResult result = combine_runs(runs);
  result.command_line = command_line;
  proxy.reset();
  bool broker_ok = true;
  if (embedded) {
    const int status = embedded->broker->stop();
    if (status != 0) {
      broker_ok = false;
      std::cerr << "firemq-conform: the reference broker did not exit cleanly on SIGTERM (status " << status
                << "); its log: " << embedded->broker->log_file().string() << "\n"
                << tail_of(embedded->broker->log_file()) << "\n";
    }
  }
  std::cout << console_summary(result);
  if (runs.size() > 1) std::cout << per_transport_summary(runs);
  const bool written = write_all_reports(result, o.reports_dir);
  // A target that could not be reached ran no case: run_once said why.
  const bool all_reached = std::none_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.cases.empty(); });
  if (!all_reached) return kExitUsage;
  return result.passed() && broker_ok && written ? kExitPassed : kExitFailed;
}

}  // namespace firemq::conform::cli
