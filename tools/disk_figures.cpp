#include "tools/disk_figures.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace firemq::tools {
namespace fs = std::filesystem;
using namespace std::chrono;
using Clock = steady_clock;

std::optional<std::uint64_t> disk_flushes(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  std::ifstream in("/proc/diskstats");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    unsigned major_no = 0, minor_no = 0;
    std::string name;
    fields >> major_no >> minor_no >> name;
    if (major_no != major(st.st_dev) || minor_no != minor(st.st_dev)) continue;
    std::vector<std::uint64_t> v;
    std::uint64_t x;
    while (fields >> x) v.push_back(x);
    if (v.size() >= 17) return v[15];
    return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t dir_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

Percentiles percentiles(std::vector<std::uint32_t>& us) {
  if (us.empty()) return {};
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * (us.size() - 1) + 0.5))] / 1000.0;
  };
  return {at(0.5), at(0.99), us.back() / 1000.0};
}

std::optional<FsyncProbe> probe_fsync(const fs::path& dir, int samples) {
  const fs::path file = dir / "fsync-probe";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return std::nullopt;
  std::vector<std::uint32_t> us;
  const char bytes[16] = "firemq fsync 16";
  const auto flushes_before = disk_flushes(dir);
  for (int i = 0; i < samples; ++i) {
    const auto t0 = Clock::now();
    if (::write(fd, bytes, sizeof bytes) != sizeof bytes || ::fdatasync(fd) != 0) {
      ::close(fd);
      return std::nullopt;
    }
    us.push_back(static_cast<std::uint32_t>(duration_cast<microseconds>(Clock::now() - t0).count()));
  }
  const auto flushes_after = disk_flushes(dir);
  ::close(fd);
  fs::remove(file);
  Percentiles p = percentiles(us);
  FsyncProbe probe{p.median_ms, p.p99_ms, 0};
  if (flushes_before && flushes_after) probe.flushes_per_sync = double(*flushes_after - *flushes_before) / samples;
  return probe;
}

}  // namespace firemq::tools
