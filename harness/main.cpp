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

#include "harness/embedded_broker.h"
#include "harness/fault_proxy.h"
#include "harness/reports.h"
#include "harness/runner.h"
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
  std::string broker = FIREMQ_BROKER_PATH;
  std::string conformance_dir = FIREMQ_CONFORMANCE_DIR;
  std::string reports_dir = "reports";
  std::string known_failures;
  std::string fault;
  std::string fault_check;
  std::string restart_command;
  std::vector<std::string> ids, groups, tags, levels, features;
  int jobs = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  bool list = false, dryrun = false, verbose = false;
};

po::options_description describe_flags(Options& o) {
  po::options_description flags("firemq-conform [flags] [CASE-ID-GLOB ...]");
  flags.add_options()
      ("help,h", "print this help and exit")
      ("url", po::value(&o.url), "the broker to test: fire://user:pass@host:port/vhost; default: start the "
                                 "reference broker on a free port")
      ("features", po::value(&o.features)->multitoken(),
       "features the --url target has (e.g. conform-definitions); cases needing others are skipped")
      ("restart-command", po::value(&o.restart_command),
       "with --url: a shell command that restarts the target (FIREMQ_RESTART_KILL=1 in its environment when a "
       "case asks for kill -9); it must return once the old broker has stopped. Enables the cases that restart "
       "the broker (feature restart), which run alone after the others")
      ("id", po::value(&o.ids)->multitoken(), "run the cases whose id matches a glob (also positional)")
      ("group", po::value(&o.groups)->multitoken(), "run only these groups (e.g. framing lifecycle)")
      ("tag", po::value(&o.tags)->multitoken(), "run only cases with one of these tags")
      ("level", po::value(&o.levels)->multitoken(), "run only these levels: MUST SHOULD MAY")
      ("list", po::bool_switch(&o.list), "list the selected cases and exit")
      ("dryrun", po::bool_switch(&o.dryrun), "say what would run (and what would be skipped) without running")
      ("jobs,j", po::value(&o.jobs)->default_value(o.jobs), "cases run in parallel")
      ("known-failures", po::value(&o.known_failures), "file of case ids expected to fail (one a line)")
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
  auto cases = load_cases(fs::path(o.conformance_dir) / "cases", *requirements);
  if (!cases) {
    std::cerr << "firemq-conform: " << cases.error() << "\n";
    return std::nullopt;
  }
  return Suite{std::move(*requirements), std::move(*cases)};
}

