// FireMQ as a ConnectionProtocol (connection_protocol.h): the connection engine hands it the frames its
// transport cuts (stream_transport.h: FMQ1 then length-prefixed frames; websocket_transport.h: one message per
// frame), and it hands them to one Session, whose replies it encodes straight into the engine's outbound buffer.
// The spec's sections on the session itself (hello, welcome, every op) are session/session.h.
//
// Runs on the broker thread only.
#pragma once

#include "reference-broker/net/connection.h"

namespace firemq {

class FireProtocol final : public ConnectionProtocol, private Outbox {
 public:
  FireProtocol(SessionEnv env, ConnectionOutput& output, const Transport& transport);

  Phase phase() const override;
  bool take_input(Transport& transport) override;
  void end_batch() override { session_.flush(); }
  void tell_alarm(bool alarm) override;
  bool has_published() const override { return session_.has_published(); }
  std::chrono::seconds heartbeat() const override { return session_.heartbeat(); }
  void send_heartbeat() override { send(op::Ping{}, {}); }
  void on_shutdown() override { session_.on_shutdown(); }
  bool close_by_operator(const std::string& reason) override;
  void on_connection_lost() override { session_.on_connection_lost(); }
  const Session* fire_session() const override { return &session_; }

 private:
  // Outbox: every frame is encoded in its stream form onto the end of the engine's outbound buffer.
  void send(const Message& message, ByteView payload) override;
  void send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& extras) override;
  void close_after_flush() override { output_.close_after_flush(); }

  ConnectionOutput& output_;
  Session session_;
  bool told_pause_ = false;  // flow {pause: true} was sent and not yet lifted
};

}  // namespace firemq
