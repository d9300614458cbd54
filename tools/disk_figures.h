// What firemq-bench-durable measures of the machine rather than the broker: the data disk's flush requests,
// a directory's size, what one fdatasync costs, and the percentiles of a latency sample.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace firemq::tools {

// Flush requests completed by the block device holding `dir` (/proc/diskstats, kernel 4.18+); nullopt when
// not found. Machine-wide: every process's fsyncs count.
std::optional<std::uint64_t> disk_flushes(const std::filesystem::path& dir);

// The bytes of every regular file under `dir`.
std::uint64_t dir_bytes(const std::filesystem::path& dir);

struct Percentiles {
  double median_ms = 0, p99_ms = 0, max_ms = 0;
};

// Of latencies in microseconds (sorted in place).
Percentiles percentiles(std::vector<std::uint32_t>& us);

// What one fdatasync of a 16-byte append costs in a directory.
struct FsyncProbe {
  double median_ms = 0, p99_ms = 0;
  double flushes_per_sync = 0;  // device flush requests per fdatasync (machine-wide count)
};

// `samples` appends of 16 bytes to a file in `dir`, each followed by fdatasync; nullopt when one fails.
std::optional<FsyncProbe> probe_fsync(const std::filesystem::path& dir, int samples);

}  // namespace firemq::tools
