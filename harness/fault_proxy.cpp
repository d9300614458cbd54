#include "harness/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "harness/wire.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"

namespace firemq::conform {
namespace {

Rewrite pass(const RawFrame& frame) {
  return {{frame_stream(frame.op(), frame.header(), frame.payload())}, false};
}

bool is(const RawFrame& frame, OpCode op) { return frame.op() == static_cast<std::uint8_t>(op); }

// The frame with its header map changed by `edit`.
Rewrite edit_header(const RawFrame& frame, const std::function<void(Map&)>& edit) {
  auto value = frame.header().empty() ? Result<Value>(Value(Map{})) : decode_value(frame.header());
  if (!value || !value->is<Map>()) return pass(frame);
  Map map = *value->get_if<Map>();
  edit(map);
  Bytes header;
  encode_map(map, header);
  return {{frame_stream(frame.op(), header, frame.payload())}, false};
}

void set_field(Map& map, const std::string& key, Value v) {
  for (MapEntry& e : map) {
    if (e.key == Value(key)) {
      e.value = std::move(v);
      return;
    }
  }
  map.push_back({Value(key), std::move(v)});
}

void erase_field(Map& map, const std::string& key) {
  std::erase_if(map, [&](const MapEntry& e) { return e.key == Value(key); });
}

// A broker that ignores a queue argument: the argument is taken out of every declare_queue it is sent.
Fault ignoring_queue_argument(const std::string& argument) {
  return {"ignore-" + argument.substr(2), "the broker ignores the queue argument " + argument, pass,
          [argument](const RawFrame& f) {
            if (!is(f, OpCode::declare_queue)) return pass(f);
            return edit_header(f, [&argument](Map& m) {
              for (MapEntry& e : m) {
                if (e.key == Value("args") && e.value.is<Map>()) erase_field(std::get<Map>(e.value.v), argument);
              }
            });
          }};
}

std::uint64_t field_uint(const Map& map, const char* key) {
  const Value* v = find(map, key);
  const auto* u = v ? v->get_if<std::uint64_t>() : nullptr;
  return u ? *u : 0;
}

}  // namespace

const std::vector<Fault>& faults() {
  static const std::vector<Fault> all = {
      {"drop-pong", "the broker's pong frames are dropped", [](const RawFrame& f) {
         return is(f, OpCode::pong) ? Rewrite{} : pass(f);
       }},
      {"error-never-fatal", "every error frame says fatal: false", [](const RawFrame& f) {
         if (!is(f, OpCode::error)) return pass(f);
         return edit_header(f, [](Map& m) { erase_field(m, "fatal"); });
       }},
      {"error-without-rid", "error frames lose their rid", [](const RawFrame& f) {
         if (!is(f, OpCode::error)) return pass(f);
         return edit_header(f, [](Map& m) { erase_field(m, "rid"); });
       }},
      {"drop-close", "the broker's close frames are dropped", [](const RawFrame& f) {
         return is(f, OpCode::close) ? Rewrite{} : pass(f);
       }},
      {"close-after-540", "the connection is cut right after an error 540", [](const RawFrame& f) {
         Rewrite r = pass(f);
         if (!is(f, OpCode::error)) return r;
         auto value = decode_value(f.header());
         r.cut = value && value->is<Map>() && field_uint(*value->get_if<Map>(), "code") == 540;
         return r;
       }},
      {"drop-confirm", "the broker's confirm frames are dropped (a lost confirm)", [](const RawFrame& f) {
         return is(f, OpCode::confirm) ? Rewrite{} : pass(f);
       }},
      {"duplicate-deliver", "every deliver frame is sent twice (delivers beyond the credit)", [](const RawFrame& f) {
         Rewrite r = pass(f);
         if (is(f, OpCode::deliver)) r.frames.push_back(r.frames.front());
         return r;
       }},
      {"topic-hash-as-star", "the broker reads '#' in binding keys as '*' (a wrong topic match)", pass,
       [](const RawFrame& f) {
         if (!is(f, OpCode::bind)) return pass(f);
         return edit_header(f, [](Map& m) {
           const Value* key = find(m, "key");
           const auto* text = key ? key->get_if<std::string>() : nullptr;
           if (text == nullptr) return;
           std::string changed = *text;
           std::replace(changed.begin(), changed.end(), '#', '*');
           set_field(m, "key", Value(changed));
         });
       }},
      {"drop-flow", "the broker's flow frames are dropped (publishers are never told to pause)", [](const RawFrame& f) {
         return is(f, OpCode::flow) ? Rewrite{} : pass(f);
       }},
      ignoring_queue_argument("x-message-ttl"),
      ignoring_queue_argument("x-max-length"),
      ignoring_queue_argument("x-max-priority"),
      {"welcome-heartbeat-plus-one", "welcome.heartbeat is one more than negotiated", [](const RawFrame& f) {
         if (!is(f, OpCode::welcome)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "heartbeat", Value(field_uint(m, "heartbeat") + 1)); });
       }},
  };
  return all;
}

