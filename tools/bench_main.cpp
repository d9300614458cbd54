// firemq-bench: throughput of one publisher and one consumer through the broker, for message sizes and with or
// without publisher confirms. Starts the reference broker on a free port (or tests --url), runs each scenario,
// prints a table (and --json). It grows into the performance tool later; docs/benchmarks.md has its figures.
//
// Publisher: pipelined publishes, written in batches; with confirms, at most --window unconfirmed at a time.
// Consumer: a subscription with credit --window, topped up by half each time half is used, as the spec advises;
// no_ack, so the broker's work per message is route, enqueue, deliver. --persistent: persistent messages into a
// durable queue, so each publish is written to the message store too.
//
// Besides the end-to-end rate, the rate the consumer received at while the publisher was still publishing: a
// consumer starved by a full-speed publisher (one credit window per read of publishes) shows there, while the
// end-to-end rate also counts the drain after the last publish.
//
// And the broker's CPU time per message (user + system, /proc/PID/stat, from the subscribe until the consumer had
// every message; the embedded broker's, or --broker-pid's): the broker's own cost, which two clients sharing its
// two cores move far less than they move the rates.
//
// The rows of scripts/bench-amqp-vs-rabbitmq.sh, the FireMQ path beside an AMQP client's: --no-consumer publishes
// into a queue nobody reads (it fills; it is deleted at the end, on the publisher's connection so that the broker
// has routed every publish by then, and the CPU time runs until that delete's ok); --confirms on|off picks one of
// the two runs per size; --ack settles each delivery with an ack, as an AMQP consumer with a prefetch does; and
// --batch N writes N publishes at a time instead of 64 KiB at a time (--batch 1: one write per publish, as
// rabbitmq-c does), with confirms then never more than --window unconfirmed (--window 1: each publish waits for
// its confirm).
//
// --queued N: memory instead of throughput. N messages of the (one) --sizes body are published with confirms into
// a queue with no consumer, and the broker's resident size (VmRSS in /proc/PID/status) is read before and after:
// what one queued message costs the broker. The queue is deleted at the end.
//
// A long memory run (millions of 1 KiB messages, a broker that pages bodies to disk past a threshold) is a curve,
// not two points: --rss-every K prints the broker's RSS every K confirmed messages as CSV lines
// "rss,<messages queued>,<seconds since the fill began>,<RSS bytes>", to paste into a plot (confirms come in
// batches, so a line's count is the first at or past each multiple of K). --drain then takes every message back
// with a no_ack consumer (credit as above), checks each body's size and reports the drain rate, with
// "rss-drain,<messages consumed>,..." lines on the same time axis: what the broker gives back, and how fast paged
// messages come back. --broker-arg passes a flag to the embedded broker (its memory watermark, say). A fill whose
// confirms stop for 30 s (a memory alarm pausing publishers with no consumer to clear it) or a drain whose
// deliveries do fails the run.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "harness/process/default_paths.h"
#include "tools/tool_client.h"

namespace po = boost::program_options;
using namespace firemq;
using namespace firemq::tools;
using namespace std::chrono;

