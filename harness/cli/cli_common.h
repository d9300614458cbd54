// What both modes of firemq-conform share (cli_common.cpp): the command line's options, the suite, the embedded
// reference broker, progress and reports. broker_mode.h and client_mode_cli.h run a mode; main.cpp picks one.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/client/target.h"
#include "harness/model/case_model.h"
#include "harness/model/run_result.h"
#include "harness/model/transport.h"
#include "harness/process/default_paths.h"
#include "harness/process/embedded_broker.h"
#include "harness/process/test_certificates.h"

namespace firemq::conform::cli {

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

boost::program_options::options_description describe_flags(Options& o);

// A run's id (UTC time and pid: reports/<id>/) and an ISO 8601 time.
std::string run_id_now();
std::string iso_now();

// The cases of the mode (broker cases, or client cases with --driver) and the requirements they cite.
struct Suite {
  std::vector<Requirement> requirements;
  std::vector<CaseSpec> cases;
};
// Loaded and checked; nullopt after printing why the case files are bad.
std::optional<Suite> load_suite(const Options& o);
// --coverage: the whole suite's coverage, broker and client cases together, whatever the selection.
int print_suite_coverage(const Options& o);
void print_progress(const CaseResult& r, std::size_t done, std::size_t total, bool verbose);

// The transports --transport names: one, or all four (empty: not a transport).
std::vector<Transport> transports_named(const std::string& name);
std::string url_of(Transport t, std::uint16_t port);

// The reference broker with a listener for each transport of the run, and a target for each.
struct Embedded {
  std::unique_ptr<EmbeddedBroker> broker;
  std::optional<TestCertificates> certificates;  // when a TLS transport runs: the throwaway CA and its server
  std::vector<Target> targets;
};
std::optional<Embedded> start_embedded(const Options& o, const std::string& run_id,
                                       const std::vector<Transport>& transports);

// One run's data from a run per transport, and a line per transport.
RunResult combine_runs(const std::vector<RunResult>& runs);
std::string per_transport_summary(const std::vector<RunResult>& runs);
// reports/<run>/ and reports/latest; false after printing why not.
bool write_all_reports(const RunResult& result, const std::string& reports_dir);
std::string command_line_of(int argc, char** argv);

}  // namespace firemq::conform::cli
