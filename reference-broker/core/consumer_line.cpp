#include "reference-broker/core/consumer_line.h"

#include <algorithm>

#include "reference-broker/core/queue.h"

namespace firemq {

void ConsumerLine::join(Consumer* consumer) {
  // From the back, past those of a lower priority: with one priority (the usual case) that is the back itself.
  auto behind = line_.end();
  while (behind != line_.begin() && (*std::prev(behind))->priority() < consumer->priority()) --behind;
  line_.insert(behind, consumer);
}

void ConsumerLine::leave(Consumer* consumer) {
  line_.erase(std::remove(line_.begin(), line_.end(), consumer), line_.end());
  blocked_.erase(std::remove(blocked_.begin(), blocked_.end(), consumer), blocked_.end());
}

Consumer* ConsumerLine::next_to_serve() {
  while (!line_.empty()) {
    Consumer* first = line_.front();
    line_.pop_front();
    if (first->can_take()) {
      join(first);
      return first;
    }
    blocked_.push_back(first);
  }
  return nullptr;
}

void ConsumerLine::unblock_those_that_can_take() {
  std::vector<Consumer*> still_blocked;
  for (Consumer* c : blocked_) {
    if (c->can_take()) {
      join(c);
    } else {
      still_blocked.push_back(c);
    }
  }
  blocked_.swap(still_blocked);
}

Consumer* ConsumerLine::front() const { return line_.empty() ? nullptr : line_.front(); }

}  // namespace firemq
