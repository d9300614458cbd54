// One client's protocol session: it takes frames and decides what to answer. No I/O: the transport
// (connection.cpp) feeds it frames and carries out what it puts in its Outbox. Runs on the broker thread only.
//
// States, after the spec's "Connection lifecycle":
//   awaiting_hello  only hello (and close) is accepted; the 65,536-byte limit applies
//   open            welcome sent; requests are served; the limit is welcome.max_frame
//   closing         a close or a fatal error was sent: nothing more is read, the socket closes after the flush
//
// The session's work is split by role: session.cpp (lifecycle and dispatch), session_topology.cpp,
// session_publish.cpp, session_consume.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "protocol/error.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "reference-broker/access/definitions.h"
#include "reference-broker/access/permissions.h"
#include "reference-broker/core/config.h"
#include "reference-broker/core/core.h"
#include "reference-broker/core/queue.h"
#include "reference-broker/session/handshake.h"

namespace firemq {

// What the broker knows of a message beyond its frame. A FireMQ frame has no field for either; an AMQP channel
// shows them (the spec's "Interoperability with AMQP 0-9-1"): persistent as delivery-mode 2, and the headers in
// the types their AMQP publisher gave them (BrokerMessage::amqp_headers).
struct MessageExtras {
  bool persistent = false;
  const amqp::FieldTable* amqp_headers = nullptr;
};

// Where a session's frames go. The transport frames them for its wire (TCP or WebSocket) and writes them.
class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(const Message& message, ByteView payload = {}) = 0;
  // A deliver, get_ok or return, with what the broker knows of its message beyond the frame.
  virtual void send_message(const Message& message, ByteView body, const MessageExtras& extras) {
    (void)extras;
    send(message, body);
  }
  // A deliver of a queued message, its names, props and headers still the message's own: the hot path, which a
  // FireMQ connection encodes straight into its write buffer. Any other outbox gets the op, copied.
  virtual void send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& extras) {
    send_message(deliver.copy(), body, extras);
  }
  // Close the socket once every frame queued so far is written.
  virtual void close_after_flush() = 0;
};

// What a session needs from the broker. All must outlive the session.
struct SessionEnv {
  const BrokerConfig& config;
  const Definitions& definitions;
  Core& core;
};

class Session;

// The consumer argument x-priority (RabbitMQ's consumer priorities): an integer, 0 when absent; anything else is
// 406, as RabbitMQ refuses it.
Result<std::int64_t> consumer_priority(const Map& args, const std::string& consumer);

// A subscription: the Consumer its queue hands messages to, while it has credit.
class Subscription : public Consumer {
 public:
  // `priority`: the request's x-priority (consumer_priority).
  Subscription(Session& session, op::Subscribe request, std::weak_ptr<Queue> queue, std::int64_t priority)
      : session_(session),
        request_(std::move(request)),
        credit_(request_.credit),
        priority_(priority),
        queue_(std::move(queue)) {}

  // Credit left, and the session under its bound on unacknowledged deliveries.
  bool can_take() const override;
  void take(QueuedMessage message, Queue& queue) override;
  void on_queue_deleted(Queue& queue) override;
  std::int64_t priority() const override { return priority_; }
  std::string_view tag() const override { return request_.tag; }

  void add_credit(std::uint64_t credit) {  // saturating: a peer's huge grants must not wrap to a small credit
    credit_ = credit > UINT64_MAX - credit_ ? UINT64_MAX : credit_ + credit;
  }
  // The connection is closing: nothing more may be delivered to it, even while other subscriptions are removed.
  void stop() { credit_ = 0; }
  const op::Subscribe& request() const { return request_; }
  std::uint64_t credit() const { return credit_; }
  std::shared_ptr<Queue> queue() const { return queue_.lock(); }

 private:
  Session& session_;
  op::Subscribe request_;
  std::uint64_t credit_;  // delivers the server may still send: granted so far, less those sent
  std::int64_t priority_;
  std::weak_ptr<Queue> queue_;
};

