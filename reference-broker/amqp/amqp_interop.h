// The spec's "Interoperability with AMQP 0-9-1" table, implemented here and nowhere else:
//
//   persistent: true              <->  delivery-mode: 2
//   props.expiration (uint ms)    <->  expiration (decimal string)
//   MessagePack nil, bool, int, float, str, bin, array, map  <->  field table V, t, l, d, S, x, A, F
//   AMQP D (decimal) and T (timestamp)  ->  float and uint
//
// and the properties both protocols share by name (content_type ... app_id, priority, timestamp). Where a value
// has no counterpart the choice is recorded in docs/spec-notes.md ("AMQP 0-9-1 interop"). No I/O.
#pragma once

#include <memory>

#include "protocol/amqp/content.h"
#include "protocol/amqp/field_table.h"
#include "protocol/messages.h"
#include "protocol/value.h"
#include "reference-broker/core/config.h"

namespace firemq {

// Field values: AMQP's exact integer widths become MessagePack ints (signed types to int, unsigned to uint);
// AMQP `f` stays a float32. MessagePack ints become `l` (RabbitMQ's choice for the integers it makes), floats
// `d`, ext `x` (its data).
Value to_firemq_value(const amqp::FieldValue& value);
amqp::FieldValue to_amqp_value(const Value& value);
Map to_firemq_map(const amqp::FieldTable& table);
// A map's non-string keys are written as their text (an int key 5 becomes "5"); other keys have no AMQP name
// and are left out.
amqp::FieldTable to_amqp_table(const Map& map);

// What an AMQP publisher's content header says, in FireMQ's terms.
struct FireMqContent {
  bool persistent = false;
  Props props;
  Map headers;
  std::shared_ptr<const amqp::FieldTable> amqp_headers;  // the headers as sent (MessageParts::amqp_headers), or null
};

// 406 precondition-failed (a channel error, as RabbitMQ) for an expiration that is not a decimal number of ms.
Result<FireMqContent> from_amqp_properties(const amqp::ContentHeader& header);
// Testing only (--amqp-fault): the header made into what a broker broken as `faults` says reads from a
// publisher, or writes to a consumer. Without such faults it is left as it is.
void apply_faults(amqp::ContentHeader& header, const AmqpFaults& faults);
// The content header an AMQP consumer gets for a FireMQ message (deliver, get_ok, return): delivery-mode 2 when
// the message is persistent, and none otherwise (AMQP's default, non-persistent).
// `sent`: the headers as an AMQP publisher sent them (MessageParts::amqp_headers), or null. Each header goes back
// in the type it was sent with while `headers` still holds what that value maps to; one changed or added on the
// way (x-death) goes as the interop table maps it.
amqp::ContentHeader to_amqp_properties(const Props& props, const Map& headers, bool persistent = false,
                                       const amqp::FieldTable* sent = nullptr);

}  // namespace firemq
