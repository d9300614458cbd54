#include "reference-broker/message_body.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace firemq {

PageFile::~PageFile() {
  if (fd_ >= 0) ::close(fd_);
  release_ahead();
}

void PageFile::release_ahead() const {
  MemoryAccount::remove(ahead_.capacity());
  Bytes().swap(ahead_);
}

IoStatus PageFile::read(std::uint64_t offset, std::size_t size, Bytes& out) const {
  const bool follows_last_read = offset == last_read_end_;
  last_read_end_ = offset + size;
  if (!in_ahead(offset, size) && follows_last_read && size < kReadAhead) {
    if (IoStatus error = read_ahead(offset)) return error;
  }
  if (in_ahead(offset, size)) {
    const auto from = ahead_.begin() + static_cast<std::ptrdiff_t>(offset - ahead_offset_);
    out.assign(from, from + static_cast<std::ptrdiff_t>(size));
    if (offset + size == ahead_offset_ + ahead_.size()) release_ahead();  // all used: a drained queue keeps none
    return std::nullopt;
  }
  out.resize(size);
  std::size_t got = 0;
  if (IoStatus error = read_fully(offset, out.data(), size, got)) return error;
  if (got < size) {
    return "read " + name_ + ": the file ends at " + std::to_string(offset + got) + ", before the body does";
  }
  return std::nullopt;
}

IoStatus PageFile::read_ahead(std::uint64_t offset) const {
  if (ahead_.capacity() < kReadAhead) {
    MemoryAccount::remove(ahead_.capacity());
    ahead_.reserve(kReadAhead);
    MemoryAccount::add(ahead_.capacity());
  }
  ahead_.resize(kReadAhead);
  std::size_t got = 0;
  IoStatus error = read_fully(offset, ahead_.data(), kReadAhead, got);
  ahead_.resize(error ? 0 : got);  // the file may end sooner (the bodies written so far), which is no error
  ahead_offset_ = offset;
  return error;
}

IoStatus PageFile::read_fully(std::uint64_t offset, std::uint8_t* into, std::size_t size, std::size_t& got) const {
  got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd_, into + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "read " + name_ + ": " + std::strerror(errno);
    if (n == 0) break;  // the end of the file
    got += static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

MessageBody::MessageBody(const MessageBody& other) : bytes_(other.bytes_) {
  MemoryAccount::add(bytes_.size());
  if (other.paged_) paged_ = std::make_unique<const PagedPlace>(*other.paged_);
}

ByteView MessageBody::bytes() const {
  if (!in_memory()) {
    // A bug, not bad input: handing on an empty body in its place would deliver a message that was never sent.
    std::cerr << "firemq-broker: internal error: a paged-out message body was used before page_in" << std::endl;
    std::abort();
  }
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