namespace {

const ToolClient kClient("firemq-bench");

struct Options {
  std::string url, broker = conform::default_paths().broker;  // the build tree's, or installed beside this tool
  std::string transport = "fire";                             // the embedded broker's listener the run goes through
  conform::TlsOptions tls;                                    // --url with fires:// or wss://
  std::uint64_t count = 200'000, window = 1000;
  std::uint64_t queued = 0;              // --queued: the memory mode's message count; 0: the throughput scenarios
  pid_t broker_pid = 0;                  // --broker-pid, or the embedded broker's: whose RSS and CPU time are read
  std::uint64_t rss_every = 0;           // --queued: a "rss,..." line every this many messages; 0: none
  bool drain = false;                    // --queued: consume the messages back before the queue is deleted
  std::vector<std::string> broker_args;  // extra flags for the embedded broker
  std::vector<std::size_t> sizes = {16, 1024};
  bool json = false;
  bool persistent = false;        // --persistent: persistent messages into a durable queue
  std::string confirms = "both";  // --confirms: which runs per size, "on", "off" or "both" (without, then with)
  bool no_consumer = false;       // --no-consumer: publish only, into a queue that fills
  bool ack = false;               // --ack: the consumer acks each delivery instead of subscribing no_ack
  std::uint64_t batch = 0;        // --batch: publishes per write; 0: 64 KiB of them
};

struct Scenario {
  std::size_t body_size;
  bool confirms;
  std::uint64_t count;
  bool persistent = false;
  std::uint64_t batch = 0;  // publishes per write; 0: as many as fill 64 KiB
};

// Who reads the scenario's queue.
enum class Consumer { none, no_ack, ack };

struct Figures {
  double publish_seconds = 0;                   // until the last publish was written (with confirms: confirmed)
  double total_seconds = 0;                     // until the consumer had every message
  std::uint64_t received_while_publishing = 0;  // deliveries the consumer had when publish_seconds ended
  std::optional<double> broker_cpu_seconds;     // the broker's CPU time over total_seconds; nullopt: no pid
};

// A process's CPU time so far (user + system, in seconds); nullopt when /proc/PID/stat cannot be read.
std::optional<double> cpu_seconds(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // After "pid (comm) ", whose comm may hold spaces: state is field 3, utime and stime fields 14 and 15.
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  std::uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  if (!fields) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The CPU time between two readings of cpu_seconds(); nullopt unless both were read.
std::optional<double> cpu_between(std::optional<double> before, std::optional<double> after) {
  if (!before || !after) return std::nullopt;
  return *after - *before;
}

// ---- the consumer and the publisher ----

// Subscribes as sub 1 with credit `window`. no_ack: the broker routes, enqueues and delivers, nothing more;
// otherwise it keeps each delivery until its ack.
bool subscribe(WireConnection& wire, std::uint64_t rid, const std::string& queue, std::uint64_t window,
               bool no_ack = true) {
  op::Subscribe sub;
  sub.rid = rid;
  sub.sub = 1;
  sub.queue = queue;
  sub.credit = window;
  sub.no_ack = no_ack;
  return kClient.request(wire, sub, seconds(5)).has_value();
}

// Acks one delivery on its own, as an AMQP consumer acking each message does. Credit is not tied to acks in
// FireMQ, so the top-ups go on as with no_ack.
void ack_delivery(WireConnection& wire, const RawFrame& frame) {
  auto m = decode_frame(frame);
  if (!m || !std::holds_alternative<op::Deliver>(*m)) return;
  wire.send(encode_frame(op::Ack{std::get<op::Deliver>(*m).tag, false}), Clock::now() + seconds(5));
}

void consume(WireConnection& wire, std::uint64_t count, std::uint64_t window, const std::string& queue, bool ack,
             std::atomic<bool>& subscribed, std::atomic<std::uint64_t>& received_so_far, Clock::time_point& done_at) {
  if (!subscribe(wire, 2, queue, window, !ack)) return;
  subscribed = true;
  std::uint64_t received = 0, since_top_up = 0;
  const Bytes top_up = encode_frame(op::Credit{1, window / 2});
  while (received < count) {
    conform::WireEvent ev = wire.receive(Clock::now() + seconds(30));
    auto* f = std::get_if<conform::FrameEvent>(&ev);
    if (f == nullptr) break;
    if (f->frame.op() != static_cast<std::uint8_t>(OpCode::deliver)) continue;
    if (ack) ack_delivery(wire, f->frame);
    received_so_far.store(++received, std::memory_order_relaxed);
    if (++since_top_up == window / 2) {
      wire.send(top_up, Clock::now() + seconds(5));
      since_top_up = 0;
    }
  }
  done_at = Clock::now();
  if (received < count) kClient.complain("consumer got " + std::to_string(received) + " of " + std::to_string(count));
}

// Reads confirms until at most `max_outstanding` publishes are unconfirmed. False when the broker goes quiet
// for 30 s (publishers paused by a memory alarm that nothing will clear, say) or the connection closes.
bool await_confirms(WireConnection& wire, std::uint64_t published, std::uint64_t& confirmed,
                    std::uint64_t max_outstanding) {
  while (published - confirmed > max_outstanding) {
    conform::WireEvent ev = wire.receive(Clock::now() + seconds(30));
    auto* f = std::get_if<conform::FrameEvent>(&ev);
    if (f == nullptr) return false;
    auto m = decode_frame(f->frame);
    if (!m || !std::holds_alternative<op::Confirm>(*m)) continue;
    const auto& c = std::get<op::Confirm>(*m);
    confirmed = std::max(confirmed, c.nack ? c.seq : c.upto);
  }
  return true;
}

// Called with the count of confirmed publishes after each batch's confirms are read (the memory mode's curve).
using ConfirmProgress = std::function<void(std::uint64_t confirmed)>;

// Publishes s.count messages; with confirms, gives up (false) when they stop coming, rather than writing on
// into a broker that has stopped reading. In 64 KiB batches, after each of which at most `window` may stay
// unconfirmed; or with s.batch, in batches of that many publishes, each written only when it keeps at most
// `window` unconfirmed (a sliding window, as an AMQP publisher's; window 1 and batch 1: one at a time).
bool publish(WireConnection& wire, const Scenario& s, std::uint64_t window, const std::string& queue,
             const ConfirmProgress& progress = {}) {
  const Bytes body(s.body_size, 0x42);
  Bytes batch;
  std::uint64_t confirmed = 0;
  for (std::uint64_t i = 1; i <= s.count; ++i) {
    op::Publish p;
    p.seq = s.confirms ? i : 0;
    p.key = queue;
    p.persistent = s.persistent;
    const Bytes frame = encode_frame(p, body);
    batch.insert(batch.end(), frame.begin(), frame.end());
    const bool full = s.batch > 0 ? i % s.batch == 0 : batch.size() >= 64 * 1024;
    if (full || i == s.count) {
      wire.send(batch, Clock::now() + seconds(30));
      batch.clear();
      const std::uint64_t may_stay = s.batch > 0 ? window - s.batch : window;  // room for the next batch
      if (s.confirms && !await_confirms(wire, i, confirmed, may_stay)) return false;
      if (progress) progress(confirmed);
    }
  }
  if (s.confirms && !await_confirms(wire, s.count, confirmed, 0)) return false;
  if (progress) progress(confirmed);
  return true;
}

// Deletes the scenario's queue on the publisher's connection: the broker reads a connection's frames in order, so
// by the delete's ok it has routed every publish, even those sent without confirms. False, with why on stderr,
// when the ok does not come.
bool delete_after_publishes(WireConnection& publisher, const std::string& queue) {
  op::DeleteQueue remove;
  remove.rid = 3;
  remove.name = queue;
  return kClient.request(publisher, remove, seconds(60)).has_value();
}

// Publish only: the rate counts until the last publish was written (with confirms: confirmed), as an AMQP
// client's; the broker's CPU time runs on until the queue, full by then, is deleted.
std::optional<Figures> run_publish_only(WireConnection& publisher, const Scenario& s, std::uint64_t window,
                                        const std::string& queue, pid_t broker_pid) {
  const std::optional<double> cpu_before = cpu_seconds(broker_pid);
  const auto start = Clock::now();
  if (!publish(publisher, s, window, queue)) {
    kClient.complain("no confirm for 30 s");
    return std::nullopt;
  }
  const double publish_seconds = duration<double>(Clock::now() - start).count();
  if (!delete_after_publishes(publisher, queue)) return std::nullopt;
  return Figures{publish_seconds, publish_seconds, 0, cpu_between(cpu_before, cpu_seconds(broker_pid))};
}

// One scenario on a queue of its own: the consumer subscribes, then the clock starts and the publisher runs.
std::optional<Figures> run_scenario(const Endpoint& e, const Scenario& s, Consumer who, std::uint64_t window, int index,
                                    pid_t broker_pid) {
  auto setup = kClient.connect(e);
  auto publisher = kClient.connect(e);
  auto consumer = who == Consumer::none ? nullptr : kClient.connect(e);
  if (!setup || !publisher || (who != Consumer::none && !consumer)) return std::nullopt;
  const std::string queue = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(index);
  op::DeclareQueue declare;
  declare.rid = 1;
  declare.name = queue;
  declare.auto_delete = true;
  declare.durable = s.persistent;
  if (!kClient.request(*setup, declare, seconds(5))) return std::nullopt;
  if (who == Consumer::none) return run_publish_only(*publisher, s, window, queue, broker_pid);
  std::atomic<bool> subscribed{false};
  std::atomic<std::uint64_t> received{0};
  Clock::time_point consumed_at;
  std::thread consumer_thread(consume, std::ref(*consumer), s.count, window, queue, who == Consumer::ack,
                              std::ref(subscribed), std::ref(received), std::ref(consumed_at));
  while (!subscribed) std::this_thread::sleep_for(milliseconds(1));
  const std::optional<double> cpu_before = cpu_seconds(broker_pid);
  const auto start = Clock::now();
  publish(*publisher, s, window, queue);
  const auto published_at = Clock::now();
  const std::uint64_t received_while_publishing = received.load();
  consumer_thread.join();
  return Figures{duration<double>(published_at - start).count(), duration<double>(consumed_at - start).count(),
                 received_while_publishing, cpu_between(cpu_before, cpu_seconds(broker_pid))};
}

// ---- the memory mode ----

// VmRSS of a process, in bytes; nullopt when it cannot be read.
std::optional<std::uint64_t> resident_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  }
  return std::nullopt;
}

