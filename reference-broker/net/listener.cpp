#include "reference-broker/net/listener.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "reference-broker/core/config.h"
#include "reference-broker/core/log.h"

namespace firemq {

using boost::system::error_code;

namespace {
constexpr std::chrono::milliseconds kPauseAfterAcceptError{50};

// The soft descriptor limit, as main() left it (raised to the hard one).
rlim_t descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return RLIM_INFINITY;
  return limit.rlim_cur;
}

bool out_of_descriptors(const error_code& ec) {
  return ec == boost::system::errc::too_many_files_open || ec == boost::system::errc::too_many_files_open_in_system;
}
}  // namespace

Result<std::unique_ptr<Listener>, std::string> Listener::bind(asio::io_context& io, const std::string& address,
                                                              std::uint16_t port, std::string scheme,
                                                              OnAccept on_accept) {
  error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) return "bad bind address '" + address + "': " + ec.message();
  std::unique_ptr<Listener> listener(new Listener(io, std::move(scheme), std::move(on_accept)));
  const asio::ip::tcp::endpoint endpoint(ip, port);
  asio::ip::tcp::acceptor& acceptor = listener->acceptor_;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return "cannot listen for " + listener->scheme_ + ":// on " + address + ":" + std::to_string(port) + ": " +
           ec.message();
  }
  listener->port_ = acceptor.local_endpoint().port();
  return listener;
}

void Listener::start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached); }

void Listener::close() {
  closed_ = true;
  error_code ec;
  acceptor_.close(ec);
}

// Descriptors are numbered lowest-free first: when the new socket's number is N, descriptors 0 to N-1 are all
// open, so a number within kReservedDescriptors of the limit means the reserve (the broker's own files, the next
// client) is being eaten into. Then the longest-waiting handshake is dropped, and the new socket moves down into
// the descriptor that freed, so that the open ones stay packed below the reserve and the next accept's number
// still counts them. With no connection in its handshake to drop, the new socket is refused (closed, logged).
bool Listener::keep_reserve(asio::ip::tcp::socket& socket, rlim_t limit) {
  const int fd = socket.native_handle();
  if (static_cast<rlim_t>(fd) + kReservedDescriptors < limit) return true;
  error_code ec;
  if (!make_room_ || !make_room_()) {
    log_line(scheme_ + " connection refused: descriptor " + std::to_string(fd) + " of at most " +
             std::to_string(limit) + " (RLIMIT_NOFILE), and no connection in its handshake to drop");
    socket.close(ec);
    return false;
  }
  const int lower = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the lowest free descriptor: the dropped one's
  if (lower < 0) return true;
  if (lower > fd) {
    ::close(lower);
    return true;
  }
  const auto protocol = socket.local_endpoint(ec).protocol();
  if (ec) {
    ::close(lower);
    return true;
  }
  const int released = socket.release(ec);
  if (ec) {
    ::close(lower);
    return true;
  }
  ::close(released);
  socket.assign(protocol, lower, ec);
  if (ec) ::close(lower);
  return !ec;
}

awaitable<void> Listener::accept_loop() {
  const rlim_t limit = descriptor_limit();
  while (!closed_) {
    error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (closed_) co_return;
      // Out of descriptors: a stalled handshake gives its up and the next client is taken at once (it waits in
      // the listen backlog meanwhile). Otherwise this client is lost, and the listener goes on after a pause, so
      // that a failing accept does not spin and starve the connections being served.
      if (out_of_descriptors(ec) && make_room_ && make_room_()) continue;
      asio::steady_timer pause(acceptor_.get_executor(), kPauseAfterAcceptError);
      co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    if (limit != RLIM_INFINITY && !keep_reserve(socket, limit)) continue;
    on_accept_(std::move(socket));
  }
}

}  // namespace firemq
