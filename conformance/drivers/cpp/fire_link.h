// How FireClient's frames travel (the spec's "Transports"): TCP, TLS over it, and WebSocket over either.
//
//   fire://   TCP: FMQ1, then length-prefixed frames.
//   fires://  the same inside TLS (OpenSSL; the server's certificate checked against the CA file or the
//             system's store, and against the host name or IP address).
//   ws://     an HTTP/1.1 upgrade on the URL's path (/fire), then one binary WebSocket message per frame,
//             without the length prefix and without FMQ1 (RFC 6455, written small here: masked frames out,
//             fragments put back together in, pings answered, a close answered).
//   wss://    ws inside TLS.
//
// FireClient sees one shape whatever the transport: it sends frames in their TCP form (len first) and reads
// bytes in the TCP framing; over WebSocket the link takes the len off each frame it sends and puts it back on
// each message it receives. Blocking, single-threaded: every read waits in poll() until a deadline (the TLS
// handshake and writes block without one: the harness ends a driver that hangs).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/url.h"

typedef struct ssl_st SSL;

namespace firemq::example {

class Link {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to the URL's host and port; runs TLS for fires and wss (trusting the CAs of `ca_file`, a PEM
  // file, or the system's when it is empty) and the upgrade for ws and wss; then, with `send_fmq1`, FMQ1 (the
  // caller's choice: "Client first sends the 4 ASCII bytes `FMQ1`" on TCP and TLS, never on WebSocket, unless
  // a deliberate break says otherwise). The error says which step failed.
  static Result<std::unique_ptr<Link>, std::string> open(const Url& url, const std::string& ca_file, bool send_fmq1,
                                                         Clock::time_point deadline);
  ~Link();  // a WebSocket close and TLS's close_notify first, then the socket is closed
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int fd() const { return fd_; }
  // Sends one frame given in its TCP form (len first).
  bool send_frame(ByteView frame);
  // A deliberate break (breaks.h): one frame in two WebSocket messages, its first byte in the first.
  bool send_split_frame(ByteView frame);
  bool websocket() const { return websocket_; }

  enum class Read { data, nothing, ended };
  // Waits until `deadline` for the server, then appends what it sent to `stream`, in the TCP framing.
  Read read(Bytes& stream, Clock::time_point deadline);

 private:
  explicit Link(int fd) : fd_(fd) {}
  Result<bool, std::string> start_tls(const std::string& host, const std::string& ca_file);
  Result<bool, std::string> upgrade(const Url& url, Clock::time_point deadline);
  // The socket's bytes, through TLS when there is TLS.
  bool write_bytes(ByteView bytes);
  long read_bytes(std::uint8_t* into, std::size_t size, Clock::time_point deadline);
  bool send_ws_frame(std::uint8_t opcode, ByteView payload);
  // Takes every complete WebSocket frame out of inbox_; false once the server closed or broke the framing.
  bool take_ws_frames(Bytes& stream);

  int fd_;
  SSL* ssl_ = nullptr;
  bool websocket_ = false;
  Bytes inbox_;    // WebSocket: bytes received, not yet a whole frame
  Bytes message_;  // WebSocket: the fragments of the message being received
  bool close_sent_ = false;
  bool ended_ = false;  // WebSocket: the server's close came (or a text message)
};

}  // namespace firemq::example
