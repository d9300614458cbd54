#include "harness/run/amqp_side.h"

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>

#include "harness/run/scenario.h"
#include "protocol/bytes.h"
#include "protocol/typed_json.h"
#include "protocol/url.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;
constexpr int kDefaultWithinMs = 2000;
constexpr int kDefaultFrameMax = 131072;  // RabbitMQ's default, which the reference broker proposes too

// Field tables: JSON <-> rabbitmq-c ------------------------------------------------------------------------
//
// A field value is written as a one-key object from its type letter (RabbitMQ's letters, which rabbitmq-c's
// AMQP_FIELD_KIND_* constants are): {"V": null}, {"t": true}, {"b"|"s"|"I"|"l": int}, {"B"|"u"|"i"|"L": uint},
// {"f"|"d": number}, {"D": {"scale": n, "value": int}}, {"S": "text"}, {"x": "<hex>"}, {"A": [values]},
// {"T": seconds}, {"F": {name: value, ...}}. The same shape is what a case's patterns match received values
// against, so a case says exactly which type it sends and which it expects.

// Storage for what rabbitmq-c's structures point at, alive for one step. Each vector is filled completely
// before it is moved into its deque, so the pointers taken from it stay valid.
struct Arena {
  std::deque<std::string> strings;
  std::deque<std::vector<amqp_table_entry_t>> entries;
  std::deque<std::vector<amqp_field_value_t>> values;
  std::deque<Bytes> bytes;

  amqp_bytes_t text(const std::string& s) {
    strings.push_back(s);
    return amqp_bytes_t{strings.back().size(), strings.back().data()};
  }
  amqp_bytes_t binary(Bytes b) {
    bytes.push_back(std::move(b));
    return amqp_bytes_t{bytes.back().size(), bytes.back().data()};
  }
};

Result<amqp_table_t, std::string> table_from_json(const Json& object, Arena& arena, const std::string& path);

Result<amqp_field_value_t, std::string> field_from_json(const Json& j, Arena& arena, const std::string& path) {
  if (!j.is_object() || j.size() != 1 || j.begin().key().size() != 1) {
    return path + ": a field value is a one-key object from its type letter, e.g. {\"l\": 5}; got " + j.dump();
  }
  const char letter = j.begin().key()[0];
  const Json& v = j.begin().value();
  amqp_field_value_t f{};
  f.kind = static_cast<std::uint8_t>(letter);
  try {
    switch (letter) {
      case 'V': break;
      case 't': f.value.boolean = v.get<bool>(); break;
      case 'b': f.value.i8 = v.get<std::int8_t>(); break;
      case 'B': f.value.u8 = v.get<std::uint8_t>(); break;
      case 's': f.value.i16 = v.get<std::int16_t>(); break;
      case 'u': f.value.u16 = v.get<std::uint16_t>(); break;
      case 'I': f.value.i32 = v.get<std::int32_t>(); break;
      case 'i': f.value.u32 = v.get<std::uint32_t>(); break;
      case 'l': f.value.i64 = v.get<std::int64_t>(); break;
      case 'L': f.value.u64 = v.get<std::uint64_t>(); break;
      case 'T': f.value.u64 = v.get<std::uint64_t>(); break;
      case 'f': f.value.f32 = v.get<float>(); break;
      case 'd': f.value.f64 = v.get<double>(); break;
      case 'D': {  // the value is signed, as RabbitMQ reads it (and as it is read back below)
        const auto value = static_cast<std::uint32_t>(v.at("value").get<std::int32_t>());
        f.value.decimal = {v.at("scale").get<std::uint8_t>(), value};
        break;
      }
      case 'S': f.value.bytes = arena.text(v.get<std::string>()); break;
      case 'x': {
        auto b = from_hex(v.get<std::string>());
        if (!b) return path + ": {\"x\": ...} takes hex";
        f.value.bytes = arena.binary(std::move(*b));
        break;
      }
      case 'A': {
        std::vector<amqp_field_value_t> items;
        for (std::size_t i = 0; i < v.size(); ++i) {
          auto item = field_from_json(v.at(i), arena, path + "[" + std::to_string(i) + "]");
          if (!item) return item.error();
          items.push_back(*item);
        }
        arena.values.push_back(std::move(items));
        f.value.array = {static_cast<int>(arena.values.back().size()), arena.values.back().data()};
        break;
      }
      case 'F': {
        auto table = table_from_json(v, arena, path);
        if (!table) return table.error();
        f.value.table = *table;
        break;
      }
      default: return path + ": unknown field type letter '" + std::string(1, letter) + "'";
    }
  } catch (const Json::exception& e) {
    return path + ": a value that does not fit its type " + std::string(1, letter) + ": " + e.what();
  }
  return f;
}

Result<amqp_table_t, std::string> table_from_json(const Json& object, Arena& arena, const std::string& path) {
  if (!object.is_object()) return path + ": a field table is an object";
  std::vector<amqp_table_entry_t> entries;
  for (const auto& [name, value] : object.items()) {
    auto f = field_from_json(value, arena, path + "." + name);
    if (!f) return f.error();
    entries.push_back({arena.text(name), *f});
  }
  arena.entries.push_back(std::move(entries));
  return amqp_table_t{static_cast<int>(arena.entries.back().size()), arena.entries.back().data()};
}

// Integers as the typed-JSON convention writes them (non-negative: uint, negative: int): the letter beside
// the value already says its AMQP type, so a pattern {"l": 5} matches.
Value integer_value(std::int64_t n) { return n < 0 ? Value(n) : Value(static_cast<std::uint64_t>(n)); }

Value value_of_table(const amqp_table_t& table);

