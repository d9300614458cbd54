// One AMQP 0-9-1 channel, carried out by one core Session: the channel translates the client's methods into
// FireMQ ops for the session (session.h's on_message) and the ops the session sends to its Outbox back into
// AMQP methods and content. The session decides everything (topology, routing, confirms, credit, acks); the
// channel only translates, keeps what AMQP has and FireMQ has not (consumer tags, prefetch as credit, content
// assembly) and the channel's close. No I/O: frames in, bytes out through its AmqpChannelHost.
//
// Runs on the broker thread only. The host must outlive the channel.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "protocol/amqp/content.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/message_methods.h"
#include "protocol/amqp/methods.h"
#include "reference-broker/core/outbound_buffer.h"
#include "reference-broker/session/session.h"

namespace firemq {

// What a channel needs from its connection (amqp_connection_core.h).
// RabbitMQ's reply texts start with the code's name: "NOT_FOUND - no queue 'q' in vhost '/'".
std::string amqp_reply_text(std::uint16_t code, const std::string& msg);

class AmqpChannelHost {
 public:
  virtual ~AmqpChannelHost() = default;
  // The connection's write buffer, which frames are encoded straight onto.
  virtual OutboundBuffer& wire() = 0;
  // A hard error (AMQP's connection exceptions): connection.close with the error's code, naming `method`.
  virtual void connection_error(const Error& error, amqp::MethodId method) = 0;
  virtual std::size_t frame_max() const = 0;
  // Whether the client said it takes basic.cancel from the server (capability consumer_cancel_notify).
  virtual bool consumer_cancel_notify() const = 0;
};

// tx.select mode: what a channel holds back until tx.commit (publishes and settlements, in order). At namespace
// scope rather than inside AmqpChannel, so that std::optional sees them complete (clang).
struct AmqpSettlement {  // basic.ack, nack, reject: `requeue` absent for an ack
  std::uint64_t tag;
  bool multiple;
  std::optional<bool> requeue;
};
struct AmqpHeldPublish {
  op::Publish publish;
  Bytes body;
  std::shared_ptr<const amqp::FieldTable> amqp_headers;  // as sent (MessageParts::amqp_headers)
  std::vector<std::string> routed_to;  // the queues it was routed to at basic.publish (Session::route_held_publish)
};
struct AmqpTransaction {
  std::vector<std::variant<AmqpHeldPublish, AmqpSettlement>> held;
  std::size_t bytes = 0;  // bounded by kMaxTransactionBytes
  // Each commit under way, in order, with the (internal) sequence numbers of its publishes: it is done once each
  // of them is confirmed or nacked.
  struct Commit {
    std::uint64_t first_seq;
    std::uint64_t last_seq;
  };
  std::deque<Commit> commits;
  std::uint64_t settled_seq = 0;   // every publish up to this one was confirmed or nacked
  std::set<std::uint64_t> nacked;  // beyond the commits done: a full reject-publish queue refused these
};

class AmqpChannel : private Outbox {
 public:
  enum class State { opening, open, closing, closed };

  // `login` is the connection's: the channel's session logs in with it (the same user, vhost and checks).
  // `connection` names the connection; the channel's session is "connection (number)", and the exclusive queues
  // it declares belong to the connection, as in RabbitMQ.
  AmqpChannel(std::uint16_t number, SessionEnv env, AmqpChannelHost& host, const std::string& connection,
              TransportHints hints, op::Hello login);
  ~AmqpChannel() override;

  // channel.open: the session opens (answers channel.open-ok, or a connection error).
  void open();
  void on_frame(const amqp::FrameView& frame);
  // End of a batch of frames: the session's coalesced confirms.
  void flush();
  State state() const { return state_; }
  bool has_published() const { return session_ && session_->has_published(); }

  // For the management API's channels and consumers.
  std::uint16_t number() const { return number_; }
  std::size_t consumer_count() const { return consumers_.size(); }
  std::size_t unacknowledged() const { return unsettled_.size(); }
  std::uint16_t prefetch() const { return prefetch_; }
  bool confirm_mode() const { return confirm_mode_; }
  bool transactional() const { return tx_.has_value(); }
  const Session* session() const { return session_ ? &*session_ : nullptr; }

 private:
  struct Pending {  // a request sent to the session, until its reply
    amqp::MethodId method;
    bool no_wait = false;
    bool no_ack = false;       // basic.get
    std::string consumer_tag;  // basic.consume, basic.cancel
  };
  struct Consumer {
    std::string tag;
    bool limited = false;  // a prefetch applies: credit comes back as deliveries are settled
    bool no_ack = false;
  };
  struct Publishing {  // basic.publish, until its content has arrived
    std::string exchange;
    std::string routing_key;
    bool mandatory = false;
    bool has_header = false;  // the content header has arrived
    amqp::ContentHeader header;
    Bytes body;  // gathered only when the body comes in more than one frame
  };
  using Settlement = AmqpSettlement;
  using HeldPublish = AmqpHeldPublish;
  using Transaction = AmqpTransaction;
  using Handler = void (AmqpChannel::*)(const amqp::Method&);
  struct Route {
    amqp::MethodId id;
    Handler handler;
  };
  static const Route kRoutes[];

  // Frames
  void on_method(const amqp::Method& m);
  // basic.publish and the settlements read in place (message_methods.h); false leaves the frame to on_method.
  bool on_message_method(ByteView payload);
  void on_content_header(const amqp::FrameView& frame);
  void on_body(const amqp::FrameView& frame);
  void begin_publish(const amqp::BasicPublishFields& fields);
  void publish(Publishing&& p, ByteView body);

