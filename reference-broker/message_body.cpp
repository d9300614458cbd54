#include "reference-broker/message_body.h"

#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

namespace firemq {

PageFile::~PageFile() {
  if (fd_ >= 0) ::close(fd_);
}

IoStatus PageFile::read(std::uint64_t offset, std::size_t size, Bytes& out) const {
  out.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "read " + name_ + ": " + std::strerror(errno);
    if (n == 0) return "read " + name_ + ": the file ends at " + std::to_string(offset + done) + ", before the body does";
    done += static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

MessageBody::MessageBody(const MessageBody& other) : bytes_(other.bytes_) {
  MemoryAccount::add(bytes_.size());
  if (other.paged_) paged_ = std::make_unique<const PagedPlace>(*other.paged_);
}

ByteView MessageBody::bytes() const {
  assert(in_memory());
  return bytes_;
}

void MessageBody::page_out(PagedPlace place) const {
  if (!in_memory()) return;
  MemoryAccount::remove(bytes_.size());
  paged_ = std::make_unique<const PagedPlace>(std::move(place));
  Bytes().swap(bytes_);  // the capacity goes too
}

IoStatus MessageBody::page_in() const {
  if (in_memory()) return std::nullopt;
  Bytes bytes;
  if (IoStatus error = paged_->file->read(paged_->offset, paged_->size, bytes)) return error;
  bytes_ = std::move(bytes);
  MemoryAccount::add(bytes_.size());
  paged_.reset();  // the file goes once no body refers to it
  return std::nullopt;
}

}  // namespace firemq
