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

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include "harness/embedded_broker.h"
#include "harness/wire.h"
#include "protocol/messages.h"

namespace po = boost::program_options;
using namespace firemq;
using namespace firemq::conform;
using namespace std::chrono;

namespace {

constexpr std::uint64_t kConfirmWindow = 64;    // unconfirmed publishes a worker allows itself
constexpr std::uint64_t kMaxPublishes = 20'000;  // per worker and round: the drain stays short
constexpr std::uint64_t kCredit = 32;

struct Options {
  int rounds = 100;
  std::uint64_t seed = 0;
  std::string broker = FIREMQ_BROKER_PATH;
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

std::unique_ptr<WireConnection> open_session(std::uint16_t port) {
  auto wire = conform::open_session(Endpoint{"127.0.0.1", port, "guest", "guest", "/"}, "firemq-killtest",
                                    Clock::now() + seconds(5));
  return wire ? std::move(*wire) : nullptr;
}

// Sends a request and waits for its reply: the ok, or nullopt (an error, or no answer).
std::optional<op::Ok> request(WireConnection& wire, const Message& m) {
  const auto deadline = Clock::now() + seconds(10);
  if (!wire.send(encode_frame(m), deadline)) return std::nullopt;
  while (true) {
    WireEvent event = wire.receive(deadline);
    auto* f = std::get_if<FrameEvent>(&event);
    if (f == nullptr) return std::nullopt;
    auto decoded = decode_frame(f->frame);
    if (!decoded) return std::nullopt;
    if (auto* ok = std::get_if<op::Ok>(&*decoded)) return *ok;
    if (std::holds_alternative<op::Error>(*decoded)) return std::nullopt;
  }
}

// What one worker connection saw before the kill.
struct WorkerLog {
  std::set<std::string> published;          // sent (confirmed or not)
  std::set<std::string> confirmed;          // positively confirmed before the kill
  std::uint64_t nacked = 0;
  std::map<std::string, bool> delivered;    // id -> redelivered flag of its (last) delivery
  std::set<std::string> acked;              // ack sent
  std::set<std::string> acked_durable;      // ack sent, and a later publish on this connection confirmed
  std::uint64_t header_mismatches = 0;      // a delivery whose headers or body differ from what was sent
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
    const bool subscribed = request(*wire, sub).has_value();
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
    p.headers = Map{{Value("id"), Value(id)}};
    const std::string body = body_of(id);
    seq_ids_[p.seq] = id;
    log.published.insert(id);
    return wire.send(encode_frame(p, ByteView(reinterpret_cast<const std::uint8_t*>(body.data()), body.size())),
                     Clock::now() + seconds(5));
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
        const Value* header_id = find(d->headers, "id");
        if (body != body_of(id) || header_id == nullptr || *header_id != Value(id)) ++log.header_mismatches;
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
        const Value* header_id = find(got->headers, "id");
        out.push_back({id, got->redelivered, body == body_of(id) && header_id != nullptr && *header_id == Value(id)});
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
  p.headers = Map{{Value("id"), Value(id)}};
  const std::string body = body_of(id);
  const auto deadline = Clock::now() + seconds(10);
  if (!wire.send(encode_frame(p, ByteView(reinterpret_cast<const std::uint8_t*>(body.data()), body.size())), deadline)) {
    return false;
  }
  while (true) {
    WireEvent event = wire.receive(deadline);
    auto* f = std::get_if<FrameEvent>(&event);
    if (f == nullptr) return false;
    auto decoded = decode_frame(f->frame);
    if (!decoded) return false;
    if (auto* c = std::get_if<op::Confirm>(&*decoded)) return !c->nack && c->upto >= 1;
  }
}

struct Totals {
  std::uint64_t published = 0, confirmed = 0, recovered = 0, lost = 0, duplicated = 0, phantom = 0, corrupted = 0,
                resurrected = 0, not_redelivered = 0, acked = 0, acked_durable = 0, unconfirmed_recovered = 0,
                queue_missing = 0;
  bool bad() const { return lost || duplicated || phantom || corrupted || resurrected || queue_missing; }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = static_cast<std::uint64_t>(std::random_device{}());
  po::options_description flags("firemq-killtest [flags]");
  flags.add_options()("help,h", "print this help and exit")
      ("rounds", po::value(&o.rounds)->default_value(o.rounds), "kill -9 rounds")
      ("seed", po::value(&o.seed), "random seed (default: random; printed, so a run can be repeated)")
      ("broker", po::value(&o.broker)->default_value(o.broker), "the firemq-broker executable")
      ("data-dir", po::value(&o.data_dir), "the broker's --data-dir (default: a fresh temporary directory)")
      ("workers", po::value(&o.workers)->default_value(o.workers), "connections that publish, consume and ack")
      ("max-kill-ms", po::value(&o.max_kill_ms)->default_value(o.max_kill_ms),
       "the kill comes at a random moment between 5 ms and this after the workers start")
      ("verbose,v", po::bool_switch(&o.verbose), "name every violating message id");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "firemq-killtest: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  std::cout << "firemq-killtest: " << o.rounds << " rounds, " << o.workers << " workers, seed " << o.seed << "\n";
  std::mt19937_64 rng(o.seed);

