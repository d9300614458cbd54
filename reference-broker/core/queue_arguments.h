// Queue arguments with RabbitMQ's names (the spec's declare_queue.args), parsed and checked once at declare:
// x-message-ttl, x-expires, x-max-length, x-max-length-bytes, x-overflow, x-dead-letter-exchange,
// x-dead-letter-routing-key, x-single-active-consumer, x-max-priority. Their behaviour follows
// RabbitMQ's documented behaviour; where the spec and RabbitMQ differ, the spec wins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

// The longest TTL RabbitMQ accepts: ten years, in milliseconds.
inline constexpr std::uint64_t kMaxTtlMs = 315'360'000'000;

enum class Overflow { drop_head, reject_publish, reject_publish_dlx };

struct QueueArguments {
  std::optional<std::uint64_t> message_ttl_ms;
  std::optional<std::uint64_t> expires_ms;
  std::optional<std::uint64_t> max_length;
  std::optional<std::uint64_t> max_length_bytes;
  Overflow overflow = Overflow::drop_head;
  std::optional<std::string> dead_letter_exchange;
  std::optional<std::string> dead_letter_routing_key;
  bool single_active_consumer = false;
  std::uint8_t max_priority = 0;  // 0: not a priority queue
};

// The arguments of a new queue; a wrong type or value is 406 naming the argument:
// "invalid arg 'x-max-priority' for queue 'q' in vhost '/': ..." as RabbitMQ words it.
Result<QueueArguments> parse_queue_arguments(const Map& args, const std::string& queue, const std::string& vhost);

// A redeclare with different arguments: 406 naming the first that differs. Only the arguments RabbitMQ compares
// are compared; integer widths compare equal; present against absent is a difference.
Status compare_queue_arguments(const Map& existing, const Map& requested, const std::string& queue,
                               const std::string& vhost);

}  // namespace firemq
