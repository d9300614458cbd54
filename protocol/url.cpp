#include "protocol/url.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "protocol/utf8.h"

namespace firemq {
namespace {

struct SchemeInfo {
  std::string_view name;
  std::uint16_t default_port;
  bool tls;
  bool websocket;
};

constexpr std::array<SchemeInfo, 4> kSchemes = {{
    {"fire", 5673, false, false},
    {"fires", 5674, true, false},
    {"ws", 15672, false, true},
    {"wss", 15671, true, true},
}};

constexpr std::string_view kDefaultUser = "guest";
constexpr std::string_view kDefaultPassword = "guest";
constexpr std::string_view kDefaultVhost = "/";
constexpr std::string_view kDefaultEndpoint = "/fire";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const SchemeInfo* find_scheme(std::string_view name) {
  std::string lowered(name);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const SchemeInfo& scheme : kSchemes) {
    if (scheme.name == lowered) return &scheme;
  }
  return nullptr;
}

// The URL cut at its delimiters; nothing decoded yet.
struct UrlParts {
  std::string_view scheme, userinfo, host, port, path, query;
  bool has_userinfo = false;
};

std::optional<std::string> check_characters(std::string_view text) {
  if (text.empty()) return "the URL is empty";
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7f) return "the URL contains a space or a control character";
  }
  if (text.find('#') != std::string_view::npos) return "a fragment ('#...') is not allowed in a connection URL";
  return std::nullopt;
}

std::optional<std::string> split_host_port(std::string_view authority, UrlParts& parts) {
  std::string_view after_host;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return "unterminated IPv6 literal: missing ']'";
    parts.host = authority.substr(1, close - 1);
    after_host = authority.substr(close + 1);
    if (!after_host.empty() && after_host.front() != ':') return "unexpected text after the IPv6 literal";
  } else {
    const std::size_t colon = authority.find(':');
    parts.host = authority.substr(0, colon);
    after_host = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
  }
  if (parts.host.empty()) return "missing host";
  if (!after_host.empty()) parts.port = after_host.substr(1);
  return std::nullopt;
}

std::optional<std::string> split(std::string_view text, UrlParts& parts) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return "missing scheme: a connection URL starts with fire://, fires://, ws:// or wss://";
  }
  parts.scheme = text.substr(0, sep);
  std::string_view rest = text.substr(sep + 3);
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    parts.query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) parts.path = rest.substr(slash);
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    parts.has_userinfo = true;
    parts.userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  return split_host_port(authority, parts);
}

std::optional<std::string> parse_port(std::string_view digits, const SchemeInfo& scheme, Url& url) {
  if (digits.empty()) {
    url.port = scheme.default_port;
    return std::nullopt;
  }
  unsigned long value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return "port '" + std::string(digits) + "' is not a decimal number";
    value = value * 10 + static_cast<unsigned long>(c - '0');
    if (value > 65535) return "port " + std::string(digits) + " is out of range 1..65535";
  }
  if (value == 0) return std::string("port 0 is out of range 1..65535");
  url.port = static_cast<std::uint16_t>(value);
  return std::nullopt;
}

std::optional<std::string> parse_userinfo(const UrlParts& parts, Url& url) {
  url.user = kDefaultUser;
  url.password = kDefaultPassword;
  if (!parts.has_userinfo) return std::nullopt;
  const std::size_t colon = parts.userinfo.find(':');
  auto user = percent_decode(parts.userinfo.substr(0, colon));
  if (!user) return "user name: " + user.error().reason;
  url.user = std::move(*user);
  if (colon == std::string_view::npos) return std::nullopt;
  auto password = percent_decode(parts.userinfo.substr(colon + 1));
  if (!password) return "password: " + password.error().reason;
  url.password = std::move(*password);
  return std::nullopt;
}

// The value of `name` in a query string, or nullopt when absent.
std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return std::nullopt;
}

// fire and fires: "the vhost is the URL path with the leading / removed and percent-decoded; an empty path
// means vhost /."
std::optional<std::string> parse_stream_vhost(const UrlParts& parts, Url& url) {
  const std::string_view encoded = parts.path.empty() ? parts.path : parts.path.substr(1);
  if (encoded.empty()) {
    url.vhost = kDefaultVhost;
    return std::nullopt;
  }
  auto vhost = percent_decode(encoded);
  if (!vhost) return "vhost (the path): " + vhost.error().reason;
  url.vhost = std::move(*vhost);
  return std::nullopt;
}

// ws and wss: "the path is the WebSocket endpoint (/fire when empty) and the vhost is the vhost query
// parameter".
std::optional<std::string> parse_websocket_target(const UrlParts& parts, Url& url) {
  url.path = (parts.path.empty() || parts.path == "/") ? kDefaultEndpoint : parts.path;
  const auto encoded = query_param(parts.query, "vhost");
  if (!encoded || encoded->empty()) {
    url.vhost = kDefaultVhost;
    return std::nullopt;
  }
  auto vhost = percent_decode(*encoded);
  if (!vhost) return "vhost query parameter: " + vhost.error().reason;
  url.vhost = std::move(*vhost);
  return std::nullopt;
}

}  // namespace

Result<std::string, PercentError> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 1 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
    if (high < 0 || low < 0) return PercentError{"'%' is not followed by two hex digits"};
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  if (!is_valid_utf8(out)) return PercentError{"the percent-decoded bytes are not UTF-8"};
  return out;
}

Result<Url, std::string> parse_url(std::string_view text) {
  if (auto bad = check_characters(text)) return *bad;
  UrlParts parts;
  if (auto bad = split(text, parts)) return *bad;
  const SchemeInfo* scheme = find_scheme(parts.scheme);
  if (scheme == nullptr) {
    return "unknown scheme '" + std::string(parts.scheme) + "': expected fire, fires, ws or wss";
  }
  Url url;
  url.scheme = scheme->name;
  url.tls = scheme->tls;
  url.websocket = scheme->websocket;
  url.host = parts.host;
  if (auto bad = parse_userinfo(parts, url)) return *bad;
  if (auto bad = parse_port(parts.port, *scheme, url)) return *bad;
  auto bad = scheme->websocket ? parse_websocket_target(parts, url) : parse_stream_vhost(parts, url);
  if (bad) return *bad;
  return url;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace firemq