const Fault* find_fault(const std::string& name) {
  for (const Fault& f : faults()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Result<std::unique_ptr<FaultProxy>, std::string> FaultProxy::start(const Fault& fault, const std::string& host,
                                                                   std::uint16_t upstream_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return std::string("fault proxy: cannot listen: ") + std::strerror(errno);
  }
  std::unique_ptr<FaultProxy> proxy(new FaultProxy(fault, fd, ntohs(addr.sin_port), host, upstream_port));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->accept_loop(); });
  return proxy;
}

FaultProxy::~FaultProxy() {
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  ::close(listener_);
  acceptor_.join();
  {
    std::lock_guard lock(mutex_);
    for (int s : sockets_) ::shutdown(s, SHUT_RDWR);
  }
  for (std::thread& t : workers_) t.join();
}

void FaultProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    std::lock_guard lock(mutex_);
    workers_.emplace_back([this, client] { serve(client); });
  }
}

namespace {

bool write_all(int fd, ByteView bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return true;
}

using Rewriter = std::function<Rewrite(const RawFrame&)>;

// Frame by frame from `from` to `to`, each frame through `rewrite`; a frame that cannot be framed, or a rewrite
// that cuts, ends both directions.
void copy_frames(int from, int to, const Rewriter& rewrite) {
  FrameDecoder decoder(StreamSide::client, 64 * 1024 * 1024);
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    const ssize_t n = ::recv(from, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    ByteView rest(buffer.data(), static_cast<std::size_t>(n));
    while (!rest.empty()) {
      const auto step = decoder.feed(rest);
      rest = rest.subspan(step.consumed);
      if (step.state == FrameDecoder::State::error) return (void)::shutdown(to, SHUT_RDWR);
      if (step.state != FrameDecoder::State::frame) continue;
      const Rewrite r = rewrite(decoder.take_frame());
      for (const Bytes& frame : r.frames) write_all(to, frame);
      if (r.cut) {
        ::shutdown(to, SHUT_RDWR);
        ::shutdown(from, SHUT_RDWR);
        return;
      }
    }
  }
  ::shutdown(to, SHUT_WR);
}

// Client to broker with a rewrite: the preamble as it is, then frame by frame.
void copy_rewritten_upward(int from, int to, const Fault& fault) {
  std::array<std::uint8_t, 4> preamble;
  std::size_t have = 0;
  while (have < preamble.size()) {
    const ssize_t n = ::recv(from, preamble.data() + have, preamble.size() - have, 0);
    if (n <= 0) return (void)::shutdown(to, SHUT_WR);
    have += static_cast<std::size_t>(n);
  }
  write_all(to, preamble);
  copy_frames(from, to, fault.rewrite_upward);
}

// Client to broker: bytes as they are.
void copy_raw(int from, int to) {
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    const ssize_t n = ::recv(from, buffer.data(), buffer.size(), 0);
    if (n <= 0 || !write_all(to, ByteView(buffer.data(), static_cast<std::size_t>(n)))) break;
  }
  ::shutdown(to, SHUT_WR);
}

}  // namespace

void FaultProxy::serve(int client) {
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(upstream_port_);
  ::inet_pton(AF_INET, upstream_host_ == "localhost" ? "127.0.0.1" : upstream_host_.c_str(), &addr.sin_addr);
  if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(upstream);
    ::close(client);
    return;
  }
  int one = 1;
  ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  {
    std::lock_guard lock(mutex_);
    sockets_.insert(sockets_.end(), {client, upstream});
  }
  std::thread upward([this, client, upstream] {
    if (fault_.rewrite_upward) {
      copy_rewritten_upward(client, upstream, fault_);
    } else {
      copy_raw(client, upstream);
    }
  });
  copy_frames(upstream, client, fault_.rewrite);  // broker to client, through the fault
  upward.join();
  std::lock_guard lock(mutex_);
  std::erase(sockets_, client);
  std::erase(sockets_, upstream);
  ::close(client);
  ::close(upstream);
}

}  // namespace firemq::conform
