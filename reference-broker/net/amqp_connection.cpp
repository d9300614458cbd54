#include "reference-broker/net/amqp_connection.h"

#include <iostream>

#include "protocol/amqp/frame.h"
#include "reference-broker/core/log.h"
#include "reference-broker/core/memory_account.h"
#include "reference-broker/net/stream_transport.h"

namespace firemq {
namespace {

using boost::system::error_code;

// Fairness between connections: a publisher's 64 KiB read can hold some 800 publishes of 16 B. Processed in one
// go, a consumer of the same queue (another connection, with prefetch 100) gets one window of deliveries per
// such read and falls ever further behind. So a read is processed in slices of this size with a turn of the
// event loop between them, in which the other connections read their acks and write their deliveries. With
// 4 KiB (about 50 such publishes) a consumer of a full-speed persistent publisher received 3x more than with the
// whole read at once; smaller slices cost the publisher more than they gave the consumer (docs/benchmarks.md).
constexpr std::size_t kFeedSlice = 4 * 1024;

awaitable<void> wait(asio::steady_timer& timer) {
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
}

}  // namespace

void AmqpConnectionRegistry::add(AmqpConnection* c) {
  connections_.insert(c);
  handshakes_.begin_handshake(c);
}

void AmqpConnectionRegistry::handshake_done(AmqpConnection* c) { handshakes_.handshake_done(c); }

void AmqpConnectionRegistry::remove(AmqpConnection* c) {
  connections_.erase(c);
  handshakes_.handshake_done(c);
}

void AmqpConnectionRegistry::shutdown_all() {
  for (AmqpConnection* c : connections_) c->shutdown();
}

void AmqpConnectionRegistry::set_alarm(bool active) {
  alarm_ = active;
  for (AmqpConnection* c : connections_) c->on_alarm_changed();
}

AmqpConnection::AmqpConnection(asio::ip::tcp::socket socket, SessionEnv env, AmqpConnectionRegistry& registry)
    : socket_(std::move(socket)),
      registry_(registry),
      core_model_(env.core),
      core_(env, static_cast<AmqpWire&>(*this), describe_endpoints(socket_), {std::nullopt, peer_address_of(socket_), std::nullopt}),
      writer_wakeup_(socket_.get_executor()),
      reader_wakeup_(socket_.get_executor()),
      heartbeat_timer_(socket_.get_executor()),
      handshake_timer_(socket_.get_executor()),
      linger_timer_(socket_.get_executor()),
      closing_deadline_(socket_.get_executor()),
      connected_at_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count()) {
  error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  // The protocol header, start-ok, tune-ok and open must all arrive within the handshake timeout.
  handshake_timer_.expires_after(env.config.handshake_timeout);
}

void AmqpConnection::start() {
  registry_.add(this);
  spawn(&AmqpConnection::reader, "reader");
  spawn(&AmqpConnection::writer, "writer");
  spawn(&AmqpConnection::handshake_deadline, "handshake deadline");
}

void AmqpConnection::spawn(awaitable<void> (AmqpConnection::*coroutine)(), const char* what) {
  asio::co_spawn(socket_.get_executor(), [self = shared_from_this(), coroutine] { return ((*self).*coroutine)(); },
                 stop_on_exception(what, [self = shared_from_this()] { self->stop(); }));
}

void AmqpConnection::shutdown() { core_.on_shutdown(); }

awaitable<void> AmqpConnection::reader() {
  while (!stopped_) {
    co_await wait_until_readable();
    if (stopped_) co_return;
    error_code ec;
    const std::size_t n = co_await socket_.async_read_some(asio::buffer(chunk_), asio::redirect_error(use_awaitable, ec));
    if (ec || stopped_) {
      stop();  // the peer closed or reset, or the linger ended
      co_return;
    }
    heartbeat_.on_received(Clock::now());
    co_await wait_until_readable();  // an alarm may have fired while the read was under way
    if (stopped_) co_return;
    if (core_.state() == AmqpConnectionCore::State::closing) continue;  // lingering: read and dropped
    for (std::size_t at = 0; at < n; at += kFeedSlice) {
      if (at > 0) {
        co_await asio::post(socket_.get_executor(), use_awaitable);  // the other connections' turn (kFeedSlice)
        co_await wait_until_readable();
        if (stopped_ || core_.state() == AmqpConnectionCore::State::closing) break;
      }
      core_.feed(ByteView(chunk_.data() + at, std::min(kFeedSlice, n - at)));
      end_batch();
    }
    if (stopped_) co_return;
    if (!heartbeat_started_ && core_.state() == AmqpConnectionCore::State::open) start_heartbeat();
  }
}

void AmqpConnection::end_batch() {
  write_out_journal();  // the records of this read's publishes go to the OS and the fsync starts
  core_.flush();        // one basic.ack (multiple) per channel for everything this read brought
  core_.tell_alarm(registry_.alarm());
}

