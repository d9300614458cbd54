#include "harness/wire.h"

#include "protocol/messages.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace firemq::conform {
namespace {

int millis_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 60'000));
}

bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, millis_until(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

Result<int, std::string> connect_one(const addrinfo* ai, Clock::time_point deadline) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return why;
  }
  if (!wait_for(fd, POLLOUT, deadline)) {
    ::close(fd);
    return std::string("timed out");
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    ::close(fd);
    return std::string(std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

WireConnection::~WireConnection() { disconnect(); }

Result<bool, std::string> WireConnection::connect(const std::string& host, std::uint16_t port,
                                                  Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return "cannot resolve " + host + ": " + ::gai_strerror(rc);
  std::string why = "no address";
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    auto fd = connect_one(ai, deadline);
    if (fd) {
      fd_ = *fd;
      break;
    }
    why = fd.error();
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) return "cannot connect to " + host + ":" + std::to_string(port) + ": " + why;
  return true;
}

bool WireConnection::send(ByteView bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (!is_open()) return false;
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) return false;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;  // reset or closed by the peer; receive() reports how
    }
  }
  return true;
}

WireEvent WireConnection::receive(Clock::time_point deadline) {
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    // Frames already received come first; the decoder stops at each frame boundary.
    while (inbox_used_ < inbox_.size()) {
      const auto step = decoder_.feed(ByteView(inbox_).subspan(inbox_used_));
      inbox_used_ += step.consumed;
      if (inbox_used_ == inbox_.size()) {
        inbox_.clear();
        inbox_used_ = 0;
      }
      if (step.state == FrameDecoder::State::frame) return FrameEvent{decoder_.take_frame()};
      if (step.state == FrameDecoder::State::error) return BadFramingEvent{decoder_.error()};
    }
    if (fd_ < 0 || closed_) {
      if (Status partial = decoder_.finish()) return BadFramingEvent{*partial};
      return ClosedEvent{closed_how_.empty() ? "not connected" : closed_how_};
    }
    if (!wait_for(fd_, POLLIN, deadline)) return TimeoutEvent{};
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      inbox_.insert(inbox_.end(), buffer.data(), buffer.data() + n);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      closed_ = true;
      closed_how_ = n == 0 ? "end of stream" : std::string(std::strerror(errno));
    }
  }
}

void WireConnection::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closed_ = true;
  if (closed_how_.empty()) closed_how_ = "closed by the harness";
}

Result<std::unique_ptr<WireConnection>, std::string> open_session(const Endpoint& endpoint, const std::string& client_name,
                                                                  Clock::time_point deadline) {
  auto wire = std::make_unique<WireConnection>();
  if (auto connected = wire->connect(endpoint.host, endpoint.port, deadline); !connected) return connected.error();
  op::Hello hello;
  hello.ver = 1;
  hello.vhost = endpoint.vhost;
  hello.auth = {"plain", endpoint.user, endpoint.password};
  hello.client = Map{{Value("name"), Value(client_name)}};
  Bytes bytes(kPreamble.begin(), kPreamble.end());
  const Bytes frame = encode_frame(hello);
  bytes.insert(bytes.end(), frame.begin(), frame.end());
  if (!wire->send(bytes, deadline)) return std::string("the connection closed before hello was sent");
  WireEvent event = wire->receive(deadline);
  auto* f = std::get_if<FrameEvent>(&event);
  if (f == nullptr || f->frame.op() != static_cast<std::uint8_t>(OpCode::welcome)) return std::string("no welcome");
  return wire;
}

}  // namespace firemq::conform
