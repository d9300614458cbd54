// A typed struct per op, with every header field the spec lists, and the codec between them and frames.
//
// Rules of the spec's "Design rules" implemented here:
// - "Omitted header fields take their zero value": every field starts at its zero value. A nil value for a
//   known field is read as omitted too (docs/spec-notes.md, "nil for a field").
// - "Implementations ignore header keys they do not know": unknown keys are skipped.
// - A known field of the wrong type is a 502 syntax-error whose message names the field ("props.priority").
// - The encoders leave out fields that hold their zero value, which the rule above makes equivalent.
//
// Each struct lists its fields once, in `fields()`, which both the decoder and the encoder walk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/frame.h"
#include "protocol/ops.h"
#include "protocol/value.h"

namespace firemq {

// Message properties ("Message properties" table): kept as the map the publisher sent, so that every key and
// type reaches the consumer unchanged; the keys the spec names are checked for their type when decoded.
struct Props {
  Map entries;

  const Value* get(std::string_view key) const { return find(entries, key); }
  bool operator==(const Props&) const = default;
};

using StrList = std::vector<std::string>;

namespace op {

// hello.auth
struct Auth {
  std::string mech;
  std::string user;
  std::string pass;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("mech", s.mech), f("user", s.user), f("pass", s.pass);
  }
  bool operator==(const Auth&) const = default;
};

// welcome.server
struct ServerInfo {
  std::string name;
  std::string version;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("name", s.name), f("version", s.version);
  }
  bool operator==(const ServerInfo&) const = default;
};

#define FIREMQ_OP(Name, code) \
  static constexpr OpCode kOp = OpCode::code; \
  bool operator==(const Name&) const = default

struct Hello {
  FIREMQ_OP(Hello, hello);
  std::uint64_t ver = 0;
  std::string vhost;
  Auth auth;
  std::uint64_t heartbeat = 0;
  Map client;
  StrList caps;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("ver", s.ver), f("vhost", s.vhost), f("auth", s.auth), f("heartbeat", s.heartbeat), f("client", s.client),
        f("caps", s.caps);
  }
};

struct Welcome {
  FIREMQ_OP(Welcome, welcome);
  std::uint64_t ver = 0;
  ServerInfo server;
  std::string conn_id;
  std::uint64_t heartbeat = 0;
  std::uint64_t max_frame = 0;
  StrList caps;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("ver", s.ver), f("server", s.server), f("conn_id", s.conn_id), f("heartbeat", s.heartbeat),
        f("max_frame", s.max_frame), f("caps", s.caps);
  }
};

struct Ping {
  FIREMQ_OP(Ping, ping);
  template <class S, class F>
  static void fields(S&, F&&) {}
};

struct Pong {
  FIREMQ_OP(Pong, pong);
  template <class S, class F>
  static void fields(S&, F&&) {}
};

struct Close {
  FIREMQ_OP(Close, close);
  std::uint64_t code = 0;
  std::string msg;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("code", s.code), f("msg", s.msg);
  }
};

struct Ok {
  FIREMQ_OP(Ok, ok);
  std::uint64_t rid = 0;
  std::string name;
  std::uint64_t messages = 0;
  std::uint64_t consumers = 0;
  bool empty = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name), f("messages", s.messages), f("consumers", s.consumers), f("empty", s.empty);
  }
};

struct Error {
  FIREMQ_OP(Error, error);
  std::uint64_t rid = 0;
  std::uint64_t code = 0;
  std::string msg;
  bool fatal = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("code", s.code), f("msg", s.msg), f("fatal", s.fatal);
  }
};

struct Flow {
  FIREMQ_OP(Flow, flow);
  bool pause = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("pause", s.pause);
  }
};

struct DeclareExchange {
  FIREMQ_OP(DeclareExchange, declare_exchange);
  std::uint64_t rid = 0;
  std::string name;
  std::string type;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  bool passive = false;
  Map args;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name), f("type", s.type), f("durable", s.durable), f("auto_delete", s.auto_delete),
        f("internal", s.internal), f("passive", s.passive), f("args", s.args);
  }
};

struct DeleteExchange {
  FIREMQ_OP(DeleteExchange, delete_exchange);
  std::uint64_t rid = 0;
  std::string name;
  bool if_unused = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name), f("if_unused", s.if_unused);
  }
};

