#include "harness/client_mode/client_proxy_stream.h"

#include <utility>  // before Boost 1.74's headers under g++ 12 (as reference-broker/net/asio.h)

#include <fcntl.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "harness/client/client_tls.h"
#include "harness/client/websocket_framing.h"

namespace firemq::conform {
namespace {

namespace http = boost::beast::http;

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Waits for `events` on `fd` until `deadline`; false when the time ran out first.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd pfd{fd, events, 0};
  return ::poll(&pfd, 1, ms_until(deadline)) > 0;
}

std::string lower(boost::beast::string_view text) {
  std::string out(text.data(), text.size());
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

UpgradeAnswer refusal(int status, const char* reason, std::string why, const char* extra_header = "") {
  return {"HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" + extra_header +
              "Content-Length: 0\r\nConnection: close\r\n\r\n",
          false, std::move(why)};
}

}  // namespace

Result<std::shared_ptr<ProxyTls>, std::string> ProxyTls::load(const TestCertificates& certificates) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return "SSL_CTX_new: " + openssl_errors();
  std::shared_ptr<ProxyTls> tls(new ProxyTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, certificates.cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, certificates.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return "cannot load the proxy's certificate " + certificates.cert_file.string() + ": " + openssl_errors();
  }
  return tls;
}

ProxyTls::~ProxyTls() { SSL_CTX_free(ctx_); }

ServerStream::ServerStream(int fd) : fd_(fd) { ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK); }

ServerStream::~ServerStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ::close(fd_);
}

short ServerStream::wanted(int error) const {
  if (error == SSL_ERROR_WANT_READ) return POLLIN;
  if (error == SSL_ERROR_WANT_WRITE) return POLLOUT;
  return -1;
}

IoStatus ServerStream::accept_tls(const ProxyTls& tls, Clock::time_point deadline) {
  std::lock_guard lock(ssl_lock_);
  ssl_ = SSL_new(tls.context());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return "SSL_new: " + openssl_errors();
  SSL_set_accept_state(ssl_);
  while (true) {
    const int rc = SSL_accept(ssl_);
    if (rc == 1) return IoStatus::done();
    const short events = wanted(SSL_get_error(ssl_, rc));
    if (events < 0) return "the TLS handshake failed: " + openssl_errors();
    if (!wait_for(fd_, events, deadline)) return "the TLS handshake did not finish in time";
  }
}

ReadOutcome ServerStream::read_some(std::span<std::uint8_t> into, int quiet_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(quiet_ms);
  while (true) {
    short events = POLLIN;
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_, into.data(), into.size(), 0);
      if (n > 0) return {ReadOutcome::Kind::data, static_cast<std::size_t>(n), {}};
      if (n == 0) return {ReadOutcome::Kind::closed, 0, "end of stream"};
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return {ReadOutcome::Kind::closed, 0, std::strerror(errno)};
    } else {
      std::unique_lock lock(ssl_lock_);
      const int n = SSL_read(ssl_, into.data(), static_cast<int>(into.size()));
      if (n > 0) return {ReadOutcome::Kind::data, static_cast<std::size_t>(n), {}};
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_ZERO_RETURN) return {ReadOutcome::Kind::closed, 0, "TLS close_notify"};
      events = wanted(error);
      if (events < 0) return {ReadOutcome::Kind::closed, 0, "TLS: " + openssl_errors()};
    }
    if (!wait_for(fd_, events, deadline)) return {ReadOutcome::Kind::timeout, 0, {}};
  }
}

bool ServerStream::write_all(ByteView bytes) {
  while (!bytes.empty()) {
    short events = POLLOUT;
    std::size_t written = 0;
    {
      std::lock_guard lock(ssl_lock_);  // the reader's thread may be starting TLS: ssl_ is read under the lock
      if (write_shut_) return false;
      if (ssl_ == nullptr) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n > 0) written = static_cast<std::size_t>(n);
        else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return false;
      } else {
        const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
        if (n > 0) written = static_cast<std::size_t>(n);
        else if ((events = wanted(SSL_get_error(ssl_, n))) < 0) return false;
      }
    }
    bytes = bytes.subspan(written);
    // Waits for room without the lock: shutdown_both() wakes it when the proxy stops, and a client that reads
    // nothing for 10 s (longer than any case waits) has stopped reading.
    if (written == 0 && !wait_for(fd_, events, Clock::now() + std::chrono::seconds(10))) return false;
  }
  return true;
}

void ServerStream::shutdown_write() {
  std::lock_guard lock(ssl_lock_);
  if (ssl_ != nullptr && !write_shut_) SSL_shutdown(ssl_);  // close_notify; the client's is not awaited
  write_shut_ = true;
  ::shutdown(fd_, SHUT_WR);
}

void ServerStream::shutdown_both() { ::shutdown(fd_, SHUT_RDWR); }

UpgradeAnswer websocket_upgrade_answer(std::string_view head) {
  http::request_parser<http::empty_body> parser;
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  if (ec || !parser.is_header_done()) return refusal(400, "Bad Request", "the upgrade request is not HTTP/1.1");
  const auto& request = parser.get();
  const std::string_view target(request.target().data(), request.target().size());
  if (target.substr(0, target.find('?')) != "/fire") {
    return refusal(404, "Not Found", "the upgrade asked for " + std::string(target) + ", not /fire");
  }
  if (request.method() != http::verb::get || lower(request[http::field::upgrade]) != "websocket" ||
      lower(request[http::field::connection]).find("upgrade") == std::string::npos) {
    return refusal(426, "Upgrade Required", "a request for /fire that is no WebSocket upgrade",
                   "Upgrade: websocket\r\n");
  }
  if (request["Sec-WebSocket-Version"] != "13") {
    return refusal(426, "Upgrade Required", "Sec-WebSocket-Version is not 13", "Sec-WebSocket-Version: 13\r\n");
  }
  const auto key = request["Sec-WebSocket-Key"];
  if (key.size() != 24) return refusal(400, "Bad Request", "Sec-WebSocket-Key is not the base64 of 16 bytes");
  return {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
              websocket_accept_for(std::string_view(key.data(), key.size())) + "\r\n\r\n",
          true,
          {}};
}

}  // namespace firemq::conform
