// The sockets the harness's two proxies share (fault_proxy.h, client_proxy.h): blocking, IPv4 loopback for the
// listener, TCP_NODELAY so that a frame leaves when it is written, never SIGPIPE.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/bytes.h"
#include "protocol/error.h"

namespace firemq::conform {

struct Listener {
  int fd = -1;
  std::uint16_t port = 0;
};

// Listens on 127.0.0.1, on a free port; the error says why not.
Result<Listener, std::string> listen_on_loopback();
// Connects to host:port (an IPv4 address, or localhost); -1 when it cannot.
int connect_tcp(const std::string& host, std::uint16_t port);
// Sends TCP_NODELAY on an accepted socket.
void set_no_delay(int fd);
// Writes every byte; false once the peer is gone.
bool write_all(int fd, ByteView bytes);

}  // namespace firemq::conform
