// AMQP 0-9-1 as a ConnectionProtocol (connection_protocol.h): the connection engine hands it the bytes its
// transport read (TCP on 5672), which AmqpConnectionCore cuts into frames and acts on; what the core writes goes
// onto the end of the engine's outbound buffer. The engine is FireMQ's, so both protocols share its bounds:
// kMaxPendingBytes, the memory account, the alarm pause of a publishing connection, heartbeats, the store's
// write-out before frames leave, --max-handshakes and the lingering close within kMaxClosingTime.
//
// Runs on the broker thread only.
#pragma once

#include "reference-broker/amqp/amqp_connection_core.h"
#include "reference-broker/net/connection.h"

namespace firemq {

class AmqpProtocol final : public ConnectionProtocol {
 public:
  AmqpProtocol(SessionEnv env, ConnectionOutput& output, const Transport& transport);

  Phase phase() const override;
  bool take_input(Transport& transport) override;
  void end_batch() override { core_.flush(); }  // one basic.ack (multiple) per channel for the batch
  void tell_alarm(bool alarm) override { core_.tell_alarm(alarm); }
  bool has_published() const override { return core_.has_published(); }
  std::chrono::seconds heartbeat() const override { return core_.heartbeat(); }
  void send_heartbeat() override { output_.write(amqp::encode_heartbeat()); }  // seldom: a Bytes of its own is fine
  void on_shutdown() override { core_.on_shutdown(); }
  bool close_by_operator(const std::string& reason) override;
  void on_connection_lost() override { core_.on_connection_lost(); }
  const AmqpConnectionCore* amqp_core() const override { return &core_; }

 private:
  ConnectionOutput& output_;
  AmqpConnectionCore core_;
};

}  // namespace firemq
