#include "reference-broker/store/message_store.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "reference-broker/core/log.h"

namespace firemq::store {
namespace {

constexpr const char* kSegmentPrefix = "segment-";
constexpr const char* kSegmentSuffix = ".log";

// "segment-000000000042.log" -> 42; nullopt for any other file name.
std::optional<std::uint64_t> segment_number(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  const std::string prefix = kSegmentPrefix, suffix = kSegmentSuffix;
  if (name.size() != prefix.size() + 12 + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string digits = name.substr(prefix.size(), 12);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoull(digits);
}

}  // namespace

MessageStore::MessageStore(StoreOptions options, const TimeSource& time) : options_(std::move(options)), time_(time) {}

MessageStore::~MessageStore() {
  // A clean stop: what is buffered goes to disk before the syncer's last fsync (its destructor waits for it).
  write_out();
}

Result<std::unique_ptr<MessageStore>, std::string> MessageStore::open(StoreOptions options, const TimeSource& time,
                                                                      Syncer::Post post, RecoveryReport& report) {
  if (IoStatus created = create_private_directories(options.directory); !created) {
    return "cannot create the message store directory: " + created.error();
  }
  // The directory's own entry: without it a power cut soon after the first start could lose every segment.
  if (IoStatus synced = sync_directory(options.directory.parent_path().empty() ? "." : options.directory.parent_path());
      !synced) {
    return synced.error();
  }
  std::unique_ptr<MessageStore> store(new MessageStore(std::move(options), time));
  const auto started = std::chrono::steady_clock::now();
  if (std::string error = store->recover(report); !error.empty()) return error;
  report.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  MessageStore* self = store.get();
  store->syncer_ = std::make_unique<Syncer>(store->options_.directory, std::move(post),
                                            [self](std::uint64_t position, const IoStatus& synced) {
                                              self->on_synced(position, synced);
                                            });
  if (std::string error = store->start_segment(); !error.empty()) return error;
  store->reclaim_dead_segments();
  store->collect_unclaimed();
  return store;
}

std::filesystem::path MessageStore::segment_path(std::uint64_t number) const {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012" PRIu64 "%s", kSegmentPrefix, number, kSegmentSuffix);
  return options_.directory / name;
}

// Recovery ----------------------------------------------------------------------------------------------------

std::string MessageStore::recover(RecoveryReport& report) {
  std::vector<std::uint64_t> numbers;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.directory, ec)) {
    const auto n = segment_number(entry.path());
    if (!n) continue;
    // An empty segment (a run that stopped before writing to its new one) says nothing: it goes at once.
    std::error_code size_error;
    if (entry.file_size(size_error) == 0 && !size_error) {
      std::filesystem::remove(entry.path(), size_error);
      continue;
    }
    numbers.push_back(*n);
  }
  if (ec) return "cannot list the message store directory " + options_.directory.string() + ": " + ec.message();
  std::sort(numbers.begin(), numbers.end());
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (std::string error = recover_segment(numbers[i], i + 1 == numbers.size(), report); !error.empty()) return error;
  }
  report.segments = numbers.size();
  for (const auto& [id, message] : messages_) report.messages += message.queues.size();
  // What was read may still be only in the page cache (the last run was killed): make it durable before any
  // segment is deleted on the strength of it.
  for (std::uint64_t n : numbers) {
    if (IoStatus synced = sync_existing_file(segment_path(n)); !synced) return synced.error();
  }
  return "";
}

