// Named checks: properties of a broker that a list of steps cannot express, mostly about time. Each is
// referenced from a case as {"check": {"name": "...", "args": {...}}} and documented in docs/case-format.md.
#include <algorithm>
#include <limits>
#include <thread>

#include "harness/run/scenario.h"

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
                             std::to_string(h * 500 + slack.count()) + " ms; after " + std::to_string(waited) +
                             " ms: " + (r.kind == Scenario::Received::Kind::frame ? "another frame" : "none"));
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
    s.note(c->name,
           "closed after " + std::to_string(after) + " ms of silence (2h = " + std::to_string(2000 * h) + " ms)");
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
    return StepOutcome::fail("expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                             ", got " + show(v));
  }
  return StepOutcome::ok();
}

const Map* header_map(const Scenario::Received& r) { return r.header.get_if<Map>(); }

std::uint64_t uint_of(const Map& m, const char* key) {
  const Value* v = find(m, key);
  const auto* u = v ? v->get_if<std::uint64_t>() : nullptr;
  return u ? *u : 0;
}

bool bool_of(const Map& m, const char* key) {
  const Value* v = find(m, key);
  return v && v->is<bool>() && *v->get_if<bool>();
}

// confirms: publishes 1..count were sent with those seqs. Reads confirm frames (other frames are passed over)
// until every seq is settled, and holds the broker to "The server confirms every publish with a non-zero seq
// exactly once", "{upto: n} confirms every outstanding publish with seq <= n" and "A nack for a sequence number is
// always sent before any upto that covers it". `nacked` lists the seqs that must be nacked, with their code.
StepOutcome confirms(Scenario& s, const Json& args) {
  Scenario::Conn* c = s.conn(args.value("conn", "main"));
  if (c == nullptr) return StepOutcome::error("confirms: no connection");
  const std::uint64_t count = args.at("count").get<std::uint64_t>();
  std::map<std::uint64_t, std::uint64_t> must_nack;          // seq -> code (0: any)
  const Json nacked = args.value("nacked", Json::object());  // named: items() on a temporary would dangle
  for (const auto& [seq, code] : nacked.items()) must_nack[std::stoull(seq)] = code.get<std::uint64_t>();
  std::map<std::uint64_t, std::string> settled;  // seq -> "ack" or "nack"
  std::uint64_t highest_upto = 0;
  const auto deadline = s.deadline_after(args, "within_ms", 3000);
  while (settled.size() < count) {
    const Scenario::Received r = s.next(*c, deadline);
    if (r.kind != Scenario::Received::Kind::frame) {
      return StepOutcome::fail(std::to_string(count - settled.size()) + " of " + std::to_string(count) +
                               " publishes were never confirmed (" + std::to_string(settled.size()) + " were)");
    }
    if (r.frame.op() != static_cast<std::uint8_t>(OpCode::confirm) || header_map(r) == nullptr) continue;
    const Map& h = *header_map(r);
    if (bool_of(h, "nack")) {
      const std::uint64_t seq = uint_of(h, "seq");
      if (seq == 0 || seq > count)
        return StepOutcome::fail("a nack for seq " + std::to_string(seq) + ", which was never published");
      if (settled.count(seq))
        return StepOutcome::fail("seq " + std::to_string(seq) + " was confirmed twice (" + settled[seq] +
                                 ", then a nack)");
      if (seq <= highest_upto)
        return StepOutcome::fail("the nack for seq " + std::to_string(seq) + " came after an upto that covers it");
      if (!must_nack.count(seq))
        return StepOutcome::fail("seq " + std::to_string(seq) + " was nacked: " + show(find(h, "msg")));
      if (must_nack[seq] != 0 && uint_of(h, "code") != must_nack[seq]) {
        return StepOutcome::fail("the nack for seq " + std::to_string(seq) + " has code " +
                                 std::to_string(uint_of(h, "code")) + ", expected " + std::to_string(must_nack[seq]));
      }
      settled[seq] = "nack";
      continue;
    }
    const std::uint64_t upto = uint_of(h, "upto");
    if (upto == 0) return StepOutcome::fail("a confirm that is neither {upto: n} nor a nack: " + show(&r.header));
    if (upto > count)
      return StepOutcome::fail("upto " + std::to_string(upto) + " covers seqs that were never published");
    for (std::uint64_t seq = highest_upto + 1; seq <= upto; ++seq) {
      if (settled.count(seq)) continue;  // nacked before: no longer outstanding
      if (must_nack.count(seq))
        return StepOutcome::fail("seq " + std::to_string(seq) + " should have been nacked, but upto " +
                                 std::to_string(upto) + " confirmed it");
      settled[seq] = "ack";
    }
    highest_upto = std::max(highest_upto, upto);
  }
  s.note(c->name, "every seq 1.." + std::to_string(count) + " was confirmed exactly once");
  return StepOutcome::ok();
}

