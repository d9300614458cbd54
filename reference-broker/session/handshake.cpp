#include "reference-broker/session/handshake.h"

#include "protocol/reply_codes.h"
#include "reference-broker/core/log.h"
#include "reference-broker/session/heartbeat.h"

namespace firemq {
namespace {

Error fatal(ReplyCode code, std::string msg) {
  Error e = make_error(code, std::move(msg));
  e.fatal = true;
  return e;
}

// The vhost of a hello: "Empty means /". Over WebSocket the URL names it in ?vhost= (the spec's "Transports"):
// hello's value, when it names one, must agree (docs/spec-notes.md, "The WebSocket vhost").
Result<std::string> vhost_of(const op::Hello& hello, const TransportHints& hints) {
  if (hints.url_vhost && !hello.vhost.empty() && *hints.url_vhost != hello.vhost) {
    return fatal(ReplyCode::access_refused, "hello names vhost '" + hello.vhost + "' but the WebSocket URL names '" +
                                                *hints.url_vhost + "' (?vhost=): they must agree");
  }
  const std::string& named = hello.vhost.empty() && hints.url_vhost ? *hints.url_vhost : hello.vhost;
  return named.empty() ? std::string("/") : named;
}

}  // namespace

Result<Principal> log_in(const Definitions& definitions, const LoopbackPolicy& loopback, const LoginRequest& request) {
  if (request.mechanism != "plain") {
    return fatal(ReplyCode::access_refused,
                 "authentication mechanism '" + request.mechanism + "' is not supported: use plain");
  }
  const User* user = definitions.authenticate(request.user, request.password);
  if (user == nullptr) {
    // Which of the two was wrong is not said, as RabbitMQ does not: it would help guess user names.
    return fatal(ReplyCode::access_refused, "login refused: unknown user or wrong password");
  }
  // RabbitMQ's loopback_users, checked once the password matched (rabbit_access_control: the check follows
  // authentication), so that only a client that knows the password learns that the user exists.
  // A browser connects from loopback for any page; one from a foreign origin is not this machine's (OriginPolicy).
  if (request.foreign_origin && loopback.restricts(user->name)) {
    return fatal(ReplyCode::access_refused, "user '" + user->name +
                                                "' may only connect over loopback (loopback_users), and a web page "
                                                "from origin '" +
                                                printable(*request.foreign_origin) +
                                                "' is not (--trusted-origins); create another user for it");
  }
  if (!loopback.admits(user->name, request.peer_address)) {
    return fatal(ReplyCode::access_refused, "user '" + user->name +
                                                "' may only connect over loopback (loopback_users); create another "
                                                "user for remote access");
  }
  if (!definitions.has_vhost(request.vhost)) {
    return fatal(ReplyCode::access_refused, "vhost '" + request.vhost + "' does not exist");
  }
  const Permission* permission = definitions.permission(*user, request.vhost);
  if (permission == nullptr) {
    return fatal(ReplyCode::access_refused,
                 "user '" + user->name + "' has no permission on vhost '" + request.vhost + "'");
  }
  return Principal{user->name, request.vhost, Permissions(*permission)};
}

Result<Admission> admit_hello(const op::Hello& hello, const TransportHints& hints, const Definitions& definitions,
                              const BrokerConfig& config) {
  if (hello.ver != 1) {
    return fatal(ReplyCode::not_implemented,
                 "protocol version " + std::to_string(hello.ver) + " is not supported: this broker speaks 1");
  }
  auto vhost = vhost_of(hello, hints);
  if (!vhost) return vhost.error();
  auto principal = log_in(definitions, config.loopback,
                          {hello.auth.mech, hello.auth.user, hello.auth.pass, *vhost, hints.peer_address,
                           hints.foreign_origin});
  if (!principal) return principal.error();
  return Admission{std::move(*principal), negotiate_heartbeat(hello.heartbeat, config.heartbeat_seconds)};
}

}  // namespace firemq