Value value_of_field(const amqp_field_value_t& f) {
  Value v;
  switch (f.kind) {
    case 'V': v = Value(Nil{}); break;
    case 't': v = Value(f.value.boolean != 0); break;
    case 'b': v = integer_value(f.value.i8); break;
    case 's': v = integer_value(f.value.i16); break;
    case 'I': v = integer_value(f.value.i32); break;
    case 'l': v = integer_value(f.value.i64); break;
    case 'B': v = Value(std::uint64_t{f.value.u8}); break;
    case 'u': v = Value(std::uint64_t{f.value.u16}); break;
    case 'i': v = Value(std::uint64_t{f.value.u32}); break;
    case 'L':
    case 'T': v = Value(std::uint64_t{f.value.u64}); break;
    case 'f': v = Value(f.value.f32); break;
    case 'd': v = Value(f.value.f64); break;
    case 'D':
      v = Value(Map{{Value("scale"), Value(std::uint64_t{f.value.decimal.decimals})},
                    {Value("value"), integer_value(static_cast<std::int32_t>(f.value.decimal.value))}});
      break;
    case 'S': v = Value(std::string(static_cast<const char*>(f.value.bytes.bytes), f.value.bytes.len)); break;
    case 'x': {
      const auto* p = static_cast<const std::uint8_t*>(f.value.bytes.bytes);
      v = Value(Bin{Bytes(p, p + f.value.bytes.len)});
      break;
    }
    case 'A': {
      Array items;
      for (int i = 0; i < f.value.array.num_entries; ++i) items.push_back(value_of_field(f.value.array.entries[i]));
      v = Value(std::move(items));
      break;
    }
    case 'F': v = value_of_table(f.value.table); break;
    default: v = Value("unknown type letter " + std::string(1, static_cast<char>(f.kind))); break;
  }
  return Value(Map{{Value(std::string(1, static_cast<char>(f.kind))), std::move(v)}});
}

Value value_of_table(const amqp_table_t& table) {
  Map out;
  for (int i = 0; i < table.num_entries; ++i) {
    const amqp_table_entry_t& e = table.entries[i];
    out.push_back({Value(std::string(static_cast<const char*>(e.key.bytes), e.key.len)), value_of_field(e.value)});
  }
  return Value(std::move(out));
}

// Message properties -----------------------------------------------------------------------------------------

struct TextProperty {
  const char* name;
  amqp_flags_t flag;
  amqp_bytes_t amqp_basic_properties_t::*field;
};
constexpr TextProperty kTextProperties[] = {
    {"content_type", AMQP_BASIC_CONTENT_TYPE_FLAG, &amqp_basic_properties_t::content_type},
    {"content_encoding", AMQP_BASIC_CONTENT_ENCODING_FLAG, &amqp_basic_properties_t::content_encoding},
    {"correlation_id", AMQP_BASIC_CORRELATION_ID_FLAG, &amqp_basic_properties_t::correlation_id},
    {"reply_to", AMQP_BASIC_REPLY_TO_FLAG, &amqp_basic_properties_t::reply_to},
    {"expiration", AMQP_BASIC_EXPIRATION_FLAG, &amqp_basic_properties_t::expiration},
    {"message_id", AMQP_BASIC_MESSAGE_ID_FLAG, &amqp_basic_properties_t::message_id},
    {"type", AMQP_BASIC_TYPE_FLAG, &amqp_basic_properties_t::type},
    {"user_id", AMQP_BASIC_USER_ID_FLAG, &amqp_basic_properties_t::user_id},
    {"app_id", AMQP_BASIC_APP_ID_FLAG, &amqp_basic_properties_t::app_id},
    {"cluster_id", AMQP_BASIC_CLUSTER_ID_FLAG, &amqp_basic_properties_t::cluster_id},
};

// amqp_publish's "properties": AMQP's names (content_type ... cluster_id, delivery_mode, priority, timestamp,
// headers as a field table).
Result<amqp_basic_properties_t, std::string> properties_from_json(const Json& j, Arena& arena) {
  amqp_basic_properties_t p{};
  if (!j.is_object()) return std::string("properties must be an object");
  for (const auto& [name, value] : j.items()) {
    const auto* text = std::find_if(std::begin(kTextProperties), std::end(kTextProperties),
                                    [&](const TextProperty& t) { return name == t.name; });
    if (text != std::end(kTextProperties)) {
      if (!value.is_string()) return "property " + name + " is a string";
      p._flags |= text->flag;
      p.*(text->field) = arena.text(value.get<std::string>());
    } else if (name == "delivery_mode" || name == "priority") {
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() > 255) return "property " + name + " is an octet";
      p._flags |= name == "delivery_mode" ? AMQP_BASIC_DELIVERY_MODE_FLAG : AMQP_BASIC_PRIORITY_FLAG;
      (name == "delivery_mode" ? p.delivery_mode : p.priority) = value.get<std::uint8_t>();
    } else if (name == "timestamp") {
      if (!value.is_number_unsigned()) return std::string("property timestamp is a uint (seconds)");
      p._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
      p.timestamp = value.get<std::uint64_t>();
    } else if (name == "headers") {
      auto table = table_from_json(value, arena, "headers");
      if (!table) return table.error();
      p._flags |= AMQP_BASIC_HEADERS_FLAG;
      p.headers = *table;
    } else {
      return "unknown AMQP property " + name;
    }
  }
  return p;
}

std::string text_of(const amqp_bytes_t& b) { return std::string(static_cast<const char*>(b.bytes), b.len); }

// The properties a content header carried; an absent property is an absent key.
Value value_of_properties(const amqp_basic_properties_t& p) {
  Map out;
  for (const TextProperty& t : kTextProperties) {
    if (p._flags & t.flag) out.push_back({Value(t.name), Value(text_of(p.*(t.field)))});
  }
  if (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
    out.push_back({Value("delivery_mode"), Value(std::uint64_t{p.delivery_mode})});
  if (p._flags & AMQP_BASIC_PRIORITY_FLAG) out.push_back({Value("priority"), Value(std::uint64_t{p.priority})});
  if (p._flags & AMQP_BASIC_TIMESTAMP_FLAG) out.push_back({Value("timestamp"), Value(std::uint64_t{p.timestamp})});
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) out.push_back({Value("headers"), value_of_table(p.headers)});
  return Value(std::move(out));
}

// Methods ------------------------------------------------------------------------------------------------------

