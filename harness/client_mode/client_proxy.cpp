#include "harness/client_mode/client_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "harness/client/websocket_framing.h"
#include "harness/proxy/proxy_sockets.h"
#include "harness/rules/frame_text.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/reply_codes.h"

namespace firemq::conform {
namespace {

// Large enough for any frame a client may legally send: the monitor, not the decoder, judges the limits.
constexpr std::size_t kDecoderLimit = 4 * kDefaultMaxFrame;
// How often a silent client is looked at: the monitor's close rule needs proven silence to judge.
constexpr int kQuietPollMs = 250;
// The header key the unknown_header_keys quirk adds; no version of the spec will name it.
constexpr const char* kUnknownKey = "x-conform-unknown-key";

// The broker's frame as the quirks make it: an unknown key in its header, a lower max_frame in welcome. A
// header that is no map passes as it is.
Bytes through_quirks(const RawFrame& frame, const ServerQuirks& quirks) {
  const bool lower = quirks.max_frame != 0 && frame.op() == static_cast<std::uint8_t>(OpCode::welcome);
  if (!quirks.unknown_header_keys && !lower) return frame_stream(frame.op(), frame.header(), frame.payload());
  auto header = frame.header().empty() ? Result<Value>(Value(Map{})) : decode_value(frame.header());
  if (!header || !header->is<Map>()) return frame_stream(frame.op(), frame.header(), frame.payload());
  Map map = *header->get_if<Map>();
  if (quirks.unknown_header_keys) map.push_back({Value(kUnknownKey), Value(std::string("ignore me"))});
  if (lower) {
    std::erase_if(map, [](const MapEntry& e) { return e.key == Value("max_frame"); });
    map.push_back({Value("max_frame"), Value(quirks.max_frame)});
  }
  Bytes encoded;
  encode_map(map, encoded);
  return frame_stream(frame.op(), encoded, frame.payload());
}

// RFC 6455 7.4.1's close codes the proxy sends, as the reference broker does.
constexpr std::uint16_t kWsCloseNormal = 1000;
constexpr std::uint16_t kWsCloseProtocolError = 1002;
constexpr std::uint16_t kWsCloseUnknownData = 1003;

// A server's WebSocket close frame (unmasked), with its code (RFC 6455 5.5.1).
Bytes ws_close(std::uint16_t code, std::string_view reason) {
  return encode_ws_frame(true, static_cast<std::uint8_t>(WsOpcode::close), close_payload(code, reason), {});
}

}  // namespace

struct ClientProxy::Connection {
  Connection(const std::string& connection_name, int client_fd, int broker_fd, Clock::time_point origin)
      : name(connection_name),
        client(std::make_unique<ServerStream>(client_fd)),
        broker(broker_fd),
        monitor(Side::client, connection_name, origin),
        rules(connection_name, origin) {}
  std::string name;
  std::unique_ptr<ServerStream> client;
  int broker;
  WireMonitor monitor;
  ClientRules rules;
  // TCP and TLS: the preamble, then frames.
  FrameDecoder from_client{StreamSide::server, kDecoderLimit};
  std::vector<std::uint8_t> first_bytes;  // the first 4 bytes, for the preamble rule
  bool framing_lost = false;
  // WebSocket: the upgrade request up to its blank line, then frames put together into messages.
  std::string upgrade_head;
  bool upgraded = false;
  WsFrameParser ws_frames{kDecoderLimit};
  WsMessageAssembler ws_messages{kDecoderLimit};
  bool first_message_seen = false;
  bool ws_close_sent = false;
  std::vector<std::uint8_t> client_ops;     // ops the client sent since the last send_to_client
  bool server_closed = false;               // the proxy sent close as the server: the broker is let go
  Clock::time_point last_to_client{};       // when the client was last written to (the silent quirk counts from it)
  std::optional<Clock::time_point> end_at;  // a fatal error held open: when the proxy ends the connection
  std::optional<Bytes> held_confirm;        // coalesce_confirms: the highest upto not yet sent on, and since when
  Clock::time_point held_since{};
  bool client_ended = false;  // the client ended the connection on its own
  std::thread up, down;
};

Result<std::unique_ptr<ClientProxy>, std::string> ClientProxy::start(const std::string& host, std::uint16_t port,
                                                                     ProxyTransport transport, ServerQuirks quirks,
                                                                     Clock::time_point origin) {
  if (uses_tls(transport.transport) && !transport.tls) return std::string("client proxy: TLS without a certificate");
  auto listener = listen_on_loopback();
  if (!listener) return "client proxy: " + listener.error();
  std::unique_ptr<ClientProxy> proxy(
      new ClientProxy(listener->fd, listener->port, host, port, std::move(transport), quirks, origin));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->accept_loop(); });
  return proxy;
}

