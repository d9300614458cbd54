#include "reference-broker/net/connection.h"

#include "reference-broker/core/log.h"
#include "reference-broker/core/memory_account.h"

namespace firemq {
namespace {

using boost::system::error_code;
// kLingerAfterClose, kMaxClosingTime and kMaxPendingBytes are config.h's.
// How long a batch of frames may stay open for bytes that are already waiting (Transport::has_buffered_input).
constexpr std::chrono::milliseconds kMaxBatchHold{1};

// Waits until `timer` is cancelled (a wake-up) or expires.
awaitable<void> wait(asio::steady_timer& timer) {
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
}

}  // namespace

void ConnectionRegistry::add(Connection* c) {
  connections_.insert(c);
  begin_handshake(c);
}

void ConnectionRegistry::begin_handshake(InHandshake* c) {
  if (handshaking_.size() >= max_handshakes_ && !handshaking_.empty()) handshaking_.front()->drop_in_handshake();
  handshaking_.push_back(c);
}

bool ConnectionRegistry::drop_oldest_handshake() {
  if (handshaking_.empty()) return false;
  handshaking_.front()->drop_in_handshake();  // it leaves the list as it goes
  return true;
}

void ConnectionRegistry::remove(Connection* c) {
  connections_.erase(c);
  handshaking_.remove(c);
}

void ConnectionRegistry::shutdown_all() {
  for (Connection* c : connections_) c->shutdown();
}

void ConnectionRegistry::set_alarm(bool active) {
  alarm_ = active;
  for (Connection* c : connections_) c->on_alarm_changed();
}

Connection::Connection(std::unique_ptr<Transport> transport, const MakeProtocol& make_protocol, SessionEnv env,
                       ConnectionRegistry& registry, asio::any_io_executor executor)
    : transport_(std::move(transport)),
      registry_(registry),
      env_core_(env.core),
      protocol_(make_protocol(*this, *transport_)),
      writer_wakeup_(executor),
      reader_wakeup_(executor),
      heartbeat_timer_(executor),
      handshake_timer_(executor),
      linger_timer_(executor),
      closing_deadline_(executor),
      batch_timer_(executor) {
  // The deadline covers the transport's own handshake (TLS, the WebSocket upgrade) as well as the protocol's:
  // a client that opens connections and never finishes them cannot hold them for long.
  handshake_timer_.expires_after(env.config.handshake_timeout);
  connected_at_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
}

void Connection::close_by_operator(const std::string& reason) {
  if (!opened_ || !protocol_->close_by_operator(reason)) stop();
}

void Connection::start() {
  registry_.add(this);
  spawn(&Connection::reader, "reader");
  spawn(&Connection::writer, "writer");
  spawn(&Connection::handshake_deadline, "handshake deadline");
}

void Connection::spawn(awaitable<void> (Connection::*coroutine)(), const char* what) {
  asio::co_spawn(
      handshake_timer_.get_executor(), [self = shared_from_this(), coroutine] { return ((*self).*coroutine)(); },
      stop_on_exception(what, [self = shared_from_this()] { self->stop(); }));
}

void Connection::shutdown() {
  // SIGTERM before the transport's handshake finished: there is no conversation to close yet.
  if (!opened_) return stop();
  protocol_->on_shutdown();
}

awaitable<void> Connection::reader() {
  auto opened = co_await transport_->open();
  if (!opened || stopped_) {
    if (!opened && !stopped_) {
      // The reason may quote what the peer sent (an HTTP request line, a TLS alert): bounded and escaped.
      log_line(std::string(transport_->scheme()) + " connection " + transport_->describe() +
               " refused: " + printable(opened.error(), 256));
    }
    stop();
    co_return;
  }
  opened_ = true;
  writer_wakeup_.cancel();
  // Reads until the peer is gone. While closing, what arrives is read and dropped: the close is lingering, so
  // that unread input does not make the kernel send a reset that destroys the last frames in flight.
  while (!stopped_) {
    co_await wait_until_readable();
    if (stopped_) co_return;
    if (!co_await transport_->read()) {
      stop();  // the peer closed or reset: nothing can be sent to it any more
      co_return;
    }
    heartbeat_.on_received(Clock::now());
    // A read already under way when an alarm fired completes; its bytes (one chunk at most) wait unprocessed.
    co_await wait_until_readable();
    if (stopped_) co_return;
    if (closing()) continue;
    while (take_input()) {
      // The rest of the read is already here: like bytes waiting in the transport, it belongs to this batch.
      hold_batch();
      co_await asio::post(handshake_timer_.get_executor(), use_awaitable);  // the other connections' turn
      co_await wait_until_readable();  // an alarm, or a full outbound queue, may have come meanwhile
      if (stopped_) co_return;
    }
    if (stopped_) co_return;
    if (!heartbeat_started_ && protocol_->phase() == ConnectionProtocol::Phase::open) start_heartbeat();
    if (transport_->has_buffered_input()) {
      hold_batch();  // more frames are already here: one confirm for them all
    } else {
      end_batch();
    }
  }
}

void Connection::end_batch() {
  batch_held_ = false;
  batch_timer_.cancel();
  write_out_journal();                       // the records of this batch's publishes go to the OS and the fsync starts
  protocol_->end_batch();                    // one confirm for everything this batch brought
  protocol_->tell_alarm(registry_.alarm());  // a connection that just published during an alarm is paused now
}

void Connection::hold_batch() {
  if (batch_held_) return;
  batch_held_ = true;
  // Bytes waiting may not be a whole frame (a WebSocket ping, half a message): the batch ends anyway after
  // kMaxBatchHold, so a held confirm is never late by more than that.
  batch_timer_.expires_after(kMaxBatchHold);
  batch_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec && self->batch_held_ && !self->stopped_) self->end_batch();
  });
}