// "AMQP_BASIC_GET_OK_METHOD" -> "basic.get-ok", the names of the AMQP 0-9-1 spec.
std::string method_name(amqp_method_number_t id) {
  std::string n = amqp_method_name(id);
  if (n.starts_with("AMQP_")) n = n.substr(5);
  if (n.ends_with("_METHOD")) n.resize(n.size() - 7);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (auto dot = n.find('_'); dot != std::string::npos) n[dot] = '.';
  std::replace(n.begin(), n.end(), '_', '-');
  return n;
}

Value str(const amqp_bytes_t& b) { return Value(text_of(b)); }
Value uint(std::uint64_t n) { return Value(n); }
Value flag(amqp_boolean_t b) { return Value(b != 0); }

// The fields of the methods a case may expect, by their AMQP names; other methods have none the cases need.
Value fields_of(const amqp_method_t& m) {
  const void* d = m.decoded;
  switch (m.id) {
    case AMQP_BASIC_DELIVER_METHOD: {
      const auto* x = static_cast<const amqp_basic_deliver_t*>(d);
      return Value(Map{{Value("consumer_tag"), str(x->consumer_tag)},
                       {Value("delivery_tag"), uint(x->delivery_tag)},
                       {Value("redelivered"), flag(x->redelivered)},
                       {Value("exchange"), str(x->exchange)},
                       {Value("routing_key"), str(x->routing_key)}});
    }
    case AMQP_BASIC_GET_OK_METHOD: {
      const auto* x = static_cast<const amqp_basic_get_ok_t*>(d);
      return Value(Map{{Value("delivery_tag"), uint(x->delivery_tag)},
                       {Value("redelivered"), flag(x->redelivered)},
                       {Value("exchange"), str(x->exchange)},
                       {Value("routing_key"), str(x->routing_key)},
                       {Value("message_count"), uint(x->message_count)}});
    }
    case AMQP_BASIC_RETURN_METHOD: {
      const auto* x = static_cast<const amqp_basic_return_t*>(d);
      return Value(Map{{Value("reply_code"), uint(x->reply_code)},
                       {Value("reply_text"), str(x->reply_text)},
                       {Value("exchange"), str(x->exchange)},
                       {Value("routing_key"), str(x->routing_key)}});
    }
    case AMQP_BASIC_ACK_METHOD: {
      const auto* x = static_cast<const amqp_basic_ack_t*>(d);
      return Value(Map{{Value("delivery_tag"), uint(x->delivery_tag)}, {Value("multiple"), flag(x->multiple)}});
    }
    case AMQP_BASIC_NACK_METHOD: {
      const auto* x = static_cast<const amqp_basic_nack_t*>(d);
      return Value(Map{{Value("delivery_tag"), uint(x->delivery_tag)},
                       {Value("multiple"), flag(x->multiple)},
                       {Value("requeue"), flag(x->requeue)}});
    }
    case AMQP_BASIC_CANCEL_METHOD: {
      const auto* x = static_cast<const amqp_basic_cancel_t*>(d);
      return Value(Map{{Value("consumer_tag"), str(x->consumer_tag)}, {Value("nowait"), flag(x->nowait)}});
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
      const auto* x = static_cast<const amqp_channel_close_t*>(d);
      return Value(Map{{Value("reply_code"), uint(x->reply_code)},
                       {Value("reply_text"), str(x->reply_text)},
                       {Value("class_id"), uint(x->class_id)},
                       {Value("method_id"), uint(x->method_id)}});
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
      const auto* x = static_cast<const amqp_connection_close_t*>(d);
      return Value(Map{{Value("reply_code"), uint(x->reply_code)},
                       {Value("reply_text"), str(x->reply_text)},
                       {Value("class_id"), uint(x->class_id)},
                       {Value("method_id"), uint(x->method_id)}});
    }
    case AMQP_QUEUE_DECLARE_OK_METHOD: {
      const auto* x = static_cast<const amqp_queue_declare_ok_t*>(d);
      return Value(Map{{Value("queue"), str(x->queue)},
                       {Value("message_count"), uint(x->message_count)},
                       {Value("consumer_count"), uint(x->consumer_count)}});
    }
    case AMQP_BASIC_CONSUME_OK_METHOD: {
      const auto* x = static_cast<const amqp_basic_consume_ok_t*>(d);
      return Value(Map{{Value("consumer_tag"), str(x->consumer_tag)}});
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
      const auto* x = static_cast<const amqp_connection_blocked_t*>(d);
      return Value(Map{{Value("reason"), str(x->reason)}});
    }
    default: return Value(Map{});
  }
}

bool has_content(amqp_method_number_t id) {
  return id == AMQP_BASIC_DELIVER_METHOD || id == AMQP_BASIC_GET_OK_METHOD || id == AMQP_BASIC_RETURN_METHOD;
}

std::uint64_t code_of(const Value& fields) {
  const Value* v = find(*fields.get_if<Map>(), "reply_code");
  return v && v->is<std::uint64_t>() ? *v->get_if<std::uint64_t>() : 0;
}

std::string text_field(const Value& fields, const char* key) {
  const auto* map = fields.get_if<Map>();
  const Value* v = map ? find(*map, key) : nullptr;
  return v && v->is<std::string>() ? *v->get_if<std::string>() : "";
}

timeval timeval_until(Clock::time_point deadline) {
  const auto left = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count());
  return timeval{static_cast<time_t>(left / 1'000'000), static_cast<suseconds_t>(left % 1'000'000)};
}

Bytes body_of(const Json& args) {
  if (!args.contains("body")) return {};
  const Json& b = args.at("body");
  if (b.is_string()) {
    const std::string text = b.get<std::string>();
    return Bytes(text.begin(), text.end());
  }
  if (b.is_object() && b.contains("hex")) return from_hex(b.at("hex").get<std::string>()).value_or(Bytes{});
  if (b.is_object() && b.contains("size")) {
    return Bytes(b.at("size").get<std::size_t>() + b.value("add", std::size_t{0}), 0x5a);
  }
  return {};
}

}  // namespace

// One thing the broker sent on an AMQP connection: a method, with its content when it has one.
struct AmqpEvent {
  enum class Kind { method, closed, timeout } kind = Kind::timeout;
  std::uint16_t channel = 0;
  std::string method;
  Value fields;
  std::optional<Value> properties;
  Bytes body;
  std::string detail;  // closed: how
};

