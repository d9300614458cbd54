// What the management history costs with 10,000 queues (docs/management.md, "Message rates"): the time of one
// collection and the memory, for idle queues (one sample each) and busy ones (a new sample every collection),
// over 240 collections (twice the history). Not a test: run by hand; its figures are in the docs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "reference-broker/management/message_history.h"

namespace {

long resident_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

void run(bool busy, const std::vector<std::string>& keys) {
  using Clock = std::chrono::steady_clock;
  const long before = resident_kib();
  firemq::MessageHistory history(5000);
  double worst_ms = 0, total_ms = 0;
  const int collections = 240;
  for (int t = 0; t < collections; ++t) {
    const auto start = Clock::now();
    history.begin_tick(t * 5000);
    const std::uint64_t v = busy ? static_cast<std::uint64_t>(t) * 10 : 5;
    for (const std::string& key : keys) history.record(key, {v, v, 0, v, 3, 3, 0}, 4);
    history.end_tick();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    worst_ms = std::max(worst_ms, ms);
    total_ms += ms;
  }
  const long grown = resident_kib() - before;
  const auto start = Clock::now();
  const auto points = history.points_at({keys[0]}, history.range_times(firemq::StatsRange{600'000, 5'000}));
  const double range_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::printf("%zu %s queues: a collection %.2f ms mean, %.2f ms worst; resident +%ld KiB (%.0f B a queue); "
              "one queue's 10-minute range: %zu points in %.3f ms\n",
              keys.size(), busy ? "busy" : "idle", total_ms / collections, worst_ms, grown,
              grown * 1024.0 / static_cast<double>(keys.size()), points.size(), range_ms);
}

}  // namespace

int main() {
  std::vector<std::string> keys;
  for (int i = 0; i < 10'000; ++i) keys.push_back("q1:/queue-" + std::to_string(i));
  run(false, keys);
  run(true, keys);
}
