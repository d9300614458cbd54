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

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
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

#include "harness/embedded_broker.h"
#include "harness/wire.h"
#include "protocol/messages.h"
#include "protocol/url.h"

extern char** environ;

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace firemq;
using namespace firemq::conform;
using namespace std::chrono;

namespace {


struct Options {
  std::string url, broker = FIREMQ_BROKER_PATH;
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

double ms(Clock::duration d) { return duration<double, std::milli>(d).count(); }

// ---- connections (as firemq-bench) ----

std::unique_ptr<WireConnection> open(const Endpoint& e) {
  auto wire = open_session(e, "firemq-bench-durable", Clock::now() + seconds(5));
  if (!wire) {
    std::cerr << "firemq-bench-durable: " << wire.error() << "\n";
    return nullptr;
  }
  return std::move(*wire);
}

// Sends a request and returns its ok (nullopt, with the reason on stderr, for anything else).
std::optional<op::Ok> request(WireConnection& wire, const Message& m, seconds timeout = seconds(60)) {
  const auto deadline = Clock::now() + timeout;
  wire.send(encode_frame(m), deadline);
  WireEvent ev = wire.receive(deadline);
  if (auto* f = std::get_if<FrameEvent>(&ev)) {
    auto decoded = decode_frame(f->frame);
    if (decoded) {
      if (auto* ok = std::get_if<op::Ok>(&*decoded)) return *ok;
      if (auto* err = std::get_if<op::Error>(&*decoded)) {
        std::cerr << "firemq-bench-durable: error " << err->code << ": " << err->msg << "\n";
        return std::nullopt;
      }
    }
  }
  std::cerr << "firemq-bench-durable: no ok for " << op_name(op_of(m)) << "\n";
  return std::nullopt;
}

std::optional<op::Ok> declare_durable(WireConnection& wire, const std::string& queue, bool passive) {
  op::DeclareQueue d;
  d.rid = 1;
  d.name = queue;
  d.durable = true;
  d.passive = passive;
  return request(wire, d);
}

bool delete_queue(WireConnection& wire, const std::string& queue) {
  op::DeleteQueue d;
  d.rid = 2;
  d.name = queue;
  return request(wire, d, seconds(300)).has_value();
}

// ---- the publisher ----

struct PublisherResult {
  std::uint64_t published = 0, confirmed = 0;
  std::vector<std::uint32_t> latency_us;  // one per confirmed publish
  Clock::time_point last_confirm{};
  std::uint64_t flow_pauses = 0;
  std::string error;
};

// Publishes persistent messages with confirms to `queue` until `stop_at` (or `count` of them), with at most
// `window` unconfirmed, then waits for the last confirms.
void publish(WireConnection& wire, const std::string& queue, std::size_t size, std::uint64_t window,
             std::uint64_t count, const std::atomic<Clock::time_point>& stop_at, const std::atomic<bool>& go,
             seconds confirm_timeout, std::uint32_t publisher_id, PublisherResult& r) {
  std::vector<Clock::time_point> sent(window);
  Bytes body(size, 0x42), batch;
  op::Publish p;
  p.key = queue;
  p.persistent = true;
  bool paused = false;
  r.latency_us.reserve(count != 0 ? count : 1 << 20);
  while (!go.load()) std::this_thread::yield();
  for (;;) {
    const bool more = count != 0 ? r.published < count : Clock::now() < stop_at.load();
    if (more && !paused && r.published - r.confirmed < window) {
      batch.clear();
      const std::uint64_t first = r.published + 1;
      while (r.published - r.confirmed < window && (count == 0 || r.published < count)) {
        p.seq = ++r.published;
        // The body says whose and which message it is (as far as it has room): a recovered message can be told.
        for (std::size_t i = 0; i < std::min<std::size_t>(size, 8); ++i) body[i] = static_cast<std::uint8_t>(p.seq >> (8 * (7 - i)));
        for (std::size_t i = 8; i < std::min<std::size_t>(size, 12); ++i) body[i] = static_cast<std::uint8_t>(publisher_id >> (8 * (11 - i)));
        const Bytes frame = encode_frame(p, body);
        batch.insert(batch.end(), frame.begin(), frame.end());
      }
      const auto now = Clock::now();
      for (std::uint64_t s = first; s <= r.published; ++s) sent[s % window] = now;
      if (!wire.send(batch, now + confirm_timeout)) {
        r.error = "the connection broke while publishing";
        return;
      }
    }
    if (r.published == r.confirmed && !paused) {
      if (!more) return;
      continue;
    }
    WireEvent ev = wire.receive(Clock::now() + confirm_timeout);
    const auto now = Clock::now();
    if (std::holds_alternative<TimeoutEvent>(ev)) {
      r.error = paused ? "paused by flow control for " + std::to_string(confirm_timeout.count()) + " s"
                       : "no confirm for seq " + std::to_string(r.confirmed + 1) + ".." + std::to_string(r.published) +
                             " within " + std::to_string(confirm_timeout.count()) + " s";
      return;
    }
    if (auto* c = std::get_if<ClosedEvent>(&ev)) {
      r.error = "connection closed: " + c->how;
      return;
    }
    if (auto* b = std::get_if<BadFramingEvent>(&ev)) {
      r.error = "bad framing from the broker: " + b->error.msg;
      return;
    }
    auto decoded = decode_frame(std::get<FrameEvent>(ev).frame);
    if (!decoded) {
      r.error = "undecodable frame from the broker: " + decoded.error().msg;
      return;
    }
    if (auto* c = std::get_if<op::Confirm>(&*decoded)) {
      if (c->nack) {
        r.error = "nack for seq " + std::to_string(c->seq) + " (" + std::to_string(c->code) + " " + c->msg + ")";
        return;
      }
      if (c->upto > r.published) {
        r.error = "confirm upto " + std::to_string(c->upto) + " beyond the last publish " + std::to_string(r.published);
        return;
      }
      for (std::uint64_t s = r.confirmed + 1; s <= c->upto; ++s) {
        r.latency_us.push_back(static_cast<std::uint32_t>(duration_cast<microseconds>(now - sent[s % window]).count()));
      }
      if (c->upto > r.confirmed) {
        r.confirmed = c->upto;
        r.last_confirm = now;
      }
    } else if (auto* f = std::get_if<op::Flow>(&*decoded)) {
      if (f->pause && !paused) ++r.flow_pauses;
      paused = f->pause;
    } else if (auto* e = std::get_if<op::Error>(&*decoded)) {
      r.error = "error " + std::to_string(e->code) + ": " + e->msg;
      return;
    } else if (auto* cl = std::get_if<op::Close>(&*decoded)) {
      r.error = "closed by the broker: " + std::to_string(cl->code) + " " + cl->msg;
      return;
    }
  }
}

// ---- machine figures ----

// Flush requests completed by the block device holding `dir` (/proc/diskstats, kernel 4.18+); nullopt when
// not found. Machine-wide: every process's fsyncs count.
std::optional<std::uint64_t> disk_flushes(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  std::ifstream in("/proc/diskstats");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    unsigned major_no = 0, minor_no = 0;
    std::string name;
    fields >> major_no >> minor_no >> name;
    if (major_no != major(st.st_dev) || minor_no != minor(st.st_dev)) continue;
    std::vector<std::uint64_t> v;
    std::uint64_t x;
    while (fields >> x) v.push_back(x);
    if (v.size() >= 17) return v[15];
    return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t dir_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

struct Percentiles {
  double median_ms = 0, p99_ms = 0, max_ms = 0;
};

Percentiles percentiles(std::vector<std::uint32_t>& us) {
  if (us.empty()) return {};
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<std::size_t>(q * (us.size() - 1) + 0.5))] / 1000.0; };
  return {at(0.5), at(0.99), us.back() / 1000.0};
}

