// Whether bytes are UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), as MessagePack's
// str and JSON text hold them. The reference decoder takes a str that is not (docs/spec-notes.md); what must be text
// is checked where it becomes text: percent-decoded URL parts (url.h), and the names, keys and arguments the broker
// writes to definitions.json (reference-broker/core/argument_bounds.h).
#pragma once

#include <string_view>

namespace firemq {

bool is_valid_utf8(std::string_view s);

}  // namespace firemq
