#include "harness/rules/wire_monitor.h"

#include <algorithm>

#include "harness/rules/frame_text.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

namespace firemq::conform {
namespace {

constexpr std::size_t kContextBefore = 8;  // frames shown before a violation, the offending one included
constexpr std::size_t kContextAfter = 2;   // and after it

// Rule ids, as the checks below name them.
constexpr const char* kLen = "framing.len.counts";
constexpr const char* kWebSocketMessage = "transport.websocket.one-message-per-frame";
constexpr const char* kHeaderMap = "framing.header.msgpack-map";
constexpr const char* kStringKeys = "framing.header.string-keys";
constexpr const char* kPayload = "framing.payload.only-body-ops";
constexpr const char* kDirection = "ops.direction";
constexpr const char* kPreWelcome = "framing.limit.pre-welcome";
constexpr const char* kMaxFrame = "framing.limit.max-frame";
constexpr const char* kOneReply = "design.request.one-reply";
constexpr const char* kWelcome = "lifecycle.welcome-or-error";
constexpr const char* kConfirmOnce = "confirm.exactly-once";
constexpr const char* kNackFirst = "confirm.nack.before-upto";
constexpr const char* kReturnFirst = "return.before-confirm";
constexpr const char* kTagStart = "deliver.tag.starts-at-1";
constexpr const char* kTagOrder = "deliver.tag.unique-increasing";
constexpr const char* kCredit = "credit.limit";
constexpr const char* kUnsubscribed = "unsubscribe.no-more-deliveries";
constexpr const char* kCancelled = "cancelled.server-ended";
constexpr const char* kPing = "heartbeat.send-ping";
constexpr const char* kCloseReply = "close.reply-close";
constexpr const char* kCloseSocket = "close.close-socket";
constexpr const char* kFatal = "error.fatal.closes-connection";

bool is(std::uint8_t op, OpCode code) { return op == static_cast<std::uint8_t>(code); }

// A uint field: its value, 0 when absent (its zero value), nullopt when it has another type.
std::optional<std::uint64_t> uint_or_zero(const Map& header, const char* key) {
  const Value* v = find(header, key);
  if (v == nullptr) return std::uint64_t{0};
  if (const auto* u = v->get_if<std::uint64_t>()) return *u;
  return std::nullopt;
}

bool flag(const Map& header, const char* key) {
  const Value* v = find(header, key);
  return v != nullptr && v->is<bool>() && *v->get_if<bool>();
}

bool sent_by(const OpInfo& info, Side from) {
  if (info.direction == Direction::both) return true;
  return (info.direction == Direction::client_to_server) == (from == Side::client);
}

const char* side_name(Side s) { return s == Side::server ? "server" : "client"; }

// The spec's row of the op table for `info`, verbatim (tab-separated, as the spec's text has it).
std::string op_row(const OpInfo& info) {
  static constexpr const char* kHex = "0123456789abcdef";
  const auto code = static_cast<std::uint8_t>(info.code);
  const char* direction = info.direction == Direction::both               ? "both"
                          : info.direction == Direction::client_to_server ? "client → server"
                                                                          : "server → client";
  return std::string("`0x") + kHex[code >> 4] + kHex[code & 0xf] + "`\t`" + std::string(info.name) + "`\t" + direction;
}

}  // namespace

bool is_request(std::uint8_t op) {
  switch (static_cast<OpCode>(op)) {
    case OpCode::declare_exchange:
    case OpCode::delete_exchange:
    case OpCode::declare_queue:
    case OpCode::delete_queue:
    case OpCode::purge_queue:
    case OpCode::bind:
    case OpCode::unbind:
    case OpCode::subscribe:
    case OpCode::unsubscribe:
    case OpCode::get: return true;
    default: return false;
  }
}

const std::vector<MonitorRule>& monitor_rules() {
  static const std::vector<MonitorRule> rules = {
      {kLen, "Frame format", "len counts every byte after the len field: 1 + 4 + hlen + payload length.", false},
      {kWebSocketMessage, "Transports",
       "One binary WebSocket message per frame, without the length prefix and without `FMQ1`.", false},
      {kHeaderMap, "Frame format", "header is a MessagePack map with string keys. hlen may be 0, meaning an empty map.",
       false},
      {kStringKeys, "Frame format", "header is a MessagePack map with string keys.", false},
      {kPayload, "Frame format", "Only publish, return, deliver and get_ok carry a payload.", false},
      {kDirection, "Op codes", "Op\tName\tDirection\tPayload", false},
      {kPreWelcome, "Frame format", "Before welcome, a frame may be at most 65 536 bytes.", false},
      {kMaxFrame, "Frame format", "After welcome, the limit is welcome.max_frame (16 MiB by default).", false},
      {kPing, "Heartbeats",
       "When the negotiated interval h is non-zero, each side sends ping when it has sent nothing for h / 2 seconds.",
       false},
      {kCloseReply, "close", "The receiver replies with its own close and closes the socket.", false},
      {kCloseSocket, "close", "The receiver replies with its own close and closes the socket.", false},
      {kOneReply, "Design rules",
       "Requests carry a request id (rid) and get exactly one reply: ok, error, or an op-specific reply.", true},
      {kWelcome, "Connection lifecycle",
       "| -- hello ----------------------------> |\n  | <-------------------- welcome or error |", true},
      {kFatal, "Replies / error", "`true` when the server closes the connection after this frame.", true},
      {kConfirmOnce, "Publishing / confirm", "The server confirms every publish with a non-zero seq exactly once.",
       true},
      {kNackFirst, "Publishing / confirm",
       "A nack for a sequence number is always sent before any upto that covers it.", true},
      {kReturnFirst, "Publishing / return", "The return is sent before the publish's confirm.", true},
      {kTagStart, "Consuming / deliver", "Delivery tag, unique and increasing on the connection, starting at 1.", true},
      {kTagOrder, "Consuming / deliver", "Delivery tag, unique and increasing on the connection, starting at 1.", true},
      {kCredit, "Consuming / credit", "The server sends at most as many deliver frames as the credit granted so far.",
       true},
      {kUnsubscribed, "Consuming / unsubscribe", "The server sends no more deliveries for sub.", true},
      {kCancelled, "Consuming / cancelled",
       "The server ended a subscription, for example because its queue was deleted.", true},
  };
  return rules;
}

const MonitorRule* find_monitor_rule(std::string_view id) {
  for (const MonitorRule& r : monitor_rules()) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

WireMonitor::WireMonitor(Side judged, std::string connection, Clock::time_point origin)
    : judged_(judged), connection_(std::move(connection)), origin_(origin) {}

bool WireMonitor::applies(std::string_view rule) const {
  const MonitorRule* r = find_monitor_rule(rule);
  return r != nullptr && (!r->server_only || judged_ == Side::server);
}

// The first violation of each rule on the connection: later ones add nothing the report needs. `quote`, when
// given, is the spec's words for this instance (an op's row of the table) instead of the rule's.
void WireMonitor::violation(std::string_view rule, const std::string& message, Clock::time_point at,
                            const std::string& quote) {
  if (!applies(rule)) return;
  if (std::any_of(violations_.begin(), violations_.end(), [&](const MonitorViolation& v) { return v.rule == rule; }))
    return;
  const MonitorRule& r = *find_monitor_rule(rule);
  MonitorViolation v;
  v.rule = std::string(rule);
  v.spec = {std::string(r.section), quote.empty() ? std::string(r.quote) : quote};
  v.connection = connection_;
  v.at_ms = std::chrono::duration<double, std::milli>(at - origin_).count();
  v.message = "the " + std::string(side_name(judged_)) + " " + message;
  v.context.assign(recent_.begin(), recent_.end());
  violations_.push_back(std::move(v));
  context_to_follow_ = kContextAfter;
}

void WireMonitor::remember(Side from, const RawFrame& frame, Clock::time_point at) {
  TranscriptLine line;
  line.at_ms = std::chrono::duration<double, std::milli>(at - origin_).count();
  line.connection = connection_;
  line.direction = from == Side::client ? "sent" : "received";  // as the transcript says it, from the client's seat
  line.op = op_label(frame.op());
  line.header_json = header_summary(frame.header());
  line.payload_size = frame.payload().size();
  line.payload_preview = preview(frame.payload());
  if (context_to_follow_ > 0 && !violations_.empty()) {
    violations_.back().context.push_back(line);
    --context_to_follow_;
  }
  recent_.push_back(std::move(line));
  if (recent_.size() > kContextBefore) recent_.pop_front();
}

void WireMonitor::observe(Side from, const RawFrame& frame, Clock::time_point at) {
  remember(from, frame, at);
  std::optional<Value> header;
  if (frame.header().empty()) {
    header = Value(Map{});
  } else if (auto decoded = decode_value(frame.header())) {
    header = std::move(*decoded);
  }
  const Map* map = header ? header->get_if<Map>() : nullptr;
  if (judged(from)) {
    last_from_judged_ = at;
    check_after_last_frame(frame, at);
    if (!check_layout(frame, header ? &*header : nullptr, at)) return;
    check_reply(frame.op(), *map, at);
    if (is(frame.op(), OpCode::welcome)) check_welcome(at);
    if (is(frame.op(), OpCode::confirm)) check_confirm(*map, at);
    if (is(frame.op(), OpCode::return_)) check_return(*map, at);
    if (is(frame.op(), OpCode::deliver) || is(frame.op(), OpCode::get_ok)) check_delivery(frame.op(), *map, at);
  } else if (map == nullptr) {
    untracked_ = true;  // what the judged side owes for this frame is anyone's guess
    return;
  } else {
    note_request(frame.op(), *map);
  }
  note_state(from, frame.op(), *map);
}

// Frame format and Op codes: the limit, the header, the payload, the direction. False when the header is no map
// (the op's own rules cannot read it).
bool WireMonitor::check_layout(const RawFrame& frame, const Value* header, Clock::time_point at) {
  const std::size_t limit = welcomed_ ? max_frame_ : kMaxFrameBeforeWelcome;
  if (frame.size() > limit) {
    violation(welcomed_ ? kMaxFrame : kPreWelcome,
              "sent a " + op_label(frame.op()) + " frame of " + std::to_string(frame.size()) +
                  " bytes (4 + len); the limit " + (welcomed_ ? "after welcome is max_frame, " : "before welcome is ") +
                  std::to_string(limit),
              at);
  }
  const OpInfo* info = find_op(frame.op());
  if (info != nullptr && !info->has_payload && !frame.payload().empty()) {
    violation(
        kPayload,
        "sent " + op_label(frame.op()) + " with a payload of " + std::to_string(frame.payload().size()) + " bytes", at);
  }
  if (info != nullptr && !sent_by(*info, judged_)) {
    violation(kDirection,
              "sent " + op_label(frame.op()) + ", which only the " +
                  side_name(judged_ == Side::server ? Side::client : Side::server) + " sends",
              at, op_row(*info));
  }
  const Map* map = header ? header->get_if<Map>() : nullptr;
  if (map == nullptr) {
    violation(kHeaderMap,
              "sent " + op_label(frame.op()) +
                  " with a header that is no MessagePack map: " + header_summary(frame.header()),
              at);
    return false;
  }
  if (std::any_of(map->begin(), map->end(), [](const MapEntry& e) { return !e.key.is<std::string>(); })) {
    violation(
        kStringKeys,
        "sent " + op_label(frame.op()) + " with a header key that is no string: " + header_summary(frame.header()), at);
  }
  return true;
}

// close and error: a close reply, or an error with fatal: true, is the judged side's last frame (a close may
// still follow a fatal error: the connection closes either way).
void WireMonitor::check_after_last_frame(const RawFrame& frame, Clock::time_point at) {
  if (!judged_last_frame_at_) return;
  if (last_frame_rule_ == kFatal && is(frame.op(), OpCode::close)) return;
  violation(last_frame_rule_,
            std::string("sent ") + op_label(frame.op()) + " after " +
                (last_frame_rule_ == kFatal ? "an error with fatal: true" : "its reply to the client's close"),
            at);
}

// The other side's frames that oblige the judged side: its close (a close in reply), and a client's requests (a
// reply each), publishes with a seq (a confirm each), subscribes and credit (deliveries within it), unsubscribes.
void WireMonitor::note_request(std::uint8_t op, const Map& header) {
  // A close that answers the judged side's own close asks for nothing more.
  if (is(op, OpCode::close) && !judged_last_frame_at_ && !judged_closed_first_) peer_closed_ = true;
  if (judged_ == Side::client) return;  // the rest is what a client asks of a server
  const Value* rid_value = find(header, "rid");
  if (is_request(op) || (rid_value != nullptr && rid_value->is<std::uint64_t>())) {
    // A request the server may answer: an unknown op with a rid gets its 540 with that rid.
    const auto rid = uint_or_zero(header, "rid");
    if (!rid) return void(untracked_ = true);
    ++pending_rids_[*rid];
    if (is(op, OpCode::unsubscribe)) {
      const auto sub = uint_or_zero(header, "sub");
      if (!sub) return void(untracked_ = true);
      unsubscribe_rids_[*rid] = *sub;
    }
  }
  if (is(op, OpCode::publish)) {
    const auto seq = uint_or_zero(header, "seq");
    if (!seq) return void(untracked_ = true);
    if (*seq != 0) ++outstanding_seqs_[*seq];
  }
  if (is(op, OpCode::subscribe) || is(op, OpCode::credit)) {
    const auto sub = uint_or_zero(header, "sub");
    const auto credit = uint_or_zero(header, "credit");
    if (!sub || !credit) return void(untracked_ = true);
    auto it = subs_.find(*sub);
    // A subscribe after the end starts afresh; a second one while it lasts is refused (530), but counting its
    // credit only makes the monitor more lenient. credit for an unknown sub is ignored by the server.
    if (is(op, OpCode::subscribe) && (it == subs_.end() || it->second.ended_by != nullptr)) {
      subs_[*sub] = Subscription{*credit, 0, nullptr};
    } else if (it != subs_.end()) {
      it->second.credit += *credit;
    }
  }
  if (is(op, OpCode::hello)) ++hellos_;
}

// Connection lifecycle: one welcome, in answer to a hello (a second hello gets an error, 503).
void WireMonitor::check_welcome(Clock::time_point at) {
  if (untracked_) return;
  if (welcomed_) return violation(kWelcome, "sent a second welcome on the connection", at);
  if (hellos_ == 0) violation(kWelcome, "sent welcome before any hello", at);
}

// Frames of either side that change what later frames may be: welcome's limit and heartbeat, the judged side's
// close and fatal errors, cancelled.
void WireMonitor::note_state(Side from, std::uint8_t op, const Map& header) {
  if (is(op, OpCode::welcome)) {
    welcomed_ = true;
    const auto max_frame = uint_or_zero(header, "max_frame");
    max_frame_ = max_frame && *max_frame != 0 ? *max_frame : kDefaultMaxFrame;
    heartbeat_s_ = uint_or_zero(header, "heartbeat").value_or(0);
  }
  if (is(op, OpCode::close)) heartbeat_s_ = 0;  // closing: the heartbeats are over
  if (!judged(from) || judged_last_frame_at_) return;
  if (is(op, OpCode::close) && !peer_closed_) judged_closed_first_ = true;
  if (is(op, OpCode::close) && peer_closed_) {
    judged_last_frame_at_ = last_from_judged_;
    last_frame_rule_ = kCloseSocket;
  }
  if (is(op, OpCode::error) && flag(header, "fatal")) {
    judged_last_frame_at_ = last_from_judged_;
    last_frame_rule_ = kFatal;
  }
  if (is(op, OpCode::cancelled)) {
    const auto sub = uint_or_zero(header, "sub");
    auto it = sub ? subs_.find(*sub) : subs_.end();
    if (it != subs_.end() && it->second.ended_by == nullptr) it->second.ended_by = kCancelled;
  }
}

// Design rules: exactly one reply per request, and none without one. ok and get_ok always answer a rid (0 when
// absent: the zero value); an error answers one only when it has a rid.
void WireMonitor::check_reply(std::uint8_t op, const Map& header, Clock::time_point at) {
  const bool reply = is(op, OpCode::ok) || is(op, OpCode::get_ok) || (is(op, OpCode::error) && find(header, "rid"));
  if (!reply || untracked_) return;
  const auto rid = uint_or_zero(header, "rid");
  if (!rid) return;
  auto it = pending_rids_.find(*rid);
  if (it == pending_rids_.end() || it->second == 0) {
    violation(kOneReply,
              "sent " + op_label(op) + " for rid " + std::to_string(*rid) +
                  ", which no request awaits (never sent, or already answered)",
              at);
    return;
  }
  --it->second;
  auto unsubscribe = unsubscribe_rids_.find(*rid);
  if (unsubscribe == unsubscribe_rids_.end()) return;
  if (is(op, OpCode::ok)) {
    auto sub = subs_.find(unsubscribe->second);
    if (sub != subs_.end() && sub->second.ended_by == nullptr) sub->second.ended_by = kUnsubscribed;
  }
  unsubscribe_rids_.erase(unsubscribe);
}

// Publishing / confirm: each seq confirmed once, a nack before any upto that covers it.
void WireMonitor::check_confirm(const Map& header, Clock::time_point at) {
  if (untracked_) return;
  if (!flag(header, "nack")) {
    const auto upto = uint_or_zero(header, "upto");
    if (!upto) return;
    for (auto it = outstanding_seqs_.begin(); it != outstanding_seqs_.end() && it->first <= *upto;) {
      confirmed_by_[it->first] = "upto";
      it = outstanding_seqs_.erase(it);
    }
    return;
  }
  const auto seq = uint_or_zero(header, "seq");
  if (!seq) return;
  auto it = outstanding_seqs_.find(*seq);
  if (it != outstanding_seqs_.end()) {
    if (--it->second == 0) outstanding_seqs_.erase(it);
    confirmed_by_[*seq] = "nack";
    return;
  }
  auto before = confirmed_by_.find(*seq);
  if (before != confirmed_by_.end() && before->second == std::string_view("upto")) {
    violation(kNackFirst, "nacked seq " + std::to_string(*seq) + " after an upto that covered it", at);
  } else {
    violation(kConfirmOnce,
              "nacked seq " + std::to_string(*seq) + ", which no publish awaits (" +
                  (before != confirmed_by_.end() ? "already nacked" : "never published with that seq") + ")",
              at);
  }
}

// Publishing / return: before the publish's confirm.
void WireMonitor::check_return(const Map& header, Clock::time_point at) {
  const auto seq = uint_or_zero(header, "seq");
  if (untracked_ || !seq || *seq == 0 || outstanding_seqs_.count(*seq)) return;
  auto confirmed = confirmed_by_.find(*seq);
  if (confirmed == confirmed_by_.end()) return;
  violation(kReturnFirst, "returned seq " + std::to_string(*seq) + " after its confirm (" + confirmed->second + ")",
            at);
}

// Consuming: tags (deliver and get_ok share one sequence, docs/spec-notes.md Q33), credit, and no deliveries
// after the subscription ended.
void WireMonitor::check_delivery(std::uint8_t op, const Map& header, Clock::time_point at) {
  const auto tag = uint_or_zero(header, "tag");
  if (tag) {
    if (last_tag_ == 0 && *tag != 1) {
      violation(kTagStart,
                "gave its first delivery on the connection (" + op_label(op) + ") tag " + std::to_string(*tag), at);
    } else if (last_tag_ != 0 && *tag <= last_tag_) {
      violation(kTagOrder,
                "gave " + op_label(op) + " tag " + std::to_string(*tag) + " after tag " + std::to_string(last_tag_),
                at);
    }
    last_tag_ = std::max(last_tag_, *tag);
  }
  if (!is(op, OpCode::deliver) || untracked_) return;
  const auto sub = uint_or_zero(header, "sub");
  if (!sub) return;
  auto it = subs_.find(*sub);
  if (it == subs_.end()) {
    violation(kCredit, "delivered to sub " + std::to_string(*sub) + ", which the client never subscribed (no credit)",
              at);
    return;
  }
  Subscription& s = it->second;
  if (s.ended_by != nullptr) {
    violation(s.ended_by,
              "delivered to sub " + std::to_string(*sub) + " after " +
                  (s.ended_by == kCancelled ? "cancelling it" : "its unsubscribe's ok"),
              at);
    return;
  }
  if (++s.delivered > s.credit) {
    violation(kCredit,
              "sent deliver " + std::to_string(s.delivered) + " to sub " + std::to_string(*sub) + " with credit " +
                  std::to_string(s.credit) + " granted so far",
              at);
  }
}

void WireMonitor::observe_unframeable(Side from, const std::string& what, bool websocket, Clock::time_point at) {
  if (!judged(from)) return void(untracked_ = true);
  violation(websocket ? kWebSocketMessage : kLen, "sent bytes that are no frame: " + what, at);
}

void WireMonitor::observe_untracked(Side from) {
  if (!judged(from)) untracked_ = true;
}

// Timing, proven by silence: the heartbeat ping, and the socket closing after the judged side's last frame.
void WireMonitor::observe_quiet(Side from, Clock::time_point at) {
  if (!judged(from) || ended_ || !last_from_judged_) return;
  const auto silent = at - *last_from_judged_;
  const auto ms = [](auto d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  if (welcomed_ && heartbeat_s_ > 0 && !judged_last_frame_at_) {
    const auto due = std::chrono::milliseconds(heartbeat_s_ * 500) + kHeartbeatTolerance;
    if (silent > due) {
      violation(kPing,
                "sent nothing for " + ms(silent) + " ms with heartbeat " + std::to_string(heartbeat_s_) +
                    " s: a ping was due after " + std::to_string(heartbeat_s_ * 500) + " ms (tolerance " +
                    ms(kHeartbeatTolerance) + " ms)",
                at);
    }
  }
  if (judged_last_frame_at_ && at - *judged_last_frame_at_ > kCloseTolerance) {
    violation(last_frame_rule_,
              std::string("kept the socket open ") + ms(at - *judged_last_frame_at_) + " ms after " +
                  (last_frame_rule_ == kFatal ? "an error with fatal: true" : "its reply to the client's close") +
                  " (tolerance " + ms(kCloseTolerance) + " ms)",
              at);
  }
}

void WireMonitor::observe_end(Side from, Clock::time_point at) {
  if (ended_) return;
  ended_ = true;
  if (!judged(from) || untracked_) return;
  if (peer_closed_ && !judged_last_frame_at_) {
    violation(kCloseReply, "closed the socket without replying close to the client's close", at);
  }
}

}  // namespace firemq::conform
