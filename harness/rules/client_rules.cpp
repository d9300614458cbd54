#include "harness/rules/client_rules.h"

#include <algorithm>

#include "harness/rules/frame_text.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/typed_json.h"

namespace firemq::conform {
namespace {

constexpr const char* kPreamble = "transport.tcp.preamble";
constexpr const char* kNoPreambleOnWebSocket = "transport.websocket.no-preamble";
constexpr const char* kRid = "design.request.rid";
constexpr const char* kSeq = "publish.seq.numbering";
constexpr const char* kPong = "heartbeat.pong";
constexpr const char* kFlow = "flow.client-stops-publishing";
constexpr const char* kDeadPeer = "heartbeat.dead-peer";
constexpr const char* kCloseCode200 = "close.code-200-normal";
constexpr const char* kCloseHandshake = "lifecycle.close-handshake";
constexpr const char* kSubUnique = "subscribe.sub.unique";
constexpr const char* kHelloFirst = "lifecycle.hello-first";
constexpr const char* kVersion1 = "hello.ver.must-be-1";
constexpr const char* kCaps = "hello.caps";

// The ops whose fields the spec lists in a sentence of their own, with that sentence's requirement: a client frame
// of one of them whose field has the wrong type breaks it (the broker answers 502; the client broke the rule).
struct FieldsRule {
  OpCode op;
  const char* rule;
  const char* section;
  const char* quote;
};
constexpr FieldsRule kFieldsRules[] = {
    {OpCode::close, "close.fields", "Connection lifecycle / close", "{\"code\": uint, \"msg\": str}."},
    {OpCode::ack, "ack.fields", "Consuming / ack, nack", "ack: {\"tag\": uint, \"multiple\": bool}."},
    {OpCode::nack, "ack.nack.fields", "Consuming / ack, nack", "nack: {\"tag\", \"multiple\", \"requeue\": bool}."},
    {OpCode::get, "get.fields", "Consuming / get", "get is {\"rid\", \"queue\", \"no_ack\": bool}."},
    {OpCode::unsubscribe, "unsubscribe.fields", "Consuming / unsubscribe", "{\"rid\", \"sub\"}."},
    {OpCode::delete_exchange, "exchange.delete.fields", "Topology / delete_exchange",
     "{\"rid\", \"name\", \"if_unused\": bool}."},
    {OpCode::delete_queue, "queue.delete.fields", "Topology / delete_queue",
     "{\"rid\", \"name\", \"if_unused\": bool, \"if_empty\": bool}."},
    {OpCode::purge_queue, "queue.purge.fields", "Topology / purge_queue", "{\"rid\", \"name\"}."},
};

bool is(std::uint8_t op, OpCode code) { return op == static_cast<std::uint8_t>(code); }

std::optional<std::uint64_t> uint_field(const Map& header, const char* key) {
  const Value* v = find(header, key);
  if (v == nullptr) return std::nullopt;
  if (const auto* u = v->get_if<std::uint64_t>()) return *u;
  return std::nullopt;
}

std::optional<Map> header_map(const RawFrame& frame) {
  if (frame.header().empty()) return Map{};
  auto value = decode_value(frame.header());
  if (!value) return std::nullopt;
  if (const Map* map = value->get_if<Map>()) return *map;
  return std::nullopt;
}

std::string value_text(const Value& v) { return typed_json_from_value(v).dump(); }

bool is_zero(const Value& v) {
  if (v.is<Nil>()) return true;
  if (const auto* b = v.get_if<bool>()) return !*b;
  if (const auto* u = v.get_if<std::uint64_t>()) return *u == 0;
  if (const auto* s = v.get_if<std::string>()) return s->empty();
  if (const auto* m = v.get_if<Map>()) return m->empty();
  if (const auto* a = v.get_if<Array>()) return a->empty();
  return false;
}

// Whether `got` carries every entry of `asked` with an equal value (keys in any order, extra keys allowed).
bool carries(const Map& got, const Map& asked) {
  return std::all_of(asked.begin(), asked.end(), [&](const MapEntry& e) {
    const auto it = std::find_if(got.begin(), got.end(), [&](const MapEntry& g) { return g.key == e.key; });
    if (it == got.end()) return false;
    const Map* asked_map = e.value.get_if<Map>();
    const Map* got_map = it->value.get_if<Map>();
    if (asked_map != nullptr && got_map != nullptr)
      return asked_map->size() == got_map->size() && carries(*got_map, *asked_map);
    return it->value == e.value;
  });
}

// A bool field that is true (flow's `pause`, error's `fatal`, ack's `multiple`); absent, it is false.
bool flag(const Map& header, const char* key) {
  const Value* v = find(header, key);
  return v != nullptr && *v == Value(true);
}

}  // namespace

const std::vector<MonitorRule>& client_rules() {
  static const std::vector<MonitorRule> rules = {
      {kPreamble, "Transports", "Client first sends the 4 ASCII bytes `FMQ1`, then length-prefixed frames.", false},
      {kRid, "Design rules",
       "Requests carry a request id (rid) and get exactly one reply: ok, error, or an op-specific reply.", false},
      {kSeq, "Publishing / publish", "Client-assigned sequence number, starting at 1 and increasing by 1.", false},
      {kPong, "Heartbeats", "A peer that receives ping replies pong.", false},
      {kFlow, "Replies / flow", "Clients stop publishing until pause: false.", false},
      {kDeadPeer, "Heartbeats", "Each side considers the peer dead when it has received nothing for 2 × h seconds.",
       false},
      {kNoPreambleOnWebSocket, "Transports",
       "One binary WebSocket message per frame, without the length prefix and without `FMQ1`.", false},
      {kCloseCode200, "Connection lifecycle / close", "Code 200 means a normal shutdown.", false},
      {kCloseHandshake, "Connection lifecycle", "| -- close ----------------------------> |", false},
      {kSubUnique, "Consuming / subscribe", "`sub` uint Client-chosen subscription id, unique on the connection.",
       false},
      {kHelloFirst, "Connection lifecycle",
       "| -- FMQ1 (TCP only) ------------------> | | -- hello ----------------------------> |", false},
      {kVersion1, "Connection lifecycle / hello", "`ver` uint Protocol major version. Must be `1`.", false},
      {kCaps, "Connection lifecycle / hello", "`caps` [str] Capabilities the client supports.", false},
      {"publish.seq.zero-no-confirm", "Publishing / publish",
       "`seq` uint Client-assigned sequence number, starting at 1 and increasing by 1. `0` means no confirm is wanted.",
       false},
      {"publish.props", "Publishing / publish", "`props` map Message properties (below).", false},
      {"publish.headers.any-type", "Publishing / publish",
       "`headers` map Application headers. Values are any MessagePack type.", false},
      // The connect URL's parts, as the hello carries them (client_mode.cpp, hello_asked_by).
      {kUrlUserinfo, "Transports", "fire://user:password@host:5673/vhost", false},
      {kUrlVhostFromPath, "Transports", "For fire and fires, the vhost is the URL path with the leading / removed",
       false},
  };
  static const std::vector<MonitorRule> with_fields = [] {
    std::vector<MonitorRule> all = rules;
    for (const FieldsRule& f : kFieldsRules) all.push_back({f.rule, f.section, f.quote, false});
    return all;
  }();
  return with_fields;
}

// The first violation of each rule on the connection, as the wire monitor reports its own.
void ClientRules::violation(const char* rule, const std::string& message, Clock::time_point at) {
  if (std::any_of(violations_.begin(), violations_.end(), [&](const MonitorViolation& v) { return v.rule == rule; }))
    return;
  const auto& rules = client_rules();
  const auto r = std::find_if(rules.begin(), rules.end(), [&](const MonitorRule& m) { return m.id == rule; });
  MonitorViolation v;
  v.rule = rule;
  v.spec = {std::string(r->section), std::string(r->quote)};
  v.connection = connection_;
  v.at_ms = std::chrono::duration<double, std::milli>(at - origin_).count();
  v.message = "the client " + message;
  violations_.push_back(std::move(v));
}

// Transports: on TCP the client's first bytes are FMQ1.
void ClientRules::observe_preamble(ByteView first_bytes, Clock::time_point at) {
  static constexpr std::string_view kFmq1 = "FMQ1";
  const std::string got(first_bytes.begin(), first_bytes.end());
  if (got != kFmq1) violation(kPreamble, "began the connection with " + preview(first_bytes) + " instead of FMQ1", at);
}

// Transports: on WebSocket there is no FMQ1, in a message of its own or before the first frame.
void ClientRules::observe_first_message(ByteView message, Clock::time_point at) {
  static constexpr std::string_view kFmq1 = "FMQ1";
  if (std::string_view(reinterpret_cast<const char*>(message.data()), std::min(message.size(), kFmq1.size())) ==
      kFmq1) {
    violation(kNoPreambleOnWebSocket, "began its WebSocket messages with FMQ1, which only TCP and TLS have", at);
  }
}

void ClientRules::observe(Side from, const RawFrame& frame, Clock::time_point at) {
  const auto header = header_map(frame);
  if (!header) return;  // the wire monitor reports a header that is no map
  const std::uint8_t op = frame.op();
  if (from == Side::server) {
    if (is(op, OpCode::ping) && !closing_) pings_unanswered_.push_back(at);
    if (is(op, OpCode::close)) closing_ = true;
    if (is(op, OpCode::close) || (is(op, OpCode::error) && flag(*header, "fatal"))) server_ended_ = true;
    if (is(op, OpCode::welcome)) heartbeat_s_ = uint_field(*header, "heartbeat").value_or(0);
    if (is(op, OpCode::flow)) paused_since_ = flag(*header, "pause") ? std::optional(at) : std::nullopt;
    const bool reply = is(op, OpCode::ok) || is(op, OpCode::get_ok) || is(op, OpCode::error);
    if (const auto rid = uint_field(*header, "rid"); reply && rid) {
      rids_awaiting_reply_.erase(*rid);
      settle_subscription(*rid, is(op, OpCode::ok));
    }
    if (const auto sub = uint_field(*header, "sub"); is(op, OpCode::cancelled) && sub) subs_in_use_.erase(*sub);
    return;
  }
  check_pongs_owed(at);
  if (!frame_seen_ && !is(op, OpCode::hello)) violation(kHelloFirst, "sent " + op_label(op) + " before hello", at);
  frame_seen_ = true;
  if (is(op, OpCode::hello)) check_hello(*header, at);
  check_field_types(frame, at);
  check_asked(op, *header, at);
  if (is(op, OpCode::pong) && !pings_unanswered_.empty()) pings_unanswered_.pop_front();
  if (is(op, OpCode::close)) check_close(*header, at);
  if (is(op, OpCode::close) && normal_close_asked_) check_asked_all_sent(at);
  if (is_request(op)) check_rid(op, *header, at);
  if (is(op, OpCode::publish)) check_seq(*header, at);
  if (is(op, OpCode::subscribe) || is(op, OpCode::unsubscribe)) check_sub(op, *header, at);
  if (is(op, OpCode::publish) && paused_since_) {
    const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(at - *paused_since_).count();
    violation(kFlow,
              "published while paused: the server sent flow with pause: true " + std::to_string(since) +
                  " ms before, and no pause: false since",
              at);
  }
}

// Connection lifecycle / hello: "`ver` uint: Protocol major version. Must be `1`."
void ClientRules::check_hello(const Map& header, Clock::time_point at) {
  const Value* ver = find(header, "ver");
  if (ver == nullptr || !(*ver == Value(std::uint64_t{1}))) {
    violation(kVersion1,
              "sent hello with ver " + (ver ? value_text(*ver) : std::string("absent (0)")) + " instead of 1", at);
  }
  // "`caps` [str]": a list of strings, or left out (the empty list).
  const Value* caps = find(header, "caps");
  const Array* list = caps ? caps->get_if<Array>() : nullptr;
  if (caps != nullptr && (list == nullptr || !std::all_of(list->begin(), list->end(),
                                                          [](const Value& c) { return c.is<std::string>(); }))) {
    violation(kCaps, "sent hello with caps " + value_text(*caps) + ", which is no list of strings", at);
  }
}

// A field of the wrong type, in an op whose fields the spec lists in their own sentence (kFieldsRules).
void ClientRules::check_field_types(const RawFrame& frame, Clock::time_point at) {
  const auto rule = std::find_if(std::begin(kFieldsRules), std::end(kFieldsRules),
                                 [&](const FieldsRule& f) { return is(frame.op(), f.op); });
  if (rule == std::end(kFieldsRules)) return;
  if (auto decoded = decode_frame(frame); !decoded) {
    violation(rule->rule,
              "sent " + op_label(frame.op()) +
                  " that does not read as the spec gives its fields: " + decoded.error().msg,
              at);
  }
}

namespace {

// The value the application gave for `key` in an asked frame; nil where it gave none.
Value asked_value(const AskedFrame& asked, std::string_view key) {
  const auto field = std::find_if(asked.fields.begin(), asked.fields.end(),
                                  [&](const AskedField& f) { return f.key == key; });
  return field == asked.fields.end() ? Value() : field->value;
}

}  // namespace

void ClientRules::application_sends(AskedFrame asked) { asked_.push_back(std::move(asked)); }

void ClientRules::application_withdraws(int command) {
  asked_.erase(std::remove_if(asked_.begin(), asked_.end(), [&](const AskedFrame& a) { return a.command == command; }),
               asked_.end());
}

// The frame the application asked for that this one answers: for an ack or a nack the one with its tag, else
// (and for every other op) the first asked of the op. Each field as asked (AskedField).
void ClientRules::check_asked(std::uint8_t op, const Map& header, Clock::time_point at) {
  const bool settles = is(op, OpCode::ack) || is(op, OpCode::nack);
  const auto tag = uint_field(header, "tag");
  auto it = std::find_if(asked_.begin(), asked_.end(), [&](const AskedFrame& a) {
    return a.op == op && settles && tag && asked_value(a, "tag") == Value(*tag);
  });
  if (it == asked_.end()) {
    it = std::find_if(asked_.begin(), asked_.end(), [&](const AskedFrame& a) { return a.op == op; });
  }
  if (it == asked_.end()) return;
  const AskedFrame asked = std::move(*it);
  asked_.erase(it);
  for (const AskedField& field : asked.fields) {
    const Value* got = find(header, field.key.c_str());
    const auto keeps = [got](const Value& wanted) {
      const Map* asked_map = wanted.get_if<Map>();
      if (asked_map != nullptr)
        return got == nullptr ? asked_map->empty() : got->is<Map>() && carries(*got->get_if<Map>(), *asked_map);
      return got == nullptr ? is_zero(wanted) : *got == wanted;
    };
    if (keeps(field.value) || (field.same_as && keeps(*field.same_as))) continue;
    violation(field.rule,
              "sent " + op_label(op) + " with " + field.key + " " + (got ? value_text(*got) : std::string("absent")) +
                  " where the application gave " + value_text(field.value),
              at);
  }
  // An ack or nack with multiple settles every tag up to its own: the asked ones it covers were sent in effect
  // (merged into it, which the multiple field's own check above has judged).
  if (settles && tag && flag(header, "multiple")) {
    std::erase_if(asked_, [&](const AskedFrame& a) {
      const Value asked_tag = asked_value(a, "tag");
      const auto* number = asked_tag.get_if<std::uint64_t>();
      return a.op == op && number != nullptr && *number <= *tag;
    });
  }
}

// The client's close for the application's normal shutdown: a frame the application asked for before it, and
// did not take back, that has not come by now never will (frames on one connection keep their order). Judged
// only here: the close command is asked once every command before it has its reply, so a command that failed
// was withdrawn already; a client's own close, or its socket's end, can overtake a failing command's reply.
void ClientRules::check_asked_all_sent(Clock::time_point at) {
  if (server_ended_) asked_.clear();  // after the server's close or fatal error nothing more is owed
  for (const AskedFrame& asked : asked_) {
    if (asked.fields.empty()) continue;
    std::string fields;
    for (const AskedField& f : asked.fields) fields += (fields.empty() ? "" : ", ") + f.key + " " + value_text(f.value);
    violation(asked.fields.front().rule,
              "never sent the " + op_label(asked.op) + " the application asked for (" + fields + ") before its close",
              at);
  }
  asked_.clear();
}

// Design rules: each request carries a rid, and not one whose reply is still awaited (the reply could not say
// which request it answers).
void ClientRules::check_rid(std::uint8_t op, const Map& header, Clock::time_point at) {
  // rid 0 is no rid: "omitted fields take their zero value", so a reply with rid 0 could not say whose it is.
  const auto rid = uint_field(header, "rid");
  if (!rid || *rid == 0) return violation(kRid, "sent " + op_label(op) + (rid ? " with rid 0" : " without a rid"), at);
  if (!rids_awaiting_reply_.insert(*rid).second) {
    violation(kRid,
              "sent " + op_label(op) + " with rid " + std::to_string(*rid) +
                  ", which a request still awaiting its reply carries",
              at);
  }
}

// Connection lifecycle / close: once the application asked for a normal shutdown, the client's close says 200.
void ClientRules::check_close(const Map& header, Clock::time_point at) {
  if (normal_close_asked_ && !closing_) {
    const auto code = uint_field(header, "code");
    if (code != 200u) {
      violation(kCloseCode200,
                "closed with " + (code ? "code " + std::to_string(*code) : std::string("no code")) +
                    " when the application asked for a normal shutdown",
                at);
    }
  }
  closing_ = true;
  client_closed_ = true;
}

void ClientRules::application_closes() {
  if (!closing_) normal_close_asked_ = true;  // after the server's close (or the client's own) it has nothing to say
}

// Consuming / subscribe: a sub is in use from its subscribe until an error answers that subscribe, the ok answers
// its unsubscribe, or the server's cancelled ends it (the broker's reading, docs/spec-notes.md Q35); a subscribe
// with a sub in use breaks "unique on the connection".
void ClientRules::check_sub(std::uint8_t op, const Map& header, Clock::time_point at) {
  const auto sub = uint_field(header, "sub");
  const auto rid = uint_field(header, "rid");
  if (!sub) return;  // the wire monitor's field types, and the broker's 502, judge a subscribe without one
  if (is(op, OpCode::unsubscribe)) {
    if (rid) unsubscribing_[*rid] = *sub;
    return;
  }
  if (!subs_in_use_.insert(*sub).second) {
    violation(kSubUnique,
              "subscribed with sub " + std::to_string(*sub) + ", which a subscription on the connection still uses",
              at);
    return;
  }
  if (rid) subscribing_[*rid] = *sub;
}

// A reply to `rid`: an error to a subscribe frees its sub; the ok to an unsubscribe frees the unsubscribed one.
void ClientRules::settle_subscription(std::uint64_t rid, bool ok) {
  if (auto it = subscribing_.find(rid); it != subscribing_.end()) {
    if (!ok) subs_in_use_.erase(it->second);
    subscribing_.erase(it);
  }
  if (auto it = unsubscribing_.find(rid); it != unsubscribing_.end()) {
    if (ok) subs_in_use_.erase(it->second);
    unsubscribing_.erase(it);
  }
}

// Publishing: seq 1 for the first publish that wants a confirm, then each one more than the last; 0 means no
// confirm and does not count.
void ClientRules::check_seq(const Map& header, Clock::time_point at) {
  const auto seq = uint_field(header, "seq").value_or(0);
  if (seq == 0) return;
  if (seq != last_seq_ + 1) {
    violation(kSeq,
              "published with seq " + std::to_string(seq) + " after " +
                  (last_seq_ == 0 ? std::string("no numbered publish (the first is 1)")
                                  : "seq " + std::to_string(last_seq_)),
              at);
  }
  last_seq_ = seq;
}

// Heartbeats: a ping the client has not answered within kPongTolerance, while it went on sending or ended.
void ClientRules::check_pongs_owed(Clock::time_point at) {
  if (pings_unanswered_.empty() || at - pings_unanswered_.front() <= kPongTolerance) return;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(at - pings_unanswered_.front()).count();
  violation(kPong, "did not answer the server's ping with pong (" + std::to_string(waited) + " ms since the ping)", at);
  pings_unanswered_.clear();
}

void ClientRules::finish(Clock::time_point at) {
  check_dead_peer(at, false);
  // Connection lifecycle: a normal shutdown is the close exchange, not a socket that just ends. Judged at the
  // end, whoever ends first: the application's close returns only once the exchange is over.
  if (normal_close_asked_ && !client_closed_) {
    violation(kCloseHandshake, "sent no close when the application asked for a normal shutdown", at);
  }
  if (pings_unanswered_.empty()) return;
  // At the end nothing more can come: an unanswered ping is a missing pong however recent.
  pings_unanswered_.front() = std::min(pings_unanswered_.front(), at - kPongTolerance - std::chrono::milliseconds(1));
  check_pongs_owed(at);
}

// Heartbeats: "Each side considers the peer dead when it has received nothing for 2 x h seconds." Seen on the
// wire, a client that considers its server dead ends the connection (docs/spec-notes.md, Q14): not before 2h
// of the server's silence, and not long after.
void ClientRules::server_silent(Clock::time_point since) {
  if (!silent_since_) silent_since_ = since;
}

void ClientRules::observe_client_end(Clock::time_point at) { check_dead_peer(at, true); }

void ClientRules::check_dead_peer(Clock::time_point at, bool ended) {
  if (!silent_since_ || heartbeat_s_ == 0 || dead_peer_judged_) return;
  const auto silent = at - *silent_since_;
  const std::chrono::milliseconds dead_at(heartbeat_s_ * 2000);
  const auto ms = [](auto d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  const std::string when = " ms of the server's silence (heartbeat " + std::to_string(heartbeat_s_) +
                           " s: dead after " + ms(dead_at) + " ms; " + ms(kDeadPeerEarly) + " ms early or " +
                           ms(kDeadPeerLate) + " ms late allowed)";
  if (ended && silent < dead_at - kDeadPeerEarly) {
    violation(kDeadPeer, "ended the connection after only " + ms(silent) + when, at);
  } else if (silent > dead_at + kDeadPeerLate) {
    violation(kDeadPeer,
              std::string(ended ? "ended the connection only after " : "still had the connection open after ") +
                  ms(silent) + when,
              at);
  } else if (!ended) {
    return;  // the case ended before the client owed anything: nothing to judge
  }
  dead_peer_judged_ = true;
}

}  // namespace firemq::conform
