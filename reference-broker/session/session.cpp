#include "reference-broker/session/session.h"

#include <type_traits>

#include "protocol/reply_codes.h"
#include "reference-broker/core/log.h"

namespace firemq {
namespace {

// The rid of a request, 0 for ops that carry none.
std::uint64_t rid_of(const Message& message) {
  return std::visit(
      [](const auto& m) -> std::uint64_t {
        if constexpr (requires { m.rid; }) {
          return m.rid;
        } else {
          return 0;
        }
      },
      message);
}

bool sent_by_servers_only(OpCode op) {
  const OpInfo* info = find_op(static_cast<std::uint8_t>(op));
  return info->direction == Direction::server_to_client;
}

Error fatal_error(ReplyCode code, std::string msg, std::uint64_t rid = 0) {
  Error e = make_error(code, std::move(msg), rid);
  e.fatal = true;
  return e;
}

}  // namespace

Session::Session(SessionEnv env, Outbox& out, std::string conn_id, TransportHints hints, Counting counting,
                 std::string exclusive_owner)
    : env_(env),
      out_(out),
      conn_id_(std::move(conn_id)),
      exclusive_owner_(exclusive_owner.empty() ? conn_id_ : std::move(exclusive_owner)),
      hints_(std::move(hints)),
      counting_(counting) {}

Session::~Session() { on_connection_lost(); }

std::size_t Session::max_frame() const {
  // "Before welcome, a frame may be at most 65 536 bytes. After welcome, the limit is welcome.max_frame."
  return state_ == State::awaiting_hello ? kMaxFrameBeforeWelcome : env_.config.max_frame;
}

void Session::on_frame(const RawFrame& frame) {
  if (state_ == State::closing) return;  // after a close or a fatal error, nothing more is acted on
  Result<Message> message = decode_frame(frame);
  if (!message) {
    // "A server that receives an unknown op replies error with code 540 and keeps the connection open."
    if (message.error().code == static_cast<std::uint16_t>(ReplyCode::not_implemented)) {
      out_.send(op::Error{message.error().rid, message.error().code, message.error().msg, false});
      return;
    }
    return fail(message.error());
  }
  on_message(std::move(*message), frame.payload(), frame.header().size());
}

void Session::on_message(Message&& message, ByteView payload, std::size_t header_bytes,
                         std::shared_ptr<const amqp::FieldTable> amqp_headers) {
  if (state_ == State::closing) return;
  if (auto* close = std::get_if<op::Close>(&message)) return on_close(*close);
  if (auto* hello = std::get_if<op::Hello>(&message)) return on_hello(*hello);
  const OpCode op = op_of(message);
  if (state_ == State::awaiting_hello) {
    return fail(fatal_error(ReplyCode::command_invalid,
                            std::string(op_name(op)) + " before hello: the first frame must be hello",
                            rid_of(message)));
  }
  if (sent_by_servers_only(op)) {
    return fail(fatal_error(ReplyCode::command_invalid,
                            std::string(op_name(op)) + " is sent by servers only, not by clients", rid_of(message)));
  }
  on_request(message, {payload, header_bytes, std::move(amqp_headers)});
}

void Session::on_hello(const op::Hello& hello) {
  if (state_ != State::awaiting_hello) {
    return fail(fatal_error(ReplyCode::command_invalid, "hello sent twice: the connection is already open"));
  }
  auto admitted = admit_hello(hello, hints_, env_.definitions, env_.config);
  if (!admitted) {
    log_refused_hello(hello, admitted.error());
    return fail(std::move(admitted.error()));
  }
  const Principal& who = admitted->principal;
  // The operator's max-connections limits (limits.h); counted until on_connection_lost, unless the transport
  // counts the connection itself (an AMQP channel's session).
  Status full;
  if (counting_ == Counting::by_session) {
    full = env_.core.connection_counts().admit(who.user, env_.definitions.user_limits(who.user), who.vhost,
                                               env_.definitions.vhost_limits(who.vhost));
  }
  if (full) {
    full->fatal = true;
    log_refused_hello(hello, *full);
    return fail(std::move(*full));
  }
  user_ = admitted->principal.user;
  client_ = hello.client;
  vhost_name_ = admitted->principal.vhost;
  vhost_ = env_.core.vhost(vhost_name_);
  permissions_ = std::move(admitted->principal.permissions);
  heartbeat_ = admitted->heartbeat_seconds;
  send_welcome();
}

void Session::log_refused_hello(const op::Hello& hello, const Error& error) const {
  log_refused_login("hello", error.code, hints_.peer_address, hello.auth.user, error.msg);
}

void Session::send_welcome() {
  op::Welcome welcome;
  welcome.ver = 1;
  welcome.server = {kServerName, kServerVersion};
  welcome.conn_id = conn_id_;
  welcome.heartbeat = heartbeat_;
  welcome.max_frame = env_.config.max_frame;
  // "Version 1 servers send confirms, credit, mandatory, exchange-bindings, dead-letter and ttl."
  welcome.caps = {"confirms", "credit", "mandatory", "exchange-bindings", "dead-letter", "ttl"};
  state_ = State::open;
  ++env_.core.churn().channels_opened;  // a FireMQ connection is one channel, an AMQP channel has a session each
  out_.send(welcome);
}

void Session::on_close(const op::Close&) {
  flush();  // the confirms of the publishes before the close go before the reply
  // "The receiver replies with its own close and closes the socket. Code 200 means a normal shutdown."
  out_.send(op::Close{static_cast<std::uint64_t>(ReplyCode::normal), "closed"});
  enter_closing();
}

void Session::enter_closing() {
  state_ = State::closing;
  out_.close_after_flush();
  // For the client the connection ends here: what it held is released now, not when the socket finally goes
  // (its exclusive queues are deleted, its unacknowledged deliveries requeued).
  on_connection_lost();
}

void Session::on_request(Message& message, Carried carried) {
  // What this request writes to the store (an ack's removal, say) is durable before any later confirm of this
  // connection: "an ack is durable once a later publish on the same connection has been confirmed".
  Journal* journal = env_.core.journal();
  const std::uint64_t log_before = journal ? journal->end_position() : 0;
  handle_request(message, carried);
  if (journal && journal->end_position() > log_before) own_records_end_ = journal->end_position();
}

void Session::handle_request(Message& message, Carried carried) {
  std::visit(
      [this, carried](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, op::Ping>) {
          out_.send(op::Pong{});
        } else if constexpr (std::is_same_v<T, op::DeclareExchange>) {
          on_declare_exchange(m);
        } else if constexpr (std::is_same_v<T, op::DeleteExchange>) {
          on_delete_exchange(m);
        } else if constexpr (std::is_same_v<T, op::DeclareQueue>) {
          on_declare_queue(m);
        } else if constexpr (std::is_same_v<T, op::DeleteQueue>) {
          on_delete_queue(m);
        } else if constexpr (std::is_same_v<T, op::PurgeQueue>) {
          on_purge_queue(m);
        } else if constexpr (std::is_same_v<T, op::Bind>) {
          on_bind(m, true);
        } else if constexpr (std::is_same_v<T, op::Unbind>) {
          on_bind(m, false);
        } else if constexpr (std::is_same_v<T, op::Publish>) {
          on_publish(m, carried);
        } else if constexpr (std::is_same_v<T, op::Subscribe>) {
          on_subscribe(m);
        } else if constexpr (std::is_same_v<T, op::Unsubscribe>) {
          on_unsubscribe(m);
        } else if constexpr (std::is_same_v<T, op::Credit>) {
          on_credit(m);
        } else if constexpr (std::is_same_v<T, op::Ack>) {
          on_ack(m);
        } else if constexpr (std::is_same_v<T, op::Nack>) {
          on_nack(m);
        } else if constexpr (std::is_same_v<T, op::Get>) {
          on_get(m);
        }
        // pong: nothing to answer; hello, close and server-only ops were handled before.
      },
      message);
}

// A request refused: error with its rid, not fatal unless its code is (reply_codes.h).
void Session::refuse(std::uint64_t rid, const Error& error) {
  Error e = error;
  e.rid = rid;
  fail(std::move(e));
}

void Session::on_framing_error(const Error& error) {
  if (state_ == State::closing) return;
  fail(error);
}

void Session::on_shutdown() { close_forced("broker shutting down"); }

void Session::close_forced(const std::string& reason) {
  if (state_ == State::closing) return;
  flush();
  // "320 connection-forced"
  out_.send(op::Close{static_cast<std::uint64_t>(ReplyCode::connection_forced), reason});
  enter_closing();
}

void Session::fail(Error error) {
  if (error.fatal) flush();  // what was confirmed before the fatal error is said before it
  out_.send(op::Error{error.rid, error.code, error.msg, error.fatal});
  if (!error.fatal) return;
  // "error ... fatal: true when the server closes the connection after this frame."
  enter_closing();
}

}  // namespace firemq