struct AmqpSide::Conn {
  std::string name;
  amqp_connection_state_t state = nullptr;
  bool open = false;  // the socket is usable: not closed by the broker or by the case

  ~Conn() {
    if (state == nullptr) return;
    if (open) {
      // A short, bounded goodbye: the broker answers close-ok at once when it is alive.
      timeval tv{0, 500'000};
      amqp_set_rpc_timeout(state, &tv);
      amqp_connection_close(state, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(state);
  }
};

namespace {

// The next frame, or why none came by `deadline`.
int wait_frame(amqp_connection_state_t state, amqp_frame_t& frame, Clock::time_point deadline) {
  timeval tv = timeval_until(deadline);
  return amqp_simple_wait_frame_noblock(state, &frame, &tv);
}

std::string library_error(int status) { return amqp_error_string2(status); }

// The content (header and body frames) that follows a method on `channel`.
IoStatus read_content(amqp_connection_state_t state, std::uint16_t channel, AmqpEvent& event,
                      Clock::time_point deadline) {
  amqp_frame_t frame;
  int status = wait_frame(state, frame, deadline);
  if (status != AMQP_STATUS_OK)
    return "waiting for the content header of " + event.method + ": " + library_error(status);
  if (frame.frame_type != AMQP_FRAME_HEADER || frame.channel != channel) {
    return "expected the content header of " + event.method + ", got a frame of type " +
           std::to_string(frame.frame_type);
  }
  const std::size_t size = frame.payload.properties.body_size;
  event.properties = value_of_properties(*static_cast<amqp_basic_properties_t*>(frame.payload.properties.decoded));
  while (event.body.size() < size) {
    status = wait_frame(state, frame, deadline);
    if (status != AMQP_STATUS_OK) return "waiting for the body of " + event.method + ": " + library_error(status);
    if (frame.frame_type != AMQP_FRAME_BODY || frame.channel != channel) {
      return "expected a body frame of " + event.method + ", got a frame of type " + std::to_string(frame.frame_type);
    }
    const auto* p = static_cast<const std::uint8_t*>(frame.payload.body_fragment.bytes);
    event.body.insert(event.body.end(), p, p + frame.payload.body_fragment.len);
  }
  return IoStatus::done();
}

// Answers the broker's channel.close or connection.close, as a client must.
void answer_close(amqp_connection_state_t state, std::uint16_t channel, bool connection) {
  if (connection) {
    amqp_connection_close_ok_t ok{};
    amqp_send_method(state, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
  } else {
    amqp_channel_close_ok_t ok{};
    amqp_send_method(state, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
  }
}

// The next method the broker sends (heartbeats skipped), with its content; a close is answered.
AmqpEvent next_event(AmqpSide::Conn& c, Clock::time_point deadline) {
  AmqpEvent event;
  while (true) {
    amqp_frame_t frame;
    const int status = wait_frame(c.state, frame, deadline);
    if (status == AMQP_STATUS_TIMEOUT) return event;
    if (status != AMQP_STATUS_OK) {
      c.open = false;
      event.kind = AmqpEvent::Kind::closed;
      event.detail = library_error(status);
      return event;
    }
    if (frame.frame_type == AMQP_FRAME_HEARTBEAT) continue;
    if (frame.frame_type != AMQP_FRAME_METHOD) {
      event.kind = AmqpEvent::Kind::method;
      event.method = "a content frame without its method (type " + std::to_string(frame.frame_type) + ")";
      return event;
    }
    event.kind = AmqpEvent::Kind::method;
    event.channel = frame.channel;
    event.method = method_name(frame.payload.method.id);
    event.fields = fields_of(frame.payload.method);
    const amqp_method_number_t id = frame.payload.method.id;
    if (id == AMQP_CHANNEL_CLOSE_METHOD) answer_close(c.state, frame.channel, false);
    if (id == AMQP_CONNECTION_CLOSE_METHOD) {
      answer_close(c.state, 0, true);
      c.open = false;
    }
    if (has_content(id)) {
      auto content = read_content(c.state, frame.channel, event, deadline);
      if (!content) event.detail = content.error();
    }
    return event;
  }
}

std::string describe(const AmqpEvent& e) {
  switch (e.kind) {
    case AmqpEvent::Kind::timeout: return "nothing";
    case AmqpEvent::Kind::closed: return "the connection closed (" + e.detail + ")";
    case AmqpEvent::Kind::method: break;
  }
  std::string text = e.method + " on channel " + std::to_string(e.channel) + " " + show(&e.fields);
  if (e.properties) text += " properties " + show(&*e.properties);
  if (!e.body.empty() || e.properties) text += " body " + std::to_string(e.body.size()) + " bytes";
  return text;
}

}  // namespace

Result<AmqpEndpoint, std::string> parse_amqp_url(const std::string& text, const TlsOptions& tls) {
  const bool amqps = text.starts_with("amqps://");
  if (!amqps && !text.starts_with("amqp://")) return std::string("an AMQP URL starts with amqp:// or amqps://");
  // The same shape as fire://: parsed as one, with AMQP's default port when none is given.
  const std::string rest = text.substr(text.find("://") + 3);
  auto url = parse_url("fire://" + rest);
  if (!url) return url.error();
  const std::string authority = rest.substr(0, rest.find('/'));
  const bool has_port = authority.find(':', authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@')) !=
                            std::string::npos &&
                        !authority.ends_with("]");
  const std::uint16_t default_port = amqps ? 5671 : 5672;  // RabbitMQ's and the reference broker's
  return AmqpEndpoint{url->host, has_port ? url->port : default_port, url->user, url->password, url->vhost, amqps, tls};
}

// Opens rabbitmq-c's socket to `endpoint`: TCP, or TLS for amqps with the certificate checked as its options say
// (the CA file, or the system's; --insecure checks nothing).
IoStatus open_amqp_socket(amqp_connection_state_t state, const AmqpEndpoint& endpoint, timeval& tv) {
  amqp_socket_t* socket = endpoint.tls ? amqp_ssl_socket_new(state) : amqp_tcp_socket_new(state);
  if (socket == nullptr) return "rabbitmq-c could not make a socket";
  if (endpoint.tls) {
    const TlsOptions& tls = endpoint.tls_options;
    if (!tls.ca_file.empty()) {
      if (int status = amqp_ssl_socket_set_cacert(socket, tls.ca_file.c_str()); status != AMQP_STATUS_OK) {
        return "cannot read the CA file " + tls.ca_file + ": " + library_error(status);
      }
    }
    amqp_ssl_socket_set_verify_peer(socket, tls.insecure ? 0 : 1);
    amqp_ssl_socket_set_verify_hostname(socket, tls.insecure ? 0 : 1);
  }
  if (int status = amqp_socket_open_noblock(socket, endpoint.host.c_str(), endpoint.port, &tv);
      status != AMQP_STATUS_OK) {
    return std::string("cannot reach ") + (endpoint.tls ? "amqps " : "") + endpoint.host + ":" +
           std::to_string(endpoint.port) + ": " + library_error(status);
  }
  return IoStatus::done();
}

// The steps ------------------------------------------------------------------------------------------------------

const std::vector<std::string>& amqp_step_verbs() {
  static const std::vector<std::string> verbs = {
      "amqp_open",        "amqp_channel",         "amqp_declare_queue", "amqp_declare_exchange",
      "amqp_bind",        "amqp_delete_queue",    "amqp_publish",       "amqp_confirm_select",
      "amqp_qos",         "amqp_consume",         "amqp_cancel",        "amqp_get",
      "amqp_expect",      "amqp_expect_none",     "amqp_ack",           "amqp_nack",
      "amqp_reject",      "amqp_close",           "amqp_tx_select",     "amqp_tx_commit",
      "amqp_tx_rollback", "amqp_delete_exchange", "amqp_unbind",        "amqp_channel_close"};
  return verbs;
}

Result<AmqpServer, std::string> probe_amqp(const AmqpEndpoint& endpoint) {
  amqp_connection_state_t state = amqp_new_connection();
  struct Closer {  // however the probe ends, the connection is closed and freed
    amqp_connection_state_t state;
    bool logged_in = false;
    ~Closer() {
      if (logged_in) amqp_connection_close(state, AMQP_REPLY_SUCCESS);
      amqp_destroy_connection(state);
    }
  } closer{state};
  timeval tv = timeval_until(Clock::now() + std::chrono::seconds(5));
  if (IoStatus opened = open_amqp_socket(state, endpoint, tv); !opened) return opened.error();
  amqp_set_handshake_timeout(state, &tv);
  amqp_set_rpc_timeout(state, &tv);
  const amqp_rpc_reply_t login = amqp_login(state, endpoint.vhost.c_str(), 0, kDefaultFrameMax, 0,
                                            AMQP_SASL_METHOD_PLAIN, endpoint.user.c_str(), endpoint.password.c_str());
  if (login.reply_type != AMQP_RESPONSE_NORMAL) {
    return "the AMQP handshake of vhost '" + endpoint.vhost + "' as '" + endpoint.user + "' failed (" +
           (login.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION ? library_error(login.library_error)
                                                                : std::string("the server closed the connection")) +
           ")";
  }
  closer.logged_in = true;
  // connection.start's server-properties: RabbitMQ's product and version, as the welcome's server name.
  AmqpServer server;
  const amqp_table_t* properties = amqp_get_server_properties(state);
  for (int i = 0; properties != nullptr && i < properties->num_entries; ++i) {
    const amqp_table_entry_t& e = properties->entries[i];
    if (e.value.kind != AMQP_FIELD_KIND_UTF8 && e.value.kind != AMQP_FIELD_KIND_BYTES) continue;
    if (text_of(e.key) == "product") server.product = text_of(e.value.value.bytes);
    if (text_of(e.key) == "version") server.version = text_of(e.value.value.bytes);
  }
  return server;
}

namespace {

// Everything a step needs, for the duration of the step.
struct StepContext {
  Scenario& scenario;
  AmqpSide::Conn& conn;
  const Json& args;
  std::uint16_t channel;
  Arena arena;

  Clock::time_point deadline(int default_ms = kDefaultWithinMs) const {
    return scenario.deadline_after(args, "within_ms", default_ms);
  }
  void note(const std::string& text) { scenario.note(conn.name, text); }
  void set_rpc_timeout() {
    timeval tv = timeval_until(deadline());
    amqp_set_rpc_timeout(conn.state, &tv);
  }
};

// How the broker answered a synchronous method: its reply, or a channel.close / connection.close (answered),
// which the step expects when it says "expect_close": code (or a list).
StepOutcome judge_reply(StepContext& s, const std::string& what, const amqp_rpc_reply_t& reply) {
  const Json* expected = s.args.contains("expect_close") ? &s.args.at("expect_close") : nullptr;
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
    s.note("sent " + what + ", got its reply");
    if (expected)
      return StepOutcome::fail(what + ": expected a close with " + expected->dump() + ", got the method's reply");
    return StepOutcome::ok();
  }
  if (reply.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) {
    const std::string why = reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION ? library_error(reply.library_error)
                                                                                : "no reply";
    // After a timeout rabbitmq-c's state is undefined (a late reply could be read as the next step's): the
    // connection is not used again, as after any other library error.
    s.conn.open = false;
    if (reply.library_error == AMQP_STATUS_TIMEOUT) return StepOutcome::fail(what + ": no reply in time");
    return StepOutcome::fail(what + ": " + why);
  }
  const bool connection = reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD;
  const Value fields = fields_of(reply.reply);
  answer_close(s.conn.state, s.channel, connection);
  if (connection) s.conn.open = false;
  const std::string got = std::string(connection ? "connection.close " : "channel.close ") +
                          std::to_string(code_of(fields)) + " (" + text_field(fields, "reply_text") + ")";
  s.note("sent " + what + ", got " + got);
  if (!expected) return StepOutcome::fail(what + ": the broker answered " + got);
  const auto codes = codes_of(*expected);
  if (std::find(codes.begin(), codes.end(), code_of(fields)) == codes.end()) {
    return StepOutcome::fail(what + ": expected a close with " + expected->dump() + ", got " + got);
  }
  return StepOutcome::ok();
}

StepOutcome judge_rpc(StepContext& s, const std::string& what) {
  return judge_reply(s, what, amqp_get_rpc_reply(s.conn.state));
}

Result<amqp_table_t, std::string> arguments_of(StepContext& s, const char* key = "arguments") {
  if (!s.args.contains(key)) return amqp_empty_table;
  return table_from_json(s.args.at(key), s.arena, key);
}

amqp_bytes_t text_arg(StepContext& s, const char* key, const std::string& fallback = "") {
  return s.arena.text(s.args.value(key, fallback));
}

// Matches an event against the step's "method", "channel", "fields", "properties" and "body".
StepOutcome match_event(StepContext& s, const AmqpEvent& e) {
  if (e.kind != AmqpEvent::Kind::method) return StepOutcome::fail("got " + describe(e));
  if (!e.detail.empty()) return StepOutcome::fail(e.method + ": " + e.detail);
  const std::string want = s.args.value("method", "");
  if (!want.empty() && e.method != want) return StepOutcome::fail("expected " + want + ", got " + describe(e));
  if (e.channel != s.channel && e.method != "connection.close") {
    return StepOutcome::fail("expected it on channel " + std::to_string(s.channel) + ", got " + describe(e));
  }
  Vars& vars = s.scenario.vars();
  if (s.args.contains("fields")) {
    if (std::string m = match_value(s.args.at("fields"), &e.fields, e.method, vars); !m.empty())
      return StepOutcome::fail(m);
  }
  if (s.args.contains("properties")) {
    const Value none(Map{});
    const Value& props = e.properties ? *e.properties : none;
    if (std::string m = match_value(s.args.at("properties"), &props, "properties", vars); !m.empty())
      return StepOutcome::fail(m);
  }
  if (s.args.contains("body") && body_of(s.args) != e.body) {
    return StepOutcome::fail(
        e.method + ": expected the body " + s.args.at("body").dump() + ", got " + std::to_string(e.body.size()) +
        " bytes \"" + std::string(e.body.begin(), e.body.begin() + std::min<std::size_t>(e.body.size(), 60)) + "\"");
  }
  return StepOutcome::ok();
}

StepOutcome step_open(Scenario& scenario, AmqpSide::Conn& c, const AmqpEndpoint& endpoint, const Json& args) {
  const auto deadline = scenario.deadline_after(args, "within_ms", 5000);
  c.state = amqp_new_connection();
  timeval tv = timeval_until(deadline);
  if (IoStatus opened = open_amqp_socket(c.state, endpoint, tv); !opened) {
    return StepOutcome::error("the AMQP listener: " + opened.error());
  }
  c.open = true;
  amqp_set_handshake_timeout(c.state, &tv);
  amqp_set_rpc_timeout(c.state, &tv);
  const std::string vhost = args.value("vhost", endpoint.vhost);
  const std::string user = args.value("user", endpoint.user);
  const std::string pass = args.value("pass", endpoint.password);
  StepContext s{scenario, c, args, 0, {}};
  // The capabilities clients such as pika and the Java client announce, beside rabbitmq-c's own: with
  // consumer_cancel_notify a consumer whose queue is deleted is told with basic.cancel; with connection.blocked
  // a publisher is told when a resource alarm stops the broker reading it.
  amqp_table_entry_t capability[2] = {{amqp_cstring_bytes("consumer_cancel_notify"), {}},
                                      {amqp_cstring_bytes("connection.blocked"), {}}};
  for (amqp_table_entry_t& entry : capability) {
    entry.value.kind = AMQP_FIELD_KIND_BOOLEAN;
    entry.value.value.boolean = 1;
  }
  amqp_table_entry_t capabilities{amqp_cstring_bytes("capabilities"), {}};
  capabilities.value.kind = AMQP_FIELD_KIND_TABLE;
  capabilities.value.value.table = {2, capability};
  const amqp_table_t client_properties{1, &capabilities};
  const amqp_rpc_reply_t login = amqp_login_with_properties(c.state, vhost.c_str(), 0,
                                                            args.value("frame_max", kDefaultFrameMax), 0,
                                                            &client_properties, AMQP_SASL_METHOD_PLAIN, user.c_str(),
                                                            pass.c_str());
  StepOutcome logged_in = judge_reply(s, "connection.open of vhost '" + vhost + "' as '" + user + "'", login);
  if (logged_in.kind != StepOutcome::Kind::ok || args.contains("expect_close")) return logged_in;
  const int channel = args.value("channel", 1);
  if (channel == 0) return StepOutcome::ok();
  s.channel = static_cast<std::uint16_t>(channel);
  amqp_channel_open(c.state, s.channel);
  return judge_rpc(s, "channel.open " + std::to_string(channel));
}

StepOutcome step_declare_queue(StepContext& s) {
  auto arguments = arguments_of(s);
  if (!arguments) return StepOutcome::error(arguments.error());
  const std::string name = s.args.value("queue", "");
  auto* ok = amqp_queue_declare(s.conn.state, s.channel, s.arena.text(name), s.args.value("passive", false),
                                s.args.value("durable", false), s.args.value("exclusive", false),
                                s.args.value("auto_delete", false), *arguments);
  StepOutcome outcome = judge_rpc(s, "queue.declare '" + name + "'");
  if (outcome.kind == StepOutcome::Kind::ok && ok != nullptr && s.args.contains("fields")) {
    const Value fields = fields_of(amqp_method_t{AMQP_QUEUE_DECLARE_OK_METHOD, ok});
    if (std::string m = match_value(s.args.at("fields"), &fields, "queue.declare-ok", s.scenario.vars()); !m.empty()) {
      return StepOutcome::fail(m);
    }
  }
  return outcome;
}

StepOutcome step_declare_exchange(StepContext& s) {
  auto arguments = arguments_of(s);
  if (!arguments) return StepOutcome::error(arguments.error());
  const std::string name = s.args.value("exchange", "");
  amqp_exchange_declare(s.conn.state, s.channel, s.arena.text(name), text_arg(s, "type", "direct"),
                        s.args.value("passive", false), s.args.value("durable", false),
                        s.args.value("auto_delete", false), s.args.value("internal", false), *arguments);
  return judge_rpc(s, "exchange.declare '" + name + "'");
}

StepOutcome step_bind(StepContext& s) {
  auto arguments = arguments_of(s);
  if (!arguments) return StepOutcome::error(arguments.error());
  amqp_queue_bind(s.conn.state, s.channel, text_arg(s, "queue"), text_arg(s, "exchange"), text_arg(s, "key"),
                  *arguments);
  return judge_rpc(s, "queue.bind '" + s.args.value("queue", "") + "' to '" + s.args.value("exchange", "") + "'");
}

StepOutcome step_unbind(StepContext& s) {
  auto arguments = arguments_of(s);
  if (!arguments) return StepOutcome::error(arguments.error());
  amqp_queue_unbind(s.conn.state, s.channel, text_arg(s, "queue"), text_arg(s, "exchange"), text_arg(s, "key"),
                    *arguments);
  return judge_rpc(s, "queue.unbind '" + s.args.value("queue", "") + "' from '" + s.args.value("exchange", "") + "'");
}

StepOutcome step_delete_exchange(StepContext& s) {
  amqp_exchange_delete(s.conn.state, s.channel, text_arg(s, "exchange"), s.args.value("if_unused", false));
  return judge_rpc(s, "exchange.delete '" + s.args.value("exchange", "") + "'");
}

// channel.close from the client, without waiting for its close-ok: the case expects what the broker sends next
// (a close of its own that crossed this one, then the close-ok).
StepOutcome step_channel_close(StepContext& s) {
  amqp_channel_close_t close{};
  close.reply_code = AMQP_REPLY_SUCCESS;
  close.reply_text = amqp_cstring_bytes("closed by the case");
  const int status = amqp_send_method(s.conn.state, s.channel, AMQP_CHANNEL_CLOSE_METHOD, &close);
  s.note("sent channel.close on channel " + std::to_string(s.channel));
  return status == AMQP_STATUS_OK ? StepOutcome::ok() : StepOutcome::fail("channel.close: " + library_error(status));
}

StepOutcome step_delete_queue(StepContext& s) {
  amqp_queue_delete(s.conn.state, s.channel, text_arg(s, "queue"), s.args.value("if_unused", false),
                    s.args.value("if_empty", false));
  return judge_rpc(s, "queue.delete '" + s.args.value("queue", "") + "'");
}

StepOutcome step_publish(StepContext& s) {
  auto props = properties_from_json(s.args.value("properties", Json::object()), s.arena);
  if (!props) return StepOutcome::error(props.error());
  const Bytes body = body_of(s.args);
  const int status = amqp_basic_publish(s.conn.state, s.channel, text_arg(s, "exchange"), text_arg(s, "key"),
                                        s.args.value("mandatory", false), 0, &*props,
                                        amqp_bytes_t{body.size(), const_cast<std::uint8_t*>(body.data())});
  s.note("sent basic.publish to '" + s.args.value("exchange", "") + "' key '" + s.args.value("key", "") + "', " +
         std::to_string(body.size()) + " bytes, properties " + s.args.value("properties", Json::object()).dump());
  if (status != AMQP_STATUS_OK) return StepOutcome::fail("basic.publish: " + library_error(status));
  return StepOutcome::ok();
}

StepOutcome step_confirm_select(StepContext& s) {
  amqp_confirm_select(s.conn.state, s.channel);
  return judge_rpc(s, "confirm.select");
}

// tx.select, tx.commit, tx.rollback: RabbitMQ's transactions (publishes and settlements held until commit).
StepOutcome step_tx(StepContext& s, const std::string& verb) {
  if (verb == "amqp_tx_select") {
    amqp_tx_select(s.conn.state, s.channel);
    return judge_rpc(s, "tx.select");
  }
  if (verb == "amqp_tx_commit") {
    amqp_tx_commit(s.conn.state, s.channel);
    return judge_rpc(s, "tx.commit");
  }
  amqp_tx_rollback(s.conn.state, s.channel);
  return judge_rpc(s, "tx.rollback");
}

StepOutcome step_qos(StepContext& s) {
  amqp_basic_qos(s.conn.state, s.channel, 0, s.args.value("prefetch_count", 0), s.args.value("global", false));
  return judge_rpc(s, "basic.qos");
}

StepOutcome step_consume(StepContext& s) {
  auto arguments = arguments_of(s);
  if (!arguments) return StepOutcome::error(arguments.error());
  const std::string queue = s.args.value("queue", "");
  amqp_basic_consume(s.conn.state, s.channel, s.arena.text(queue), text_arg(s, "consumer_tag"), 0,
                     s.args.value("no_ack", false), s.args.value("exclusive", false), *arguments);
  return judge_rpc(s, "basic.consume '" + queue + "'");
}

StepOutcome step_cancel(StepContext& s) {
  amqp_basic_cancel(s.conn.state, s.channel, text_arg(s, "consumer_tag"));
  return judge_rpc(s, "basic.cancel '" + s.args.value("consumer_tag", "") + "'");
}

// basic.get: get-ok with its content (matched as amqp_expect matches), or get-empty when "empty": true.
StepOutcome step_get(StepContext& s) {
  const std::string queue = s.args.value("queue", "");
  const amqp_rpc_reply_t reply = amqp_basic_get(s.conn.state, s.channel, s.arena.text(queue),
                                                s.args.value("no_ack", false));
  if (reply.reply_type != AMQP_RESPONSE_NORMAL || s.args.contains("expect_close")) {
    return judge_reply(s, "basic.get '" + queue + "'", reply);
  }
  AmqpEvent e;
  e.kind = AmqpEvent::Kind::method;
  e.channel = s.channel;
  e.method = method_name(reply.reply.id);
  e.fields = fields_of(reply.reply);
  if (reply.reply.id == AMQP_BASIC_GET_OK_METHOD) {
    auto content = read_content(s.conn.state, s.channel, e, s.deadline());
    if (!content) return StepOutcome::fail(content.error());
  }
  s.note("sent basic.get '" + queue + "', got " + describe(e));
  if (s.args.value("empty", false)) {
    return e.method == "basic.get-empty" ? StepOutcome::ok()
                                         : StepOutcome::fail("expected basic.get-empty, got " + describe(e));
  }
  if (e.method != "basic.get-ok") return StepOutcome::fail("expected basic.get-ok, got " + describe(e));
  return match_event(s, e);
}

// The next method the broker sends on the step's channel (or a connection.close) must match; methods named in
// "skip" may come first.
StepOutcome step_expect(StepContext& s) {
  const auto deadline = s.deadline();
  const Json skip = s.args.value("skip", Json::array());
  while (true) {
    const AmqpEvent e = next_event(s.conn, deadline);
    if (e.kind == AmqpEvent::Kind::method) s.note("received " + describe(e));
    if (e.kind == AmqpEvent::Kind::method && std::find(skip.begin(), skip.end(), e.method) != skip.end()) continue;
    if (e.kind == AmqpEvent::Kind::timeout) {
      return StepOutcome::fail("expected " + s.args.value("method", std::string("a method")) + " within " +
                               std::to_string(s.args.value("within_ms", kDefaultWithinMs)) + " ms, got nothing");
    }
    return match_event(s, e);
  }
}

StepOutcome step_expect_none(StepContext& s) {
  const auto deadline = s.scenario.deadline_after(s.args, "for_ms", 500);
  const AmqpEvent e = next_event(s.conn, deadline);
  if (e.kind == AmqpEvent::Kind::timeout) return StepOutcome::ok();
  s.note("received " + describe(e));
  return StepOutcome::fail("expected nothing, got " + describe(e));
}

StepOutcome step_settle(StepContext& s, const std::string& verb) {
  const std::uint64_t tag = s.args.value("delivery_tag", std::uint64_t{0});
  const bool multiple = s.args.value("multiple", false);
  const bool requeue = s.args.value("requeue", true);
  int status = AMQP_STATUS_OK;
  if (verb == "amqp_ack") status = amqp_basic_ack(s.conn.state, s.channel, tag, multiple);
  if (verb == "amqp_nack") status = amqp_basic_nack(s.conn.state, s.channel, tag, multiple, requeue);
  if (verb == "amqp_reject") status = amqp_basic_reject(s.conn.state, s.channel, tag, requeue);
  s.note("sent basic." + verb.substr(5) + " delivery_tag " + std::to_string(tag) +
         (verb == "amqp_ack" ? ""
          : requeue          ? " requeue"
                             : " no requeue"));
  return status == AMQP_STATUS_OK ? StepOutcome::ok()
                                  : StepOutcome::fail(verb.substr(5) + ": " + library_error(status));
}

StepOutcome step_channel(StepContext& s) {
  amqp_channel_open(s.conn.state, s.channel);
  return judge_rpc(s, "channel.open " + std::to_string(s.channel));
}

StepOutcome step_close(StepContext& s) {
  s.set_rpc_timeout();
  const amqp_rpc_reply_t reply = amqp_connection_close(s.conn.state, AMQP_REPLY_SUCCESS);
  s.conn.open = false;
  s.note("sent connection.close");
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) return StepOutcome::fail("connection.close got no close-ok");
  return StepOutcome::ok();
}

}  // namespace

AmqpSide::AmqpSide(Scenario& scenario, std::optional<AmqpEndpoint> endpoint)
    : scenario_(scenario), endpoint_(std::move(endpoint)) {}

AmqpSide::~AmqpSide() = default;

void AmqpSide::drop_all() { conns_.clear(); }

StepOutcome AmqpSide::run(const std::string& verb, const Json& args) {
  if (!endpoint_) {
    return StepOutcome::error(
        "the target has no AMQP listener: a case with amqp_* steps must require the feature amqp");
  }
  const std::string name = args.value("conn", "amqp");
  if (verb == "amqp_open") {
    auto c = std::make_unique<Conn>();
    c->name = name;
    conns_[name] = std::move(c);  // a connection of the same name before it is closed
    return step_open(scenario_, *conns_[name], *endpoint_, args);
  }
  auto it = conns_.find(name);
  if (it == conns_.end()) return StepOutcome::error("no AMQP connection named \"" + name + "\": amqp_open it first");
  Conn& c = *it->second;
  if (!c.open) return StepOutcome::fail("the AMQP connection \"" + name + "\" is closed");
  StepContext s{scenario_, c, args, static_cast<std::uint16_t>(args.value("channel", 1)), {}};
  s.set_rpc_timeout();
  static const std::map<std::string, StepOutcome (*)(StepContext&)> kSteps = {
      {"amqp_channel", step_channel},
      {"amqp_declare_queue", step_declare_queue},
      {"amqp_declare_exchange", step_declare_exchange},
      {"amqp_bind", step_bind},
      {"amqp_delete_queue", step_delete_queue},
      {"amqp_publish", step_publish},
      {"amqp_confirm_select", step_confirm_select},
      {"amqp_qos", step_qos},
      {"amqp_consume", step_consume},
      {"amqp_cancel", step_cancel},
      {"amqp_get", step_get},
      {"amqp_expect", step_expect},
      {"amqp_expect_none", step_expect_none},
      {"amqp_close", step_close},
      {"amqp_unbind", step_unbind},
      {"amqp_delete_exchange", step_delete_exchange},
      {"amqp_channel_close", step_channel_close}};
  StepOutcome outcome;
  if (verb == "amqp_ack" || verb == "amqp_nack" || verb == "amqp_reject") {
    outcome = step_settle(s, verb);
  } else if (verb.starts_with("amqp_tx_")) {
    outcome = step_tx(s, verb);
  } else if (auto step = kSteps.find(verb); step != kSteps.end()) {
    outcome = step->second(s);
  } else {
    outcome = StepOutcome::error("unknown verb " + verb);
  }
  amqp_maybe_release_buffers(c.state);
  return outcome;
}

}  // namespace firemq::conform