struct DeclareQueue {
  FIREMQ_OP(DeclareQueue, declare_queue);
  std::uint64_t rid = 0;
  std::string name;
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  bool passive = false;
  Map args;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name), f("durable", s.durable), f("exclusive", s.exclusive),
        f("auto_delete", s.auto_delete), f("passive", s.passive), f("args", s.args);
  }
};

struct DeleteQueue {
  FIREMQ_OP(DeleteQueue, delete_queue);
  std::uint64_t rid = 0;
  std::string name;
  bool if_unused = false;
  bool if_empty = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name), f("if_unused", s.if_unused), f("if_empty", s.if_empty);
  }
};

struct PurgeQueue {
  FIREMQ_OP(PurgeQueue, purge_queue);
  std::uint64_t rid = 0;
  std::string name;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("name", s.name);
  }
};

// bind and unbind share their fields.
struct BindFields {
  std::uint64_t rid = 0;
  std::string exchange;
  std::string queue;
  std::string to_exchange;
  std::string key;
  Map args;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("exchange", s.exchange), f("queue", s.queue), f("to_exchange", s.to_exchange), f("key", s.key),
        f("args", s.args);
  }
  bool operator==(const BindFields&) const = default;
};

struct Bind : BindFields {
  FIREMQ_OP(Bind, bind);
};

struct Unbind : BindFields {
  FIREMQ_OP(Unbind, unbind);
};

struct Publish {
  FIREMQ_OP(Publish, publish);
  std::uint64_t seq = 0;
  std::string exchange;
  std::string key;
  bool mandatory = false;
  bool persistent = false;
  Props props;
  Map headers;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("seq", s.seq), f("exchange", s.exchange), f("key", s.key), f("mandatory", s.mandatory),
        f("persistent", s.persistent), f("props", s.props), f("headers", s.headers);
  }
};

// Either {upto} (a positive confirm of every outstanding seq <= upto) or {seq, nack, code, msg}.
struct Confirm {
  FIREMQ_OP(Confirm, confirm);
  std::uint64_t upto = 0;
  std::uint64_t seq = 0;
  bool nack = false;
  std::uint64_t code = 0;
  std::string msg;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("upto", s.upto), f("seq", s.seq), f("nack", s.nack), f("code", s.code), f("msg", s.msg);
  }
};

struct Return {
  FIREMQ_OP(Return, return_);
  std::uint64_t seq = 0;
  std::uint64_t code = 0;
  std::string msg;
  std::string exchange;
  std::string key;
  Props props;
  Map headers;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("seq", s.seq), f("code", s.code), f("msg", s.msg), f("exchange", s.exchange), f("key", s.key),
        f("props", s.props), f("headers", s.headers);
  }
};

struct Subscribe {
  FIREMQ_OP(Subscribe, subscribe);
  std::uint64_t rid = 0;
  std::uint64_t sub = 0;
  std::string queue;
  std::uint64_t credit = 0;
  bool no_ack = false;
  bool exclusive = false;
  std::string tag;
  Map args;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("sub", s.sub), f("queue", s.queue), f("credit", s.credit), f("no_ack", s.no_ack),
        f("exclusive", s.exclusive), f("tag", s.tag), f("args", s.args);
  }
};

struct Unsubscribe {
  FIREMQ_OP(Unsubscribe, unsubscribe);
  std::uint64_t rid = 0;
  std::uint64_t sub = 0;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("sub", s.sub);
  }
};

struct Credit {
  FIREMQ_OP(Credit, credit);
  std::uint64_t sub = 0;
  std::uint64_t credit = 0;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("sub", s.sub), f("credit", s.credit);
  }
};

struct Deliver {
  FIREMQ_OP(Deliver, deliver);
  std::uint64_t sub = 0;
  std::uint64_t tag = 0;
  bool redelivered = false;
  std::string exchange;
  std::string key;
  Props props;
  Map headers;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("sub", s.sub), f("tag", s.tag), f("redelivered", s.redelivered), f("exchange", s.exchange), f("key", s.key),
        f("props", s.props), f("headers", s.headers);
  }
};

struct Cancelled {
  FIREMQ_OP(Cancelled, cancelled);
  std::uint64_t sub = 0;
  std::uint64_t code = 0;
  std::string msg;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("sub", s.sub), f("code", s.code), f("msg", s.msg);
  }
};

struct Ack {
  FIREMQ_OP(Ack, ack);
  std::uint64_t tag = 0;
  bool multiple = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("tag", s.tag), f("multiple", s.multiple);
  }
};