ClientProxy::ClientProxy(int listener, std::uint16_t port, std::string host, std::uint16_t upstream,
                         ProxyTransport transport, ServerQuirks quirks, Clock::time_point origin)
    : listener_(listener),
      port_(port),
      upstream_host_(std::move(host)),
      upstream_port_(upstream),
      transport_(std::move(transport)),
      quirks_(quirks),
      origin_(origin) {}

ClientProxy::~ClientProxy() { stop(); }

void ClientProxy::accept_loop() {
  static constexpr std::string_view kFmq1 = "FMQ1";
  while (!stopping_) {
    pollfd pfd{listener_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int broker = connect_tcp(upstream_host_, upstream_port_);
    // A WebSocket client sends no FMQ1 ("without `FMQ1`"); the broker's fire listener wants it first.
    if (broker < 0 ||
        (websocket() && !write_all(broker, ByteView(reinterpret_cast<const std::uint8_t*>(kFmq1.data()), 4)))) {
      ::close(client);
      if (broker >= 0) ::close(broker);
      continue;
    }
    set_no_delay(client);
    std::lock_guard lock(mutex_);
    const std::string name = "client-" + std::to_string(connections_.size() + 1);
    auto& c = *connections_.emplace_back(std::make_unique<Connection>(name, client, broker, origin_));
    for (AskedFrame& asked : asked_of_next_connection_) c.rules.application_sends(std::move(asked));
    asked_of_next_connection_.clear();
    // The reader starts the other direction once the TLS handshake is over: nothing is written before.
    c.up = std::thread([this, &c] { client_to_broker(c); });
  }
}

void ClientProxy::seen(Connection& c, Side from, const RawFrame& frame) {
  const auto now = Clock::now();
  c.monitor.observe(from, frame, now);
  c.rules.observe(from, frame, now);
  TranscriptLine line;
  line.at_ms = std::chrono::duration<double, std::milli>(now - origin_).count();
  line.connection = c.name;
  line.direction = from == Side::client ? "sent" : "received";  // from the client's seat, as in broker mode
  line.op = op_label(frame.op());
  line.header_json = header_summary(frame.header());
  line.payload_size = frame.payload().size();
  line.payload_preview = preview(frame.payload());
  transcript_.push_back(std::move(line));
  if (from == Side::client) {
    c.client_ops.push_back(frame.op());
    frame_seen_.notify_all();
  }
}

void ClientProxy::note(Connection& c, const std::string& text) {
  TranscriptLine line;
  line.at_ms = std::chrono::duration<double, std::milli>(Clock::now() - origin_).count();
  line.connection = c.name;
  line.direction = "note";
  line.header_json = text;
  transcript_.push_back(std::move(line));
}

bool ClientProxy::judge_from_client(Connection& c, ByteView bytes, Bytes& to_broker) {
  return websocket() ? judge_websocket(c, bytes, to_broker) : judge_stream(c, bytes, to_broker);
}

// TCP and TLS: the preamble, then frames, each judged. The bytes go on to the broker as they came (not once
// the proxy closed as the server).
bool ClientProxy::judge_stream(Connection& c, ByteView bytes, Bytes& to_broker) {
  if (c.first_bytes.size() < 4) {
    const std::size_t take = std::min<std::size_t>(4 - c.first_bytes.size(), bytes.size());
    c.first_bytes.insert(c.first_bytes.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
    if (c.first_bytes.size() == 4) c.rules.observe_preamble(c.first_bytes, Clock::now());
  }
  for (ByteView todo = bytes; !todo.empty() && !c.framing_lost;) {
    const auto step = c.from_client.feed(todo);
    todo = todo.subspan(step.consumed);
    if (step.state == FrameDecoder::State::frame) seen(c, Side::client, c.from_client.take_frame());
    if (step.state == FrameDecoder::State::error) {
      c.monitor.observe_unframeable(Side::client, c.from_client.error().msg, false, Clock::now());
      c.framing_lost = true;  // the rest of the stream cannot be cut into frames: forwarded unjudged
    }
  }
  if (!c.server_closed) to_broker.insert(to_broker.end(), bytes.begin(), bytes.end());
  return true;
}

// WebSocket: the upgrade, then frames; each binary message is one FireMQ frame, judged, and goes on to the
// broker with its len put back.
bool ClientProxy::judge_websocket(Connection& c, ByteView bytes, Bytes& to_broker) {
  if (!c.upgraded && !upgrade(c, bytes)) return false;
  while (!bytes.empty()) {
    const auto step = c.ws_frames.feed(bytes);
    bytes = bytes.subspan(step.consumed);
    if (step.state == WsFrameParser::State::error) {
      c.monitor.observe_unframeable(Side::client, "no WebSocket frame: " + c.ws_frames.error(), true, Clock::now());
      return false;
    }
    if (step.state == WsFrameParser::State::frame && !on_websocket_frame(c, c.ws_frames.take_frame(), to_broker))
      return false;
  }
  return true;
}

// The HTTP/1.1 upgrade request, read up to its blank line, and its answer. `bytes` keeps what follows it.
bool ClientProxy::upgrade(Connection& c, ByteView& bytes) {
  static constexpr std::size_t kMaxUpgradeHead = 16 * 1024;
  const std::size_t before = c.upgrade_head.size();
  c.upgrade_head.append(bytes.begin(), bytes.end());
  const auto end = c.upgrade_head.find("\r\n\r\n");
  if (end == std::string::npos) {
    bytes = {};
    if (c.upgrade_head.size() <= kMaxUpgradeHead) return true;
    note(c, "the WebSocket upgrade request is longer than 16 KiB: refused");
    return false;
  }
  const std::size_t head_size = end + 4;
  bytes = bytes.subspan(head_size - before);
  const UpgradeAnswer answer = websocket_upgrade_answer(std::string_view(c.upgrade_head).substr(0, head_size));
  c.client->write_all(ByteView(reinterpret_cast<const std::uint8_t*>(answer.response.data()), answer.response.size()));
  if (!answer.upgraded) {
    note(c, "WebSocket upgrade refused: " + answer.why);
    return false;
  }
  c.upgraded = true;
  return true;
}

// One WebSocket frame from the client: data frames build messages, pings get their pong, a close its close
// (RFC 6455 5.5). Returns false once the client closed, or broke the WebSocket framing.
bool ClientProxy::on_websocket_frame(Connection& c, WsFrame frame, Bytes& to_broker) {
  const auto refuse = [&](const std::string& why) {
    c.monitor.observe_unframeable(Side::client, why, true, Clock::now());
    write_to_client(c, ws_close(kWsCloseProtocolError, "protocol error"));
    c.ws_close_sent = true;
    return false;
  };
  // "The server MUST close the connection upon receiving a frame that is not masked" (RFC 6455 5.1).
  if (!frame.masked) return refuse("a WebSocket frame without a mask (RFC 6455 5.1)");
  auto outcome = c.ws_messages.add(std::move(frame));
  if (auto* message = std::get_if<WsMessageAssembler::Message>(&outcome)) {
    if (!on_client_message(c, *message, to_broker)) return false;
  }
  if (auto* error = std::get_if<WsMessageAssembler::Error>(&outcome)) return refuse("WebSocket: " + error->why);
  auto* control = std::get_if<WsMessageAssembler::Control>(&outcome);
  if (control == nullptr) return true;
  const auto opcode = static_cast<WsOpcode>(control->frame.opcode);
  // A silent server answers nothing, WebSocket pings included: a pong would be a byte the client received.
  if (opcode == WsOpcode::ping && !quirks_.silent) {
    write_to_client(c, encode_ws_frame(true, static_cast<std::uint8_t>(WsOpcode::pong), control->frame.payload, {}));
  }
  if (opcode != WsOpcode::close) return true;
  if (!c.ws_close_sent) {
    const WsClose close = parse_close_payload(control->frame.payload);
    write_to_client(c, ws_close(close.code.value_or(kWsCloseNormal), ""));
    c.ws_close_sent = true;
  }
  return false;  // the client's WebSocket close ends its side of the conversation
}

// One whole WebSocket message: a FireMQ frame, judged and passed on; false once the message was refused.
bool ClientProxy::on_client_message(Connection& c, const WsMessageAssembler::Message& message, Bytes& to_broker) {
  const auto now = Clock::now();
  if (!c.first_message_seen) c.rules.observe_first_message(message.data, now);
  c.first_message_seen = true;
  if (message.opcode != WsOpcode::binary) {
    const std::string why = "a text WebSocket message: FireMQ frames travel in binary messages, one frame each";
    c.monitor.observe_unframeable(Side::client, why, true, now);
    return refuse_message(c, kWsCloseUnknownData, why);
  }
  auto frame = decode_message_frame(message.data, kDecoderLimit);
  if (!frame) {
    c.monitor.observe_unframeable(Side::client, frame.error().msg, true, now);
    return refuse_message(c, kWsCloseNormal, frame.error().msg);
  }
  seen(c, Side::client, *frame);
  if (c.server_closed) return true;
  const Bytes stream = frame_stream(frame->op(), frame->header(), frame->payload());
  to_broker.insert(to_broker.end(), stream.begin(), stream.end());
  return true;
}

// A message that is no FireMQ frame gets the reference broker's answer (net/websocket_transport.cpp): error
// 501, fatal, then a WebSocket close, and the connection ends. The client hears at once what was wrong, where
// a proxy that dropped the message would leave it waiting for an answer until its own deadline.
bool ClientProxy::refuse_message(Connection& c, std::uint16_t ws_close_code, const std::string& why) {
  op::Error error;
  error.code = static_cast<std::uint64_t>(ReplyCode::frame_error);
  error.msg = why;
  error.fatal = true;
  const Bytes frame = frame_stream(static_cast<std::uint8_t>(OpCode::error), encode_header(error), {});
  seen(c, Side::server, RawFrame(Bytes(frame.begin() + kLenSize, frame.end())));
  frame_to_client(c, frame);
  write_to_client(c, ws_close(ws_close_code, ""));
  c.ws_close_sent = true;
  c.server_closed = true;  // the broker never saw the message: it is let go
  ::shutdown(c.broker, SHUT_RDWR);
  return false;
}

// The client's bytes, judged, then passed on to the broker (outside the lock: the broker may be slow to read).
void ClientProxy::client_to_broker(Connection& c) {
  if (uses_tls(transport_.transport)) {
    auto handshake = c.client->accept_tls(*transport_.tls, Clock::now() + std::chrono::seconds(10));
    if (!handshake) {
      std::lock_guard lock(mutex_);
      note(c, handshake.error());
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) c.down = std::thread([this, &c] { broker_to_client(c); });
  }
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    const ReadOutcome read = c.client->read_some(buffer, kQuietPollMs);
    if (read.kind == ReadOutcome::Kind::timeout) {
      std::lock_guard lock(mutex_);
      if (!c.ws_frames.inside_frame()) c.monitor.observe_quiet(Side::client, Clock::now());
      if (c.end_at && Clock::now() >= *c.end_at) {
        c.end_at.reset();
        end_to_client(c);  // the held fatal error's "closes the connection after this frame", late
      }
      continue;
    }
    if (read.kind == ReadOutcome::Kind::closed) break;
    Bytes to_broker;
    bool more = false;
    {
      std::lock_guard lock(mutex_);
      more = judge_from_client(c, ByteView(buffer.data(), read.bytes), to_broker);
    }
    if (!to_broker.empty() && !write_all(c.broker, to_broker)) break;
    if (!more) break;
  }
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  if (c.first_bytes.size() < 4 && !c.first_bytes.empty()) c.rules.observe_preamble(c.first_bytes, now);
  if (!stopping_) {
    // The client ended it: its end proves its silence up to now, and may be its verdict on a silent server.
    c.monitor.observe_quiet(Side::client, now);
    c.rules.observe_client_end(now);
    c.client_ended = true;
  }
  c.monitor.observe_end(Side::client, now);
  c.rules.finish(now);
  ::shutdown(c.broker, SHUT_WR);
  if (c.ws_close_sent) c.client->shutdown_write();  // the WebSocket closing handshake is over: the server ends TCP
  frame_seen_.notify_all();
}

// The broker's frames, through the quirks, to the client.
void ClientProxy::broker_to_client(Connection& c) {
  FrameDecoder decoder(StreamSide::client, kDecoderLimit);
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    if (!wait_for_broker(c)) break;
    const ssize_t n = ::recv(c.broker, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    ByteView rest(buffer.data(), static_cast<std::size_t>(n));
    std::lock_guard lock(mutex_);
    if (c.server_closed) break;
    while (!rest.empty()) {
      const auto step = decoder.feed(rest);
      rest = rest.subspan(step.consumed);
      if (step.state == FrameDecoder::State::error) return c.client->shutdown_both();
      if (step.state != FrameDecoder::State::frame) continue;
      // A client that stopped reading (or a stopping proxy): the rest cannot reach it either, and waiting for
      // room once per frame under mutex_ would hold every step of the case.
      if (!pass_to_client(c, decoder.take_frame())) return c.client->shutdown_both();
    }
  }
  std::lock_guard lock(mutex_);
  if (!c.server_closed) flush_held_confirm(c);
  // A broker the proxy let go after its own close leaves the client to close its socket, as the spec asks.
  // A silent server stays silent, its end included.
  if (!c.server_closed && !quirks_.silent) end_to_client(c);
}

// Until the broker has bytes (true) or is gone (false); a held confirm goes on once kConfirmHold has passed.
bool ClientProxy::wait_for_broker(Connection& c) {
  while (true) {
    int wait_ms = -1;
    {
      std::lock_guard lock(mutex_);
      if (c.held_confirm) {
        const auto left = c.held_since + kConfirmHold - Clock::now();
        if (left <= Clock::duration::zero()) {
          if (!flush_held_confirm(c)) return false;
          continue;
        }
        wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) + 1;
      }
    }
    pollfd p{c.broker, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready != 0) return ready > 0;
  }
}

