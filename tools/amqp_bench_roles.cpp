#include "tools/amqp_bench_roles.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

#include "protocol/amqp/content.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/methods.h"

namespace firemq::amqp_bench {

using namespace std::chrono;

namespace {

// A broker that stops confirming for this long fails the run rather than hanging it.
constexpr auto kConfirmTimeout = seconds(30);
// How long a consumer blocks in one read before it looks at the deadline again.
constexpr auto kConsumerPoll = milliseconds(50);

Clock::duration as_clock(duration<double> d) { return duration_cast<Clock::duration>(d); }

timeval as_timeval(Clock::duration d) {
  const auto us = std::max<std::int64_t>(0, duration_cast<microseconds>(d).count());
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

std::string text(amqp_bytes_t bytes) { return std::string(static_cast<const char*>(bytes.bytes), bytes.len); }

// A frame that is neither a delivery nor a confirm: a close or a cancel ends the run with the broker's reason;
// connection.blocked is noted (a memory or disk alarm: the figures that follow are throttled); others are ignored.
void handle_other_frame(const amqp_frame_t& frame, bool& blocked) {
  if (frame.frame_type != AMQP_FRAME_METHOD) return;
  const amqp_method_t& m = frame.payload.method;
  if (m.id == AMQP_CHANNEL_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_channel_close_t*>(m.decoded);
    throw std::runtime_error("channel closed by the broker: " + std::to_string(close->reply_code) + " " +
                             text(close->reply_text));
  }
  if (m.id == AMQP_CONNECTION_CLOSE_METHOD) {
    const auto* close = static_cast<const amqp_connection_close_t*>(m.decoded);
    throw std::runtime_error("connection closed by the broker: " + std::to_string(close->reply_code) + " " +
                             text(close->reply_text));
  }
  if (m.id == AMQP_BASIC_CANCEL_METHOD) throw std::runtime_error("the broker cancelled the consumer");
  if (m.id == AMQP_CONNECTION_BLOCKED_METHOD) blocked = true;
}

// ---- the producer ----

// The publishes not yet confirmed, in publish order (the first has tag first_tag_). Acks may be multiple (every
// tag up to this one) or single, in any order.
class ConfirmTracker {
 public:
  void published(Clock::time_point at) {
    pending_.push_back({at, false});
    ++unsettled_;
  }

  void settle(std::uint64_t tag, bool multiple, bool nack, Clock::time_point now, ProducerFigures& f) {
    if (tag < first_tag_) return;  // settled already (a repeated multiple ack)
    const std::uint64_t last = std::min<std::uint64_t>(tag - first_tag_, pending_.size() - 1);
    for (std::uint64_t i = multiple ? 0 : last; i <= last; ++i) {
      if (pending_[i].settled) continue;
      pending_[i].settled = true;
      --unsettled_;
      if (nack) {
        ++f.nacked;
      } else {
        ++f.confirmed;
        f.confirm_latency_ns.push_back(duration_cast<nanoseconds>(now - pending_[i].published_at).count());
      }
    }
    while (!pending_.empty() && pending_.front().settled) {
      pending_.pop_front();
      ++first_tag_;
    }
  }

  std::uint64_t unsettled() const { return unsettled_; }

 private:
  struct Pending {
    Clock::time_point published_at;
    bool settled;
  };
  std::deque<Pending> pending_;
  std::uint64_t first_tag_ = 1, unsettled_ = 0;
};

// Reads the broker's frames until at most `max_unsettled` publishes are unconfirmed; false if `until` came first.
bool await_confirms(Connection& c, ConfirmTracker& tracker, std::uint64_t max_unsettled, Clock::time_point until,
                    ProducerFigures& f) {
  while (tracker.unsettled() > max_unsettled) {
    const auto now = Clock::now();
    if (now >= until) return false;
    amqp_frame_t frame;
    timeval timeout = as_timeval(until - now);
    const int status = amqp_simple_wait_frame_noblock(c.state(), &frame, &timeout);
    if (status == AMQP_STATUS_TIMEOUT) return false;
    c.check_status(status, "waiting for confirms");
    const auto received_at = Clock::now();
    if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
      const auto* ack = static_cast<const amqp_basic_ack_t*>(frame.payload.method.decoded);
      tracker.settle(ack->delivery_tag, ack->multiple, false, received_at, f);
      f.last_confirm = received_at;
    } else if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
      const auto* nack = static_cast<const amqp_basic_nack_t*>(frame.payload.method.decoded);
      tracker.settle(nack->delivery_tag, nack->multiple, true, received_at, f);
      f.last_confirm = received_at;
    } else {
      handle_other_frame(frame, f.blocked);
    }
    amqp_maybe_release_buffers(c.state());
  }
  return true;
}

// The body's first 8 bytes carry the publish time, for the consumer's latency.
void stamp(std::vector<char>& body, Clock::time_point at) {
  if (body.size() < sizeof(std::int64_t)) return;
  const std::int64_t ns = duration_cast<nanoseconds>(at.time_since_epoch()).count();
  std::memcpy(body.data(), &ns, sizeof ns);
}

// With a rate, when publish number `seq` (from 1) is due; otherwise now.
Clock::time_point due_time(const RunPlan& plan, Clock::time_point start, std::uint64_t seq) {
  if (plan.rate <= 0) return Clock::now();
  return start + as_clock(duration<double>(static_cast<double>(seq - 1) / plan.rate));
}

// --batch: publishes encoded here and written `batch` at a time with one send() on rabbitmq-c's socket, as a
// client that buffers its writes does (Go's amqp091 and the Java client write through a buffer), rather than
// rabbitmq-c's one system call per frame. It shows what a broker's AMQP path costs when its reads are full,
// not when the client's pace cuts them to a message each. rabbitmq-c still reads (the confirms); it writes
// nothing meanwhile, so its state stays whole. The frames are protocol/amqp's, the codec tested against pika's
// bytes: basic.publish to the default exchange, a content header with delivery-mode, one body frame.
class PublishBatch {
 public:
  PublishBatch(const RunPlan& plan, std::size_t frame_max)
      : publish_(amqp::encode_method(amqp::Method::of(amqp::method::kBasicPublish).set("routing_key", plan.queue))),
        frame_max_(frame_max) {
    if (plan.body_size + amqp::kFrameOverhead > frame_max)
      throw std::invalid_argument("--batch: bodies must fit in one frame of " + std::to_string(frame_max) + " bytes");
    header_.set(amqp::property::kDeliveryMode, std::uint64_t{plan.persistent ? 2u : 1u});
  }
  void add(const std::vector<char>& body) {
    const std::size_t at = amqp::begin_frame(out_, amqp::FrameType::method, Connection::kChannel);
    out_.insert(out_.end(), publish_.begin(), publish_.end());
    amqp::end_frame(out_, at);
    amqp::append_content(out_, Connection::kChannel, header_,
                         ByteView(reinterpret_cast<const std::uint8_t*>(body.data()), body.size()), frame_max_);
  }
  bool empty() const { return out_.empty(); }
  // rabbitmq-c's socket does not block: a full send buffer is waited out (the broker reading slower than this).
  void send(Connection& c) {
    const int fd = amqp_get_sockfd(c.state());
    for (std::size_t at = 0; at < out_.size();) {
      const ssize_t n = ::send(fd, out_.data() + at, out_.size() - at, MSG_NOSIGNAL);
      if (n > 0) {
        at += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd writable{fd, POLLOUT, 0};
        const int ready = ::poll(&writable, 1, static_cast<int>(duration_cast<milliseconds>(kConfirmTimeout).count()));
        if (ready > 0) continue;
        throw std::runtime_error("publishing: the socket took nothing for 30 s");
      }
      throw std::runtime_error(std::string("publishing: send failed: ") + std::strerror(errno));
    }
    out_.clear();
  }

