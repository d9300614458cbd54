#include "harness/client/wire.h"

#include <array>

#include "harness/client/client_tcp.h"
#include "harness/client/client_tls.h"
#include "protocol/messages.h"
#include "protocol/reply_codes.h"

namespace firemq::conform {
namespace {

// As large as any frame a broker may send (welcome.max_frame is 16 MiB by default), with room to spare.
constexpr std::size_t kMaxReceived = 64 * 1024 * 1024;

Error frame_error(std::string msg) { return make_error(ReplyCode::frame_error, std::move(msg)); }

}  // namespace

WireConnection::~WireConnection() { disconnect(); }

Connected WireConnection::connect(const WireAddress& address, Clock::time_point deadline) {
  transport_ = address.transport;
  auto tcp = TcpStream::connect(address.host, address.port, deadline);
  if (!tcp) return ConnectFailure{tcp.error()};
  std::unique_ptr<ByteStream> stream = std::move(*tcp);
  if (uses_tls(address.transport)) {
    auto tls = TlsStream::handshake(std::unique_ptr<TcpStream>(static_cast<TcpStream*>(stream.release())), address.host,
                                    address.tls, deadline);
    if (!tls) return ConnectFailure{tls.error()};
    stream = std::move(*tls);
  }
  if (is_websocket(address.transport)) {
    ws_ = std::make_unique<WebSocketClient>(std::move(stream), kMaxReceived);
    auto upgraded = ws_->upgrade(address, deadline);
    if (!upgraded) {
      ws_.reset();
      return ConnectFailure{upgraded.error().message, true, upgraded.error().http_status};
    }
  } else {
    stream_ = std::move(stream);
  }
  open_ = true;
  sent_decoder_.emplace(is_websocket(address.transport) ? StreamSide::client : StreamSide::server, kMaxReceived);
  return std::monostate{};
}

IoStatus WireConnection::connect(const std::string& host, std::uint16_t port, Clock::time_point deadline) {
  WireAddress address;
  address.host = host;
  address.port = port;
  auto connected = connect(address, deadline);
  if (!connected) return connected.error().message;
  return IoStatus::done();
}

bool WireConnection::send(ByteView bytes, Clock::time_point deadline) {
  if (!is_open()) return false;
  watch_sent(bytes);
  if (!ws_) return stream_->write_all(bytes, deadline);
  auto messages = translator_.feed(bytes);
  if (!messages) {
    untranslatable_ = messages.error();
    return false;
  }
  return messages->empty() || ws_->send_binary_messages(*messages, deadline);
}

bool WireConnection::send_frame(std::uint8_t op, ByteView header, ByteView payload, Clock::time_point deadline) {
  if (!is_open()) return false;
  watch_sent_frame(op, header, payload);
  if (!ws_) return stream_->write_all(frame_stream(op, header, payload), deadline);
  return ws_->send_message(WsOpcode::binary, frame_message(op, header, payload), 1, deadline);
}

bool WireConnection::ws_send_message(WsOpcode opcode, ByteView payload, std::size_t fragments,
                                     Clock::time_point deadline) {
  watch_untracked();
  return ws_ && is_open() && ws_->send_message(opcode, payload, fragments, deadline);
}

bool WireConnection::ws_send_frame(bool fin, std::uint8_t opcode, ByteView payload, Clock::time_point deadline) {
  watch_untracked();
  return ws_ && is_open() && ws_->send_frame(fin, opcode, payload, deadline);
}

bool WireConnection::ws_send_raw(ByteView bytes, Clock::time_point deadline) {
  watch_untracked();
  return ws_ && is_open() && ws_->send_raw(bytes, deadline);
}

WireEvent WireConnection::receive(Clock::time_point deadline) {
  if (!pending_.empty()) {
    WireEvent event = std::move(pending_.front());
    pending_.pop_front();
    return event;
  }
  if (!open_) return ClosedEvent{closed_how_.empty() ? "not connected" : closed_how_, std::nullopt};
  return ws_ ? receive_websocket(deadline) : receive_stream(deadline);
}

WireEvent WireConnection::receive_stream(Clock::time_point deadline) {
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (pending_.empty()) {
    if (closed_) return ClosedEvent{closed_how_, std::nullopt};
    const ReadOutcome read = stream_->read_some(buffer, deadline);
    if (read.kind == ReadOutcome::Kind::timeout) {
      // Nothing was waiting and nothing came: the broker was silent since its last frame (unless a frame is
      // half here).
      if (monitor_ && !decoder_.finish()) monitor_->observe_quiet(Side::server, Clock::now());
      return TimeoutEvent{};
    }
    if (read.kind == ReadOutcome::Kind::closed) {
      closed_ = true;
      closed_how_ = read.how;
      stream_ended();
      continue;
    }
    frame_received(ByteView(buffer.data(), read.bytes));
  }
  WireEvent event = std::move(pending_.front());
  pending_.pop_front();
  return event;
}

// Every complete frame of a read, at once: the monitor sees frames when they arrive, not when a step asks.
void WireConnection::frame_received(ByteView chunk) {
  while (!chunk.empty() && !framing_failed_) {
    const auto step = decoder_.feed(chunk);
    chunk = chunk.subspan(step.consumed);
    if (step.state == FrameDecoder::State::frame) {
      RawFrame frame = decoder_.take_frame();
      arrived(frame);
      pending_.push_back(FrameEvent{std::move(frame)});
    } else if (step.state == FrameDecoder::State::error) {
      framing_failed_ = true;
      if (monitor_) monitor_->observe_unframeable(Side::server, decoder_.error().msg, false, Clock::now());
      pending_.push_back(BadFramingEvent{decoder_.error()});
    }
  }
}

void WireConnection::arrived(const RawFrame& frame) {
  if (monitor_) monitor_->observe(Side::server, frame, Clock::now());
  if (on_received_) on_received_(frame);
}

// The broker's end of the stream: a frame cut short is bad framing, otherwise the connection closed.
void WireConnection::stream_ended() {
  if (Status partial = decoder_.finish(); partial && !framing_failed_) {
    framing_failed_ = true;
    if (monitor_) monitor_->observe_unframeable(Side::server, partial->msg, false, Clock::now());
    pending_.push_back(BadFramingEvent{*partial});
    return;
  }
  if (monitor_) monitor_->observe_end(Side::server, Clock::now());
  pending_.push_back(ClosedEvent{closed_how_, std::nullopt});
}

// The harness's own frames, for the monitor's context: stream bytes framed again (a case may send any bytes;
// once they are no frames, the monitor is told it cannot follow).
void WireConnection::watch_sent(ByteView bytes) {
  if (!monitor_ || sent_untracked_) return;
  while (!bytes.empty()) {
    const auto step = sent_decoder_->feed(bytes);
    bytes = bytes.subspan(step.consumed);
    if (step.state == FrameDecoder::State::frame)
      monitor_->observe(Side::client, sent_decoder_->take_frame(), Clock::now());
    if (step.state == FrameDecoder::State::error) return watch_untracked();
  }
}

void WireConnection::watch_sent_frame(std::uint8_t op, ByteView header, ByteView payload) {
  if (monitor_ && !sent_untracked_)
    monitor_->observe(Side::client, RawFrame(frame_message(op, header, payload)), Clock::now());
}

void WireConnection::watch_untracked() {
  sent_untracked_ = true;
  if (monitor_) monitor_->observe_untracked(Side::client);
}

// One binary message is one frame; anything else the broker sends is no FireMQ frame.
WireEvent WireConnection::receive_websocket(Clock::time_point deadline) {
  const auto unframeable = [this](Error error) {
    if (monitor_) monitor_->observe_unframeable(Side::server, error.msg, true, Clock::now());
    return BadFramingEvent{std::move(error)};
  };
  while (true) {
    WebSocketClient::Event event = ws_->receive(deadline);
    if (auto* m = std::get_if<WsMessageAssembler::Message>(&event)) {
      if (m->opcode == WsOpcode::text) {
        return unframeable(
            frame_error("a text WebSocket message (FireMQ frames are binary messages): " +
                        std::string(m->data.begin(), m->data.begin() + std::min<std::size_t>(m->data.size(), 64))));
      }
      auto frame = decode_message_frame(m->data, kMaxReceived);
      if (!frame) return unframeable(frame.error());
      arrived(*frame);
      return FrameEvent{std::move(*frame)};
    }
    if (std::holds_alternative<WebSocketClient::Pong>(event)) {
      ++ws_pongs_;
      if (stop_at_pong_) return TimeoutEvent{};
      continue;
    }
    if (auto* c = std::get_if<WebSocketClient::Closed>(&event)) {
      closed_ = true;
      closed_how_ = c->how;
      if (monitor_) monitor_->observe_end(Side::server, Clock::now());
      return ClosedEvent{c->how, c->code};
    }
    if (auto* bad = std::get_if<WebSocketClient::ProtocolError>(&event)) {
      return unframeable(frame_error("WebSocket: " + bad->why));
    }
    if (monitor_) monitor_->observe_quiet(Side::server, Clock::now());
    return TimeoutEvent{};
  }
}

WireConnection::PongWait WireConnection::wait_ws_pong(Clock::time_point deadline) {
  if (!ws_) return PongWait::not_websocket;
  const std::size_t before = ws_pongs_;
  stop_at_pong_ = true;
  while (ws_pongs_ == before) {
    WireEvent event = receive_websocket(deadline);
    if (ws_pongs_ != before) break;
    if (std::holds_alternative<TimeoutEvent>(event)) {
      stop_at_pong_ = false;
      return PongWait::timeout;
    }
    const bool closed = std::holds_alternative<ClosedEvent>(event);
    pending_.push_back(std::move(event));  // for the next receive(), in order
    if (closed) {
      stop_at_pong_ = false;
      return PongWait::closed;
    }
  }
  stop_at_pong_ = false;
  return PongWait::pong;
}

void WireConnection::disconnect() {
  if (monitor_) monitor_->observe_end(Side::client, Clock::now());
  if (stream_) stream_->close();
  if (ws_) ws_->close();
  closed_ = true;
  if (closed_how_.empty()) closed_how_ = "closed by the harness";
}

Result<std::unique_ptr<WireConnection>, std::string> open_session(const WireAddress& address, const std::string& user,
                                                                  const std::string& password, const std::string& vhost,
                                                                  const Map& client, Clock::time_point deadline) {
  auto wire = std::make_unique<WireConnection>();
  if (auto connected = wire->connect(address, deadline); !connected) return connected.error().message;
  op::Hello hello;
  hello.ver = 1;
  hello.vhost = vhost;
  hello.auth = {"plain", user, password};
  hello.client = client;
  Bytes bytes(kPreamble.begin(), kPreamble.end());
  const Bytes frame = encode_frame(hello);
  bytes.insert(bytes.end(), frame.begin(), frame.end());
  if (!wire->send(bytes, deadline)) return std::string("the connection closed before hello was sent");
  WireEvent event = wire->receive(deadline);
  auto* f = std::get_if<FrameEvent>(&event);
  if (f == nullptr || f->frame.op() != static_cast<std::uint8_t>(OpCode::welcome)) return std::string("no welcome");
  return wire;
}

Result<std::unique_ptr<WireConnection>, std::string> open_session(const Endpoint& endpoint,
                                                                  const std::string& client_name,
                                                                  Clock::time_point deadline) {
  WireAddress address;
  address.host = endpoint.host;
  address.port = endpoint.port;
  return open_session(address, endpoint.user, endpoint.password, endpoint.vhost,
                      Map{{Value("name"), Value(client_name)}}, deadline);
}

}  // namespace firemq::conform
