// What a queue asks of paging (docs/durability.md, "Paging"): whether bodies are leaving memory now, and to take
// a message it keeps behind others. The core never writes a body out itself; store/paging.h's BodyPager does,
// after each batch of work, from the store's segment or a scratch file. The seam keeps the disk out of core/.
//
// Runs on the broker thread.
#pragma once

#include "reference-broker/core/broker_message.h"

namespace firemq {

class Pager {
 public:
  virtual ~Pager() = default;
  // True while the memory counted for messages is past the paging threshold.
  virtual bool paging() const = 0;
  // A message that a queue keeps behind others. While paging, its body is to leave memory at the next write-out
  // (nothing happens to a body already out, or already on its way).
  virtual void page_out_later(const MessagePtr& message) = 0;
};

}  // namespace firemq
