#include "reference-broker/core/message_body.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reference-broker/core/log.h"

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
  out.resize(size);
  return read(offset, size, out.data());
}

IoStatus PageFile::read(std::uint64_t offset, std::size_t size, std::uint8_t* into) const {
  const bool follows_last_read = offset == last_read_end_;
  last_read_end_ = offset + size;
  if (!in_ahead(offset, size) && follows_last_read && size < kReadAhead) {
    if (IoStatus ahead = read_ahead(offset); !ahead) return ahead;
  }
  if (in_ahead(offset, size)) {
    std::memcpy(into, ahead_.data() + (offset - ahead_offset_), size);
    if (offset + size == ahead_offset_ + ahead_.size()) release_ahead();  // all used: a drained queue keeps none
    return IoStatus::done();
  }
  std::size_t got = 0;
  if (IoStatus read = read_fully(offset, into, size, got); !read) return read;
  if (got < size) {
    return "read " + name_ + ": the file ends at " + std::to_string(offset + got) + ", before the body does";
  }
  return IoStatus::done();
}

IoStatus PageFile::read_ahead(std::uint64_t offset) const {
  if (ahead_.capacity() < kReadAhead) {
    MemoryAccount::remove(ahead_.capacity());
    ahead_.reserve(kReadAhead);
    MemoryAccount::add(ahead_.capacity());
  }
  ahead_.resize(kReadAhead);
  std::size_t got = 0;
  IoStatus read = read_fully(offset, ahead_.data(), kReadAhead, got);
  ahead_.resize(read ? got : 0);  // the file may end sooner (the bodies written so far), which is no error
  ahead_offset_ = offset;
  return read;
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
  return IoStatus::done();
}

namespace {

std::uint32_t body_size(std::size_t size) {
  // A body came in one frame, and a frame's len is a u32: a larger one is a bug, not bad input.
  if (size > UINT32_MAX) {
    log_line("internal error: a message body of " + std::to_string(size) + " bytes");
    std::abort();
  }
  return static_cast<std::uint32_t>(size);
}

}  // namespace

MessageBody::MessageBody(Inline, const std::uint8_t* bytes, std::size_t size)
    : at_(bytes), size_(body_size(size)), where_(Where::inline_bytes) {}

MessageBody::MessageBody(ByteView bytes) : size_(body_size(bytes.size())), where_(Where::heap) {
  auto* copy = new std::uint8_t[bytes.size()];
  if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
  at_ = copy;
  MemoryAccount::add(size_);
}

MessageBody::MessageBody(PagedPlace place)
    : at_(new PagedPlace(std::move(place))), size_(body_size(paged_place().size)), where_(Where::paged) {}

MessageBody::~MessageBody() {
  switch (where_) {
    case Where::inline_bytes: break;
    case Where::heap:
      delete[] static_cast<const std::uint8_t*>(at_);
      MemoryAccount::remove(size_);
      break;
    case Where::paged: delete static_cast<const PagedPlace*>(at_); break;
  }
}

ByteView MessageBody::bytes() const {
  if (!in_memory()) {
    // A bug, not bad input: handing on an empty body in its place would deliver a message that was never sent.
    log_line("internal error: a paged-out message body was used before page_in");
    std::abort();
  }
  return ByteView(static_cast<const std::uint8_t*>(at_), size_);
}

void MessageBody::page_out(PagedPlace place) const {
  if (!pageable()) return;
  delete[] static_cast<const std::uint8_t*>(at_);
  MemoryAccount::remove(size_);
  at_ = new PagedPlace(std::move(place));
  where_ = Where::paged;
}

IoStatus MessageBody::page_in() const {
  if (in_memory()) return IoStatus::done();
  std::unique_ptr<std::uint8_t[]> bytes(new std::uint8_t[size_]);  // not zeroed: the read fills it
  const PagedPlace& place = paged_place();
  if (IoStatus read = place.file->read(place.offset, size_, bytes.get()); !read) return read;
  delete &place;  // the file goes once no body refers to it
  at_ = bytes.release();
  where_ = Where::heap;
  MemoryAccount::add(size_);
  return IoStatus::done();
}

}  // namespace firemq
