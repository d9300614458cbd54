// The message store: an append-only log of checksummed records (store_record.h) in numbered segment files,
// for the persistent messages of durable queues ("persistent: Write the message to disk. Survives a restart
// when the queue is durable").
//
// - Writing: the queues report through the Journal interface; records collect in a buffer, which the broker
//   thread writes to the current segment once per batch of work (write_out), and the storage thread fsyncs
//   (store_syncer.h). A confirm waits until the durable position passes its publish's records.
// - Recovery: open() reads every segment in order, keeps what was published and not removed, ignores a torn
//   tail (a record cut short by a crash) and reports a corrupt record without giving up on the rest; each
//   durable queue takes back its messages when it is declared (restore_into).
// - Compaction: a segment whose messages are all gone is deleted (oldest first, once the records that made
//   them gone are durable); when a new segment starts and the log is more than twice what is live, the
//   oldest segments have their live messages copied forward so that they can go.
// - Failure: after a write or fsync fails, nothing more is made durable: waiting publishes are nacked, and new
//   persistent publishes to durable queues are nacked, until the broker is restarted (docs/durability.md).
//
// Runs on the broker thread, except the Syncer's fsyncs.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "reference-broker/core/journal.h"
#include "reference-broker/core/queue.h"
#include "reference-broker/core/time_source.h"
#include "reference-broker/store/paging.h"
#include "reference-broker/store/store_record.h"
#include "reference-broker/store/store_syncer.h"

namespace firemq::store {

struct StoreOptions {
  std::filesystem::path directory;            // <data-dir>/messages
  std::uint64_t segment_bytes = 64ull << 20;  // a segment is closed once it holds this much
};

// What recovery found, for the broker's log.
struct RecoveryReport {
  std::size_t segments = 0;
  std::size_t records = 0;
  std::size_t messages = 0;           // message-in-queue pairs recovered
  std::vector<std::string> problems;  // torn tails dropped, corrupt records skipped: file, offset, what
  std::chrono::milliseconds elapsed{0};
};

// A recovered message for one queue, in the queue's order.
struct RecoveredMessage {
  MessagePtr message;
  QueueRef ref;
};

class MessageStore final : public Journal, public StoredBodies {
 public:
  // Recovers what the directory holds and starts a new segment for writing. The error says what could not be
  // read or created (an unreadable directory, a segment that cannot be opened); damage inside a segment is a
  // problem in the report, not an error.
  static Result<std::unique_ptr<MessageStore>, std::string> open(StoreOptions options, const TimeSource& time,
                                                                 Syncer::Post post, RecoveryReport& report);
  ~MessageStore() override;

  // The recovered messages no queue has claimed yet (restore_into), by queue key, in position order. After the
  // start, what is left belongs to queues that were not declared again: kept on disk until they are.
  const std::map<std::string, std::vector<RecoveredMessage>>& unclaimed() const { return unclaimed_; }

  // Writes the buffered records to the current segment and asks the storage thread to sync them. Cheap when
  // there is nothing new; the broker calls it after each batch of work, before frames go out.
  void write_out() override;

  // Paging: after each write_out, the pager pages out what waits (bodies already here are read back from here).
  void set_pager(BodyPager* pager) { pager_ = pager; }
  // StoredBodies: a written publish record ends with the message's body.
  std::optional<PagedPlace> stored_body(const BrokerMessage& message) override;

  // Journal
  void enqueued(const Queue& queue, const QueuedMessage& message) override;
  void delivered(const Queue& queue, const QueuedMessage& message) override;
  void removed(const Queue& queue, const QueuedMessage& message) override;
  void queue_deleted(const Queue& queue) override;
  void restore_into(Queue& queue) override;
  IoStatus sync_now() override;
  std::uint64_t end_position() override;
  std::uint64_t durable_position() const override { return durable_position_; }
  const std::string& failure() const override { return failure_; }
  void add_waiter(DurabilityWaiter* waiter) override { waiters_.insert(waiter); }
  void remove_waiter(DurabilityWaiter* waiter) override { waiters_.erase(waiter); }

