// Client mode from the command line: see client_mode_cli.h.
#include "harness/cli/client_mode_cli.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "harness/client_mode/client_mode.h"
#include "harness/client_mode/client_proxy.h"
#include "harness/reports/reports.h"
#include "harness/rules/wire_monitor.h"

namespace fs = std::filesystem;

namespace firemq::conform::cli {

namespace {

// Client mode's transports: every one the driver declares in its ready line (asked of it once, before the
// cases), or the one --transport names (each case then checks the driver's ready line, and is skipped when
// the driver does not declare it). Empty after a usage error, which is printed.
std::vector<Transport> client_transports(const Options& o, const std::vector<std::string>& driver,
                                         bool transport_given) {
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
                  ", through the client proxy, against the embedded reference broker (" +
                  url_of(Transport::fire, co.broker_port) + ")";
  const auto started = std::chrono::steady_clock::now();
  result.cases = run_client_cases(selected, co);
  result.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return result;
}

// Client mode: the selected client cases once per transport, each with the driver against the reference
// broker behind the harness's proxy; the same verdicts, known failures and reports as broker mode. The proxy
// serves the client's transport and always speaks fire:// to the broker.
std::vector<RunResult> run_client_mode(const Options& o, const Suite& suite,
                                       const std::vector<const CaseSpec*>& selected, const std::string& run_id,
                                       const std::vector<std::string>& known,
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
    auto tls = certificates ? ProxyTls::load(*certificates)
                            : firemq::Result<std::shared_ptr<ProxyTls>, std::string>(certificates.error());
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

int run_client_mode_cli(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                        const std::vector<std::string>& known, bool transport_given, const std::string& command_line) {
  if (!o.url.empty() || !o.fault.empty() || !o.fault_check.empty()) {
    std::cerr << "firemq-conform: --driver runs the client cases against the reference broker; it takes no --url, "
                 "--fault or --fault-check\n";
    return kExitUsage;
  }
  std::vector<std::string> driver = {o.driver};
  driver.insert(driver.end(), o.driver_args.begin(), o.driver_args.end());
  const std::vector<Transport> transports = client_transports(o, driver, transport_given);
  if (transports.empty()) return kExitUsage;
  const std::vector<RunResult> runs = run_client_mode(o, suite, selected, run_id_now(), known, transports);
  if (runs.empty()) return kExitUsage;
  RunResult result = combine_runs(runs);
  result.command_line = command_line;
  std::cout << console_summary(result);
  if (runs.size() > 1) std::cout << per_transport_summary(runs);
  const bool written = write_all_reports(result, o.reports_dir);
  if (result.cases.empty()) return kExitUsage;
  return result.passed() && written ? kExitPassed : kExitFailed;
}

}  // namespace firemq::conform::cli
