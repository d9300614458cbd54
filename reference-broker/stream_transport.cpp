#include "reference-broker/stream_transport.h"

#include <array>
#include <sstream>
#include <type_traits>

namespace firemq {
namespace {

using boost::system::error_code;
using TlsStream = asio::ssl::stream<asio::ip::tcp::socket>;
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kWriteChunk = 64 * 1024;

// One class for both: TCP is the stream itself, TLS wraps it; what differs is the handshake, how a batch is
// written, and how the conversation ends.
template <class Stream>
class StreamTransport final : public Transport {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  explicit StreamTransport(Stream stream) : stream_(std::move(stream)) {
    error_code ec;
    stream_.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ec);
  }

  std::string_view scheme() const override { return kTls ? "fires" : "fire"; }
  std::string describe() const override { return describe_endpoints(stream_.lowest_layer()); }
  TransportHints hints() const override { return {std::nullopt, peer_address_of(stream_.lowest_layer())}; }

  awaitable<Result<bool, std::string>> open() override {
    if constexpr (kTls) {
      error_code ec;
      co_await stream_.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return "TLS handshake failed: " + ec.message();
    }
    co_return true;
  }

  awaitable<bool> read() override {
    if (closing_) co_return co_await finish_close();
    error_code ec;
    const std::size_t n =
        co_await stream_.async_read_some(asio::buffer(chunk_), asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted && closing_) co_return co_await finish_close();
    if (ec) co_return false;
    unread_ = ByteView(chunk_.data(), n);
    co_return true;
  }

  NextFrame next_frame(std::size_t max_frame) override {
    decoder_.set_max_frame(max_frame);
    while (!unread_.empty()) {
      const auto step = decoder_.feed(unread_);
      unread_ = unread_.subspan(step.consumed);
      if (step.state == FrameDecoder::State::frame) return {NextFrame::Kind::frame, decoder_.take_frame(), {}};
      if (step.state == FrameDecoder::State::error) return {NextFrame::Kind::error, {}, decoder_.error()};
    }
    return {};
  }

  awaitable<bool> write(std::span<const Bytes> frames) override {
    // Small frames are joined into chunks of up to kWriteChunk: TLS would otherwise make a record of each, and
    // a gathered write over TCP goes out in writes of at most 64 buffers (Asio's limit), a system call per 64
    // frames. A frame of a chunk's size or more goes as it is.
    std::size_t next = 0;
    while (next < frames.size()) {
      ByteView chunk;
      if (frames[next].size() >= kWriteChunk) {
        chunk = frames[next++];
      } else {
        joined_.clear();
        while (next < frames.size() && joined_.size() + frames[next].size() <= kWriteChunk) {
          joined_.insert(joined_.end(), frames[next].begin(), frames[next].end());
          ++next;
        }
        chunk = joined_;
      }
      error_code ec;
      co_await asio::async_write(stream_, asio::buffer(chunk.data(), chunk.size()), asio::redirect_error(use_awaitable, ec));
      if (ec) co_return false;
    }
    co_return true;
  }

  awaitable<void> begin_close() override {
    closing_ = true;
    error_code ec;
    if constexpr (kTls) {
      // The close_notify exchange reads, and the engine's reader is the only reader: its pending read is
      // interrupted, and read() carries out the exchange (finish_close).
      stream_.lowest_layer().cancel(ec);
    } else {
      stream_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    }
    co_return;
  }

  void abort() override {
    error_code ec;
    stream_.lowest_layer().close(ec);
  }

 private:
  // Ending the conversation: TLS sends close_notify and waits for the peer's; TCP, whose sending side is
  // already shut down, reads until the peer's end of stream (the engine drops what arrives).
  awaitable<bool> finish_close() {
    if constexpr (kTls) {
      error_code ec;
      co_await stream_.async_shutdown(asio::redirect_error(use_awaitable, ec));
      co_return false;
    } else {
      error_code ec;
      co_await stream_.async_read_some(asio::buffer(chunk_), asio::redirect_error(use_awaitable, ec));
      co_return !ec;
    }
  }

  Stream stream_;
  FrameDecoder decoder_{StreamSide::server};
  std::array<std::uint8_t, kReadChunk> chunk_;
  ByteView unread_;  // the part of chunk_ the decoder has not taken yet
  Bytes joined_;  // small frames joined for one write: at most kWriteChunk
  bool closing_ = false;
};

}  // namespace

std::string describe_endpoints(const asio::basic_socket<asio::ip::tcp>& socket) {
  error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  const auto local = socket.local_endpoint(ec);
  std::ostringstream name;
  name << peer.address().to_string() << ":" << peer.port() << " -> " << local.address().to_string() << ":"
       << local.port();
  return name.str();
}

std::string peer_address_of(const asio::basic_socket<asio::ip::tcp>& socket) {
  error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  return ec ? std::string("unknown") : peer.address().to_string();
}

std::unique_ptr<Transport> make_tcp_transport(asio::ip::tcp::socket socket) {
  return std::make_unique<StreamTransport<asio::ip::tcp::socket>>(std::move(socket));
}

std::unique_ptr<Transport> make_tls_transport(asio::ip::tcp::socket socket, asio::ssl::context& tls) {
  return std::make_unique<StreamTransport<TlsStream>>(TlsStream(std::move(socket), tls));
}

}  // namespace firemq
