// A published message as the broker keeps it: immutable, and shared by every queue it was routed to, so a body
// is stored once however many queues hold it ("Messages are immutable and shared", as the design says).
//
// One allocation per message (docs/benchmarks.md, "One allocation per message"): the four words of fields below,
// then the slots only some messages need (the store id of a persistent message, the pointer to the props and
// headers of a message that has any), then the exchange's and the routing key's characters and, up to
// kInlineBodyLimit bytes, the body's. A transient 16 B message with neither props nor headers, the common case,
// costs its 32 bytes of fields and its characters: a queue of them stays under 100 bytes a message (docs/
// benchmarks.md, "A message in four words"). A queue holds a message through a MessagePtr, one word with the count
// of holders inside the message: the broker thread is the only one that touches messages (core.h), so the count
// needs no atomics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/amqp/field_table.h"
#include "protocol/bytes.h"
#include "protocol/messages.h"
#include "reference-broker/core/memory_account.h"
#include "reference-broker/core/message_body.h"

namespace firemq {

class BrokerMessage;

// Shared ownership of a message: copies share it, and the last one to go frees it.
class MessagePtr {
 public:
  MessagePtr() = default;
  MessagePtr(std::nullptr_t) {}  // NOLINT: as a shared_ptr converts from nullptr
  MessagePtr(const MessagePtr& other);
  MessagePtr(MessagePtr&& other) noexcept : message_(std::exchange(other.message_, nullptr)) {}
  MessagePtr& operator=(MessagePtr other) noexcept {
    std::swap(message_, other.message_);
    return *this;
  }
  ~MessagePtr() { reset(); }

  const BrokerMessage* get() const { return message_; }
  const BrokerMessage& operator*() const { return *message_; }
  const BrokerMessage* operator->() const { return message_; }
  explicit operator bool() const { return message_ != nullptr; }
  bool operator==(const MessagePtr& other) const { return message_ == other.message_; }
  // How many MessagePtrs hold the message (0 for an empty one).
  std::uint32_t use_count() const;
  void reset();

 private:
  friend class BrokerMessage;
  explicit MessagePtr(const BrokerMessage* adopted) : message_(adopted) {}  // takes the one holder it was made with
  const BrokerMessage* message_ = nullptr;
};

// What a message is made of, but for its body: what a publish carries, and what dead-lettering changes.
struct MessageParts {
  std::string exchange;     // as published: deliver.exchange
  std::string routing_key;  // deliver.key
  Props props;              // passed through unchanged
  Map headers;              // passed through unchanged
  bool persistent = false;  // kept on disk when it reaches a durable queue
  // The size of the publish header the props and headers were decoded from: what estimates their decoded size.
  std::size_t header_bytes = 0;
  // The headers as an AMQP publisher sent them, each value in its field-table type (null: not published over AMQP,
  // or without a headers property; an empty table is kept). `headers` is what the interop table maps them to,
  // which loses types (an int8 and an int64 are both MessagePack ints); an AMQP consumer gets these back where
  // `headers` still holds what they map to (amqp_interop.h). Shared: a dead-lettered copy keeps them. Not written
  // to the store: after a restart an AMQP consumer gets the interop table's types.
  std::shared_ptr<const amqp::FieldTable> amqp_headers = nullptr;
};

class BrokerMessage {
 public:
  // Bodies up to this size are kept in the message's own allocation and never paged out: a paged-out body still
  // costs its PagedPlace (48 bytes with the allocator's header), so paging a smaller one would save next to nothing.
  static constexpr std::size_t kInlineBodyLimit = 128;

  static MessagePtr make(MessageParts parts, ByteView body);
  // A message with `parts` and `original`'s body (a dead-lettered copy): its bytes copied, or, when they are paged
  // out, paged out at the same place.
  static MessagePtr make(MessageParts parts, const MessageBody& original);
  // The parts back, copied: what dead-lettering changes before it makes the copy.
  MessageParts parts() const;

  BrokerMessage(const BrokerMessage&) = delete;
  BrokerMessage& operator=(const BrokerMessage&) = delete;

