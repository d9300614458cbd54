// The broker's log lines (stderr), and what makes a peer's bytes safe to put in them.
#pragma once

#include <string>
#include <string_view>

namespace firemq {

// Text a peer chose (a user name, a vhost, a message quoting them), made safe for a log line: at most
// `max_bytes` of it (then "..."), and every byte that is not printable ASCII, and the backslash, written as
// \xNN, so that a peer cannot forge a log line (a newline) or send terminal escapes.
std::string printable(std::string_view peer_text, std::size_t max_bytes = 128);

// One line on stderr: "firemq-broker: " and the text.
void log_line(const std::string& text);

}  // namespace firemq
