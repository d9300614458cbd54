// One listening socket and its accept loop. The broker has one per transport (fire, fires, ws, wss), each
// handing what it accepts to the code that serves that transport.
//
// Runs on the broker thread only.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "protocol/error.h"
#include "reference-broker/net/asio.h"

namespace firemq {

class Listener {
 public:
  using OnAccept = std::function<void(asio::ip::tcp::socket)>;

  // Binds `address`:`port` (0: a free port). The error says which address could not be bound, and why.
  static Result<std::unique_ptr<Listener>, std::string> bind(asio::io_context& io, const std::string& address,
                                                             std::uint16_t port, std::string scheme,
                                                             OnAccept on_accept);

  // What to do when descriptors run short (accept fails with EMFILE/ENFILE, or the accepted socket's descriptor is
  // within kReservedDescriptors of the soft RLIMIT_NOFILE): free one, the broker's longest-waiting handshake.
  // False: there was none to drop.
  void on_descriptors_short(std::function<bool()> make_room) { make_room_ = std::move(make_room); }

  void start();
  void close();
  std::uint16_t port() const { return port_; }
  const std::string& scheme() const { return scheme_; }

 private:
  Listener(asio::io_context& io, std::string scheme, OnAccept on_accept)
      : acceptor_(io), scheme_(std::move(scheme)), on_accept_(std::move(on_accept)) {}
  awaitable<void> accept_loop();
  // Near the descriptor limit: false when `socket` was refused (listener.cpp says how the reserve is kept).
  bool keep_reserve(asio::ip::tcp::socket& socket, rlim_t limit);

  asio::ip::tcp::acceptor acceptor_;
  std::string scheme_;
  OnAccept on_accept_;
  std::function<bool()> make_room_;
  std::uint16_t port_ = 0;
  bool closed_ = false;
};

}  // namespace firemq
