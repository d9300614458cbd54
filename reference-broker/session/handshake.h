// The handshake's decisions, made once for every protocol that logs a client in: FireMQ's hello here, AMQP 0-9-1's
// connection.start-ok and connection.open later. Who the client is, on which vhost, with which permissions, and
// the terms the connection runs under (heartbeat, max_frame). No I/O; runs on the broker thread.
#pragma once

#include <optional>
#include <string>

#include "protocol/error.h"
#include "protocol/messages.h"
#include "reference-broker/access/definitions.h"
#include "reference-broker/access/permissions.h"
#include "reference-broker/core/config.h"

namespace firemq {

// What a client presents to log in, whatever its protocol.
struct LoginRequest {
  std::string mechanism;  // "plain"
  std::string user;
  std::string password;
  std::string vhost;                        // "/" when the client named none
  std::optional<std::string> peer_address;  // the client's IP address; none: no network peer (in-process)
  // A WebSocket upgrade's Origin header when it is not a trusted origin (OriginPolicy): a web page of another
  // site, which a browser on this host lets reach loopback. Such a login is not from loopback for loopback_users.
  std::optional<std::string> foreign_origin;
};

// An authenticated client on a vhost it may use.
struct Principal {
  std::string user;
  std::string vhost;
  Permissions permissions;
};

// "If authentication fails, the server replies error with code 403 and fatal: true": an unknown mechanism, a
// wrong user or password, a loopback-only user from elsewhere (`loopback`), an unknown vhost, or no permission
// on it. The message says which, except that it never tells a wrong user from a wrong password, and says a
// user is loopback-only only to a client that gave its password (as RabbitMQ, which checks the password first).
Result<Principal> log_in(const Definitions& definitions, const LoopbackPolicy& loopback, const LoginRequest& request);

// A FireMQ session admitted by its hello: the principal and the negotiated terms of welcome.
struct Admission {
  Principal principal;
  std::uint64_t heartbeat_seconds;
};

// What the transport learnt of the connection before hello: the vhost a WebSocket client put in its URL's
// `?vhost=` (absent when it put none; TCP and TLS have none), and the client's address, which every transport
// adapter fills in (absent only for a session without a network peer: unit tests, the fuzzer).
struct TransportHints {
  std::optional<std::string> url_vhost;
  std::optional<std::string> peer_address;    // an IP address in text, as Asio prints it
  std::optional<std::string> foreign_origin;  // LoginRequest::foreign_origin
};

// hello: the version, the vhost (hello's, or the WebSocket URL's when hello names none; both named and different
// is 403), then log_in, then the heartbeat. Errors are fatal.
Result<Admission> admit_hello(const op::Hello& hello, const TransportHints& hints, const Definitions& definitions,
                              const BrokerConfig& config);

}  // namespace firemq