// The broker's RSS as a curve: a CSV line "<label>,<count>,<seconds since start>,<bytes>" at count 0 and each
// time the count passes a multiple of `every`. A read of /proc per K messages leaves the loop's speed alone;
// each line is flushed, so a run of an hour can be watched (and cut short) with its curve so far.
class RssCurve {
 public:
  RssCurve(std::string label, pid_t pid, std::uint64_t every, Clock::time_point start)
      : label_(std::move(label)), pid_(pid), every_(every), start_(start) {}

  void at(std::uint64_t count) {
    if (every_ == 0 || count < next_) return;
    print(count);
    next_ = (count / every_ + 1) * every_;
  }
  // The last point, unless the count's multiple of `every` printed it already.
  void end(std::uint64_t count) {
    if (every_ > 0 && count != printed_) print(count);
  }

 private:
  void print(std::uint64_t count) {
    const auto rss = resident_bytes(pid_);
    std::cout << label_ << ',' << count << ',' << std::fixed << std::setprecision(3)
              << duration<double>(Clock::now() - start_).count() << ',' << (rss ? *rss : 0) << std::endl;
    printed_ = count;
  }

  std::string label_;
  pid_t pid_;
  std::uint64_t every_, next_ = 0, printed_ = 0;
  Clock::time_point start_;
};

