#include "fire_link.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace firemq::example {
namespace {

// WebSocket opcodes (RFC 6455 5.2).
constexpr std::uint8_t kContinuation = 0x0, kText = 0x1, kBinary = 0x2, kClose = 0x8, kPing = 0x9;

int open_tcp(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

int ms_left(Link::Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Link::Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

std::string openssl_error() {
  char text[256] = "no detail";
  if (const unsigned long e = ERR_get_error()) ERR_error_string_n(e, text, sizeof text);
  return text;
}

std::string base64(const std::uint8_t* bytes, std::size_t size) {
  std::string out(4 * ((size + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes, static_cast<int>(size));
  return out;
}

// Sec-WebSocket-Accept: base64(SHA-1(key + the RFC's GUID)) (RFC 6455 4.2.2).
std::string accept_for(const std::string& key) {
  const std::string text = key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  std::uint8_t digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return base64(digest, sizeof digest);
}

// The query's vhost, percent-encoded (RFC 3986: unreserved characters stay).
std::string percent_encoded(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') out += static_cast<char>(c);
    else out += {'%', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

// The value of header `name` in an HTTP response head (names compared without case), or "".
std::string header_value(const std::string& head, const std::string& name) {
  std::string lower = head;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  const auto start = head.find_first_not_of(' ', at + 3 + name.size());
  return head.substr(start, head.find("\r\n", start) - start);
}

}  // namespace

Result<std::unique_ptr<Link>, std::string> Link::open(const Url& url, const std::string& ca_file, bool send_fmq1,
                                                      Clock::time_point deadline) {
  const int fd = open_tcp(url.host, url.port);
  if (fd < 0) return "cannot connect to " + url.host + ":" + std::to_string(url.port);
  std::unique_ptr<Link> link(new Link(fd));
  if (url.tls) {
    if (auto tls = link->start_tls(url.host, ca_file); !tls) return tls.error();
  }
  if (url.websocket) {
    if (auto upgraded = link->upgrade(url, deadline); !upgraded) return upgraded.error();
  }
  static constexpr std::uint8_t kFmq1[] = {'F', 'M', 'Q', '1'};
  if (send_fmq1 && !(url.websocket ? link->send_ws_frame(kBinary, kFmq1) : link->write_bytes(kFmq1))) {
    return std::string("cannot send FMQ1");
  }
  return link;
}

Link::~Link() {
  if (websocket_ && !close_sent_) send_ws_frame(kClose, std::array<std::uint8_t, 2>{0x03, 0xe8});  // 1000
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);  // close_notify; the server's is not awaited
    SSL_free(ssl_);
  }
  ::close(fd_);
}

// TLS 1.2 or later; the server's certificate must chain to a trusted CA and name the host (or IP) dialled.
Result<bool, std::string> Link::start_tls(const std::string& host, const std::string& ca_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return "TLS: " + openssl_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // A record that is no data (a TLS 1.3 session ticket) makes SSL_read return instead of blocking for more.
  SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
  const int trusted = ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                      : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  ssl_ = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the SSL keeps its own reference
  if (trusted != 1 || ssl_ == nullptr) return "TLS: cannot load the CA file '" + ca_file + "': " + openssl_error();
  in6_addr ip{};
  const bool is_ip = ::inet_pton(AF_INET, host.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), &ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str());
  } else {
    SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(host.c_str()));  // SNI
    SSL_set1_host(ssl_, host.c_str());
  }
  SSL_set_fd(ssl_, fd_);
  if (SSL_connect(ssl_) != 1) {
    const long verify = SSL_get_verify_result(ssl_);
    return "TLS handshake failed: " +
           (verify != X509_V_OK ? std::string(X509_verify_cert_error_string(verify)) : openssl_error());
  }
  return true;
}

// The opening handshake (RFC 6455 4.1): GET with the upgrade headers and a random key; a 101 whose
// Sec-WebSocket-Accept answers the key. The vhost goes in the query too, as the URL rule says.
Result<bool, std::string> Link::upgrade(const Url& url, Clock::time_point deadline) {
  std::array<std::uint8_t, 16> nonce{};
  RAND_bytes(nonce.data(), static_cast<int>(nonce.size()));
  const std::string key = base64(nonce.data(), nonce.size());
  const std::string request = "GET " + (url.path.empty() ? "/fire" : url.path) +
                              "?vhost=" + percent_encoded(url.vhost) + " HTTP/1.1\r\nHost: " + url.host + ":" +
                              std::to_string(url.port) +
                              "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
                              "\r\nSec-WebSocket-Version: 13\r\n\r\n";
  if (!write_bytes(ByteView(reinterpret_cast<const std::uint8_t*>(request.data()), request.size()))) {
    return std::string("cannot send the WebSocket upgrade");
  }
  std::string head;
  std::array<std::uint8_t, 4096> buffer;
  while (head.find("\r\n\r\n") == std::string::npos) {
    const long n = read_bytes(buffer.data(), buffer.size(), deadline);
    const bool late = n == 0 && Clock::now() >= deadline;  // 0 alone: a TLS record that was no data yet
    if (n < 0 || late || head.size() > 16 * 1024) return std::string("no answer to the WebSocket upgrade");
    head.append(buffer.begin(), buffer.begin() + n);
  }
  const auto end = head.find("\r\n\r\n") + 4;
  inbox_.assign(head.begin() + static_cast<std::ptrdiff_t>(end), head.end());  // frames right after the 101
  head.resize(end);
  if (head.rfind("HTTP/1.1 101", 0) != 0)
    return "the server refused the WebSocket upgrade: " + head.substr(0, head.find("\r\n"));
  if (header_value(head, "sec-websocket-accept") != accept_for(key))
    return std::string("the upgrade's Sec-WebSocket-Accept is wrong");
  websocket_ = true;
  return true;
}

bool Link::write_bytes(ByteView bytes) {
  while (!bytes.empty()) {
    const long n = ssl_ != nullptr ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                                   : ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return true;
}

// At least one byte, or 0 when nothing came by the deadline, or -1 when the connection ended.
long Link::read_bytes(std::uint8_t* into, std::size_t size, Clock::time_point deadline) {
  pollfd pfd{fd_, POLLIN, 0};
  const bool buffered = ssl_ != nullptr && SSL_pending(ssl_) > 0;  // decrypted already: poll() cannot see it
  if (!buffered && ::poll(&pfd, 1, ms_left(deadline)) <= 0) return 0;
  const long n = ssl_ != nullptr ? SSL_read(ssl_, into, static_cast<int>(size)) : ::recv(fd_, into, size, 0);
  if (n <= 0 && ssl_ != nullptr && SSL_get_error(ssl_, static_cast<int>(n)) == SSL_ERROR_WANT_READ) return 0;
  return n > 0 ? n : -1;
}

bool Link::send_frame(ByteView frame) {
  if (!websocket_) return write_bytes(frame);
  return send_ws_frame(kBinary, frame.subspan(4));  // "without the length prefix"
}

bool Link::send_split_frame(ByteView frame) {
  const ByteView body = frame.subspan(4);
  return send_ws_frame(kBinary, body.first(1)) && send_ws_frame(kBinary, body.subspan(1));
}

// One unfragmented frame, masked as every client frame must be (RFC 6455 5.3).
bool Link::send_ws_frame(std::uint8_t opcode, ByteView payload) {
  Bytes out = {static_cast<std::uint8_t>(0x80 | opcode)};
  if (payload.size() < 126) {
    out.push_back(static_cast<std::uint8_t>(0x80 | payload.size()));
  } else if (payload.size() <= 0xffff) {
    out.insert(out.end(),
               {0x80 | 126, static_cast<std::uint8_t>(payload.size() >> 8), static_cast<std::uint8_t>(payload.size())});
  } else {
    out.push_back(0x80 | 127);
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(payload.size() >> shift));
  }
  std::array<std::uint8_t, 4> mask{};
  RAND_bytes(mask.data(), 4);
  out.insert(out.end(), mask.begin(), mask.end());
  for (std::size_t i = 0; i < payload.size(); ++i) out.push_back(payload[i] ^ mask[i % 4]);
  if (opcode == kClose) close_sent_ = true;
  return write_bytes(out);
}

Link::Read Link::read(Bytes& stream, Clock::time_point deadline) {
  if (ended_) return Read::ended;
  std::array<std::uint8_t, 64 * 1024> buffer;
  const long n = read_bytes(buffer.data(), buffer.size(), deadline);
  if (n == 0) return Read::nothing;
  if (n < 0) return Read::ended;
  if (!websocket_) {
    stream.insert(stream.end(), buffer.begin(), buffer.begin() + n);
    return Read::data;
  }
  inbox_.insert(inbox_.end(), buffer.begin(), buffer.begin() + n);
  ended_ = !take_ws_frames(stream);  // the frames before a close are still read; the next read says ended
  return Read::data;
}

bool Link::take_ws_frames(Bytes& stream) {
  while (inbox_.size() >= 2) {
    const bool fin = (inbox_[0] & 0x80) != 0;
    const std::uint8_t opcode = inbox_[0] & 0x0f;
    const bool masked = (inbox_[1] & 0x80) != 0;
    std::size_t size = inbox_[1] & 0x7f, at = 2;
    const std::size_t extra = size == 126 ? 2 : size == 127 ? 8 : 0;
    if (inbox_.size() < at + extra) return true;
    if (extra > 0) size = 0;
    for (std::size_t i = 0; i < extra; ++i) size = (size << 8) | inbox_[at++];
    const std::size_t key_at = at;
    at += masked ? 4 : 0;
    if (inbox_.size() < at + size) return true;  // the frame is not all here yet
    Bytes payload(inbox_.begin() + static_cast<std::ptrdiff_t>(at),
                  inbox_.begin() + static_cast<std::ptrdiff_t>(at + size));
    for (std::size_t i = 0; masked && i < size; ++i) payload[i] ^= inbox_[key_at + i % 4];
    inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(at + size));
    if (opcode == kPing) send_ws_frame(0xa, payload);  // a pong with the ping's payload (5.5.2)
    if (opcode == kClose) {
      if (!close_sent_) send_ws_frame(kClose, payload);  // the closing handshake (5.5.1); then the end
      return false;
    }
    if (opcode == kText) return false;  // FireMQ frames are binary messages: a server that sends text is broken
    if (opcode != kBinary && opcode != kContinuation) continue;  // a pong
    message_.insert(message_.end(), payload.begin(), payload.end());
    if (!fin) continue;  // a fragment: the message goes on (5.4)
    // One message is one frame: its len, then the message, for the TCP framing's decoder.
    for (int shift = 24; shift >= 0; shift -= 8) stream.push_back(static_cast<std::uint8_t>(message_.size() >> shift));
    stream.insert(stream.end(), message_.begin(), message_.end());
    message_.clear();
  }
  return true;
}

}  // namespace firemq::example
