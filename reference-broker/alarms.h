// Resource alarms (flow control): a memory high watermark and a disk free limit. While either holds, every
// publishing connection gets flow {pause: true} and is no longer read; consumers keep consuming; flow
// {pause: false} when all alarms clear (the spec's "flow", RabbitMQ's alarms).
#pragma once

#include <cstdint>
#include <string>

namespace firemq {

struct AlarmLimits {
  std::size_t memory_high_watermark = 0;  // bytes of MemoryAccount; 0: 60% of the machine's memory
  std::uint64_t disk_free_limit = 50'000'000;  // bytes free on the filesystem of disk_path (RabbitMQ's default)
  std::string disk_path = ".";
};

class Alarms {
 public:
  explicit Alarms(AlarmLimits limits);
  // Looks again; true when the overall state (any alarm or none) changed.
  bool update();
  bool active() const { return memory_ || disk_; }
  bool memory() const { return memory_; }
  bool disk() const { return disk_; }
  std::size_t memory_high_watermark() const { return limits_.memory_high_watermark; }

 private:
  AlarmLimits limits_;
  bool memory_ = false;
  bool disk_ = false;
};

// 60% of the machine's physical memory: RabbitMQ's default watermark.
std::size_t default_memory_high_watermark();

}  // namespace firemq
