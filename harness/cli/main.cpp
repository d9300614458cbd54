// firemq-conform: runs the FireMQ conformance cases against the reference broker (no --url: started on a
// free port for the run) or against any broker (--url). `firemq-conform --help` lists every flag; the README
// and docs/case-format.md say more.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <atomic>
#include <set>
#include <sstream>
#include <thread>

#include "harness/run/amqp_side.h"
#include "harness/client_mode/client_mode.h"
#include "harness/process/default_paths.h"
#include "harness/process/embedded_broker.h"
#include "harness/proxy/fault_proxy.h"
#include "harness/reports/reports.h"
#include "harness/run/runner.h"
#include "harness/model/suite_coverage.h"
#include "harness/process/test_certificates.h"
#include "harness/rules/wire_monitor.h"
#include "protocol/url.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace firemq::conform;

namespace {

constexpr const char* kVersion = "0.1.0";
constexpr int kExitPassed = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string url;
  std::string broker = default_paths().broker;                    // harness/process/default_paths.cpp says where
  std::string conformance_dir = default_paths().conformance_dir;  // (the build tree, or installed)
  std::string reports_dir = "reports";
  std::string known_failures;
  std::string fault;
  std::string fault_check;
  std::string restart_command;
  std::string alarm_command;
  std::string management_url;
  std::string amqp_url;
  std::string transport = "fire";  // fire, fires, ws, wss or all (the embedded broker); a --url's own scheme
  std::string ca_file;
  bool insecure = false;
  std::string driver;                    // client mode: the client's driver program
  std::vector<std::string> driver_args;  // and its arguments
  std::vector<std::string> ids, groups, tags, levels, features;
  int jobs = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  bool list = false, dryrun = false, verbose = false, coverage = false;
};

po::options_description describe_flags(Options& o) {
  po::options_description flags("firemq-conform [flags] [CASE-ID-GLOB ...]");
  flags.add_options()
      ("help,h", "print this help and exit")
      ("management-url", po::value(&o.management_url),
       "the --url target's management API, http://[user:pass@]host:port (default: the --url's user and password); "
       "declares the feature management, whose cases use it")
      ("amqp-url", po::value(&o.amqp_url),
       "the --url target's AMQP 0-9-1 listener, amqp://user:pass@host[:port][/vhost] (port 5672 by default); "
       "declares the feature amqp, whose cases (interop) use it")
      ("url", po::value(&o.url), "the broker to test: fire://user:pass@host:port/vhost, fires://..., "
                                 "ws://user:pass@host:port/fire?vhost=v or wss://...; or amqp://user:pass@host:port/vhost, "
                                 "a broker that speaks AMQP 0-9-1 only: just the AMQP-only cases run; default: "
                                 "start the reference broker on free ports")
      ("transport", po::value(&o.transport)->default_value(o.transport),
       "without --url: the reference broker's listener the cases run over: fire, fires, ws, wss, or all (the "
       "whole selection once per transport); with --url the URL's scheme decides; with --driver, the transports "
       "the client connects over (default: every one the driver declares)")
      ("ca-file", po::value(&o.ca_file), "fires and wss: trust the CA certificates of this PEM file instead of "
                                         "the system's store")
      ("insecure", po::bool_switch(&o.insecure), "fires and wss: do not check the broker's certificate or name")
      ("driver", po::value(&o.driver), "client mode: certify a client library through its driver program (the "
                                       "client cases of conformance/client-cases/ instead of the broker cases; "
                                       "docs/client-certification.md)")
      ("driver-arg", po::value(&o.driver_args), "an argument for the driver (repeat for more)")
      ("features", po::value(&o.features)->multitoken(),
       "features the --url target has (e.g. conform-definitions); cases needing others are skipped")
      ("restart-command", po::value(&o.restart_command),
       "with --url: a shell command that restarts the target (FIREMQ_RESTART_KILL=1 in its environment when a "
       "case asks for kill -9); it must return once the old broker has stopped. Enables the cases that restart "
       "the broker (feature restart), which run alone after the others")
      ("alarm-command", po::value(&o.alarm_command),
       "with --url: a shell command that raises a resource alarm on the target (FIREMQ_ALARM=raise in its "
       "environment) or clears it (FIREMQ_ALARM=clear), and returns once the broker has done so. Enables the "
       "flow cases that need an alarm (feature alarm), which run alone after the others")
      ("id", po::value(&o.ids)->multitoken(), "run the cases whose id matches a glob (also positional)")
      ("group", po::value(&o.groups)->multitoken(), "run only these groups (e.g. framing lifecycle)")
      ("tag", po::value(&o.tags)->multitoken(), "run only cases with one of these tags")
      ("level", po::value(&o.levels)->multitoken(), "run only these levels: MUST SHOULD MAY")
      ("list", po::bool_switch(&o.list), "list the selected cases and exit")
      ("coverage", po::bool_switch(&o.coverage),
       "print which requirements the broker cases, client cases and wire-monitor rules check, and which none "
       "does and why; fails when one is unchecked without a reason in requirements.json")
      ("dryrun", po::bool_switch(&o.dryrun), "say what would run (and what would be skipped) without running")
      ("jobs,j", po::value(&o.jobs)->default_value(o.jobs), "cases run in parallel")
      ("known-failures", po::value(&o.known_failures), "file of case ids expected to fail (one id glob a line; ID@TRANSPORT for one transport)")
      ("reports", po::value(&o.reports_dir)->default_value(o.reports_dir), "where reports/<run>/ and latest go")
      ("broker", po::value(&o.broker)->default_value(o.broker), "the reference broker executable (no --url)")
      ("conformance", po::value(&o.conformance_dir)->default_value(o.conformance_dir),
       "the folder with cases/ and requirements.json")
      ("fault", po::value(&o.fault), "test through a proxy that breaks the broker's frames one way "
                                     "(a broken-broker demonstration; see --fault-check)")
      ("fault-check", po::value(&o.fault_check),
       "for each fault in this file, run the cases through the fault proxy and check that exactly the "
       "listed cases fail")
      ("verbose,v", po::bool_switch(&o.verbose), "print the transcript of each failing case");
  return flags;
}

