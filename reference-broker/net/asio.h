// The one place that includes Boost.Asio. With g++ 12, Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, so <utility> must come first; every file includes this header instead of Asio.
#pragma once

#include <utility>

#include <exception>
#include <string>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "reference-broker/core/log.h"

namespace firemq {
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

// What a connection's coroutine completes with, in place of asio::detached, which drops an exception silently: an
// exception that reaches the top of a reader, writer or timer is a broker bug, and with detached its connection
// lived on with nobody reading it (a durable declare of a name that was not UTF-8 left its client waiting, issue
// 27). It is logged, and `stop` ends that connection; the others go on.
template <class Stop>
auto stop_on_exception(const char* what, Stop stop) {
  return [what, stop = std::move(stop)](const std::exception_ptr& failure) mutable {
    if (!failure) return;
    std::string reason = "an exception that is not a std::exception";
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      reason = e.what();
    } catch (...) {
    }
    log_line(std::string("internal error in a connection's ") + what +
             ", the connection is closed: " + printable(reason, 512));
    stop();
  };
}
}  // namespace firemq