 private:
  const Bytes publish_;  // basic.publish's payload: the same for every publish of the run
  amqp::ContentHeader header_;
  std::size_t frame_max_;
  Bytes out_;
};

void publish_until_done(Connection& c, const RunPlan& plan, Clock::time_point start, const StartLine& line,
                        ProducerFigures& f) {
  const auto deadline = start + as_clock(plan.seconds);
  std::vector<char> body(plan.body_size, 'x');
  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = plan.persistent ? AMQP_DELIVERY_PERSISTENT : AMQP_DELIVERY_NONPERSISTENT;
  const amqp_bytes_t routing_key = amqp_cstring_bytes(plan.queue.c_str());
  std::optional<PublishBatch> batch;
  if (plan.batch > 0) batch.emplace(plan, static_cast<std::size_t>(amqp_get_frame_max(c.state())));
  ConfirmTracker tracker;
  for (std::uint64_t seq = 1; plan.count == 0 || seq <= plan.count; ++seq) {
    if (line.aborted()) return;
    const auto due = due_time(plan, start, seq);
    if (due >= deadline) break;
    if (plan.rate > 0) std::this_thread::sleep_until(due);
    const auto now = Clock::now();
    if (now >= deadline) break;
    stamp(body, now);
    if (batch) {
      batch->add(body);
    } else {
      c.check_status(amqp_basic_publish(c.state(), Connection::kChannel, amqp_empty_bytes, routing_key, 0, 0, &props,
                                        amqp_bytes_t{body.size(), body.data()}),
                     "publishing");
    }
    ++f.published;
    f.last_publish = now;
    if (plan.confirm_window > 0) tracker.published(now);
    const bool batch_full = batch && f.published % plan.batch == 0;
    if (batch_full) batch->send(c);
    if (batch && !batch_full) continue;
    // Without a batch, after each publish; with one, after each write: at most the window unconfirmed after it.
    if (plan.confirm_window == 0) continue;
    const std::uint64_t room = batch ? plan.batch : 1;
    if (!await_confirms(c, tracker, plan.confirm_window - room, now + kConfirmTimeout, f))
      throw std::runtime_error("no confirm within 30 s (" + std::to_string(tracker.unsettled()) + " unconfirmed)");
  }
  if (batch && !batch->empty()) batch->send(c);
  if (plan.confirm_window > 0 && !await_confirms(c, tracker, 0, Clock::now() + kConfirmTimeout, f))
    throw std::runtime_error("the last confirms did not come within 30 s");
}

// ---- the consumer ----

std::uint64_t latency_ns(const amqp_message_t& message, Clock::time_point received_at) {
  std::int64_t sent_ns;
  std::memcpy(&sent_ns, message.body.bytes, sizeof sent_ns);
  const std::int64_t now_ns = duration_cast<nanoseconds>(received_at.time_since_epoch()).count();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, now_ns - sent_ns));
}

