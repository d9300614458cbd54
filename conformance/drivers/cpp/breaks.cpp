#include "breaks.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

namespace firemq::example {
namespace {

constexpr std::pair<const char*, bool Breaks::*> kNames[] = {
    {"seq-from-2", &Breaks::seq_from_2},
    {"no-pong", &Breaks::no_pong},
    {"no-close-reply", &Breaks::no_close_reply},
    {"no-rid", &Breaks::no_rid},
    {"publish-while-paused", &Breaks::publish_while_paused},
    {"no-ping", &Breaks::no_ping},
    {"never-declares-dead", &Breaks::never_declares_dead},
    {"fmq1-on-websocket", &Breaks::fmq1_on_websocket},
    {"no-fmq1", &Breaks::no_fmq1},
    {"close-not-200", &Breaks::close_not_200},
    {"close-without-frame", &Breaks::close_without_frame},
    {"keep-socket-after-close", &Breaks::keep_socket_after_close},
    {"ignore-fatal", &Breaks::ignore_fatal},
    {"same-sub", &Breaks::same_sub},
    {"ack-ignores-multiple", &Breaks::ack_ignores_multiple},
    {"ack-not-sent", &Breaks::ack_not_sent},
    {"ping-every-h", &Breaks::ping_every_h},
    {"upto-confirms-one", &Breaks::upto_confirms_one},
    {"nack-rejects-all", &Breaks::nack_rejects_all},
    {"hello-ver-2", &Breaks::hello_ver_2},
    {"ping-before-hello", &Breaks::ping_before_hello},
    {"caps-as-string", &Breaks::caps_as_string},
    {"huge-hello", &Breaks::huge_hello},
    {"seq-on-unconfirmed", &Breaks::seq_on_unconfirmed},
    {"props-dropped", &Breaks::props_dropped},
    {"headers-as-strings", &Breaks::headers_as_strings},
    {"nack-without-requeue", &Breaks::nack_without_requeue},
    {"get-no-ack-inverted", &Breaks::get_no_ack_inverted},
    {"close-code-as-string", &Breaks::close_code_as_string},
    {"ignores-max-frame", &Breaks::ignores_max_frame},
    {"pong-header-array", &Breaks::pong_header_array},
    {"pong-header-int-key", &Breaks::pong_header_int_key},
    {"split-pong-on-websocket", &Breaks::split_pong_on_websocket},
    {"body-cut", &Breaks::body_cut},
    {"get-empty-as-error", &Breaks::get_empty_as_error},
    {"no-return-event", &Breaks::no_return_event},
    {"unknown-op-is-an-error", &Breaks::unknown_op_is_an_error},
    {"cancelled-ignored", &Breaks::cancelled_ignored},
    {"cancelled-ends-connection", &Breaks::cancelled_ends_connection},
    {"hello-ignores-url-credentials", &Breaks::hello_ignores_url_credentials},
    {"hello-ignores-url-vhost", &Breaks::hello_ignores_url_vhost},
    {"float32-as-float64", &Breaks::float32_as_float64},
    {"little-endian", &Breaks::little_endian},
    {"len-without-op", &Breaks::len_without_op},
    {"hlen-before-op", &Breaks::hlen_before_op},
    {"hlen-zero-refused", &Breaks::hlen_zero_refused},
    {"payload-cut", &Breaks::payload_cut},
    {"payload-on-any-op", &Breaks::payload_on_any_op},
    {"omitted-fields-refused", &Breaks::omitted_fields_refused},
    {"unknown-keys-refused", &Breaks::unknown_keys_refused},
    {"header-only", &Breaks::header_only},
    {"websocket-with-len", &Breaks::websocket_with_len},
    {"limits-ignored", &Breaks::limits_ignored},
    {"url-accepts-amqp", &Breaks::url_accepts_amqp},
    {"url-ignores-userinfo", &Breaks::url_ignores_userinfo},
    {"url-vhost-keeps-slash", &Breaks::url_vhost_keeps_slash},
    {"url-vhost-not-decoded", &Breaks::url_vhost_not_decoded},
    {"url-empty-path-empty-vhost", &Breaks::url_empty_path_empty_vhost},
    {"url-ws-path-always-fire", &Breaks::url_ws_path_always_fire},
    {"url-ws-empty-path-root", &Breaks::url_ws_empty_path_root},
    {"url-ws-vhost-ignored", &Breaks::url_ws_vhost_ignored},
    {"url-no-default-credentials", &Breaks::url_no_default_credentials},
    {"url-default-ports-swapped", &Breaks::url_default_ports_swapped},
};

// Where each frame of a stream starts, as a decoder that reads len with `len_at` finds them (until the bytes end).
template <class LenAt>
std::vector<std::size_t> frame_starts(const Bytes& bytes, LenAt len_at) {
  std::vector<std::size_t> starts;
  for (std::size_t at = 0; at + kMinFrameSize <= bytes.size();) {
    starts.push_back(at);
    const std::uint64_t len = len_at(bytes, at);
    at += kLenSize + len;
  }
  return starts;
}

void reverse4(Bytes& bytes, std::size_t at) {
  if (at + 4 <= bytes.size())
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + 4));
}

