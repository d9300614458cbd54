#include "reference-broker/store/storage_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace firemq {
namespace {

std::string failure(const char* what, const std::filesystem::path& path, int err) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(err);
}

// The injected failure looks like the real one a full or failing disk gives.
std::string injected(const char* what, const std::filesystem::path& path) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(storage_faults().error.load()) +
         " (injected by --storage-fault)";
}

IoStatus write_fully(int fd, ByteView bytes, const std::filesystem::path& path) {
  if (storage_faults().next_write_fails()) return injected("write", path);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failure("write", path, errno);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return IoStatus::done();
}

IoStatus sync_fd(int fd, const std::filesystem::path& path) {
  if (storage_faults().next_fsync_fails()) return injected("fsync", path);
  const auto started = std::chrono::steady_clock::now();
  const int synced = ::fdatasync(fd);
  const int error = errno;
  storage_stats().record(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count()));
  if (synced != 0) return failure("fsync", path, error);
  return IoStatus::done();
}

}  // namespace

void StorageStats::record(std::uint64_t nanos) {
  fsyncs.fetch_add(1, std::memory_order_relaxed);
  total_nanos.fetch_add(nanos, std::memory_order_relaxed);
  for (std::size_t i = 0; i < std::size(kBucketMicros); ++i) {
    if (nanos <= kBucketMicros[i] * 1000) {
      buckets[i].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

StorageStats& storage_stats() {
  static StorageStats stats;
  return stats;
}

Status StorageFaults::configure(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const auto second = colon == std::string::npos ? std::string::npos : spec.find(':', colon + 1);
  const std::string errno_name = second == std::string::npos ? "eio" : spec.substr(second + 1);
  std::uint64_t number = 0;
  try {
    std::size_t used = 0;
    const std::string digits = colon == std::string::npos ? "" : spec.substr(colon + 1, second - colon - 1);
    number = std::stoull(digits, &used);
    if (used != digits.size()) number = 0;
  } catch (const std::exception&) {
    number = 0;
  }
  if (number == 0 || (kind != "write" && kind != "fsync") || (errno_name != "eio" && errno_name != "enospc")) {
    return Error{0,
                 "--storage-fault: expected write:N or fsync:N with N >= 1, and :eio (the default) or :enospc, got '" +
                     spec + "'"};
  }
  (kind == "write" ? fail_write_number : fail_fsync_number).store(number);
  error.store(errno_name == "enospc" ? ENOSPC : EIO);
  return std::nullopt;
}

StorageFaults& storage_faults() {
  static StorageFaults faults;
  return faults;
}

Result<AppendFile, std::string> AppendFile::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return failure("create", path, errno);
  return AppendFile(fd, path);
}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

IoStatus AppendFile::append(ByteView bytes) { return write_fully(fd_, bytes, path_); }

IoStatus AppendFile::sync() { return sync_fd(fd_, path_); }

IoStatus create_private_directories(const std::filesystem::path& dir) {
  std::error_code ec;
  if (dir.empty() || std::filesystem::is_directory(dir, ec)) return IoStatus::done();
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (IoStatus parent = create_private_directories(dir.parent_path()); !parent) return parent;
  }
  if (::mkdir(dir.c_str(), kPrivateDirectoryMode) != 0 && errno != EEXIST)
    return failure("create directory", dir, errno);
  return IoStatus::done();
}

IoStatus sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return failure("open directory", dir, errno);
  IoStatus status = sync_fd(fd, dir);
  ::close(fd);
  return status;
}

IoStatus lock_data_directory(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC,
                        kPrivateFileMode);  // left open: the lock lives with it
  if (fd < 0) return failure("open", path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return "data directory " + dir.string() + " is in use by another firemq-broker";
    return failure("lock", path, err);
  }
  return IoStatus::done();
}

IoStatus sync_existing_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure("open", path, errno);
  IoStatus status = sync_fd(fd, path);
  ::close(fd);
  return status;
}

IoStatus replace_file_atomically(const std::filesystem::path& path, ByteView bytes) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return failure("create", temporary, errno);
  IoStatus status = write_fully(fd, bytes, temporary);
  if (status) status = sync_fd(fd, temporary);
  ::close(fd);
  if (status && std::rename(temporary.c_str(), path.c_str()) != 0) status = failure("rename", temporary, errno);
  if (status) status = sync_directory(path.parent_path().empty() ? "." : path.parent_path());
  std::error_code ignored;  // best effort: the old file is still whole
  if (!status) std::filesystem::remove(temporary, ignored);
  return status;
}

Result<Bytes, std::string> read_whole_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure("open", path, errno);
  Bytes bytes;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return failure("read", path, err);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace firemq