std::string run_id_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::ostringstream id;
  id << std::put_time(&utc, "%Y%m%dT%H%M%SZ") << "-" << ::getpid();
  return id.str();
}

std::string iso_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::ostringstream s;
  s << std::put_time(&utc, "%Y-%m-%dT%H:%M:%SZ");
  return s.str();
}

// The selected cases, loaded and checked; exits the process with a usage error when the case files are bad.
struct Suite {
  std::vector<Requirement> requirements;
  std::vector<CaseSpec> cases;
};

std::optional<Suite> load_suite(const Options& o) {
  auto requirements = load_requirements(fs::path(o.conformance_dir) / "requirements.json");
  if (!requirements) {
    std::cerr << "firemq-conform: " << requirements.error() << "\n";
    return std::nullopt;
  }
  const bool client_mode = !o.driver.empty();
  auto cases = client_mode ? load_cases(fs::path(o.conformance_dir) / "client-cases", *requirements, client_step_verbs())
                           : load_cases(fs::path(o.conformance_dir) / "cases", *requirements);
  if (!cases) {
    std::cerr << "firemq-conform: " << cases.error() << "\n";
    return std::nullopt;
  }
  return Suite{std::move(*requirements), std::move(*cases)};
}

// --coverage: the whole suite's coverage, broker and client cases together, whatever the selection.
int print_suite_coverage(const Options& o) {
  const fs::path dir = o.conformance_dir;
  auto catalog = load_requirements(dir / "requirements.json");
  if (!catalog) return std::cerr << "firemq-conform: " << catalog.error() << "\n", kExitUsage;
  auto broker_cases = load_cases(dir / "cases", *catalog);
  if (!broker_cases) return std::cerr << "firemq-conform: " << broker_cases.error() << "\n", kExitUsage;
  auto client_cases = load_cases(dir / "client-cases", *catalog, client_step_verbs());
  if (!client_cases) return std::cerr << "firemq-conform: " << client_cases.error() << "\n", kExitUsage;
  std::vector<std::string> broker_rules, client_rules;
  for (const MonitorRule& rule : monitor_rules()) broker_rules.emplace_back(rule.id);
  for (const MonitorRule& rule : rules_judging_clients()) client_rules.emplace_back(rule.id);
  const SuiteCoverage coverage = suite_coverage(*catalog, *broker_cases, *client_cases, broker_rules, client_rules);
  std::cout << coverage_text(coverage);
  const bool complete = coverage.unexplained().empty() && coverage.stale_reasons().empty();
  return complete ? kExitPassed : kExitFailed;
}