// delivers: collects `count` deliver frames on a connection, then checks that no more arrive for quiet_ms. With
// per_sub ({"1": 2, "2": 2}), each subscription got exactly that many: "messages go round the consumers that
// have credit".
StepOutcome delivers(Scenario& s, const Json& args) {
  Scenario::Conn* c = s.conn(args.value("conn", "main"));
  if (c == nullptr) return StepOutcome::error("delivers: no connection");
  const std::uint64_t count = args.at("count").get<std::uint64_t>();
  std::map<std::uint64_t, std::uint64_t> per_sub;
  const auto deadline = s.deadline_after(args, "within_ms", 3000);
  for (std::uint64_t got = 0; got < count;) {
    const Scenario::Received r = s.next(*c, deadline);
    if (r.kind != Scenario::Received::Kind::frame) {
      return StepOutcome::fail("expected " + std::to_string(count) + " delivers, got " + std::to_string(got));
    }
    if (r.frame.op() != static_cast<std::uint8_t>(OpCode::deliver) || header_map(r) == nullptr) continue;
    ++per_sub[uint_of(*header_map(r), "sub")];
    ++got;
  }
  const auto quiet_until = s.deadline_after(args, "quiet_ms", 300);
  while (true) {
    const Scenario::Received r = s.next(*c, quiet_until);
    if (r.kind == Scenario::Received::Kind::timeout) break;
    if (r.kind == Scenario::Received::Kind::frame && r.frame.op() == static_cast<std::uint8_t>(OpCode::deliver)) {
      return StepOutcome::fail("more than " + std::to_string(count) + " delivers arrived: " + show(&r.header));
    }
  }
  const Json wanted = args.value("per_sub", Json::object());
  for (const auto& [sub, want] : wanted.items()) {
    const std::uint64_t got = per_sub[std::stoull(sub)];
    if (got != want.get<std::uint64_t>()) {
      return StepOutcome::fail("sub " + sub + " got " + std::to_string(got) + " delivers, expected " + want.dump());
    }
  }
  return StepOutcome::ok();
}

// contains_all: a captured array holds every listed value (in any order, among others).
StepOutcome contains_all(Scenario& s, const Json& args) {
  const Value* v = var(s, args, "var");
  const auto* items = v ? v->get_if<Array>() : nullptr;
  if (items == nullptr) return StepOutcome::fail("expected an array, got " + show(v));
  for (const Json& wanted : args.at("values")) {
    const Value w(wanted.get<std::string>());
    if (std::find(items->begin(), items->end(), w) == items->end()) {
      return StepOutcome::fail("expected " + show(v) + " to contain \"" + wanted.get<std::string>() + "\"");
    }
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
      {"contains_all", contains_all},
      {"confirms", confirms},
      {"delivers", delivers},
      {"var_between", var_between},
  };
  return checks;
}

}  // namespace firemq::conform