// Takes `count` messages back from `queue` through a no_ack subscription (credit `window`, topped up as
// consume() does), each checked to carry `body_size` bytes. False, with why on stderr, when a body is wrong or
// the deliveries stop: no delivery for 30 s (paged bodies are read back from disk, so be generous), or a close.
bool drain(WireConnection& wire, const std::string& queue, std::uint64_t count, std::size_t body_size,
           std::uint64_t window, RssCurve& curve) {
  if (!subscribe(wire, 3, queue, window)) return false;
  const Bytes top_up = encode_frame(op::Credit{1, window / 2});
  std::uint64_t received = 0, since_top_up = 0;
  curve.at(0);
  for (auto last_delivery = Clock::now(); received < count;) {
    conform::WireEvent ev = wire.receive(last_delivery + seconds(30));
    auto* f = std::get_if<conform::FrameEvent>(&ev);
    if (f == nullptr) break;
    if (f->frame.op() != static_cast<std::uint8_t>(OpCode::deliver)) continue;
    if (f->frame.payload().size() != body_size) {
      kClient.complain("drain: delivery " + std::to_string(received + 1) + " has " +
                       std::to_string(f->frame.payload().size()) + " bytes, not " + std::to_string(body_size));
      return false;
    }
    last_delivery = Clock::now();
    curve.at(++received);
    if (++since_top_up == window / 2) {
      wire.send(top_up, Clock::now() + seconds(5));
      since_top_up = 0;
    }
  }
  curve.end(received);
  if (received == count) return true;
  kClient.complain("drain: got " + std::to_string(received) + " of " + std::to_string(count) +
                   " messages (no delivery for 30 s, or the connection closed)");
  return false;
}

