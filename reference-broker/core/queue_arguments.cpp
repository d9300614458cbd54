#include "reference-broker/core/queue_arguments.h"

#include <array>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

// The arguments a redeclare compares (RabbitMQ's list).
constexpr std::array<std::string_view, 10> kCompared = {"x-expires",
                                                        "x-message-ttl",
                                                        "x-dead-letter-exchange",
                                                        "x-dead-letter-routing-key",
                                                        "x-max-length",
                                                        "x-max-length-bytes",
                                                        "x-max-priority",
                                                        "x-overflow",
                                                        "x-single-active-consumer",
                                                        "x-queue-type"};

class ArgumentReader {
 public:
  ArgumentReader(const Map& args, const std::string& queue, const std::string& vhost)
      : args_(args), queue_(queue), vhost_(vhost) {}

  // A non-negative integer of any width; floats and strings are refused, as RabbitMQ does.
  std::optional<std::uint64_t> integer(std::string_view name, std::uint64_t min, std::uint64_t max) {
    const Value* v = find(args_, name);
    if (v == nullptr || error_) return std::nullopt;
    const auto* u = v->get_if<std::uint64_t>();
    if (u == nullptr) {
      const auto* negative = v->get_if<std::int64_t>();
      invalid(name, negative ? "expected a non-negative integer, got " + std::to_string(*negative)
                             : "expected an integer, got " + std::string(type_name(*v)));
      return std::nullopt;
    }
    if (*u < min || *u > max) {
      invalid(name, "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
                        std::to_string(*u));
      return std::nullopt;
    }
    return *u;
  }

  std::optional<std::string> string(std::string_view name) {
    const Value* v = find(args_, name);
    if (v == nullptr || error_) return std::nullopt;
    const auto* s = v->get_if<std::string>();
    if (s == nullptr) {
      invalid(name, "expected a str, got " + std::string(type_name(*v)));
      return std::nullopt;
    }
    return *s;
  }

  bool boolean(std::string_view name) {
    const Value* v = find(args_, name);
    if (v == nullptr || error_) return false;
    const auto* b = v->get_if<bool>();
    if (b == nullptr) {
      invalid(name, "expected a bool, got " + std::string(type_name(*v)));
      return false;
    }
    return *b;
  }

  void invalid(std::string_view name, const std::string& why) {
    if (error_) return;
    error_ = make_error(ReplyCode::precondition_failed, "invalid arg '" + std::string(name) + "' for queue '" + queue_ +
                                                            "' in vhost '" + vhost_ + "': " + why);
  }

  Status take_error() { return std::move(error_); }

 private:
  const Map& args_;
  const std::string& queue_;
  const std::string& vhost_;
  Status error_;
};

std::string shown(const Value* v) {
  if (v == nullptr) return "none";
  if (const auto* s = v->get_if<std::string>()) return *s;
  if (const auto* u = v->get_if<std::uint64_t>()) return std::to_string(*u);
  if (const auto* i = v->get_if<std::int64_t>()) return std::to_string(*i);
  if (const auto* b = v->get_if<bool>()) return *b ? "true" : "false";
  return std::string(type_name(*v));
}

}  // namespace

Result<QueueArguments> parse_queue_arguments(const Map& args, const std::string& queue, const std::string& vhost) {
  ArgumentReader r(args, queue, vhost);
  QueueArguments a;
  a.message_ttl_ms = r.integer("x-message-ttl", 0, kMaxTtlMs);
  a.expires_ms = r.integer("x-expires", 1, kMaxTtlMs);  // 0 is invalid: the queue would go at once
  a.max_length = r.integer("x-max-length", 0, UINT64_MAX);
  a.max_length_bytes = r.integer("x-max-length-bytes", 0, UINT64_MAX);
  if (auto overflow = r.string("x-overflow")) {
    if (*overflow == "drop-head") {
      a.overflow = Overflow::drop_head;
    } else if (*overflow == "reject-publish") {
      a.overflow = Overflow::reject_publish;
    } else if (*overflow == "reject-publish-dlx") {
      a.overflow = Overflow::reject_publish_dlx;
    } else {
      r.invalid("x-overflow", "expected drop-head, reject-publish or reject-publish-dlx, got '" + *overflow + "'");
    }
  }
  a.dead_letter_exchange = r.string("x-dead-letter-exchange");
  a.dead_letter_routing_key = r.string("x-dead-letter-routing-key");
  if (a.dead_letter_routing_key && !a.dead_letter_exchange) {
    r.invalid("x-dead-letter-routing-key", "a dead-letter routing key needs x-dead-letter-exchange");
  }
  a.single_active_consumer = r.boolean("x-single-active-consumer");
  if (auto priority = r.integer("x-max-priority", 1, 255)) a.max_priority = static_cast<std::uint8_t>(*priority);
  if (Status bad = r.take_error()) return std::move(*bad);
  return a;
}

namespace {

// x-queue-type "classic" is the type a queue has without the argument: a redeclare may give it or leave it out,
// as RabbitMQ allows.
const Value* compared_argument(const Map& args, std::string_view name) {
  const Value* v = find(args, name);
  if (v != nullptr && name == "x-queue-type" && *v == Value(std::string("classic"))) return nullptr;
  return v;
}

}  // namespace

Status compare_queue_arguments(const Map& existing, const Map& requested, const std::string& queue,
                               const std::string& vhost) {
  for (std::string_view name : kCompared) {
    const Value* was = compared_argument(existing, name);
    const Value* now = compared_argument(requested, name);
    const bool same = (was == nullptr && now == nullptr) || (was != nullptr && now != nullptr && *was == *now);
    if (!same) {
      return make_error(ReplyCode::precondition_failed, "inequivalent arg '" + std::string(name) + "' for queue '" +
                                                            queue + "' in vhost '" + vhost + "': received '" +
                                                            shown(now) + "' but current is '" + shown(was) + "'");
    }
  }
  return std::nullopt;
}

}  // namespace firemq