  // Client methods
  void on_channel_close(const amqp::Method& m);
  void on_channel_close_ok(const amqp::Method& m);
  void on_channel_flow(const amqp::Method& m);
  void on_access_request(const amqp::Method& m);
  void on_exchange_declare(const amqp::Method& m);
  void on_exchange_delete(const amqp::Method& m);
  void on_exchange_bind(const amqp::Method& m);
  void on_queue_declare(const amqp::Method& m);
  void on_queue_bind(const amqp::Method& m);
  void on_queue_purge(const amqp::Method& m);
  void on_queue_delete(const amqp::Method& m);
  void on_basic_qos(const amqp::Method& m);
  void on_basic_consume(const amqp::Method& m);
  void on_basic_cancel(const amqp::Method& m);
  void on_basic_publish(const amqp::Method& m);
  void on_basic_get(const amqp::Method& m);
  void on_basic_ack(const amqp::Method& m);
  void on_basic_reject(const amqp::Method& m);
  void on_basic_nack(const amqp::Method& m);
  void on_basic_recover(const amqp::Method& m);
  void on_confirm_select(const amqp::Method& m);
  void on_tx_select(const amqp::Method& m);
  void on_tx_commit(const amqp::Method& m);
  void on_tx_rollback(const amqp::Method& m);
  void hold(std::variant<HeldPublish, Settlement> action, std::size_t bytes);
  bool held_in_transaction(std::uint64_t tag) const;
  std::optional<std::string> queue_of(const amqp::Method& method);
  void finish_commits();
  void on_not_implemented(const amqp::Method& m);

  // Towards the session
  std::uint64_t request(const amqp::Method& m, Pending pending);
  void to_session(Message message, ByteView payload = {}, std::shared_ptr<const amqp::FieldTable> amqp_headers = {});
  // tx.commit: a held publish, to the queues it was routed to when it arrived.
  void to_session(HeldPublish held);
  void settle(std::uint64_t tag, bool multiple, std::optional<bool> requeue);
  // The settlement itself, whatever a transaction holds (basic.recover, and tx.commit's held ones).
  void settle_now(std::uint64_t tag, bool multiple, std::optional<bool> requeue);
  void return_credit(std::uint64_t tag, bool multiple);

  // From the session (Outbox)
  void send(const Message& message, ByteView payload) override { dispatch(message, payload, {}); }
  void send_message(const Message& message, ByteView body, const MessageExtras& extras) override {
    dispatch(message, body, extras);
  }
  // The hot path: a queued message's deliver, encoded straight from the message onto the connection's buffer.
  void send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& extras) override;
  void dispatch(const Message& message, ByteView payload, const MessageExtras& extras);
  void close_after_flush() override {}  // a fatal error reaches send() first, as a connection error
  void on_ok(const op::Ok& ok);
  void on_error(const op::Error& error);
  void on_deliver(const DeliverView& d, ByteView body, const MessageExtras& extras);
  void on_get_ok(const op::GetOk& g, ByteView body, const MessageExtras& extras);
  void on_return(const op::Return& r, ByteView body, const MessageExtras& extras);
  void on_confirm(const op::Confirm& c);
  void on_cancelled(const op::Cancelled& c);

  // Towards the client
  void reply(const amqp::Method& m);
  void send_content(const amqp::Method& m, const Props& props, const Map& headers, ByteView body,
                    const MessageExtras& extras);
  // The content header an AMQP consumer gets for a message (amqp_interop.h), as --amqp-fault may break it.
  amqp::ContentHeader content_header_of(const Props& props, const Map& headers, const MessageExtras& extras) const;
  void close_channel(std::uint16_t code, const std::string& text, amqp::MethodId method);
  void fail(const Error& error, amqp::MethodId method);
  void forget_consumer(const std::string& tag);
  void end_session();

  std::uint16_t number_;
  AmqpChannelHost& host_;
  op::Hello login_;
  std::size_t max_body_;            // the largest message body, as a FireMQ frame's (--max-frame)
  AmqpFaults faults_;               // testing only (--amqp-fault)
  std::optional<Session> session_;  // reset when the channel closes (its deliveries are requeued then)
  bool release_session_ = false;    // reset once the session's call returns: never inside its own call
  State state_ = State::opening;
  amqp::MethodId current_{};  // the method being carried out: blamed by errors without a request id

  std::uint64_t next_rid_ = 1;
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_sub_ = 1;
  std::map<std::uint64_t, Consumer> consumers_;  // by sub
  std::map<std::string, std::uint64_t> subs_by_tag_;
  std::map<std::uint64_t, std::uint64_t> unsettled_;                       // delivery tag -> sub (0: basic.get)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> credit_to_return_;  // return_credit's: sub, credit
  std::string last_declared_queue_;                                        // for an empty queue name (queue_of)
  std::uint16_t prefetch_ = 0;  // basic.qos, for the consumers created after it
  bool confirm_mode_ = false;
  std::uint64_t publish_seq_ = 0;
  std::optional<Publishing> publishing_;
  std::optional<Transaction> tx_;  // set by tx.select, for the channel's life
};

// The most a transaction may hold before tx.commit: past it the channel is closed with 406 rather than the
// broker's memory growing with a client that never commits.
inline constexpr std::size_t kMaxTransactionBytes = 64 * 1024 * 1024;

}  // namespace firemq
