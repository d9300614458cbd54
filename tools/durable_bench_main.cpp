// firemq-bench-durable: what durability costs. Starts the reference broker with a fresh data dir under the temp
// dir (or tests --url), and measures (docs/benchmarks.md, "Durability"):
//
//   fsync probe   what one fdatasync of a 16-byte append costs on the disk of the data dir (no broker): the
//                 rate a broker could reach with one fsync per publish.
//   throughput    confirmed persistent publishes per second for each publisher count of --publishers: each
//                 publisher has its own connection and thread and its own durable queue (or one shared queue,
//                 --shared-queue), publishes persistent messages with confirms (seq 1, 2, 3...) pipelined with at
//                 most --window unconfirmed, for --seconds (or --count each). No consumer: the messages stay on
//                 disk until the queues are deleted at the end. For every publish, the time from writing it to
//                 the confirm that covers it. Also the data disk's flush requests per second (/proc/diskstats:
//                 machine-wide, so other activity counts too), to compare with the publish rate.
//   recovery      (embedded broker only) --recovery-count persistent messages of 16 B in one durable queue;
//                 the broker is stopped with SIGTERM and started again on the same data dir: its own
//                 "recovered ... in X ms", the wall time from its start until it reports its port, the data dir's
//                 size; then the queue's count is checked (passive declare) and a few messages are taken with get.
//
// A nack, an error frame, a lost connection or a confirm that does not come within --confirm-timeout fails the
// run (exit code 1).
#include <boost/program_options.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <variant>

#include "harness/process/default_paths.h"
#include "tools/disk_figures.h"
#include "tools/durable_publisher.h"
#include "tools/tool_client.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace firemq;
using namespace firemq::tools;
using namespace std::chrono;
using Json = nlohmann::json;

namespace {

const ToolClient kClient("firemq-bench-durable");

struct Options {
  std::string url, broker = conform::default_paths().broker;  // the build tree's, or installed beside this tool
  std::vector<int> publishers = {1, 16};
  std::size_t size = 16;
  std::uint64_t window = 256;
  double seconds = 5;
  std::uint64_t count = 0;  // per publisher; 0: --seconds
  int runs = 1;
  bool shared_queue = false;
  std::uint64_t recovery_count = 1'000'000;
  int recovery_publishers = 4;
  int fsync_samples = 1000;
  int confirm_timeout_s = 30;
  bool keep_data = false;
  bool json = false;
  std::vector<std::string> broker_args;  // extra flags for the embedded broker
};

// Everything the run found, for the JSON and the exit code; the table is printed as it goes.
struct Report {
  Json out;
  std::vector<std::string> errors;
};

const char* queues_text(const Options& o) {
  return o.shared_queue ? "one shared durable queue" : "one durable queue per publisher";
}

bool delete_queue(WireConnection& wire, const std::string& queue) {
  op::DeleteQueue d;
  d.rid = 2;
  d.name = queue;
  return kClient.request(wire, d, seconds(300)).has_value();
}

// Runs the publishers side by side, each on its connection and thread, from one start signal; returns when
// every one has stopped. `stop_at` is set from the start for runs timed by --seconds.
std::vector<PublisherResult> run_publishers(std::vector<std::unique_ptr<WireConnection>>& wires,
                                            const std::vector<PublisherSpec>& specs, double run_seconds,
                                            Clock::time_point& start) {
  std::vector<PublisherResult> results(specs.size());
  std::atomic<bool> go{false};
  std::atomic<Clock::time_point> stop_at{Clock::time_point::max()};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    threads.emplace_back(publish, std::ref(*wires[i]), std::cref(specs[i]), std::cref(stop_at), std::cref(go),
                         std::ref(results[i]));
  }
  start = Clock::now();
  if (run_seconds > 0) stop_at = start + duration_cast<Clock::duration>(duration<double>(run_seconds));
  go = true;
  for (auto& t : threads) t.join();
  return results;
}

// ---- one throughput run ----

struct RunFigures {
  int publishers = 0;
  std::uint64_t confirmed = 0;
  double seconds = 0, msgs_per_s = 0;
  Percentiles latency;
  std::optional<double> flushes_per_s;
  std::uint64_t flow_pauses = 0;
};