// op and hlen swapped: | op | hlen | <-> | hlen | op | at `at` (the part after len).
void hlen_first_to_op_first(Bytes& bytes, std::size_t at) {
  if (at + kFixedSize > bytes.size()) return;
  const std::uint8_t op = bytes[at + 4];
  std::copy_backward(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                     bytes.begin() + static_cast<std::ptrdiff_t>(at + 4),
                     bytes.begin() + static_cast<std::ptrdiff_t>(at + 5));
  bytes[at] = op;
}
void op_first_to_hlen_first(Bytes& bytes, std::size_t at) {
  if (at + kFixedSize > bytes.size()) return;
  const std::uint8_t op = bytes[at];
  std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(at + 1), bytes.begin() + static_cast<std::ptrdiff_t>(at + 5),
            bytes.begin() + static_cast<std::ptrdiff_t>(at));
  bytes[at + 4] = op;
}

// The top-level field names of the op's header, as messages.h lists them.
std::vector<std::string> field_names(const Message& message) {
  std::vector<std::string> names;
  std::visit(
      [&](const auto& m) {
        auto copy = m;
        if constexpr (requires { std::decay_t<decltype(m)>::fields(copy, [](const char*, auto&) {}); }) {
          std::decay_t<decltype(m)>::fields(copy, [&](const char* name, auto&) { names.emplace_back(name); });
        }
      },
      message);
  return names;
}

std::vector<std::string> header_keys(const RawFrame& raw) {
  std::vector<std::string> keys;
  if (raw.header().empty()) return keys;
  auto value = decode_value(raw.header());
  if (!value || !value->is<Map>()) return keys;
  for (const MapEntry& e : *value->get_if<Map>()) {
    if (const auto* key = e.key.get_if<std::string>()) keys.push_back(*key);
  }
  return keys;
}

Error refusal(std::uint16_t code, std::string msg) { return Error{code, std::move(msg), true, 0}; }

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The path of a URL as written: after the authority, before any query or fragment.
std::string raw_path(const std::string& text) {
  const auto authority = text.find("://");
  if (authority == std::string::npos) return "";
  const auto end = text.find_first_of("?#", authority + 3);
  const auto slash = text.find('/', authority + 3);
  if (slash == std::string::npos || slash > end) return "";
  return text.substr(slash, end == std::string::npos ? std::string::npos : end - slash);
}

bool has_userinfo(const std::string& text) {
  const auto authority = text.find("://");
  const auto end = text.find_first_of("/?#", authority == std::string::npos ? 0 : authority + 3);
  return text.substr(0, end).find('@') != std::string::npos;
}

std::uint16_t swapped_default(std::uint16_t port) {
  switch (port) {
    case 5673: return 5674;
    case 5674: return 5673;
    case 15672: return 15671;
    case 15671: return 15672;
    default: return port;
  }
}

}  // namespace

bool set_break(Breaks& breaks, const std::string& name) {
  for (const auto& [n, flag] : kNames) {
    if (name == n) return breaks.*flag = true;
  }
  return false;
}

std::vector<std::string> break_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) names.emplace_back(entry.first);
  return names;
}

Bytes CodecBreaks::as_read(Bytes bytes, bool message_framing) const {
  if (message_framing) {
    if (b_.websocket_with_len)
      bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(kLenSize, bytes.size())));
    if (b_.little_endian) reverse4(bytes, 1);
    if (b_.hlen_before_op) hlen_first_to_op_first(bytes, 0);
    return bytes;
  }
  if (b_.little_endian) {
    for (std::size_t at : frame_starts(bytes, [](const Bytes& b, std::size_t a) {
           return std::uint64_t{b[a]} | std::uint64_t{b[a + 1]} << 8 | std::uint64_t{b[a + 2]} << 16 |
                  std::uint64_t{b[a + 3]} << 24;
         })) {
      reverse4(bytes, at);
      reverse4(bytes, at + kLenSize + 1);
    }
  }
  if (b_.len_without_op) {
    for (std::size_t at :
         frame_starts(bytes, [](const Bytes& b, std::size_t a) { return std::uint64_t{read_u32_be(&b[a])} + 1; })) {
      write_u32_be(&bytes[at], read_u32_be(&bytes[at]) + 1);
    }
  }
  if (b_.hlen_before_op) {
    for (std::size_t at :
         frame_starts(bytes, [](const Bytes& b, std::size_t a) { return std::uint64_t{read_u32_be(&b[a])}; })) {
      hlen_first_to_op_first(bytes, at + kLenSize);
    }
  }
  return bytes;
}

