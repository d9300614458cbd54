// A published message as the broker keeps it: immutable, and shared by every queue it was routed to, so a body
// is stored once however many queues hold it ("Messages are immutable and shared", as the design says).
#pragma once

#include <memory>
#include <string>

#include "protocol/bytes.h"
#include "protocol/messages.h"
#include "reference-broker/memory_account.h"
#include "reference-broker/message_body.h"

namespace firemq {

struct BrokerMessage {
  std::string exchange;     // as published: deliver.exchange
  std::string routing_key;  // deliver.key
  Props props;              // passed through unchanged
  Map headers;              // passed through unchanged
  MessageBody body;         // in memory, or paged out to disk (paging.h); counts its own bytes in the MemoryAccount
  bool persistent = false;  // kept on disk when it reaches a durable queue
  AccountedBytes accounted;  // the rest of its cost (message_overhead_cost), counted while the message lives
  // The message store's id for it, given when it is first written (0: not in the store). Bookkeeping on an
  // otherwise immutable message, set once on the broker thread.
  mutable std::uint64_t store_id = 0;
};

// What a message costs in memory besides its body's bytes (MessageBody counts those), for the memory watermark:
// its decoded props and headers (each decoded item takes several times its encoded size: an estimate of 8x), and
// the bookkeeping around it. A paged-out message still costs this much.
inline std::size_t message_overhead_cost(std::size_t header_bytes) {
  constexpr std::size_t kDecodedHeaderFactor = 8;
  constexpr std::size_t kPerMessageOverhead = 256;
  return kDecodedHeaderFactor * header_bytes + kPerMessageOverhead;
}

using MessagePtr = std::shared_ptr<const BrokerMessage>;

}  // namespace firemq