std::string MessageStore::recover_segment(std::uint64_t number, bool last, RecoveryReport& report) {
  const std::filesystem::path path = segment_path(number);
  Result<Bytes, std::string> contents = read_whole_file(path);
  if (!contents) return contents.error();
  const Bytes& bytes = *contents;
  segments_[number] = Segment{number, bytes.size(), 0, 0, 0, nullptr};
  std::size_t offset = 0;
  while (offset < bytes.size()) {
    ReadOutcome outcome = read_record(ByteView(bytes).subspan(offset));
    const std::string where = path.filename().string() + " at offset " + std::to_string(offset);
    if (outcome.kind == ReadOutcome::Kind::record) {
      apply(*outcome.record, RecordPlace{number, offset, outcome.size});
      ++report.records;
      offset += outcome.size;
      continue;
    }
    if (outcome.kind == ReadOutcome::Kind::corrupt && outcome.size > 0) {
      // The size looked right and the checksum did not: that one record is lost, the ones after it are read.
      report.problems.push_back(where + ": corrupt record of " + std::to_string(outcome.size) + " bytes skipped (" +
                                outcome.problem + ")");
      offset += outcome.size;
      continue;
    }
    const std::size_t rest = bytes.size() - offset;
    if (outcome.kind == ReadOutcome::Kind::torn && last) {
      // A write cut short by a crash: nothing in it was confirmed (a confirm waits for the fsync after it). The
      // file is left as it is (a damaged size field looks the same, and records after it would be fsync'd
      // data); this run writes to a new segment, and compaction removes the old one in time.
      report.problems.push_back(where + ": torn tail of " + std::to_string(rest) + " bytes ignored");
    } else {
      report.problems.push_back(where + ": " +
                                (outcome.kind == ReadOutcome::Kind::torn ? "record cut short" : outcome.problem) +
                                "; the remaining " + std::to_string(rest) + " bytes of the segment are skipped");
    }
    break;
  }
  return "";
}

void MessageStore::collect_unclaimed() {
  for (const auto& [id, stored] : messages_) {
    for (const QueueRef& ref : stored.queues) unclaimed_[ref.queue].push_back({stored.message, ref});
  }
  for (auto& [queue, messages] : unclaimed_) {
    std::sort(messages.begin(), messages.end(),
              [](const RecoveredMessage& a, const RecoveredMessage& b) { return a.ref.position < b.ref.position; });
  }
}

void MessageStore::restore_into(Queue& queue) {
  auto it = unclaimed_.find(queue.store_key());
  if (it == unclaimed_.end()) return;
  const std::uint64_t now_ms = time_.now_ms(), now_unix_ms = time_.unix_ms();
  for (RecoveredMessage& m : it->second) {
    // The store keeps expiry in wall-clock time; the queue counts on its monotonic clock.
    std::optional<std::uint64_t> expires;
    if (m.ref.expires_at != 0) expires = now_ms + (m.ref.expires_at > now_unix_ms ? m.ref.expires_at - now_unix_ms : 0);
    queue.restore(std::move(m.message), m.ref.position, m.ref.delivered, expires);
  }
  unclaimed_.erase(it);
}

// What the log says, applied to the live view: the same code for recovery and for writing -----------------------

void MessageStore::apply(const Record& record, RecordPlace place) {
  if (const auto* publish = std::get_if<PublishRecord>(&record)) return apply_publish(*publish, place);
  if (const auto* delivered = std::get_if<DeliveredRecord>(&record)) {
    next_message_id_ = std::max(next_message_id_, delivered->message_id + 1);
    auto it = messages_.find(delivered->message_id);
    if (it == messages_.end()) return;
    for (QueueRef& ref : it->second.queues) {
      if (ref.queue == delivered->queue) ref.delivered = true;
    }
    return;
  }
  if (const auto* removed = std::get_if<RemovedRecord>(&record)) {
    // An id is never given twice, even when the segment with its publish record is gone: a removal of it that
    // is still in the log must not meet a new message with the same id.
    next_message_id_ = std::max(next_message_id_, removed->message_id + 1);
    return forget_ref(removed->message_id, removed->queue);
  }
  const auto& dropped = std::get<QueueDroppedRecord>(record);
  auto it = queue_messages_.find(dropped.queue);
  if (it == queue_messages_.end()) return;
  const std::vector<std::uint64_t> ids(it->second.begin(), it->second.end());
  for (std::uint64_t id : ids) forget_ref(id, dropped.queue);
  queue_messages_.erase(dropped.queue);
}

