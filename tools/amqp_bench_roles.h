// firemq-amqp-bench's two roles, as RabbitMQ's PerfTest has them: a producer publishes to one queue through the
// default exchange (with publisher confirms: at most `confirm_window` unconfirmed, 1 being synchronous), at full
// speed or at a fixed rate; a consumer consumes from it with a prefetch and acks (or auto-acks). Each runs on its
// own thread with its own connection (tools/amqp_bench_connection.h).
//
// Latency, as PerfTest measures it: each body starts with the publish time (this process's steady clock, in ns),
// and a consumer's latency of a message is its receive time minus that. A producer's confirm latency is the time
// from a publish to the basic.ack that covers it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tools/amqp_bench_connection.h"

namespace firemq::amqp_bench {

using Clock = std::chrono::steady_clock;

// What a run asks of its producers and consumers.
struct RunPlan {
  std::string queue;
  std::size_t body_size = 16;
  bool persistent = false;            // delivery-mode 2 (and a durable queue)
  std::uint32_t confirm_window = 0;   // 0: no confirms; 1: wait for each; N: at most N unconfirmed
  std::uint16_t prefetch = 0;         // per consumer; 0: unlimited
  bool auto_ack = false;              // basic.consume no_ack
  std::uint32_t multi_ack_every = 1;  // ack every Nth delivery with multiple=true (1: each one)
  double rate = 0;                    // per producer, messages/s; 0: as fast as it can
  std::uint64_t count = 0;            // per producer; 0: until the deadline
  std::uint32_t batch = 0;            // 0: rabbitmq-c publishes (a system call per frame); N: N publishes per write
  std::chrono::duration<double> seconds{5};  // the deadline after the start
  std::uint64_t expected_deliveries = 0;     // with count: what the consumers wait for (count x producers)
};

// Where every role waits until all are connected, so that connecting is not measured; and where a role that
// failed stops the others. The first error is kept for the report.
class StartLine {
 public:
  explicit StartLine(int roles) : waiting_for_(roles) {}
  // This role is connected. Returns the start time once every role is, or nullopt when the run was aborted.
  std::optional<Clock::time_point> ready_and_wait();
  void abort(const std::string& why);
  bool aborted() const { return aborted_; }
  std::string error() const;
  // The start every role waited for (valid once the run started).
  Clock::time_point start_time() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_for_;
  std::optional<Clock::time_point> start_;
  std::atomic<bool> aborted_{false};
  std::string error_;
};

// What one producer did.
struct ProducerFigures {
  std::uint64_t published = 0, confirmed = 0, nacked = 0;
  Clock::time_point last_publish{}, last_confirm{};
  std::vector<std::uint64_t> confirm_latency_ns;
  bool blocked = false;  // the broker sent connection.blocked (memory or disk alarm)
};

// What one consumer did.
struct ConsumerFigures {
  std::uint64_t received = 0;
  Clock::time_point last_receive{};
  std::vector<std::uint64_t> latency_ns;  // empty for bodies under 8 bytes (no room for the time)
};

// Shared by a run's consumers: deliveries so far, for a run bounded by count.
using DeliveryCounter = std::atomic<std::uint64_t>;

// The roles' bodies: connect, wait at the start line, run until the deadline (or count), fill the figures.
// Errors abort the start line with their reason; they never throw.
void run_producer(const BrokerAddress& address, const RunPlan& plan, StartLine& start, ProducerFigures& figures);
void run_consumer(const BrokerAddress& address, const RunPlan& plan, StartLine& start, DeliveryCounter& delivered,
                  ConsumerFigures& figures);

}  // namespace firemq::amqp_bench
