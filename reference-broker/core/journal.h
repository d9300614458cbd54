// What the core tells the disk, as interfaces: the core (queues, vhosts, sessions) has no I/O, and the message
// store and the definitions file (message_store.h, durable_topology.h) implement these. Without them (unit
// tests, the fuzz target) nothing is persisted and every confirm is immediate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/error.h"

namespace firemq {

class Queue;
struct QueuedMessage;

// How the store names a queue: "<vhost>\0<name>" (a NUL cannot occur in either).
inline std::string queue_store_key(const std::string& vhost, const std::string& queue) {
  std::string key = vhost;
  key.push_back('\0');
  key += queue;
  return key;
}

// Told when the log is durable up to a position, or can no longer be made durable.
class DurabilityWaiter {
 public:
  virtual ~DurabilityWaiter() = default;
  // Everything appended before `position` is on disk.
  virtual void on_durable(std::uint64_t position) = 0;
  // The store failed: what lies past `durable_position` never will be on disk. `reason` says what failed.
  virtual void on_store_failed(std::uint64_t durable_position, const std::string& reason) = 0;
};

// The message store as the core sees it. Positions count bytes appended since the broker started: a publish
// is durable once the store's durable position has reached the position its records ended at.
class Journal {
 public:
  virtual ~Journal() = default;

  // A durable queue's persistent messages (queue.cpp calls these; `message` is as the queue holds it).
  virtual void enqueued(const Queue& queue, const QueuedMessage& message) = 0;
  virtual void delivered(const Queue& queue, const QueuedMessage& message) = 0;
  virtual void removed(const Queue& queue, const QueuedMessage& message) = 0;
  // A durable queue was deleted: none of its messages come back.
  virtual void queue_deleted(const Queue& queue) = 0;
  // A durable queue was declared (at start, or by a client): the stored messages of a queue by that name that
  // nobody has claimed since the start go back into it.
  virtual void restore_into(Queue& queue) = 0;
  // Writes and fsyncs everything appended so far, now, on this thread (before the definitions file changes, so
  // that the file never runs ahead of the log); the error says what failed.
  virtual IoStatus sync_now() = 0;

  // Hands the records appended so far to the operating system (and the fsync to the storage thread). The
  // transport calls it before frames go out, so that no deliver leaves before its record (kill -9 safe).
  virtual void write_out() = 0;
  // Where the records appended so far end (a record being assembled is finished first).
  virtual std::uint64_t end_position() = 0;
  virtual std::uint64_t durable_position() const = 0;
  // Why the store can no longer make anything durable; empty while it can.
  virtual const std::string& failure() const = 0;
  // Waiters are told of progress until removed; one must be removed before it is destroyed.
  virtual void add_waiter(DurabilityWaiter* waiter) = 0;
  virtual void remove_waiter(DurabilityWaiter* waiter) = 0;
};

// Where durable exchanges, queues and bindings are saved (the definitions file in the data directory).
class TopologyStore {
 public:
  virtual ~TopologyStore() = default;
  // Saves the durable topology as it is now; the error (541) says what could not be written.
  virtual Status save() = 0;
};

}  // namespace firemq
