// A message's body: its bytes in memory, or, once paged out (paging.h), a place in a file they are read back from.
// Either way its size is known, and it is counted in the MemoryAccount only while its bytes are in memory.
//
// A BrokerMessage is shared and otherwise immutable; where its body's bytes are is the one thing that changes
// (on the broker thread), hence the mutable members behind a const interface. A small body is kept in the
// message's own allocation instead (broker_message.h) and stays there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "reference-broker/core/memory_account.h"

namespace firemq {

// A file paged-out bodies are read back from. Shared by the bodies in it: the descriptor stays open while one
// refers to it, so its bytes stay readable after the file is unlinked (a message store segment that compaction
// deleted; the scratch file, which never has a name).
class PageFile {
 public:
  // Takes ownership of `fd`; `name` is what errors call the file.
  PageFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  PageFile(const PageFile&) = delete;
  PageFile& operator=(const PageFile&) = delete;
  ~PageFile();

  // Reads `size` bytes at `offset` into `out` (replacing what it held); the error names the file.
  IoStatus read(std::uint64_t offset, std::size_t size, Bytes& out) const;
  // The same into `into`, which has room for `size` bytes.
  IoStatus read(std::uint64_t offset, std::size_t size, std::uint8_t* into) const;
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }

 private:
  // A queue reads its bodies back in the order they were written, one after another. When a read starts where
  // the last one ended, it reads kReadAhead bytes instead, and the next bodies come from that copy without a
  // system call. Reads that do not follow each other (two queues draining the same file) read just the body, so
  // they cost no more than without the copy. The files are only ever appended to, so the copy never goes stale;
  // a read past its end (bytes written since) reads the file again. The copy is counted in the MemoryAccount
  // and freed once its last byte is read.
  static constexpr std::size_t kReadAhead = 128 * 1024;
  bool in_ahead(std::uint64_t offset, std::size_t size) const {
    return offset >= ahead_offset_ && offset + size <= ahead_offset_ + ahead_.size();
  }
  IoStatus read_ahead(std::uint64_t offset) const;
  void release_ahead() const;
  IoStatus read_fully(std::uint64_t offset, std::uint8_t* into, std::size_t size, std::size_t& got) const;

  int fd_;
  std::string name_;
  mutable Bytes ahead_;  // the file's bytes from ahead_offset_; empty until a read follows another
  mutable std::uint64_t ahead_offset_ = 0;
  mutable std::uint64_t last_read_end_ = 0;  // where the last read ended
};

// Where a paged-out body's bytes are.
struct PagedPlace {
  std::shared_ptr<const PageFile> file;
  std::uint64_t offset = 0;
  std::size_t size = 0;
};

class MessageBody {
 public:
  // Bytes kept in the message's own allocation (BrokerMessage's inline body): never paged out, and counted in the
  // MemoryAccount with the message, not here.
  struct Inline {};
  MessageBody(Inline, const std::uint8_t* bytes, std::size_t size);
  // A copy of `bytes` on the heap, counted in the MemoryAccount while in memory.
  explicit MessageBody(ByteView bytes);
  // Bytes already out of memory, at `place` (a dead-lettered copy of a paged-out body).
  explicit MessageBody(PagedPlace place);
  MessageBody(const MessageBody&) = delete;
  MessageBody& operator=(const MessageBody&) = delete;
  ~MessageBody();

  std::size_t size() const { return size_; }
  bool in_memory() const { return where_ != Where::paged; }
  // Whether its bytes are in the message's own allocation.
  bool kept_inline() const { return where_ == Where::inline_bytes; }
  // Whether page_out may take its bytes out of memory (an inline body stays).
  bool pageable() const { return where_ == Where::heap && size_ > 0; }
  // The bytes; the body must be in memory (page_in first).
  ByteView bytes() const;
  // Where the bytes are while paged out; the body must be paged out.
  const PagedPlace& paged_place() const { return *static_cast<const PagedPlace*>(at_); }

  // The bytes leave memory: from now on they are read from `place`, which must hold them. Only a pageable body
  // leaves; for any other this does nothing.
  void page_out(PagedPlace place) const;
  // The bytes come back into memory (nothing to do when they are there); the error says what could not be read.
  IoStatus page_in() const;

 private:
  enum class Where : std::uint8_t { inline_bytes, heap, paged };
  // Inline: into the message's allocation. Heap: the bytes, new[]-ed. Paged: a new-ed PagedPlace. One word for
  // the three, so that the whole body is 16 bytes.
  mutable const void* at_ = nullptr;
  std::uint32_t size_ = 0;  // a body fits in one frame, whose len is a u32
  mutable Where where_;
};

}  // namespace firemq
