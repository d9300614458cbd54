// The message store's records: what one entry of a segment file says, and its byte layout.
//
//   record  := size:u32 crc:u32 type:u8 body          (big-endian; size counts type and body; crc is the
//                                                      CRC-32 of type and body)
//   publish := message_id:u64 count:u32 (queue_ref)*count frame...    frame: the publish frame without len
//   queue_ref := queue:str position:u64 expires_at:u64 delivered:u8   (expires_at: Unix ms, 0 for none)
//   delivered, removed := message_id:u64 queue:str
//   queue_dropped := queue:str
//   str := len:u32 bytes
//
// A queue is named by its key, "<vhost>\0<name>". A message is stored once however many durable queues it
// reached: one publish record lists them all. The message itself is the publish frame the client sent (minus
// seq and mandatory), so the store reuses the wire codec rather than inventing a second encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/bytes.h"
#include "reference-broker/core/broker_message.h"

namespace firemq::store {

// A message's place in one durable queue.
struct QueueRef {
  std::string queue;             // the queue key
  std::uint64_t position = 0;    // its place in the queue's order (Queue keeps it across requeues)
  std::uint64_t expires_at = 0;  // Unix milliseconds when its TTL ends, 0 for none
  bool delivered = false;        // delivered and not acknowledged when the record was written

  bool operator==(const QueueRef&) const = default;
};

struct PublishRecord {
  std::uint64_t message_id = 0;
  std::vector<QueueRef> queues;
  MessagePtr message;
};

struct DeliveredRecord {
  std::uint64_t message_id = 0;
  std::string queue;
};

struct RemovedRecord {
  std::uint64_t message_id = 0;
  std::string queue;
};

struct QueueDroppedRecord {
  std::string queue;
};

using Record = std::variant<PublishRecord, DeliveredRecord, RemovedRecord, QueueDroppedRecord>;

inline constexpr std::size_t kRecordPrefix = 9;  // size, crc, type

// The vhost and name back from a key; nullopt when it is not a key.
std::optional<std::pair<std::string, std::string>> split_queue_key(const std::string& key);

// Appends one record, framed and checksummed, to `out`.
void append_record(Bytes& out, const Record& record);

// What reading one record from the front of `bytes` found.
struct ReadOutcome {
  enum class Kind {
    record,   // a whole record whose checksum matches
    torn,     // the bytes end inside a record (a write that did not finish before a crash)
    corrupt,  // a whole record whose checksum does not match, or whose body does not parse
  };
  Kind kind;
  std::size_t size = 0;  // bytes the record takes (record and corrupt with a plausible size)
  std::optional<Record> record;
  std::string problem;  // for corrupt: what was wrong
};

// Reads the record at the front of `bytes` (which is not empty).
ReadOutcome read_record(ByteView bytes);

}  // namespace firemq::store