void print_progress(const CaseResult& r, std::size_t done, std::size_t total, bool verbose) {
  static const bool tty = ::isatty(STDERR_FILENO);
  const bool bad = r.verdict == Verdict::fail || r.verdict == Verdict::error || r.verdict == Verdict::unexpected_pass;
  if (tty) std::cerr << "\r\033[K";
  if (bad) {
    std::cerr << verdict_name(r.verdict) << " " << r.id << " [" << r.transport << "]: " << r.message << "\n";
    if (verbose) {
      for (const TranscriptLine& line : r.transcript) {
        std::cerr << "    " << std::fixed << std::setprecision(1) << line.at_ms << " ms  " << line.connection << " "
                  << line.direction << " " << line.op << " " << line.header_json << "\n";
      }
    }
  }
  if (tty) {
    std::cerr << "[" << done << "/" << total << "] " << r.id << std::flush;
    if (done == total) std::cerr << "\r\033[K";
  } else if (done % 25 == 0 || done == total) {
    std::cerr << "[" << done << "/" << total << "] cases done\n";
  }
}

// Where the cases connect: the target itself, or the fault proxy in front of it.
Target through_proxy(const Target& target, const FaultProxy& proxy, const Fault& fault) {
  Target t = target;
  t.port = proxy.port();
  t.description = target.description + " through the fault proxy (" + fault.name + ")";
  return t;
}

// The transports --transport names: one, or all four.
std::vector<Transport> transports_named(const std::string& name) {
  if (name == "all") return {kAllTransports.begin(), kAllTransports.end()};
  if (auto t = transport_from_name(name)) return {*t};
  return {};
}

std::string url_of(Transport t, std::uint16_t port) {
  return std::string(transport_name(t)) + "://127.0.0.1:" + std::to_string(port) + (is_websocket(t) ? "/fire" : "/");
}

// The reference broker with a listener for each transport of the run, and a target for each.
struct Embedded {
  std::unique_ptr<EmbeddedBroker> broker;
  std::optional<TestCertificates> certificates;  // when a TLS transport runs: the throwaway CA and its server
  std::vector<Target> targets;
};

std::optional<Embedded> start_embedded(const Options& o, const std::string& run_id, const std::vector<Transport>& transports) {
  Embedded e;
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.definitions_file = (fs::path(o.conformance_dir) / "definitions.json").string();
  eo.work_dir = fs::temp_directory_path() / ("firemq-conform-" + run_id);
  eo.listeners = {transports.begin(), transports.end()};
  // The HTTP listener is on whatever the run's transports: the management API is there (feature management).
  eo.listeners.insert(Transport::ws);
  if (std::any_of(transports.begin(), transports.end(), uses_tls)) {
    // Beside the broker's work dir, which every start makes afresh.
    auto certificates = make_test_certificates(fs::temp_directory_path() / ("firemq-conform-" + run_id + "-tls"));
    if (!certificates) {
      std::cerr << "firemq-conform: cannot make the TLS certificates: " << certificates.error() << "\n";
      return std::nullopt;
    }
    e.certificates = *certificates;
    eo.tls_cert = certificates->cert_file;
    eo.tls_key = certificates->key_file;
  }
  auto broker = EmbeddedBroker::start(eo);
  if (!broker) {
    std::cerr << "firemq-conform: " << broker.error() << "\n";
    return std::nullopt;
  }
  e.broker = std::move(*broker);
  for (Transport transport : transports) {
    Target t;
    t.transport = transport;
    t.host = "127.0.0.1";
    t.port = e.broker->port(transport);
    t.user = "guest";
    t.password = "guest";
    t.vhost = "/";
    if (e.certificates) t.tls.ca_file = e.certificates->ca_file.string();  // the throwaway CA, and nothing else
    t.description = "embedded reference broker (" + url_of(transport, t.port) + ")";
    // The embedded broker loads conformance/definitions.json, and the harness can restart it (each case that
    // restarts its broker gets one of its own).
    t.features = {"conform-definitions", "restart", "management"};
    t.management = HttpEndpoint{"127.0.0.1", e.broker->port(Transport::ws), "guest", "guest"};
    t.amqp = AmqpEndpoint{"127.0.0.1", e.broker->amqp_port(), "guest", "guest", "/"};
    t.features.insert("amqp");
    e.targets.push_back(t);
  }
  return e;
}

