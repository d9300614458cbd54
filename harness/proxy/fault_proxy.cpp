#include "harness/proxy/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "harness/client/wire.h"
#include "harness/proxy/proxy_sockets.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"

namespace firemq::conform {
namespace {

Rewrite pass(const RawFrame& frame) { return {{frame_stream(frame.op(), frame.header(), frame.payload())}, false, {}}; }

bool is(const RawFrame& frame, OpCode op) { return frame.op() == static_cast<std::uint8_t>(op); }

// The frame with its header map changed by `edit`.
Rewrite edit_header(const RawFrame& frame, const std::function<void(Map&)>& edit) {
  auto value = frame.header().empty() ? Result<Value>(Value(Map{})) : decode_value(frame.header());
  if (!value || !value->is<Map>()) return pass(frame);
  Map map = *value->get_if<Map>();
  edit(map);
  Bytes header;
  encode_map(map, header);
  return {{frame_stream(frame.op(), header, frame.payload())}, false, {}};
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

std::uint64_t header_uint(const RawFrame& frame, const char* key) {
  auto value = frame.header().empty() ? Result<Value>(Value(Map{})) : decode_value(frame.header());
  return value && value->is<Map>() ? field_uint(*value->get_if<Map>(), key) : 0;
}

Bytes framed(OpCode op, const Map& header, ByteView payload = {}) {
  Bytes encoded;
  encode_map(header, encoded);
  return frame_stream(static_cast<std::uint8_t>(op), encoded, payload);
}

// Faults that break exactly one of the wire monitor's rules (harness/rules/wire_monitor.h), named after what they do.

// `op` frames go out with `header` bytes as they are (not a map, a key that is no string, ...).
Fault with_header(std::string name, std::string description, OpCode op, Bytes header) {
  return {std::move(name), std::move(description), [op, header](const RawFrame& f) {
            if (!is(f, op)) return pass(f);
            return Rewrite{{frame_stream(f.op(), header, f.payload())}, false, {}};
          }};
}

// The tag each delivery goes out with, and back (ack and nack name the tag the client saw): a bijection, so
// the broker still knows every delivery.
Fault remapping_tags(std::string name, std::string description, std::function<std::uint64_t(std::uint64_t)> out,
                     std::function<std::uint64_t(std::uint64_t)> in) {
  auto remap = [](OpCode op1, OpCode op2, std::function<std::uint64_t(std::uint64_t)> f) {
    return [op1, op2, f](const RawFrame& frame) {
      if (!is(frame, op1) && !is(frame, op2)) return pass(frame);
      return edit_header(frame, [&f](Map& m) {
        if (find(m, "tag") != nullptr) set_field(m, "tag", Value(f(field_uint(m, "tag"))));
      });
    };
  };
  return {std::move(name), std::move(description), remap(OpCode::deliver, OpCode::get_ok, std::move(out)),
          remap(OpCode::ack, OpCode::nack, std::move(in))};
}

// The frames `when` picks, sent twice in a row.
Fault sent_twice(std::string name, std::string description, std::function<bool(const RawFrame&)> when) {
  return {std::move(name), std::move(description), [when](const RawFrame& f) {
            Rewrite r = pass(f);
            if (when(f)) r.frames.push_back(r.frames.front());
            return r;
          }};
}

// A confirm {upto: seq} covering the frame's seq; nothing for seq 0 (no confirm wanted).
Bytes upto_its_seq(const RawFrame& f) {
  const std::uint64_t seq = header_uint(f, "seq");
  return seq == 0 ? Bytes{} : framed(OpCode::confirm, {{Value("upto"), Value(seq)}});
}

// Before each `op` frame, `first` (made from it): a confirm or cancelled the spec wants after it, not before.
Fault preceded_by(std::string name, std::string description, OpCode op, std::function<Bytes(const RawFrame&)> first) {
  return {std::move(name), std::move(description), [op, first](const RawFrame& f) {
            if (!is(f, op)) return pass(f);
            return Rewrite{{first(f), pass(f).frames.front()}, false, {}};
          }};
}

// After each `op` frame that `when` picks, a frame of `next`: more after what must be the last frame.
Fault followed_by(std::string name, std::string description, OpCode op, std::function<bool(const RawFrame&)> when,
                  OpCode next) {
  return {std::move(name), std::move(description), [op, when, next](const RawFrame& f) {
            Rewrite r = pass(f);
            if (is(f, op) && when(f)) r.frames.push_back(framed(next, {}));
            return r;
          }};
}

// Every second delivery tag swapped with its neighbour: 1, 3, 2, 5, 4, ... (its own inverse).
std::uint64_t swap_pairs(std::uint64_t tag) { return tag < 2 ? tag : (tag % 2 == 0 ? tag + 1 : tag - 1); }

// A broker that pings late: the first ping of each connection is held 0.4 h, so that it arrives after 0.9 h of
// silence instead of h / 2. Only the first, so that the delays do not add up behind each other (pings come every
// h / 2): the dead-peer close and every later frame keep their time.
Fault late_first_ping() {
  Fault fault{"late-first-ping", "the first ping of each connection comes after 0.9 h of silence, not h / 2", pass};
  fault.rewrite_per_connection = [] {
    return [heartbeat_ms = std::uint64_t{0}, pinged = false](const RawFrame& f) mutable {
      if (is(f, OpCode::welcome)) heartbeat_ms = header_uint(f, "heartbeat") * 1000;
      if (!is(f, OpCode::ping) || pinged) return pass(f);
      pinged = true;
      Rewrite late = pass(f);
      late.hold = std::chrono::milliseconds(heartbeat_ms * 4 / 10);
      return late;
    };
  };
  return fault;
}

std::vector<Fault> monitor_rule_faults() {
  return {
      {"pong-hlen-past-the-frame", "pong frames say hlen 1 byte larger than the frame holds",
       [](const RawFrame& f) {
         if (!is(f, OpCode::pong)) return pass(f);
         Bytes bytes = pass(f).frames.front();
         Bytes hlen;
         append_u32_be(hlen, static_cast<std::uint32_t>(f.header().size() + 1));
         std::copy(hlen.begin(), hlen.end(), bytes.begin() + kLenSize + 1);
         return Rewrite{{bytes}, false, {}};
       }},
      with_header("pong-header-an-array", "pong headers are a MessagePack array, not a map", OpCode::pong, Bytes{0x90}),
      with_header("pong-header-int-key", "pong headers are {1: 1}: a key that is no string", OpCode::pong,
                  Bytes{0x81, 0x01, 0x01}),
      {"pong-with-payload", "pong frames carry a 1-byte payload",
       [](const RawFrame& f) {
         if (!is(f, OpCode::pong)) return pass(f);
         return Rewrite{{frame_stream(f.op(), f.header(), Bytes{'x'})}, false, {}};
       }},
      {"pong-sent-as-ack", "pong frames go out as op 0x35 (ack, a client-to-server op)",
       [](const RawFrame& f) {
         if (!is(f, OpCode::pong)) return pass(f);
         return Rewrite{{frame_stream(static_cast<std::uint8_t>(OpCode::ack), f.header(), f.payload())}, false, {}};
       }},
      {"welcome-over-64k", "welcome is padded past 65 536 bytes (an unknown key)",
       [](const RawFrame& f) {
         if (!is(f, OpCode::welcome)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "x-pad", Value(std::string(70000, 'p'))); });
       }},
      {"welcome-max-frame-1024", "welcome.max_frame says 1024 while larger frames are sent",
       [](const RawFrame& f) {
         if (!is(f, OpCode::welcome)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "max_frame", Value(std::uint64_t{1024})); });
       }},
      sent_twice("welcome-twice", "welcome is sent twice", [](const RawFrame& f) { return is(f, OpCode::welcome); }),
      sent_twice("duplicate-ok", "every ok frame is sent twice (two replies for one rid)",
                 [](const RawFrame& f) { return is(f, OpCode::ok); }),
      sent_twice("duplicate-nack", "every nack is sent twice (a seq confirmed twice)",
                 [](const RawFrame& f) { return is(f, OpCode::confirm) && header_uint(f, "seq") != 0; }),
      preceded_by("upto-before-nack", "each nack comes after an upto covering its seq", OpCode::confirm, upto_its_seq),
      preceded_by("confirm-before-return", "each return comes after an upto covering its seq", OpCode::return_,
                  upto_its_seq),
      remapping_tags(
          "tags-from-2", "delivery tags start at 2 (ack and nack are mapped back)",
          [](std::uint64_t t) { return t + 1; }, [](std::uint64_t t) { return t == 0 ? 0 : t - 1; }),
      remapping_tags("tags-swapped", "delivery tags 2 and 3, 4 and 5, ... are swapped (ack and nack mapped back)",
                     swap_pairs, swap_pairs),
      {"credit-plus-one", "the broker reads each subscribe's credit as one more", pass,
       [](const RawFrame& f) {
         if (!is(f, OpCode::subscribe)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "credit", Value(field_uint(m, "credit") + 1)); });
       }},
      {"unsubscribe-ignored", "unsubscribe is answered ok but never reaches the broker", pass,
       [](const RawFrame& f) {
         if (!is(f, OpCode::unsubscribe)) return pass(f);
         return Rewrite{{}, false, {framed(OpCode::ok, {{Value("rid"), Value(header_uint(f, "rid"))}})}};
       }},
      preceded_by("cancelled-then-delivered", "each deliver after the first is preceded by a cancelled for its sub",
                  OpCode::deliver,
                  [](const RawFrame& f) {
                    if (header_uint(f, "tag") < 2) return Bytes{};
                    return framed(OpCode::cancelled, {{Value("sub"), Value(header_uint(f, "sub"))},
                                                      {Value("code"), Value(std::uint64_t{404})}});
                  }),
      {"drop-ping", "the broker's ping frames are dropped",
       [](const RawFrame& f) { return is(f, OpCode::ping) ? Rewrite{} : pass(f); }},
      late_first_ping(),
      followed_by(
          "ping-after-close", "a ping follows each close the broker sends", OpCode::close,
          [](const RawFrame&) { return true; }, OpCode::ping),
      followed_by(
          "pong-after-fatal-error", "a pong follows each error with fatal: true", OpCode::error,
          [](const RawFrame& f) {
            auto value = decode_value(f.header());
            const Value* fatal = value && value->is<Map>() ? find(*value->get_if<Map>(), "fatal") : nullptr;
            return fatal != nullptr && *fatal == Value(true);
          },
          OpCode::pong),
  };
}

}  // namespace

