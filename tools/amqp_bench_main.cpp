// firemq-amqp-bench: an AMQP 0-9-1 load generator on rabbitmq-c, measuring as RabbitMQ's PerfTest does, so that
// the same run can be pointed at the reference broker's AMQP port and at RabbitMQ (scripts/bench-amqp-vs-
// rabbitmq.sh runs the matrix of docs/benchmarks.md against both).
//
// One run: a queue of its own (durable for --persistent, deleted at the end) or --queue; --consumers subscribe
// with --prefetch and ack each delivery (or every --multi-ack-every, or --auto-ack); then --producers producers
// publish --size-byte bodies to it through the default exchange for --time seconds (or --count each), as fast as
// they can or at --rate each, with --confirm N publisher confirms (1: synchronous, N: at most N unconfirmed).
// --batch N writes N publishes at a time, framed by the bench, as a client with a write buffer does, instead of
// rabbitmq-c's system call per frame. Every producer and consumer has its own thread and connection. Reported: the rates sent, confirmed and
// received, and the latencies (publish to delivery, and publish to confirm) as percentiles.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <variant>

#include "tools/amqp_bench_connection.h"
#include "tools/amqp_bench_roles.h"

namespace po = boost::program_options;
using namespace firemq::amqp_bench;
using namespace std::chrono;

