// The seam between the connection engine (connection.h) and the protocol spoken over it. The engine owns what
// every connection shares, whatever its protocol: the reader and its gates (the bounded outbound queue, the alarm
// pause), the writer and its one write per batch, the store's write-out before frames leave, heartbeats, the
// handshake deadline, the lingering close and the registry. A protocol is a policy the engine drives: it takes
// what the transport read, decides, and appends whole frames, encoded in place, to the engine's outbound buffer
// through ConnectionOutput.
//
// The policies: fire_protocol.h (FireMQ: one Session, frames cut by the transport) and amqp_protocol.h (AMQP
// 0-9-1: bytes cut into frames by the AMQP decoder, one session per channel).
//
// Runs on the broker thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "protocol/bytes.h"
#include "reference-broker/core/outbound_buffer.h"

namespace firemq {

class Transport;
class Session;
class AmqpConnectionCore;

// What a protocol writes through: the engine's outbound buffer (core/outbound_buffer.h), and the ends of the
// connection.
using ConnectionOutput = OutboundBuffer;

class ConnectionProtocol {
 public:
  // handshake: from accept until the protocol's own open (FireMQ's welcome, AMQP's connection.open-ok), under the
  // handshake deadline and --max-handshakes. closing: a close or fatal error was sent; what arrives is dropped.
  enum class Phase { handshake, open, closing };

  virtual ~ConnectionProtocol() = default;
  virtual Phase phase() const = 0;

  // Takes one turn's worth of what the transport has read. True: more of it is waiting; the engine gives the
  // other connections their turn first (fairness between a fast publisher and its consumers), then calls again.
  virtual bool take_input(Transport& transport) = 0;
  // The end of a batch of input, after the store's write-out: what the batch coalesced (one confirm for its
  // publishes) goes out.
  virtual void end_batch() = 0;
  // Flow control: after each batch and whenever the alarms change. The protocol tells a connection that has
  // published that it is paused (FireMQ's flow, AMQP's connection.blocked), and tells it again when they clear.
  virtual void tell_alarm(bool alarm) = 0;
  // While an alarm holds, a connection that has published is not read.
  virtual bool has_published() const = 0;

  // The heartbeat interval agreed in the handshake; zero: none.
  virtual std::chrono::seconds heartbeat() const = 0;
  virtual void send_heartbeat() = 0;

  // SIGTERM, once the transport's handshake is done: close 320 (connection-forced).
  virtual void on_shutdown() = 0;
  // DELETE /api/connections/NAME. False: there is no conversation to close yet, the engine closes the socket.
  virtual bool close_by_operator(const std::string& reason) = 0;
  // The connection ends: deliveries held are requeued, counts and exclusive queues go.
  virtual void on_connection_lost() = 0;

  // Which protocol, for the management API and the metrics: the one that is not this protocol's is nullptr.
  virtual const Session* fire_session() const { return nullptr; }
  virtual const AmqpConnectionCore* amqp_core() const { return nullptr; }
};

}  // namespace firemq