// Adds up the publishers' results; their errors go to `errors`.
RunFigures sum_up(std::vector<PublisherResult>& results, Clock::time_point start, std::vector<std::string>& errors) {
  RunFigures f;
  f.publishers = static_cast<int>(results.size());
  Clock::time_point end = start;
  std::vector<std::uint32_t> latencies;
  for (std::size_t i = 0; i < results.size(); ++i) {
    PublisherResult& r = results[i];
    if (!r.error.empty()) {
      errors.push_back("P=" + std::to_string(f.publishers) + " publisher " + std::to_string(i) + ": " + r.error);
    }
    f.confirmed += r.confirmed;
    f.flow_pauses += r.flow_pauses;
    end = std::max(end, r.last_confirm);
    latencies.insert(latencies.end(), r.latency_us.begin(), r.latency_us.end());
    std::vector<std::uint32_t>().swap(r.latency_us);
  }
  f.seconds = duration<double>(end - start).count();
  f.msgs_per_s = f.seconds > 0 ? f.confirmed / f.seconds : 0;
  f.latency = percentiles(latencies);
  return f;
}

std::optional<RunFigures> run(const Endpoint& e, const Options& o, int publishers, const std::string& tag,
                              const fs::path& data_dir, std::vector<std::string>& errors) {
  auto setup = kClient.connect(e);
  if (!setup) return std::nullopt;
  std::vector<std::unique_ptr<WireConnection>> wires;
  std::vector<std::string> queues;
  std::vector<PublisherSpec> specs;
  for (int i = 0; i < publishers; ++i) {
    wires.push_back(kClient.connect(e));
    if (!wires.back()) return std::nullopt;
    if (i == 0 || !o.shared_queue) {
      queues.push_back("bench-durable-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(i));
      if (!declare_durable_queue(kClient, *setup, queues.back(), false, seconds(60))) return std::nullopt;
    }
    specs.push_back(
        {queues.back(), o.size, o.window, o.count, seconds(o.confirm_timeout_s), static_cast<std::uint32_t>(i)});
  }
  const auto flushes_before = data_dir.empty() ? std::nullopt : disk_flushes(data_dir);
  Clock::time_point start;
  auto results = run_publishers(wires, specs, o.seconds, start);
  const auto flushes_after = data_dir.empty() ? std::nullopt : disk_flushes(data_dir);
  RunFigures f = sum_up(results, start, errors);
  if (flushes_before && flushes_after && f.seconds > 0) {
    f.flushes_per_s = (*flushes_after - *flushes_before) / f.seconds;
  }
  for (const auto& q : queues) {
    if (!delete_queue(*setup, q)) errors.push_back("could not delete " + q);
  }
  return f;
}

// ---- recovery ----

struct RecoveryFigures {
  std::uint64_t messages = 0;
  double publish_msgs_per_s = 0;
  double stop_ms = 0;               // SIGTERM until the process exited
  std::optional<double> broker_ms;  // the broker's own "recovered ... in X ms"
  std::uint64_t recovered = 0, segments = 0, records = 0;
  double start_to_port_ms = 0;  // process start until the port file was written
  std::uint64_t data_dir_bytes = 0;
  std::uint64_t count_after = 0;  // the queue's count after the restart
  int drained = 0;
};

// Fills `queue` with --recovery-count messages of 16 B from --recovery-publishers publishers; false when they
// are not all confirmed, or the queue does not hold them all.
bool fill_queue(const Endpoint& e, const Options& o, const std::string& queue, RecoveryFigures& f,
                std::vector<std::string>& errors) {
  auto setup = kClient.connect(e);
  if (!setup || !declare_durable_queue(kClient, *setup, queue, false, seconds(60))) return false;
  const int n = std::max(1, o.recovery_publishers);
  std::vector<std::unique_ptr<WireConnection>> wires;
  std::vector<PublisherSpec> specs;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t share = o.recovery_count / n + (static_cast<std::uint64_t>(i) < o.recovery_count % n ? 1 : 0);
    if (share == 0) continue;
    wires.push_back(kClient.connect(e));
    if (!wires.back()) return false;
    specs.push_back({queue, 16, o.window, share, seconds(o.confirm_timeout_s), static_cast<std::uint32_t>(1000 + i)});
  }
  Clock::time_point start;
  auto results = run_publishers(wires, specs, 0, start);
  std::uint64_t confirmed = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty()) {
      errors.push_back("recovery publisher " + std::to_string(i) + ": " + results[i].error);
    }
    confirmed += results[i].confirmed;
  }
  f.publish_msgs_per_s = confirmed / duration<double>(Clock::now() - start).count();
  if (confirmed != o.recovery_count) {
    errors.push_back("recovery: " + std::to_string(confirmed) + " of " + std::to_string(o.recovery_count) +
                     " publishes confirmed");
    return false;
  }
  auto before = declare_durable_queue(kClient, *setup, queue, true, seconds(60));
  if (!before || before->messages != o.recovery_count) {
    errors.push_back("recovery: before the restart the queue holds " +
                     (before ? std::to_string(before->messages) : "?") + " messages, expected " +
                     std::to_string(o.recovery_count));
  }
  return true;
}

