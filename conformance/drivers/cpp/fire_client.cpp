#include "fire_client.h"

#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/typed_json.h"

namespace firemq::example {
namespace {

using Json = nlohmann::json;

Json typed(const Map& map) { return typed_json_from_value(Value(map)); }
std::string text(ByteView bytes) { return std::string(bytes.begin(), bytes.end()); }

// The rid of a reply, when the frame is one.
std::optional<std::uint64_t> reply_rid(const Message& m) {
  if (const auto* ok = std::get_if<op::Ok>(&m)) return ok->rid;
  if (const auto* error = std::get_if<op::Error>(&m)) return error->rid;
  if (const auto* got = std::get_if<op::GetOk>(&m)) return got->rid;
  return std::nullopt;
}

}  // namespace

FireClient::~FireClient() { drop_connection(); }

void FireClient::drop_connection() { link_.reset(); }

// One frame, in its TCP form: the link sends it as its transport carries frames.
bool FireClient::write(const Bytes& frame) {
  if (link_ == nullptr || !link_->send_frame(frame)) return false;
  last_sent_ = Clock::now();  // for the heartbeat: anything sent counts
  return true;
}

// close, as the spec gives it ({"code": uint, "msg": str}), or with its code as a string (a break).
Bytes FireClient::close_frame(std::uint64_t code, const std::string& msg) const {
  if (!breaks_.close_code_as_string) return encode_frame(op::Close{code, msg});
  return raw_frame(OpCode::close, Map{{Value("code"), Value(std::to_string(code))}, {Value("msg"), Value(msg)}});
}

// hello, or with its caps as one string (a break).
Bytes FireClient::hello_frame(const op::Hello& hello) const {
  if (!breaks_.caps_as_string) return encode_frame(hello);
  Map header = header_to_map(hello);
  for (MapEntry& e : header) {
    if (e.key == Value("caps")) e.value = Value("confirms,credit,mandatory");
  }
  return raw_frame(OpCode::hello, header);
}

// pong: an empty header (hlen 0), or what a break puts there instead; in two WebSocket messages with
// split_pong_on_websocket.
void FireClient::send_pong() {
  if (breaks_.pong_header_array) return void(write(raw_frame(OpCode::pong, Value(Array{}))));
  if (breaks_.pong_header_int_key)
    return void(write(raw_frame(OpCode::pong, Map{{Value(std::uint64_t{1}), Value(std::uint64_t{1})}})));
  const Bytes pong = encode_frame(op::Pong{});
  if (breaks_.split_pong_on_websocket && link_ && link_->websocket()) {
    if (link_->send_split_frame(pong)) last_sent_ = Clock::now();
    return;
  }
  write(pong);
}

// A frame whose header is any MessagePack value: what the breaks send that encode_frame cannot.
Bytes FireClient::raw_frame(OpCode code, const Value& header) {
  Bytes header_bytes;
  encode_value(header, header_bytes);
  return frame_stream(static_cast<std::uint8_t>(code), header_bytes, {});
}

Result<bool, std::string> FireClient::send(const Message& message) {
  if (!write(encode_frame(message))) return std::string("not connected");
  return true;
}

Result<op::Welcome, std::string> FireClient::connect(const Url& url, std::uint64_t heartbeat,
                                                     const std::string& ca_file, Clock::time_point deadline) {
  // FMQ1 on TCP and TLS, none on WebSocket (unless a break says otherwise)
  auto link = Link::open(url, ca_file, url.websocket ? breaks_.fmq1_on_websocket : !breaks_.no_fmq1, deadline);
  if (!link) return link.error();
  link_ = std::move(*link);
  start_connection_state();
  op::Hello hello;
  hello.ver = breaks_.hello_ver_2 ? 2 : 1;  // "Protocol major version. Must be `1`."
  hello.vhost = breaks_.hello_ignores_url_vhost ? "/" : url.vhost;
  hello.auth = breaks_.hello_ignores_url_credentials ? op::Auth{"plain", "guest", "guest"}
                                                     : op::Auth{"plain", url.user, url.password};
  hello.heartbeat = heartbeat;
  hello.client = {{Value("name"), Value("firemq-example-cpp")}, {Value("lang"), Value("c++")}};
  hello.caps = {"confirms", "credit", "mandatory"};
  // "Before welcome, a frame may be at most 65 536 bytes": the break's client info makes hello bigger.
  if (breaks_.huge_hello) hello.client.push_back({Value("padding"), Value(std::string(70 * 1024, 'x'))});
  if (breaks_.ping_before_hello) write(encode_frame(op::Ping{}));
  if (!write(hello_frame(hello))) return std::string("cannot send hello");
  auto got = await_reply(deadline);
  if (!got) return got.error();
  if (const auto* error = std::get_if<op::Error>(&*reply_))
    return "refused: " + std::to_string(error->code) + " " + error->msg;
  if (!std::holds_alternative<op::Welcome>(*reply_)) return std::string("the server did not answer hello with welcome");
  const op::Welcome welcome = std::get<op::Welcome>(*reply_);
  // "After welcome, the limit is welcome.max_frame": what the server sends stays within it too.
  max_frame_ = welcome.max_frame != 0 ? welcome.max_frame : kDefaultMaxFrame;
  heartbeat_ = std::chrono::seconds(welcome.heartbeat);
  reply_.reset();
  return welcome;
}

// Everything the protocol numbers or tracks per connection starts afresh, so that a connection after a closed
// or dead one numbers its publishes from 1 again (seq "starting at 1 and increasing by 1") and keeps no bytes
// or replies of the old one.
void FireClient::start_connection_state() {
  decoder_ = FrameDecoder(StreamSide::client, kDefaultMaxFrame);
  max_frame_ = kMaxFrameBeforeWelcome;
  next_rid_ = 1;
  next_seq_ = 1;
  reply_.reset();
  confirmed_upto_ = 0;
  nacked_.clear();
  awaiting_reply_ = false;
  closing_ = false;
  close_replied_ = false;
  paused_ = false;
  heartbeat_ = {};  // until this connection's welcome says
}

// Design rules: "Requests carry a request id (rid) and get exactly one reply". One request at a time here, so
// the reply in flight is the one with this rid.
Result<Message, std::string> FireClient::request(Message request, Clock::time_point deadline) {
  const std::uint64_t rid = breaks_.no_rid ? 0 : next_rid_++;
  std::visit(
      [rid](auto& m) {
        if constexpr (requires { m.rid; }) m.rid = rid;
      },
      request);
  if (!write(encode_frame(request))) return std::string("not connected");
  auto got = await_reply(deadline);
  if (!got) return got.error();
  Message reply = std::move(*reply_);
  reply_.reset();
  return reply;
}

// Publishing: "Client-assigned sequence number, starting at 1 and increasing by 1. `0` means no confirm is
// wanted."
Result<bool, std::string> FireClient::publish(op::Publish publish, const std::string& body, bool confirm,
                                              Clock::time_point deadline) {
  auto seq = send_publish(std::move(publish), body, confirm, deadline);
  if (!seq) return seq.error();
  if (!confirm) return true;
  return await_confirm(*seq, deadline);
}

Result<std::uint64_t, std::string> FireClient::send_publish(op::Publish publish, const std::string& body, bool confirm,
                                                            Clock::time_point deadline) {
  // "Clients stop publishing until pause: false": the publish waits for the server's resume.
  if (paused_ && !breaks_.publish_while_paused) {
    auto resumed = wait_until([this] { return !paused_; }, deadline);
    if (!resumed) return "still paused by the server's flow: " + resumed.error();
  }
  const bool numbered = confirm || breaks_.seq_on_unconfirmed;
  if (numbered) {
    if (breaks_.seq_from_2 && next_seq_ == 1) next_seq_ = 2;
    publish.seq = next_seq_;
  }
  const Bytes frame = encode_frame(publish, Bytes(body.begin(), body.end()));
  // "A message body must fit in one frame." and "After welcome, the limit is welcome.max_frame": a message too
  // big is refused here, before it takes a sequence number.
  if (frame.size() > max_frame_ && !breaks_.ignores_max_frame) {
    return "the message does not fit in one frame: " + std::to_string(frame.size()) +
           " bytes, the server's max_frame is " + std::to_string(max_frame_);
  }
  if (numbered) ++next_seq_;
  if (!write(frame)) return std::string("not connected");
  return publish.seq;
}

// confirm: {"upto": n} "confirms every outstanding publish with seq <= n"; {"seq": n, "nack": true} "rejects one
// publish". "A nack for a sequence number is always sent before any upto that covers it."
Result<bool, std::string> FireClient::await_confirm(std::uint64_t seq, Clock::time_point deadline) {
  auto got = wait_until([&] { return nacked_.count(seq) > 0 || confirmed(seq); }, deadline);
  if (!got) return got.error();
  return nacked_.count(seq) == 0;
}

bool FireClient::confirmed(std::uint64_t seq) const {
  if (breaks_.upto_confirms_one) return confirmed_one_.count(seq) > 0;  // the break: upto n settles n alone
  return confirmed_upto_ >= seq;
}

Result<bool, std::string> FireClient::close(Clock::time_point deadline) {
  closing_ = true;
  close_replied_ = false;
  // close: "Code 200 means a normal shutdown."
  if (!breaks_.close_without_frame && !write(close_frame(breaks_.close_not_200 ? 320u : 200u, "bye"))) {
    return std::string("not connected");
  }
  auto got = breaks_.close_without_frame ? Result<bool, std::string>(true)
                                         : wait_until([this] { return close_replied_; }, deadline);
  // "... and closes the socket": the break keeps it open until the driver exits.
  if (breaks_.keep_socket_after_close) lingering_ = std::move(link_);
  else drop_connection();
  if (!got) return got.error();
  return true;
}

Result<bool, std::string> FireClient::await_reply(Clock::time_point deadline) {
  reply_.reset();
  awaiting_reply_ = true;
  auto got = wait_until([this] { return reply_.has_value(); }, deadline);
  awaiting_reply_ = false;
  return got;
}

template <class Done>
Result<bool, std::string> FireClient::wait_until(Done done, Clock::time_point deadline) {
  while (!done()) {
    if (!link_) return std::string("the connection is closed");
    if (Clock::now() >= deadline) return std::string("timed out");
    auto pumped = pump(deadline);
    if (!pumped) return pumped.error();
  }
  return true;
}

Result<bool, std::string> FireClient::pump(Clock::time_point deadline) {
  Bytes received;
  // A heartbeat falling due ends the wait early (wait_until pumps again until its own deadline).
  const Link::Read read = link_->read(received, std::min(deadline, heartbeat_due().value_or(deadline)));
  if (read == Link::Read::nothing) return keep_heartbeat();
  if (read == Link::Read::ended) {
    emit_closed("socket", 0, "the connection ended without close");
    drop_connection();
    return true;
  }
  last_received_ = Clock::now();  // for the heartbeat: any byte counts
  ByteView rest(received);
  while (!rest.empty() && link_) {
    const auto step = decoder_.feed(rest);
    rest = rest.subspan(step.consumed);
    if (step.state == FrameDecoder::State::error) {
      drop_connection();
      return "the server sent bytes that are no frame: " + decoder_.error().msg;
    }
    if (step.state == FrameDecoder::State::frame) handle(decoder_.take_frame());
  }
  return keep_heartbeat();
}

// Heartbeats: "each side sends ping when it has sent nothing for h / 2 seconds. Each side considers the peer
// dead when it has received nothing for 2 × h seconds." A dead server is reported and its connection dropped
// (without close: it would not read one).
std::optional<FireClient::Clock::time_point> FireClient::heartbeat_due() const {
  if (link_ == nullptr || heartbeat_.count() == 0) return std::nullopt;
  std::optional<Clock::time_point> due;
  if (!breaks_.no_ping && !closing_) due = last_sent_ + (breaks_.ping_every_h ? heartbeat_ : heartbeat_ / 2);
  if (!breaks_.never_declares_dead)
    due = std::min(due.value_or(Clock::time_point::max()), last_received_ + 2 * heartbeat_);
  return due;
}

namespace {
int ms_left(FireClient::Clock::time_point deadline) {
  // Rounded up: a wait that ends before its deadline would find nothing due and wait again.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - FireClient::Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}
}  // namespace

int FireClient::heartbeat_wait_ms() const {
  const auto due = heartbeat_due();
  return due ? ms_left(*due) : -1;
}

Result<bool, std::string> FireClient::keep_heartbeat() {
  const auto now = Clock::now();
  if (!heartbeat_due() || now < *heartbeat_due()) return true;
  if (!breaks_.never_declares_dead && now - last_received_ >= 2 * heartbeat_) {
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_received_).count();
    emit_closed("heartbeat", 0, "nothing from the server for " + std::to_string(silent) + " ms: it is dead");
    drop_connection();
  } else if (!write(encode_frame(op::Ping{}))) {
    return std::string("cannot send ping");
  }
  return true;
}

void FireClient::emit_closed(const char* by, std::uint64_t code, const std::string& msg) {
  on_event_({{"event", "closed"}, {"by", by}, {"code", code}, {"msg", msg}});
}

// What the server sent: replies for the request in flight, confirms, and everything else as events.
// "Implementations ignore header keys they do not know": decode_frame skips them.
void FireClient::handle(const RawFrame& frame) {
  auto decoded = decode_frame(frame);
  // An op version 1 does not define (a later version's) is ignored, as unknown header keys are: the server
  // keeps the connection open for a client's unknown op (540), and the client does the same for the server's.
  if (!decoded && decoded.error().code == 540 && !breaks_.unknown_op_is_an_error) return;
  if (!decoded)
    return on_event_(
        {{"event", "error"}, {"code", decoded.error().code}, {"msg", "undecodable frame: " + decoded.error().msg}});
  Message& m = *decoded;
  if (std::holds_alternative<op::Ping>(m)) {
    if (!breaks_.no_pong) send_pong();  // "A peer that receives ping replies pong."
  } else if (const auto* close = std::get_if<op::Close>(&m)) {
    if (closing_) {
      close_replied_ = true;  // the answer to our close: the conversation is over
      return;
    }
    // close: "The receiver replies with its own close and closes the socket."
    emit_closed("server", close->code, close->msg);
    if (!breaks_.no_close_reply) write(close_frame(200, "closing as asked"));
    drop_connection();
  } else if (const auto* confirm = std::get_if<op::Confirm>(&m)) {
    if (confirm->nack && breaks_.nack_rejects_all) {
      for (std::uint64_t s = confirmed_upto_ + 1; s <= confirm->seq; ++s) nacked_.insert(s);  // the break: cumulative
    } else if (confirm->nack) {
      nacked_.insert(confirm->seq);
    } else {
      confirmed_upto_ = std::max(confirmed_upto_, confirm->upto);
      confirmed_one_.insert(confirm->upto);
    }
  } else if (const auto* deliver = std::get_if<op::Deliver>(&m)) {
    on_event_({{"event", "delivered"},
               {"subscription", deliver->sub},
               {"delivery_tag", deliver->tag},
               {"redelivered", deliver->redelivered},
               {"exchange", deliver->exchange},
               {"key", deliver->key},
               {"props", typed(deliver->props.entries)},
               {"headers", typed(deliver->headers)},
               {"body", text(breaks_.body_cut
                                 ? frame.payload().first(frame.payload().size() - (frame.payload().empty() ? 0 : 1))
                                 : frame.payload())}});
  } else if (const auto* returned = std::get_if<op::Return>(&m); returned != nullptr && breaks_.no_return_event) {
    return;
  } else if (returned != nullptr) {
    on_event_({{"event", "returned"},
               {"code", returned->code},
               {"msg", returned->msg},
               {"exchange", returned->exchange},
               {"key", returned->key},
               {"body", text(frame.payload())}});
  } else if (const auto* flow = std::get_if<op::Flow>(&m)) {
    paused_ = flow->pause;
    on_event_({{"event", "flow"}, {"pause", flow->pause}});
  } else if (const auto* cancelled = std::get_if<op::Cancelled>(&m)) {
    // The subscription is over, the connection is not: the application is told, and goes on.
    if (!breaks_.cancelled_ignored) {
      on_event_({{"event", "cancelled"},
                 {"subscription", cancelled->sub},
                 {"code", cancelled->code},
                 {"msg", cancelled->msg}});
    }
    if (breaks_.cancelled_ends_connection) {
      emit_closed("server", cancelled->code, cancelled->msg);
      drop_connection();
    }
  } else if (const auto* error = std::get_if<op::Error>(&m); error != nullptr && error->rid == 0 && !awaiting_reply_) {
    on_event_({{"event", "error"}, {"code", error->code}, {"msg", error->msg}, {"fatal", error->fatal}});
    // "`fatal` true when the server closes the connection after this frame": the connection is over now, not
    // when the socket ends, and nothing more is sent on it.
    if (error->fatal && !breaks_.ignore_fatal) {
      emit_closed("server", error->code, error->msg);
      drop_connection();
    }
  } else if (std::holds_alternative<op::Welcome>(m) || reply_rid(m)) {
    if (std::holds_alternative<op::GetOk>(m)) last_get_body_ = text(frame.payload());
    reply_ = std::move(m);
  }
}

}  // namespace firemq::example
