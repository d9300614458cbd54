// The management API's message rates over time (message_history.h).
#include "reference-broker/management/message_history.h"

#include <algorithm>

namespace firemq {

using Json = nlohmann::json;

void MessageHistory::begin_tick(std::int64_t now_ms) {
  ++tick_;
  times_.emplace_back(tick_, now_ms);
  while (times_.size() > kTicks) times_.pop_front();
}

void MessageHistory::record(const std::string& key, std::vector<std::uint64_t> values, std::size_t counters) {
  Series& s = series_[key];
  s.recorded_at = tick_;
  if (s.width != values.size()) s = Series{{}, {}, values.size(), tick_};
  if (!s.ticks.empty()) {
    const auto newest = s.values.end() - static_cast<std::ptrdiff_t>(s.width);
    const bool reset = !std::equal(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(counters), newest,
                                   [](std::uint64_t now, std::uint64_t before) { return now >= before; });
    if (reset) {
      s.ticks.clear();
      s.values.clear();
    } else if (std::equal(values.begin(), values.end(), newest)) {
      return trim(s);  // unchanged: carried forward when read, no sample stored
    }
  }
  reserve_one_more(s);
  s.ticks.push_back(tick_);
  s.values.insert(s.values.end(), values.begin(), values.end());
  trim(s);
}

// Growth doubles as a vector's would, but never past the bound: a busy series holds kTicks + kTrimBatch samples,
// not the next power of two.
void MessageHistory::reserve_one_more(Series& s) {
  if (s.ticks.size() < s.ticks.capacity()) return;
  const std::size_t samples = std::min(std::max<std::size_t>(1, 2 * s.ticks.size()), kTicks + kTrimBatch + 1);
  s.ticks.reserve(samples);
  s.values.reserve(samples * s.width);
}

// Drops the samples older than the oldest collection kept, except the newest of them (it holds the value carried
// forward to the collections after it), once there are kTrimBatch of them.
void MessageHistory::trim(Series& s) const {
  const std::uint64_t oldest = times_.empty() ? tick_ : times_.front().first;
  std::size_t stale = 0;
  while (stale + 1 < s.ticks.size() && s.ticks[stale + 1] <= oldest) ++stale;
  if (stale < kTrimBatch) return;
  s.ticks.erase(s.ticks.begin(), s.ticks.begin() + static_cast<std::ptrdiff_t>(stale));
  s.values.erase(s.values.begin(), s.values.begin() + static_cast<std::ptrdiff_t>(stale * s.width));
}

void MessageHistory::end_tick() {
  std::erase_if(series_, [this](const auto& entry) { return entry.second.recorded_at != tick_; });
}

std::optional<std::uint64_t> MessageHistory::tick_at(std::int64_t time_ms) const {
  const auto after = std::upper_bound(times_.begin(), times_.end(), time_ms + interval_ms_ / 2,
                                      [](std::int64_t t, const auto& entry) { return t < entry.second; });
  if (after == times_.begin()) return std::nullopt;
  return std::prev(after)->first;
}

std::optional<std::size_t> MessageHistory::sample_at(const Series& s, std::uint64_t tick) {
  const auto after = std::upper_bound(s.ticks.begin(), s.ticks.end(), tick);
  if (after == s.ticks.begin()) return std::nullopt;  // the series began after that tick
  return (static_cast<std::size_t>(after - s.ticks.begin()) - 1) * s.width;
}

std::vector<StatsPoint> MessageHistory::points_at(const std::vector<std::string>& keys,
                                                  const std::vector<std::int64_t>& times) const {
  std::vector<StatsPoint> out;
  for (const std::int64_t time : times) {
    const std::optional<std::uint64_t> tick = tick_at(time);
    if (!tick) break;
    StatsPoint point{time, {}};
    bool any = false;
    for (const std::string& key : keys) {
      const auto found = series_.find(key);
      const std::optional<std::size_t> at = found == series_.end() ? std::nullopt : sample_at(found->second, *tick);
      if (!at) continue;
      const Series& series = found->second;
      point.values.resize(series.width, 0);
      for (std::size_t i = 0; i < series.width; ++i) point.values[i] += series.values[*at + i];
      any = true;
    }
    if (!any) break;
    out.push_back(std::move(point));
  }
  return out;
}

std::vector<std::int64_t> MessageHistory::last_two_times() const {
  std::vector<std::int64_t> out;
  for (auto it = times_.rbegin(); it != times_.rend() && out.size() < 2; ++it) out.push_back(it->second);
  return out;
}

std::vector<std::int64_t> MessageHistory::range_times(const StatsRange& range) const {
  std::vector<std::int64_t> out;
  if (times_.empty()) return out;
  const std::int64_t newest = times_.back().second;
  for (std::int64_t t = newest; t >= newest - range.age_ms; t -= range.incr_ms) out.push_back(t);
  return out;
}

Json stats_details(const std::vector<StatsPoint>& points, std::size_t column, bool with_samples) {
  auto value = [&](std::size_t i) { return static_cast<double>(points[i].values.at(column)); };
  auto per_second = [&](std::size_t newer, std::size_t older) {
    const double ms = static_cast<double>(points[newer].timestamp_ms - points[older].timestamp_ms);
    return ms > 0 ? (value(newer) - value(older)) * 1000.0 / ms : 0.0;
  };
  Json details{{"rate", points.size() >= 2 ? per_second(0, 1) : 0.0}};
  if (!with_samples) return details;
  Json samples = Json::array();
  double total = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    samples.push_back({{"sample", points[i].values.at(column)}, {"timestamp", points[i].timestamp_ms}});
    total += value(i);
  }
  details["samples"] = std::move(samples);
  // As rabbit_mgmt_stats:average/3: the growth over the whole range, and the mean of the samples.
  if (points.size() >= 2) {
    details["avg_rate"] = per_second(0, points.size() - 1);
    details["avg"] = total / static_cast<double>(points.size());
  }
  return details;
}

void add_stats_details(Json& object, const std::vector<const char*>& names, std::size_t first_column,
                       const MessageHistory& history, const std::vector<std::string>& keys,
                       const std::optional<StatsRange>& range) {
  const std::vector<StatsPoint> points = history.points_at(keys, range ? history.range_times(*range)
                                                                       : history.last_two_times());
  for (std::size_t i = 0; i < names.size(); ++i) {
    // Without a sample yet (younger than one collection): rate 0.0 and, with a range, no samples.
    object[std::string(names[i]) + "_details"] = stats_details(points, first_column + i, range.has_value());
  }
}

}  // namespace firemq
