// The seam between the connection engine (connection.h) and a wire. A Transport reads the peer's bytes and gives
// them to the protocol (cut into FireMQ frames, or as bytes for AMQP's own decoder), writes frames, and ends the
// conversation in its own way; that is all that differs between TCP, TLS, WebSocket and WSS. Every policy (the bounded outbound queue, the alarm pause, heartbeats, the
// handshake deadline, close after an error) is the engine's, written once.
//
// Adapters: stream_transport.h (fire, fires: FMQ1 then length-prefixed frames, plain or inside TLS) and
// websocket_transport.h (ws, wss: one binary message per frame, without len and without FMQ1).
//
// Runs on the broker thread only. The engine calls read() and write() from two coroutines, at most one of each
// at a time; open() completes before either starts. The engine's reader is the only reader, from open() until
// the connection is gone, closing included: a transport whose close must read (TLS's close_notify exchange)
// does that reading inside read().
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/frame.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/session/handshake.h"

namespace firemq {

// What next_frame() found in the bytes read so far.
struct NextFrame {
  enum class Kind { need_more, frame, error };
  Kind kind = Kind::need_more;
  RawFrame frame;  // Kind::frame
  Error error;     // Kind::error: 501 frame-error, fatal
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The URL scheme clients use to reach this transport: "fire", "fires", "ws", "wss" or "amqp".
  virtual std::string_view scheme() const = 0;
  // "peer:port -> local:port", as RabbitMQ names connections (welcome.conn_id).
  virtual std::string describe() const = 0;
  // What the transport learnt before the first frame (the WebSocket URL's ?vhost=).
  virtual TransportHints hints() const { return {}; }

  // The transport's own handshake before any frame (the TLS handshake, the WebSocket upgrade's reply). The
  // error says why it failed; it is logged, there is no one to send it to.
  virtual awaitable<IoStatus> open() = 0;
  // Waits for the peer's next bytes. False when the connection is gone (end of stream, reset, aborted).
  virtual awaitable<bool> read() = 0;
  // The next frame in what read() brought, checked against `max_frame` (4 + len, docs/spec-notes.md).
  virtual NextFrame next_frame(std::size_t max_frame) = 0;
  // What read() brought and is not taken yet, for a protocol that cuts its own frames (AMQP 0-9-1), and taking
  // the first `n` of them: the view is valid until consume_bytes, which gives the read buffer back once every byte
  // is taken. Only the stream transports carry AMQP; a WebSocket transport has no byte stream and gives nothing.
  virtual ByteView unread_bytes() const { return {}; }
  virtual void consume_bytes(std::size_t /*n*/) {}
  // Whether the peer's next bytes are already here, once next_frame() has said need-more: the engine then
  // holds back what it coalesces per read (the confirm {upto}) for the next read, a moment at most. A TCP read
  // takes everything waiting, so only a transport whose read brings less (one WebSocket message) says yes.
  virtual bool has_buffered_input() { return false; }
  // Writes frames, given back to back in their stream form (len first; a WebSocket transport leaves each len out
  // and sends each frame as its own message). False when the connection is gone.
  virtual awaitable<bool> write(ByteView frames) = 0;
  // After the last frame: starts ending the conversation as the wire does (TCP: shut down sending; TLS: the
  // close_notify exchange; WebSocket: the close handshake). read() returns false once the peer has ended its
  // side too; the engine bounds the wait.
  virtual awaitable<void> begin_close() = 0;
  // Ends it now; pending reads and writes complete with an error.
  virtual void abort() = 0;
};

}  // namespace firemq
