// The memory the broker holds for messages and for frames waiting to be written: what the memory high watermark
// is compared with (flow control). The broker's own count, not the process's resident size, so that an alarm
// rises and clears with the messages it is about; the count is exact and the same on every machine.
// Runs on the broker thread only (one thread owns all broker state), so a plain counter serves.
#pragma once

#include <cstddef>

namespace firemq {

class MemoryAccount {
 public:
  static void add(std::size_t bytes) { in_use_ += bytes; }
  static void remove(std::size_t bytes) { in_use_ -= bytes < in_use_ ? bytes : in_use_; }
  static std::size_t in_use() { return in_use_; }

 private:
  static inline std::size_t in_use_ = 0;
};

// Bytes counted in the MemoryAccount for as long as this object lives (copies count again).
class AccountedBytes {
 public:
  AccountedBytes() = default;
  explicit AccountedBytes(std::size_t bytes) : bytes_(bytes) { MemoryAccount::add(bytes_); }
  AccountedBytes(const AccountedBytes& other) : AccountedBytes(other.bytes_) {}
  AccountedBytes(AccountedBytes&& other) noexcept : bytes_(other.bytes_) { other.bytes_ = 0; }
  AccountedBytes& operator=(AccountedBytes other) noexcept {
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~AccountedBytes() { MemoryAccount::remove(bytes_); }

 private:
  std::size_t bytes_ = 0;
};

}  // namespace firemq
