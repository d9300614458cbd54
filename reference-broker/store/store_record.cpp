#include "reference-broker/store/store_record.h"

#include <zlib.h>

#include <algorithm>

#include "protocol/frame.h"
#include "protocol/messages.h"

namespace firemq::store {
namespace {

enum class RecordType : std::uint8_t { publish = 1, delivered = 2, removed = 3, queue_dropped = 4 };

// A message in the store is at most a frame of the largest size a broker accepts, plus its queue list.
constexpr std::size_t kMaxRecordSize = 1u << 30;

void put_u64(Bytes& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}
void put_u32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}
void set_u32(std::uint8_t* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void put_str(Bytes& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

// Reads a record body front to back; any read past the end marks it failed (and returns zeros).
class BodyReader {
 public:
  explicit BodyReader(ByteView bytes) : bytes_(bytes) {}
  std::uint64_t u64() { return take_be(8); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take_be(4)); }
  std::uint8_t u8() { return static_cast<std::uint8_t>(take_be(1)); }
  std::string str() {
    const std::uint32_t n = u32();
    if (failed_ || n > bytes_.size()) return fail_empty();
    std::string s(bytes_.begin(), bytes_.begin() + n);
    bytes_ = bytes_.subspan(n);
    return s;
  }
  ByteView rest() { return std::exchange(bytes_, ByteView{}); }
  bool ok() const { return !failed_; }
  bool at_end() const { return bytes_.empty(); }

 private:
  std::uint64_t take_be(std::size_t n) {
    if (failed_ || bytes_.size() < n) {
      failed_ = true;
      return 0;
    }
    const std::uint64_t v = read_be(bytes_.data(), n);
    bytes_ = bytes_.subspan(n);
    return v;
  }
  std::string fail_empty() {
    failed_ = true;
    return {};
  }
  ByteView bytes_;
  bool failed_ = false;
};

// CRC-32 (ISO-HDLC, as zip and PNG use it). zlib works through 32 bits at a time; Boost's crc_32_type, used
// before, gives the same value one byte at a time, and took half of the broker's time on 64 KiB persistent
// messages. zlib's length is a uInt, so very large bodies go in pieces.
std::uint32_t crc_of(ByteView bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const std::size_t piece = std::size_t{1} << 30;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

void append_body(Bytes& out, const PublishRecord& r) {
  out.push_back(static_cast<std::uint8_t>(RecordType::publish));
  put_u64(out, r.message_id);
  put_u32(out, static_cast<std::uint32_t>(r.queues.size()));
  for (const QueueRef& q : r.queues) {
    put_str(out, q.queue);
    put_u64(out, q.position);
    put_u64(out, q.expires_at);
    out.push_back(q.delivered ? 1 : 0);
  }
  const BrokerMessage& m = *r.message;
  const Bytes frame = encode_message_frame(op::Publish{0, std::string(m.exchange()), std::string(m.routing_key()),
                                                       false, m.persistent(), m.props(), m.headers()},
                                           m.body().bytes());
  out.insert(out.end(), frame.begin(), frame.end());
}

void append_body(Bytes& out, const DeliveredRecord& r) {
  out.push_back(static_cast<std::uint8_t>(RecordType::delivered));
  put_u64(out, r.message_id);
  put_str(out, r.queue);
}

void append_body(Bytes& out, const RemovedRecord& r) {
  out.push_back(static_cast<std::uint8_t>(RecordType::removed));
  put_u64(out, r.message_id);
  put_str(out, r.queue);
}

void append_body(Bytes& out, const QueueDroppedRecord& r) {
  out.push_back(static_cast<std::uint8_t>(RecordType::queue_dropped));
  put_str(out, r.queue);
}

Result<MessagePtr, std::string> parse_message(ByteView frame_bytes) {
  Result<RawFrame> frame = decode_message_frame(frame_bytes, kMaxRecordSize);
  if (!frame) return "its message frame is malformed: " + frame.error().msg;
  Result<Message> decoded = decode_frame(*frame);
  if (!decoded) return "its message header is malformed: " + decoded.error().msg;
  auto* publish = std::get_if<op::Publish>(&*decoded);
  if (publish == nullptr) return std::string("its message frame is not a publish");
  const ByteView body = frame->payload();
  return BrokerMessage::make(
      MessageParts{std::move(publish->exchange), std::move(publish->key), std::move(publish->props),
                   std::move(publish->headers), publish->persistent,
                   frame->header().size()},  // without amqp_headers: the store keeps FireMQ's types
      body);
}

Result<Record, std::string> parse_body(ByteView body) {
  BodyReader in(body.subspan(1));
  switch (static_cast<RecordType>(body[0])) {
    case RecordType::publish: {
      PublishRecord r;
      r.message_id = in.u64();
      const std::uint32_t count = in.u32();
      for (std::uint32_t i = 0; i < count && in.ok(); ++i) {
        QueueRef q;
        q.queue = in.str();
        q.position = in.u64();
        q.expires_at = in.u64();
        q.delivered = in.u8() != 0;
        r.queues.push_back(std::move(q));
      }
      if (!in.ok()) return std::string("its queue list is cut short");
      Result<MessagePtr, std::string> message = parse_message(in.rest());
      if (!message) return message.error();
      // The store writes persistent messages only; a transient one is damage (or another tool's file), reported
      // as such rather than kept.
      if (!(*message)->persistent()) return std::string("its message is not persistent");
      (*message)->set_store_id(r.message_id);  // the store knows the message by this id after a restart too
      r.message = std::move(*message);
      return Record(std::move(r));
    }
    case RecordType::delivered:
    case RecordType::removed: {
      const std::uint64_t id = in.u64();
      std::string queue = in.str();
      if (!in.ok() || !in.at_end()) return std::string("its fields do not fit its size");
      if (static_cast<RecordType>(body[0]) == RecordType::delivered)
        return Record(DeliveredRecord{id, std::move(queue)});
      return Record(RemovedRecord{id, std::move(queue)});
    }
    case RecordType::queue_dropped: {
      std::string queue = in.str();
      if (!in.ok() || !in.at_end()) return std::string("its fields do not fit its size");
      return Record(QueueDroppedRecord{std::move(queue)});
    }
  }
  return "unknown record type " + std::to_string(body[0]);
}

}  // namespace

std::optional<std::pair<std::string, std::string>> split_queue_key(const std::string& key) {
  const auto zero = key.find('\0');
  if (zero == std::string::npos) return std::nullopt;
  return std::make_pair(key.substr(0, zero), key.substr(zero + 1));
}

void append_record(Bytes& out, const Record& record) {
  const std::size_t start = out.size();
  out.resize(start + 8);  // size and crc, filled in below
  std::visit([&](const auto& r) { append_body(out, r); }, record);
  const ByteView body = ByteView(out).subspan(start + 8);
  const auto size = static_cast<std::uint32_t>(body.size());
  const std::uint32_t crc = crc_of(body);
  set_u32(out.data() + start, size);
  set_u32(out.data() + start + 4, crc);
}

ReadOutcome read_record(ByteView bytes) {
  if (bytes.size() < kRecordPrefix) return {ReadOutcome::Kind::torn, 0, std::nullopt, ""};
  const std::uint32_t size = read_u32_be(bytes.data());
  const std::uint32_t crc = read_u32_be(bytes.data() + 4);
  if (size == 0 || size > kMaxRecordSize) {
    return {ReadOutcome::Kind::corrupt, 0, std::nullopt, "its size field (" + std::to_string(size) + ") is impossible"};
  }
  if (bytes.size() - 8 < size) return {ReadOutcome::Kind::torn, 0, std::nullopt, ""};
  const ByteView body = bytes.subspan(8, size);
  const std::size_t total = 8 + std::size_t{size};
  if (crc_of(body) != crc) return {ReadOutcome::Kind::corrupt, total, std::nullopt, "its checksum does not match"};
  Result<Record, std::string> record = parse_body(body);
  if (!record) return {ReadOutcome::Kind::corrupt, total, std::nullopt, record.error()};
  return {ReadOutcome::Kind::record, total, std::move(*record), ""};
}

}  // namespace firemq::store
