#include "reference-broker/net/websocket_transport.h"

#include <type_traits>

#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "protocol/reply_codes.h"
#include "reference-broker/core/config.h"
#include "reference-broker/net/stream_transport.h"

namespace firemq {
namespace {

namespace websocket = beast::websocket;
using boost::system::error_code;
constexpr std::size_t kReadChunk = 64 * 1024;
// A message buffer that grew past this is given back once its frame is taken: a connection that once read a
// large message does not keep its size while idle. Smaller ones are kept for the next message.
constexpr std::size_t kKeptMessageCapacity = 4 * 1024;

// Takes the first frame off the front of `frames` (frames in their stream form, back to back, as the engine
// encoded them: each len is right).
ByteView next_stream_frame(ByteView& frames) {
  const std::size_t size = kLenSize + read_u32_be(frames.data());
  const ByteView frame = frames.first(size);
  frames = frames.subspan(size);
  return frame;
}

template <class Stream>
class WebSocketTransport final : public Transport {
  static constexpr bool kTls = std::is_same_v<Stream, TlsHttpStream>;

 public:
  WebSocketTransport(Stream stream, HttpRequest upgrade, TransportHints hints,
                     std::chrono::milliseconds handshake_timeout, WebSocketFaults faults)
      : ws_(std::move(stream)),
        upgrade_(std::move(upgrade)),
        hints_(std::move(hints)),
        handshake_timeout_(handshake_timeout),
        faults_(faults) {
    hints_.peer_address = peer_address_of(beast::get_lowest_layer(ws_).socket());
  }

  std::string_view scheme() const override { return kTls ? "wss" : "ws"; }
  std::string describe() const override { return describe_endpoints(beast::get_lowest_layer(ws_).socket()); }
  TransportHints hints() const override { return hints_; }

