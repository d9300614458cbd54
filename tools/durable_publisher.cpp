#include "tools/durable_publisher.h"

#include <algorithm>
#include <thread>
#include <variant>

#include "protocol/messages.h"

namespace firemq::tools {
namespace {

using namespace std::chrono;
using conform::Clock;
using conform::WireConnection;

class Publisher {
 public:
  Publisher(WireConnection& wire, const PublisherSpec& spec, PublisherResult& r)
      : wire_(wire), spec_(spec), r_(r), sent_(spec.window), body_(spec.size, 0x42) {
    publish_.key = spec.queue;
    publish_.persistent = true;
    r_.latency_us.reserve(spec.count != 0 ? spec.count : 1 << 20);
  }

  void run(const std::atomic<Clock::time_point>& stop_at) {
    for (;;) {
      const bool more = spec_.count != 0 ? r_.published < spec_.count : Clock::now() < stop_at.load();
      if (more && !paused_ && r_.published - r_.confirmed < spec_.window && !send_window()) return;
      if (r_.published == r_.confirmed && !paused_) {
        if (!more) return;
        continue;
      }
      if (!receive()) return;
    }
  }

 private:
  // Writes as many publishes as the window allows, in one batch.
  bool send_window() {
    Bytes batch;
    const std::uint64_t first = r_.published + 1;
    while (r_.published - r_.confirmed < spec_.window && (spec_.count == 0 || r_.published < spec_.count)) {
      publish_.seq = ++r_.published;
      stamp_body(publish_.seq);
      const Bytes frame = encode_frame(publish_, body_);
      batch.insert(batch.end(), frame.begin(), frame.end());
    }
    const auto now = Clock::now();
    for (std::uint64_t s = first; s <= r_.published; ++s) sent_[s % spec_.window] = now;
    if (wire_.send(batch, now + spec_.confirm_timeout)) return true;
    r_.error = "the connection broke while publishing";
    return false;
  }

  // The body says whose and which message it is (as far as it has room): a recovered message can be told.
  void stamp_body(std::uint64_t seq) {
    const std::size_t size = spec_.size;
    for (std::size_t i = 0; i < std::min<std::size_t>(size, 8); ++i) {
      body_[i] = static_cast<std::uint8_t>(seq >> (8 * (7 - i)));
    }
    for (std::size_t i = 8; i < std::min<std::size_t>(size, 12); ++i) {
      body_[i] = static_cast<std::uint8_t>(spec_.publisher_id >> (8 * (11 - i)));
    }
  }

  // Takes the next frame from the broker; false (with the error set) when the run must end.
  bool receive() {
    conform::WireEvent ev = wire_.receive(Clock::now() + spec_.confirm_timeout);
    const auto now = Clock::now();
    const std::string timeout = std::to_string(spec_.confirm_timeout.count()) + " s";
    if (std::holds_alternative<conform::TimeoutEvent>(ev)) {
      r_.error = paused_ ? "paused by flow control for " + timeout
                         : "no confirm for seq " + std::to_string(r_.confirmed + 1) + ".." +
                               std::to_string(r_.published) + " within " + timeout;
      return false;
    }
    if (auto* c = std::get_if<conform::ClosedEvent>(&ev)) return fail("connection closed: " + c->how);
    if (auto* b = std::get_if<conform::BadFramingEvent>(&ev)) {
      return fail("bad framing from the broker: " + b->error.msg);
    }
    auto decoded = decode_frame(std::get<conform::FrameEvent>(ev).frame);
    if (!decoded) return fail("undecodable frame from the broker: " + decoded.error().msg);
    return on_message(*decoded, now);
  }

  bool on_message(const Message& m, Clock::time_point now) {
    if (auto* c = std::get_if<op::Confirm>(&m)) return on_confirm(*c, now);
    if (auto* f = std::get_if<op::Flow>(&m)) {
      if (f->pause && !paused_) ++r_.flow_pauses;
      paused_ = f->pause;
    } else if (auto* e = std::get_if<op::Error>(&m)) {
      return fail("error " + std::to_string(e->code) + ": " + e->msg);
    } else if (auto* cl = std::get_if<op::Close>(&m)) {
      return fail("closed by the broker: " + std::to_string(cl->code) + " " + cl->msg);
    }
    return true;
  }

  bool on_confirm(const op::Confirm& c, Clock::time_point now) {
    if (c.nack) {
      return fail("nack for seq " + std::to_string(c.seq) + " (" + std::to_string(c.code) + " " + c.msg + ")");
    }
    if (c.upto > r_.published) {
      return fail("confirm upto " + std::to_string(c.upto) + " beyond the last publish " +
                  std::to_string(r_.published));
    }
    for (std::uint64_t s = r_.confirmed + 1; s <= c.upto; ++s) {
      const auto latency = duration_cast<microseconds>(now - sent_[s % spec_.window]);
      r_.latency_us.push_back(static_cast<std::uint32_t>(latency.count()));
    }
    if (c.upto > r_.confirmed) {
      r_.confirmed = c.upto;
      r_.last_confirm = now;
    }
    return true;
  }

  bool fail(std::string error) {
    r_.error = std::move(error);
    return false;
  }

  WireConnection& wire_;
  const PublisherSpec& spec_;
  PublisherResult& r_;
  std::vector<Clock::time_point> sent_;  // when each seq in the window was written, by seq % window
  Bytes body_;
  op::Publish publish_;
  bool paused_ = false;  // by the broker's flow {pause: true}
};

}  // namespace

void publish(WireConnection& wire, const PublisherSpec& spec, const std::atomic<Clock::time_point>& stop_at,
             const std::atomic<bool>& go, PublisherResult& r) {
  Publisher publisher(wire, spec, r);
  while (!go.load()) std::this_thread::yield();
  publisher.run(stop_at);
}

}  // namespace firemq::tools
