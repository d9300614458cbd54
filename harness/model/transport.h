// The four transports of the spec's "Transports" section, as the harness names them (the URL schemes), and
// where a client connects over one of them. Plain data, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace firemq::conform {

enum class Transport { fire, fires, ws, wss };
inline constexpr std::array<Transport, 4> kAllTransports = {Transport::fire, Transport::fires, Transport::ws,
                                                            Transport::wss};

std::string_view transport_name(Transport t);  // the URL scheme: "fire", "fires", "ws", "wss"
std::optional<Transport> transport_from_name(std::string_view name);
inline bool uses_tls(Transport t) { return t == Transport::fires || t == Transport::wss; }
inline bool is_websocket(Transport t) { return t == Transport::ws || t == Transport::wss; }

// How the harness checks a TLS server: against a CA file, or the system's default store; --insecure skips the
// check (a test broker with a throwaway certificate, when no CA file is at hand).
struct TlsOptions {
  std::string ca_file;  // PEM; empty: the system default store
  bool insecure = false;
};

// Where one connection goes, and how it gets there.
struct WireAddress {
  Transport transport = Transport::fire;
  std::string host;
  std::uint16_t port = 0;
  TlsOptions tls;
  // WebSocket only: the endpoint and the value of the vhost query parameter (sent percent-encoded); no value:
  // no ?vhost= at all.
  std::string path = "/fire";
  std::optional<std::string> vhost_query;
};

// "%2F" for "/": the query-string encoding of RFC 3986 (unreserved characters stay as they are).
std::string percent_encode(std::string_view text);

}  // namespace firemq::conform