bool ClientProxy::pass_to_client(Connection& c, const RawFrame& original) {
  const auto op = original.op();
  if (quirks_.silent || (quirks_.no_pings && op == static_cast<std::uint8_t>(OpCode::ping))) return true;
  const Bytes out = through_quirks(original, quirks_);
  if (quirks_.coalesce_confirms && op == static_cast<std::uint8_t>(OpCode::confirm)) {
    auto header = original.header().empty() ? Result<Value>(Value(Map{})) : decode_value(original.header());
    const Map* map = header ? header->get_if<Map>() : nullptr;
    const Value* nack = map != nullptr ? find(*map, "nack") : nullptr;
    if (nack == nullptr || *nack != Value(true)) {
      if (!c.held_confirm) c.held_since = Clock::now();
      c.held_confirm = out;  // the broker's uptos only grow: the latest covers the ones it replaces
      return true;
    }
  } else if (!flush_held_confirm(c)) {
    return false;  // anything but a nack: the held upto goes first, so that the order stays the broker's
  }
  seen(c, Side::server, RawFrame(Bytes(out.begin() + 4, out.end())));
  return frame_to_client(c, out);
}

bool ClientProxy::flush_held_confirm(Connection& c) {
  if (!c.held_confirm) return true;
  const Bytes out = std::move(*c.held_confirm);
  c.held_confirm.reset();
  seen(c, Side::server, RawFrame(Bytes(out.begin() + 4, out.end())));
  return frame_to_client(c, out);
}