void MessageStore::apply_publish(const PublishRecord& record, RecordPlace place) {
  const std::uint64_t segment = place.segment, record_bytes = place.bytes;
  auto [it, fresh] = messages_.try_emplace(record.message_id);
  StoredMessage& stored = it->second;
  if (fresh) {
    stored.message = record.message;
  } else {
    // A later record for the same message (a copy made by compaction): the message now lives there.
    Segment& old = segments_[stored.segment];
    --old.live_messages;
    old.live_bytes -= stored.record_bytes;
    if (old.live_messages == 0) old.dead_at = end_position_;
  }
  stored.segment = segment;
  stored.record_bytes = record_bytes;
  stored.body_offset = place.offset + place.bytes - record.message->body().size();
  ++segments_[segment].live_messages;
  segments_[segment].live_bytes += record_bytes;
  for (const QueueRef& ref : record.queues) {
    auto same = std::find_if(stored.queues.begin(), stored.queues.end(),
                             [&](const QueueRef& q) { return q.queue == ref.queue; });
    if (same != stored.queues.end()) {
      *same = ref;
    } else {
      stored.queues.push_back(ref);
    }
    queue_messages_[ref.queue].insert(record.message_id);
  }
  next_message_id_ = std::max(next_message_id_, record.message_id + 1);
}

void MessageStore::forget_ref(std::uint64_t message_id, const std::string& queue) {
  auto it = messages_.find(message_id);
  if (it == messages_.end()) return;
  std::erase_if(it->second.queues, [&](const QueueRef& ref) { return ref.queue == queue; });
  if (auto q = queue_messages_.find(queue); q != queue_messages_.end()) q->second.erase(message_id);
  if (it->second.queues.empty()) forget_message(it);
}

void MessageStore::forget_message(std::unordered_map<std::uint64_t, StoredMessage>::iterator it) {
  Segment& segment = segments_[it->second.segment];
  --segment.live_messages;
  segment.live_bytes -= it->second.record_bytes;
  // Deleted once the records that emptied it are durable too (else a crash could bring back nothing at all
  // of a message that a durable copy elsewhere was meant to keep).
  if (segment.live_messages == 0) segment.dead_at = end_position_;
  messages_.erase(it);
}

// Writing ------------------------------------------------------------------------------------------------------

std::string MessageStore::start_segment() {
  const std::uint64_t number = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
  Result<AppendFile, std::string> file = AppendFile::create(segment_path(number));
  if (!file) return file.error();
  current_ = std::make_shared<AppendFile>(std::move(*file));
  current_number_ = number;
  current_is_new_ = true;
  segments_[number] = Segment{number, 0, 0, 0, 0, nullptr};
  return "";
}

QueueRef MessageStore::ref_for(const Queue& queue, const QueuedMessage& message) const {
  QueueRef ref{queue.store_key(), message.position, 0, message.redelivered};
  if (message.expires_at_ms) {
    // The queue counts expiry on a monotonic clock, which a restart resets: the store keeps wall-clock time.
    const std::uint64_t now = time_.now_ms();
    const std::uint64_t left = *message.expires_at_ms > now ? *message.expires_at_ms - now : 0;
    ref.expires_at = time_.unix_ms() + left;
  }
  return ref;
}

void MessageStore::append(const Record& record) {
  const std::size_t before = buffer_.size();
  append_record(buffer_, record);
  const std::uint64_t size = buffer_.size() - before;
  end_position_ += size;
  Segment& segment = segments_[current_number_];
  const std::uint64_t offset = segment.bytes;
  segment.bytes += size;
  apply(record, RecordPlace{current_number_, offset, size});
}

PublishRecord* MessageStore::open_publish_of(const BrokerMessage& message) {
  for (PublishRecord& open : open_publishes_) {
    if (open.message.get() == &message) return &open;
  }
  return nullptr;
}

void MessageStore::append_open_records() {
  std::vector<PublishRecord> publishes = std::exchange(open_publishes_, {});
  std::vector<Record> held = std::exchange(held_back_, {});
  for (const PublishRecord& publish : publishes) append(publish);
  for (const Record& record : held) append(record);
}

void MessageStore::append_after_open_publishes(Record record) {
  if (open_publishes_.empty()) return append(record);
  held_back_.push_back(std::move(record));
}

