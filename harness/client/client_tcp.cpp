#include "harness/client/client_tcp.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace firemq::conform {
namespace {

Result<int, std::string> connect_one(const addrinfo* ai, Clock::time_point deadline) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return why;
  }
  if (!wait_for_fd(fd, POLLOUT, deadline)) {
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

int millis_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 60'000));
}

bool wait_for_fd(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, millis_until(deadline));
    if (n > 0) return true;
    if (n == 0 && Clock::now() >= deadline) return false;
    if (n < 0 && errno != EINTR) return false;
  }
}

Result<std::unique_ptr<TcpStream>, std::string> TcpStream::connect(const std::string& host, std::uint16_t port,
                                                                   Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return "cannot resolve " + host + ": " + ::gai_strerror(rc);
  std::string why = "no address";
  int fd = -1;
  for (const addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    auto one = connect_one(ai, deadline);
    if (one) {
      fd = *one;
    } else {
      why = one.error();
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return "cannot connect to " + host + ":" + std::to_string(port) + ": " + why;
  return std::make_unique<TcpStream>(fd);
}

bool TcpStream::write_all(ByteView bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (fd_ < 0) return false;
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for_fd(fd_, POLLOUT, deadline)) return false;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;  // reset or closed by the peer; the next read says how
    }
  }
  return true;
}

ReadOutcome TcpStream::read_some(std::span<std::uint8_t> into, Clock::time_point deadline) {
  while (true) {
    if (fd_ < 0) return {ReadOutcome::Kind::closed, 0, "closed by the harness"};
    const ssize_t n = ::recv(fd_, into.data(), into.size(), 0);
    if (n > 0) return {ReadOutcome::Kind::data, static_cast<std::size_t>(n), ""};
    if (n == 0) return {ReadOutcome::Kind::closed, 0, "end of stream"};
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return {ReadOutcome::Kind::closed, 0, std::strerror(errno)};
    if (!wait_for_fd(fd_, POLLIN, deadline)) return {ReadOutcome::Kind::timeout, 0, ""};
  }
}

void TcpStream::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace firemq::conform
