// The AMQP 0-9-1 side of a case (docs/case-format.md, "AMQP steps"): the spec's "FireMQ also speaks AMQP 0-9-1
// ... Both protocols share one broker" checked with a real AMQP client, rabbitmq-c (Debian's librabbitmq-dev),
// beside the harness's own FireMQ connections of the same case.
//
// Each `amqp_*` step drives one named AMQP connection of the case (default "amqp") through rabbitmq-c's
// blocking API; every wait is bounded by the step's and the case's deadlines (the socket's RPC timeout and
// amqp_simple_wait_frame_noblock). What the broker sends is turned into Values so that the case's patterns use
// the same matchers as FireMQ headers: a method's fields by their AMQP names, the content header's properties by
// theirs, and each field-table value as a one-key map from its type letter ({"l": 5}, {"S": "text"}).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/client/target.h"
#include "protocol/error.h"

namespace firemq::conform {

struct StepOutcome;
class Scenario;

// --amqp-url amqp://user:pass@host[:port][/vhost]: the vhost is the path without its leading /, percent-decoded
// ("%2f" is "/", and no path at all is "/" too); the port defaults to 5672, user and password to guest.
// amqps://...: inside TLS, the port 5671 by default, the broker's certificate checked as `tls` says.
Result<AmqpEndpoint, std::string> parse_amqp_url(const std::string& text, const TlsOptions& tls = {});

// What an AMQP broker says of itself in connection.start's server-properties.
struct AmqpServer {
  std::string product;
  std::string version;
};
// Logs in at `endpoint` (5 s at most) and closes again: the run's probe of a --url amqp:// target.
Result<AmqpServer, std::string> probe_amqp(const AmqpEndpoint& endpoint);

// The verbs of the AMQP side: every one starts with "amqp_".
const std::vector<std::string>& amqp_step_verbs();

class AmqpSide {
 public:
  // `endpoint`: where the target speaks AMQP; without one every step is the case's error (the case should
  // require the feature "amqp").
  AmqpSide(Scenario& scenario, std::optional<AmqpEndpoint> endpoint);
  ~AmqpSide();
  AmqpSide(const AmqpSide&) = delete;
  AmqpSide& operator=(const AmqpSide&) = delete;

  StepOutcome run(const std::string& verb, const nlohmann::json& args);
  // Drops every connection (end of the case, or the broker restarted under them).
  void drop_all();

  struct Conn;

 private:
  Scenario& scenario_;
  std::optional<AmqpEndpoint> endpoint_;
  std::map<std::string, std::unique_ptr<Conn>> conns_;
};

}  // namespace firemq::conform