void MessageStore::enqueued(const Queue& queue, const QueuedMessage& message) {
  const BrokerMessage& m = *message.message;
  // A message routed to several durable queues is written once, with all of them: the record stays open while
  // the routing loop enqueues, and is finished by the end of the publish (end_position, write_out).
  if (PublishRecord* open = open_publish_of(m)) return open->queues.push_back(ref_for(queue, message));
  if (IoStatus paged_in = m.body().page_in(); !paged_in) {
    // A dead-lettered copy of a paged-out message, whose body cannot be read back: it cannot be written either.
    log_line("message store: a message for durable queue '" + printable(queue.name()) +
             "' is not written: its paged-out body could not be read back: " + paged_in.error());
    return;
  }
  if (m.store_id() == 0) m.set_store_id(next_message_id_++);
  open_publishes_.push_back(PublishRecord{m.store_id(), {ref_for(queue, message)}, message.message});
}

void MessageStore::delivered(const Queue& queue, const QueuedMessage& message) {
  if (PublishRecord* open = open_publish_of(*message.message)) {
    for (QueueRef& ref : open->queues) {
      if (ref.queue == queue.store_key()) ref.delivered = true;  // delivered as it was routed: in the same record
    }
    return;
  }
  auto it = messages_.find(message.message->store_id());
  if (it == messages_.end()) return;
  // Only the first delivery is written: "redelivered" after a restart needs no more than that.
  for (const QueueRef& ref : it->second.queues) {
    if (ref.queue == queue.store_key() && !ref.delivered)
      return append_after_open_publishes(DeliveredRecord{it->first, ref.queue});
  }
}

void MessageStore::removed(const Queue& queue, const QueuedMessage& message) {
  if (PublishRecord* open = open_publish_of(*message.message)) {
    // Gone before its record was written: the record leaves that queue out (and is not written at all if none
    // is left).
    std::erase_if(open->queues, [&](const QueueRef& ref) { return ref.queue == queue.store_key(); });
    std::erase_if(open_publishes_, [](const PublishRecord& p) { return p.queues.empty(); });
    return;
  }
  const std::uint64_t id = message.message->store_id();
  if (messages_.count(id)) append_after_open_publishes(RemovedRecord{id, queue.store_key()});
}

void MessageStore::queue_deleted(const Queue& queue) {
  finish_open_publishes();
  append(QueueDroppedRecord{queue.store_key()});
}

IoStatus MessageStore::sync_now() {
  write_out();
  if (!failure_.empty()) return failure_;
  // Through the ledger: when the storage thread's fsync of this segment failed first (its completion may not
  // have come back yet), this fsync would return 0 for lost pages; the ledger answers with that failure instead.
  // It claims no position: it syncs only the current segment, and the storage thread's fsync of every file
  // written is what moves the durable position.
  IoStatus synced = syncer_->ledger().sync(0, [this]() -> IoStatus {
    if (IoStatus segment = current_->sync(); !segment) return segment;
    return sync_directory(options_.directory);
  });
  if (!synced) fail(synced.error());
  return synced;
}

std::uint64_t MessageStore::end_position() {
  finish_open_publishes();
  return end_position_;
}

void MessageStore::write_out() {
  finish_open_publishes();
  while (!buffer_.empty()) {
    if (!failure_.empty()) {
      buffer_.clear();  // nothing more is written after a failure: see fail()
      return;
    }
    if (IoStatus appended = current_->append(buffer_); !appended) return fail(appended.error());
    buffer_.clear();
    written_position_ = end_position_;
    syncer_->request(written_position_, current_, std::exchange(current_is_new_, false));
    if (segments_[current_number_].bytes >= options_.segment_bytes) {
      if (std::string error = start_segment(); !error.empty()) return fail(error);
      compact_oldest_segments();  // their copies are in the buffer: the next turn writes them
    }
  }
  // Everything appended is written now: bodies waiting to be paged out can be read back from here.
  if (pager_ != nullptr) pager_->write_out(this);
}

std::optional<PagedPlace> MessageStore::stored_body(const BrokerMessage& message) {
  if (!failure_.empty() || !buffer_.empty()) return std::nullopt;  // only what is written can be read back
  auto it = messages_.find(message.store_id());
  if (message.store_id() == 0 || it == messages_.end() || it->second.message.get() != &message) return std::nullopt;
  std::shared_ptr<PageFile> reader = segment_reader(it->second.segment);
  if (reader == nullptr) return std::nullopt;
  return PagedPlace{std::move(reader), it->second.body_offset, message.body().size()};
}

