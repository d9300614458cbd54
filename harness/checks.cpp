// Named checks: properties of a broker that a list of steps cannot express, mostly about time. Each is
// referenced from a case as {"check": {"name": "...", "args": {...}}} and documented in docs/case-format.md.
#include <limits>
#include <thread>

#include "harness/scenario.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;
using namespace std::chrono;

std::uint64_t negotiated_heartbeat(Scenario& s) {
  auto it = s.vars().find("welcome_heartbeat");
  const auto* h = it == s.vars().end() ? nullptr : it->second.get_if<std::uint64_t>();
  return h ? *h : 0;
}

// heartbeat_ping: "each side sends ping when it has sent nothing for h / 2 seconds." The harness stays silent;
// a ping must come after about h/2 and well before the harness would count as dead (2h). A ping earlier than
// h/2 is allowed (a broker may be more eager); none within h/2 + slack_ms fails.
StepOutcome heartbeat_ping(Scenario& s, const Json& args) {
  const std::uint64_t h = negotiated_heartbeat(s);
  if (h == 0) return StepOutcome::fail("welcome.heartbeat is 0: heartbeats were not negotiated");
  Scenario::Conn* c = s.conn(args.value("conn", "main"));
  if (c == nullptr) return StepOutcome::error("heartbeat_ping: no connection");
  const auto slack = milliseconds(args.value("slack_ms", 1000));
  const auto start = steady_clock::now();
  const Scenario::Received r = s.next(*c, start + milliseconds(h * 500) + slack, true);
  const auto waited = duration_cast<milliseconds>(steady_clock::now() - start).count();
  if (r.kind != Scenario::Received::Kind::frame || r.frame.op() != static_cast<std::uint8_t>(OpCode::ping)) {
    return StepOutcome::fail("with heartbeat " + std::to_string(h) + " s and nothing sent, expected a ping within " +
                             std::to_string(h * 500 + slack.count()) + " ms; after " + std::to_string(waited) + " ms: " +
                             (r.kind == Scenario::Received::Kind::frame ? "another frame" : "none"));
  }
  s.note(c->name, "ping after " + std::to_string(waited) + " ms (h/2 = " + std::to_string(h * 500) + " ms)");
  return StepOutcome::ok();
}

// heartbeat_dead_peer: "Each side considers the peer dead when it has received nothing for 2 x h seconds."
// The harness sends nothing at all (pings are not answered). The broker must close the connection, and not
// before 2h (less a tolerance for timer granularity), and not much after it.
StepOutcome heartbeat_dead_peer(Scenario& s, const Json& args) {
  const std::uint64_t h = negotiated_heartbeat(s);
  if (h == 0) return StepOutcome::fail("welcome.heartbeat is 0: heartbeats were not negotiated");
  Scenario::Conn* c = s.conn(args.value("conn", "main"));
  if (c == nullptr) return StepOutcome::error("heartbeat_dead_peer: no connection");
  c->auto_pong = false;
  const auto early = milliseconds(args.value("early_ms", 300));
  const auto late = milliseconds(args.value("late_ms", 3000));
  const auto silent_since = steady_clock::now();  // the harness's last bytes were sent just before
  const auto dead_at = silent_since + seconds(2 * h);
  while (true) {
    const Scenario::Received r = s.next(*c, dead_at + late, true);
    const auto after = duration_cast<milliseconds>(steady_clock::now() - silent_since).count();
    if (r.kind == Scenario::Received::Kind::frame) continue;  // pings, an error or a close before closing
    if (r.kind == Scenario::Received::Kind::timeout) {
      return StepOutcome::fail("silent for " + std::to_string(after) + " ms (2h = " + std::to_string(2000 * h) +
                               " ms), the broker still had not closed the connection");
    }
    if (steady_clock::now() < dead_at - early) {
      return StepOutcome::fail("the broker closed the connection after " + std::to_string(after) +
                               " ms of silence, before 2h = " + std::to_string(2000 * h) + " ms");
    }
    s.note(c->name, "closed after " + std::to_string(after) + " ms of silence (2h = " + std::to_string(2000 * h) + " ms)");
    return StepOutcome::ok();
  }
}

// heartbeat_kept_alive: a client that answers pings (and sends its own every h/2) stays connected well past
// 2h: the broker counts pongs and pings as received traffic.
StepOutcome heartbeat_kept_alive(Scenario& s, const Json& args) {
  const std::uint64_t h = negotiated_heartbeat(s);
  if (h == 0) return StepOutcome::fail("welcome.heartbeat is 0: heartbeats were not negotiated");
  Scenario::Conn* c = s.conn(args.value("conn", "main"));
  if (c == nullptr) return StepOutcome::error("heartbeat_kept_alive: no connection");
  const auto until = steady_clock::now() + milliseconds(args.value("for_ms", static_cast<int>(3000 * h)));
  while (steady_clock::now() < until) {
    s.send_message(*c, op::Ping{});
    const auto step_end = std::min(until, steady_clock::now() + milliseconds(h * 500));
    while (steady_clock::now() < step_end) {
      const Scenario::Received r = s.next(*c, step_end);  // pings are answered by auto_pong
      if (r.kind == Scenario::Received::Kind::closed) {
        return StepOutcome::fail("the broker closed a connection that kept sending pings and answering them");
      }
      if (r.kind == Scenario::Received::Kind::timeout) break;
    }
  }
  return StepOutcome::ok();
}

const Value* var(Scenario& s, const Json& args, const char* key) {
  auto it = s.vars().find(args.at(key).get<std::string>());
  return it == s.vars().end() ? nullptr : &it->second;
}

// vars_differ: two captured values are different (e.g. the conn_id of two connections).
StepOutcome vars_differ(Scenario& s, const Json& args) {
  const Value* a = var(s, args, "a");
  const Value* b = var(s, args, "b");
  if (a == nullptr || b == nullptr) return StepOutcome::error("vars_differ: capture both variables first");
  if (*a == *b) return StepOutcome::fail("expected different values, both are " + show(a));
  return StepOutcome::ok();
}

// var_between: a captured integer lies within [min, max].
StepOutcome var_between(Scenario& s, const Json& args) {
  const Value* v = var(s, args, "var");
  if (v == nullptr) return StepOutcome::error("var_between: capture the variable first");
  const auto* n = v->get_if<std::uint64_t>();
  const auto min = args.value("min", std::uint64_t{0});
  const auto max = args.value("max", std::numeric_limits<std::uint64_t>::max());
  if (n == nullptr || *n < min || *n > max) {
    return StepOutcome::fail("expected an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", got " + show(v));
  }
  return StepOutcome::ok();
}

}  // namespace

const std::map<std::string, Check>& named_checks() {
  static const std::map<std::string, Check> checks = {
      {"heartbeat_ping", heartbeat_ping},
      {"heartbeat_dead_peer", heartbeat_dead_peer},
      {"heartbeat_kept_alive", heartbeat_kept_alive},
      {"vars_differ", vars_differ},
      {"var_between", var_between},
  };
  return checks;
}

}  // namespace firemq::conform