bool ClientProxy::frame_to_client(Connection& c, ByteView stream_frame) {
  if (stream_frame.empty()) return true;
  if (!websocket()) return write_to_client(c, stream_frame);
  // "One binary WebSocket message per frame, without the length prefix": in one-byte fragments for the quirk.
  const ByteView message = stream_frame.subspan(kLenSize);
  const auto binary = static_cast<std::uint8_t>(WsOpcode::binary);
  if (!quirks_.single_bytes || message.size() < 2)
    return write_to_client(c, encode_ws_frame(true, binary, message, {}));
  for (std::size_t i = 0; i < message.size(); ++i) {
    const auto opcode = static_cast<std::uint8_t>(i == 0 ? binary : static_cast<std::uint8_t>(WsOpcode::continuation));
    if (!write_to_client(c, encode_ws_frame(i + 1 == message.size(), opcode, message.subspan(i, 1), {}))) return false;
  }
  return true;
}

bool ClientProxy::write_to_client(Connection& c, ByteView bytes) {
  c.last_to_client = Clock::now();  // a moment before the client gets it: its silence is never counted short
  if (!quirks_.single_bytes) return c.client->write_all(bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!c.client->write_all(bytes.subspan(i, 1))) return false;
  }
  return true;
}

void ClientProxy::end_to_client(Connection& c) {
  if (websocket() && c.upgraded && !c.ws_close_sent) {
    c.client->write_all(ws_close(kWsCloseNormal, ""));
    c.ws_close_sent = true;
  }
  c.client->shutdown_write();
}