std::size_t CodecBreaks::max_frame(std::size_t asked) const {
  return b_.limits_ignored ? std::numeric_limits<std::uint32_t>::max() : asked;
}

Status CodecBreaks::refuses(const RawFrame& raw, const Message& message) const {
  if (b_.hlen_zero_refused && raw.header().empty()) return refusal(501, "hlen is 0: no header");
  if (b_.header_only && !raw.payload().empty()) return refusal(501, "a payload after the header");
  const std::vector<std::string> fields = field_names(message);
  const std::vector<std::string> keys = header_keys(raw);
  for (const std::string& field : fields) {
    if (b_.omitted_fields_refused && !contains(keys, field)) return refusal(502, "the header has no " + field);
  }
  for (const std::string& key : keys) {
    if (b_.unknown_keys_refused && !contains(fields, key)) return refusal(502, "unknown header key " + key);
  }
  return std::nullopt;
}

std::optional<RawFrame> CodecBreaks::accepts_anyway(const RawFrame& raw) const {
  const OpInfo* info = find_op(raw.op());
  if (!b_.payload_on_any_op || info == nullptr || info->has_payload || raw.payload().empty()) return std::nullopt;
  Bytes body = {raw.op()};
  append_u32_be(body, static_cast<std::uint32_t>(raw.header().size()));
  body.insert(body.end(), raw.header().begin(), raw.header().end());
  return RawFrame(std::move(body));  // the payload dropped, as if the op carried one
}

Bytes CodecBreaks::payload(ByteView payload) const {
  Bytes out(payload.begin(), payload.end());
  if (b_.payload_cut && !out.empty()) out.pop_back();
  return out;
}

Bytes CodecBreaks::as_written(Bytes frame, bool message_framing) const {
  const std::size_t body = message_framing ? 0 : kLenSize;
  if (b_.hlen_before_op) op_first_to_hlen_first(frame, body);
  if (b_.little_endian) {
    if (!message_framing) reverse4(frame, 0);
    reverse4(frame, body + 1);
  }
  if (b_.len_without_op && !message_framing) write_u32_be(frame.data(), read_u32_be(frame.data()) - 1);
  if (b_.websocket_with_len && message_framing) {
    Bytes with_len;
    append_u32_be(with_len, static_cast<std::uint32_t>(frame.size()));
    with_len.insert(with_len.end(), frame.begin(), frame.end());
    return with_len;
  }
  return frame;
}

Value CodecBreaks::keeps(Value v) const {
  if (!b_.float32_as_float64) return v;
  if (const auto* f = v.get_if<float>()) return Value(static_cast<double>(*f));
  if (auto* items = std::get_if<Array>(&v.v)) {
    for (Value& item : *items) item = keeps(std::move(item));
  }
  if (auto* map = std::get_if<Map>(&v.v)) {
    for (MapEntry& e : *map) e = {keeps(std::move(e.key)), keeps(std::move(e.value))};
  }
  return v;
}

Result<Url, std::string> parse_url_with(const Breaks& b, const std::string& text) {
  std::string lower = text.substr(0, 7);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto parsed = parse_url(b.url_accepts_amqp && lower == "amqp://" ? "fire://" + text.substr(7) : text);
  if (!parsed) return parsed.error();
  Url url = *parsed;
  const std::string path = raw_path(text);
  if (b.url_ignores_userinfo) url.user = url.password = "guest";
  if (b.url_no_default_credentials && !has_userinfo(text)) url.user = url.password = "";
  if (!url.websocket) {
    if (b.url_vhost_keeps_slash && url.vhost != "/") url.vhost = "/" + url.vhost;
    if (b.url_vhost_not_decoded && path.size() > 1) url.vhost = path.substr(1);
    if (b.url_empty_path_empty_vhost && path.empty()) url.vhost = "";
  } else {
    if (b.url_ws_path_always_fire) url.path = "/fire";
    if (b.url_ws_empty_path_root && path.empty()) url.path = "/";
    if (b.url_ws_vhost_ignored) url.vhost = "/";
  }
  if (b.url_default_ports_swapped) url.port = swapped_default(url.port);
  return url;
}

}  // namespace firemq::example