// The broker's own figures from the log it wrote since `offset`: "recovered N messages from S segments (R records)
// in X ms".
void read_recovery_line(const fs::path& log, std::uintmax_t offset, RecoveryFigures& f,
                        std::vector<std::string>& errors) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string line;
  static const std::regex re(R"(recovered (\d+) messages from (\d+) segments \((\d+) records\) in ([0-9.]+) ms)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, re)) {
      f.recovered = std::stoull(m[1]);
      f.segments = std::stoull(m[2]);
      f.records = std::stoull(m[3]);
      f.broker_ms = std::stod(m[4]);
    }
  }
  if (!f.broker_ms) errors.push_back("recovery: no \"recovered ... in X ms\" line in " + log.string());
}

// SIGTERM, then the same broker started again on its data dir: how long the stop and the start took.
bool restart_timed(EmbeddedBroker& broker, RecoveryFigures& f, std::vector<std::string>& errors) {
  const auto t0 = Clock::now();
  const int status = broker.stop(60'000);
  f.stop_ms = ms(Clock::now() - t0);
  if (status != 0) errors.push_back("recovery: the broker's exit status after SIGTERM was " + std::to_string(status));
  f.data_dir_bytes = dir_bytes(broker.data_dir());
  std::error_code ec;
  const std::uintmax_t log_offset = fs::file_size(broker.log_file(), ec);
  // The broker is stopped already, so restart() only starts it, and returns once it has reported its port.
  const auto t1 = Clock::now();
  auto restarted = broker.restart(false);
  f.start_to_port_ms = ms(Clock::now() - t1);
  if (!restarted) {
    errors.push_back("recovery: " + restarted.error());
    return false;
  }
  read_recovery_line(broker.log_file(), ec ? 0 : log_offset, f, errors);
  return true;
}

// A get_ok of a 16-byte message with `remaining` messages left in the queue.
bool is_message_of_16_bytes(const conform::WireEvent& ev, std::uint64_t remaining) {
  auto* frame = std::get_if<conform::FrameEvent>(&ev);
  if (frame == nullptr) return false;
  auto decoded = decode_frame(frame->frame);
  const op::GetOk* ok = decoded ? std::get_if<op::GetOk>(&*decoded) : nullptr;
  return ok != nullptr && frame->frame.payload().size() == 16 && ok->remaining == remaining;
}

// After the restart: the queue's count, and 10 messages taken with get, each 16 B with the right remainder.
void check_recovered(WireConnection& wire, const Options& o, const std::string& queue, RecoveryFigures& f,
                     std::vector<std::string>& errors) {
  auto counted = declare_durable_queue(kClient, wire, queue, true, seconds(60));
  f.count_after = counted ? counted->messages : 0;
  if (f.count_after != o.recovery_count) {
    errors.push_back("recovery: after the restart the queue holds " + std::to_string(f.count_after) +
                     " messages, expected " + std::to_string(o.recovery_count));
  }
  for (int i = 0; i < 10 && static_cast<std::uint64_t>(i) < o.recovery_count; ++i) {
    const std::uint64_t remaining = o.recovery_count - 1 - i;
    wire.send(encode_frame(op::Get{static_cast<std::uint64_t>(10 + i), queue, true}), Clock::now() + seconds(5));
    if (!is_message_of_16_bytes(wire.receive(Clock::now() + seconds(10)), remaining)) {
      errors.push_back("recovery: get " + std::to_string(i + 1) + " did not return a 16-byte message with " +
                       std::to_string(remaining) + " remaining");
      break;
    }
    ++f.drained;
  }
}

std::optional<RecoveryFigures> recovery(EmbeddedBroker& broker, const Options& o, std::vector<std::string>& errors) {
  const std::string queue = "bench-recovery-" + std::to_string(::getpid());
  RecoveryFigures f;
  f.messages = o.recovery_count;
  if (!fill_queue(local_endpoint(broker.port()), o, queue, f, errors)) return std::nullopt;
  if (!restart_timed(broker, f, errors)) return std::nullopt;
  auto wire = kClient.connect(local_endpoint(broker.port()));
  if (!wire) return std::nullopt;
  check_recovered(*wire, o, queue, f, errors);
  if (!delete_queue(*wire, queue)) errors.push_back("recovery: could not delete " + queue);
  return f;
}

// ---- the command line ----

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

void add_flags(po::options_description& flags, Options& o, std::string& publishers_text) {
  flags.add_options()("help,h", "print this help and exit")(
      "url", po::value(&o.url),
      "the broker (fire://...); default: start the reference broker with a fresh data dir "
      "under the temp dir. With --url there is no fsync probe, no disk flush count and no "
      "recovery measurement")("broker", po::value(&o.broker)->default_value(o.broker),
                              "the reference broker executable")(
      "publishers", po::value(&publishers_text)->default_value(publishers_text),
      "publisher counts to run, comma-separated; each publisher has its own connection and thread")(
      "size", po::value(&o.size)->default_value(o.size), "message body size in bytes")(
      "window", po::value(&o.window)->default_value(o.window), "unconfirmed publishes allowed per publisher")(
      "seconds", po::value(&o.seconds)->default_value(o.seconds),
      "how long each throughput run publishes")("count", po::value(&o.count)->default_value(o.count),
                                                "publishes per publisher instead of --seconds (0: use --seconds)")(
      "runs", po::value(&o.runs)->default_value(o.runs), "how many times each publisher count is run")(
      "shared-queue", po::bool_switch(&o.shared_queue),
      "all publishers of a run publish to one durable queue (default: one durable queue per publisher)")(
      "recovery-count", po::value(&o.recovery_count)->default_value(o.recovery_count),
      "messages (16 B) stored before the restart of the recovery measurement; 0 skips it")(
      "recovery-publishers", po::value(&o.recovery_publishers)->default_value(o.recovery_publishers),
      "publishers that fill the recovery queue")(
      "fsync-samples", po::value(&o.fsync_samples)->default_value(o.fsync_samples),
      "fdatasync calls (16-byte appends) of the fsync probe in the data dir; 0 skips it")(
      "confirm-timeout", po::value(&o.confirm_timeout_s)->default_value(o.confirm_timeout_s),
      "seconds a publisher waits for its next confirm before it reports it missing")(
      "broker-arg", po::value(&o.broker_args)->multitoken(),
      "an extra flag for the embedded broker (repeatable), e.g. --broker-arg=--segment-bytes=1000000")(
      "keep-data", po::bool_switch(&o.keep_data), "keep the embedded broker's work dir (log and data dir)")(
      "json", po::bool_switch(&o.json), "print the figures as JSON");
}

// The options, or the exit code when there is nothing to run (--help, a bad flag).
std::variant<Options, int> parse_options(int argc, char** argv) {
  Options o;
  std::string publishers_text = "1,16";
  po::options_description flags("firemq-bench-durable [flags]");
  add_flags(flags, o, publishers_text);
  po::variables_map vm;
  if (auto exit_code = parse_flags(kClient.tool(), flags, argc, argv, vm)) return *exit_code;
  try {
    o.publishers = parse_list(publishers_text);
  } catch (const std::exception& e) {
    kClient.complain(e.what());
    return 2;
  }
  if (o.publishers.empty() || o.window == 0 || o.size == 0 || o.runs < 1 ||
      std::any_of(o.publishers.begin(), o.publishers.end(), [](int p) { return p < 1; })) {
    kClient.complain("--publishers, --window, --size and --runs must be positive");
    return 2;
  }
  return o;
}

// ---- the parts of a run, each printing its lines (unless --json) and adding its figures to the report ----

void print_heading(const Options& o) {
  std::cout << "firemq-bench-durable: persistent messages of " << o.size << " B with confirms, window " << o.window
            << ", " << queues_text(o) << ", "
            << (o.count ? std::to_string(o.count) + " publishes per publisher"
                        : (std::ostringstream() << o.seconds).str() + " s per run")
            << "\n";
}

void fsync_part(const Options& o, const fs::path& data_dir, Report& report) {
  auto p = probe_fsync(data_dir, o.fsync_samples);
  if (!p) {
    report.errors.push_back("fsync probe: cannot write and fdatasync in " + data_dir.string());
    return;
  }
  const double serial_per_s = p->median_ms > 0 ? 1000 / p->median_ms : 0;
  report.out["fsync_probe"] = {{"samples", o.fsync_samples},
                               {"median_ms", p->median_ms},
                               {"p99_ms", p->p99_ms},
                               {"serial_fsyncs_per_s", serial_per_s},
                               {"disk_flushes_per_fdatasync", p->flushes_per_sync}};
  if (o.json) return;
  std::cout << "fsync probe: 16-byte append + fdatasync in the data dir, " << o.fsync_samples << " times: median "
            << std::setprecision(3) << p->median_ms << " ms, p99 " << p->p99_ms << " ms (at most ~"
            << std::setprecision(0) << serial_per_s << " fsyncs/s one after another; " << std::setprecision(2)
            << p->flushes_per_sync << " disk flush requests each)\n";
}

void print_run_row(int publishers, int run_number, const RunFigures& f, bool ok) {
  std::cout << std::setw(11) << publishers << std::setw(5) << run_number << std::setw(12) << f.confirmed
            << std::setw(11) << std::setprecision(0) << f.msgs_per_s << std::setprecision(2) << std::setw(12)
            << f.latency.median_ms << std::setw(11) << f.latency.p99_ms << std::setw(11) << f.latency.max_ms
            << std::setw(17)
            << (f.flushes_per_s ? (std::ostringstream() << std::setprecision(0) << std::fixed << *f.flushes_per_s).str()
                                : "-")
            << (ok ? "" : "  FAILED") << "\n";
}

void throughput_part(const Options& o, const Endpoint& endpoint, const fs::path& data_dir, Report& report) {
  if (!o.json) {
    std::cout << "\n publishers  run   confirmed      msg/s   median ms     p99 ms     max ms   disk flushes/s\n";
  }
  report.out["throughput"] = Json::array();
  for (int publishers : o.publishers) {
    for (int i = 0; i < o.runs; ++i) {
      const std::size_t errors_before = report.errors.size();
      auto f = run(endpoint, o, publishers, std::to_string(publishers) + "-" + std::to_string(i), data_dir,
                   report.errors);
      if (!f) {
        report.errors.push_back("P=" + std::to_string(publishers) + ": the run could not be set up");
        continue;
      }
      const bool ok = report.errors.size() == errors_before;
      Json j = {{"publishers", publishers},
                {"run", i + 1},
                {"confirmed", f->confirmed},
                {"seconds", f->seconds},
                {"msgs_per_s", f->msgs_per_s},
                {"latency_median_ms", f->latency.median_ms},
                {"latency_p99_ms", f->latency.p99_ms},
                {"latency_max_ms", f->latency.max_ms},
                {"flow_pauses", f->flow_pauses},
                {"ok", ok}};
      if (f->flushes_per_s) j["disk_flushes_per_s"] = *f->flushes_per_s;
      report.out["throughput"].push_back(j);
      if (!o.json) print_run_row(publishers, i + 1, *f, ok);
    }
  }
}

void print_recovery(const RecoveryFigures& r) {
  std::cout << std::setprecision(0) << "  filled at " << r.publish_msgs_per_s << " msg/s; SIGTERM to exit " << r.stop_ms
            << " ms; data dir " << std::setprecision(1) << r.data_dir_bytes / 1048576.0 << " MiB ("
            << r.data_dir_bytes / r.messages << " B per message)\n"
            << "  broker: recovered " << r.recovered << " messages from " << r.segments << " segments (" << r.records
            << " records) in " << std::setprecision(0) << r.broker_ms.value_or(-1) << " ms\n"
            << "  process start to port reported: " << r.start_to_port_ms << " ms\n"
            << "  queue after restart: " << r.count_after << " messages; " << r.drained << " taken with get\n";
}

// On a broker of its own with a fresh data dir: the log of the throughput runs is not part of what it recovers.
void recovery_part(const Options& o, const fs::path& work_dir, Report& report) {
  if (!o.json) {
    std::cout << "\nrecovery: " << o.recovery_count << " messages of 16 B in one durable queue, filled by "
              << o.recovery_publishers << " publishers...\n";
  }
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.work_dir = work_dir / "recovery";
  eo.extra_args = o.broker_args;
  auto started = EmbeddedBroker::start(eo);
  if (!started) {
    report.errors.push_back("recovery: " + started.error());
    return;
  }
  auto r = recovery(**started, o, report.errors);
  if (!r) return;
  report.out["recovery"] = {{"messages", r->messages},
                            {"fill_msgs_per_s", r->publish_msgs_per_s},
                            {"stop_ms", r->stop_ms},
                            {"data_dir_bytes", r->data_dir_bytes},
                            {"broker_recovered", r->recovered},
                            {"segments", r->segments},
                            {"records", r->records},
                            {"start_to_port_ms", r->start_to_port_ms},
                            {"count_after_restart", r->count_after},
                            {"drained", r->drained}};
  if (r->broker_ms) report.out["recovery"]["broker_recovery_ms"] = *r->broker_ms;
  if (!o.json) print_recovery(*r);
}

// Every part the target allows (the fsync probe and the recovery need the embedded broker).
Report run_all(const Options& o, Measured& target, const fs::path& work_dir) {
  Report report;
  report.out = {{"body_bytes", o.size}, {"window", o.window}, {"queues", queues_text(o)}};
  const fs::path data_dir = target.embedded ? target.embedded->data_dir() : fs::path();
  std::cout << std::fixed;
  if (!o.json) print_heading(o);
  if (!data_dir.empty() && o.fsync_samples > 0) fsync_part(o, data_dir, report);
  throughput_part(o, target.endpoint, data_dir, report);
  const bool embedded = target.embedded != nullptr;
  target.embedded.reset();
  if (embedded && o.recovery_count > 0) {
    recovery_part(o, work_dir, report);
  } else if (!o.json && o.recovery_count > 0) {
    std::cout << "\nrecovery: skipped (only with the embedded reference broker)\n";
  }
  return report;
}

// Removes or names the work dir, prints the JSON and the errors; the exit code.
int finish(const Options& o, const fs::path& work_dir, Report& report) {
  if (o.url.empty() && !o.keep_data) {
    std::error_code ec;
    fs::remove_all(work_dir, ec);
  } else if (o.url.empty() && !o.json) {
    std::cout << "kept " << work_dir.string() << "\n";
  }
  report.out["errors"] = report.errors;
  if (o.json) std::cout << report.out.dump(2) << "\n";
  for (const auto& e : report.errors) kClient.complain(e);
  return report.errors.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (auto* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const Options& o = std::get<Options>(parsed);
  const fs::path work_dir = tool_work_dir(kClient.tool());
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.work_dir = work_dir;
  eo.extra_args = o.broker_args;
  auto target = open_target(o.url, eo);
  if (!target) {
    kClient.complain(target.error());
    return 2;
  }
  Report report = run_all(o, *target, work_dir);
  return finish(o, work_dir, report);
}
