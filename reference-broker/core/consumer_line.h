// The order in which a queue serves its consumers, as RabbitMQ's classic queue keeps it (rabbit_queue_consumers):
// a line, highest x-priority first and within a priority in the order they joined it. The one at the front is
// served and goes to the back of its priority; one that cannot take a message when its turn comes leaves the line
// (it is "blocked") and joins at the back once it can take again; a new consumer joins at the back. So after any
// change the next consumer served is the one RabbitMQ would serve. The FireMQ spec fixes no order, only that the
// credit granted bounds the delivers: messages go round the consumers with credit, and one without credit does not
// hold up the rest (conformance case consume.fair-dispatch.round-the-consumers-with-credit).
// Runs on the broker thread only.
#pragma once

#include <deque>
#include <vector>

namespace firemq {

class Consumer;  // queue.h

class ConsumerLine {
 public:
  // A new consumer joins at the back of its priority (so does one served, or unblocked).
  void join(Consumer* consumer);
  // The consumer leaves, wherever it is (in line or blocked).
  void leave(Consumer* consumer);
  // The consumer to serve now: the first in line that can take a message, which goes to the back of its priority
  // (RabbitMQ moves it there as it delivers). Those before it that cannot take leave the line, blocked. Null when
  // no one in line can take.
  Consumer* next_to_serve();
  // Blocked consumers that can take again rejoin at the back, in the order they were blocked (RabbitMQ puts a
  // consumer back when its channel's ack or credit unblocks it; the queue hears of those in dispatch()).
  void unblock_those_that_can_take();
  // The first in line, served or not: a single-active-consumer queue's next active consumer when the active one
  // goes (RabbitMQ 3.10: the waiting consumer of the highest priority, the first of those to have subscribed).
  // Such a queue serves its active consumer without the line, so no one is ever blocked and every consumer is in
  // line. Null when the line is empty.
  Consumer* front() const;

 private:
  std::deque<Consumer*> line_;      // by priority, highest first, then in the order they joined
  std::vector<Consumer*> blocked_;  // in the order they were blocked
};

}  // namespace firemq
