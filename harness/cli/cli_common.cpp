// What both modes of firemq-conform share: see cli_common.h.
#include "harness/cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "harness/client_mode/client_mode.h"
#include "harness/model/suite_coverage.h"
#include "harness/reports/reports.h"
#include "harness/rules/wire_monitor.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace firemq::conform::cli {

po::options_description describe_flags(Options& o) {
  po::options_description flags("firemq-conform [flags] [CASE-ID-GLOB ...]");
  flags.add_options()("help,h", "print this help and exit")(
      "management-url", po::value(&o.management_url),
      "the --url target's management API, http://[user:pass@]host:port (default: the --url's user and password); "
      "declares the feature management, whose cases use it")(
      "amqp-url", po::value(&o.amqp_url),
      "the --url target's AMQP 0-9-1 listener, amqp://user:pass@host[:port][/vhost] (port 5672 by default) or "
      "amqps://... (inside TLS, port 5671 by default; --ca-file and --insecure apply); "
      "declares the feature amqp, whose cases (interop) use it")(
      "url", po::value(&o.url),
      "the broker to test: fire://user:pass@host:port/vhost, fires://..., "
      "ws://user:pass@host:port/fire?vhost=v or wss://...; or amqp://user:pass@host:port/vhost (or amqps://), "
      "a broker that speaks AMQP 0-9-1 only: just the AMQP-only cases run; default: "
      "start the reference broker on free ports")(
      "transport", po::value(&o.transport)->default_value(o.transport),
      "without --url: the reference broker's listener the cases run over: fire, fires, ws, wss, or all (the "
      "whole selection once per transport); with --url the URL's scheme decides; with --driver, the transports "
      "the client connects over (default: every one the driver declares)")(
      "ca-file", po::value(&o.ca_file),
      "fires and wss: trust the CA certificates of this PEM file instead of "
      "the system's store")("insecure", po::bool_switch(&o.insecure),
                            "fires and wss: do not check the broker's certificate or name")(
      "driver", po::value(&o.driver),
      "client mode: certify a client library through its driver program (the "
      "client cases of conformance/client-cases/ instead of the broker cases; "
      "docs/client-certification.md)")("driver-arg", po::value(&o.driver_args),
                                       "an argument for the driver (repeat for more)")(
      "features", po::value(&o.features)->multitoken(),
      "features the --url target has (e.g. conform-definitions); cases needing others are skipped")(
      "restart-command", po::value(&o.restart_command),
      "with --url: a shell command that restarts the target (FIREMQ_RESTART_KILL=1 in its environment when a "
      "case asks for kill -9); it must return once the old broker has stopped. Enables the cases that restart "
      "the broker (feature restart), which run alone after the others")(
      "alarm-command", po::value(&o.alarm_command),
      "with --url: a shell command that raises a resource alarm on the target (FIREMQ_ALARM=raise in its "
      "environment) or clears it (FIREMQ_ALARM=clear), and returns once the broker has done so. Enables the "
      "flow cases that need an alarm (feature alarm), which run alone after the others")(
      "id", po::value(&o.ids)->multitoken(), "run the cases whose id matches a glob (also positional)")(
      "group", po::value(&o.groups)->multitoken(), "run only these groups (e.g. framing lifecycle)")(
      "tag", po::value(&o.tags)->multitoken(), "run only cases with one of these tags")(
      "level", po::value(&o.levels)->multitoken(),
      "run only these levels: MUST SHOULD MAY")("list", po::bool_switch(&o.list), "list the selected cases and exit")(
      "coverage", po::bool_switch(&o.coverage),
      "print which requirements the broker cases, client cases and wire-monitor rules check, and which none "
      "does and why; fails when one is unchecked without a reason in requirements.json")(
      "dryrun", po::bool_switch(&o.dryrun), "say what would run (and what would be skipped) without running")(
      "jobs,j", po::value(&o.jobs)->default_value(o.jobs), "cases run in parallel")(
      "known-failures", po::value(&o.known_failures),
      "file of case ids expected to fail (one id glob a line; ID@TRANSPORT for one transport)")(
      "reports", po::value(&o.reports_dir)->default_value(o.reports_dir), "where reports/<run>/ and latest go")(
      "broker", po::value(&o.broker)->default_value(o.broker), "the reference broker executable (no --url)")(
      "conformance", po::value(&o.conformance_dir)->default_value(o.conformance_dir),
      "the folder with cases/ and requirements.json")("fault", po::value(&o.fault),
                                                      "test through a proxy that breaks the broker's frames one way "
                                                      "(a broken-broker demonstration; see --fault-check)")(
      "fault-check", po::value(&o.fault_check),
      "for each fault in this file, run the cases through the fault proxy and check that exactly the "
      "listed cases fail")("verbose,v", po::bool_switch(&o.verbose), "print the transcript of each failing case");
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
std::optional<Suite> load_suite(const Options& o) {
  auto requirements = load_requirements(fs::path(o.conformance_dir) / "requirements.json");
  if (!requirements) {
    std::cerr << "firemq-conform: " << requirements.error() << "\n";
    return std::nullopt;
  }
  const bool client_mode = !o.driver.empty();
  auto cases = client_mode
                   ? load_cases(fs::path(o.conformance_dir) / "client-cases", *requirements, client_step_verbs())
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

// The transports --transport names: one, or all four.
std::vector<Transport> transports_named(const std::string& name) {
  if (name == "all") return {kAllTransports.begin(), kAllTransports.end()};
  if (auto t = transport_from_name(name)) return {*t};
  return {};
}

std::string url_of(Transport t, std::uint16_t port) {
  return std::string(transport_name(t)) + "://127.0.0.1:" + std::to_string(port) + (is_websocket(t) ? "/fire" : "/");
}

std::optional<Embedded> start_embedded(const Options& o, const std::string& run_id,
                                       const std::vector<Transport>& transports) {
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
    t.amqp = AmqpEndpoint{"127.0.0.1", e.broker->amqp_port(), "guest", "guest", "/", false, {}};
    if (transport == Transport::fires || transport == Transport::wss) {
      // Over TLS the AMQP side is inside TLS too: the interop and AMQP cases run over amqps in those passes. By
      // the certificate's DNS name: rabbitmq-c checks a host name against DNS names only, never an IP address.
      t.amqp->host = "localhost";
      t.amqp->port = e.broker->amqps_port();
      t.amqp->tls = true;
      t.amqp->tls_options = t.tls;
    }
    t.features.insert("amqp");
    e.targets.push_back(t);
  }
  return e;
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
      if (n > 0 || verdict == Verdict::pass || verdict == Verdict::fail)
        out << "  " << n << " " << verdict_name(verdict);
    }
    out << (run.passed() ? "  PASSED" : "  FAILED") << "  (" << std::fixed << std::setprecision(1)
        << run.duration_ms / 1000 << " s)\n";
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

std::string command_line_of(int argc, char** argv) {
  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  return command.str();
}

}  // namespace firemq::conform::cli
