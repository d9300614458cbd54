// RabbitMQ's loopback_users (default [guest], since RabbitMQ 3.3): the users in the list may log in only from a
// loopback address, so that a broker reachable from the network does not let anyone in as guest/guest. What
// counts as loopback is a list of address ranges (--loopback-addresses; 127.0.0.0/8 and ::1 unless a test or an
// unusual setup says otherwise). docs/security.md, "Who may connect from where".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/error.h"

namespace firemq {

// An IPv4 or IPv6 range in CIDR form. IPv4 is kept as its IPv4-mapped IPv6 form (::ffff:a.b.c.d), so that a
// dual-stack socket's ::ffff:127.0.0.1 falls in 127.0.0.0/8.
struct AddressRange {
  std::array<std::uint8_t, 16> prefix{};
  unsigned bits = 128;
};

// "127.0.0.0/8,::1": ranges separated by commas; an address without /N is that address alone. The error names
// the entry that is not a range.
Result<std::vector<AddressRange>, std::string> parse_address_ranges(std::string_view list);
// An IP address in text (as Asio prints a peer's); nullopt when it is none.
std::optional<std::array<std::uint8_t, 16>> parse_address(std::string_view text);
bool in_ranges(const std::vector<AddressRange>& ranges, std::string_view address);

struct LoopbackPolicy {
  std::vector<std::string> users{"guest"};  // loopback_users; empty: no one is restricted
  std::vector<AddressRange> addresses = *parse_address_ranges("127.0.0.0/8,::1");

  // Whether `user` may log in from `peer_address` (the client's IP address in text). No address: the session
  // has no network peer (an in-process session: unit tests, the fuzzer), which is as local as loopback.
  bool admits(const std::string& user, const std::optional<std::string>& peer_address) const;
  bool restricts(const std::string& user) const;
};

// Which WebSocket upgrades' Origin headers count as from this machine (--trusted-origins). A browser on the
// broker's host connects from loopback whatever page asks it to, and sends that page's origin: a page of a
// foreign site must not log in as a loopback-only user (guest). Trusted: no Origin header (not a browser), and,
// with `loopback` (the default), an http or https origin whose host is localhost, 127.x.x.x or [::1], any port
// (a page served from this machine is its developer's own), and the origins listed, compared case-insensitively
// with the header as browsers send it (scheme://host[:port], the default port left out). docs/security.md.
struct OriginPolicy {
  bool loopback = true;
  std::vector<std::string> origins;  // lower-case

  bool trusts(const std::optional<std::string_view>& origin) const;
};

// "loopback,https://app.example.com": `loopback` and origins separated by commas; "" trusts only upgrades without
// an Origin header. The error names the entry that is neither.
Result<OriginPolicy, std::string> parse_trusted_origins(std::string_view list);

// "guest,admin": names separated by commas; "" is the empty list.
std::vector<std::string> split_names(std::string_view list);

}  // namespace firemq
