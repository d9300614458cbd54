// firemq-conform: runs the FireMQ conformance cases against the reference broker (no --url: started on a
// free port for the run) or against any broker (--url), or certifies a client library through its driver
// (--driver). `firemq-conform --help` lists every flag; the README and docs/case-format.md say more. This file
// reads the command line and picks the mode: broker_mode.h, client_mode_cli.h; what they share is cli_common.h.
#include <boost/program_options.hpp>

#include <iomanip>
#include <iostream>

#include "harness/cli/broker_mode.h"
#include "harness/cli/cli_common.h"
#include "harness/cli/client_mode_cli.h"
#include "harness/run/runner.h"

namespace po = boost::program_options;
using namespace firemq::conform;
using namespace firemq::conform::cli;

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
  Selection selection{
      o.ids, {o.groups.begin(), o.groups.end()}, {o.tags.begin(), o.tags.end()}, {o.levels.begin(), o.levels.end()}};
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

  const bool transport_given = !vm["transport"].defaulted();
  const std::string command_line = command_line_of(argc, argv);
  if (!o.driver.empty()) return run_client_mode_cli(o, *suite, selected, known, transport_given, command_line);
  return run_broker_mode(o, *suite, selected, known, transport_given, command_line);
}