const std::vector<Fault>& faults() {
  static const std::vector<Fault> all = {
      {"drop-pong", "the broker's pong frames are dropped",
       [](const RawFrame& f) { return is(f, OpCode::pong) ? Rewrite{} : pass(f); }},
      {"error-never-fatal", "every error frame says fatal: false",
       [](const RawFrame& f) {
         if (!is(f, OpCode::error)) return pass(f);
         return edit_header(f, [](Map& m) { erase_field(m, "fatal"); });
       }},
      {"error-without-rid", "error frames lose their rid",
       [](const RawFrame& f) {
         if (!is(f, OpCode::error)) return pass(f);
         return edit_header(f, [](Map& m) { erase_field(m, "rid"); });
       }},
      {"drop-close", "the broker's close frames are dropped",
       [](const RawFrame& f) { return is(f, OpCode::close) ? Rewrite{} : pass(f); }},
      {"close-after-540", "the connection is cut right after an error 540",
       [](const RawFrame& f) {
         Rewrite r = pass(f);
         if (!is(f, OpCode::error)) return r;
         auto value = decode_value(f.header());
         r.cut = value && value->is<Map>() && field_uint(*value->get_if<Map>(), "code") == 540;
         return r;
       }},
      {"drop-confirm", "the broker's confirm frames are dropped (a lost confirm)",
       [](const RawFrame& f) { return is(f, OpCode::confirm) ? Rewrite{} : pass(f); }},
      sent_twice("duplicate-deliver", "every deliver frame is sent twice (delivers beyond the credit)",
                 [](const RawFrame& f) { return is(f, OpCode::deliver); }),
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
      {"drop-flow", "the broker's flow frames are dropped (publishers are never told to pause)",
       [](const RawFrame& f) { return is(f, OpCode::flow) ? Rewrite{} : pass(f); }},
      ignoring_queue_argument("x-message-ttl"),
      ignoring_queue_argument("x-max-length"),
      ignoring_queue_argument("x-max-priority"),
      {"welcome-conn-id-renamed", "welcome.conn_id is not the name the management API shows",
       [](const RawFrame& f) {
         if (!is(f, OpCode::welcome)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "conn_id", Value("renamed-by-the-fault-proxy")); });
       }},
      {"welcome-heartbeat-plus-one", "welcome.heartbeat is one more than negotiated",
       [](const RawFrame& f) {
         if (!is(f, OpCode::welcome)) return pass(f);
         return edit_header(f, [](Map& m) { set_field(m, "heartbeat", Value(field_uint(m, "heartbeat") + 1)); });
       }},
  };
  static const std::vector<Fault> with_monitor_faults = [] {
    std::vector<Fault> out = all;
    for (Fault& f : monitor_rule_faults()) out.push_back(std::move(f));
    return out;
  }();
  return with_monitor_faults;
}