  const auto work_dir = std::filesystem::temp_directory_path() / ("firemq-killtest-" + std::to_string(::getpid()));
  EmbeddedOptions eo;
  eo.broker_path = o.broker;
  eo.work_dir = work_dir;
  if (!o.data_dir.empty()) eo.data_dir = o.data_dir;
  auto started = EmbeddedBroker::start(eo);
  if (!started) {
    std::cerr << "firemq-killtest: " << started.error() << "\n";
    return 2;
  }
  std::unique_ptr<EmbeddedBroker> broker = std::move(*started);
  std::cout << "broker data dir: " << broker->data_dir().string() << ", log: " << broker->log_file().string() << "\n";
  // One durable queue for every round: after the first restart it is a queue the broker recovered, which
  // its store must go on serving.
  const std::string queue = "killtest-" + std::to_string(::getpid());
  {
    auto setup = open_session(broker->port());
    op::DeclareQueue declare;
    declare.rid = 1;
    declare.name = queue;
    declare.durable = true;
    if (!setup || !request(*setup, declare)) {
      std::cerr << "firemq-killtest: cannot declare the durable queue " << queue << "\n";
      return 2;
    }
  }
  // Across rounds: every id ever published; the ids the drains took whose removal is durable (each drain ends
  // with a confirmed publish on its connection: the marker, which the next round must find, unless acked).
  std::set<std::string> published_ever, confirmed_ever, drained_durably;
  std::optional<std::string> marker;
  Totals total;
  for (int round = 1; round <= o.rounds; ++round) {
    // Publish, consume and ack until the kill.
    std::vector<std::unique_ptr<Worker>> workers;
    for (int w = 0; w < o.workers; ++w) workers.push_back(std::make_unique<Worker>(w, round, queue, rng()));
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    const std::uint16_t port = broker->port();
    for (auto& w : workers) threads.emplace_back([&w, &stop, &ready, port] { w->run(port, stop, ready); });
    while (ready < o.workers) std::this_thread::sleep_for(milliseconds(1));
    const int kill_after = std::uniform_int_distribution<int>(5, std::max(5, o.max_kill_ms))(rng);
    std::this_thread::sleep_for(milliseconds(kill_after));
    broker->kill();
    for (std::thread& t : threads) t.join();

    auto restarted = broker->restart(true);
    if (!restarted) {
      std::cerr << "round " << round << ": " << restarted.error() << "\n";
      return 1;
    }
    auto reader = open_session(broker->port());
    op::DeclareQueue passive;
    passive.rid = 1;
    passive.name = queue;
    passive.passive = true;
    Totals t;
    std::optional<std::vector<Recovered>> recovered;
    if (!reader) {
      std::cerr << "round " << round << ": cannot connect to the restarted broker\n";
      return 1;
    }
    if (!request(*reader, passive)) {
      t.queue_missing = 1;
      reader = open_session(broker->port());
      op::DeclareQueue declare;
      declare.rid = 2;
      declare.name = queue;
      declare.durable = true;
      if (!reader || !request(*reader, declare)) {
        std::cerr << "round " << round << ": the durable queue is gone and cannot be declared again\n";
        return 1;
      }
      recovered = std::vector<Recovered>{};
    } else {
      recovered = drain(*reader, queue);
    }
    if (!recovered) {
      std::cerr << "round " << round << ": the restarted broker did not answer get\n";
      return 1;
    }

    // Check.
    std::set<std::string> published = published_ever, confirmed, acked, acked_durable = drained_durably;
    if (marker) confirmed.insert(*marker);
    std::map<std::string, bool> delivered;
    for (auto& w : workers) {
      published.insert(w->log.published.begin(), w->log.published.end());
      confirmed.insert(w->log.confirmed.begin(), w->log.confirmed.end());
      acked.insert(w->log.acked.begin(), w->log.acked.end());
      acked_durable.insert(w->log.acked_durable.begin(), w->log.acked_durable.end());
      delivered.insert(w->log.delivered.begin(), w->log.delivered.end());
      t.corrupted += w->log.header_mismatches;
    }
    std::map<std::string, int> seen;
    std::vector<std::string> violations;
    for (const Recovered& r : *recovered) {
      if (++seen[r.id] == 2) {
        ++t.duplicated;
        violations.push_back("duplicated " + r.id);
      }
      if (!published.count(r.id)) {
        ++t.phantom;
        violations.push_back("phantom " + r.id);
        continue;
      }
      if (!r.intact) {
        ++t.corrupted;
        violations.push_back("corrupted " + r.id);
      }
      if (acked_durable.count(r.id)) {
        ++t.resurrected;
        violations.push_back(std::string(drained_durably.count(r.id) ? "resurrected (taken by an earlier drain) "
                                                                      : "resurrected (its ack was durable) ") + r.id);
      }
      if (!confirmed.count(r.id) && !confirmed_ever.count(r.id)) ++t.unconfirmed_recovered;
      auto d = delivered.find(r.id);
      if (d != delivered.end() && !acked.count(r.id) && !r.redelivered) ++t.not_redelivered;
    }
    for (const std::string& id : confirmed) {
      if (!acked.count(id) && !seen.count(id)) {
        ++t.lost;
        violations.push_back("lost (confirmed, never acked) " + id);
      }
    }
    t.published = published.size() - published_ever.size();
    t.confirmed = confirmed.size();
    t.recovered = recovered->size();
    t.acked = acked.size();
    t.acked_durable = acked_durable.size() - drained_durably.size();
    std::cout << "round " << round << ": killed after " << kill_after << " ms; published " << t.published
              << ", confirmed " << t.confirmed << ", delivered " << delivered.size() << " (acked " << t.acked << ", "
              << t.acked_durable << " durably); recovered " << t.recovered << " (" << t.unconfirmed_recovered
              << " unconfirmed); lost " << t.lost << ", duplicated " << t.duplicated << ", phantom " << t.phantom
              << ", corrupted " << t.corrupted << ", resurrected " << t.resurrected << ", not redelivered "
              << t.not_redelivered << (t.queue_missing ? "; THE DURABLE QUEUE WAS GONE" : "") << "\n";
    if (o.verbose) {
      for (const std::string& v : violations) std::cout << "    " << v << "\n";
    } else if (!violations.empty()) {
      std::cout << "    first: " << violations.front() << " (--verbose names them all)\n";
    }
    total.published += t.published;
    total.confirmed += t.confirmed;
    total.recovered += t.recovered;
    total.lost += t.lost;
    total.duplicated += t.duplicated;
    total.phantom += t.phantom;
    total.corrupted += t.corrupted;
    total.resurrected += t.resurrected;
    total.not_redelivered += t.not_redelivered;
    total.acked += t.acked;
    total.acked_durable += t.acked_durable;
    total.unconfirmed_recovered += t.unconfirmed_recovered;
    total.queue_missing += t.queue_missing;

    // The drain's gets took the messages with no_ack; a confirmed publish after them on the same connection
    // makes those removals durable. That publish, the marker, must be in the queue next round.
    published_ever = std::move(published);
    confirmed_ever.insert(confirmed.begin(), confirmed.end());
    marker = "r" + std::to_string(round) + "m";
    published_ever.insert(*marker);
    for (const Recovered& r : *recovered) drained_durably.insert(r.id);
    if (!publish_confirmed(*reader, queue, *marker)) {
      std::cerr << "round " << round << ": the marker publish after the drain was not confirmed\n";
      return 1;
    }
  }
  const int status = broker->stop();
  std::cout << "summary: " << o.rounds << " rounds (seed " << o.seed << "): published " << total.published
            << ", confirmed " << total.confirmed << ", recovered " << total.recovered << " ("
            << total.unconfirmed_recovered << " unconfirmed), acked " << total.acked << " (" << total.acked_durable
            << " durably); lost=" << total.lost << " duplicated=" << total.duplicated << " phantom=" << total.phantom
            << " corrupted=" << total.corrupted << " resurrected acks=" << total.resurrected
            << " queue gone=" << total.queue_missing << "; not redelivered: " << total.not_redelivered
            << " (a statistic)\n";
  if (status != 0) std::cout << "the broker did not exit cleanly on SIGTERM at the end (status " << status << ")\n";
  if (total.bad()) {
    std::cout << "FAILED: the broker broke a durability promise; its log: " << broker->log_file().string() << "\n";
    return 1;
  }
  std::error_code ec;
  if (o.data_dir.empty()) std::filesystem::remove_all(work_dir, ec);
  std::cout << "ok\n";
  return status == 0 ? 0 : 1;
}