void consume_until_done(Connection& c, const RunPlan& plan, Clock::time_point start, const StartLine& line,
                        DeliveryCounter& delivered, ConsumerFigures& f) {
  const auto deadline = start + as_clock(plan.seconds);
  bool blocked = false;
  std::uint32_t unacked = 0;
  std::uint64_t last_tag = 0;
  while (!line.aborted()) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (plan.expected_deliveries > 0 && delivered >= plan.expected_deliveries) break;
    timeval timeout = as_timeval(std::min<Clock::duration>(kConsumerPoll, deadline - now));
    amqp_envelope_t envelope;
    const amqp_rpc_reply_t reply = amqp_consume_message(c.state(), &envelope, &timeout, 0);
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) continue;
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      amqp_frame_t frame;  // not a delivery: read it to see what it is
      c.check_status(amqp_simple_wait_frame(c.state(), &frame), "reading a frame");
      handle_other_frame(frame, blocked);
      continue;
    }
    c.check(reply, "consuming");
    const auto received_at = Clock::now();
    ++f.received;
    ++delivered;
    f.last_receive = received_at;
    if (envelope.message.body.len >= sizeof(std::int64_t))
      f.latency_ns.push_back(latency_ns(envelope.message, received_at));
    last_tag = envelope.delivery_tag;
    amqp_destroy_envelope(&envelope);
    if (plan.auto_ack || ++unacked < plan.multi_ack_every) continue;
    c.check_status(amqp_basic_ack(c.state(), Connection::kChannel, last_tag, plan.multi_ack_every > 1), "acking");
    unacked = 0;
  }
  // Not measured: acks for what is left, so that nothing is redelivered while the queue is being deleted.
  if (unacked > 0) amqp_basic_ack(c.state(), Connection::kChannel, last_tag, 1);
}

}  // namespace

// ---- the start line ----

std::optional<Clock::time_point> StartLine::ready_and_wait() {
  std::unique_lock lock(mutex_);
  if (--waiting_for_ == 0) {
    start_ = Clock::now() + milliseconds(10);
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return start_.has_value() || aborted_; });
  if (aborted_) return std::nullopt;
  const Clock::time_point start = *start_;
  lock.unlock();
  std::this_thread::sleep_until(start);
  return start;
}

void StartLine::abort(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!aborted_) error_ = why;
  aborted_ = true;
  changed_.notify_all();
}

Clock::time_point StartLine::start_time() const {
  std::lock_guard lock(mutex_);
  return start_.value_or(Clock::time_point{});
}

std::string StartLine::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

// ---- the roles ----

void run_producer(const BrokerAddress& address, const RunPlan& plan, StartLine& line, ProducerFigures& figures) {
  try {
    Connection c(address);
    if (plan.confirm_window > 0) c.select_confirms();
    const auto start = line.ready_and_wait();
    if (start) publish_until_done(c, plan, *start, line, figures);
  } catch (const std::exception& e) {
    line.abort(std::string("producer: ") + e.what());
  }
}

void run_consumer(const BrokerAddress& address, const RunPlan& plan, StartLine& line, DeliveryCounter& delivered,
                  ConsumerFigures& figures) {
  try {
    Connection c(address);
    c.consume(plan.queue, plan.prefetch, plan.auto_ack);
    const auto start = line.ready_and_wait();
    if (start) consume_until_done(c, plan, *start, line, delivered, figures);
  } catch (const std::exception& e) {
    line.abort(std::string("consumer: ") + e.what());
  }
}

}  // namespace firemq::amqp_bench
