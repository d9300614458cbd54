#include "harness/client/http_client.h"

#include <boost/beast/http.hpp>

#include <array>

#include "harness/client/client_tcp.h"

namespace firemq::conform {
namespace {

namespace http = boost::beast::http;

// The largest answer the harness reads: the API's lists for a test broker are far smaller.
constexpr std::uint64_t kMaxResponseBody = 16 * 1024 * 1024;

std::string request_text(const HttpEndpoint& endpoint, std::string_view method, const std::string& target,
                         const std::string& body) {
  std::string text = std::string(method) + " " + target + " HTTP/1.1\r\n";
  text += "Host: " + endpoint.host + ":" + std::to_string(endpoint.port) + "\r\n";
  const std::string credentials = endpoint.user + ":" + endpoint.password;
  text += "Authorization: Basic " +
          to_base64(ByteView(reinterpret_cast<const std::uint8_t*>(credentials.data()), credentials.size())) + "\r\n";
  text += "Connection: close\r\n";
  if (!body.empty()) text += "Content-Type: application/json\r\n";
  text += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return text;
}

}  // namespace

Result<HttpResponse, std::string> http_request(const HttpEndpoint& endpoint, std::string_view method,
                                               const std::string& target, const std::string& body,
                                               Clock::time_point deadline) {
  auto stream = TcpStream::connect(endpoint.host, endpoint.port, deadline);
  if (!stream)
    return "cannot reach the management API at " + endpoint.host + ":" + std::to_string(endpoint.port) + ": " +
           stream.error();
  const std::string request = request_text(endpoint, method, target, body);
  if (!(*stream)->write_all(ByteView(reinterpret_cast<const std::uint8_t*>(request.data()), request.size()),
                            deadline)) {
    return std::string("the management API closed the connection before the request was sent");
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxResponseBody);
  std::array<std::uint8_t, 16 * 1024> buffer;
  std::string unparsed;
  while (!parser.is_done()) {
    const ReadOutcome read = (*stream)->read_some(buffer, deadline);
    if (read.kind == ReadOutcome::Kind::timeout)
      return std::string("no complete answer from the management API in time");
    if (read.kind == ReadOutcome::Kind::closed) {
      boost::beast::error_code ec;
      parser.put_eof(ec);  // an answer without Content-Length ends with the connection
      if (ec || !parser.is_done()) return "the management API closed the connection mid-answer (" + read.how + ")";
      break;
    }
    unparsed.append(reinterpret_cast<const char*>(buffer.data()), read.bytes);
    // Beast's put() stops at the end of the header: the body in the same bytes takes another call.
    while (!unparsed.empty() && !parser.is_done()) {
      boost::beast::error_code ec;
      const std::size_t used = parser.put(boost::asio::buffer(unparsed.data(), unparsed.size()), ec);
      unparsed.erase(0, used);
      if (ec == http::error::need_more) break;
      if (ec) return "the management API's answer is not HTTP: " + ec.message();
    }
  }
  return HttpResponse{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

}  // namespace firemq::conform
