#include "reference-broker/net/stream_transport.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

namespace firemq {
namespace {

using boost::system::error_code;
using TlsStream = asio::ssl::stream<asio::ip::tcp::socket>;
constexpr std::size_t kReadChunk = 64 * 1024;
// Free read buffers kept for the next read (ReadBuffers).
constexpr std::size_t kSpareReadBuffers = 4;

// The read buffers of this thread's connections. A connection holds one only from the read that fills it until
// its frames are all taken (a read whose frames are processed in slices keeps it across the slices): an idle
// connection holds none, and the broker's one thread needs about one at a time. Spares are kept so that a busy
// connection does not allocate and free 64 KiB per read.
class ReadBuffers {
 public:
  using Buffer = std::unique_ptr<std::uint8_t[]>;
  static Buffer take() {
    auto& spare = spares();
    if (spare.empty()) return std::make_unique_for_overwrite<std::uint8_t[]>(kReadChunk);
    Buffer b = std::move(spare.back());
    spare.pop_back();
    return b;
  }
  static void give_back(Buffer b) {
    auto& spare = spares();
    if (b && spare.size() < kSpareReadBuffers) spare.push_back(std::move(b));
  }

 private:
  static std::vector<Buffer>& spares() {
    thread_local std::vector<Buffer> spare;
    return spare;
  }
};

// One class for both: TCP is the stream itself, TLS wraps it; what differs is the handshake, how a batch is
// written, and how the conversation ends.
template <class Stream>
class StreamTransport final : public Transport {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  StreamTransport(Stream stream, std::string_view scheme) : stream_(std::move(stream)), scheme_(scheme) {
    error_code ec;
    stream_.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ec);
    if constexpr (!kTls) stream_.non_blocking(true, ec);  // read_when_ready() reads without waiting
  }
  ~StreamTransport() override { ReadBuffers::give_back(std::move(chunk_)); }

  std::string_view scheme() const override { return scheme_; }
  std::string describe() const override { return describe_endpoints(stream_.lowest_layer()); }
  TransportHints hints() const override {
    return {std::nullopt, peer_address_of(stream_.lowest_layer()), std::nullopt};
  }

  awaitable<IoStatus> open() override {
    if constexpr (kTls) {
      error_code ec;
      co_await stream_.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return "TLS handshake failed: " + ec.message();
    }
    co_return IoStatus::done();
  }

  awaitable<bool> read() override {
    if (closing_) co_return co_await finish_close();
    error_code ec;
    std::size_t n = 0;
    if constexpr (kTls) {
      // OpenSSL may hold decrypted bytes the socket no longer shows, so TLS reads as usual, with a buffer held
      // while it waits.
      if (!chunk_) chunk_ = ReadBuffers::take();
      n = co_await stream_.async_read_some(asio::buffer(chunk_.get(), kReadChunk),
                                           asio::redirect_error(use_awaitable, ec));
    } else {
      n = co_await read_when_ready(ec);
    }
    if (ec == asio::error::operation_aborted && closing_) co_return co_await finish_close();
    if (ec) co_return false;
    unread_ = ByteView(chunk_.get(), n);
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
    ReadBuffers::give_back(std::move(chunk_));  // every byte is taken (a partial frame is the decoder's copy)
    return {};
  }

  ByteView unread_bytes() const override { return unread_; }
  void consume_bytes(std::size_t n) override {
    unread_ = unread_.subspan(std::min(n, unread_.size()));
    // Every byte is taken: AMQP's decoder keeps its own copy of a partial frame.
    if (unread_.empty()) ReadBuffers::give_back(std::move(chunk_));
  }

  awaitable<bool> write(ByteView frames) override {
    // The frames are already the bytes of the stream, back to back: one write (TLS cuts it into its records).
    error_code ec;
    co_await asio::async_write(stream_, asio::buffer(frames.data(), frames.size()),
                               asio::redirect_error(use_awaitable, ec));
    co_return !ec;
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
      co_await read_when_ready(ec);
      ReadBuffers::give_back(std::move(chunk_));  // what arrives while closing is dropped
      co_return !ec;
    }
  }

  // TCP: waits for bytes without a buffer, then takes one and reads what is there. The socket is non-blocking.
  // A read is tried before each wait: Asio's reactor is edge-triggered, so a wait would not see bytes that
  // were already waiting when it began (a read that filled the buffer leaves the rest in the socket).
  awaitable<std::size_t> read_when_ready(error_code& ec) {
    // As Asio's own async_read_some, which completes through the event loop even when bytes are waiting:
    // the other connections get their turn between two reads of this one.
    co_await asio::post(stream_.get_executor(), use_awaitable);
    while (true) {
      if (!chunk_) chunk_ = ReadBuffers::take();
      const std::size_t n = stream_.read_some(asio::buffer(chunk_.get(), kReadChunk), ec);
      if (ec != asio::error::would_block && ec != asio::error::try_again) co_return n;
      ReadBuffers::give_back(std::move(chunk_));  // idle: no buffer held while waiting
      co_await stream_.async_wait(asio::socket_base::wait_read, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return 0;
    }
  }

  Stream stream_;
  std::string_view scheme_;  // "fire", "fires" or "amqp": a literal
  FrameDecoder decoder_{StreamSide::server};
  ReadBuffers::Buffer chunk_;  // held only while it has bytes the decoder has not taken (ReadBuffers)
  ByteView unread_;            // the part of chunk_ the decoder has not taken yet
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

std::unique_ptr<Transport> make_tcp_transport(asio::ip::tcp::socket socket, std::string_view scheme) {
  return std::make_unique<StreamTransport<asio::ip::tcp::socket>>(std::move(socket), scheme);
}

std::unique_ptr<Transport> make_tls_transport(asio::ip::tcp::socket socket, asio::ssl::context& tls,
                                              std::string_view scheme) {
  return std::make_unique<StreamTransport<TlsStream>>(TlsStream(std::move(socket), tls), scheme);
}

}  // namespace firemq
