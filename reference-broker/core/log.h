// The broker's log lines (stderr for what went wrong, stdout for the normal course), and what makes a peer's bytes
// safe to put in them. Every line the broker prints goes through here (--help's text aside).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace firemq {

// Text a peer chose (a user name, a vhost, a message quoting them), made safe for a log line: at most
// `max_bytes` of it (then "..."), and every byte that is not printable ASCII, and the backslash, written as
// \xNN, so that a peer cannot forge a log line (a newline) or send terminal escapes.
std::string printable(std::string_view peer_text, std::size_t max_bytes = 128);

// One line on stderr: "firemq-broker: " and the text. What went wrong, or a peer the broker refused.
void log_line(const std::string& text);
// One line on stdout: "firemq-broker: " and the text. What the operator is told in the normal course: the
// listeners, the store's recovery, the alarms, the shutdown.
void log_notice(const std::string& text);

// A refused login, one form for every protocol: "STEP refused (CODE) from ADDRESS, user 'NAME': REASON", with
// the peer's address and the user name it gave (escaped), never its password. STEP is what was refused (FireMQ's
// "hello", AMQP's "AMQP connection.start-ok" or "AMQP connection.open").
void log_refused_login(std::string_view step, int code, const std::optional<std::string>& peer_address,
                       std::string_view user, std::string_view reason);

}  // namespace firemq