namespace {

const char* const kTool = "firemq-amqp-bench";
// A run that has not ended this long after its deadline (a broker that stopped reading, say) is abandoned.
constexpr auto kWatchdogGrace = seconds(90);

struct Options {
  std::string url = "amqp://guest:guest@127.0.0.1:5672";  // no path: vhost "/" ("/" alone would be vhost "")
  std::string queue;                                      // default: a fresh one per run, deleted at the end
  int producers = 1, consumers = 1;
  RunPlan plan;
  double time_seconds = 5;
  bool json = false;
};

// ---- the figures ----

struct Percentiles {
  std::size_t samples = 0;
  double p50_us = 0, p95_us = 0, p99_us = 0, max_us = 0;
};

Percentiles percentiles(std::vector<std::uint64_t> ns) {
  Percentiles p;
  p.samples = ns.size();
  if (ns.empty()) return p;
  auto at = [&](double q) {
    auto nth = ns.begin() + static_cast<std::ptrdiff_t>(q * static_cast<double>(ns.size() - 1));
    std::nth_element(ns.begin(), nth, ns.end());
    return static_cast<double>(*nth) / 1000.0;
  };
  p.p50_us = at(0.50);
  p.p95_us = at(0.95);
  p.p99_us = at(0.99);
  p.max_us = static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1000.0;
  return p;
}

struct Report {
  std::uint64_t published = 0, confirmed = 0, nacked = 0, received = 0;
  double sent_per_s = 0, confirmed_per_s = 0, received_per_s = 0;
  Percentiles latency, confirm_latency;
  bool blocked = false;
};

// `count` events over the time from the start to the last of them.
double rate(std::uint64_t count, Clock::time_point start, Clock::time_point last) {
  const double seconds = duration<double>(last - start).count();
  return count == 0 || seconds <= 0 ? 0 : static_cast<double>(count) / seconds;
}

Report summarize(Clock::time_point start, const std::vector<ProducerFigures>& producers,
                 const std::vector<ConsumerFigures>& consumers) {
  Report r;
  Clock::time_point last_publish = start, last_confirm = start, last_receive = start;
  std::vector<std::uint64_t> latencies, confirm_latencies;
  for (const auto& p : producers) {
    r.published += p.published;
    r.confirmed += p.confirmed;
    r.nacked += p.nacked;
    r.blocked = r.blocked || p.blocked;
    last_publish = std::max(last_publish, p.last_publish);
    last_confirm = std::max(last_confirm, p.last_confirm);
    confirm_latencies.insert(confirm_latencies.end(), p.confirm_latency_ns.begin(), p.confirm_latency_ns.end());
  }
  for (const auto& c : consumers) {
    r.received += c.received;
    last_receive = std::max(last_receive, c.last_receive);
    latencies.insert(latencies.end(), c.latency_ns.begin(), c.latency_ns.end());
  }
  r.sent_per_s = rate(r.published, start, last_publish);
  r.confirmed_per_s = rate(r.confirmed, start, last_confirm);
  r.received_per_s = rate(r.received, start, last_receive);
  r.latency = percentiles(std::move(latencies));
  r.confirm_latency = percentiles(std::move(confirm_latencies));
  return r;
}

// ---- one run ----

// Exits the process if the run is still going `grace` after its deadline: a report late is better than a hang.
void start_watchdog(duration<double> run_time, const std::atomic<bool>& finished) {
  std::thread([run_time, &finished] {
    const auto give_up = Clock::now() + duration_cast<Clock::duration>(run_time) + kWatchdogGrace;
    while (!finished && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(100));
    if (finished) return;
    std::cerr << kTool << ": the run did not end within " << kWatchdogGrace.count()
              << " s after its deadline (is the broker blocking publishers?)\n";
    std::_Exit(1);
  }).detach();
}

// Runs the producers and consumers; the report, or the first error.
std::variant<Report, std::string> run(const BrokerAddress& address, const Options& o) {
  Connection setup(address);
  setup.declare_queue(o.plan.queue, o.plan.persistent);
  StartLine line(o.producers + o.consumers);
  std::vector<ProducerFigures> producer_figures(o.producers);
  std::vector<ConsumerFigures> consumer_figures(o.consumers);
  DeliveryCounter delivered{0};
  static std::atomic<bool> finished{false};  // static: the watchdog's thread outlives this call
  start_watchdog(o.plan.seconds + seconds(5), finished);
  std::vector<std::thread> threads;
  for (auto& f : consumer_figures)
    threads.emplace_back(run_consumer, std::cref(address), std::cref(o.plan), std::ref(line), std::ref(delivered),
                         std::ref(f));
  for (auto& f : producer_figures)
    threads.emplace_back(run_producer, std::cref(address), std::cref(o.plan), std::ref(line), std::ref(f));
  for (auto& t : threads) t.join();
  finished = true;
  if (line.aborted()) return line.error();
  if (o.queue.empty()) setup.delete_queue(o.plan.queue);  // a --queue stays, with what the run left in it
  return summarize(line.start_time(), producer_figures, consumer_figures);
}

// ---- the report ----

std::string describe_plan(const Options& o) {
  std::ostringstream out;
  const RunPlan& p = o.plan;
  out << o.producers << " producer(s), " << o.consumers << " consumer(s), " << p.body_size << " B, "
      << (p.persistent ? "persistent" : "transient") << ", confirms "
      << (p.confirm_window == 0   ? std::string("off")
          : p.confirm_window == 1 ? std::string("sync")
                                  : "window " + std::to_string(p.confirm_window));
  if (o.consumers > 0) out << ", " << (p.auto_ack ? std::string("auto-ack") : "prefetch " + std::to_string(p.prefetch));
  if (p.rate > 0) out << ", " << p.rate << " msg/s per producer";
  if (p.batch > 0) out << ", " << p.batch << " publishes per write";
  out << ", " << o.time_seconds << " s";
  if (p.count > 0) out << " or " << p.count << " messages per producer";
  return out.str();
}

nlohmann::json to_json(const Percentiles& p) {
  return {
      {"samples", p.samples}, {"p50_us", p.p50_us}, {"p95_us", p.p95_us}, {"p99_us", p.p99_us}, {"max_us", p.max_us}};
}

nlohmann::json to_json(const Options& o, const Report& r) {
  const RunPlan& p = o.plan;
  return {{"url", o.url},
          {"producers", o.producers},
          {"consumers", o.consumers},
          {"body_bytes", p.body_size},
          {"persistent", p.persistent},
          {"confirm_window", p.confirm_window},
          {"prefetch", p.prefetch},
          {"auto_ack", p.auto_ack},
          {"rate_per_producer", p.rate},
          {"publishes_per_write", p.batch},
          {"seconds", o.time_seconds},
          {"published", r.published},
          {"confirmed", r.confirmed},
          {"nacked", r.nacked},
          {"received", r.received},
          {"sent_msgs_per_s", r.sent_per_s},
          {"confirmed_msgs_per_s", r.confirmed_per_s},
          {"received_msgs_per_s", r.received_per_s},
          {"latency", to_json(r.latency)},
          {"confirm_latency", to_json(r.confirm_latency)},
          {"blocked", r.blocked}};
}

void print_rate(const char* what, std::uint64_t count, double per_s, std::size_t body_size) {
  std::cout << "  " << std::left << std::setw(10) << what << std::right << std::setw(12) << std::fixed
            << std::setprecision(0) << per_s << " msg/s  " << std::setw(9) << std::setprecision(1)
            << per_s * static_cast<double>(body_size) / 1e6 << " MB/s  (" << count << " messages)\n";
}

void print_latency(const char* what, const Percentiles& p) {
  std::cout << "  " << what << std::fixed << std::setprecision(0) << "p50 " << p.p50_us << " us, p95 " << p.p95_us
            << " us, p99 " << p.p99_us << " us, max " << p.max_us << " us (" << p.samples << " samples)\n";
}

void print_report(const Options& o, const Report& r) {
  std::cout << kTool << ": " << o.url << "\n  " << describe_plan(o) << "\n";
  if (o.producers > 0) print_rate("sent", r.published, r.sent_per_s, o.plan.body_size);
  if (o.plan.confirm_window > 0) print_rate("confirmed", r.confirmed, r.confirmed_per_s, o.plan.body_size);
  if (r.nacked > 0) std::cout << "  nacked    " << r.nacked << " messages\n";
  if (o.consumers > 0) print_rate("received", r.received, r.received_per_s, o.plan.body_size);
  if (r.latency.samples > 0) print_latency("latency (publish to delivery): ", r.latency);
  if (r.confirm_latency.samples > 0) print_latency("confirm latency (publish to ack): ", r.confirm_latency);
  if (r.blocked) std::cout << "  the broker blocked the publishers (connection.blocked) during the run\n";
}

// ---- the command line ----

// The options, or the exit code when there is nothing to run (--help: 0, a bad flag: 2).
std::variant<Options, int> parse_options(int argc, char** argv) {
  Options o;
  RunPlan& p = o.plan;
  unsigned prefetch = 0;
  po::options_description flags(std::string(kTool) + " [flags]");
  flags.add_options()("help,h", "print this help and exit")("url", po::value(&o.url)->default_value(o.url),
                                                            "the broker, amqp://user:password@host:port/vhost")(
      "producers,x", po::value(&o.producers)->default_value(o.producers), "producers, each with its own connection")(
      "consumers,y", po::value(&o.consumers)->default_value(o.consumers), "consumers, each with its own connection")(
      "size,s", po::value(&p.body_size)->default_value(p.body_size), "body size in bytes (latency needs >= 8)")(
      "confirm,c", po::value(&p.confirm_window)->default_value(0),
      "publisher confirms: 0 off, 1 synchronous, N at most N unconfirmed per producer")(
      "persistent,f", po::bool_switch(&p.persistent), "delivery-mode 2 to a durable queue")(
      "prefetch,q", po::value(&prefetch)->default_value(0), "basic.qos prefetch per consumer (0: unlimited)")(
      "auto-ack,a", po::bool_switch(&p.auto_ack), "consume with no_ack")(
      "multi-ack-every,A", po::value(&p.multi_ack_every)->default_value(1),
      "ack every Nth delivery with multiple=true (1: ack each)")("rate,r", po::value(&p.rate)->default_value(0),
                                                                 "messages/s per producer (0: as fast as possible)")(
      "time,z", po::value(&o.time_seconds)->default_value(o.time_seconds),
      "run time in seconds")("count,C", po::value(&p.count)->default_value(0),
                             "messages per producer (0: until --time); --time still bounds the run")(
      "queue,u", po::value(&o.queue), "the queue, declared and kept (default: a fresh one, deleted at the end)")(
      "batch,b", po::value(&p.batch)->default_value(0),
      "publishes per write, encoded by the bench as a client with a write buffer does (0: rabbitmq-c's own "
      "publish, a system call per frame); at most --confirm when confirms are on")(
      "json", po::bool_switch(&o.json), "print the figures as one JSON object");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << kTool << ": " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags;
    return 0;
  }
  auto refuse = [](const std::string& why) {
    std::cerr << kTool << ": " << why << "\n";
    return 2;
  };
  if (o.producers < 0 || o.consumers < 0 || o.producers + o.consumers == 0)
    return refuse("--producers and --consumers: at least one of them, neither negative");
  if (!(o.time_seconds > 0)) return refuse("--time: expected a positive number of seconds");
  if (p.rate < 0) return refuse("--rate: expected 0 or a positive rate");
  if (prefetch > 65535) return refuse("--prefetch " + std::to_string(prefetch) + ": at most 65535 (AMQP's short)");
  if (p.multi_ack_every == 0) return refuse("--multi-ack-every: at least 1");
  if (p.batch > 0 && p.confirm_window > 0 && p.batch > p.confirm_window)
    return refuse("--batch larger than --confirm would leave more unconfirmed than the window");
  if (p.batch > 0 && p.rate > 0) return refuse("--batch and --rate: a fixed rate publishes one at a time");
  if (prefetch > 0 && !p.auto_ack && p.multi_ack_every > prefetch)
    return refuse("--multi-ack-every larger than --prefetch would stall the consumer");
  p.prefetch = static_cast<std::uint16_t>(prefetch);
  p.seconds = duration<double>(o.time_seconds);
  p.expected_deliveries = p.count * static_cast<std::uint64_t>(o.producers);
  p.queue = o.queue.empty() ? "firemq-amqp-bench-" + std::to_string(::getpid()) : o.queue;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (auto* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  Options& o = std::get<Options>(parsed);
  try {
    const BrokerAddress address = parse_broker_url(o.url);
    auto outcome = run(address, o);
    if (auto* error = std::get_if<std::string>(&outcome)) {
      std::cerr << kTool << ": " << *error << "\n";
      return 1;
    }
    const Report& report = std::get<Report>(outcome);
    if (o.json) std::cout << to_json(o, report).dump(2) << "\n";
    else print_report(o, report);
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << kTool << ": " << e.what() << "\n";
    return 1;
  }
}
