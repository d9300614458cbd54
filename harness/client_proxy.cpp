#include "harness/client_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "harness/frame_text.h"
#include "harness/proxy_sockets.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

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

}  // namespace

struct ClientProxy::Connection {
  Connection(const std::string& connection_name, int client_fd, int broker_fd, Clock::time_point origin)
      : name(connection_name), client(client_fd), broker(broker_fd), monitor(Side::client, connection_name, origin), rules(connection_name, origin) {}
  std::string name;
  int client;
  int broker;
  WireMonitor monitor;
  ClientRules rules;
  FrameDecoder from_client{StreamSide::server, kDecoderLimit};  // the preamble, then frames
  std::vector<std::uint8_t> first_bytes;  // the first 4 bytes, for the preamble rule
  bool framing_lost = false;
  std::vector<std::uint8_t> client_ops;  // ops the client sent since the last send_to_client
  bool server_closed = false;            // the proxy sent close as the server: the broker is let go
  Clock::time_point last_to_client{};    // when the client was last written to (the silent quirk counts from it)
  std::thread up, down;
};

Result<std::unique_ptr<ClientProxy>, std::string> ClientProxy::start(const std::string& host, std::uint16_t port,
                                                                   ServerQuirks quirks, Clock::time_point origin) {
  auto listener = listen_on_loopback();
  if (!listener) return "client proxy: " + listener.error();
  std::unique_ptr<ClientProxy> proxy(new ClientProxy(listener->fd, listener->port, host, port, quirks, origin));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->accept_loop(); });
  return proxy;
}

ClientProxy::ClientProxy(int listener, std::uint16_t port, std::string host, std::uint16_t upstream, ServerQuirks quirks,
                         Clock::time_point origin)
    : listener_(listener), port_(port), upstream_host_(std::move(host)), upstream_port_(upstream), quirks_(quirks),
      origin_(origin) {}

ClientProxy::~ClientProxy() { stop(); }

void ClientProxy::accept_loop() {
  while (!stopping_) {
    pollfd pfd{listener_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int broker = connect_tcp(upstream_host_, upstream_port_);
    if (broker < 0) {
      ::close(client);
      continue;
    }
    set_no_delay(client);
    std::lock_guard lock(mutex_);
    const std::string name = "client-" + std::to_string(connections_.size() + 1);
    auto& c = *connections_.emplace_back(std::make_unique<Connection>(name, client, broker, origin_));
    c.up = std::thread([this, &c] { client_to_broker(c); });
    c.down = std::thread([this, &c] { broker_to_client(c); });
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

// Under mutex_: the client's bytes as they arrive, the preamble, then frames, each judged. Returns whether they
// go on to the broker (not once the proxy closed as the server).
bool ClientProxy::judge_from_client(Connection& c, ByteView bytes) {
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
  return !c.server_closed;
}

// The client's bytes, judged, then passed on to the broker (outside the lock: the broker may be slow to read).
void ClientProxy::client_to_broker(Connection& c) {
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    pollfd pfd{c.client, POLLIN, 0};
    if (::poll(&pfd, 1, kQuietPollMs) == 0) {
      std::lock_guard lock(mutex_);
      c.monitor.observe_quiet(Side::client, Clock::now());
      continue;
    }
    const ssize_t n = ::recv(c.client, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    const ByteView bytes(buffer.data(), static_cast<std::size_t>(n));
    bool forward = false;
    {
      std::lock_guard lock(mutex_);
      forward = judge_from_client(c, bytes);
    }
    if (forward && !write_all(c.broker, bytes)) break;
  }
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  if (c.first_bytes.size() < 4 && !c.first_bytes.empty()) c.rules.observe_preamble(c.first_bytes, now);
  if (!stopping_) {
    // The client ended it: its end proves its silence up to now, and may be its verdict on a silent server.
    c.monitor.observe_quiet(Side::client, now);
    c.rules.observe_client_end(now);
  }
  c.monitor.observe_end(Side::client, now);
  c.rules.finish(now);
  ::shutdown(c.broker, SHUT_WR);
  frame_seen_.notify_all();
}

// The broker's frames, through the quirks, to the client.
void ClientProxy::broker_to_client(Connection& c) {
  FrameDecoder decoder(StreamSide::client, kDecoderLimit);
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    const ssize_t n = ::recv(c.broker, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    ByteView rest(buffer.data(), static_cast<std::size_t>(n));
    std::lock_guard lock(mutex_);
    if (c.server_closed) break;
    while (!rest.empty()) {
      const auto step = decoder.feed(rest);
      rest = rest.subspan(step.consumed);
      if (step.state == FrameDecoder::State::error) return (void)::shutdown(c.client, SHUT_RDWR);
      if (step.state != FrameDecoder::State::frame) continue;
      const RawFrame original = decoder.take_frame();
      if (quirks_.silent || (quirks_.no_pings && original.op() == static_cast<std::uint8_t>(OpCode::ping))) continue;
      const Bytes out = through_quirks(original, quirks_);
      seen(c, Side::server, RawFrame(Bytes(out.begin() + 4, out.end())));
      write_to_client(c, out);
    }
  }
  std::lock_guard lock(mutex_);
  // A broker the proxy let go after its own close leaves the client to close its socket, as the spec asks.
  // A silent server stays silent, its end included.
  if (!c.server_closed && !quirks_.silent) ::shutdown(c.client, SHUT_WR);
}

bool ClientProxy::write_to_client(Connection& c, ByteView bytes) {
  c.last_to_client = Clock::now();  // a moment before the client gets it: its silence is never counted short
  if (!quirks_.single_bytes) return write_all(c.client, bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!write_all(c.client, bytes.subspan(i, 1))) return false;
  }
  return true;
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

bool ClientProxy::send_to_client(std::uint8_t op, const Map& header) {
  std::lock_guard lock(mutex_);
  if (connections_.empty()) return false;
  Connection& c = *connections_.back();
  Bytes encoded;
  if (!header.empty()) encode_map(header, encoded);
  const Bytes frame = frame_stream(op, encoded, {});
  c.client_ops.clear();
  seen(c, Side::server, RawFrame(Bytes(frame.begin() + 4, frame.end())));
  if (!write_to_client(c, frame)) return false;
  const bool fatal = op == static_cast<std::uint8_t>(OpCode::error) && find(header, "fatal") != nullptr &&
                     *find(header, "fatal") == Value(true);
  if (op == static_cast<std::uint8_t>(OpCode::close) || fatal) {
    c.server_closed = true;  // the client's answer is for us: the broker is let go
    ::shutdown(c.broker, SHUT_RDWR);
  }
  if (fatal) ::shutdown(c.client, SHUT_WR);
  return true;
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
  std::vector<Connection*> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& c : connections_) {
      ::shutdown(c->client, SHUT_RDWR);
      ::shutdown(c->broker, SHUT_RDWR);
      all.push_back(c.get());
    }
  }
  for (Connection* c : all) {
    c->up.join();
    c->down.join();
    ::close(c->client);
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