void print_progress(const CaseResult& r, std::size_t done, std::size_t total, bool verbose) {
  static const bool tty = ::isatty(STDERR_FILENO);
  const bool bad = r.verdict == Verdict::fail || r.verdict == Verdict::error || r.verdict == Verdict::unexpected_pass;
  if (tty) std::cerr << "\r\033[K";
  if (bad) {
    std::cerr << verdict_name(r.verdict) << " " << r.id << ": " << r.message << "\n";
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

struct Embedded {
  std::unique_ptr<EmbeddedBroker> broker;
  Target target;
};

std::optional<Embedded> start_embedded(const Options& o, const std::string& run_id) {
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.definitions_file = (fs::path(o.conformance_dir) / "definitions.json").string();
  eo.work_dir = fs::temp_directory_path() / ("firemq-conform-" + run_id);
  auto broker = EmbeddedBroker::start(eo);
  if (!broker) {
    std::cerr << "firemq-conform: " << broker.error() << "\n";
    return std::nullopt;
  }
  Target t;
  t.host = "127.0.0.1";
  t.port = (*broker)->port();
  t.user = "guest";
  t.password = "guest";
  t.vhost = "/";
  t.description = "embedded reference broker (fire://127.0.0.1:" + std::to_string(t.port) + "/)";
  // The embedded broker loads conformance/definitions.json, and the harness can restart it (each case that
  // restarts its broker gets one of its own).
  t.features = {"conform-definitions", "restart"};
  return Embedded{std::move(*broker), t};
}

std::optional<Target> target_from_url(const Options& o) {
  auto url = firemq::parse_url(o.url);
  if (!url) {
    std::cerr << "firemq-conform: --url " << o.url << ": " << url.error() << "\n";
    return std::nullopt;
  }
  if (url->tls || url->websocket) {
    std::cerr << "firemq-conform: --url " << o.url << ": this harness speaks fire:// only so far; fires://, ws:// "
              << "and wss:// arrive with their transports\n";
    return std::nullopt;
  }
  Target t{o.url, url->host, url->port, url->user, url->password, url->vhost, {}};
  for (const std::string& f : o.features) {
    if (f == "restart") {
      std::cerr << "firemq-conform: the feature restart comes with --restart-command, not --features\n";
      return std::nullopt;
    }
    t.features.insert(f);
  }
  if (!o.restart_command.empty()) t.features.insert("restart");
  return t;
}

RunResult run_once(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                   const Target& target, const std::string& run_id, const std::vector<std::string>& known,
                   bool quiet, const Fault* fault = nullptr) {
  RunResult result;
  result.run_id = run_id;
  result.started_at = iso_now();
  result.target = target.description;
  result.harness_version = kVersion;
  result.requirements = suite.requirements;
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
    ro.start_broker = [&o, run_id](const std::vector<std::string>& args) {
      static std::atomic<int> own_brokers{0};
      EmbeddedOptions eo;
      eo.broker_path = o.broker;
      eo.definitions_file = (fs::path(o.conformance_dir) / "definitions.json").string();
      eo.work_dir = fs::temp_directory_path() / ("firemq-conform-" + run_id + "-own-" + std::to_string(++own_brokers));
      eo.extra_args = args;
      return EmbeddedBroker::start(eo);
    };
  }
  if (!o.url.empty() && !o.restart_command.empty()) {
    // Wait for the broker itself to come back, not for a fault proxy in front of it (which always listens).
    auto url = firemq::parse_url(o.url);
    ro.restart_command = RestartCommand{o.restart_command, url->host, url->port};
  }
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

// --fault-check: each fault must make exactly its listed cases fail, and nothing else.
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
    const std::string name = entry.at("fault").get<std::string>();
    const Fault* fault = find_fault(name);
    if (fault == nullptr) {
      std::cerr << "fault-check: unknown fault " << name << "\n";
      return kExitUsage;
    }
    std::set<std::string> must_fail;
    for (const auto& id : entry.at("must_fail")) must_fail.insert(id.get<std::string>());
    auto proxy = FaultProxy::start(*fault, target.host, target.port);
    if (!proxy) {
      std::cerr << "fault-check: " << proxy.error() << "\n";
      return kExitUsage;
    }
    // Most cases under a fault wait out a timeout, idle: more of them run side by side than cores.
    Options wide = o;
    wide.jobs = std::max(o.jobs, 8);
    const RunResult r = run_once(wide, suite, selected, through_proxy(target, **proxy, *fault), run_id, {}, true, fault);
    std::set<std::string> failed;
    for (const CaseResult& c : r.cases) {
      if (c.verdict != Verdict::pass && c.verdict != Verdict::skipped) failed.insert(c.id);
    }
    std::vector<std::string> missed, extra;
    std::set_difference(must_fail.begin(), must_fail.end(), failed.begin(), failed.end(), std::back_inserter(missed));
    std::set_difference(failed.begin(), failed.end(), must_fail.begin(), must_fail.end(), std::back_inserter(extra));
    const bool ok = missed.empty() && extra.empty() && !r.cases.empty();
    all_ok = all_ok && ok;
    std::cout << (ok ? "ok    " : "WRONG ") << name << " (" << fault->description << "): " << failed.size()
              << " cases fail\n";
    for (const auto& id : missed) std::cout << "      should have failed but passed: " << id << "\n";
    for (const auto& id : extra) {
      const auto it = std::find_if(r.cases.begin(), r.cases.end(), [&](const CaseResult& c) { return c.id == id; });
      std::cout << "      failed but is not listed: " << id << " (" << verdict_name(it->verdict) << ": " << it->message << ")\n";
    }
  }
  std::cout << (all_ok ? "fault-check: every fault is caught by exactly its listed cases\n"
                       : "fault-check: FAILED\n");
  return all_ok ? kExitPassed : kExitFailed;
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

  if (o.url.empty() && !o.restart_command.empty()) {
    std::cerr << "firemq-conform: --restart-command is for --url targets; the embedded broker is restarted by the "
                 "harness\n";
    return kExitUsage;
  }
  const std::string run_id = run_id_now();
  std::optional<Embedded> embedded;
  Target target;
  if (o.url.empty()) {
    embedded = start_embedded(o, run_id);
    if (!embedded) return kExitUsage;
    target = embedded->target;
  } else {
    auto t = target_from_url(o);
    if (!t) return kExitUsage;
    target = *t;
  }
  if (!o.fault_check.empty()) return run_fault_check(o, *suite, selected, target, run_id);

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
    auto started = FaultProxy::start(*fault, target.host, target.port);
    if (!started) return kExitUsage;
    proxy = std::move(*started);
    target = through_proxy(target, *proxy, *fault);
  }

  RunResult result = run_once(o, *suite, selected, target, run_id, known, false, fault);
  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  result.command_line = command.str();
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
  const bool written = write_all_reports(result, o.reports_dir);
  if (result.cases.empty()) return kExitUsage;  // the target could not be reached: run_once said why
  return result.passed() && broker_ok && written ? kExitPassed : kExitFailed;
}