  std::string_view exchange() const { return {text(), exchange_size_}; }
  std::string_view routing_key() const { return {text() + exchange_size_, key_size_}; }
  const Props& props() const;
  const Map& headers() const;
  const amqp::FieldTable* amqp_headers() const;  // MessageParts::amqp_headers, or null
  bool persistent() const { return persistent_; }
  // In memory, or paged out to disk (paging.h). An inline body counts with the message; one on the heap counts its
  // own bytes in the MemoryAccount while they are in memory.
  const MessageBody& body() const { return body_; }

  // The message store's id for it, given when it is first written (0: not in the store). Bookkeeping on an
  // otherwise immutable message, set once on the broker thread. Only a persistent message is ever written ("persistent:
  // Write the message to disk"), so only a persistent one has the slot for it.
  std::uint64_t store_id() const { return persistent_ ? *store_id_slot() : 0; }
  void set_store_id(std::uint64_t id) const;

  // What the message counts in the MemoryAccount besides a heap body's bytes: its allocation, and the estimate of
  // its props and headers. A paged-out message still costs this much.
  std::size_t accounted_bytes() const;

 private:
  // Props and headers, with what they are estimated to take in memory.
  struct Attributes {
    Props props;
    Map headers;
    std::size_t header_bytes = 0;  // MessageParts::header_bytes
    std::shared_ptr<const amqp::FieldTable> amqp_headers;
  };
  friend class MessagePtr;

  BrokerMessage(const MessageParts& parts, ByteView body, const PagedPlace* paged, const Attributes* attributes);
  ~BrokerMessage();
  // The message with `body`, or with a body paged out at `paged` when that is not null.
  static MessagePtr allocate(const MessageParts& parts, ByteView body, const PagedPlace* paged);
  // Its body: paged out at `paged`; else `body` copied to `inline_at` when it is small enough, else to the heap.
  static MessageBody body_for(ByteView body, const PagedPlace* paged, std::uint8_t* inline_at);
  static std::size_t allocation_size(bool persistent, bool has_attributes, std::size_t text_bytes,
                                     std::size_t inline_body_bytes) {
    return sizeof(BrokerMessage) + slots_size(persistent, has_attributes) + text_bytes + inline_body_bytes;
  }
  static std::size_t slots_size(bool persistent, bool has_attributes) {
    return (persistent ? sizeof(std::uint64_t) : 0) + (has_attributes ? sizeof(const Attributes*) : 0);
  }

  // What follows the fields, in this order: the slots a message has (store id, then attributes), the exchange,
  // the routing key, an inline body.
  std::uint8_t* after_fields() const { return reinterpret_cast<std::uint8_t*>(const_cast<BrokerMessage*>(this) + 1); }
  std::uint64_t* store_id_slot() const { return reinterpret_cast<std::uint64_t*>(after_fields()); }
  const Attributes** attributes_slot() const {
    return reinterpret_cast<const Attributes**>(after_fields() + slots_size(persistent_, false));
  }
  const Attributes* attributes() const { return has_attributes_ ? *attributes_slot() : nullptr; }
  char* text() const { return reinterpret_cast<char*>(after_fields() + slots_size(persistent_, has_attributes_)); }
  std::uint8_t* inline_body_start() const {
    return reinterpret_cast<std::uint8_t*>(text() + exchange_size_ + key_size_);
  }
  void release() const;

  mutable std::uint32_t holders_ = 1;
  std::uint32_t exchange_size_;
  std::uint32_t key_size_;
  bool persistent_;      // and so it has the store id's slot
  bool has_attributes_;  // props or headers: it has the slot that points to them
  MessageBody body_;
};

inline MessagePtr::MessagePtr(const MessagePtr& other) : message_(other.message_) {
  if (message_ != nullptr) ++message_->holders_;
}

inline std::uint32_t MessagePtr::use_count() const { return message_ == nullptr ? 0 : message_->holders_; }

inline void MessagePtr::reset() {
  if (message_ != nullptr) std::exchange(message_, nullptr)->release();
}

}  // namespace firemq
