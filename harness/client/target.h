// The broker under test, as the cases see it: where it listens, over which transport, as whom.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "harness/client/http_client.h"
#include "harness/model/transport.h"
#include "protocol/url.h"

namespace firemq::conform {

// Where the target speaks AMQP 0-9-1 (the spec: "FireMQ also speaks AMQP 0-9-1 on port 5672"), as whom: the
// AMQP side of the interop cases (harness/run/amqp_side.h) connects there.
struct AmqpEndpoint {
  std::string host;
  std::uint16_t port = 5672;
  std::string user;
  std::string password;
  std::string vhost;
  bool tls = false;  // amqps://: inside TLS (port 5671 by default), the certificate checked as `tls_options` says
  TlsOptions tls_options;
};

struct Target {
  std::string description;  // for reports: the URL, or the embedded broker and its port
  Transport transport = Transport::fire;
  std::string host;
  std::uint16_t port = 0;
  std::string user;
  std::string password;
  std::string vhost;
  std::string ws_path = "/fire";  // ws and wss: the endpoint (the URL's path)
  TlsOptions tls;                 // fires and wss: how the broker's certificate is checked
  // What the target has beyond the spec's basics, declared (never inferred): "conform-definitions" (the users
  // and vhosts of conformance/definitions.json are loaded), ... Cases that need a missing one are skipped.
  std::set<std::string> features;
  // Where the target's management API is (feature "management"): the embedded broker's HTTP listener, or
  // --management-url. The `http` step sends its requests there.
  std::optional<HttpEndpoint> management;
  // Where the target's AMQP listener is (feature "amqp"): the embedded broker's, --amqp-url, or --url amqp://.
  std::optional<AmqpEndpoint> amqp;
  // False for --url amqp://: the target speaks AMQP 0-9-1 only (RabbitMQ, or this broker's 5672 alone), so
  // only the cases that open no FireMQ connection run; the others are skipped with the reason.
  bool speaks_fire = true;

  // Where a case's connections go by default: the target's endpoint, with ?vhost= its vhost on WebSocket.
  WireAddress address() const {
    WireAddress a;
    a.transport = transport;
    a.host = host;
    a.port = port;
    a.tls = tls;
    a.path = ws_path;
    a.vhost_query = vhost;
    return a;
  }
};

// Where a parsed URL points, as whom, over which transport (the URL's scheme); TLS checked as `tls` says.
Target target_at(const Url& url, const TlsOptions& tls);

}  // namespace firemq::conform
