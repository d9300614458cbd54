// What has passed through the broker since it started: the counters behind the management API's message_stats and
// the Prometheus metrics (management_metrics.cpp). They only grow, as Prometheus counters must; what is open now
// (queues, connections, consumers) is read from the model itself. Broker thread only.
#pragma once

#include <cstdint>

namespace firemq {

// Messages, broker-wide (Core::counters) and per vhost (Vhost::counters): a user who sees some vhosts only sees
// their share. Named after RabbitMQ's message_stats and rabbitmq_global_messages_* where they have a twin.
struct MessageCounters {
  std::uint64_t published = 0;           // publish frames taken (refused ones included)
  std::uint64_t routed = 0;              // publishes that reached at least one queue
  std::uint64_t enqueued = 0;            // copies put into queues: one per queue a publish reached
  std::uint64_t unroutable_dropped = 0;  // publishes no queue received, not mandatory: dropped
  std::uint64_t returned = 0;            // mandatory publishes no queue received: returned
  std::uint64_t confirmed = 0;           // publishes confirmed (positively)
  std::uint64_t delivered = 0;           // deliver and get_ok frames sent: the four below together
  std::uint64_t consumed_auto_ack = 0;   // deliveries to a subscription with no_ack
  std::uint64_t consumed_manual_ack = 0;
  std::uint64_t got_auto_ack = 0;  // get_oks for a get with no_ack
  std::uint64_t got_manual_ack = 0;
  std::uint64_t get_empty = 0;     // gets answered empty
  std::uint64_t redelivered = 0;   // deliveries and get_oks flagged redelivered
  std::uint64_t acknowledged = 0;  // deliveries acked by clients

  MessageCounters& operator+=(const MessageCounters& more) {
    published += more.published, routed += more.routed, enqueued += more.enqueued;
    unroutable_dropped += more.unroutable_dropped, returned += more.returned, confirmed += more.confirmed;
    delivered += more.delivered, consumed_auto_ack += more.consumed_auto_ack;
    consumed_manual_ack += more.consumed_manual_ack, got_auto_ack += more.got_auto_ack;
    got_manual_ack += more.got_manual_ack, get_empty += more.get_empty, redelivered += more.redelivered;
    acknowledged += more.acknowledged;
    return *this;
  }
};

// Churn, broker-wide: what opened, closed, was declared and deleted, as rabbitmq_prometheus's
// connection_churn_metrics and queue_churn_metrics count it (connections: ConnectionCounts, which admits them). The
// number open now is opened minus closed.
struct ChurnCounters {
  std::uint64_t channels_opened = 0;  // a session opened: a FireMQ connection, or an AMQP channel
  std::uint64_t channels_closed = 0;
  std::uint64_t queues_declared = 0;  // declares that succeeded, passive ones not counted (as RabbitMQ)
  std::uint64_t queues_created = 0;
  std::uint64_t queues_deleted = 0;  // by a client, the API, auto-delete, x-expires or an exclusive owner's end
};

}  // namespace firemq
