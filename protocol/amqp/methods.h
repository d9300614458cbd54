// The methods of AMQP 0-9-1 as ONE table (class id, method id, name, fields with their types, whether content
// follows), from the 0-9-1 specification's XML (amqp0-9-1.extended.xml, as RabbitMQ generates its framing
// from it). A generic decoder and encoder walk the table; no method is written by hand. Consecutive bit fields
// share octets, lowest bit first (the spec's 4.2.5.2).
//
// Decoding never throws. The errors are connection errors, as RabbitMQ raises them: an unknown class or method
// is 540 not-implemented, a truncated method or trailing bytes 502 syntax-error, a bad field table 502.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/amqp/field_table.h"
#include "protocol/error.h"

namespace firemq::amqp {

enum class FieldType { bit, octet, short_, long_, longlong, shortstr, longstr, timestamp, table };

struct FieldSpec {
  std::string_view name;  // the spec's name with '-' as '_', e.g. "no_wait"
  FieldType type;
};

struct MethodId {
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;
  bool operator==(const MethodId&) const = default;
};

struct MethodSpec {
  MethodId id;
  std::string_view name;  // "basic.publish"
  std::span<const FieldSpec> fields;
  bool has_content;  // a content header and body frames follow (basic.publish, deliver, return, get-ok)
};

// The method table, and the one method of an id (nullptr when 0-9-1 has none).
std::span<const MethodSpec> method_table();
const MethodSpec* find_method(MethodId id);

// A field's value. Every integer width is held as a uint64 (a short's 16 bits, a long's 32); the encoder writes
// the width the table names.
using Arg = std::variant<bool, std::uint64_t, std::string, FieldTable>;

// Reads and writes one field of a type (shared with the content header's properties). Bits are not read here:
// they share octets, which the method decoder packs.
Arg read_field(WireReader& in, FieldType type, Status& table_error);
void write_field(WireWriter& out, FieldType type, const Arg& value);

// A decoded method, or one being built: its spec and one value per field, in the table's order.
class Method {
 public:
  // Every field at its zero value.
  explicit Method(const MethodSpec& spec);
  // Builds a method by id; the id must be in the table (the broker's own methods).
  static Method of(MethodId id);

  const MethodSpec& spec() const { return *spec_; }
  MethodId id() const { return spec_->id; }
  std::string_view name() const { return spec_->name; }

  // A field by name. Asking for a name the method lacks is a bug in the broker, not a peer's error: it returns a
  // zero value (and tests catch it).
  bool flag(std::string_view field) const;
  std::uint64_t number(std::string_view field) const;
  const std::string& text(std::string_view field) const;
  const FieldTable& table(std::string_view field) const;
  Method& set(std::string_view field, Arg value);

  std::vector<Arg>& args() { return args_; }
  const std::vector<Arg>& args() const { return args_; }
  bool operator==(const Method& other) const { return spec_ == other.spec_ && args_ == other.args_; }

 private:
  const Arg* find(std::string_view field) const;

  const MethodSpec* spec_;
  std::vector<Arg> args_;
};

// The payload of a method frame: class id, method id, then the fields.
Result<Method> decode_method(ByteView payload);
Bytes encode_method(const Method& method);

// The ids the broker refers to by name.
namespace method {
inline constexpr MethodId kConnectionStart{10, 10}, kConnectionStartOk{10, 11}, kConnectionSecure{10, 20},
    kConnectionSecureOk{10, 21}, kConnectionTune{10, 30}, kConnectionTuneOk{10, 31}, kConnectionOpen{10, 40},
    kConnectionOpenOk{10, 41}, kConnectionClose{10, 50}, kConnectionCloseOk{10, 51}, kConnectionBlocked{10, 60},
    kConnectionUnblocked{10, 61}, kConnectionUpdateSecret{10, 70}, kConnectionUpdateSecretOk{10, 71};
inline constexpr MethodId kChannelOpen{20, 10}, kChannelOpenOk{20, 11}, kChannelFlow{20, 20}, kChannelFlowOk{20, 21},
    kChannelClose{20, 40}, kChannelCloseOk{20, 41};
inline constexpr MethodId kAccessRequest{30, 10}, kAccessRequestOk{30, 11};
inline constexpr MethodId kExchangeDeclare{40, 10}, kExchangeDeclareOk{40, 11}, kExchangeDelete{40, 20},
    kExchangeDeleteOk{40, 21}, kExchangeBind{40, 30}, kExchangeBindOk{40, 31}, kExchangeUnbind{40, 40},
    kExchangeUnbindOk{40, 51};
inline constexpr MethodId kQueueDeclare{50, 10}, kQueueDeclareOk{50, 11}, kQueueBind{50, 20}, kQueueBindOk{50, 21},
    kQueuePurge{50, 30}, kQueuePurgeOk{50, 31}, kQueueDelete{50, 40}, kQueueDeleteOk{50, 41}, kQueueUnbind{50, 50},
    kQueueUnbindOk{50, 51};
inline constexpr MethodId kBasicQos{60, 10}, kBasicQosOk{60, 11}, kBasicConsume{60, 20}, kBasicConsumeOk{60, 21},
    kBasicCancel{60, 30}, kBasicCancelOk{60, 31}, kBasicPublish{60, 40}, kBasicReturn{60, 50}, kBasicDeliver{60, 60},
    kBasicGet{60, 70}, kBasicGetOk{60, 71}, kBasicGetEmpty{60, 72}, kBasicAck{60, 80}, kBasicReject{60, 90},
    kBasicRecoverAsync{60, 100}, kBasicRecover{60, 110}, kBasicRecoverOk{60, 111}, kBasicNack{60, 120};
inline constexpr MethodId kConfirmSelect{85, 10}, kConfirmSelectOk{85, 11};
inline constexpr MethodId kTxSelect{90, 10}, kTxSelectOk{90, 11}, kTxCommit{90, 20}, kTxCommitOk{90, 21},
    kTxRollback{90, 30}, kTxRollbackOk{90, 31};
}  // namespace method

inline constexpr std::uint16_t kBasicClass = 60;

}  // namespace firemq::amqp
