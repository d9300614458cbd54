// The fires:// transport's byte stream (and wss://'s): TLS over the non-blocking TCP socket of client_tcp.h,
// with OpenSSL directly. SSL_connect, SSL_read and SSL_write are driven with poll() and the caller's
// deadline, so a TLS peer that stalls (mid-handshake included) cannot hang a case.
//
// TLS 1.2 at least. The server's certificate is checked against TlsOptions::ca_file (or the system's default
// store) and against the host name or IP address connected to; TlsOptions::insecure skips both. SNI is sent
// for host names (RFC 6066 forbids it for IP literals).
#pragma once

#include <memory>
#include <string>

#include "harness/client/client_tcp.h"
#include "harness/model/transport.h"

typedef struct ssl_st SSL;

namespace firemq::conform {

// OpenSSL's queued errors as one line (and the queue emptied): "no OpenSSL error queued" when there are none.
std::string openssl_errors();

class TlsStream final : public ByteStream {
 public:
  // Runs the TLS handshake over `tcp` (connected); the error says why it failed (the verification result
  // when the certificate was refused).
  static Result<std::unique_ptr<TlsStream>, std::string> handshake(std::unique_ptr<TcpStream> tcp,
                                                                   const std::string& host, const TlsOptions& tls,
                                                                   Clock::time_point deadline);
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  ~TlsStream() override;

  bool write_all(ByteView bytes, Clock::time_point deadline) override;
  ReadOutcome read_some(std::span<std::uint8_t> into, Clock::time_point deadline) override;
  void close() override;

 private:
  TlsStream(std::unique_ptr<TcpStream> tcp, SSL* ssl) : tcp_(std::move(tcp)), ssl_(ssl) {}
  // After an SSL call returned `rc`: waits for what OpenSSL wants (read or write) and says whether to retry.
  enum class Next { retry, timeout, failed };
  Next wait_after(int rc, Clock::time_point deadline);

  std::unique_ptr<TcpStream> tcp_;
  SSL* ssl_ = nullptr;
  std::string failure_;  // why the last call failed, for ReadOutcome::how
};

}  // namespace firemq::conform
