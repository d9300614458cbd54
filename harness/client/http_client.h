// The harness's HTTP/1.1 client for the management API (the `http` step): one request per connection, over the
// harness's own TCP stream (client_tcp.h) so that it has a deadline like every other wait, with Beast's parser
// for the answer. Plain HTTP only: the management cases run against http://.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harness/client/byte_stream.h"
#include "protocol/error.h"

namespace firemq::conform {

// Where a target's management API listens, and as whom the harness asks it (HTTP basic auth).
struct HttpEndpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string user;
  std::string password;
};

struct HttpResponse {
  int status = 0;
  std::string body;
};

// Sends `method` `target` (a path with its query) with `body` as JSON; the answer, or what went wrong (could not
// connect, closed early, not HTTP, the deadline passed).
Result<HttpResponse, std::string> http_request(const HttpEndpoint& endpoint, std::string_view method,
                                               const std::string& target, const std::string& body,
                                               Clock::time_point deadline);

}  // namespace firemq::conform
