// The one place that includes Boost.Asio. With g++ 12, Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, so <utility> must come first; every file includes this header instead of Asio.
#pragma once

#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace firemq {
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
}  // namespace firemq
