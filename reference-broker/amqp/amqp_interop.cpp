#include "reference-broker/amqp/amqp_interop.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "protocol/reply_codes.h"
#include "protocol/utf8.h"

namespace firemq {
namespace {

using amqp::Arg;
using amqp::FieldValue;

// A property both protocols have under the same name: its name, and its place in AMQP's property list.
struct SharedProperty {
  std::string_view name;
  std::size_t index;  // amqp::property
};
// The properties that are strings on both sides. cluster_id has no FireMQ property; it is kept in props under
// its AMQP name, so that it reaches AMQP consumers (FireMQ clients ignore keys they do not know).
constexpr SharedProperty kTextProperties[] = {{"content_type", amqp::property::kContentType},
                                              {"content_encoding", amqp::property::kContentEncoding},
                                              {"correlation_id", amqp::property::kCorrelationId},
                                              {"reply_to", amqp::property::kReplyTo},
                                              {"message_id", amqp::property::kMessageId},
                                              {"type", amqp::property::kType},
                                              {"user_id", amqp::property::kUserId},
                                              {"app_id", amqp::property::kAppId},
                                              {"cluster_id", amqp::property::kClusterId}};
// The properties that are numbers on both sides.
constexpr SharedProperty kNumberProperties[] = {{"priority", amqp::property::kPriority},
                                                {"timestamp", amqp::property::kTimestamp}};
constexpr std::uint64_t kPersistentDeliveryMode = 2;

// `D`: value / 10^scale, as a float (the table's "AMQP D (decimal) ... -> float").
double decimal_to_double(const amqp::Decimal& d) { return d.value / std::pow(10.0, d.scale); }

// AMQP's expiration is "a decimal string" of milliseconds, as RabbitMQ reads it: digits only.
std::optional<std::uint64_t> parse_expiration(const std::string& text) {
  std::uint64_t ms = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return ms;
}

// An AMQP long string or field name is any bytes; a MessagePack str must be UTF-8, so bytes that are not become
// bin (a FireMQ consumer must never be sent invalid MessagePack).
Value text_or_bytes(const std::string& s) {
  if (is_valid_utf8(s)) return Value(s);
  return Value(Bin{Bytes(s.begin(), s.end())});
}

}  // namespace

Value to_firemq_value(const FieldValue& value) {
  return std::visit(
      [](const auto& x) -> Value {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, amqp::Void>) {
          return Value(Nil{});
        } else if constexpr (std::is_same_v<T, std::string>) {
          return text_or_bytes(x);
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, float> || std::is_same_v<T, double>) {
          return Value(x);
        } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
          return Value(static_cast<std::int64_t>(x));
        } else if constexpr (std::is_integral_v<T>) {
          return Value(static_cast<std::uint64_t>(x));
        } else if constexpr (std::is_same_v<T, amqp::Decimal>) {
          return Value(decimal_to_double(x));
        } else if constexpr (std::is_same_v<T, amqp::ByteArray>) {
          return Value(Bin{x.bytes});
        } else if constexpr (std::is_same_v<T, amqp::Timestamp>) {
          return Value(x.seconds);
        } else if constexpr (std::is_same_v<T, amqp::FieldArray>) {
          Array out;
          for (const FieldValue& v : x) out.push_back(to_firemq_value(v));
          return Value(std::move(out));
        } else {
          return Value(to_firemq_map(x));
        }
      },
      value.v);
}

FieldValue to_amqp_value(const Value& value) {
  return std::visit(
      [](const auto& x) -> FieldValue {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Nil>) {
          return amqp::Void{};
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, double> ||
                             std::is_same_v<T, std::string>) {
          return x;
        } else if constexpr (std::is_same_v<T, std::uint64_t>) {
          // `l` is signed: a uint above its range has no exact AMQP type; it goes as a double (spec-notes).
          if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return static_cast<double>(x);
          return static_cast<std::int64_t>(x);
        } else if constexpr (std::is_same_v<T, float>) {
          return static_cast<double>(x);  // exact: every float32 is a double
        } else if constexpr (std::is_same_v<T, Bin>) {
          return amqp::ByteArray{x.bytes};
        } else if constexpr (std::is_same_v<T, Ext>) {
          return amqp::ByteArray{x.data};
        } else if constexpr (std::is_same_v<T, Array>) {
          amqp::FieldArray out;
          for (const Value& v : x) out.push_back(to_amqp_value(v));
          return out;
        } else {
          return to_amqp_table(x);
        }
      },
      value.v);
}