// The words of a subscribe refused because of an exclusive consumer (405 on FireMQ): AMQP names that refusal
// 403 access-refused, as RabbitMQ does, where a queue locked by another connection stays 405.
inline constexpr std::string_view kInExclusiveUse = "in exclusive use";

class Session : private DurabilityWaiter {
 public:
  enum class State { awaiting_hello, open, closing };
  // Whether hello counts the session against the max-connections limits (limits.h). A FireMQ connection is one
  // session and is counted by it; an AMQP connection carries one session per channel and is counted once, at
  // connection.open, by the AMQP listener (as RabbitMQ counts connections, not channels): its channels' sessions
  // are `Counting::by_transport`.
  enum class Counting { by_session, by_transport };

  // `conn_id` names the connection (welcome.conn_id); `hints` is what its transport learnt before hello.
  // `exclusive_owner` is the connection that owns the exclusive queues this session declares and may use: empty
  // for the session itself (conn_id). An AMQP channel gives its connection's name, since RabbitMQ ties an exclusive
  // queue to the connection, not the channel; such a session leaves deleting them to its owner when it ends.
  Session(SessionEnv env, Outbox& out, std::string conn_id, TransportHints hints = {},
          Counting counting = Counting::by_session, std::string exclusive_owner = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // A frame as the transport cut it from the wire: decoded here (a bad header is the session's to answer).
  void on_frame(const RawFrame& frame);
  // A decoded message and its payload: the entry for everything past the framing. `header_bytes` is the encoded
  // header's size, for the memory watermark's estimate of what a published message costs (0: unknown).
  // `amqp_headers`: a publish's headers as its AMQP publisher sent them (MessageParts::amqp_headers).
  void on_message(Message&& message, ByteView payload, std::size_t header_bytes = 0,
                  std::shared_ptr<const amqp::FieldTable> amqp_headers = nullptr);
  // The transport's decoder refused the bytes (always 501, fatal).
  void on_framing_error(const Error& error);
  // After a batch of frames: sends what was held back to be coalesced (confirm upto).
  void flush();
  // SIGTERM: "close 320 to every client".
  void on_shutdown();
  // An operator closed the connection (the management API): close 320 with the operator's reason.
  void close_forced(const std::string& reason);
  // The socket is gone: subscriptions end, unacknowledged deliveries are requeued, exclusive queues deleted.
  void on_connection_lost();

  State state() const { return state_; }
  // The frame-size limit the transport's decoder must apply now.
  std::size_t max_frame() const;
  // Negotiated in welcome; zero before it and when disabled.
  std::chrono::seconds heartbeat() const { return std::chrono::seconds(heartbeat_); }
  const std::string& conn_id() const { return conn_id_; }
  const std::string& user() const { return user_; }
  const std::string& vhost() const { return vhost_name_; }
  // Whether it ever published: while an alarm holds, such connections are paused and no longer read.
  bool has_published() const { return has_published_; }
  // AMQP's tx class, as RabbitMQ's channel has it: a transaction's publish is checked and routed when it arrives,
  // and enqueued at tx.commit. route_held_publish: the names of the queues it reaches now, or why it is refused
  // (its user_id, the write permission, a missing or internal exchange): at once, not at tx.commit.
  Result<std::vector<std::string>> route_held_publish(const op::Publish& p) const;
  // Why a publish to `exchange` is refused whatever it carries (the write permission, a missing or internal
  // exchange), or nothing. RabbitMQ checks these before a publish's properties, so an AMQP channel asks first when
  // the properties are wrong too.
  Status publish_target_refusal(const std::string& exchange) const;
  // tx.commit: the publish, enqueued to those of the queues route_held_publish named that still exist, and
  // confirmed or returned as any publish (its seq is the channel's own, to learn when the commit is done).
  void publish_routed(op::Publish&& p, ByteView body, std::shared_ptr<const amqp::FieldTable> amqp_headers,
                      const std::vector<std::string>& queue_names);
  // Whether `queue` exists in this session's vhost with x-single-active-consumer: an AMQP channel refuses an
  // exclusive basic.consume on it (403, RabbitMQ), which the FireMQ spec's subscribe allows.
  bool single_active_consumer_queue(const std::string& queue) const;
  // AMQP's basic.qos with global=true: at most `count` deliveries wait for an ack on this session at once, over
  // all its consumers that ack (0: no such limit), as RabbitMQ's channel-wide prefetch; while that many wait, its
  // no-ack consumers get nothing either. It applies at once to the consumers there are, beside each one's own
  // credit. FireMQ's subscribe has only the per-sub credit.
  void set_shared_prefetch(std::uint64_t count);
  // For the management API: hello's client map ("Shown in the management UI"), the address the transport saw,
  // the subscriptions and how many deliveries wait for an ack.
  const Map& client_properties() const { return client_; }
  const TransportHints& transport_hints() const { return hints_; }
  const std::map<std::uint64_t, std::unique_ptr<Subscription>>& subscriptions() const { return subscriptions_; }
  std::size_t unacked_count() const { return unacked_.size(); }
  // Publishes whose confirm waits for the disk: rabbitmq_channel_messages_unconfirmed.
  std::size_t unconfirmed_count() const { return awaiting_disk_.size(); }

 private:
  friend class Subscription;

  // An unacknowledged delivery: the message and the queue it goes back to when requeued.
  struct Unacked {
    QueuedMessage message;
    std::weak_ptr<Queue> queue;
    std::uint64_t sub = 0;  // the subscription that delivered it; 0 for a get
  };

  // session.cpp: lifecycle
  void on_hello(const op::Hello& hello);
  void log_refused_hello(const op::Hello& hello, const Error& error) const;
  void on_close(const op::Close& close);
  // What a request carries besides its header: a publish's body, its header's size, and its AMQP headers.
  struct Carried {
    ByteView payload;
    std::size_t header_bytes;
    std::shared_ptr<const amqp::FieldTable> amqp_headers;
    // A publish routed earlier (publish_routed): the queues that route named. Null: route it now.
    const std::vector<std::string>* routed_to = nullptr;
  };
  void on_request(Message& message, Carried carried);
  void handle_request(Message& message, Carried carried);
  void send_welcome();
  void fail(Error error);
  void enter_closing();
  void refuse(std::uint64_t rid, const Error& error);
  void reply_ok(std::uint64_t rid) { out_.send(op::Ok{rid, "", 0, 0, false}); }
  Status allowed(Access access, std::string_view kind, const std::string& resource) const {
    return permissions_.check(access, kind, resource, vhost_name_, user_);
  }

  // session_topology.cpp
  void on_declare_exchange(const op::DeclareExchange& r);
  void on_delete_exchange(const op::DeleteExchange& r);
  void on_declare_queue(const op::DeclareQueue& r);
  void on_delete_queue(const op::DeleteQueue& r);
  void on_purge_queue(const op::PurgeQueue& r);
  void on_bind(const op::BindFields& r, bool bind);
  Status check_room_for_exchange(const op::DeclareExchange& r) const;
  Status check_room_for_queue(const op::DeclareQueue& r) const;
  Status check_room_for_binding(const op::BindFields& r) const;
  Status check_store_for(bool durable_change) const;

  // session_publish.cpp
  void on_publish(op::Publish& p, Carried carried);
  // Why a publish would be refused before routing (its user_id, the write permission, a missing or internal
  // exchange), or nothing.
  Status publish_refusal(const op::Publish& p) const;
  void reject_publish(std::uint64_t seq, const Error& error);
  // `durable_at`: the log position the publish's records end at, 0 when it needs no disk.
  void confirm(std::uint64_t seq, std::uint64_t durable_at = 0);
  // One more of `what` in the broker's counters and in this session's vhost's.
  void count(std::uint64_t MessageCounters::*what) {
    ++(env_.core.counters().*what);
    if (vhost_ != nullptr) ++(vhost_->counters().*what);
  }
  void release_durable(std::uint64_t durable_position);
  void on_durable(std::uint64_t position) override;
  void on_store_failed(std::uint64_t durable_position, const std::string& reason) override;
  void stop_waiting_for_disk();

  // session_consume.cpp
  void on_subscribe(const op::Subscribe& r);
  void on_unsubscribe(const op::Unsubscribe& r);
  void on_credit(const op::Credit& r);
  void on_ack(const op::Ack& r);
  void on_nack(const op::Nack& r);
  void on_get(const op::Get& r);
  void deliver(Subscription& subscription, QueuedMessage message, Queue& queue);
  void on_subscription_cancelled(Subscription& subscription, Queue& queue);
  std::uint64_t track(QueuedMessage& message, Queue& queue, bool no_ack, std::uint64_t sub);
  // Requeues these settled deliveries in RabbitMQ's batches (session_consume.cpp says which).
  void requeue_in_batches(std::vector<Unacked> settled, bool per_consumer);
  // The consumer tag of a subscription that still exists, or "".
  std::string_view tag_of(std::uint64_t sub) const;
  // The unacknowledged tags an ack or nack names; 406 for an unknown tag.
  Result<std::vector<std::uint64_t>> settled_tags(std::uint64_t tag, bool multiple);
  void end_subscription(std::uint64_t sub);
  Result<std::string> open_reply_queue(const op::Subscribe& r);
  bool has_reply_consumer() const;
  // A publish whose reply_to is kDirectReplyTo names this session's reply queue instead; 406 without one.
  Status direct_reply_to(op::Publish& p) const;
  // ClientBounds::unacked: deliveries stop while this many are unacknowledged, and resume once acks make room.
  bool unacked_full() const { return unacked_.size() >= env_.config.bounds.unacked; }
  bool shared_prefetch_full() const { return shared_prefetch_ != 0 && unacked_.size() >= shared_prefetch_; }
  bool deliveries_held() const { return unacked_full() || shared_prefetch_full(); }
  void resume_deliveries_if(bool were_held);

  SessionEnv env_;
  Outbox& out_;
  std::string conn_id_;
  std::string exclusive_owner_;        // conn_id_, or the AMQP connection of this channel's session
  std::uint64_t shared_prefetch_ = 0;  // set_shared_prefetch: 0 for none
  std::string reply_queue_;            // direct reply-to's queue, once this session consumed kDirectReplyTo
  TransportHints hints_;
  Counting counting_;
  State state_ = State::awaiting_hello;
  std::uint64_t heartbeat_ = 0;
  std::string user_;
  std::string vhost_name_;
  Map client_;  // hello.client
  Vhost* vhost_ = nullptr;
  Permissions permissions_;  // the user's on this vhost, compiled at hello

  // Publishing: "Every publish with a non-zero seq is confirmed exactly once"; positive confirms are coalesced
  // into one {upto} per batch of frames read.
  std::uint64_t last_seq_ = 0;
  bool has_published_ = false;
  std::uint64_t pending_upto_ = 0;
  // Publishes whose confirm waits for the disk ("they are on disk when persistent and routed to a durable
  // queue"), with the log position each one's records end at, in seq order; confirms follow that order.
  struct AwaitingDisk {
    std::uint64_t seq;
    std::uint64_t durable_at;  // 0: needs no disk, but an earlier one does
    bool message_on_disk;      // the message itself is written (else it waits for an earlier request's records)
  };
  std::deque<AwaitingDisk> awaiting_disk_;
  std::uint64_t own_records_end_ = 0;  // where the records of this connection's requests end in the store
  bool waiting_on_journal_ = false;

  // Consuming: delivery tags are "unique and increasing on the connection, starting at 1", shared by deliver
  // and get_ok.
  std::uint64_t next_tag_ = 1;
  std::map<std::uint64_t, std::unique_ptr<Subscription>> subscriptions_;
  std::map<std::uint64_t, Unacked> unacked_;
};

}  // namespace firemq