// Prints what the fill cost: the broker's RSS before and after, and their difference per queued message.
bool report_fill(pid_t pid, std::uint64_t count, std::size_t body_size, double seconds_taken,
                 std::optional<std::uint64_t> before, std::optional<std::uint64_t> after) {
  if (!before || !after) {
    kClient.complain("cannot read /proc/" + std::to_string(pid) + "/status");
    return false;
  }
  std::cout << count << " messages of " << body_size << " B queued in " << std::fixed << std::setprecision(2)
            << seconds_taken << " s; broker RSS " << *before / 1e6 << " MB before, " << *after / 1e6
            << " MB after: " << std::setprecision(1) << (static_cast<double>(*after) - *before) / count
            << " B per queued message" << std::endl;
  return true;
}

// Publishes o.queued messages with confirms (at most o.window unconfirmed) into a queue with no consumer and
// reports what they cost the broker; with --drain, consumes them back and reports the drain rate. The queue is
// deleted at the end, whatever happened.
bool measure_queued(const Endpoint& e, pid_t pid, const Options& o) {
  const std::uint64_t count = o.queued;
  const std::size_t body_size = o.sizes.front();
  auto wire = kClient.connect(e);
  if (!wire) return false;
  const std::string queue = "bench-queued-" + std::to_string(::getpid());
  op::DeclareQueue declare;
  declare.rid = 1;
  declare.name = queue;
  if (!kClient.request(*wire, declare, seconds(5))) return false;
  const auto before = resident_bytes(pid);
  const auto start = Clock::now();
  RssCurve fill_curve("rss", pid, o.rss_every, start);
  std::uint64_t confirmed = 0;
  fill_curve.at(0);
  const bool filled = publish(*wire, Scenario{body_size, true, count}, o.window, queue, [&](std::uint64_t upto) {
    fill_curve.at(upto);
    confirmed = upto;
  });
  fill_curve.end(confirmed);
  const double seconds_taken = duration<double>(Clock::now() - start).count();
  if (!filled) {
    kClient.complain("fill: " + std::to_string(confirmed) + " of " + std::to_string(count) +
                     " messages confirmed, then none for 30 s (a memory alarm pausing publishers?)");
  }
  bool ok = filled && report_fill(pid, count, body_size, seconds_taken, before, resident_bytes(pid));
  if (ok && o.drain) {
    RssCurve drain_curve("rss-drain", pid, o.rss_every, start);  // the fill's time axis: one plot for both
    const auto drain_start = Clock::now();
    ok = drain(*wire, queue, count, body_size, o.window, drain_curve);
    const double drain_seconds = duration<double>(Clock::now() - drain_start).count();
    if (ok) {
      std::cout << count << " messages drained in " << std::fixed << std::setprecision(2) << drain_seconds
                << " s: " << std::setprecision(0) << count / drain_seconds << " msg/s, " << std::setprecision(1)
                << count * body_size / drain_seconds / 1e6 << " MB/s; broker RSS "
                << resident_bytes(pid).value_or(0) / 1e6 << " MB after" << std::endl;
    }
  }
  // On a connection of its own: a memory alarm stops the broker reading the publisher's, and the delete is
  // what clears the alarm.
  op::DeleteQueue remove;
  remove.rid = 1;
  remove.name = queue;
  if (auto cleaner = kClient.connect(e)) kClient.request(*cleaner, remove, seconds(60));
  return ok;
}