Map to_firemq_map(const amqp::FieldTable& table) {
  Map out;
  out.reserve(table.size());
  for (const amqp::FieldEntry& e : table) out.push_back({text_or_bytes(e.name), to_firemq_value(e.value)});
  return out;
}

namespace {

// An AMQP field name for a map key: a string as it is, a non-UTF-8 name back to its bytes, an integer as its
// text; other keys have none.
std::optional<std::string> amqp_name(const Value& key) {
  if (const auto* s = key.get_if<std::string>()) return *s;
  if (const auto* b = key.get_if<Bin>()) return std::string(b->bytes.begin(), b->bytes.end());
  if (const auto* u = key.get_if<std::uint64_t>()) return std::to_string(*u);
  if (const auto* i = key.get_if<std::int64_t>()) return std::to_string(*i);
  return std::nullopt;
}

// The entry of `sent` named `name`, looked for at `hint` first: the FireMQ headers were made from `sent` in its
// order, and dead-lettering changes entries in place or appends, so the hint nearly always holds.
const amqp::FieldEntry* sent_entry(const amqp::FieldTable& sent, const std::string& name, std::size_t hint) {
  if (hint < sent.size() && sent[hint].name == name) return &sent[hint];
  for (const amqp::FieldEntry& e : sent) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

amqp::FieldTable to_amqp_table_keeping_types(const Map& headers, const amqp::FieldTable& sent) {
  amqp::FieldTable out;
  out.reserve(headers.size());
  for (std::size_t i = 0; i < headers.size(); ++i) {
    std::optional<std::string> name = amqp_name(headers[i].key);
    if (!name) continue;
    const amqp::FieldEntry* original = sent_entry(sent, *name, i);
    if (original != nullptr && to_firemq_value(original->value) == headers[i].value) {
      out.push_back(*original);
    } else {
      out.push_back({std::move(*name), to_amqp_value(headers[i].value)});
    }
  }
  return out;
}

}  // namespace

amqp::FieldTable to_amqp_table(const Map& map) {
  amqp::FieldTable out;
  for (const MapEntry& e : map) {
    if (std::optional<std::string> name = amqp_name(e.key)) out.push_back({std::move(*name), to_amqp_value(e.value)});
  }
  return out;
}

Result<FireMqContent> from_amqp_properties(const amqp::ContentHeader& header) {
  namespace p = amqp::property;
  FireMqContent c;
  for (const SharedProperty& shared : kTextProperties) {
    if (const Arg* a = header.get(shared.index))
      c.props.entries.push_back({Value(std::string(shared.name)), Value(std::get<std::string>(*a))});
  }
  for (const SharedProperty& shared : kNumberProperties) {
    if (const Arg* a = header.get(shared.index))
      c.props.entries.push_back({Value(std::string(shared.name)), Value(std::get<std::uint64_t>(*a))});
  }
  if (const Arg* a = header.get(p::kExpiration)) {
    const auto& text = std::get<std::string>(*a);
    auto ms = parse_expiration(text);
    if (!ms)
      return make_error(ReplyCode::precondition_failed,
                        "invalid expiration '" + text + "': expected milliseconds as a decimal string");
    c.props.entries.push_back({Value("expiration"), Value(*ms)});
  }
  if (const Arg* a = header.get(p::kDeliveryMode))
    c.persistent = std::get<std::uint64_t>(*a) == kPersistentDeliveryMode;
  if (const Arg* a = header.get(p::kHeaders)) {
    const auto& table = std::get<amqp::FieldTable>(*a);
    c.headers = to_firemq_map(table);
    // An empty table is kept too: RabbitMQ delivers it as sent (some clients, amqplib's, always send one), and
    // FireMQ's headers cannot tell it from none. One shared empty table serves every such publish.
    static const auto kEmptyTable = std::make_shared<const amqp::FieldTable>();
    c.amqp_headers = table.empty() ? kEmptyTable : std::make_shared<const amqp::FieldTable>(table);
  }
  return c;
}

namespace {

void drop_decimal_scales(amqp::FieldTable& table);

void drop_decimal_scale(FieldValue& value) {
  if (auto* d = std::get_if<amqp::Decimal>(&value.v)) d->scale = 0;
  if (auto* t = std::get_if<amqp::FieldTable>(&value.v)) drop_decimal_scales(*t);
  if (auto* a = std::get_if<amqp::FieldArray>(&value.v)) {
    for (FieldValue& v : *a) drop_decimal_scale(v);
  }
}

void drop_decimal_scales(amqp::FieldTable& table) {
  for (amqp::FieldEntry& e : table) drop_decimal_scale(e.value);
}

// x-death as RabbitMQ writes it for AMQP consumers: original-expiration is the message's expiration property as it
// was, a uint on FireMQ and in AMQP the property's own type, a decimal string (the interop table's expiration row);
// time is a uint of seconds on FireMQ and an AMQP timestamp (T).
void deaths_in_amqp_types(amqp::FieldTable& headers) {
  for (amqp::FieldEntry& header : headers) {
    auto* deaths = header.name == "x-death" ? std::get_if<amqp::FieldArray>(&header.value.v) : nullptr;
    if (deaths == nullptr) continue;
    for (FieldValue& death : *deaths) {
      auto* entry = std::get_if<amqp::FieldTable>(&death.v);
      if (entry == nullptr) continue;
      for (amqp::FieldEntry& e : *entry) {
        const auto* number = std::get_if<std::int64_t>(&e.value.v);
        if (number == nullptr) continue;
        if (e.name == "original-expiration") e.value.v = std::to_string(*number);
        if (e.name == "time" && *number >= 0) e.value.v = amqp::Timestamp{static_cast<std::uint64_t>(*number)};
      }
    }
  }
}

}  // namespace

void apply_faults(amqp::ContentHeader& header, const AmqpFaults& faults) {
  namespace p = amqp::property;
  if (faults.drop_delivery_mode) header.properties[p::kDeliveryMode].reset();
  auto& headers = header.properties[p::kHeaders];
  if (!headers) return;
  if (faults.empty_headers_dropped && std::get<amqp::FieldTable>(*headers).empty()) return headers.reset();
  if (faults.decimal_ignores_scale) drop_decimal_scales(std::get<amqp::FieldTable>(*headers));
}

amqp::ContentHeader to_amqp_properties(const Props& props, const Map& headers, bool persistent,
                                       const amqp::FieldTable* sent) {
  namespace p = amqp::property;
  amqp::ContentHeader h;
  if (persistent) h.set(p::kDeliveryMode, kPersistentDeliveryMode);
  if (props.entries.empty() && headers.empty() && sent == nullptr) return h;  // the hot path's common case
  for (const SharedProperty& shared : kTextProperties) {
    if (const Value* v = props.get(shared.name); v && v->is<std::string>())
      h.set(shared.index, *v->get_if<std::string>());
  }
  for (const SharedProperty& shared : kNumberProperties) {
    if (const Value* v = props.get(shared.name); v && v->is<std::uint64_t>())
      h.set(shared.index, *v->get_if<std::uint64_t>());
  }
  if (const Value* v = props.get("expiration"); v && v->is<std::uint64_t>()) {
    h.set(p::kExpiration, std::to_string(*v->get_if<std::uint64_t>()));
  }
  if (!headers.empty() || sent != nullptr) {  // an AMQP publisher's empty table goes back as it came
    amqp::FieldTable table = sent != nullptr ? to_amqp_table_keeping_types(headers, *sent) : to_amqp_table(headers);
    deaths_in_amqp_types(table);
    h.set(p::kHeaders, std::move(table));
  }
  return h;
}

}  // namespace firemq