// --management-url: http://[user:pass@]host[:port][/]; the credentials default to the broker URL's.
firemq::Result<HttpEndpoint, std::string> management_endpoint(const std::string& url, const Target& target) {
  constexpr std::string_view kScheme = "http://";
  if (!std::string_view(url).starts_with(kScheme)) return std::string("expected http://host:port (https is not supported)");
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
  auto amqp = parse_amqp_url(o.url);
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
  if (std::string_view(o.url).starts_with("amqp://")) return amqp_only_target(o, transport_given);
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
    auto amqp = parse_amqp_url(o.amqp_url);
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
                   const Target& target, const std::string& run_id, const std::vector<std::string>& known,
                   bool quiet, const Fault* fault = nullptr, const TestCertificates* certificates = nullptr) {
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
  if (!quiet) ro.on_case_done = [&](const CaseResult& r, std::size_t d, std::size_t n) { print_progress(r, d, n, o.verbose); };
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

// One run's data from a run per transport: every case once per transport, its title saying which (the
// report writers show titles; CaseResult::transport has it as data).
RunResult combine_runs(const std::vector<RunResult>& runs) {
  if (runs.size() == 1) return runs.front();
  RunResult all = runs.front();
  all.cases.clear();
  all.duration_ms = 0;
  all.target.clear();
  for (const RunResult& run : runs) {
    all.target += (all.target.empty() ? "" : "; ") + run.target;
    all.duration_ms += run.duration_ms;
    for (CaseResult c : run.cases) {
      c.title = "[" + c.transport + "] " + c.title;
      all.cases.push_back(std::move(c));
    }
  }
  return all;
}

std::string per_transport_summary(const std::vector<RunResult>& runs) {
  std::ostringstream out;
  for (const RunResult& run : runs) {
    const std::string transport = run.cases.empty() ? run.target : run.cases.front().transport;
    out << std::left << std::setw(6) << transport;
    if (run.cases.empty()) out << "  not reached";
    for (const auto& [verdict, n] : run.counts()) {
      if (n > 0 || verdict == Verdict::pass || verdict == Verdict::fail) out << "  " << n << " " << verdict_name(verdict);
    }
    out << (run.passed() ? "  PASSED" : "  FAILED") << "  (" << std::fixed << std::setprecision(1) << run.duration_ms / 1000
        << " s)\n";
  }
  return out.str();
}

bool write_all_reports(const RunResult& result, const std::string& reports_dir) {
  const fs::path dir = fs::path(reports_dir) / result.run_id;
  if (std::string bad = write_reports(result, dir); !bad.empty()) {
    std::cerr << "firemq-conform: " << bad << "\n";
    return false;
  }
  // reports/latest always holds the newest run: a copy, so it survives the run folder being cleaned.
  const fs::path latest = fs::path(reports_dir) / "latest";
  std::error_code ec;
  fs::remove_all(latest, ec);
  fs::copy(dir, latest, fs::copy_options::recursive, ec);
  std::cout << "reports: " << dir.string() << "/{report.html,report.json,junit.xml,summary.md} (also in "
            << latest.string() << "/)\n";
  return true;
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
  return std::any_of(c.violations.begin(), c.violations.end(), [&](const MonitorViolation& v) { return v.rule == rule; });
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
    if (std::any_of(e.cases.begin(), e.cases.end(), [&](const std::string& g) { return glob_match(g, c->id); })) out.push_back(c);
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
    std::cout << (problems.empty() ? "ok    " : "WRONG ") << expected.fault << " (" << fault->description << "): "
              << failed << " of " << r.cases.size() << " cases fail"
              << (expected.must_fail_rule.empty() ? "" : "; its rule: " + expected.must_fail_rule) << "\n";
    for (const std::string& p : problems) std::cout << "      " << p << "\n";
  }
  std::cout << (all_ok ? "fault-check: every fault is caught by exactly its listed cases and rules\n"
                       : "fault-check: FAILED\n");
  return all_ok ? kExitPassed : kExitFailed;
}

