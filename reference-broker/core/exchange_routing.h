// How each exchange type matches a binding (the AMQP model, following RabbitMQ's documented
// behaviour). Pure functions, no state: the unit tests cover their edge cases.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

enum class ExchangeType { direct, fanout, topic, headers };

// "direct", "fanout", "topic", "headers"; nullopt for anything else.
std::optional<ExchangeType> parse_exchange_type(std::string_view name);
std::string_view exchange_type_name(ExchangeType type);

// topic: words split on "."; "" has zero words and "a..b" an empty middle word. "*" matches exactly one word (which
// may be empty); "#" matches zero or more words.
bool topic_matches(std::string_view pattern, std::string_view routing_key);

// headers: the binding's x-match is all (default), any, all-with-x or any-with-x. With all and any, binding keys
// starting with "x-" are ignored. A binding value of nil only checks that the header is present; other values
// compare by value. all with no other keys matches everything; any with no other keys matches nothing.
bool headers_match(const Map& binding_args, const Map& message_headers);

// 406 naming the problem when a headers binding's x-match is not one of the four.
Status check_headers_binding(const Map& binding_args);

// RabbitMQ's sender-selected distribution: the routing keys a message's CC and BCC headers add to its own (arrays
// of strings; other elements are skipped). 406 when either header is there but not an array. Empty for a message
// without them, the common case, which allocates nothing.
Result<std::vector<std::string>> sender_selected_keys(const Map& headers);
// BCC is taken out of the message before it is queued: its receivers stay blind to each other.
void remove_blind_copies(Map& headers);

}  // namespace firemq
