#include "reference-broker/core/broker_message.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "reference-broker/core/log.h"

namespace firemq {

namespace {

const Props kNoProps;
const Map kNoHeaders;

// What decoded props and headers take in memory: each decoded item takes several times its encoded size.
constexpr std::size_t kDecodedHeaderFactor = 8;

}  // namespace

MessagePtr BrokerMessage::make(MessageParts parts, ByteView body) { return allocate(parts, body, nullptr); }

MessagePtr BrokerMessage::make(MessageParts parts, const MessageBody& original) {
  if (original.in_memory()) return allocate(parts, original.bytes(), nullptr);
  return allocate(parts, {}, &original.paged_place());
}

// One allocation for the fields, the slots, the exchange's and routing key's characters and an inline body, the
// message constructed in place.
MessagePtr BrokerMessage::allocate(const MessageParts& parts, ByteView body, const PagedPlace* paged) {
  std::unique_ptr<const Attributes> attributes;  // the message's own once it is made
  // An AMQP publisher's headers table is kept when it is empty too (it goes back to AMQP consumers as sent).
  if (!parts.props.entries.empty() || !parts.headers.empty() || parts.amqp_headers != nullptr) {
    attributes = std::make_unique<const Attributes>(
        Attributes{parts.props, parts.headers, parts.header_bytes, parts.amqp_headers});
  }
  const std::size_t inline_bytes = paged == nullptr && body.size() <= kInlineBodyLimit ? body.size() : 0;
  void* memory = ::operator new(allocation_size(parts.persistent, attributes != nullptr,
                                                parts.exchange.size() + parts.routing_key.size(), inline_bytes));
  const BrokerMessage* message = nullptr;
  try {
    message = new (memory) BrokerMessage(parts, body, paged, attributes.get());
  } catch (...) {  // out of memory for a heap body: nothing is kept
    ::operator delete(memory);
    throw;
  }
  attributes.release();
  return MessagePtr(message);
}

BrokerMessage::BrokerMessage(const MessageParts& parts, ByteView body, const PagedPlace* paged,
                             const Attributes* attributes)
    : exchange_size_(static_cast<std::uint32_t>(parts.exchange.size())),
      key_size_(static_cast<std::uint32_t>(parts.routing_key.size())),
      persistent_(parts.persistent),
      has_attributes_(attributes != nullptr),
      body_(body_for(body, paged, inline_body_start())) {
  if (persistent_) *store_id_slot() = 0;
  if (has_attributes_) *attributes_slot() = attributes;
  std::memcpy(text(), parts.exchange.data(), exchange_size_);
  std::memcpy(text() + exchange_size_, parts.routing_key.data(), key_size_);
  MemoryAccount::add(accounted_bytes());
}

MessageBody BrokerMessage::body_for(ByteView body, const PagedPlace* paged, std::uint8_t* inline_at) {
  if (paged != nullptr) return MessageBody(PagedPlace(*paged));
  if (body.size() > kInlineBodyLimit) return MessageBody(body);
  if (!body.empty()) std::memcpy(inline_at, body.data(), body.size());
  return MessageBody(MessageBody::Inline{}, inline_at, body.size());
}

BrokerMessage::~BrokerMessage() {
  MemoryAccount::remove(accounted_bytes());
  delete attributes();
}

void BrokerMessage::set_store_id(std::uint64_t id) const {
  if (!persistent_) {  // the store writes persistent messages only: anything else is a bug, not bad input
    log_line("internal error: a store id for a transient message");
    std::abort();
  }
  *store_id_slot() = id;
}

void BrokerMessage::release() const {
  if (--holders_ > 0) return;
  auto* self = const_cast<BrokerMessage*>(this);  // the last holder: nothing else can see it
  self->~BrokerMessage();
  ::operator delete(self);
}

std::size_t BrokerMessage::accounted_bytes() const {
  const Attributes* attrs = attributes();
  const std::size_t attributes_bytes = attrs != nullptr
                                           ? sizeof(Attributes) + kDecodedHeaderFactor * attrs->header_bytes
                                           : 0;
  return allocation_size(persistent_, has_attributes_, exchange_size_ + key_size_,
                         body_.kept_inline() ? body_.size() : 0) +
         attributes_bytes;
}

MessageParts BrokerMessage::parts() const {
  return MessageParts{std::string(exchange()),
                      std::string(routing_key()),
                      props(),
                      headers(),
                      persistent_,
                      has_attributes_ ? attributes()->header_bytes : 0,
                      has_attributes_ ? attributes()->amqp_headers : nullptr};
}

const amqp::FieldTable* BrokerMessage::amqp_headers() const {
  return has_attributes_ ? attributes()->amqp_headers.get() : nullptr;
}

const Props& BrokerMessage::props() const { return has_attributes_ ? attributes()->props : kNoProps; }
const Map& BrokerMessage::headers() const { return has_attributes_ ? attributes()->headers : kNoHeaders; }

}  // namespace firemq
