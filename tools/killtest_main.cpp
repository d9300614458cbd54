// firemq-killtest: kill -9 soak of the reference broker's message store. Each round, worker connections
// publish persistent messages with confirms to a durable queue while consuming from it, acking some deliveries
// and leaving others unacknowledged; at a random moment the broker is killed with SIGKILL and restarted on the
// same data dir; the queue is drained and checked. The queue is the same in every round, so from the second
// round on the broker works with a queue it recovered. Each drain ends with a confirmed publish (a marker) on
// its connection, which makes the drain's removals durable and must itself be found by the next round.
//
//   lost          a publish confirmed before the kill, never acked, is not in the queue   (must be 0)
//   duplicated    an id is in the queue more than once                                    (must be 0)
//   phantom       the queue holds a message that was never published                       (must be 0)
//   corrupted     a recovered message whose body or headers differ from what was published (must be 0)
//   resurrected   a message whose ack was durable before the kill, or that an earlier drain
//                 took, is back                                                            (must be 0)
//   not redelivered  a message delivered and unacknowledged before the kill came back with redelivered
//                 false (a statistic: after a crash a broker may not know every delivery)
//
// An ack is durable at the latest once a publish sent after it on the same connection is confirmed: the
// workers publish and ack on the same connection so that this can be observed. An ack that was sent but was
// not yet durable may or may not hold: such a message may come back or not. Unconfirmed publishes too.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include "harness/process/default_paths.h"
#include "tools/tool_client.h"

namespace po = boost::program_options;
using namespace firemq;
using namespace firemq::tools;
using conform::FrameEvent;
using conform::TimeoutEvent;
using conform::WireEvent;
using namespace std::chrono;

namespace {

const ToolClient kClient("firemq-killtest");

constexpr std::uint64_t kConfirmWindow = 64;     // unconfirmed publishes a worker allows itself
constexpr std::uint64_t kMaxPublishes = 20'000;  // per worker and round: the drain stays short
constexpr std::uint64_t kCredit = 32;

struct Options {
  int rounds = 100;
  std::uint64_t seed = 0;
  std::string broker = conform::default_paths().broker;  // the build tree's, or installed beside this tool
  std::string data_dir;
  int workers = 2;
  int max_kill_ms = 1000;
  bool verbose = false;
};

// The body of message `id`: the id, then filler whose length and bytes follow from the id, so that a
// recovered body can be checked byte for byte.
std::string body_of(const std::string& id) {
  const std::size_t hash = std::hash<std::string>{}(id);
  std::string body = id + ":";
  const std::size_t pad = hash % 1500;
  for (std::size_t i = 0; i < pad; ++i) body += static_cast<char>('a' + (hash + i) % 26);
  return body;
}

std::string id_of_body(std::string_view body) { return std::string(body.substr(0, body.find(':'))); }

// The frame of publish `p` carrying message `id`: its body, and the id in its headers.
Bytes publish_frame(op::Publish p, const std::string& id) {
  p.headers = Map{{Value("id"), Value(id)}};
  const std::string body = body_of(id);
  return encode_frame(p, ByteView(reinterpret_cast<const std::uint8_t*>(body.data()), body.size()));
}

// Whether a message taken from the queue is the one its id names, byte for byte and header for header.
bool intact(const std::string& body, const std::string& id, const Map& headers) {
  const Value* header_id = find(headers, "id");
  return body == body_of(id) && header_id != nullptr && *header_id == Value(id);
}

std::unique_ptr<WireConnection> open_session(std::uint16_t port) { return kClient.connect(local_endpoint(port)); }

// What one worker connection saw before the kill.
struct WorkerLog {
  std::set<std::string> published;  // sent (confirmed or not)
  std::set<std::string> confirmed;  // positively confirmed before the kill
  std::uint64_t nacked = 0;
  std::map<std::string, bool> delivered;  // id -> redelivered flag of its (last) delivery
  std::set<std::string> acked;            // ack sent
  std::set<std::string> acked_durable;    // ack sent, and a later publish on this connection confirmed
  std::uint64_t header_mismatches = 0;    // a delivery whose headers or body differ from what was sent
};

class Worker {
 public:
  Worker(int index, int round, std::string queue, std::uint64_t seed)
      : index_(index), round_(round), queue_(std::move(queue)), rng_(seed) {}

