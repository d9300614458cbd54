// The message rates the management API keeps, as RabbitMQ's management plugin keeps them: every collect interval
// (RabbitMQ's collect_statistics_interval, 5 s by default) a timer on the management side reads the counters and
// depths that the broker already keeps (the overview's message_stats and queue totals, each vhost's, each queue's
// message_stats and depths) and appends them to bounded rings in memory. GET /api/overview and /api/queues answer
// from them RabbitMQ's NAME_details objects: {rate} always, and with ?msg_rates_age=S&msg_rates_incr=S (or
// lengths_age and lengths_incr) {rate, samples: [{sample, timestamp}...] newest first, avg_rate, avg}.
//
// Bound: the last kTicks collect intervals (120: 10 minutes at 5 s). A series stores a sample only when one of its
// values changed since its previous sample (the value in between is carried forward when read), so an idle queue
// costs one sample (about 240 bytes with its key and map node) and a busy one at most kTicks + kTrimBatch: 7
// values, 8 bytes each, plus the tick number, 64 bytes a sample, 8.8 KiB a queue (message_history_bench: 10,000
// busy queues, 86 MB). The series of a queue that is gone is dropped at the next collection.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace firemq {

// RabbitMQ's ?PREFIX_age=SECONDS&PREFIX_incr=SECONDS: samples of the last `age`, `incr` apart.
struct StatsRange {
  std::int64_t age_ms = 0;
  std::int64_t incr_ms = 0;
};

// The values of a set of series at one time (or of several sets summed: a user's vhosts).
struct StatsPoint {
  std::int64_t timestamp_ms = 0;
  std::vector<std::uint64_t> values;
};

class MessageHistory {
 public:
  static constexpr std::size_t kTicks = 120;
  // Vectors, not deques: an idle queue's one sample then costs its bytes, not a deque's 512-byte blocks. The
  // samples older than the history are erased kTrimBatch at a time, so that a busy queue's erase moves its
  // samples once every kTrimBatch collections: a series holds at most kTicks + kTrimBatch samples.
  static constexpr std::size_t kTrimBatch = 16;

  explicit MessageHistory(std::int64_t interval_ms) : interval_ms_(interval_ms) {}
  std::int64_t interval_ms() const { return interval_ms_; }

  // One collection: begin_tick(now), record() each series, end_tick() (which drops the series not recorded).
  void begin_tick(std::int64_t now_ms);
  // `values` of the series `key`; its first `counters` are counters: one that went down means the series was
  // reset (a queue deleted and declared again under its name), and its old samples are dropped.
  void record(const std::string& key, std::vector<std::uint64_t> values, std::size_t counters);
  void end_tick();

  // Points newest first at the given times (newest first), of the series `keys` summed; a series with no sample
  // yet at a time counts as 0; the list stops at the first time none of them had a sample.
  std::vector<StatsPoint> points_at(const std::vector<std::string>& keys, const std::vector<std::int64_t>& times) const;
  // The times of the last two collections (for the instant rate), newest first.
  std::vector<std::int64_t> last_two_times() const;
  // The times a range asks for: from the newest collection back, `incr` apart, no older than `age` before it.
  std::vector<std::int64_t> range_times(const StatsRange& range) const;
  std::size_t series_count() const { return series_.size(); }
  // The samples a series holds (the memory bound: at most kTicks + kTrimBatch).
  std::size_t samples_kept(const std::string& key) const {
    const auto found = series_.find(key);
    return found == series_.end() ? 0 : found->second.ticks.size();
  }

 private:
  struct Series {
    std::vector<std::uint64_t> ticks;   // the tick of each sample, ascending
    std::vector<std::uint64_t> values;  // width values a sample
    std::size_t width = 0;
    std::uint64_t recorded_at = 0;  // the last tick it was recorded at
  };
  // The newest tick whose time is at or before `time_ms` (a half interval of slack for the timer's jitter).
  std::optional<std::uint64_t> tick_at(std::int64_t time_ms) const;
  // Where in s.values the sample in force at `tick` begins.
  static std::optional<std::size_t> sample_at(const Series& s, std::uint64_t tick);
  void trim(Series& s) const;
  static void reserve_one_more(Series& s);

  std::int64_t interval_ms_;
  std::uint64_t tick_ = 0;                                    // the current collection's number
  std::deque<std::pair<std::uint64_t, std::int64_t>> times_;  // (tick, time) of the last kTicks collections
  std::map<std::string, Series> series_;
};

// RabbitMQ's NAME_details object for the value at `column` of the points: {"rate"} from the newest two points
// (0.0 without two), and with `with_samples` also "samples" (newest first), "avg_rate" and "avg" (with two points
// or more), as rabbit_mgmt_stats computes them.
nlohmann::json stats_details(const std::vector<StatsPoint>& points, std::size_t column, bool with_samples);

// Adds NAME_details beside each NAME of `names` in `object`, for columns first_column, first_column + 1, ...: the
// series `keys` summed, with the samples `range` asks for when there is one, the rate of the last two collections
// otherwise.
void add_stats_details(nlohmann::json& object, const std::vector<const char*>& names, std::size_t first_column,
                       const MessageHistory& history, const std::vector<std::string>& keys,
                       const std::optional<StatsRange>& range);

}  // namespace firemq
