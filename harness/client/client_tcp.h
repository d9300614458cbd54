// The fire:// transport's byte stream: a non-blocking TCP socket driven with poll(), so that every wait has a
// deadline. TLS (client_tls.h) takes its socket over after connect.
#pragma once

#include <memory>
#include <string>

#include "harness/client/byte_stream.h"
#include "protocol/error.h"

namespace firemq::conform {

class TcpStream final : public ByteStream {
 public:
  // Resolves `host` and connects to the first address that answers; the error says what failed (resolve,
  // refused, timed out).
  static Result<std::unique_ptr<TcpStream>, std::string> connect(const std::string& host, std::uint16_t port,
                                                                 Clock::time_point deadline);
  explicit TcpStream(int fd) : fd_(fd) {}
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;
  ~TcpStream() override { close(); }

  bool write_all(ByteView bytes, Clock::time_point deadline) override;
  ReadOutcome read_some(std::span<std::uint8_t> into, Clock::time_point deadline) override;
  void close() override;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace firemq::conform