std::string command_line_of(int argc, char** argv) {
  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  return command.str();
}

// Client mode's transports: every one the driver declares in its ready line (asked of it once, before the
// cases), or the one --transport names (each case then checks the driver's ready line, and is skipped when
// the driver does not declare it). Empty after a usage error, which is printed.
std::vector<Transport> client_transports(const Options& o, const std::vector<std::string>& driver, bool transport_given) {
  if (transport_given && o.transport != "all") {
    const auto named = transport_from_name(o.transport);
    if (!named) std::cerr << "firemq-conform: --transport " << o.transport << ": one of fire, fires, ws, wss, all\n";
    return named ? std::vector<Transport>{*named} : std::vector<Transport>{};
  }
  const auto declared = driver_transports(driver);
  if (!declared) {
    std::cerr << "firemq-conform: the driver gave no valid ready line when asked which transports it declares: "
                 "running over fire; its cases say what went wrong\n";
    return {Transport::fire};
  }
  return {declared->begin(), declared->end()};
}

// One client run over one transport.
RunResult run_client_transport(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                               const std::string& run_id, const ClientRunOptions& co) {
  RunResult result;
  result.run_id = run_id;
  result.started_at = iso_now();
  result.harness_version = kVersion;
  result.requirements = binding(suite.requirements, "client");  // the broker's own duties are broker mode's
  for (const MonitorRule& rule : rules_judging_clients()) result.monitor_rules.emplace_back(rule.id);
  result.target = "client driver " + o.driver + " over " + std::string(transport_name(co.transport)) +
                  ", through the client proxy, against the embedded reference broker (" + url_of(Transport::fire, co.broker_port) + ")";
  const auto started = std::chrono::steady_clock::now();
  result.cases = run_client_cases(selected, co);
  result.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return result;
}

