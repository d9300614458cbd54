// firemq-bench: throughput of one publisher and one consumer through the broker, for message sizes and with or
// without publisher confirms. Starts the reference broker on a free port (or tests --url), runs each scenario,
// prints a table (and --json). It grows into the performance tool later; docs/benchmarks.md has its figures.
//
// Publisher: pipelined publishes, written in batches; with confirms, at most --window unconfirmed at a time.
// Consumer: a subscription with credit --window, topped up by half each time half is used, as the spec advises;
// no_ack, so the broker's work per message is route, enqueue, deliver.
#include <boost/program_options.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include "harness/embedded_broker.h"
#include "harness/wire.h"
#include "protocol/messages.h"
#include "protocol/url.h"

namespace po = boost::program_options;
using namespace firemq;
using namespace firemq::conform;
using namespace std::chrono;

namespace {


struct Scenario {
  std::size_t body_size;
  bool confirms;
  std::uint64_t count;
};

struct Figures {
  double publish_seconds = 0;  // until the last publish was written (with confirms: confirmed)
  double total_seconds = 0;    // until the consumer had every message
};

// A connection after hello/welcome; nullopt (with a message on stderr) when it fails.
std::unique_ptr<WireConnection> open(const Endpoint& e) {
  auto wire = open_session(e, "firemq-bench", Clock::now() + seconds(5));
  if (!wire) {
    std::cerr << "firemq-bench: " << wire.error() << "\n";
    return nullptr;
  }
  return std::move(*wire);
}

// Sends a request and waits for its ok.
bool request(WireConnection& wire, const Message& m) {
  const auto deadline = Clock::now() + seconds(5);
  wire.send(encode_frame(m), deadline);
  WireEvent ev = wire.receive(deadline);
  auto* f = std::get_if<FrameEvent>(&ev);
  return f != nullptr && f->frame.op() == static_cast<std::uint8_t>(OpCode::ok);
}

void consume(WireConnection& wire, std::uint64_t count, std::uint64_t window, const std::string& queue,
             std::atomic<bool>& subscribed, Clock::time_point& done_at) {
  op::Subscribe sub;
  sub.rid = 2;
  sub.sub = 1;
  sub.queue = queue;
  sub.credit = window;
  sub.no_ack = true;
  if (!request(wire, sub)) return;
  subscribed = true;
  std::uint64_t received = 0, since_top_up = 0;
  const Bytes top_up = encode_frame(op::Credit{1, window / 2});
  while (received < count) {
    WireEvent ev = wire.receive(Clock::now() + seconds(30));
    auto* f = std::get_if<FrameEvent>(&ev);
    if (f == nullptr) break;
    if (f->frame.op() != static_cast<std::uint8_t>(OpCode::deliver)) continue;
    ++received;
    if (++since_top_up == window / 2) {
      wire.send(top_up, Clock::now() + seconds(5));
      since_top_up = 0;
    }
  }
  done_at = Clock::now();
  if (received < count) std::cerr << "firemq-bench: consumer got " << received << " of " << count << "\n";
}

// Reads confirms until at most `max_outstanding` publishes are unconfirmed.
void await_confirms(WireConnection& wire, std::uint64_t published, std::uint64_t& confirmed,
                    std::uint64_t max_outstanding) {
  while (published - confirmed > max_outstanding) {
    WireEvent ev = wire.receive(Clock::now() + seconds(30));
    auto* f = std::get_if<FrameEvent>(&ev);
    if (f == nullptr) return;
    auto m = decode_frame(f->frame);
    if (!m || !std::holds_alternative<op::Confirm>(*m)) continue;
    const auto& c = std::get<op::Confirm>(*m);
    confirmed = std::max(confirmed, c.nack ? c.seq : c.upto);
  }
}

void publish(WireConnection& wire, const Scenario& s, std::uint64_t window, const std::string& queue) {
  const Bytes body(s.body_size, 0x42);
  Bytes batch;
  std::uint64_t confirmed = 0;
  for (std::uint64_t i = 1; i <= s.count; ++i) {
    op::Publish p;
    p.seq = s.confirms ? i : 0;
    p.key = queue;
    const Bytes frame = encode_frame(p, body);
    batch.insert(batch.end(), frame.begin(), frame.end());
    if (batch.size() >= 64 * 1024 || i == s.count) {
      wire.send(batch, Clock::now() + seconds(30));
      batch.clear();
      if (s.confirms) await_confirms(wire, i, confirmed, window);
    }
  }
  if (s.confirms) await_confirms(wire, s.count, confirmed, 0);
}

std::optional<Figures> run(const Endpoint& e, const Scenario& s, std::uint64_t window, int index) {
  auto setup = open(e);
  auto publisher = open(e);
  auto consumer = open(e);
  if (!setup || !publisher || !consumer) return std::nullopt;
  const std::string queue = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(index);
  op::DeclareQueue declare;
  declare.rid = 1;
  declare.name = queue;
  declare.auto_delete = true;
  if (!request(*setup, declare)) return std::nullopt;
  std::atomic<bool> subscribed{false};
  Clock::time_point consumed_at;
  std::thread consumer_thread(consume, std::ref(*consumer), s.count, window, queue, std::ref(subscribed),
                              std::ref(consumed_at));
  while (!subscribed) std::this_thread::sleep_for(milliseconds(1));
  const auto start = Clock::now();
  publish(*publisher, s, window, queue);
  const auto published_at = Clock::now();
  consumer_thread.join();
  return Figures{duration<double>(published_at - start).count(), duration<double>(consumed_at - start).count()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string url, broker = FIREMQ_BROKER_PATH;
  std::uint64_t count = 200'000, window = 1000;
  std::vector<std::size_t> sizes = {16, 1024};
  bool json = false;
  po::options_description flags("firemq-bench [flags]");
  flags.add_options()("help,h", "print this help and exit")
      ("url", po::value(&url), "the broker (fire://...); default: start the reference broker")
      ("broker", po::value(&broker)->default_value(broker), "the reference broker executable")
      ("count", po::value(&count)->default_value(count), "messages per scenario")
      ("sizes", po::value(&sizes)->multitoken(), "body sizes in bytes (default 16 1024)")
      ("window", po::value(&window)->default_value(window), "consumer credit, and unconfirmed publishes allowed")
      ("json", po::bool_switch(&json), "print the figures as JSON");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "firemq-bench: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  std::unique_ptr<EmbeddedBroker> embedded;
  Endpoint endpoint{"127.0.0.1", 0, "guest", "guest", "/"};
  if (url.empty()) {
    EmbeddedOptions eo;
    eo.broker_path = broker;
    eo.work_dir = std::filesystem::temp_directory_path() / ("firemq-bench-" + std::to_string(::getpid()));
    auto started = EmbeddedBroker::start(eo);
    if (!started) {
      std::cerr << "firemq-bench: " << started.error() << "\n";
      return 2;
    }
    embedded = std::move(*started);
    endpoint.port = embedded->port();
  } else {
    auto parsed = parse_url(url);
    if (!parsed || parsed->tls || parsed->websocket) {
      std::cerr << "firemq-bench: --url must be a fire:// URL\n";
      return 2;
    }
    endpoint = {parsed->host, parsed->port, parsed->user, parsed->password, parsed->vhost};
  }
  nlohmann::json results = nlohmann::json::array();
  if (!json) std::cout << "  body  confirms    messages   publish msg/s   end-to-end msg/s   end-to-end MB/s\n";
  int index = 0;
  for (std::size_t size : sizes) {
    for (bool confirms : {false, true}) {
      auto f = run(endpoint, Scenario{size, confirms, count}, window, ++index);
      if (!f) return 1;
      const double publish_rate = count / f->publish_seconds;
      const double total_rate = count / f->total_seconds;
      results.push_back({{"body_bytes", size}, {"confirms", confirms}, {"messages", count},
                         {"publish_msgs_per_s", publish_rate}, {"end_to_end_msgs_per_s", total_rate}});
      if (!json) {
        std::cout << std::setw(6) << size << "  " << std::setw(8) << (confirms ? "yes" : "no") << "  " << std::setw(10) << count
                  << "  " << std::setw(14) << std::fixed << std::setprecision(0) << publish_rate << "  " << std::setw(17)
                  << total_rate << "  " << std::setw(16) << std::setprecision(1) << total_rate * size / 1e6 << "\n";
      }
    }
  }
  if (json) std::cout << results.dump(2) << "\n";
  return 0;
}
