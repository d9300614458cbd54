#include "reference-broker/access/loopback.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace firemq {
namespace {

constexpr unsigned kMappedPrefixBits = 96;  // ::ffff:0:0/96 holds IPv4

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The non-empty entries of a comma-separated list, without the spaces around them.
std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> parts;
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (std::string_view part = trimmed(list.substr(0, comma)); !part.empty()) parts.push_back(part);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return parts;
}

bool is_ipv4(std::string_view text) { return text.find(':') == std::string_view::npos; }

// The range's prefix length in bits, or nullopt when `text` is not a number up to `max`.
std::optional<unsigned> prefix_bits(std::string_view text, unsigned max) {
  if (text.empty() || text.size() > 3 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const unsigned bits = static_cast<unsigned>(std::stoul(std::string(text)));
  return bits <= max ? std::optional<unsigned>(bits) : std::nullopt;
}

bool matches(const AddressRange& range, const std::array<std::uint8_t, 16>& address) {
  for (unsigned bit = 0; bit < range.bits; ++bit) {
    const std::uint8_t mask = static_cast<std::uint8_t>(0x80u >> (bit % 8));
    if ((range.prefix[bit / 8] & mask) != (address[bit / 8] & mask)) return false;
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The host of an http or https origin ("https://host[:port]", RFC 6454's serialization; an IPv6 host in
// brackets), lower-case; nullopt when `origin` is not one (also "null", which sandboxed pages and file:// send).
std::optional<std::string> origin_host(std::string_view origin) {
  const std::string text = lower(origin);
  std::string_view rest(text);
  if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.substr(0, 8) == "https://") {
    rest.remove_prefix(8);
  } else {
    return std::nullopt;
  }
  std::string_view host;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
  } else {
    host = rest.substr(0, rest.find(':'));
    rest.remove_prefix(host.size());
  }
  if (!rest.empty()) {  // only ":port" may follow: an origin has no path
    if (rest.front() != ':' || rest.size() == 1 ||
        !std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
  }
  // A name or an address, nothing else: no path, query, fragment or user part hides in it.
  const auto host_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':';
  };
  if (host.empty() || !std::all_of(host.begin(), host.end(), host_char)) return std::nullopt;
  return std::string(host);
}

}  // namespace

std::optional<std::array<std::uint8_t, 16>> parse_address(std::string_view text) {
  const std::string s(text);
  std::array<std::uint8_t, 16> address{};
  if (is_ipv4(text)) {
    address[10] = address[11] = 0xff;
    if (::inet_pton(AF_INET, s.c_str(), address.data() + 12) != 1) return std::nullopt;
  } else if (::inet_pton(AF_INET6, s.c_str(), address.data()) != 1) {
    return std::nullopt;
  }
  return address;
}

Result<std::vector<AddressRange>, std::string> parse_address_ranges(std::string_view list) {
  std::vector<AddressRange> ranges;
  for (std::string_view entry : split(list)) {
    const auto slash = entry.find('/');
    const std::string_view address_text = entry.substr(0, slash);
    const unsigned max = is_ipv4(address_text) ? 32 : 128;
    const auto address = parse_address(address_text);
    const auto bits = slash == std::string_view::npos ? std::optional<unsigned>(max)
                                                      : prefix_bits(entry.substr(slash + 1), max);
    if (!address || !bits)
      return "'" + std::string(entry) + "' is not an address or an address range (CIDR, as 127.0.0.0/8)";
    ranges.push_back({*address, *bits + (max == 32 ? kMappedPrefixBits : 0)});
  }
  return ranges;
}

bool in_ranges(const std::vector<AddressRange>& ranges, std::string_view address) {
  const auto parsed = parse_address(address);
  if (!parsed) return false;  // an address that cannot be read is not loopback
  return std::any_of(ranges.begin(), ranges.end(), [&](const AddressRange& r) { return matches(r, *parsed); });
}

bool LoopbackPolicy::admits(const std::string& user, const std::optional<std::string>& peer_address) const {
  if (std::find(users.begin(), users.end(), user) == users.end()) return true;
  return !peer_address || in_ranges(addresses, *peer_address);
}

bool LoopbackPolicy::restricts(const std::string& user) const {
  return std::find(users.begin(), users.end(), user) != users.end();
}

bool OriginPolicy::trusts(const std::optional<std::string_view>& origin) const {
  if (!origin) return true;  // not a browser: its peer address is the whole story
  if (std::find(origins.begin(), origins.end(), lower(trimmed(*origin))) != origins.end()) return true;
  if (!loopback) return false;
  const auto host = origin_host(trimmed(*origin));
  if (!host) return false;
  // The names and addresses of this machine's loopback interface, whatever --loopback-addresses says: where the
  // page came from, not where the socket did.
  static const std::vector<AddressRange> kLoopback = *parse_address_ranges("127.0.0.0/8,::1");
  return *host == "localhost" || in_ranges(kLoopback, *host);
}

Result<OriginPolicy, std::string> parse_trusted_origins(std::string_view list) {
  OriginPolicy policy;
  policy.loopback = false;
  for (std::string_view entry : split(list)) {
    if (entry == "loopback") {
      policy.loopback = true;
    } else if (origin_host(entry)) {
      policy.origins.push_back(lower(entry));
    } else {
      return "'" + std::string(entry) +
             "' is neither loopback nor an origin (http or https, scheme://host[:port], no path: "
             "https://app.example.com)";
    }
  }
  return policy;
}

std::vector<std::string> split_names(std::string_view list) {
  std::vector<std::string> names;
  for (std::string_view name : split(list)) names.emplace_back(name);
  return names;
}

}  // namespace firemq
