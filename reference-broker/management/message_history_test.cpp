// The management API's history of message rates (message_history.h): samples, carried-forward values, the bound,
// RabbitMQ's rate, avg_rate and avg, and the series of deleted queues dropped.
#include "reference-broker/management/message_history.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

using Json = nlohmann::json;

// Collections every 5 s from t=1,000,000 ms of one series "q" with the values given (one counter, one gauge).
MessageHistory collected(const std::vector<std::vector<std::uint64_t>>& values) {
  MessageHistory history(5000);
  std::int64_t now = 1'000'000;
  for (const auto& v : values) {
    history.begin_tick(now);
    history.record("q", v, 1);
    history.end_tick();
    now += 5000;
  }
  return history;
}

TEST(MessageHistory, RateIsTheGrowthOfTheLastTwoCollectionsPerSecond) {
  MessageHistory history = collected({{0, 0}, {50, 3}, {100, 1}});
  Json stats = Json::object();
  add_stats_details(stats, {"publish", "messages"}, 0, history, {"q"}, std::nullopt);
  EXPECT_EQ(stats["publish_details"], (Json{{"rate", 10.0}}));
  EXPECT_EQ(stats["messages_details"], (Json{{"rate", -0.4}}));  // a gauge that fell: a negative rate, as RabbitMQ's
}

TEST(MessageHistory, RangeGivesSamplesNewestFirstWithAvgRateAndAvg) {
  MessageHistory history = collected({{0, 0}, {50, 0}, {100, 0}, {100, 0}, {200, 0}});
  const std::vector<StatsPoint> points = history.points_at({"q"}, history.range_times(StatsRange{10'000, 5'000}));
  const Json d = stats_details(points, 0, true);
  EXPECT_EQ(d["samples"], (Json::parse(R"([{"sample": 200, "timestamp": 1020000}, {"sample": 100, "timestamp": 1015000},
                                            {"sample": 100, "timestamp": 1010000}])")));
  EXPECT_DOUBLE_EQ(d["rate"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(d["avg_rate"].get<double>(), 10.0);  // (200 - 100) over 10 s
  EXPECT_NEAR(d["avg"].get<double>(), 400.0 / 3, 1e-9);
}

TEST(MessageHistory, UnchangedValuesAreCarriedForwardAndAnIncrementCoarserThanTheIntervalSkips) {
  MessageHistory history = collected({{7, 1}, {7, 1}, {7, 1}, {9, 1}});
  const std::vector<StatsPoint> points = history.points_at({"q"}, history.range_times(StatsRange{15'000, 10'000}));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].values, (std::vector<std::uint64_t>{9, 1}));
  EXPECT_EQ(points[1].values, (std::vector<std::uint64_t>{7, 1}));  // at t+5 s, carried from the first sample
  EXPECT_EQ(points[0].timestamp_ms - points[1].timestamp_ms, 10'000);
}

TEST(MessageHistory, KeepsOnlyTheLastTicksAndStopsWhereTheSeriesBegan) {
  std::vector<std::vector<std::uint64_t>> values;
  for (std::uint64_t i = 0; i < 300; ++i) values.push_back({i, 0});
  MessageHistory history = collected(values);
  const std::vector<StatsPoint> points = history.points_at({"q"}, history.range_times(StatsRange{3600'000, 5'000}));
  EXPECT_EQ(points.size(), MessageHistory::kTicks);
  EXPECT_EQ(points.back().values[0], 300u - MessageHistory::kTicks);
}

TEST(MessageHistory, ABusySeriesHoldsAtMostTheBoundAndAnIdleOneASample) {
  MessageHistory history(5000);
  for (std::uint64_t t = 0; t < 500; ++t) {
    history.begin_tick(static_cast<std::int64_t>(t) * 5000);
    history.record("busy", {t}, 1);
    history.record("idle", {7}, 1);
    history.end_tick();
    EXPECT_LE(history.samples_kept("busy"), MessageHistory::kTicks + MessageHistory::kTrimBatch);
  }
  EXPECT_GE(history.samples_kept("busy"), MessageHistory::kTicks);
  EXPECT_EQ(history.samples_kept("idle"), 1u);
  // The idle series' one sample, from the first collection, is still its value at every time kept.
  EXPECT_EQ(history.points_at({"idle"}, history.range_times(StatsRange{600'000, 5'000})).size(),
            MessageHistory::kTicks);
}

TEST(MessageHistory, ACounterThatWentDownStartsTheSeriesAgain) {
  MessageHistory history = collected({{10, 0}, {20, 0}, {3, 0}});
  const std::vector<StatsPoint> points = history.points_at({"q"}, history.range_times(StatsRange{60'000, 5'000}));
  ASSERT_EQ(points.size(), 1u);  // the queue was deleted and declared again: its old samples went
  EXPECT_EQ(stats_details(points, 0, true)["rate"], 0.0);
}

TEST(MessageHistory, SeriesSumAcrossKeysAndDeletedOnesAreDropped) {
  MessageHistory history(5000);
  history.begin_tick(0);
  history.record("a", {1}, 1);
  history.record("b", {2}, 1);
  history.end_tick();
  EXPECT_EQ(history.points_at({"a", "b"}, {0})[0].values, (std::vector<std::uint64_t>{3}));
  history.begin_tick(5000);
  history.record("a", {1}, 1);
  history.end_tick();
  EXPECT_EQ(history.series_count(), 1u);
  EXPECT_TRUE(history.points_at({"b"}, {5000}).empty());
}

TEST(MessageHistory, NoCollectionYetIsRateZeroAndNoSamples) {
  MessageHistory history(5000);
  Json stats = Json::object();
  add_stats_details(stats, {"ack"}, 0, history, {"q"}, StatsRange{60'000, 5'000});
  EXPECT_EQ(stats["ack_details"], (Json{{"rate", 0.0}, {"samples", Json::array()}}));
}

}  // namespace
}  // namespace firemq
