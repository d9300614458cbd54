// The message store's system calls, in one place: appending to a file, fsync, the atomic replacement of a small
// file (write, fsync, rename, fsync the directory). Each write and each fsync passes through a fault-injection
// seam (StorageFaults), so tests can fail the Nth of either and check that nothing unsynced is confirmed.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>

#include "protocol/bytes.h"
#include "protocol/error.h"

namespace firemq {

// Which write or fsync fails next: a count from 1 over the whole process, 0 for never. Set by tests and by the
// broker's --storage-fault flag; read on the storage thread and the broker thread, hence atomics.
struct StorageFaults {
  std::atomic<std::uint64_t> fail_write_number{0};
  std::atomic<std::uint64_t> fail_fsync_number{0};
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> fsyncs{0};
  std::atomic<int> error{EIO};  // the errno the failing call gives: EIO (a failing disk) or ENOSPC (a full one)

  // "write:N" or "fsync:N", then optionally ":eio" or ":enospc"; the error says what was expected.
  Status configure(const std::string& spec);
  bool next_write_fails() { return ++writes == fail_write_number.load(); }
  bool next_fsync_fails() { return ++fsyncs == fail_fsync_number.load(); }
};

StorageFaults& storage_faults();

// Every fsync the process made (the message store's and the definitions file's) and how long each took, as a
// histogram for /metrics (management_metrics.cpp). Counted on the storage thread, read on the broker thread.
struct StorageStats {
  // Upper bounds of the buckets, in microseconds; an fsync slower than the last is counted in none but the total.
  static constexpr std::uint64_t kBucketMicros[] = {100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000};
  std::atomic<std::uint64_t> buckets[std::size(kBucketMicros)] = {};  // each counts its own range, not cumulative
  std::atomic<std::uint64_t> fsyncs{0};
  std::atomic<std::uint64_t> total_nanos{0};

  void record(std::uint64_t nanos);
};

StorageStats& storage_stats();

// Each call below returns an IoStatus (protocol/error.h): done, or what failed (the file and errno's text).

// A file opened for appending. Move-only; closes on destruction.
class AppendFile {
 public:
  // Creates the file; fails if it exists (segments are never reopened for writing).
  static Result<AppendFile, std::string> create(const std::filesystem::path& path);
  AppendFile(AppendFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Writes every byte (retrying short writes); the error names the file and errno's text.
  IoStatus append(ByteView bytes);
  // fdatasync: what was appended before the call is on disk when it returns without error.
  IoStatus sync();
  const std::filesystem::path& path() const { return path_; }

 private:
  AppendFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

// Modes of what the broker creates in the data directory: only its own user may read messages and definitions
// (docs/durability.md, "File modes"; RabbitMQ's packages keep their data directory 0750 for the rabbitmq user,
// and its Erlang cookie 0400).
inline constexpr unsigned kPrivateFileMode = 0600;
inline constexpr unsigned kPrivateDirectoryMode = 0700;

// Creates `dir` and any missing parents with kPrivateDirectoryMode (as `mkdir -p -m 0700`). Directories that
// already exist keep their modes: the broker tightens only what it creates.
IoStatus create_private_directories(const std::filesystem::path& dir);
// Replaces `path` with `bytes` so that a crash leaves either the old file or the new one, never a mix.
IoStatus replace_file_atomically(const std::filesystem::path& path, ByteView bytes);
// fsync of a directory: a created, renamed or removed entry in it is on disk.
IoStatus sync_directory(const std::filesystem::path& dir);
// Takes the data directory for this process (an flock on <dir>/lock, held until exit): two brokers writing one
// store would corrupt it. The error says the directory is in use, or why it could not be locked.
IoStatus lock_data_directory(const std::filesystem::path& dir);
// fsync of a file that is not open (one written by an earlier run of the broker).
IoStatus sync_existing_file(const std::filesystem::path& path);
// The whole file; the error names it.
Result<Bytes, std::string> read_whole_file(const std::filesystem::path& path);

}  // namespace firemq