  // Runs until the connection dies (the kill) or `stop` is set.
  void run(std::uint16_t port, const std::atomic<bool>& stop, std::atomic<int>& ready) {
    auto wire = open_session(port);
    if (!wire) {
      ++ready;
      return;
    }
    op::Subscribe sub;
    sub.rid = 1;
    sub.sub = 1;
    sub.queue = queue_;
    sub.credit = kCredit;
    const bool subscribed = kClient.request(*wire, sub).has_value();
    ++ready;
    if (!subscribed) return;
    std::bernoulli_distribution ack_it(0.5);
    while (!stop) {
      if (seq_ < kMaxPublishes && seq_ - confirmed_upto_ < kConfirmWindow) {
        if (!publish(*wire)) break;
        if (!read_ready(*wire, Clock::now(), ack_it)) break;
      } else if (!read_ready(*wire, Clock::now() + milliseconds(20), ack_it)) {
        break;
      }
    }
    // The broker is gone: what it sent before dying is still in the socket.
    const auto give_up = Clock::now() + seconds(5);
    while (Clock::now() < give_up && read_ready(*wire, Clock::now() + milliseconds(200), ack_it)) {
    }
  }

  WorkerLog log;

 private:
  std::string id_for(std::uint64_t seq) const {
    return "r" + std::to_string(round_) + "w" + std::to_string(index_) + "s" + std::to_string(seq);
  }

  bool publish(WireConnection& wire) {
    op::Publish p;
    p.seq = ++seq_;
    p.key = queue_;
    p.persistent = true;
    const std::string id = id_for(p.seq);
    seq_ids_[p.seq] = id;
    log.published.insert(id);
    return wire.send(publish_frame(p, id), Clock::now() + seconds(5));
  }

  // Reads what has arrived until `until`; false once the connection is closed.
  bool read_ready(WireConnection& wire, Clock::time_point until, std::bernoulli_distribution& ack_it) {
    while (true) {
      WireEvent event = wire.receive(until);
      if (std::holds_alternative<TimeoutEvent>(event)) return true;
      auto* f = std::get_if<FrameEvent>(&event);
      if (f == nullptr) return false;
      auto decoded = decode_frame(f->frame);
      if (!decoded) continue;
      if (auto* c = std::get_if<op::Confirm>(&*decoded)) {
        on_confirm(*c);
      } else if (auto* d = std::get_if<op::Deliver>(&*decoded)) {
        const std::string body(f->frame.payload().begin(), f->frame.payload().end());
        const std::string id = id_of_body(body);
        if (!intact(body, id, d->headers)) ++log.header_mismatches;
        log.delivered[id] = d->redelivered;
        if (ack_it(rng_)) {
          // Durable once a publish sent after it (seq > seq_) is confirmed.
          if (!wire.send(encode_frame(op::Ack{d->tag, false}), Clock::now() + seconds(5))) return false;
          log.acked.insert(id);
          pending_acks_.emplace_back(seq_, id);
        }
        if (!wire.send(encode_frame(op::Credit{1, 1}), Clock::now() + seconds(5))) return false;
      }
    }
  }

  void on_confirm(const op::Confirm& c) {
    if (c.nack) {
      ++log.nacked;
      nacked_.insert(c.seq);
      return;
    }
    for (std::uint64_t s = confirmed_upto_ + 1; s <= c.upto && s <= seq_; ++s) {
      if (!nacked_.count(s)) log.confirmed.insert(seq_ids_[s]);
    }
    confirmed_upto_ = std::max(confirmed_upto_, c.upto);
    std::erase_if(pending_acks_, [&](const std::pair<std::uint64_t, std::string>& a) {
      if (a.first >= confirmed_upto_) return false;
      log.acked_durable.insert(a.second);
      return true;
    });
  }

