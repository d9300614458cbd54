#include "harness/client/client_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace firemq::conform {

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

namespace {

// One SSL_CTX per way of verifying, shared by every connection of the run: loading a CA store per case would
// cost more than the case. SSL_CTX is safe to share once configured.
Result<SSL_CTX*, std::string> context_for(const TlsOptions& tls) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, bool>, SSL_CTX*> contexts;  // kept for the process's life
  std::lock_guard lock(mutex);
  auto key = std::make_pair(tls.ca_file, tls.insecure);
  if (auto it = contexts.find(key); it != contexts.end()) return it->second;
  // OpenSSL writes to sockets with write(), not send(MSG_NOSIGNAL): a broker that closes mid-write would
  // otherwise kill the harness with SIGPIPE instead of failing the case.
  ::signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return "SSL_CTX_new: " + openssl_errors();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (tls.insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int loaded = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                           : SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr);
    if (loaded != 1) {
      const std::string why = openssl_errors();
      SSL_CTX_free(ctx);
      return (tls.ca_file.empty() ? std::string("cannot load the system's CA store: ")
                                  : "cannot load the CA file " + tls.ca_file + ": ") +
             why;
    }
  }
  contexts[key] = ctx;
  return ctx;
}

// SSL_set_tlsext_host_name, without the macro's C cast.
bool set_sni(SSL* ssl, const std::string& host) {
  return SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(host.c_str())) == 1;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// Which name the certificate must carry: the IP address connected to, or the host name (also sent as SNI).
bool expect_peer_name(SSL* ssl, const std::string& host) {
  if (is_ip_literal(host)) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  return set_sni(ssl, host) && SSL_set1_host(ssl, host.c_str()) == 1;
}

}  // namespace

Result<std::unique_ptr<TlsStream>, std::string> TlsStream::handshake(std::unique_ptr<TcpStream> tcp,
                                                                     const std::string& host, const TlsOptions& tls,
                                                                     Clock::time_point deadline) {
  auto ctx = context_for(tls);
  if (!ctx) return ctx.error();
  SSL* ssl = SSL_new(*ctx);
  if (ssl == nullptr) return "SSL_new: " + openssl_errors();
  std::unique_ptr<TlsStream> stream(new TlsStream(std::move(tcp), ssl));
  SSL_set_fd(ssl, stream->tcp_->fd());
  if (!tls.insecure && !expect_peer_name(ssl, host)) return "cannot set the expected server name: " + openssl_errors();
  if (tls.insecure && !is_ip_literal(host)) set_sni(ssl, host);
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl);
    if (rc == 1) return stream;
    const Next next = stream->wait_after(rc, deadline);
    if (next == Next::retry) continue;
    if (next == Next::timeout) return std::string("TLS handshake timed out");
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return "TLS handshake failed: the server's certificate was refused: " +
             std::string(X509_verify_cert_error_string(verify));
    }
    return "TLS handshake failed: " + stream->failure_;
  }
}

TlsStream::~TlsStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

TlsStream::Next TlsStream::wait_after(int rc, Clock::time_point deadline) {
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    const short events = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return wait_for_fd(tcp_->fd(), events, deadline) ? Next::retry : Next::timeout;
  }
  if (err == SSL_ERROR_ZERO_RETURN) {
    failure_ = "end of stream (TLS close_notify)";
  } else if (err == SSL_ERROR_SYSCALL) {
    // No OpenSSL error and errno 0: the peer closed the TCP connection without close_notify.
    failure_ = errno != 0 ? std::string(std::strerror(errno)) : "end of stream (without TLS close_notify)";
    if (ERR_peek_error() != 0) failure_ = openssl_errors();
  } else {
    failure_ = openssl_errors();
  }
  return Next::failed;
}

bool TlsStream::write_all(ByteView bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (tcp_->fd() < 0) return false;
    ERR_clear_error();
    errno = 0;
    const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<std::size_t>(bytes.size(), 1 << 30)));
    if (n > 0) {
      bytes = bytes.subspan(static_cast<std::size_t>(n));
      continue;
    }
    if (wait_after(n, deadline) != Next::retry) return false;
  }
  return true;
}

ReadOutcome TlsStream::read_some(std::span<std::uint8_t> into, Clock::time_point deadline) {
  while (true) {
    if (tcp_->fd() < 0) return {ReadOutcome::Kind::closed, 0, "closed by the harness"};
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, into.data(), static_cast<int>(std::min<std::size_t>(into.size(), 1 << 30)));
    if (n > 0) return {ReadOutcome::Kind::data, static_cast<std::size_t>(n), ""};
    switch (wait_after(n, deadline)) {
      case Next::retry: continue;
      case Next::timeout: return {ReadOutcome::Kind::timeout, 0, ""};
      case Next::failed: return {ReadOutcome::Kind::closed, 0, failure_};
    }
  }
}

void TlsStream::close() { tcp_->close(); }

}  // namespace firemq::conform