std::shared_ptr<PageFile> MessageStore::segment_reader(std::uint64_t number) {
  Segment& segment = segments_[number];
  if (segment.reader == nullptr) {
    const std::filesystem::path path = segment_path(number);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      log_line("paging: cannot open " + std::string(path) + " to read bodies back: " + std::strerror(errno));
      return nullptr;
    }
    segment.reader = std::make_shared<PageFile>(fd, path.string());
  }
  return segment.reader;
}

void MessageStore::on_synced(std::uint64_t position, const IoStatus& synced) {
  if (!synced) return fail(synced.error());
  if (!failure_.empty()) return;
  durable_position_ = std::max(durable_position_, position);
  const std::vector<DurabilityWaiter*> waiting(waiters_.begin(), waiters_.end());
  for (DurabilityWaiter* waiter : waiting) {
    if (waiters_.count(waiter)) waiter->on_durable(durable_position_);
  }
  reclaim_dead_segments();
}

void MessageStore::fail(const std::string& reason) {
  if (!failure_.empty()) return;
  // After a failed write or fsync the file's state is unknown (the kernel may have dropped the pages), so the
  // store stops: what waits is nacked, and nothing later is confirmed as durable. A restart recovers what is
  // on disk.
  failure_ = reason;
  buffer_.clear();
  // What a successful fsync covered is durable, even when its completion has not come back yet (the failure
  // may be the broker thread's own fsync, made after it): those waiters are confirmed, the rest nacked.
  if (syncer_) durable_position_ = std::max(durable_position_, syncer_->ledger().durable());
  log_line("message store failed, persistent publishes to durable queues are refused until restart: " + reason);
  const std::vector<DurabilityWaiter*> waiting(waiters_.begin(), waiters_.end());
  for (DurabilityWaiter* waiter : waiting) {
    if (waiters_.count(waiter)) waiter->on_store_failed(durable_position_, reason);
  }
}

// Compaction ---------------------------------------------------------------------------------------------------

void MessageStore::reclaim_dead_segments() {
  // Oldest first: a removal record in a later segment may be what keeps a message of an earlier one dead.
  while (!segments_.empty()) {
    const Segment& oldest = segments_.begin()->second;
    if (oldest.number == current_number_ || oldest.live_messages > 0 || oldest.dead_at > durable_position_) return;
    std::error_code ec;
    std::filesystem::remove(segment_path(oldest.number), ec);
    if (ec) {
      log_line("cannot delete " + segment_path(oldest.number).string() + ": " + ec.message());
      return;
    }
    segments_.erase(segments_.begin());
  }
}

void MessageStore::compact_oldest_segments() {
  // Segments go oldest first (reclaim_dead_segments), so a live segment at the front holds back the dead ones
  // behind it. While the log is more than twice what is live, the oldest segments have their live messages
  // copied to the tail, a few per roll-over so that the broker thread never stalls for long.
  constexpr std::size_t kSegmentsPerRollOver = 4;
  std::uint64_t total = 0, live = 0;
  for (const auto& [number, segment] : segments_) {
    total += segment.bytes;
    live += segment.live_bytes;
  }
  std::set<std::uint64_t> chosen;
  for (const auto& [number, segment] : segments_) {
    if (chosen.size() == kSegmentsPerRollOver || number == current_number_ ||
        total <= 2 * live + options_.segment_bytes)
      break;
    total -= segment.bytes;  // what the copy frees, once the segment is deleted
    total += segment.live_bytes;
    if (segment.live_messages > 0) chosen.insert(number);
  }
  if (chosen.empty()) return;
  std::vector<std::uint64_t> ids;
  for (const auto& [id, stored] : messages_) {
    if (chosen.count(stored.segment)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (std::uint64_t id : ids) {
    const StoredMessage& stored = messages_.at(id);
    // A paged-out body is read back for the copy (from this very segment, or the scratch file). If it cannot be,
    // the message stays where it is, and so does its segment.
    if (IoStatus paged_in = stored.message->body().page_in(); !paged_in) {
      log_line("message store: compaction left a message in place: " + paged_in.error());
      continue;
    }
    append(PublishRecord{id, stored.queues, stored.message});  // the copy: the message now lives at the tail
  }
}

}  // namespace firemq::store
