#include "protocol/amqp/methods.h"

#include <array>

#include "protocol/amqp/frame.h"

namespace firemq::amqp {
namespace {

using enum FieldType;

// Field lists, named after their methods. "reserved_1" fields are the spec's deprecated ones (ticket,
// out-of-band, known-hosts, ...): read, kept and written back as zero.
constexpr FieldSpec kConnectionStart[] = {{"version_major", octet},
                                          {"version_minor", octet},
                                          {"server_properties", table},
                                          {"mechanisms", longstr},
                                          {"locales", longstr}};
constexpr FieldSpec kConnectionStartOk[] = {
    {"client_properties", table}, {"mechanism", shortstr}, {"response", longstr}, {"locale", shortstr}};
constexpr FieldSpec kConnectionSecure[] = {{"challenge", longstr}};
constexpr FieldSpec kConnectionSecureOk[] = {{"response", longstr}};
constexpr FieldSpec kConnectionTune[] = {{"channel_max", short_}, {"frame_max", long_}, {"heartbeat", short_}};
constexpr FieldSpec kConnectionOpen[] = {{"virtual_host", shortstr}, {"reserved_1", shortstr}, {"reserved_2", bit}};
constexpr FieldSpec kConnectionOpenOk[] = {{"reserved_1", shortstr}};
constexpr FieldSpec kClose[] = {
    {"reply_code", short_}, {"reply_text", shortstr}, {"class_id", short_}, {"method_id", short_}};
constexpr FieldSpec kConnectionBlocked[] = {{"reason", shortstr}};
constexpr FieldSpec kConnectionUpdateSecret[] = {{"new_secret", longstr}, {"reason", shortstr}};
constexpr FieldSpec kChannelOpen[] = {{"reserved_1", shortstr}};
constexpr FieldSpec kChannelOpenOk[] = {{"reserved_1", longstr}};
constexpr FieldSpec kChannelFlow[] = {{"active", bit}};
constexpr FieldSpec kAccessRequest[] = {{"realm", shortstr}, {"exclusive", bit}, {"passive", bit},
                                        {"active", bit},     {"write", bit},     {"read", bit}};
constexpr FieldSpec kAccessRequestOk[] = {{"reserved_1", short_}};
constexpr FieldSpec kExchangeDeclare[] = {{"reserved_1", short_}, {"exchange", shortstr}, {"type", shortstr},
                                          {"passive", bit},       {"durable", bit},       {"auto_delete", bit},
                                          {"internal", bit},      {"no_wait", bit},       {"arguments", table}};
constexpr FieldSpec kExchangeDelete[] = {
    {"reserved_1", short_}, {"exchange", shortstr}, {"if_unused", bit}, {"no_wait", bit}};
constexpr FieldSpec kExchangeBind[] = {{"reserved_1", short_},    {"destination", shortstr}, {"source", shortstr},
                                       {"routing_key", shortstr}, {"no_wait", bit},          {"arguments", table}};
constexpr FieldSpec kQueueDeclare[] = {{"reserved_1", short_}, {"queue", shortstr}, {"passive", bit},
                                       {"durable", bit},       {"exclusive", bit},  {"auto_delete", bit},
                                       {"no_wait", bit},       {"arguments", table}};
constexpr FieldSpec kQueueDeclareOk[] = {{"queue", shortstr}, {"message_count", long_}, {"consumer_count", long_}};
constexpr FieldSpec kQueueBind[] = {{"reserved_1", short_},    {"queue", shortstr}, {"exchange", shortstr},
                                    {"routing_key", shortstr}, {"no_wait", bit},    {"arguments", table}};
constexpr FieldSpec kQueuePurge[] = {{"reserved_1", short_}, {"queue", shortstr}, {"no_wait", bit}};
constexpr FieldSpec kMessageCount[] = {{"message_count", long_}};
constexpr FieldSpec kQueueDelete[] = {
    {"reserved_1", short_}, {"queue", shortstr}, {"if_unused", bit}, {"if_empty", bit}, {"no_wait", bit}};
constexpr FieldSpec kQueueUnbind[] = {{"reserved_1", short_},
                                      {"queue", shortstr},
                                      {"exchange", shortstr},
                                      {"routing_key", shortstr},
                                      {"arguments", table}};
constexpr FieldSpec kBasicQos[] = {{"prefetch_size", long_}, {"prefetch_count", short_}, {"global", bit}};
constexpr FieldSpec kBasicConsume[] = {{"reserved_1", short_}, {"queue", shortstr}, {"consumer_tag", shortstr},
                                       {"no_local", bit},      {"no_ack", bit},     {"exclusive", bit},
                                       {"no_wait", bit},       {"arguments", table}};
constexpr FieldSpec kConsumerTag[] = {{"consumer_tag", shortstr}};
constexpr FieldSpec kBasicCancel[] = {{"consumer_tag", shortstr}, {"no_wait", bit}};
constexpr FieldSpec kBasicPublish[] = {
    {"reserved_1", short_}, {"exchange", shortstr}, {"routing_key", shortstr}, {"mandatory", bit}, {"immediate", bit}};
constexpr FieldSpec kBasicReturn[] = {
    {"reply_code", short_}, {"reply_text", shortstr}, {"exchange", shortstr}, {"routing_key", shortstr}};
constexpr FieldSpec kBasicDeliver[] = {{"consumer_tag", shortstr},
                                       {"delivery_tag", longlong},
                                       {"redelivered", bit},
                                       {"exchange", shortstr},
                                       {"routing_key", shortstr}};
constexpr FieldSpec kBasicGet[] = {{"reserved_1", short_}, {"queue", shortstr}, {"no_ack", bit}};
constexpr FieldSpec kBasicGetOk[] = {{"delivery_tag", longlong},
                                     {"redelivered", bit},
                                     {"exchange", shortstr},
                                     {"routing_key", shortstr},
                                     {"message_count", long_}};
constexpr FieldSpec kBasicGetEmpty[] = {{"reserved_1", shortstr}};
constexpr FieldSpec kBasicAck[] = {{"delivery_tag", longlong}, {"multiple", bit}};
constexpr FieldSpec kBasicReject[] = {{"delivery_tag", longlong}, {"requeue", bit}};
constexpr FieldSpec kRequeue[] = {{"requeue", bit}};
constexpr FieldSpec kBasicNack[] = {{"delivery_tag", longlong}, {"multiple", bit}, {"requeue", bit}};
constexpr FieldSpec kNoWait[] = {{"no_wait", bit}};

constexpr std::span<const FieldSpec> kEmpty{};

// The 0-9-1 method list, by class: connection 10, channel 20, access 30, exchange 40, queue 50, basic 60,
// confirm 85 (RabbitMQ's extension), tx 90.
constexpr MethodSpec kMethods[] = {
    {method::kConnectionStart, "connection.start", kConnectionStart, false},
    {method::kConnectionStartOk, "connection.start-ok", kConnectionStartOk, false},
    {method::kConnectionSecure, "connection.secure", kConnectionSecure, false},
    {method::kConnectionSecureOk, "connection.secure-ok", kConnectionSecureOk, false},
    {method::kConnectionTune, "connection.tune", kConnectionTune, false},
    {method::kConnectionTuneOk, "connection.tune-ok", kConnectionTune, false},
    {method::kConnectionOpen, "connection.open", kConnectionOpen, false},
    {method::kConnectionOpenOk, "connection.open-ok", kConnectionOpenOk, false},
    {method::kConnectionClose, "connection.close", kClose, false},
    {method::kConnectionCloseOk, "connection.close-ok", kEmpty, false},
    {method::kConnectionBlocked, "connection.blocked", kConnectionBlocked, false},
    {method::kConnectionUnblocked, "connection.unblocked", kEmpty, false},
    {method::kConnectionUpdateSecret, "connection.update-secret", kConnectionUpdateSecret, false},
    {method::kConnectionUpdateSecretOk, "connection.update-secret-ok", kEmpty, false},
    {method::kChannelOpen, "channel.open", kChannelOpen, false},
    {method::kChannelOpenOk, "channel.open-ok", kChannelOpenOk, false},
    {method::kChannelFlow, "channel.flow", kChannelFlow, false},
    {method::kChannelFlowOk, "channel.flow-ok", kChannelFlow, false},
    {method::kChannelClose, "channel.close", kClose, false},
    {method::kChannelCloseOk, "channel.close-ok", kEmpty, false},
    {method::kAccessRequest, "access.request", kAccessRequest, false},
    {method::kAccessRequestOk, "access.request-ok", kAccessRequestOk, false},
    {method::kExchangeDeclare, "exchange.declare", kExchangeDeclare, false},
    {method::kExchangeDeclareOk, "exchange.declare-ok", kEmpty, false},
    {method::kExchangeDelete, "exchange.delete", kExchangeDelete, false},
    {method::kExchangeDeleteOk, "exchange.delete-ok", kEmpty, false},
    {method::kExchangeBind, "exchange.bind", kExchangeBind, false},
    {method::kExchangeBindOk, "exchange.bind-ok", kEmpty, false},
    {method::kExchangeUnbind, "exchange.unbind", kExchangeBind, false},
    {method::kExchangeUnbindOk, "exchange.unbind-ok", kEmpty, false},
    {method::kQueueDeclare, "queue.declare", kQueueDeclare, false},
    {method::kQueueDeclareOk, "queue.declare-ok", kQueueDeclareOk, false},
    {method::kQueueBind, "queue.bind", kQueueBind, false},
    {method::kQueueBindOk, "queue.bind-ok", kEmpty, false},
    {method::kQueuePurge, "queue.purge", kQueuePurge, false},
    {method::kQueuePurgeOk, "queue.purge-ok", kMessageCount, false},
    {method::kQueueDelete, "queue.delete", kQueueDelete, false},
    {method::kQueueDeleteOk, "queue.delete-ok", kMessageCount, false},
    {method::kQueueUnbind, "queue.unbind", kQueueUnbind, false},
    {method::kQueueUnbindOk, "queue.unbind-ok", kEmpty, false},
    {method::kBasicQos, "basic.qos", kBasicQos, false},
    {method::kBasicQosOk, "basic.qos-ok", kEmpty, false},
    {method::kBasicConsume, "basic.consume", kBasicConsume, false},
    {method::kBasicConsumeOk, "basic.consume-ok", kConsumerTag, false},
    {method::kBasicCancel, "basic.cancel", kBasicCancel, false},
    {method::kBasicCancelOk, "basic.cancel-ok", kConsumerTag, false},
    {method::kBasicPublish, "basic.publish", kBasicPublish, true},
    {method::kBasicReturn, "basic.return", kBasicReturn, true},
    {method::kBasicDeliver, "basic.deliver", kBasicDeliver, true},
    {method::kBasicGet, "basic.get", kBasicGet, false},
    {method::kBasicGetOk, "basic.get-ok", kBasicGetOk, true},
    {method::kBasicGetEmpty, "basic.get-empty", kBasicGetEmpty, false},
    {method::kBasicAck, "basic.ack", kBasicAck, false},
    {method::kBasicReject, "basic.reject", kBasicReject, false},
    {method::kBasicRecoverAsync, "basic.recover-async", kRequeue, false},
    {method::kBasicRecover, "basic.recover", kRequeue, false},
    {method::kBasicRecoverOk, "basic.recover-ok", kEmpty, false},
    {method::kBasicNack, "basic.nack", kBasicNack, false},
    {method::kConfirmSelect, "confirm.select", kNoWait, false},
    {method::kConfirmSelectOk, "confirm.select-ok", kEmpty, false},
    {method::kTxSelect, "tx.select", kEmpty, false},
    {method::kTxSelectOk, "tx.select-ok", kEmpty, false},
    {method::kTxCommit, "tx.commit", kEmpty, false},
    {method::kTxCommitOk, "tx.commit-ok", kEmpty, false},
    {method::kTxRollback, "tx.rollback", kEmpty, false},
    {method::kTxRollbackOk, "tx.rollback-ok", kEmpty, false},
};

Arg zero_of(FieldType type) {
  switch (type) {
    case bit: return false;
    case shortstr:
    case longstr: return std::string();
    case table: return FieldTable();
    default: return std::uint64_t{0};
  }
}

std::uint64_t as_number(const Arg& a) {
  if (const auto* n = std::get_if<std::uint64_t>(&a)) return *n;
  if (const auto* b = std::get_if<bool>(&a)) return *b ? 1 : 0;
  return 0;
}

Error syntax_error(const MethodSpec& spec, std::string msg) {
  return connection_error(502, std::string(spec.name) + ": " + msg);
}

// The fields of one method, bits packed: a run of bit fields shares octets, lowest bit first.
Status read_fields(WireReader& in, const MethodSpec& spec, std::vector<Arg>& args) {
  std::uint8_t bits = 0;
  int bit_index = 8;  // 8: no octet of bits open
  for (std::size_t i = 0; i < spec.fields.size(); ++i) {
    const FieldType type = spec.fields[i].type;
    if (type != bit) bit_index = 8;
    if (type == bit) {
      if (bit_index == 8) bits = in.u8(), bit_index = 0;
      args[i] = ((bits >> bit_index++) & 1) != 0;
      continue;
    }
    Status table_error;
    args[i] = read_field(in, type, table_error);
    if (table_error) return syntax_error(spec, std::string(spec.fields[i].name) + ": " + table_error->msg);
  }
  if (in.failed()) return syntax_error(spec, "truncated: its fields need more bytes than the frame has");
  if (!in.at_end()) return syntax_error(spec, std::to_string(in.remaining()) + " bytes after its last field");
  return std::nullopt;
}

}  // namespace

std::span<const MethodSpec> method_table() { return kMethods; }

const MethodSpec* find_method(MethodId id) {
  for (const MethodSpec& m : kMethods) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

Arg read_field(WireReader& in, FieldType type, Status& table_error) {
  switch (type) {
    case bit: return in.u8() != 0;
    case octet: return std::uint64_t{in.u8()};
    case short_: return std::uint64_t{in.u16()};
    case long_: return std::uint64_t{in.u32()};
    case longlong:
    case timestamp: return in.u64();
    case shortstr: return in.shortstr();
    case longstr: return in.longstr();
    case table: {
      auto t = read_table(in);
      if (!t) {
        table_error = t.error();
        return FieldTable();
      }
      return std::move(*t);
    }
  }
  return false;
}

void write_field(WireWriter& out, FieldType type, const Arg& value) {
  switch (type) {
    case bit:
    case octet: out.u8(static_cast<std::uint8_t>(as_number(value))); break;
    case short_: out.u16(static_cast<std::uint16_t>(as_number(value))); break;
    case long_: out.u32(static_cast<std::uint32_t>(as_number(value))); break;
    case longlong:
    case timestamp: out.u64(as_number(value)); break;
    case shortstr:
    case longstr: {
      const auto* s = std::get_if<std::string>(&value);
      const std::string_view text = s ? std::string_view(*s) : std::string_view();
      type == shortstr ? out.shortstr(text) : out.longstr(text);
      break;
    }
    case table: {
      const auto* t = std::get_if<FieldTable>(&value);
      write_table(out, t ? *t : FieldTable());
      break;
    }
  }
}

Method::Method(const MethodSpec& spec) : spec_(&spec) {
  args_.reserve(spec.fields.size());
  for (const FieldSpec& f : spec.fields) args_.push_back(zero_of(f.type));
}

Method Method::of(MethodId id) { return Method(*find_method(id)); }

const Arg* Method::find(std::string_view field) const {
  for (std::size_t i = 0; i < spec_->fields.size(); ++i) {
    if (spec_->fields[i].name == field) return &args_[i];
  }
  return nullptr;
}

bool Method::flag(std::string_view field) const {
  const Arg* a = find(field);
  return a != nullptr && as_number(*a) != 0;
}

std::uint64_t Method::number(std::string_view field) const {
  const Arg* a = find(field);
  return a ? as_number(*a) : 0;
}

const std::string& Method::text(std::string_view field) const {
  static const std::string kEmptyText;
  const Arg* a = find(field);
  const auto* s = a ? std::get_if<std::string>(a) : nullptr;
  return s ? *s : kEmptyText;
}

const FieldTable& Method::table(std::string_view field) const {
  static const FieldTable kEmptyTable;
  const Arg* a = find(field);
  const auto* t = a ? std::get_if<FieldTable>(a) : nullptr;
  return t ? *t : kEmptyTable;
}

Method& Method::set(std::string_view field, Arg value) {
  if (const Arg* a = find(field)) args_[static_cast<std::size_t>(a - args_.data())] = std::move(value);
  return *this;
}

Result<Method> decode_method(ByteView payload) {
  WireReader in(payload);
  const MethodId id{in.u16(), in.u16()};
  if (in.failed())
    return connection_error(502, "method frame of " + std::to_string(payload.size()) +
                                     " bytes is too short for a class and method id");
  const MethodSpec* spec = find_method(id);
  if (spec == nullptr) {
    return connection_error(540, "unknown method: class " + std::to_string(id.class_id) + ", method " +
                                     std::to_string(id.method_id));
  }
  Method m(*spec);
  if (Status bad = read_fields(in, *spec, m.args())) return *bad;
  return m;
}

Bytes encode_method(const Method& m) {
  Bytes out;
  WireWriter w(out);
  w.u16(m.id().class_id);
  w.u16(m.id().method_id);
  const auto& fields = m.spec().fields;
  std::size_t bits_at = 0;
  int bit_index = 8;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].type != bit) {
      bit_index = 8;
      write_field(w, fields[i].type, m.args()[i]);
      continue;
    }
    if (bit_index == 8) bits_at = out.size(), w.u8(0), bit_index = 0;
    if (as_number(m.args()[i]) != 0) out[bits_at] |= static_cast<std::uint8_t>(1u << bit_index);
    ++bit_index;
  }
  return out;
}

}  // namespace firemq::amqp
