// The client proxy's end of a client's connection (client_proxy.h): the server side of each transport.
//
// - ProxyTls: the proxy's TLS settings as a server (fires, wss): the harness's throwaway certificate
//   (test_certificates.h), TLS 1.2 and 1.3, as the reference broker's listeners (reference-broker/net/tls_context.h).
// - ServerStream: the accepted socket, plain or TLS (OpenSSL's server side). One thread reads while others
//   write (the proxy's writes are serialised by its own mutex): the socket is non-blocking and every SSL call
//   holds the stream's lock, never while waiting in poll(), so a reader waiting for the client cannot hold up
//   a writer.
// - websocket_upgrade_answer: the HTTP/1.1 upgrade of ws and wss on /fire (RFC 6455 4.2), without I/O.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "harness/client/byte_stream.h"
#include "harness/process/test_certificates.h"
#include "protocol/error.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace firemq::conform {

class ProxyTls {
 public:
  // Loads the server certificate and key; the error says what OpenSSL refused.
  static Result<std::shared_ptr<ProxyTls>, std::string> load(const TestCertificates& certificates);
  ~ProxyTls();
  ProxyTls(const ProxyTls&) = delete;
  ProxyTls& operator=(const ProxyTls&) = delete;
  SSL_CTX* context() const { return ctx_; }

 private:
  explicit ProxyTls(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

class ServerStream {
 public:
  // Takes the accepted socket `fd` (and closes it when destroyed).
  explicit ServerStream(int fd);
  ~ServerStream();
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  // The TLS handshake as the server, within `deadline`; the error says why it failed.
  IoStatus accept_tls(const ProxyTls& tls, Clock::time_point deadline);
  // Reads what is there, waiting at most `quiet_ms` for something (ReadOutcome::Kind::timeout then).
  ReadOutcome read_some(std::span<std::uint8_t> into, int quiet_ms);
  // Writes every byte (one TLS record per call on TLS); false once the client is gone or the stream shut.
  bool write_all(ByteView bytes);
  // Ends the sending side: TLS close_notify, then the TCP FIN. The client may still send.
  void shutdown_write();
  // Ends both ways at once: wakes a reader and a writer waiting in poll().
  void shutdown_both();

 private:
  // After an SSL call failed with `error` (SSL_get_error): what to wait for, or -1 when the stream is broken.
  short wanted(int error) const;

  int fd_;
  SSL* ssl_ = nullptr;
  std::mutex ssl_lock_;  // every SSL_* call on ssl_
  bool write_shut_ = false;
};

// The answer to a WebSocket upgrade request `head` (its request line and headers, up to the blank line): a
// 101 when it is a valid upgrade to the path /fire (any query), and `upgraded` true; otherwise the refusal
// the reference broker gives (404 for another path, 426 for a request that is no upgrade, 400 for a bad key;
// docs/spec-notes.md, Q50), `upgraded` false.
struct UpgradeAnswer {
  std::string response;
  bool upgraded = false;
  std::string why;  // a refusal's reason, for the transcript
};
UpgradeAnswer websocket_upgrade_answer(std::string_view head);

}  // namespace firemq::conform
