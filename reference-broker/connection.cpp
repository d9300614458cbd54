#include "reference-broker/connection.h"

#include <array>
#include <sstream>

#include "reference-broker/memory_account.h"

namespace firemq {
namespace {

using boost::system::error_code;
constexpr std::size_t kReadChunk = 64 * 1024;
// After the last frame of a closing connection, how long to wait for the peer's EOF before closing anyway.
// Closing with unread input would send a TCP reset, which can destroy the error or close frame in flight.
constexpr std::chrono::seconds kLingerAfterClose{2};

// Waits until `timer` is cancelled (a wake-up) or expires.
awaitable<void> wait(asio::steady_timer& timer) {
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
}

}  // namespace

void ConnectionRegistry::shutdown_all() {
  for (Connection* c : connections_) c->shutdown();
}

void ConnectionRegistry::set_alarm(bool active) {
  alarm_ = active;
  for (Connection* c : connections_) c->on_alarm_changed();
}

std::string Connection::describe(const asio::ip::tcp::socket& socket) {
  error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  const auto local = socket.local_endpoint(ec);
  std::ostringstream name;  // as RabbitMQ names connections: "peer -> local"
  name << peer.address().to_string() << ":" << peer.port() << " -> " << local.address().to_string() << ":"
       << local.port();
  return name.str();
}

Connection::Connection(asio::ip::tcp::socket socket, SessionEnv env, ConnectionRegistry& registry)
    : socket_(std::move(socket)),
      registry_(registry),
      env_core_(env.core),
      session_(env, *this, describe(socket_)),
      writer_wakeup_(socket_.get_executor()),
      reader_wakeup_(socket_.get_executor()),
      heartbeat_timer_(socket_.get_executor()),
      handshake_timer_(socket_.get_executor()) {
  handshake_timer_.expires_after(env.config.handshake_timeout);
}

void Connection::start() {
  registry_.add(this);
  error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  auto executor = socket_.get_executor();
  asio::co_spawn(executor, [self = shared_from_this()] { return self->reader(); }, asio::detached);
  asio::co_spawn(executor, [self = shared_from_this()] { return self->writer(); }, asio::detached);
  asio::co_spawn(executor, [self = shared_from_this()] { return self->handshake_deadline(); }, asio::detached);
}

awaitable<void> Connection::reader() {
  std::array<std::uint8_t, kReadChunk> buffer;
  while (!stopped_ && session_.state() != Session::State::closing) {
    // The outbound queue is bounded: a peer that does not read what it asks for stops being read. While an
    // alarm holds, a publishing connection is not read either ("throttled by the server no longer reading its
    // socket").
    while ((pending_bytes_ > kMaxPendingBytes || paused_by_alarm()) && !stopped_) {
      reader_wakeup_.expires_at(asio::steady_timer::time_point::max());
      co_await wait(reader_wakeup_);
    }
    error_code ec;
    const std::size_t n =
        co_await socket_.async_read_some(asio::buffer(buffer), asio::redirect_error(use_awaitable, ec));
    if (ec) {
      stop();  // the peer closed or reset: nothing can be sent to it any more
      co_return;
    }
    heartbeat_.on_received(Clock::now());
    // A read already under way when an alarm fired completes; its bytes (one chunk at most) wait unprocessed.
    while (paused_by_alarm() && !stopped_) {
      reader_wakeup_.expires_at(asio::steady_timer::time_point::max());
      co_await wait(reader_wakeup_);
    }
    if (stopped_) co_return;
    consume(ByteView(buffer.data(), n));
    write_out_journal();  // the records of this read's publishes go to the OS and the fsync starts
    session_.flush();     // one confirm {upto} for everything this read brought
    tell_flow();       // a connection that just published during an alarm is paused now
  }
}

void Connection::consume(ByteView bytes) {
  while (!bytes.empty() && session_.state() != Session::State::closing) {
    const auto step = decoder_.feed(bytes);
    bytes = bytes.subspan(step.consumed);
    if (step.state == FrameDecoder::State::error) return session_.on_framing_error(decoder_.error());
    if (step.state != FrameDecoder::State::frame) continue;
    session_.on_frame(decoder_.take_frame());
    decoder_.set_max_frame(session_.max_frame());
    if (!heartbeat_started_ && session_.state() == Session::State::open) {
      heartbeat_started_ = true;
      handshake_timer_.cancel();
      heartbeat_.start(session_.heartbeat(), Clock::now());
      if (heartbeat_.enabled()) {
        asio::co_spawn(socket_.get_executor(), [self = shared_from_this()] { return self->heartbeat(); },
                       asio::detached);
      }
    }
  }
}

awaitable<void> Connection::writer() {
  std::vector<Bytes> batch;
  std::vector<asio::const_buffer> buffers;
  while (!stopped_) {
    if (queue_.empty()) {
      if (close_after_flush_) {
        co_await lingering_close();
        co_return;
      }
      writer_wakeup_.expires_at(asio::steady_timer::time_point::max());
      co_await wait(writer_wakeup_);
      continue;
    }
    write_out_journal();  // no deliver leaves before the store's record of it (redelivered after a kill -9)
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    buffers.clear();
    std::size_t size = 0;
    for (const Bytes& frame : batch) {
      buffers.push_back(asio::buffer(frame));
      size += frame.size();
    }
    error_code ec;
    co_await asio::async_write(socket_, buffers, asio::redirect_error(use_awaitable, ec));
    if (ec || stopped_) {  // stop() has already released every pending byte, this batch's included
      stop();
      co_return;
    }
    pending_bytes_ -= size;
    MemoryAccount::remove(size);
    reader_wakeup_.cancel();
    heartbeat_.on_sent(Clock::now());
  }
}

awaitable<void> Connection::lingering_close() {
  error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  asio::steady_timer deadline(socket_.get_executor());
  deadline.expires_after(kLingerAfterClose);
  deadline.async_wait([self = shared_from_this()](error_code timer_ec) {
    if (!timer_ec) self->stop();
  });
  std::array<std::uint8_t, 4096> discard;
  while (!stopped_) {
    co_await socket_.async_read_some(asio::buffer(discard), asio::redirect_error(use_awaitable, ec));
    if (ec) break;
  }
  deadline.cancel();
  stop();
}

awaitable<void> Connection::heartbeat() {
  while (!stopped_) {
    heartbeat_timer_.expires_after(heartbeat_.check_every());
    co_await wait(heartbeat_timer_);
    if (stopped_ || session_.state() == Session::State::closing) co_return;
    // A connection paused by an alarm is not read, so its heartbeats cannot be seen: it is not counted dead.
    if (paused_by_alarm()) heartbeat_.on_received(Clock::now());
    switch (heartbeat_.due(Clock::now())) {
      case HeartbeatMonitor::Due::send_ping:
        send(op::Ping{}, {});
        heartbeat_.on_sent(Clock::now());  // queued now; a full socket must not cause a ping per tick
        break;
      case HeartbeatMonitor::Due::peer_dead:
        // A dead peer cannot read a frame: the socket is closed, as RabbitMQ does (docs/spec-notes.md).
        stop();
        co_return;
      case HeartbeatMonitor::Due::nothing:
        break;
    }
  }
}

awaitable<void> Connection::handshake_deadline() {
  error_code ec;
  co_await handshake_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (!ec && session_.state() == Session::State::awaiting_hello) stop();
}

void Connection::on_alarm_changed() {
  tell_flow();
  reader_wakeup_.cancel();  // re-check the gate in reader()
}

void Connection::tell_flow() {
  if (stopped_ || session_.state() != Session::State::open) return;
  // "The server sends pause: true when a memory or disk alarm fires ... pause: false" when they clear.
  if (paused_by_alarm() && !told_pause_) {
    send(op::Flow{true}, {});
    told_pause_ = true;
  } else if (!registry_.alarm() && told_pause_) {
    send(op::Flow{false}, {});
    told_pause_ = false;
  }
}

void Connection::send(const Message& message, ByteView payload) {
  if (stopped_) return;
  Bytes frame = encode_frame(message, payload);
  pending_bytes_ += frame.size();
  MemoryAccount::add(frame.size());  // frames waiting to be written count for the memory watermark
  queue_.push_back(std::move(frame));
  writer_wakeup_.cancel();
}

void Connection::close_after_flush() {
  close_after_flush_ = true;
  writer_wakeup_.cancel();
}

void Connection::stop() {
  if (stopped_) return;
  stopped_ = true;
  session_.on_connection_lost();  // requeue what it held before anything else is delivered to it
  error_code ec;
  socket_.close(ec);
  writer_wakeup_.cancel();
  reader_wakeup_.cancel();
  heartbeat_timer_.cancel();
  handshake_timer_.cancel();
  registry_.remove(this);
  MemoryAccount::remove(pending_bytes_);  // what will never be written
  pending_bytes_ = 0;
}

}  // namespace firemq
