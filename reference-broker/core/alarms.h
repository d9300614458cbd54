// Resource alarms (flow control): a memory high watermark, a disk free limit, and a failed message store. While
// any holds, every publishing connection gets flow {pause: true} and is no longer read; consumers keep consuming;
// flow {pause: false} when all alarms clear (the spec's "flow", RabbitMQ's alarms). The failed store is a disk
// alarm that never clears: a store that could not write is not trusted again until a restart (message_store.h).
#pragma once

#include <cstdint>
#include <string>

namespace firemq {

struct AlarmLimits {
  std::size_t memory_high_watermark = 0;       // bytes of MemoryAccount; 0: 60% of the machine's memory
  std::uint64_t disk_free_limit = 50'000'000;  // bytes free on the filesystem of disk_path (RabbitMQ's default)
  std::string disk_path = ".";
};

class Alarms {
 public:
  explicit Alarms(AlarmLimits limits);
  // Looks again; `storage_failure` is why the message store failed (empty while it has not). True when any
  // alarm rose or cleared.
  bool update(const std::string& storage_failure = "");
  bool active() const { return memory_ || disk_ || !storage_failure_.empty(); }
  bool memory() const { return memory_; }
  // Free space below the limit, or the store failed: RabbitMQ has one disk alarm, and either means the broker
  // cannot write.
  bool disk() const { return disk_ || !storage_failure_.empty(); }
  bool disk_free_low() const { return disk_; }
  // The first failure of the message store (the file and the error); empty while none. It stays until restart.
  const std::string& storage_failure() const { return storage_failure_; }
  // The alarms in effect, for the log: "memory high watermark reached", "disk free limit reached", "message
  // store failed: ...".
  std::string describe() const;
  std::size_t memory_high_watermark() const { return limits_.memory_high_watermark; }

 private:
  AlarmLimits limits_;
  bool memory_ = false;
  bool disk_ = false;
  std::string storage_failure_;
};

// 60% of the machine's physical memory: RabbitMQ's default watermark.
std::size_t default_memory_high_watermark();

}  // namespace firemq
