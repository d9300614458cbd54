#include "reference-broker/amqp/amqp_connection_core.h"
#include "reference-broker/amqp/amqp_interop.h"

#include "protocol/amqp/message_methods.h"
#include "protocol/amqp/wire.h"
#include "protocol/reply_codes.h"
#include "reference-broker/core/log.h"

namespace firemq {
namespace {

namespace m = amqp::method;
using amqp::Method;

Error hard_error(std::uint16_t code, std::string msg) { return Error{code, std::move(msg), true, 0}; }

// What RabbitMQ advertises in connection.start's server-properties.capabilities; each is implemented here.
amqp::FieldTable server_capabilities() {
  amqp::FieldTable caps;
  for (const char* cap : {"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
                          "connection.blocked", "authentication_failure_close", "per_consumer_qos"}) {
    caps.push_back({cap, true});
  }
  return caps;
}

amqp::FieldTable server_properties() {
  return {{"product", "FireMQ"},
          {"version", kServerVersion},
          {"platform", "C++20"},
          {"information", "The FireMQ reference broker: AMQP 0-9-1 and FireMQ share one broker"},
          {"capabilities", server_capabilities()}};
}

bool client_capability(const amqp::FieldTable& client_properties, std::string_view name) {
  const amqp::FieldValue* caps = amqp::find(client_properties, "capabilities");
  const auto* table = caps ? caps->get_if<amqp::FieldTable>() : nullptr;
  const amqp::FieldValue* cap = table ? amqp::find(*table, name) : nullptr;
  return cap != nullptr && cap->get_if<bool>() != nullptr && *cap->get_if<bool>();
}

// A max-connections limit reached at connection.open, in RabbitMQ's words (rabbit_reader): 530 NOT_ALLOWED, naming
// the limit. The vhost's is checked first, as ConnectionCounts::admit does.
Error connection_limit_reached(const ConnectionCounts& counts, const Principal& who, const VhostLimits& vhost_limits,
                               const UserLimits& user_limits) {
  if (vhost_limits.max_connections && counts.on_vhost(who.vhost) >= *vhost_limits.max_connections) {
    return hard_error(amqp::kNotAllowed, "access to vhost '" + who.vhost + "' refused for user '" + who.user +
                                             "': connection limit (" + std::to_string(*vhost_limits.max_connections) +
                                             ") is reached");
  }
  return hard_error(amqp::kNotAllowed, "Connection refused for user '" + who.user + "': user connection limit (" +
                                           std::to_string(user_limits.max_connections.value_or(0)) + ") is reached");
}

}  // namespace

Result<Credentials> parse_credentials(const std::string& mechanism, const std::string& response) {
  if (mechanism == "PLAIN") {
    // RFC 4616: [authzid] NUL authcid NUL passwd
    const auto first = response.find('\0');
    const auto second = first == std::string::npos ? first : response.find('\0', first + 1);
    if (second == std::string::npos)
      return hard_error(amqp::kAccessRefused, "PLAIN response is not authzid\\0user\\0password");
    return Credentials{response.substr(first + 1, second - first - 1), response.substr(second + 1)};
  }
  if (mechanism == "AMQPLAIN") {
    // The table's entries without its size: give the reader the size it lacks.
    Bytes sized;
    append_u32_be(sized, static_cast<std::uint32_t>(response.size()));
    sized.insert(sized.end(), response.begin(), response.end());
    amqp::WireReader in(sized);
    auto table = amqp::read_table(in);
    const amqp::FieldValue* login = table ? amqp::find(*table, "LOGIN") : nullptr;
    const amqp::FieldValue* password = table ? amqp::find(*table, "PASSWORD") : nullptr;
    if (!login || !password || !login->get_if<std::string>() || !password->get_if<std::string>()) {
      return hard_error(amqp::kAccessRefused, "AMQPLAIN response lacks LOGIN or PASSWORD as strings");
    }
    return Credentials{*login->get_if<std::string>(), *password->get_if<std::string>()};
  }
  return hard_error(amqp::kCommandInvalid,
                    "unknown authentication mechanism '" + mechanism + "': use PLAIN or AMQPLAIN");
}

AmqpConnectionCore::AmqpConnectionCore(SessionEnv env, OutboundBuffer& wire, std::string name, TransportHints hints)
    : env_(env), wire_(wire), name_(std::move(name)), hints_(std::move(hints)) {}

AmqpConnectionCore::~AmqpConnectionCore() { on_connection_lost(); }

std::size_t AmqpConnectionCore::feed(ByteView bytes, std::size_t max_frames) {
  const std::size_t offered = bytes.size();
  std::size_t frames = 0;
  while (!bytes.empty() && state_ != State::closing && frames < max_frames) {
    const auto step = decoder_.feed(bytes);
    bytes = bytes.subspan(step.consumed);
    switch (step.state) {
      case amqp::FrameDecoder::State::need_more: break;
      case amqp::FrameDecoder::State::frame:
        ++frames;
        on_frame(decoder_.frame());
        break;
      case amqp::FrameDecoder::State::bad_protocol_header:
        // "the server MUST respond with a valid protocol header and then close the socket" (0-9-1, 4.2.2)
        wire_.write(amqp::kProtocolHeader);
        state_ = State::closing;
        wire_.close_after_flush();
        return offered;
      case amqp::FrameDecoder::State::error: connection_error(decoder_.error(), {}); break;
    }
    if (state_ == State::awaiting_header && !decoder_.awaiting_protocol_header()) send_start();
  }
  // A connection error raised inside a channel's call ends the channels here, once that call has returned. What
  // follows it is dropped: every byte counts as taken.
  if (state_ == State::closing) {
    on_connection_lost();
    return offered;
  }
  return offered - bytes.size();
}

void AmqpConnectionCore::on_frame(const amqp::FrameView& frame) {
  if (frame.type == amqp::FrameType::heartbeat) {
    // "Heartbeat frames MUST have a channel number of zero"; a heartbeat only shows the peer is alive, which the
    // engine notes on every read.
    if (frame.channel != 0)
      connection_error(hard_error(amqp::kFrameError, "heartbeat frame on channel " + std::to_string(frame.channel)),
                       {});
    return;
  }
  if (frame.channel != 0) return on_channel_frame(frame);
  if (frame.type != amqp::FrameType::method) {
    return connection_error(hard_error(amqp::kUnexpectedFrame, "content frame on channel 0"), {});
  }
  auto method = amqp::decode_method(frame.payload);
  if (!method) return connection_error(method.error(), {});
  on_connection_method(*method);
}

void AmqpConnectionCore::on_connection_method(const Method& method) {
  const auto expect = [&](State state, amqp::MethodId id) { return state_ == state && method.id() == id; };
  if (method.id() == m::kConnectionClose) return on_close(method);  // the client may close at any point
  if (expect(State::awaiting_start_ok, m::kConnectionStartOk)) return on_start_ok(method);
  if (expect(State::awaiting_tune_ok, m::kConnectionTuneOk)) return on_tune_ok(method);
  if (expect(State::awaiting_open, m::kConnectionOpen)) return on_open(method);
  if (state_ == State::open && (method.id() == m::kConnectionBlocked || method.id() == m::kConnectionUnblocked)) {
    return;  // a client's own flow notifications: nothing for the broker to do
  }
  if (state_ == State::open && method.id() == m::kConnectionUpdateSecret) return on_update_secret(method);
  connection_error(hard_error(amqp::kCommandInvalid, std::string(method.name()) + " is not expected on channel 0 now"),
                   method.id());
}

void AmqpConnectionCore::on_channel_frame(const amqp::FrameView& frame) {
  if (state_ != State::open) {
    return connection_error(hard_error(amqp::kCommandInvalid,
                                       "channel " + std::to_string(frame.channel) + " used before connection.open-ok"),
                            {});
  }
  auto it = channels_.find(frame.channel);
  if (it == channels_.end()) {
    auto method = frame.type == amqp::FrameType::method ? amqp::decode_method(frame.payload) : Error{};
    if (method && method->id() == m::kChannelOpen) return open_channel(frame.channel);
    return connection_error(
        hard_error(amqp::kChannelError, "expected 'channel.open' on channel " + std::to_string(frame.channel)), {});
  }
  AmqpChannel& channel = *it->second;
  if (frame.type == amqp::FrameType::method && channel.state() == AmqpChannel::State::open) {
    if (amqp::method_id_of(frame.payload) == m::kChannelOpen) {  // the channel decodes the rest
      return connection_error(hard_error(amqp::kChannelError, "second 'channel.open' seen"), m::kChannelOpen);
    }
  }
  channel.on_frame(frame);
  if (channel.state() == AmqpChannel::State::closed) channels_.erase(frame.channel);
}

void AmqpConnectionCore::open_channel(std::uint16_t number) {
  if (number > channel_max_) {
    return connection_error(hard_error(amqp::kNotAllowed, "channel " + std::to_string(number) +
                                                              " is above channel_max " + std::to_string(channel_max_)),
                            m::kChannelOpen);
  }
  auto channel = std::make_unique<AmqpChannel>(number, env_, static_cast<AmqpChannelHost&>(*this), name_, hints_,
                                               login_);
  AmqpChannel& opened = *channel;
  channels_[number] = std::move(channel);
  opened.open();
}

void AmqpConnectionCore::send_start() {
  Method start = Method::of(m::kConnectionStart);
  start.set("version_major", std::uint64_t{0}).set("version_minor", std::uint64_t{9});
  start.set("server_properties", server_properties());
  start.set("mechanisms", std::string("PLAIN AMQPLAIN")).set("locales", std::string("en_US"));
  send(0, start);
  state_ = State::awaiting_start_ok;
}

void AmqpConnectionCore::on_start_ok(const Method& method) {
  auto credentials = parse_credentials(method.text("mechanism"), method.text("response"));
  if (!credentials) return refuse_login("AMQP connection.start-ok", "", credentials.error(), method.id());
  // Authentication here, authorisation at connection.open, as RabbitMQ splits them; log_in checks both there.
  const amqp::FieldTable& client = method.table("client_properties");
  if (env_.definitions.authenticate(credentials->user, credentials->password) == nullptr) {
    const Error refused = hard_error(amqp::kAccessRefused,
                                     "Login was refused using authentication mechanism " + method.text("mechanism"));
    // RabbitMQ's authentication_failure_close: a client that announces it is told with connection.close 403; to
    // one that does not, the socket just closes, as 0-9-1 has it ("the server SHOULD close the socket").
    if (!client_capability(client, "authentication_failure_close")) {
      log_refused_login("AMQP connection.start-ok", refused.code, hints_.peer_address, credentials->user, refused.msg);
      return close_socket();
    }
    return refuse_login("AMQP connection.start-ok", credentials->user, refused, method.id());
  }
  login_.ver = 1;
  login_.auth = {"plain", credentials->user, credentials->password};
  login_.client = to_firemq_map(client);  // each channel's session is shown with it, as a FireMQ hello's client
  cancel_notify_ = client_capability(client, "consumer_cancel_notify");
  blocked_notify_ = client_capability(client, "connection.blocked");
  Method tune = Method::of(m::kConnectionTune);
  tune.set("channel_max", std::uint64_t{kAmqpChannelMax}).set("frame_max", std::uint64_t{kAmqpFrameMax});
  tune.set("heartbeat", env_.config.heartbeat_seconds);
  send(0, tune);
  state_ = State::awaiting_tune_ok;
}

// RabbitMQ's token refresh. The broker's users have passwords that do not expire, so there is nothing to extend:
// as RabbitMQ's internal backend, it answers update-secret-ok whatever the secret. A secret that is the user's
// password now (changed since the login) is kept, for the channels opened from here on to log in with.
void AmqpConnectionCore::on_update_secret(const Method& method) {
  const std::string& secret = method.text("new_secret");
  if (env_.definitions.authenticate(login_.auth.user, secret) != nullptr) login_.auth.pass = secret;
  send(0, Method::of(m::kConnectionUpdateSecretOk));
}

void AmqpConnectionCore::on_tune_ok(const Method& method) {
  // The client's answer is final, within what tune proposed; 0 for channel_max and frame_max means "no limit of
  // its own", so ours hold. The heartbeat is the client's choice (0 disables it), as in RabbitMQ.
  const std::uint64_t frame_max = method.number("frame_max");
  const std::uint64_t channel_max = method.number("channel_max");
  if (frame_max != 0 && (frame_max < amqp::kFrameMinSize || frame_max > kAmqpFrameMax)) {
    return connection_error(hard_error(amqp::kNotAllowed, "frame_max=" + std::to_string(frame_max) + " outside " +
                                                              std::to_string(amqp::kFrameMinSize) + ".." +
                                                              std::to_string(kAmqpFrameMax)),
                            method.id());
  }
  if (channel_max > kAmqpChannelMax) {
    return connection_error(hard_error(amqp::kNotAllowed, "channel_max=" + std::to_string(channel_max) + " > " +
                                                              std::to_string(kAmqpChannelMax)),
                            method.id());
  }
  frame_max_ = frame_max == 0 ? kAmqpFrameMax : frame_max;
  channel_max_ = channel_max == 0 ? kAmqpChannelMax : static_cast<std::uint16_t>(channel_max);
  heartbeat_ = method.number("heartbeat");
  decoder_.set_frame_max(frame_max_);
  state_ = State::awaiting_open;
}

void AmqpConnectionCore::on_open(const Method& method) {
  const std::string& named = method.text("virtual_host");
  login_.vhost = named.empty() ? "/" : named;
  auto principal = log_in(env_.definitions, env_.config.loopback,
                          {"plain", login_.auth.user, login_.auth.pass, login_.vhost, hints_.peer_address,
                           std::nullopt});  // no Origin: AMQP is not reached from web pages
  if (!principal) return refuse_login("AMQP connection.open", login_.auth.user, principal.error(), method.id());
  // The operator's max-connections limits (limits.h) count the connection once, here, whatever number of channels
  // it opens later (their sessions do not count themselves), until on_connection_lost. RabbitMQ checks them at
  // connection.open too and refuses with 530 (rabbit_reader's vhost and user connection limit checks).
  ConnectionCounts& counts = env_.core.connection_counts();
  const VhostLimits& vhost_limits = env_.definitions.vhost_limits(principal->vhost);
  const UserLimits& user_limits = env_.definitions.user_limits(principal->user);
  if (counts.admit(principal->user, user_limits, principal->vhost, vhost_limits)) {
    return refuse_login("AMQP connection.open", principal->user,
                        connection_limit_reached(counts, *principal, vhost_limits, user_limits), method.id());
  }
  counted_ = {principal->user, principal->vhost};
  send(0, Method::of(m::kConnectionOpenOk));
  state_ = State::open;
}

void AmqpConnectionCore::on_close(const Method&) {
  flush();  // the confirms of what was published before go before close-ok
  send(0, Method::of(m::kConnectionCloseOk));
  close_socket();
}

void AmqpConnectionCore::close_socket() {
  state_ = State::closing;
  wire_.close_after_flush();
}

void AmqpConnectionCore::flush() {
  // After connection.close only close-ok may follow: confirms held back then are never sent.
  if (state_ != State::closing) {
    for (auto& [number, channel] : channels_) channel->flush();
  }
  std::erase_if(channels_, [](const auto& c) { return c.second->state() == AmqpChannel::State::closed; });
  if (state_ == State::closing) on_connection_lost();  // a fatal error while flushing (the store failed)
}

void AmqpConnectionCore::close_forced(const std::string& reason) {
  if (state_ == State::closing) return;
  if (state_ != State::open) {  // not yet a conversation to close politely
    state_ = State::closing;
    return wire_.close_after_flush();
  }
  flush();
  close_connection(amqp::kConnectionForced, "CONNECTION_FORCED - " + reason, {});
  on_connection_lost();
}

void AmqpConnectionCore::on_connection_lost() {
  channels_.clear();
  // The connection was counted at connection.open; it ends here for the limits, once (this runs again when the
  // socket goes, and from the destructor).
  if (!counted_) return;
  env_.core.connection_counts().release(counted_->user, counted_->vhost);
  // Its exclusive queues, whichever channel declared them, go with it (RabbitMQ: "used by only one connection
  // and the queue will be deleted when that connection closes"); its channels have ended above.
  if (Vhost* vhost = env_.core.vhost(counted_->vhost)) vhost->on_connection_closed(name_);
  counted_.reset();
}

bool AmqpConnectionCore::has_published() const {
  for (const auto& [number, channel] : channels_) {
    if (channel->has_published()) return true;
  }
  return false;
}

void AmqpConnectionCore::tell_alarm(bool alarm) {
  if (!blocked_notify_ || state_ != State::open) return;
  if (alarm && has_published() && !told_blocked_) {
    send(0, Method::of(m::kConnectionBlocked).set("reason", std::string("low on memory or disk")));
    told_blocked_ = true;
  } else if (!alarm && told_blocked_) {
    send(0, Method::of(m::kConnectionUnblocked));
    told_blocked_ = false;
  }
}

void AmqpConnectionCore::refuse_login(std::string_view step, const std::string& user, const Error& error,
                                      amqp::MethodId method) {
  // The same line as FireMQ's refused hello (Session::log_refused_hello): the operator sees every refused login,
  // whichever protocol, as RabbitMQ logs its refused AMQP logins. The user name as the client gave it, never the
  // password.
  log_refused_login(step, error.code, hints_.peer_address, user, error.msg);
  connection_error(error, method);
}

void AmqpConnectionCore::send(std::uint16_t channel, const Method& method) {
  wire_.write(amqp::encode_frame(amqp::FrameType::method, channel, amqp::encode_method(method)));  // not the hot path
}

void AmqpConnectionCore::connection_error(const Error& error, amqp::MethodId method) {
  if (state_ == State::closing) return;
  close_connection(error.code, amqp_reply_text(error.code, error.msg), method);
}

// connection.close, then the socket closes after the flush; what the client sends meanwhile (its close-ok) is
// read and dropped by the engine's lingering close. The channels end after the call that raised the error
// (feed), never inside it: the error may come from within one of them.
void AmqpConnectionCore::close_connection(std::uint16_t code, const std::string& text, amqp::MethodId method) {
  if (state_ != State::awaiting_header) {
    Method close = Method::of(m::kConnectionClose);
    close.set("reply_code", std::uint64_t{code}).set("reply_text", text);
    close.set("class_id", std::uint64_t{method.class_id}).set("method_id", std::uint64_t{method.method_id});
    send(0, close);
  }
  state_ = State::closing;
  wire_.close_after_flush();
}

std::size_t AmqpConnectionCore::open_channel_count() const {
  std::size_t n = 0;
  for (const auto& [number, channel] : channels_) n += channel->state() == AmqpChannel::State::open;
  return n;
}

}  // namespace firemq