void ClientProxy::set_quirks(ServerQuirks quirks) {
  std::lock_guard lock(mutex_);
  if (quirks.silent && !quirks_.silent) {
    // The silence counts from the last byte each client got, not from this call.
    silent_since_ = connections_.empty() ? Clock::now() : connections_.back()->last_to_client;
    for (auto& c : connections_) c->rules.server_silent(c->last_to_client);
  }
  if (!quirks.silent) silent_since_.reset();
  quirks_ = quirks;
}

std::optional<Clock::time_point> ClientProxy::silent_since() {
  std::lock_guard lock(mutex_);
  return silent_since_;
}

bool ClientProxy::send_to_client(std::uint8_t op, const Map& header, std::chrono::milliseconds end_after) {
  std::lock_guard lock(mutex_);
  if (connections_.empty()) return false;
  Connection& c = *connections_.back();
  Bytes encoded;
  if (!header.empty()) encode_map(header, encoded);
  const Bytes frame = frame_stream(op, encoded, {});
  c.client_ops.clear();
  seen(c, Side::server, RawFrame(Bytes(frame.begin() + 4, frame.end())));
  if (!frame_to_client(c, frame)) return false;
  const bool fatal = op == static_cast<std::uint8_t>(OpCode::error) && find(header, "fatal") != nullptr &&
                     *find(header, "fatal") == Value(true);
  if (op == static_cast<std::uint8_t>(OpCode::close) || fatal) {
    c.server_closed = true;  // the client's answer is for us: the broker is let go
    ::shutdown(c.broker, SHUT_RDWR);
  }
  // "the server closes the connection after this frame": at once, or held open for the case's `end_after_ms`.
  if (fatal && end_after.count() > 0) c.end_at = Clock::now() + end_after;
  else if (fatal) end_to_client(c);
  return true;
}

