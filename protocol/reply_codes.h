// The reply codes of the spec's "Replies / error" table (AMQP reply codes), as data in one place.
//
// `fatal` is whether an error with this code ends the connection. The spec fixes it for 501 (fatal),
// a failed hello's 403 (fatal), 540 and an unknown delivery tag's 406 (not fatal); for the other codes it is
// the reference broker's reading (docs/spec-notes.md, "Which errors are fatal"): the codes AMQP 0-9-1 raises
// as connection exceptions are fatal, those it raises as channel exceptions are not, and 540 and 530 follow
// the spec and RabbitMQ (a refused request, the connection goes on).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/error.h"

namespace firemq {

enum class ReplyCode : std::uint16_t {
  normal = 200,    // close: normal shutdown
  no_route = 312,  // return: a mandatory publish that no queue received
  connection_forced = 320,
  access_refused = 403,
  not_found = 404,
  resource_locked = 405,
  precondition_failed = 406,
  frame_error = 501,
  syntax_error = 502,
  command_invalid = 503,
  resource_error = 506,
  not_allowed = 530,
  not_implemented = 540,
  internal_error = 541,
};

struct ReplyCodeInfo {
  ReplyCode code;
  std::string_view name;     // the spec's name, e.g. "frame-error"
  std::string_view meaning;  // the spec's "Typical cause"
  bool fatal;                // see the note at the top of this file
};

inline constexpr std::array<ReplyCodeInfo, 14> kReplyCodes = {{
    {ReplyCode::normal, "normal", "Normal shutdown (close).", false},
    {ReplyCode::no_route, "no-route", "A mandatory publish that no queue received (return).", false},
    {ReplyCode::connection_forced, "connection-forced", "Server shutting down.", true},
    {ReplyCode::access_refused, "access-refused", "Bad credentials, or no permission for the resource.", false},
    {ReplyCode::not_found, "not-found", "Queue or exchange does not exist.", false},
    {ReplyCode::resource_locked, "resource-locked", "Exclusive queue owned by another connection.", false},
    {ReplyCode::precondition_failed, "precondition-failed",
     "Redeclared with different properties, unknown delivery tag, if_unused or if_empty failed.", false},
    {ReplyCode::frame_error, "frame-error", "Malformed frame. Fatal.", true},
    {ReplyCode::syntax_error, "syntax-error", "Header is not a MessagePack map, or a field has the wrong type.", true},
    {ReplyCode::command_invalid, "command-invalid",
     "Request not allowed in the current state, such as a request before hello.", true},
    {ReplyCode::resource_error, "resource-error", "Server out of a resource.", false},
    {ReplyCode::not_allowed, "not-allowed", "Operation not allowed, such as deleting a built-in exchange.", false},
    {ReplyCode::not_implemented, "not-implemented", "Unknown op or unsupported feature.", false},
    {ReplyCode::internal_error, "internal-error", "Bug in the server.", true},
}};

// The table entry for `code`, or nullptr for a code the spec does not list.
const ReplyCodeInfo* find_reply_code(std::uint16_t code);

// An Error with `code`, its message, and the fatality of the table above.
Error make_error(ReplyCode code, std::string msg, std::uint64_t rid = 0);

}  // namespace firemq
