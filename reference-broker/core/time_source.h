// Where the core takes the time from: one place, so that unit tests control it (message TTL, x-expires, the
// time of an x-death). The broker uses SystemTime; tests use ManualTime.
#pragma once

#include <chrono>
#include <cstdint>

namespace firemq {

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  // Milliseconds on a monotonic clock: for expiry.
  virtual std::uint64_t now_ms() const = 0;
  // Milliseconds since the Unix epoch: for expiry times that outlive a restart (the message store's).
  virtual std::uint64_t unix_ms() const = 0;
  // Seconds since the Unix epoch: for timestamps carried in messages (x-death time).
  std::uint64_t unix_seconds() const { return unix_ms() / 1000; }
};

class SystemTime : public TimeSource {
 public:
  std::uint64_t now_ms() const override {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
  std::uint64_t unix_ms() const override {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
  }
};

class ManualTime : public TimeSource {
 public:
  std::uint64_t now_ms() const override { return ms_; }
  std::uint64_t unix_ms() const override { return 1'700'000'000'000 + ms_; }
  void advance(std::uint64_t ms) { ms_ += ms; }

 private:
  std::uint64_t ms_ = 1'000'000;
};

}  // namespace firemq
