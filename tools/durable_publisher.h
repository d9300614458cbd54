// The publisher of firemq-bench-durable: persistent messages with confirms (seq 1, 2, 3...) to one queue,
// pipelined with at most `window` unconfirmed, timing each publish from its write to the confirm that covers it.
// A nack, an error, a lost connection or a confirm missing for `confirm_timeout` ends it with `error` set.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/client/wire.h"

namespace firemq::tools {

struct PublisherSpec {
  std::string queue;
  std::size_t size = 16;  // body bytes; the first 12 say which publisher and which seq (a recovered message
                          // can be told)
  std::uint64_t window = 256;
  std::uint64_t count = 0;  // publishes to make; 0: until `stop_at`
  std::chrono::seconds confirm_timeout{30};
  std::uint32_t publisher_id = 0;
};

struct PublisherResult {
  std::uint64_t published = 0, confirmed = 0;
  std::vector<std::uint32_t> latency_us;  // one per confirmed publish
  conform::Clock::time_point last_confirm{};
  std::uint64_t flow_pauses = 0;
  std::string error;
};

// Waits for `go`, publishes until `stop_at` (or `count` of them), then waits for the last confirms.
void publish(conform::WireConnection& wire, const PublisherSpec& spec,
             const std::atomic<conform::Clock::time_point>& stop_at, const std::atomic<bool>& go, PublisherResult& r);

}  // namespace firemq::tools