  int index_;
  int round_;
  std::string queue_;
  std::mt19937_64 rng_;
  std::uint64_t seq_ = 0;
  std::uint64_t confirmed_upto_ = 0;
  std::set<std::uint64_t> nacked_;
  std::map<std::uint64_t, std::string> seq_ids_;
  std::vector<std::pair<std::uint64_t, std::string>> pending_acks_;  // (last seq sent before the ack, id)
};

struct Recovered {
  std::string id;
  bool redelivered;
  bool intact;
};

// Takes every message from the queue (get with no_ack, pipelined); nullopt when the broker does not answer.
std::optional<std::vector<Recovered>> drain(WireConnection& wire, const std::string& queue) {
  std::vector<Recovered> out;
  constexpr int kBatch = 100;
  std::uint64_t rid = 100;
  while (true) {
    Bytes batch;
    for (int i = 0; i < kBatch; ++i) {
      const Bytes frame = encode_frame(op::Get{++rid, queue, true});
      batch.insert(batch.end(), frame.begin(), frame.end());
    }
    if (!wire.send(batch, Clock::now() + seconds(10))) return std::nullopt;
    bool empty = false;
    for (int i = 0; i < kBatch; ++i) {
      WireEvent event = wire.receive(Clock::now() + seconds(10));
      auto* f = std::get_if<FrameEvent>(&event);
      if (f == nullptr) return std::nullopt;
      auto decoded = decode_frame(f->frame);
      if (!decoded) return std::nullopt;
      if (auto* got = std::get_if<op::GetOk>(&*decoded)) {
        const std::string body(f->frame.payload().begin(), f->frame.payload().end());
        const std::string id = id_of_body(body);
        out.push_back({id, got->redelivered, intact(body, id, got->headers)});
      } else if (std::holds_alternative<op::Ok>(*decoded)) {
        empty = true;
      } else {
        return std::nullopt;
      }
    }
    if (empty) return out;
  }
}

// Publishes one persistent message (seq 1: the connection's first publish) and waits for its confirm.
bool publish_confirmed(WireConnection& wire, const std::string& queue, const std::string& id) {
  op::Publish p;
  p.seq = 1;
  p.key = queue;
  p.persistent = true;
  const auto deadline = Clock::now() + seconds(10);
  if (!wire.send(publish_frame(p, id), deadline)) return false;
  while (true) {
    WireEvent event = wire.receive(deadline);
    auto* f = std::get_if<FrameEvent>(&event);
    if (f == nullptr) return false;
    auto decoded = decode_frame(f->frame);
    if (!decoded) return false;
    if (auto* c = std::get_if<op::Confirm>(&*decoded)) return !c->nack && c->upto >= 1;
  }
}

// ---- one round: work, kill, restart, drain ----

struct Totals {
  std::uint64_t published = 0, confirmed = 0, recovered = 0, lost = 0, duplicated = 0, phantom = 0, corrupted = 0,
                resurrected = 0, not_redelivered = 0, acked = 0, acked_durable = 0, unconfirmed_recovered = 0,
                queue_missing = 0;
  bool bad() const { return lost || duplicated || phantom || corrupted || resurrected || queue_missing; }

