// Dead-lettering (x-dead-letter-exchange, x-dead-letter-routing-key), following RabbitMQ's documented
// behaviour: a message rejected without requeue, expired, or dropped by a length limit is republished
// to the queue's dead-letter exchange with an x-death history in its headers.
#include "reference-broker/core/vhost.h"

namespace firemq {
namespace {

std::string_view reason_name(DeathReason reason) {
  switch (reason) {
    case DeathReason::rejected: return "rejected";
    case DeathReason::expired: return "expired";
    case DeathReason::maxlen: return "maxlen";
  }
  return "rejected";
}

Value* find_mutable(Map& map, std::string_view key) {
  for (MapEntry& e : map) {
    if (const auto* k = e.key.get_if<std::string>(); k && *k == key) return &e.value;
  }
  return nullptr;
}

void set(Map& map, std::string_view key, Value value) {
  if (Value* existing = find_mutable(map, key)) {
    *existing = std::move(value);
  } else {
    map.push_back({Value(std::string(key)), std::move(value)});
  }
}

const std::string* string_in(const Map& map, std::string_view key) {
  const Value* v = find(map, key);
  return v ? v->get_if<std::string>() : nullptr;
}

// x-death: "array of maps, most recent first; each {count, reason, queue, time, exchange, routing-keys,
// original-expiration}. Keyed by (queue, reason): a repeat increments count and moves the entry to the front."
void record_death(MessageParts& m, const std::string& queue, DeathReason reason, std::uint64_t now_seconds) {
  const std::string why(reason_name(reason));
  Array deaths;
  if (const Value* existing = find(m.headers, "x-death"); existing && existing->is<Array>())
    deaths = *existing->get_if<Array>();
  Map entry;
  for (auto it = deaths.begin(); it != deaths.end(); ++it) {
    const auto* old = it->get_if<Map>();
    if (old && string_in(*old, "queue") && *string_in(*old, "queue") == queue && string_in(*old, "reason") &&
        *string_in(*old, "reason") == why) {
      entry = *old;
      deaths.erase(it);
      break;
    }
  }
  if (entry.empty()) {
    entry = Map{{Value("count"), Value(std::uint64_t{0})},
                {Value("reason"), Value(why)},
                {Value("queue"), Value(queue)},
                {Value("time"), Value(now_seconds)},
                {Value("exchange"), Value(m.exchange)},
                {Value("routing-keys"), Value(Array{Value(m.routing_key)})}};
    if (const Value* expiration = m.props.get("expiration"))
      entry.push_back({Value("original-expiration"), *expiration});
  }
  const Value* count = find(entry, "count");
  const std::uint64_t previous = count && count->is<std::uint64_t>() ? *count->get_if<std::uint64_t>() : 0;
  set(entry, "count", Value(previous + 1));
  deaths.insert(deaths.begin(), Value(std::move(entry)));
  set(m.headers, "x-death", Value(std::move(deaths)));
  // x-first-death-* are set once; x-last-death-* follow every death.
  if (!find(m.headers, "x-first-death-queue")) {
    set(m.headers, "x-first-death-queue", Value(queue));
    set(m.headers, "x-first-death-reason", Value(why));
    set(m.headers, "x-first-death-exchange", Value(m.exchange));
  }
  set(m.headers, "x-last-death-queue", Value(queue));
  set(m.headers, "x-last-death-reason", Value(why));
  set(m.headers, "x-last-death-exchange", Value(m.exchange));
  // "The expiration property is removed (recorded as original-expiration)", so it does not expire again.
  std::erase_if(m.props.entries, [](const MapEntry& e) { return e.key == Value("expiration"); });
}

// "for reasons other than rejected, a copy going to a queue already in the death history with no rejected death
// since is dropped": a cycle no client takes part in would go round for ever. "Since" is read from the front (the
// most recent death) back to the target queue's latest entry, as RabbitMQ's is_cycle: a rejection older than the
// message's last death in the target queue does not break the cycle that followed it.
bool is_cycle(const BrokerMessage& m, const std::string& target) {
  const Value* history = find(m.headers(), "x-death");
  const auto* deaths = history ? history->get_if<Array>() : nullptr;
  if (deaths == nullptr) return false;
  for (const Value& d : *deaths) {
    const auto* entry = d.get_if<Map>();
    if (entry == nullptr) return false;  // a client wrote this history, so the cycle is not the broker's alone
    if (string_in(*entry, "reason") && *string_in(*entry, "reason") == "rejected") return false;
    if (string_in(*entry, "queue") && *string_in(*entry, "queue") == target) return true;
  }
  return false;
}

}  // namespace

void Vhost::dead_letter(const Queue& from, const QueuedMessage& message, DeathReason reason) {
  const QueueArguments& a = from.settings().arguments;
  if (!a.dead_letter_exchange) return;  // "dropped otherwise"
  auto dlx = exchanges_.find(*a.dead_letter_exchange);
  if (dlx == exchanges_.end()) return;  // "a missing dead-letter exchange drops the message"
  // A new message, to the store too (it has no store id): its headers differ from the original's.
  MessageParts copy = message.message->parts();
  record_death(copy, from.name(), reason, time_.unix_seconds());
  // "Without a DLK the message keeps its original routing key."
  if (a.dead_letter_routing_key) copy.routing_key = *a.dead_letter_routing_key;
  copy.exchange = *a.dead_letter_exchange;
  const MessagePtr republished = BrokerMessage::make(std::move(copy), message.message->body());

  Route route;
  if (dlx->first.empty()) {  // the default exchange: the queue named by the key
    if (auto q = queues_.find(std::string(republished->routing_key())); q != queues_.end())
      route.queues.push_back(q->second.get());
  } else {
    std::set<std::string> visited{dlx->first};
    std::set<Queue*> reached;
    route_from(dlx->second, std::string(republished->routing_key()), republished->headers(), visited, reached, route);
  }
  for (Queue* target : route.queues) {
    if (reason != DeathReason::rejected && is_cycle(*republished, target->name())) continue;
    target->enqueue(republished);
  }
}

}  // namespace firemq