  // For tests and the management view.
  std::size_t segment_count() const { return segments_.size(); }
  std::size_t live_message_count() const { return messages_.size(); }

 private:
  struct Segment {
    std::uint64_t number = 0;
    std::uint64_t bytes = 0;           // written to it so far
    std::size_t live_messages = 0;     // messages whose latest publish record is in it
    std::uint64_t live_bytes = 0;      // the size of those records
    std::uint64_t dead_at = 0;         // the log position after which it held nothing live (0: still live)
    std::shared_ptr<PageFile> reader;  // for paged-out bodies read back from it; opened on first use
  };
  // A message held by at least one durable queue, and where its latest publish record is.
  struct StoredMessage {
    MessagePtr message;
    std::vector<QueueRef> queues;
    std::uint64_t segment = 0;
    std::uint64_t record_bytes = 0;
    std::uint64_t body_offset = 0;  // where the body starts in the segment file: the record's last bytes
  };

  MessageStore(StoreOptions options, const TimeSource& time);
  std::string recover(RecoveryReport& report);
  std::string recover_segment(std::uint64_t number, bool last, RecoveryReport& report);
  std::string start_segment();
  // Where a record is: its segment, its offset in the segment file and its size.
  struct RecordPlace {
    std::uint64_t segment;
    std::uint64_t offset;
    std::uint64_t bytes;
  };
  void apply(const Record& record, RecordPlace place);
  void apply_publish(const PublishRecord& record, RecordPlace place);
  std::shared_ptr<PageFile> segment_reader(std::uint64_t number);
  void forget_ref(std::uint64_t message_id, const std::string& queue);
  void forget_message(std::unordered_map<std::uint64_t, StoredMessage>::iterator it);
  void append(const Record& record);
  void append_after_open_publishes(Record record);
  PublishRecord* open_publish_of(const BrokerMessage& message);
  // Appends the open publish records, then the records held back behind them. Runs several times per message
  // (end_position, around each publish and delivery), almost always with nothing open: that check stays inline.
  void finish_open_publishes() {
    if (!open_publishes_.empty() || !held_back_.empty()) append_open_records();
  }
  void append_open_records();
  void collect_unclaimed();
  QueueRef ref_for(const Queue& queue, const QueuedMessage& message) const;
  void on_synced(std::uint64_t position, const IoStatus& synced);
  void fail(const std::string& reason);
  void reclaim_dead_segments();
  void compact_oldest_segments();
  std::filesystem::path segment_path(std::uint64_t number) const;

  StoreOptions options_;
  const TimeSource& time_;

  // What the log holds, live: one entry per message still in some durable queue.
  std::unordered_map<std::uint64_t, StoredMessage> messages_;
  std::unordered_map<std::string, std::unordered_set<std::uint64_t>> queue_messages_;  // by queue key
  std::map<std::uint64_t, Segment> segments_;                                          // by number, oldest first
  std::uint64_t next_message_id_ = 1;

  // Writing.
  std::shared_ptr<AppendFile> current_;
  std::uint64_t current_number_ = 0;
  bool current_is_new_ = false;  // its directory entry is not synced yet
  // Messages being routed: one record each for all the durable queues they reach, finished at the end of the
  // publish. Records that arrive meanwhile wait behind them (held_back_), so that a dead-lettered copy's publish
  // always comes before the original's removal in the log.
  std::vector<PublishRecord> open_publishes_;
  std::vector<Record> held_back_;
  std::map<std::string, std::vector<RecoveredMessage>> unclaimed_;  // by queue key
  Bytes buffer_;                                                    // records not yet written
  std::uint64_t end_position_ = 0;                                  // bytes appended since start, the buffer included
  std::uint64_t written_position_ = 0;                              // bytes handed to write()
  std::uint64_t durable_position_ = 0;                              // bytes fsync'd
  std::string failure_;
  std::set<DurabilityWaiter*> waiters_;
  BodyPager* pager_ = nullptr;
  std::unique_ptr<Syncer> syncer_;  // last: its thread stops before the rest goes
};

}  // namespace firemq::store