bool ClientProxy::wait_for_client_end(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return frame_seen_.wait_until(lock, deadline,
                                [&] { return !connections_.empty() && connections_.back()->client_ended; });
}

void ClientProxy::application_closes() {
  std::lock_guard lock(mutex_);
  for (auto& c : connections_) {
    if (!c->client_ended && !c->server_closed) c->rules.application_closes();  // a connection already over owes nothing
  }
}

void ClientProxy::application_sends(AskedFrame asked) {
  std::lock_guard lock(mutex_);
  if (connections_.empty()) return;
  Connection& c = *connections_.back();
  if (!c.client_ended && !c.server_closed) c.rules.application_sends(std::move(asked));
}

void ClientProxy::application_connects(std::vector<AskedFrame> asked) {
  std::lock_guard lock(mutex_);
  asked_of_next_connection_ = std::move(asked);
}

void ClientProxy::application_withdraws(int command) {
  std::lock_guard lock(mutex_);
  std::erase_if(asked_of_next_connection_, [&](const AskedFrame& a) { return a.command == command; });
  for (auto& c : connections_) c->rules.application_withdraws(command);
}

bool ClientProxy::wait_for_client(std::uint8_t op, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return frame_seen_.wait_until(lock, deadline, [&] {
    if (connections_.empty()) return false;
    const auto& ops = connections_.back()->client_ops;
    return std::find(ops.begin(), ops.end(), op) != ops.end();
  });
}

void ClientProxy::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  // The acceptor was the only thread adding connections, so the list is read here without mutex_: a thread
  // waiting for room to write to a client that stopped reading holds mutex_, and these shutdowns wake it.
  std::vector<Connection*> all;
  for (auto& c : connections_) {
    c->client->shutdown_both();
    ::shutdown(c->broker, SHUT_RDWR);
    all.push_back(c.get());
  }
  for (Connection* c : all) {
    c->up.join();  // before down: the reader is what starts the writer
    if (c->down.joinable()) c->down.join();
    ::close(c->broker);
  }
  ::close(listener_);
}

std::vector<TranscriptLine> ClientProxy::transcript() {
  std::lock_guard lock(mutex_);
  return transcript_;
}

std::vector<MonitorViolation> ClientProxy::violations() {
  std::lock_guard lock(mutex_);
  std::vector<MonitorViolation> all;
  for (const auto& c : connections_) {
    all.insert(all.end(), c->monitor.violations().begin(), c->monitor.violations().end());
    all.insert(all.end(), c->rules.violations().begin(), c->rules.violations().end());
  }
  return all;
}

std::size_t ClientProxy::connections() {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

}  // namespace firemq::conform