// ---- the command line ----

// The options, or the exit code when there is nothing to run (--help, a bad flag).
std::variant<Options, int> parse_options(int argc, char** argv) {
  Options o;
  po::options_description flags("firemq-bench [flags]");
  flags.add_options()("help,h", "print this help and exit")(
      "url", po::value(&o.url),
      "the broker (fire://, fires://, ws:// or wss://...); default: start the reference broker")(
      "transport", po::value(&o.transport)->default_value(o.transport),
      "without --url: the reference broker's transport to measure through (fire, fires, ws or wss)")(
      "ca-file", po::value(&o.tls.ca_file), "with a fires:// or wss:// --url: the CA that signed its certificate")(
      "insecure", po::bool_switch(&o.tls.insecure), "with a fires:// or wss:// --url: do not check its certificate")(
      "broker", po::value(&o.broker)->default_value(o.broker),
      "the reference broker executable")("count", po::value(&o.count)->default_value(o.count), "messages per scenario")(
      "sizes", po::value(&o.sizes)->multitoken(), "body sizes in bytes (default 16 1024)")(
      "window", po::value(&o.window)->default_value(o.window), "consumer credit, and unconfirmed publishes allowed")(
      "json", po::bool_switch(&o.json), "print the figures as JSON")(
      "persistent", po::bool_switch(&o.persistent), "persistent messages into a durable queue (written to the store)")(
      "queued", po::value(&o.queued),
      "memory mode: queue this many messages (no consumer) and report the broker's RSS per message")(
      "broker-pid", po::value(&o.broker_pid), "with --url: the broker's process id (its RSS and CPU time are read)")(
      "rss-every", po::value(&o.rss_every)->default_value(o.rss_every),
      "with --queued: print \"rss,<messages>,<seconds>,<RSS bytes>\" (CSV) every this many messages; 0: off")(
      "drain", po::bool_switch(&o.drain),
      "with --queued: then consume every message back (no_ack, credit --window) and report the drain rate; "
      "with --rss-every, \"rss-drain,<messages consumed>,...\" lines too")(
      "broker-arg", po::value(&o.broker_args)->multitoken(),
      "an extra flag for the embedded broker (repeatable), e.g. --broker-arg=--memory-high-watermark=4000000000")(
      "confirms", po::value(&o.confirms)->default_value(o.confirms),
      "which runs per size: off (no confirms), on (confirms, window --window) or both")(
      "no-consumer", po::bool_switch(&o.no_consumer),
      "publish only: nobody subscribes, the queue fills (and is deleted at the end)")(
      "ack", po::bool_switch(&o.ack), "the consumer acks each delivery (credit --window) instead of no_ack")(
      "batch", po::value(&o.batch)->default_value(o.batch),
      "publishes per write, each batch written only when it keeps at most --window unconfirmed; 0: 64 KiB per write");
  po::variables_map vm;
  if (auto exit_code = parse_flags(kClient.tool(), flags, argc, argv, vm)) return *exit_code;
  if (!conform::transport_from_name(o.transport)) {
    kClient.complain("--transport " + o.transport + ": expected fire, fires, ws or wss");
    return 2;
  }
  if (o.confirms != "on" && o.confirms != "off" && o.confirms != "both") {
    kClient.complain("--confirms " + o.confirms + ": expected on, off or both");
    return 2;
  }
  if (o.no_consumer && o.ack) {
    kClient.complain("--ack and --no-consumer: with no consumer there is nothing to ack");
    return 2;
  }
  if (o.batch > o.window) {
    kClient.complain("--batch " + std::to_string(o.batch) + " is more than --window " + std::to_string(o.window));
    return 2;
  }
  if (o.queued == 0 && (o.rss_every > 0 || o.drain)) {
    kClient.complain("--rss-every and --drain go with --queued");
    return 2;
  }
  if (!o.url.empty() && !o.broker_args.empty()) {
    kClient.complain("--broker-arg is for the embedded broker: ignored with --url");
    o.broker_args.clear();
  }
  if (o.queued > 0 && vm.count("sizes") == 0) o.sizes = {16};
  if (o.queued > 0 && o.sizes.size() != 1) {
    kClient.complain("--queued measures one body size at a time: give one --sizes");
    return 2;
  }
  return o;
}

