#include "reference-broker/store/paging.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "reference-broker/core/log.h"
#include "reference-broker/store/storage_io.h"

namespace firemq {
namespace {

// An unnamed file in `directory` (O_TMPFILE), or, where the filesystem has no such thing, a named one unlinked
// at once: either way nothing is left behind, whatever way the broker stops.
Result<int, std::string> create_unnamed_file(const std::filesystem::path& directory) {
  int fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, kPrivateFileMode);
  if (fd >= 0) return fd;
  std::string name = (directory / "scratch-XXXXXX").string();
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return "cannot create a scratch file in " + directory.string() + ": " + std::strerror(errno);
  ::unlink(name.c_str());
  return fd;
}

IoStatus write_all(int fd, ByteView bytes, const std::string& name) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "write " + name + ": " + std::strerror(errno);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return IoStatus::done();
}

}  // namespace

void BodyPager::write_out(StoredBodies* store) {
  if (waiting_.empty()) return;
  std::vector<MessagePtr> waiting = std::exchange(waiting_, {});
  std::vector<ToScratch> to_scratch;
  Bytes scratch_bytes;
  std::unordered_set<const BrokerMessage*> seen;  // a message two queues hold waits twice: it is written once
  for (const MessagePtr& message : waiting) {
    // Delivered and settled since (nobody else holds it), already out, or already on its way.
    if (message.use_count() == 1 || !message->body().pageable() || !seen.insert(message.get()).second) continue;
    if (auto place = store ? store->stored_body(*message) : std::nullopt) {
      message->body().page_out(std::move(*place));  // already on disk: nothing to write
      ++bodies_paged_out_;
      continue;
    }
    if (scratch_failed_) continue;
    const ByteView body = message->body().bytes();
    to_scratch.push_back({message, scratch_bytes.size()});
    scratch_bytes.insert(scratch_bytes.end(), body.begin(), body.end());
  }
  if (!to_scratch.empty()) page_out_to_scratch(to_scratch, scratch_bytes);
}

void BodyPager::page_out_to_scratch(const std::vector<ToScratch>& bodies, const Bytes& bytes) {
  IoStatus written;
  if (scratch_ == nullptr || scratch_end_ >= options_.scratch_file_bytes) written = start_scratch_file();
  if (written) written = write_all(scratch_->fd(), bytes, scratch_->name());
  if (!written) {
    // The bodies stay in memory (the flow-control watermark still holds the broker's memory in check); a disk
    // that cannot take them now is unlikely to later, so paging to scratch ends here.
    scratch_failed_ = true;
    log_line("paging: " + written.error() + "; message bodies stay in memory from now on");
    return;
  }
  const std::uint64_t start = scratch_end_;
  for (const ToScratch& b : bodies) {
    b.message->body().page_out(PagedPlace{scratch_, start + b.offset, b.message->body().size()});
    ++bodies_paged_out_;
  }
  scratch_end_ += bytes.size();
  scratch_bytes_written_ += bytes.size();
}

IoStatus BodyPager::start_scratch_file() {
  if (IoStatus created = create_private_directories(options_.scratch_directory); !created) return created;
  Result<int, std::string> fd = create_unnamed_file(options_.scratch_directory);
  if (!fd) return fd.error();
  scratch_ = std::make_shared<PageFile>(*fd, "scratch file in " + options_.scratch_directory);
  scratch_end_ = 0;
  return IoStatus::done();
}

}  // namespace firemq