awaitable<void> AmqpConnection::wait_until_readable() {
  // The same gates as the FireMQ engine's: a full outbound queue, or an alarm while this connection publishes.
  auto gated = [this] {
    return !stopped_ && core_.state() != AmqpConnectionCore::State::closing &&
           (pending_bytes_ > kMaxPendingBytes || paused_by_alarm());
  };
  while (gated()) {
    reader_wakeup_.expires_at(asio::steady_timer::time_point::max());
    co_await wait(reader_wakeup_);
  }
}

void AmqpConnection::start_heartbeat() {
  heartbeat_started_ = true;
  handshake_timer_.cancel();
  registry_.handshake_done(this);  // connection.open-ok sent: no longer under --max-handshakes
  heartbeat_.start(core_.heartbeat(), Clock::now());
  if (!heartbeat_.enabled()) return;
  spawn(&AmqpConnection::heartbeat, "heartbeat");
}

awaitable<void> AmqpConnection::writer() {
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
    write_out_journal();  // no delivery leaves before the store's record of it
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    buffers.clear();
    std::size_t size = 0;
    for (const Bytes& b : batch) buffers.emplace_back(asio::buffer(b)), size += b.size();
    error_code ec;
    co_await asio::async_write(socket_, buffers, asio::redirect_error(use_awaitable, ec));
    if (ec || stopped_) {
      stop();
      co_return;
    }
    pending_bytes_ -= size;
    MemoryAccount::remove(size);
    reader_wakeup_.cancel();
    heartbeat_.on_sent(Clock::now());
  }
}

awaitable<void> AmqpConnection::lingering_close() {
  error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  // The reader stops the connection when the peer ends its side; this bounds the wait for that.
  linger_timer_.expires_after(kLingerAfterClose);
  co_await wait(linger_timer_);
  stop();
}

awaitable<void> AmqpConnection::heartbeat() {
  while (!stopped_) {
    heartbeat_timer_.expires_at(heartbeat_.next_due());
    co_await wait(heartbeat_timer_);
    if (stopped_ || core_.state() == AmqpConnectionCore::State::closing) co_return;
    if (paused_by_alarm()) heartbeat_.on_received(Clock::now());  // not read while paused: not counted dead
    switch (heartbeat_.due(Clock::now())) {
      case HeartbeatMonitor::Due::send_ping:
        write(amqp::encode_heartbeat());
        heartbeat_.on_sent(Clock::now());
        break;
      case HeartbeatMonitor::Due::peer_dead:
        stop();  // "missed heartbeats": RabbitMQ closes the socket without a close method
        co_return;
      case HeartbeatMonitor::Due::nothing:
        break;
    }
  }
}

awaitable<void> AmqpConnection::handshake_deadline() {
  error_code ec;
  co_await handshake_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (!ec && core_.state() != AmqpConnectionCore::State::open) stop();
}

void AmqpConnection::drop_in_handshake() {
  log_line("amqp connection " + describe_endpoints(socket_) +
           " dropped: too many connections in their handshake (--max-handshakes)");
  stop();
}

void AmqpConnection::on_alarm_changed() {
  core_.tell_alarm(registry_.alarm());
  reader_wakeup_.cancel();
}

void AmqpConnection::write_out_journal() {
  if (Journal* journal = core_model_.journal()) journal->write_out();
}

void AmqpConnection::write(Bytes bytes) {
  if (stopped_) return;
  pending_bytes_ += bytes.size();
  MemoryAccount::add(bytes.size());
  queue_.push_back(std::move(bytes));
  writer_wakeup_.cancel();
}

void AmqpConnection::close_after_flush() {
  // As the FireMQ engine's: the whole close (writing out what is queued, then lingering) is bounded by
  // kMaxClosingTime. A peer that never reads would otherwise keep a closing connection, and its pending bytes,
  // forever: the writer waits on a full socket and the lingering close never starts.
  if (!close_after_flush_) {
    closing_deadline_.expires_after(kMaxClosingTime);
    closing_deadline_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->stop();
    });
  }
  close_after_flush_ = true;
  writer_wakeup_.cancel();
  reader_wakeup_.cancel();
}

void AmqpConnection::stop() {
  if (stopped_) return;
  stopped_ = true;
  core_.on_connection_lost();
  error_code ec;
  socket_.close(ec);
  writer_wakeup_.cancel();
  reader_wakeup_.cancel();
  heartbeat_timer_.cancel();
  handshake_timer_.cancel();
  linger_timer_.cancel();
  closing_deadline_.cancel();
  registry_.remove(this);
  MemoryAccount::remove(pending_bytes_);
  pending_bytes_ = 0;
}

}  // namespace firemq