void print_table_head() {
  std::cout << "  body  confirms    messages   publish msg/s   received msg/s while publishing   end-to-end msg/s"
               "   end-to-end MB/s   broker CPU us/msg\n";
}

void print_row(const Scenario& s, double publish_rate, double received_rate, double total_rate,
               std::optional<double> broker_us_per_message) {
  std::cout << std::setw(6) << s.body_size << "  " << std::setw(8) << (s.confirms ? "yes" : "no") << "  "
            << std::setw(10) << s.count << "  " << std::setw(14) << std::fixed << std::setprecision(0) << publish_rate
            << "  " << std::setw(32) << received_rate << "  " << std::setw(17) << total_rate << "  " << std::setw(16)
            << std::setprecision(1) << total_rate * s.body_size / 1e6 << "  " << std::setw(18) << std::setprecision(2);
  if (broker_us_per_message) {
    std::cout << *broker_us_per_message << "\n";
  } else {
    std::cout << "-"
              << "\n";
  }
}

// The confirms settings --confirms asks for, in the order they run.
std::vector<bool> confirm_runs(const std::string& confirms) {
  if (confirms == "on") return {true};
  if (confirms == "off") return {false};
  return {false, true};
}

// Who reads the queue, as the flags say.
Consumer consumer_of(const Options& o) {
  if (o.no_consumer) return Consumer::none;
  return o.ack ? Consumer::ack : Consumer::no_ack;
}

// Every scenario (each size, without then with confirms, or as --confirms says), printed as it ends; false when
// one could not run.
bool run_all(const Options& o, const Endpoint& endpoint, pid_t broker_pid) {
  nlohmann::json results = nlohmann::json::array();
  if (!o.json) print_table_head();
  int index = 0;
  for (std::size_t size : o.sizes) {
    for (bool confirms : confirm_runs(o.confirms)) {
      const Scenario s{size, confirms, o.count, o.persistent, o.batch};
      auto f = run_scenario(endpoint, s, consumer_of(o), o.window, ++index, broker_pid);
      if (!f) return false;
      const double publish_rate = o.count / f->publish_seconds;
      const double total_rate = o.count / f->total_seconds;
      const double received_rate = f->received_while_publishing / f->publish_seconds;
      std::optional<double> us_per_message;
      if (f->broker_cpu_seconds) us_per_message = *f->broker_cpu_seconds * 1e6 / static_cast<double>(o.count);
      results.push_back(
          {{"body_bytes", size},
           {"confirms", confirms},
           {"messages", o.count},
           {"persistent", o.persistent},
           {"publish_msgs_per_s", publish_rate},
           {"received_while_publishing_msgs_per_s", received_rate},
           {"end_to_end_msgs_per_s", total_rate},
           {"broker_cpu_us_per_msg", us_per_message ? nlohmann::json(*us_per_message) : nlohmann::json()}});
      if (!o.json) print_row(s, publish_rate, received_rate, total_rate, us_per_message);
    }
  }
  if (o.json) std::cout << results.dump(2) << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (auto* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const Options& o = std::get<Options>(parsed);
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.work_dir = tool_work_dir(kClient.tool());
  eo.extra_args = o.broker_args;
  auto target = open_target(o.url, eo, *conform::transport_from_name(o.transport), o.tls);
  if (!target) {
    kClient.complain(target.error());
    return 2;
  }
  const pid_t pid = target->embedded ? target->embedded->pid() : o.broker_pid;
  if (o.queued > 0) {
    if (pid <= 0) {
      kClient.complain("--queued with --url needs --broker-pid");
      return 2;
    }
    return measure_queued(target->endpoint, pid, o) ? 0 : 1;
  }
  return run_all(o, target->endpoint, pid) ? 0 : 1;
}