struct Nack {
  FIREMQ_OP(Nack, nack);
  std::uint64_t tag = 0;
  bool multiple = false;
  bool requeue = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("tag", s.tag), f("multiple", s.multiple), f("requeue", s.requeue);
  }
};

struct Get {
  FIREMQ_OP(Get, get);
  std::uint64_t rid = 0;
  std::string queue;
  bool no_ack = false;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("queue", s.queue), f("no_ack", s.no_ack);
  }
};

struct GetOk {
  FIREMQ_OP(GetOk, get_ok);
  std::uint64_t rid = 0;
  std::uint64_t tag = 0;
  bool redelivered = false;
  std::string exchange;
  std::string key;
  std::uint64_t remaining = 0;
  Props props;
  Map headers;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    f("rid", s.rid), f("tag", s.tag), f("redelivered", s.redelivered), f("exchange", s.exchange), f("key", s.key),
        f("remaining", s.remaining), f("props", s.props), f("headers", s.headers);
  }
};

#undef FIREMQ_OP

}  // namespace op

// One decoded header, of whichever op the frame carried. Alternatives in op-code order.
using Message = std::variant<op::Hello, op::Welcome, op::Ping, op::Pong, op::Close, op::Ok, op::Error, op::Flow,
                             op::DeclareExchange, op::DeleteExchange, op::DeclareQueue, op::DeleteQueue, op::PurgeQueue,
                             op::Bind, op::Unbind, op::Publish, op::Confirm, op::Return, op::Subscribe, op::Unsubscribe,
                             op::Credit, op::Deliver, op::Cancelled, op::Ack, op::Nack, op::Get, op::GetOk>;

OpCode op_of(const Message& message);

// Decodes a header (hlen bytes; empty means an empty map) for the op `code`.
// 540 (not fatal) for an op version 1 does not define; 502 for a header that is not a MessagePack map with
// string keys, or a known field of the wrong type. The Error carries the request's rid when it was readable.
Result<Message> decode_header(std::uint8_t code, ByteView header);
// The same, always the generic way: the header as a Value map first, then each field read out of it. decode_header
// reads the common case straight from the bytes and gives every other header to this one; the two agree on every
// header (fuzz_header_decoder checks it).
Result<Message> decode_header_generic(std::uint8_t code, ByteView header);
// decode_header's fast path alone: the message, or nullopt where it gives the header to the generic way.
std::optional<Message> scan_header(std::uint8_t code, ByteView header);

// Decodes a framed frame's header, and checks the payload rule: a payload on an op that carries none is a
// 501 frame-error (docs/spec-notes.md). The payload itself is frame.payload().
Result<Message> decode_frame(const RawFrame& frame);

// The header as a MessagePack map, zero-valued fields left out.
Bytes encode_header(const Message& message);

// A whole frame for TCP and TLS (with len), and for WebSocket (without).
Bytes encode_frame(const Message& message, ByteView payload = {});
// The frame in its TCP and TLS form appended to `out`, the header encoded in place: a connection's write buffer
// takes its frames this way, back to back, with no buffer of each frame's own.
void append_frame(Bytes& out, const Message& message, ByteView payload = {});
Bytes encode_message_frame(const Message& message, ByteView payload = {});

// A deliver whose names, props and headers are borrowed from what its sender already holds (a broker's queued
// message), so that they are encoded straight from there instead of being copied into an op::Deliver first. Its
// members have op::Deliver's names and it walks op::Deliver's own field list, so append_frame gives the same bytes
// for it as for the op::Deliver with the same values.
struct DeliverView {
  std::uint64_t sub = 0;
  std::uint64_t tag = 0;
  bool redelivered = false;
  std::string_view exchange;
  std::string_view key;
  const Props& props;
  const Map& headers;
  template <class S, class F>
  static void fields(S& s, F&& f) {
    op::Deliver::fields(s, std::forward<F>(f));
  }
  // The same deliver as an op, its names, props and headers copied.
  op::Deliver copy() const {
    return op::Deliver{sub, tag, redelivered, std::string(exchange), std::string(key), props, headers};
  }
};
void append_frame(Bytes& out, const DeliverView& deliver, ByteView payload);

// The header as a Value map, zero-valued fields left out: what encode_header writes, for tests and tools.
Map header_to_map(const Message& message);

}  // namespace firemq