// What one fdatasync of a 16-byte append costs in `dir`: the median of `samples`, in ms.
struct FsyncProbe {
  double median_ms = 0, p99_ms = 0;
  double flushes_per_sync = 0;  // device flush requests per fdatasync (machine-wide count)
};

std::optional<FsyncProbe> probe_fsync(const fs::path& dir, int samples) {
  const fs::path file = dir / "fsync-probe";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return std::nullopt;
  std::vector<std::uint32_t> us;
  const char bytes[16] = "firemq fsync 16";
  const auto flushes_before = disk_flushes(dir);
  for (int i = 0; i < samples; ++i) {
    const auto t0 = Clock::now();
    if (::write(fd, bytes, sizeof bytes) != sizeof bytes || ::fdatasync(fd) != 0) {
      ::close(fd);
      return std::nullopt;
    }
    us.push_back(static_cast<std::uint32_t>(duration_cast<microseconds>(Clock::now() - t0).count()));
  }
  const auto flushes_after = disk_flushes(dir);
  ::close(fd);
  fs::remove(file);
  Percentiles p = percentiles(us);
  FsyncProbe probe{p.median_ms, p.p99_ms, 0};
  if (flushes_before && flushes_after) probe.flushes_per_sync = double(*flushes_after - *flushes_before) / samples;
  return probe;
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

std::optional<RunFigures> run(const Endpoint& e, const Options& o, int publishers, const std::string& tag,
                              const fs::path& data_dir, std::vector<std::string>& errors) {
  auto setup = open(e);
  if (!setup) return std::nullopt;
  std::vector<std::unique_ptr<WireConnection>> wires;
  std::vector<std::string> queues;
  for (int i = 0; i < publishers; ++i) {
    wires.push_back(open(e));
    if (!wires.back()) return std::nullopt;
    if (i == 0 || !o.shared_queue) {
      queues.push_back("bench-durable-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(i));
      if (!declare_durable(*setup, queues.back(), false)) return std::nullopt;
    }
  }
  std::vector<PublisherResult> results(publishers);
  std::atomic<bool> go{false};
  std::atomic<Clock::time_point> stop_at{Clock::time_point::max()};
  std::vector<std::thread> threads;
  for (int i = 0; i < publishers; ++i) {
    threads.emplace_back(publish, std::ref(*wires[i]), queues[o.shared_queue ? 0 : i], o.size, o.window, o.count,
                         std::cref(stop_at), std::cref(go), seconds(o.confirm_timeout_s), i, std::ref(results[i]));
  }
  const auto flushes_before = data_dir.empty() ? std::nullopt : disk_flushes(data_dir);
  const auto start = Clock::now();
  stop_at = start + duration_cast<Clock::duration>(duration<double>(o.seconds));
  go = true;
  for (auto& t : threads) t.join();
  const auto flushes_after = data_dir.empty() ? std::nullopt : disk_flushes(data_dir);

  RunFigures f;
  f.publishers = publishers;
  Clock::time_point end = start;
  std::vector<std::uint32_t> latencies;
  for (int i = 0; i < publishers; ++i) {
    PublisherResult& r = results[i];
    if (!r.error.empty()) errors.push_back("P=" + std::to_string(publishers) + " publisher " + std::to_string(i) + ": " + r.error);
    f.confirmed += r.confirmed;
    f.flow_pauses += r.flow_pauses;
    end = std::max(end, r.last_confirm);
    latencies.insert(latencies.end(), r.latency_us.begin(), r.latency_us.end());
    std::vector<std::uint32_t>().swap(r.latency_us);
  }
  f.seconds = duration<double>(end - start).count();
  f.msgs_per_s = f.seconds > 0 ? f.confirmed / f.seconds : 0;
  f.latency = percentiles(latencies);
  if (flushes_before && flushes_after && f.seconds > 0) f.flushes_per_s = (*flushes_after - *flushes_before) / f.seconds;
  for (const auto& q : queues) {
    if (!delete_queue(*setup, q)) errors.push_back("could not delete " + q);
  }
  return f;
}

// ---- recovery ----

struct RecoveryFigures {
  std::uint64_t messages = 0;
  double publish_msgs_per_s = 0;
  double stop_ms = 0;                   // SIGTERM until the process exited
  std::optional<double> broker_ms;      // the broker's own "recovered ... in X ms"
  std::uint64_t recovered = 0, segments = 0, records = 0;
  double start_to_port_ms = 0;          // process start until the port file was written
  std::uint64_t data_dir_bytes = 0;
  std::uint64_t count_after = 0;        // the queue's count after the restart
  int drained = 0;
};

// A broker process of our own for the restart, so that its start is timed closely (the port file is polled
// every millisecond) and a long recovery is waited for (up to 10 minutes).
struct Spawned {
  pid_t pid = 0;
  std::uint16_t port = 0;
  double start_to_port_ms = 0;
  ~Spawned() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int status = 0;
      for (int i = 0; i < 3000 && ::waitpid(pid, &status, WNOHANG) != pid; ++i) std::this_thread::sleep_for(milliseconds(10));
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

std::optional<std::uint16_t> read_port(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.contains("fire")) return std::nullopt;
  return json.at("fire").get<std::uint16_t>();
}

bool spawn_broker(const std::string& broker, const std::vector<std::string>& extra_args, const fs::path& work_dir, const fs::path& data_dir, const fs::path& log,
                  Spawned& out, std::string& error) {
  const fs::path port_file = work_dir / "ports-restart.json";
  fs::remove(port_file);
  std::vector<std::string> args = {broker, "--bind", "127.0.0.1", "--port", "0", "--ws-port", "off", "--port-file", port_file.string(),
                                   "--data-dir", data_dir.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const auto t0 = Clock::now();
  const int rc = ::posix_spawn(&out.pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    out.pid = 0;
    error = "cannot start " + broker;
    return false;
  }
  while (Clock::now() - t0 < minutes(10)) {
    if (auto port = read_port(port_file)) {
      out.port = *port;
      out.start_to_port_ms = ms(Clock::now() - t0);
      return true;
    }
    int status = 0;
    if (::waitpid(out.pid, &status, WNOHANG) == out.pid) {
      out.pid = 0;
      error = "the restarted broker exited:\n" + tail_of(log);
      return false;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  error = "the restarted broker did not report its port within 10 minutes";
  return false;
}

std::optional<RecoveryFigures> recovery(EmbeddedBroker& broker, const Options& o, const fs::path& work_dir,
                                        std::vector<std::string>& errors) {
  Endpoint e{"127.0.0.1", broker.port(), "guest", "guest", "/"};
  const std::string queue = "bench-recovery-" + std::to_string(::getpid());
  RecoveryFigures f;
  f.messages = o.recovery_count;
  {
    auto setup = open(e);
    if (!setup || !declare_durable(*setup, queue, false)) return std::nullopt;
    const int n = std::max(1, o.recovery_publishers);
    std::vector<std::unique_ptr<WireConnection>> wires;
    std::vector<PublisherResult> results(n);
    std::atomic<bool> go{false};
    std::atomic<Clock::time_point> stop_at{Clock::time_point::max()};
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      wires.push_back(open(e));
      if (!wires.back()) return std::nullopt;
      const std::uint64_t share = o.recovery_count / n + (static_cast<std::uint64_t>(i) < o.recovery_count % n ? 1 : 0);
      if (share == 0) continue;
      threads.emplace_back(publish, std::ref(*wires[i]), queue, std::size_t{16}, o.window, share, std::cref(stop_at),
                           std::cref(go), seconds(o.confirm_timeout_s), 1000 + i, std::ref(results[i]));
    }
    const auto start = Clock::now();
    go = true;
    for (auto& t : threads) t.join();
    std::uint64_t confirmed = 0;
    for (int i = 0; i < n; ++i) {
      if (!results[i].error.empty()) errors.push_back("recovery publisher " + std::to_string(i) + ": " + results[i].error);
      confirmed += results[i].confirmed;
    }
    f.publish_msgs_per_s = confirmed / duration<double>(Clock::now() - start).count();
    if (confirmed != o.recovery_count) {
      errors.push_back("recovery: " + std::to_string(confirmed) + " of " + std::to_string(o.recovery_count) + " publishes confirmed");
      return std::nullopt;
    }
    auto before = declare_durable(*setup, queue, true);
    if (!before || before->messages != o.recovery_count) {
      errors.push_back("recovery: before the restart the queue holds " + (before ? std::to_string(before->messages) : "?") +
                       " messages, expected " + std::to_string(o.recovery_count));
    }
  }  // connections closed before the stop
  const auto t0 = Clock::now();
  const int status = broker.stop(60'000);
  f.stop_ms = ms(Clock::now() - t0);
  if (status != 0) errors.push_back("recovery: the broker's exit status after SIGTERM was " + std::to_string(status));
  f.data_dir_bytes = dir_bytes(broker.data_dir());

  Spawned restarted;
  std::string error;
  const fs::path log = work_dir / "broker-restart.log";
  if (!spawn_broker(o.broker, o.broker_args, work_dir, broker.data_dir(), log, restarted, error)) {
    errors.push_back("recovery: " + error);
    return std::nullopt;
  }
  f.start_to_port_ms = restarted.start_to_port_ms;
  {
    std::ifstream in(log);
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
  Endpoint after{"127.0.0.1", restarted.port, "guest", "guest", "/"};
  auto wire = open(after);
  if (!wire) return std::nullopt;
  auto counted = declare_durable(*wire, queue, true);
  f.count_after = counted ? counted->messages : 0;
  if (f.count_after != o.recovery_count) {
    errors.push_back("recovery: after the restart the queue holds " + std::to_string(f.count_after) + " messages, expected " +
                     std::to_string(o.recovery_count));
  }
  for (int i = 0; i < 10 && static_cast<std::uint64_t>(i) < o.recovery_count; ++i) {
    op::Get get;
    get.rid = 10 + i;
    get.queue = queue;
    get.no_ack = true;
    wire->send(encode_frame(get), Clock::now() + seconds(5));
    WireEvent ev = wire->receive(Clock::now() + seconds(10));
    auto* fr = std::get_if<FrameEvent>(&ev);
    const op::GetOk* ok = nullptr;
    std::optional<Message> decoded;
    if (fr != nullptr) {
      if (auto d = decode_frame(fr->frame)) decoded = std::move(*d);
    }
    if (decoded) ok = std::get_if<op::GetOk>(&*decoded);
    if (ok == nullptr || fr->frame.payload().size() != 16 || ok->remaining != o.recovery_count - 1 - i) {
      errors.push_back("recovery: get " + std::to_string(i + 1) + " did not return a 16-byte message with " +
                       std::to_string(o.recovery_count - 1 - i) + " remaining");
      break;
    }
    ++f.drained;
  }
  if (!delete_queue(*wire, queue)) errors.push_back("recovery: could not delete " + queue);
  return f;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string publishers_text = "1,16";
  po::options_description flags("firemq-bench-durable [flags]");
  flags.add_options()("help,h", "print this help and exit")
      ("url", po::value(&o.url), "the broker (fire://...); default: start the reference broker with a fresh data dir "
                                 "under the temp dir. With --url there is no fsync probe, no disk flush count and no "
                                 "recovery measurement")
      ("broker", po::value(&o.broker)->default_value(o.broker), "the reference broker executable")
      ("publishers", po::value(&publishers_text)->default_value(publishers_text),
       "publisher counts to run, comma-separated; each publisher has its own connection and thread")
      ("size", po::value(&o.size)->default_value(o.size), "message body size in bytes")
      ("window", po::value(&o.window)->default_value(o.window), "unconfirmed publishes allowed per publisher")
      ("seconds", po::value(&o.seconds)->default_value(o.seconds), "how long each throughput run publishes")
      ("count", po::value(&o.count)->default_value(o.count), "publishes per publisher instead of --seconds (0: use --seconds)")
      ("runs", po::value(&o.runs)->default_value(o.runs), "how many times each publisher count is run")
      ("shared-queue", po::bool_switch(&o.shared_queue),
       "all publishers of a run publish to one durable queue (default: one durable queue per publisher)")
      ("recovery-count", po::value(&o.recovery_count)->default_value(o.recovery_count),
       "messages (16 B) stored before the restart of the recovery measurement; 0 skips it")
      ("recovery-publishers", po::value(&o.recovery_publishers)->default_value(o.recovery_publishers),
       "publishers that fill the recovery queue")
      ("fsync-samples", po::value(&o.fsync_samples)->default_value(o.fsync_samples),
       "fdatasync calls (16-byte appends) of the fsync probe in the data dir; 0 skips it")
      ("confirm-timeout", po::value(&o.confirm_timeout_s)->default_value(o.confirm_timeout_s),
       "seconds a publisher waits for its next confirm before it reports it missing")
      ("broker-arg", po::value(&o.broker_args)->multitoken(),
       "an extra flag for the embedded broker (repeatable), e.g. --broker-arg=--segment-bytes=1000000")
      ("keep-data", po::bool_switch(&o.keep_data), "keep the embedded broker's work dir (log and data dir)")
      ("json", po::bool_switch(&o.json), "print the figures as JSON");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
    o.publishers = parse_list(publishers_text);
  } catch (const std::exception& e) {
    std::cerr << "firemq-bench-durable: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  if (o.publishers.empty() || o.window == 0 || o.size == 0 || o.runs < 1 ||
      std::any_of(o.publishers.begin(), o.publishers.end(), [](int p) { return p < 1; })) {
    std::cerr << "firemq-bench-durable: --publishers, --window, --size and --runs must be positive\n";
    return 2;
  }

  std::unique_ptr<EmbeddedBroker> embedded;
  Endpoint endpoint{"127.0.0.1", 0, "guest", "guest", "/"};
  const fs::path work_dir = fs::temp_directory_path() / ("firemq-bench-durable-" + std::to_string(::getpid()));
  fs::path data_dir;
  if (o.url.empty()) {
    EmbeddedOptions eo;
    eo.broker_path = o.broker;
    eo.work_dir = work_dir;
    eo.extra_args = o.broker_args;
    auto started = EmbeddedBroker::start(eo);
    if (!started) {
      std::cerr << "firemq-bench-durable: " << started.error() << "\n";
      return 2;
    }
    embedded = std::move(*started);
    endpoint.port = embedded->port();
    data_dir = embedded->data_dir();
  } else {
    auto parsed = parse_url(o.url);
    if (!parsed || parsed->tls || parsed->websocket) {
      std::cerr << "firemq-bench-durable: --url must be a fire:// URL\n";
      return 2;
    }
    endpoint = {parsed->host, parsed->port, parsed->user, parsed->password, parsed->vhost};
  }

  std::vector<std::string> errors;
  nlohmann::json out = {{"body_bytes", o.size}, {"window", o.window},
                        {"queues", o.shared_queue ? "one shared durable queue" : "one durable queue per publisher"}};
  std::cout << std::fixed;
  if (!o.json) {
    std::cout << "firemq-bench-durable: persistent messages of " << o.size << " B with confirms, window " << o.window
              << ", " << (o.shared_queue ? "one shared durable queue" : "one durable queue per publisher") << ", "
              << (o.count ? std::to_string(o.count) + " publishes per publisher" : (std::ostringstream() << o.seconds).str() + " s per run")
              << "\n";
  }
  if (!data_dir.empty() && o.fsync_samples > 0) {
    if (auto p = probe_fsync(data_dir, o.fsync_samples)) {
      out["fsync_probe"] = {{"samples", o.fsync_samples}, {"median_ms", p->median_ms}, {"p99_ms", p->p99_ms},
                            {"serial_fsyncs_per_s", p->median_ms > 0 ? 1000 / p->median_ms : 0},
                            {"disk_flushes_per_fdatasync", p->flushes_per_sync}};
      if (!o.json) {
        std::cout << "fsync probe: 16-byte append + fdatasync in the data dir, " << o.fsync_samples << " times: median "
                  << std::setprecision(3) << p->median_ms << " ms, p99 " << p->p99_ms << " ms (at most ~"
                  << std::setprecision(0) << (p->median_ms > 0 ? 1000 / p->median_ms : 0)
                  << " fsyncs/s one after another; " << std::setprecision(2) << p->flushes_per_sync
                  << " disk flush requests each)\n";
      }
    } else {
      errors.push_back("fsync probe: cannot write and fdatasync in " + data_dir.string());
    }
  }

  if (!o.json) {
    std::cout << "\n publishers  run   confirmed      msg/s   median ms     p99 ms     max ms   disk flushes/s\n";
  }
  out["throughput"] = nlohmann::json::array();
  for (int publishers : o.publishers) {
    for (int i = 0; i < o.runs; ++i) {
      const std::size_t errors_before = errors.size();
      auto f = run(endpoint, o, publishers, std::to_string(publishers) + "-" + std::to_string(i), data_dir, errors);
      if (!f) {
        errors.push_back("P=" + std::to_string(publishers) + ": the run could not be set up");
        continue;
      }
      nlohmann::json j = {{"publishers", publishers}, {"run", i + 1}, {"confirmed", f->confirmed}, {"seconds", f->seconds},
                          {"msgs_per_s", f->msgs_per_s}, {"latency_median_ms", f->latency.median_ms},
                          {"latency_p99_ms", f->latency.p99_ms}, {"latency_max_ms", f->latency.max_ms},
                          {"flow_pauses", f->flow_pauses}, {"ok", errors.size() == errors_before}};
      if (f->flushes_per_s) j["disk_flushes_per_s"] = *f->flushes_per_s;
      out["throughput"].push_back(j);
      if (!o.json) {
        std::cout << std::setw(11) << publishers << std::setw(5) << i + 1 << std::setw(12) << f->confirmed << std::setw(11)
                  << std::setprecision(0) << f->msgs_per_s << std::setprecision(2) << std::setw(12) << f->latency.median_ms
                  << std::setw(11) << f->latency.p99_ms << std::setw(11) << f->latency.max_ms << std::setw(17)
                  << (f->flushes_per_s ? (std::ostringstream() << std::setprecision(0) << std::fixed << *f->flushes_per_s).str() : "-")
                  << (errors.size() == errors_before ? "" : "  FAILED") << "\n";
      }
    }
  }

  if (embedded && o.recovery_count > 0) {
    if (!o.json) std::cout << "\nrecovery: " << o.recovery_count << " messages of 16 B in one durable queue, filled by "
                           << o.recovery_publishers << " publishers...\n";
    // A broker of its own with a fresh data dir: the log of the throughput runs is not part of what it recovers.
    embedded.reset();
    EmbeddedOptions eo;
    eo.broker_path = o.broker;
    eo.work_dir = work_dir / "recovery";
    eo.extra_args = o.broker_args;
    auto started = EmbeddedBroker::start(eo);
    if (!started) {
      errors.push_back("recovery: " + started.error());
    } else if (auto r = recovery(**started, o, eo.work_dir, errors)) {
      out["recovery"] = {{"messages", r->messages}, {"fill_msgs_per_s", r->publish_msgs_per_s}, {"stop_ms", r->stop_ms},
                         {"data_dir_bytes", r->data_dir_bytes}, {"broker_recovered", r->recovered},
                         {"segments", r->segments}, {"records", r->records}, {"start_to_port_ms", r->start_to_port_ms},
                         {"count_after_restart", r->count_after}, {"drained", r->drained}};
      if (r->broker_ms) out["recovery"]["broker_recovery_ms"] = *r->broker_ms;
      if (!o.json) {
        std::cout << std::setprecision(0) << "  filled at " << r->publish_msgs_per_s << " msg/s; SIGTERM to exit "
                  << r->stop_ms << " ms; data dir " << std::setprecision(1) << r->data_dir_bytes / 1048576.0 << " MiB ("
                  << r->data_dir_bytes / r->messages << " B per message)\n"
                  << "  broker: recovered " << r->recovered << " messages from " << r->segments << " segments ("
                  << r->records << " records) in " << std::setprecision(0) << r->broker_ms.value_or(-1) << " ms\n"
                  << "  process start to port reported: " << r->start_to_port_ms << " ms\n"
                  << "  queue after restart: " << r->count_after << " messages; " << r->drained << " taken with get\n";
      }
    }
  } else if (!o.json && o.recovery_count > 0) {
    std::cout << "\nrecovery: skipped (only with the embedded reference broker)\n";
  }
  embedded.reset();
  if (o.url.empty() && !o.keep_data) {
    std::error_code ec;
    fs::remove_all(work_dir, ec);
  } else if (o.url.empty() && !o.json) {
    std::cout << "kept " << work_dir.string() << "\n";
  }
  out["errors"] = errors;
  if (o.json) std::cout << out.dump(2) << "\n";
  for (const auto& e : errors) std::cerr << "firemq-bench-durable: " << e << "\n";
  return errors.empty() ? 0 : 1;
}
