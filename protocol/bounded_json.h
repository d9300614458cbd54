// JSON text from outside the process (an HTTP body, a definitions file) parsed under a nesting bound.
// nlohmann's parser itself does not recurse, but nearly everything done with its result does (dump, the Value
// conversions, comparisons), so a document nested 50,000 deep must be refused before it is built: deeper
// elements are discarded as they are read and the text refused as a whole.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/error.h"
#include "protocol/msgpack_codec.h"

namespace firemq {

// A data-directory definitions file writes arguments in typed JSON (typed_json.h), where one level of a map
// may take three JSON levels ({"$map": [[key, value]]}), below four of the file's own (root, list, entry,
// arguments): what the wire's kMaxNesting admits fits within this.
inline constexpr std::size_t kMaxDefinitionsNesting = 3 * kMaxNesting + 4;

// The document `text` holds, or what is wrong with it: "nested deeper than N levels", or nlohmann's syntax
// error with its line and column. Objects and arrays count as levels; the top level is 1.
Result<nlohmann::json, std::string> parse_bounded_json(std::string_view text, std::size_t max_depth);

}  // namespace firemq
