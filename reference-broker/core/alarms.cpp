#include "reference-broker/core/alarms.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include "reference-broker/core/memory_account.h"

namespace firemq {

std::size_t default_memory_high_watermark() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return std::size_t{1} << 30;
  return static_cast<std::size_t>(static_cast<double>(pages) * static_cast<double>(page_size) * 0.6);
}

Alarms::Alarms(AlarmLimits limits) : limits_(std::move(limits)) {
  if (limits_.memory_high_watermark == 0) limits_.memory_high_watermark = default_memory_high_watermark();
}

bool Alarms::update(const std::string& storage_failure) {
  const bool was_memory = memory_, was_disk = disk_, was_failed = !storage_failure_.empty();
  if (storage_failure_.empty()) storage_failure_ = storage_failure;  // the first failure; it never clears
  memory_ = MemoryAccount::in_use() >= limits_.memory_high_watermark;
  struct statvfs fs {};
  // A filesystem that cannot be read raises no alarm: the broker goes on rather than stopping every publisher.
  if (limits_.disk_free_limit > 0 && ::statvfs(limits_.disk_path.c_str(), &fs) == 0) {
    disk_ = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < limits_.disk_free_limit;
  } else {
    disk_ = false;
  }
  return memory_ != was_memory || disk_ != was_disk || !storage_failure_.empty() != was_failed;
}

std::string Alarms::describe() const {
  std::string out;
  const auto add = [&out](const std::string& alarm) { out += (out.empty() ? "" : "; ") + alarm; };
  if (memory_) add("memory high watermark reached");
  if (disk_) add("disk free limit reached");
  if (!storage_failure_.empty()) add("message store failed, publishers are paused until restart: " + storage_failure_);
  return out;
}

}  // namespace firemq