// Client mode: the selected client cases once per transport, each with the driver against the reference
// broker behind the harness's proxy; the same verdicts, known failures and reports as broker mode. The proxy
// serves the client's transport and always speaks fire:// to the broker.
std::vector<RunResult> run_client_mode(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                                       const std::string& run_id, const std::vector<std::string>& known,
                                       const std::vector<Transport>& transports) {
  auto embedded = start_embedded(o, run_id, {Transport::fire});
  if (!embedded) return {};  // no case executed: the run fails
  ClientRunOptions co;
  co.driver = {o.driver};
  co.driver.insert(co.driver.end(), o.driver_args.begin(), o.driver_args.end());
  co.broker_port = embedded->broker->port(Transport::fire);
  co.vectors_dir = fs::path(o.conformance_dir).parent_path() / "vectors";
  co.jobs = o.jobs;
  co.known_failures = known;
  co.on_case_done = [&](const CaseResult& r, std::size_t d, std::size_t n) { print_progress(r, d, n, o.verbose); };
  const fs::path tls_dir = fs::temp_directory_path() / ("firemq-conform-" + run_id + "-tls");
  if (std::any_of(transports.begin(), transports.end(), uses_tls)) {
    auto certificates = make_test_certificates(tls_dir);
    auto tls = certificates ? ProxyTls::load(*certificates) : firemq::Result<std::shared_ptr<ProxyTls>, std::string>(certificates.error());
    if (!tls) {
      std::cerr << "firemq-conform: the client proxy's TLS (fires, wss): " << tls.error()
                << "\n(--transport fire or --transport ws runs without TLS)\n";
      return {};
    }
    co.tls = *tls;
    co.ca_file = certificates->ca_file.string();
  }
  std::vector<RunResult> runs;
  for (Transport transport : transports) {
    if (transports.size() > 1) std::cerr << "firemq-conform: client cases over " << transport_name(transport) << "\n";
    co.transport = transport;
    co.run_id = run_id.substr(run_id.rfind('-') + 1) + "-" + std::string(transport_name(transport));
    runs.push_back(run_client_transport(o, suite, selected, run_id, co));
  }
  embedded->broker->stop();
  std::error_code ignored;
  fs::remove_all(tls_dir, ignored);  // the throwaway CA and key: nothing trusts them after the run
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  po::options_description flags = describe_flags(o);
  po::positional_options_description positional;
  positional.add("id", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(flags).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "firemq-conform: " << e.what() << "\n\n" << flags << "\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return kExitPassed;
  }
  if (o.coverage) return print_suite_coverage(o);
  auto suite = load_suite(o);
  if (!suite) return kExitUsage;
  Selection selection{o.ids, {o.groups.begin(), o.groups.end()}, {o.tags.begin(), o.tags.end()},
                      {o.levels.begin(), o.levels.end()}};
  const std::vector<const CaseSpec*> selected = select_cases(suite->cases, selection);
  if (o.list || o.dryrun) {
    for (const CaseSpec* c : selected) {
      std::cout << std::left << std::setw(52) << c->id << " " << std::setw(6) << c->level << " " << c->title << "\n";
    }
    std::cout << selected.size() << " of " << suite->cases.size() << " cases selected"
              << (o.dryrun ? " (dry run: nothing was sent)" : "") << "\n";
    return kExitPassed;
  }
  if (selected.empty()) {
    std::cerr << "firemq-conform: no case matches the selection\n";
    return kExitFailed;
  }
  std::vector<std::string> known;
  if (!o.known_failures.empty()) {
    auto k = load_known_failures(o.known_failures);
    if (!k) {
      std::cerr << "firemq-conform: " << k.error() << "\n";
      return kExitUsage;
    }
    known = std::move(*k);
  }

  if (!o.driver.empty()) {
    if (!o.url.empty() || !o.fault.empty() || !o.fault_check.empty()) {
      std::cerr << "firemq-conform: --driver runs the client cases against the reference broker; it takes no --url, "
                   "--fault or --fault-check\n";
      return kExitUsage;
    }
    std::vector<std::string> driver = {o.driver};
    driver.insert(driver.end(), o.driver_args.begin(), o.driver_args.end());
    const std::vector<Transport> transports = client_transports(o, driver, !vm["transport"].defaulted());
    if (transports.empty()) return kExitUsage;
    const std::vector<RunResult> runs = run_client_mode(o, *suite, selected, run_id_now(), known, transports);
    if (runs.empty()) return kExitUsage;
    RunResult result = combine_runs(runs);
    result.command_line = command_line_of(argc, argv);
    std::cout << console_summary(result);
    if (runs.size() > 1) std::cout << per_transport_summary(runs);
    const bool written = write_all_reports(result, o.reports_dir);
    if (result.cases.empty()) return kExitUsage;
    return result.passed() && written ? kExitPassed : kExitFailed;
  }
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
    auto t = target_from_url(o, !vm["transport"].defaulted());
    if (!t) return kExitUsage;
    targets = {*t};
  }
  const bool altered = !o.fault_check.empty() || !o.fault.empty();
  if (altered && (targets.size() != 1 || targets.front().transport != Transport::fire)) {
    std::cerr << "firemq-conform: --fault and --fault-check alter frames of the TCP framing: fire:// only\n";
    return kExitUsage;
  }
  if (!o.fault_check.empty()) return run_fault_check(o, *suite, selected, targets.front(), run_id);

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
    if (targets.size() > 1) std::cerr << "firemq-conform: over " << transport_name(target.transport) << ": " << target.description << "\n";
    runs.push_back(run_once(o, *suite, selected, target, run_id, known, false, fault, certificates));
  }
  RunResult result = combine_runs(runs);
  result.command_line = command_line_of(argc, argv);
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