  Totals& operator+=(const Totals& t) {
    published += t.published, confirmed += t.confirmed, recovered += t.recovered, lost += t.lost;
    duplicated += t.duplicated, phantom += t.phantom, corrupted += t.corrupted, resurrected += t.resurrected;
    not_redelivered += t.not_redelivered, acked += t.acked, acked_durable += t.acked_durable;
    unconfirmed_recovered += t.unconfirmed_recovered, queue_missing += t.queue_missing;
    return *this;
  }
};

// What the rounds carry from one to the next: every id ever published or confirmed; the ids the drains took
// whose removal is durable (each drain ends with a confirmed publish on its connection: the marker, which the
// next round must find, unless acked).
struct History {
  std::set<std::string> published_ever, confirmed_ever, drained_durably;
  std::optional<std::string> marker;
};

// What one round saw: the workers' logs, and the queue after the restart (on `reader`, still open).
struct Round {
  int number = 0;
  int kill_after_ms = 0;
  std::vector<std::unique_ptr<Worker>> workers;
  std::unique_ptr<WireConnection> reader;
  std::vector<Recovered> recovered;
  bool queue_missing = false;
};

// The workers publish, consume and ack until the broker is killed, at a random moment.
void work_until_killed(EmbeddedBroker& broker, const Options& o, const std::string& queue, std::mt19937_64& rng,
                       Round& r) {
  for (int w = 0; w < o.workers; ++w) r.workers.push_back(std::make_unique<Worker>(w, r.number, queue, rng()));
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  const std::uint16_t port = broker.port();
  for (auto& w : r.workers) threads.emplace_back([&w, &stop, &ready, port] { w->run(port, stop, ready); });
  while (ready < o.workers) std::this_thread::sleep_for(milliseconds(1));
  r.kill_after_ms = std::uniform_int_distribution<int>(5, std::max(5, o.max_kill_ms))(rng);
  std::this_thread::sleep_for(milliseconds(r.kill_after_ms));
  broker.kill();
  for (std::thread& t : threads) t.join();
}

// Restarts the broker and takes every message from the queue (declared again when it is gone); the error
// ends the test.
IoStatus restart_and_drain(EmbeddedBroker& broker, const std::string& queue, Round& r) {
  auto restarted = broker.restart(true);
  if (!restarted) return restarted.error();
  r.reader = open_session(broker.port());
  if (!r.reader) return "cannot connect to the restarted broker";
  if (!declare_durable_queue(kClient, *r.reader, queue, true)) {
    r.queue_missing = true;
    r.reader = open_session(broker.port());
    if (!r.reader || !declare_durable_queue(kClient, *r.reader, queue, false)) {
      return "the durable queue is gone and cannot be declared again";
    }
    return IoStatus::done();
  }
  auto recovered = drain(*r.reader, queue);
  if (!recovered) return "the restarted broker did not answer get";
  r.recovered = std::move(*recovered);
  return IoStatus::done();
}

// ---- checking a round ----

// What the workers of a round saw, merged with what the rounds before knew.
struct Known {
  std::set<std::string> published, confirmed, acked, acked_durable;
  std::map<std::string, bool> delivered;
};

Known merge_logs(const Round& r, const History& h, Totals& t) {
  Known k{h.published_ever, {}, {}, h.drained_durably, {}};
  if (h.marker) k.confirmed.insert(*h.marker);
  for (const auto& w : r.workers) {
    k.published.insert(w->log.published.begin(), w->log.published.end());
    k.confirmed.insert(w->log.confirmed.begin(), w->log.confirmed.end());
    k.acked.insert(w->log.acked.begin(), w->log.acked.end());
    k.acked_durable.insert(w->log.acked_durable.begin(), w->log.acked_durable.end());
    k.delivered.insert(w->log.delivered.begin(), w->log.delivered.end());
    t.corrupted += w->log.header_mismatches;
  }
  return k;
}

// Counts what the queue held against what was known, and names each broken promise.
std::vector<std::string> check_recovered(const Round& r, const History& h, const Known& k, Totals& t) {
  std::map<std::string, int> seen;
  std::vector<std::string> violations;
  for (const Recovered& m : r.recovered) {
    if (++seen[m.id] == 2) {
      ++t.duplicated;
      violations.push_back("duplicated " + m.id);
    }
    if (!k.published.count(m.id)) {
      ++t.phantom;
      violations.push_back("phantom " + m.id);
      continue;
    }
    if (!m.intact) {
      ++t.corrupted;
      violations.push_back("corrupted " + m.id);
    }
    if (k.acked_durable.count(m.id)) {
      ++t.resurrected;
      violations.push_back(std::string(h.drained_durably.count(m.id) ? "resurrected (taken by an earlier drain) "
                                                                     : "resurrected (its ack was durable) ") +
                           m.id);
    }
    if (!k.confirmed.count(m.id) && !h.confirmed_ever.count(m.id)) ++t.unconfirmed_recovered;
    if (k.delivered.count(m.id) && !k.acked.count(m.id) && !m.redelivered) ++t.not_redelivered;
  }
  for (const std::string& id : k.confirmed) {
    if (!k.acked.count(id) && !seen.count(id)) {
      ++t.lost;
      violations.push_back("lost (confirmed, never acked) " + id);
    }
  }
  return violations;
}

void print_round(const Round& r, const Totals& t, std::size_t delivered, const std::vector<std::string>& violations,
                 bool verbose) {
  std::cout << "round " << r.number << ": killed after " << r.kill_after_ms << " ms; published " << t.published
            << ", confirmed " << t.confirmed << ", delivered " << delivered << " (acked " << t.acked << ", "
            << t.acked_durable << " durably); recovered " << t.recovered << " (" << t.unconfirmed_recovered
            << " unconfirmed); lost " << t.lost << ", duplicated " << t.duplicated << ", phantom " << t.phantom
            << ", corrupted " << t.corrupted << ", resurrected " << t.resurrected << ", not redelivered "
            << t.not_redelivered << (t.queue_missing ? "; THE DURABLE QUEUE WAS GONE" : "") << "\n";
  if (verbose) {
    for (const std::string& v : violations) std::cout << "    " << v << "\n";
  } else if (!violations.empty()) {
    std::cout << "    first: " << violations.front() << " (--verbose names them all)\n";
  }
}

// Checks and prints a round, and carries what it learnt into `h`.
Totals check_round(const Round& r, History& h, bool verbose) {
  Totals t;
  t.queue_missing = r.queue_missing ? 1 : 0;
  Known k = merge_logs(r, h, t);
  const auto violations = check_recovered(r, h, k, t);
  t.published = k.published.size() - h.published_ever.size();
  t.confirmed = k.confirmed.size();
  t.recovered = r.recovered.size();
  t.acked = k.acked.size();
  t.acked_durable = k.acked_durable.size() - h.drained_durably.size();
  print_round(r, t, k.delivered.size(), violations, verbose);
  h.published_ever = std::move(k.published);
  h.confirmed_ever.insert(k.confirmed.begin(), k.confirmed.end());
  for (const Recovered& m : r.recovered) h.drained_durably.insert(m.id);
  return t;
}

// The drain's gets took the messages with no_ack; a confirmed publish after them on the same connection
// makes those removals durable. That publish, the marker, must be in the queue next round.
bool publish_marker(const Round& r, const std::string& queue, History& h) {
  h.marker = "r" + std::to_string(r.number) + "m";
  h.published_ever.insert(*h.marker);
  return publish_confirmed(*r.reader, queue, *h.marker);
}

// ---- the command line ----

std::variant<Options, int> parse_options(int argc, char** argv) {
  Options o;
  o.seed = static_cast<std::uint64_t>(std::random_device{}());
  po::options_description flags("firemq-killtest [flags]");
  flags.add_options()("help,h", "print this help and exit")("rounds", po::value(&o.rounds)->default_value(o.rounds),
                                                            "kill -9 rounds")(
      "seed", po::value(&o.seed), "random seed (default: random; printed, so a run can be repeated)")(
      "broker", po::value(&o.broker)->default_value(o.broker), "the firemq-broker executable")(
      "data-dir", po::value(&o.data_dir), "the broker's --data-dir (default: a fresh temporary directory)")(
      "workers", po::value(&o.workers)->default_value(o.workers), "connections that publish, consume and ack")(
      "max-kill-ms", po::value(&o.max_kill_ms)->default_value(o.max_kill_ms),
      "the kill comes at a random moment between 5 ms and this after the workers start")(
      "verbose,v", po::bool_switch(&o.verbose), "name every violating message id");
  po::variables_map vm;
  if (auto exit_code = parse_flags(kClient.tool(), flags, argc, argv, vm)) return *exit_code;
  return o;
}

// The broker of the whole test, with the one durable queue every round uses: after the first restart it is a
// queue the broker recovered, which its store must go on serving.
std::unique_ptr<EmbeddedBroker> start_broker(const Options& o, const std::string& queue) {
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.work_dir = tool_work_dir(kClient.tool());
  if (!o.data_dir.empty()) eo.data_dir = o.data_dir;
  auto started = EmbeddedBroker::start(eo);
  if (!started) {
    kClient.complain(started.error());
    return nullptr;
  }
  std::unique_ptr<EmbeddedBroker> broker = std::move(*started);
  std::cout << "broker data dir: " << broker->data_dir().string() << ", log: " << broker->log_file().string() << "\n";
  auto setup = open_session(broker->port());
  if (!setup || !declare_durable_queue(kClient, *setup, queue, false)) {
    kClient.complain("cannot declare the durable queue " + queue);
    return nullptr;
  }
  return broker;
}

// Every round; the totals, or nullopt when a round could not be completed (the reason printed).
std::optional<Totals> run_rounds(const Options& o, EmbeddedBroker& broker, const std::string& queue) {
  std::mt19937_64 rng(o.seed);
  History history;
  Totals total;
  for (int number = 1; number <= o.rounds; ++number) {
    Round r;
    r.number = number;
    work_until_killed(broker, o, queue, rng, r);
    IoStatus round = restart_and_drain(broker, queue, r);
    if (round) {
      total += check_round(r, history, o.verbose);
      if (!publish_marker(r, queue, history)) round = "the marker publish after the drain was not confirmed";
    }
    if (!round) {
      std::cerr << "round " << number << ": " << round.error() << "\n";
      return std::nullopt;
    }
  }
  return total;
}

void print_summary(const Options& o, const Totals& total) {
  std::cout << "summary: " << o.rounds << " rounds (seed " << o.seed << "): published " << total.published
            << ", confirmed " << total.confirmed << ", recovered " << total.recovered << " ("
            << total.unconfirmed_recovered << " unconfirmed), acked " << total.acked << " (" << total.acked_durable
            << " durably); lost=" << total.lost << " duplicated=" << total.duplicated << " phantom=" << total.phantom
            << " corrupted=" << total.corrupted << " resurrected acks=" << total.resurrected
            << " queue gone=" << total.queue_missing << "; not redelivered: " << total.not_redelivered
            << " (a statistic)\n";
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (auto* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const Options& o = std::get<Options>(parsed);
  std::cout << "firemq-killtest: " << o.rounds << " rounds, " << o.workers << " workers, seed " << o.seed << "\n";
  const std::string queue = "killtest-" + std::to_string(::getpid());
  auto broker = start_broker(o, queue);
  if (!broker) return 2;
  const std::optional<Totals> total = run_rounds(o, *broker, queue);
  if (!total) return 1;
  const int status = broker->stop();
  print_summary(o, *total);
  if (status != 0) std::cout << "the broker did not exit cleanly on SIGTERM at the end (status " << status << ")\n";
  if (total->bad()) {
    std::cout << "FAILED: the broker broke a durability promise; its log: " << broker->log_file().string() << "\n";
    return 1;
  }
  std::error_code ec;
  if (o.data_dir.empty()) std::filesystem::remove_all(tool_work_dir(kClient.tool()), ec);
  std::cout << "ok\n";
  return status == 0 ? 0 : 1;
}
