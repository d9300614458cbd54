#include "reference-broker/listener.h"

namespace firemq {

using boost::system::error_code;

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

awaitable<void> Listener::accept_loop() {
  while (!closed_) {
    error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (closed_) co_return;
      continue;  // e.g. too many open files: this client is lost, the listener goes on
    }
    on_accept_(std::move(socket));
  }
}

}  // namespace firemq