  awaitable<IoStatus> open() override {
    // From here on the WebSocket layer keeps its own time: no idle timeout (FireMQ's heartbeats are the rule),
    // no keep-alive pings of its own.
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout{handshake_timeout_, websocket::stream_base::none(), false});
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& response) { response.set(beast::http::field::server, kServerName); }));
    ws_.binary(true);
    ws_.read_message_max(kMaxFrameLimit);  // a ceiling; read() applies the session's limit as bytes arrive
    error_code ec;
    co_await ws_.async_accept(upgrade_, asio::redirect_error(use_awaitable, ec));
    upgrade_ = {};
    if (ec) co_return "WebSocket upgrade refused: " + ec.message();
    co_return IoStatus::done();
  }

  // Reads one whole message, checking as it grows that it stays a binary message within the limit.
  awaitable<bool> read() override {
    if (refused_) co_return co_await drain();
    message_.clear();
    message_ready_ = false;
    while (true) {
      error_code ec;
      co_await ws_.async_read_some(message_, kReadChunk, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return false;
      if (!ws_.got_binary() && !faults_.accept_text) {
        refuse(websocket::close_code::unknown_data,
               "a text WebSocket message: FireMQ frames travel in binary messages, one frame each");
        co_return true;
      }
      if (kLenSize + message_.size() > limit_) {
        refuse(websocket::close_code::too_big,
               "a WebSocket message of more than " + std::to_string(message_.size()) +
                   " bytes exceeds the frame limit of " + std::to_string(limit_) +
                   " bytes (a frame's size counts the len field it has on TCP: 4 + message size)");
        co_return true;
      }
      if (ws_.is_message_done()) {
        message_ready_ = true;
        co_return true;
      }
    }
  }

  // A read brings one message, so the engine asks whether more bytes are already waiting in the socket, to
  // send one confirm {upto} for a batch of publishes as on TCP.
  bool has_buffered_input() override {
    error_code ec;
    return beast::get_lowest_layer(ws_).socket().available(ec) > 0;
  }

  NextFrame next_frame(std::size_t max_frame) override {
    limit_ = max_frame;  // the limit for the next message read()s
    if (pending_error_) {
      NextFrame refused{NextFrame::Kind::error, {}, *pending_error_};
      pending_error_.reset();
      return refused;
    }
    if (!message_ready_) return {};
    message_ready_ = false;
    const auto data = message_.cdata();
    auto frame = decode_message_frame(ByteView(static_cast<const std::uint8_t*>(data.data()), data.size()), max_frame);
    if (message_.capacity() > kKeptMessageCapacity) message_ = beast::flat_buffer();  // the frame is a copy
    if (!frame) return {NextFrame::Kind::error, {}, frame.error()};
    return {NextFrame::Kind::frame, std::move(*frame), {}};
  }

  awaitable<bool> write(ByteView frames) override {
    if (faults_.pack_frames) co_return co_await write_packed(frames);
    for (ByteView rest = frames; !rest.empty();) {
      const ByteView frame = next_stream_frame(rest);
      error_code ec;
      co_await ws_.async_write(asio::buffer(frame.data() + kLenSize, frame.size() - kLenSize),
                               asio::redirect_error(use_awaitable, ec));
      if (ec) co_return false;
    }
    co_return true;
  }

  awaitable<void> begin_close() override {
    // The engine's reader may be waiting in async_read_some: Beast allows a close beside one read, and that
    // read completes once the close handshake is done.
    error_code ec;
    co_await ws_.async_close(close_code_, asio::redirect_error(use_awaitable, ec));
  }

  void abort() override {
    error_code ec;
    beast::get_lowest_layer(ws_).socket().close(ec);
  }

 private:
  // The message is refused with error 501 (fatal): the session sends it, then the close says why in WebSocket
  // terms too.
  void refuse(websocket::close_code code, std::string why) {
    refused_ = true;
    close_code_ = code;
    pending_error_ = make_error(ReplyCode::frame_error, std::move(why));
    pending_error_->fatal = true;
  }

  // The pack_frames fault: every frame of the batch in one message, each still without its len.
  awaitable<bool> write_packed(ByteView frames) {
    Bytes packed;
    for (ByteView rest = frames; !rest.empty();) {
      const ByteView frame = next_stream_frame(rest);
      packed.insert(packed.end(), frame.begin() + kLenSize, frame.end());
    }
    error_code ec;
    co_await ws_.async_write(asio::buffer(packed), asio::redirect_error(use_awaitable, ec));
    co_return !ec;
  }

  // After a refused message nothing more is a frame; what arrives is read and dropped until the close is done.
  awaitable<bool> drain() {
    message_.clear();
    error_code ec;
    co_await ws_.async_read_some(message_, kReadChunk, asio::redirect_error(use_awaitable, ec));
    co_return !ec;
  }

  // Without permessage-deflate (the second argument): the broker never offers it (no permessage_deflate option is
  // set, so an upgrade asking for it is answered without it), and leaving its code out of the two instantiations
  // (ws, wss) takes a third off the build's slowest file.
  websocket::stream<Stream, false> ws_;
  HttpRequest upgrade_;
  TransportHints hints_;
  std::chrono::milliseconds handshake_timeout_;
  WebSocketFaults faults_;
  beast::flat_buffer message_;
  bool message_ready_ = false;
  std::size_t limit_ = kMaxFrameBeforeWelcome;
  bool refused_ = false;
  std::optional<Error> pending_error_;
  websocket::close_code close_code_ = websocket::close_code::normal;
};

}  // namespace

std::unique_ptr<Transport> make_ws_transport(beast::tcp_stream stream, HttpRequest upgrade, TransportHints hints,
                                             std::chrono::milliseconds handshake_timeout, WebSocketFaults faults) {
  return std::make_unique<WebSocketTransport<beast::tcp_stream>>(std::move(stream), std::move(upgrade),
                                                                 std::move(hints), handshake_timeout, faults);
}

std::unique_ptr<Transport> make_wss_transport(TlsHttpStream stream, HttpRequest upgrade, TransportHints hints,
                                              std::chrono::milliseconds handshake_timeout, WebSocketFaults faults) {
  return std::make_unique<WebSocketTransport<TlsHttpStream>>(std::move(stream), std::move(upgrade), std::move(hints),
                                                             handshake_timeout, faults);
}

}  // namespace firemq