const Fault* find_fault(const std::string& name) {
  for (const Fault& f : faults()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Result<std::unique_ptr<FaultProxy>, std::string> FaultProxy::start(const Fault& fault, const std::string& host,
                                                                   std::uint16_t upstream_port) {
  auto listener = listen_on_loopback();
  if (!listener) return "fault proxy: " + listener.error();
  std::unique_ptr<FaultProxy> proxy(new FaultProxy(fault, listener->fd, listener->port, host, upstream_port));
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

Bytes concatenated(const std::vector<Bytes>& frames) {
  Bytes out;
  for (const Bytes& f : frames) out.insert(out.end(), f.begin(), f.end());
  return out;
}

// Frame by frame from `from` to `to`, each frame through `rewrite`; a frame that cannot be framed, or a rewrite
// that cuts, ends both directions.
void copy_frames(int from, int to, const Rewriter& rewrite, std::mutex& write_lock) {
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
      if (r.hold.count() > 0) std::this_thread::sleep_for(r.hold);  // what follows waits too, as behind a slow peer
      std::lock_guard lock(write_lock);
      write_all(to, concatenated(r.frames));
      write_all(from, concatenated(r.back));
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
void copy_rewritten_upward(int from, int to, const Fault& fault, std::mutex& write_lock) {
  std::array<std::uint8_t, 4> preamble;
  std::size_t have = 0;
  while (have < preamble.size()) {
    const ssize_t n = ::recv(from, preamble.data() + have, preamble.size() - have, 0);
    if (n <= 0) return (void)::shutdown(to, SHUT_WR);
    have += static_cast<std::size_t>(n);
  }
  write_all(to, preamble);
  copy_frames(from, to, fault.rewrite_upward, write_lock);
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
  const int upstream = connect_tcp(upstream_host_, upstream_port_);
  if (upstream < 0) {
    ::close(client);
    return;
  }
  set_no_delay(client);
  {
    std::lock_guard lock(mutex_);
    sockets_.insert(sockets_.end(), {client, upstream});
  }
  std::mutex write_lock;  // the client socket is written by both threads when a rewrite answers back
  std::thread upward([this, client, upstream, &write_lock] {
    if (fault_.rewrite_upward) {
      copy_rewritten_upward(client, upstream, fault_, write_lock);
    } else {
      copy_raw(client, upstream);
    }
  });
  const Rewriter rewrite = fault_.rewrite_per_connection ? fault_.rewrite_per_connection() : fault_.rewrite;
  copy_frames(upstream, client, rewrite, write_lock);  // broker to client, through the fault
  upward.join();
  std::lock_guard lock(mutex_);
  std::erase(sockets_, client);
  std::erase(sockets_, upstream);
  ::close(client);
  ::close(upstream);
}

}  // namespace firemq::conform