awaitable<void> Connection::wait_until_readable() {
  // The outbound queue is bounded: a peer that does not read what it asks for stops being read. While an alarm
  // holds, a publishing connection is not read either ("throttled by the server no longer reading its socket").
  // A closing connection is drained regardless.
  auto gated = [this] { return !stopped_ && !closing() && (pending_bytes_ > kMaxPendingBytes || paused_by_alarm()); };
  while (gated()) {
    reader_wakeup_.expires_at(asio::steady_timer::time_point::max());
    co_await wait(reader_wakeup_);
  }
}

bool Connection::take_input() {
  // Stops as soon as the protocol has closed or failed: what follows a close is not acted on.
  return !stopped_ && !closing() && protocol_->take_input(*transport_);
}

void Connection::drop_in_handshake() {
  log_line(std::string(transport_->scheme()) + " connection " + transport_->describe() +
           " dropped: too many connections in their handshake (--max-handshakes)");
  stop();
}

void Connection::start_heartbeat() {
  heartbeat_started_ = true;
  handshake_timer_.cancel();
  registry_.handshake_done(this);
  heartbeat_.start(protocol_->heartbeat(), Clock::now());
  if (!heartbeat_.enabled()) return;
  spawn(&Connection::heartbeat, "heartbeat");
}

awaitable<void> Connection::writer() {
  Bytes batch;
  while (!stopped_) {
    if (outbound_.empty() || !opened_) {
      if (close_after_flush_ && opened_) {
        co_await lingering_close();
        co_return;
      }
      // Idle: both buffers' storage is given back; an idle connection holds none.
      Bytes().swap(batch);
      Bytes().swap(outbound_);
      writer_wakeup_.expires_at(asio::steady_timer::time_point::max());
      co_await wait(writer_wakeup_);
      continue;
    }
    // One turn of the event loop first: the frames that the connections already waiting their turn queue for
    // this one go out in the same write. A send on loopback costs about as much as 16 deliveries of 16 B
    // (docs/benchmarks.md, "Fewer, larger writes"), and a reader hands over at most kFramesPerTurn frames a turn.
    co_await asio::post(writer_wakeup_.get_executor(), use_awaitable);
    if (stopped_) co_return;
    write_out_journal();  // no deliver leaves before the store's record of it (redelivered after a kill -9)
    batch.clear();
    batch.swap(outbound_);  // outbound_ takes the emptied storage for the frames sent while these are written
    const std::size_t size = batch.size();
    const bool written = co_await transport_->write(batch);
    if (!written || stopped_) {  // stop() has already released every pending byte, this batch's included
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
  co_await transport_->begin_close();
  // The reader stops the connection when the peer ends its side; this bounds the wait for that.
  linger_timer_.expires_after(kLingerAfterClose);
  co_await wait(linger_timer_);
  stop();
}

awaitable<void> Connection::heartbeat() {
  while (!stopped_) {
    heartbeat_timer_.expires_at(heartbeat_.next_due());
    co_await wait(heartbeat_timer_);
    if (stopped_ || closing()) co_return;
    // A connection paused by an alarm is not read, so its heartbeats cannot be seen: it is not counted dead.
    if (paused_by_alarm()) heartbeat_.on_received(Clock::now());
    switch (heartbeat_.due(Clock::now())) {
      case HeartbeatMonitor::Due::send_ping:
        protocol_->send_heartbeat();
        heartbeat_.on_sent(Clock::now());  // queued now; a full socket must not cause a ping per tick
        break;
      case HeartbeatMonitor::Due::peer_dead:
        // A dead peer cannot read a frame: the socket is closed, as RabbitMQ does (docs/spec-notes.md).
        stop();
        co_return;
      case HeartbeatMonitor::Due::nothing: break;
    }
  }
}

awaitable<void> Connection::handshake_deadline() {
  error_code ec;
  co_await handshake_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (!ec && protocol_->phase() == ConnectionProtocol::Phase::handshake) stop();
}

void Connection::on_alarm_changed() {
  if (!stopped_) protocol_->tell_alarm(registry_.alarm());
  reader_wakeup_.cancel();  // re-check the gate in reader()
}

void Connection::queued(std::size_t bytes) {
  pending_bytes_ += bytes;
  MemoryAccount::add(bytes);  // frames waiting to be written count for the memory watermark
  writer_wakeup_.cancel();
}

void Connection::close_after_flush() {
  if (!close_after_flush_) {
    closing_deadline_.expires_after(kMaxClosingTime);
    closing_deadline_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->stop();
    });
  }
  close_after_flush_ = true;
  writer_wakeup_.cancel();
  reader_wakeup_.cancel();  // a reader held back by the gates drains the closing connection
}

void Connection::stop() {
  if (stopped_) return;
  stopped_ = true;
  protocol_->on_connection_lost();  // requeue what it held before anything else is delivered to it
  transport_->abort();
  writer_wakeup_.cancel();
  reader_wakeup_.cancel();
  heartbeat_timer_.cancel();
  handshake_timer_.cancel();
  linger_timer_.cancel();
  closing_deadline_.cancel();
  batch_timer_.cancel();
  registry_.remove(this);
  MemoryAccount::remove(pending_bytes_);  // what will never be written
  pending_bytes_ = 0;
}

}  // namespace firemq
