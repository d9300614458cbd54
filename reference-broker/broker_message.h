// A published message as the broker keeps it: immutable, and shared by every queue it was routed to, so a body
// is stored once however many queues hold it ("Messages are immutable and shared", DESIGN.md).
#pragma once

#include <memory>
#include <string>

#include "protocol/bytes.h"
#include "protocol/messages.h"
#include "reference-broker/memory_account.h"

namespace firemq {

struct BrokerMessage {
  std::string exchange;     // as published: deliver.exchange
  std::string routing_key;  // deliver.key
  Props props;              // passed through unchanged
  Map headers;              // passed through unchanged
  Bytes body;
  bool persistent = false;  // kept on the message; disk comes with durability
  AccountedBytes accounted;  // the body's bytes, counted for the memory high watermark while the message lives
};

using MessagePtr = std::shared_ptr<const BrokerMessage>;

}  // namespace firemq
