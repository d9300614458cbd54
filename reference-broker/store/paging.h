// Paging: a queue may be longer than memory (docs/durability.md, "Paging").
//
// While the memory the broker counts for messages (MemoryAccount) is above the paging threshold, half the memory
// high watermark unless --paging-ratio says otherwise (RabbitMQ's vm_memory_high_watermark_paging_ratio), a
// message that stays in a queue behind others has its body written out and dropped from memory:
// - a persistent message that a durable queue holds is already in the message store: its body is read back from
//   the store's segment file, where the publish record ends with it;
// - any other body is appended to the scratch file, an unnamed file in <data-dir>/paging that the broker writes
//   and reads but never keeps (it goes when the broker stops, and holds nothing a restart needs).
// The bodies leave once their bytes are written, after each batch of work (write_out), and come back when the
// message is delivered (Queue::pop_for_delivery pages it in). Messages near the head of a queue, queued while memory
// was below the threshold, stay in memory; so do everything but the body (the message's place, props, headers),
// and bodies of up to BrokerMessage::kInlineBodyLimit bytes, which live in the message's own allocation.
//
// Runs on the broker thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reference-broker/core/broker_message.h"
#include "reference-broker/core/pager.h"

namespace firemq {

// Where the message store keeps a message's body, for a message it holds and has written (message_store.h).
class StoredBodies {
 public:
  virtual ~StoredBodies() = default;
  // Where `message`'s body lies in the store's files; nullopt when the store does not hold it (a transient
  // message, one only in non-durable queues) or has not written it.
  virtual std::optional<PagedPlace> stored_body(const BrokerMessage& message) = 0;
};

struct PagingOptions {
  std::size_t threshold = SIZE_MAX;  // MemoryAccount bytes above which bodies leave memory
  std::string scratch_directory;     // where scratch files are made
  // A scratch file takes no more bodies past this size, and a new one starts: an old file's disk space is
  // freed once no body in it is still paged out (its last reference closes it).
  std::uint64_t scratch_file_bytes = 64ull << 20;
};

// The MemoryAccount bytes past which bodies leave memory: `ratio` of the memory high watermark; a ratio above 1
// turns paging off (past the watermark publishers are paused, and paging would only hide the alarm).
inline std::size_t paging_threshold(double ratio, std::size_t memory_high_watermark) {
  return ratio > 1 ? SIZE_MAX : static_cast<std::size_t>(ratio * static_cast<double>(memory_high_watermark));
}

// The core's Pager (core/pager.h), with the disk behind it.
class BodyPager final : public Pager {
 public:
  explicit BodyPager(PagingOptions options) : options_(std::move(options)) {}

  bool paging() const override { return MemoryAccount::in_use() > options_.threshold; }
  std::size_t threshold() const { return options_.threshold; }

  void page_out_later(const MessagePtr& message) override {
    if (paging() && message->body().pageable()) waiting_.push_back(message);
  }
  // After the message store wrote its records (`store` may be null: no store): the scratch file gets the bodies
  // waiting for it, and every waiting body whose bytes are now on disk leaves memory.
  void write_out(StoredBodies* store);

  // What was paged out so far (a body counted each time it left memory), for the log and tests.
  std::uint64_t bodies_paged_out() const { return bodies_paged_out_; }
  std::uint64_t scratch_bytes_written() const { return scratch_bytes_written_; }

 private:
  struct ToScratch {
    MessagePtr message;
    std::uint64_t offset;  // where its bytes start in this write_out's bytes for the scratch file
  };
  void page_out_to_scratch(const std::vector<ToScratch>& bodies, const Bytes& bytes);
  IoStatus start_scratch_file();

  PagingOptions options_;
  std::vector<MessagePtr> waiting_;    // bodies to leave memory at the next write_out
  std::shared_ptr<PageFile> scratch_;  // the scratch file bodies are appended to now; null before the first
  std::uint64_t scratch_end_ = 0;      // its size
  bool scratch_failed_ = false;        // a scratch write failed: said once; bodies then stay in memory
  std::uint64_t bodies_paged_out_ = 0;
  std::uint64_t scratch_bytes_written_ = 0;
};

}  // namespace firemq
