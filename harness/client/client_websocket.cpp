#include "harness/client/client_websocket.h"

#include <utility>  // before Boost 1.74's headers under g++ 12 (as reference-broker/net/asio.h)

#include <openssl/rand.h>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace firemq::conform {
namespace {

namespace http = boost::beast::http;

// An upgrade answer is a header only; one larger than this is no WebSocket server's.
constexpr std::size_t kMaxResponseHeader = 16 * 1024;

std::string lower(boost::beast::string_view text) {
  std::string out(text.data(), text.size());
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string host_header(const WireAddress& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

std::string upgrade_request(const WireAddress& address, const std::string& key) {
  std::string target = address.path.empty() ? "/" : address.path;
  if (address.vhost_query) target += "?vhost=" + percent_encode(*address.vhost_query);
  return "GET " + target + " HTTP/1.1\r\n" + "Host: " + host_header(address) +
         "\r\n"
         "Upgrade: websocket\r\n"
         "Connection: Upgrade\r\n"
         "Sec-WebSocket-Key: " +
         key +
         "\r\n"
         "Sec-WebSocket-Version: 13\r\n"
         "\r\n";
}

std::string new_key() {
  std::array<std::uint8_t, 16> nonce{};
  for (std::size_t i = 0; i < nonce.size(); i += 4) {
    const auto part = random_mask();  // RAND_bytes, as the masks
    std::copy(part.begin(), part.end(), nonce.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return base64_encode(ByteView(nonce.data(), nonce.size()));
}

// Checks a complete response header: 101, the upgrade headers, and the key's accept value (RFC 6455 4.1).
std::optional<UpgradeFailure> check_response(const http::response_parser<http::empty_body>& parser,
                                             const std::string& key) {
  const auto& response = parser.get();
  const int status = static_cast<int>(response.result_int());
  if (status != 101) {
    return UpgradeFailure{"the server refused the WebSocket upgrade: HTTP " + std::to_string(status) + " " +
                              std::string(response.reason()),
                          status};
  }
  if (lower(response[http::field::upgrade]) != "websocket") {
    return UpgradeFailure{"101 without 'Upgrade: websocket'", status};
  }
  if (lower(response[http::field::connection]).find("upgrade") == std::string::npos) {
    return UpgradeFailure{"101 without 'Connection: Upgrade'", status};
  }
  const auto accept_field = response["Sec-WebSocket-Accept"];
  const std::string accept(accept_field.data(), accept_field.size());
  if (accept != websocket_accept_for(key)) {
    return UpgradeFailure{
        "101 with Sec-WebSocket-Accept '" + accept + "', expected '" + websocket_accept_for(key) + "'", status};
  }
  return std::nullopt;
}

}  // namespace

WebSocketClient::WebSocketClient(std::unique_ptr<ByteStream> stream, std::size_t max_message)
    : stream_(std::move(stream)), parser_(max_message), assembler_(max_message) {}

Upgraded WebSocketClient::upgrade(const WireAddress& address, Clock::time_point deadline) {
  const std::string key = new_key();
  const std::string request = upgrade_request(address, key);
  if (!stream_->write_all(ByteView(reinterpret_cast<const std::uint8_t*>(request.data()), request.size()), deadline)) {
    return UpgradeFailure{"the connection closed before the upgrade request was sent"};
  }
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // the header is all the harness reads: a refusal's body (a 404 page) is not parsed
  parser.header_limit(kMaxResponseHeader);
  Bytes unparsed;
  std::array<std::uint8_t, 4096> buffer;
  while (!parser.is_header_done()) {
    const ReadOutcome read = stream_->read_some(buffer, deadline);
    if (read.kind == ReadOutcome::Kind::timeout) return UpgradeFailure{"no answer to the upgrade request in time"};
    if (read.kind == ReadOutcome::Kind::closed) {
      return UpgradeFailure{"the connection closed before the upgrade's answer was complete (" + read.how + ")"};
    }
    unparsed.insert(unparsed.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(read.bytes));
    // Beast consumes what it can and leaves the rest for the next put(), with more bytes after it.
    boost::beast::error_code ec;
    const std::size_t used = parser.put(boost::asio::buffer(unparsed.data(), unparsed.size()), ec);
    unparsed.erase(unparsed.begin(), unparsed.begin() + static_cast<std::ptrdiff_t>(used));
    if (ec && ec != http::error::need_more) return UpgradeFailure{"the upgrade's answer is not HTTP: " + ec.message()};
  }
  if (auto refused = check_response(parser, key)) return *refused;
  inbox_ = std::move(unparsed);  // frames the server sent right after its 101
  return std::monostate{};
}

bool WebSocketClient::send_frame(bool fin, std::uint8_t opcode, ByteView payload, Clock::time_point deadline) {
  if (closed_) return false;
  if (opcode == static_cast<std::uint8_t>(WsOpcode::close)) close_sent_ = true;
  return stream_->write_all(encode_ws_frame(fin, opcode, payload, random_mask()), deadline);
}

bool WebSocketClient::send_message(WsOpcode opcode, ByteView payload, std::size_t fragments,
                                   Clock::time_point deadline) {
  fragments = std::max<std::size_t>(fragments, 1);
  const std::size_t base = payload.size() / fragments, extra = payload.size() % fragments;
  std::size_t at = 0;
  for (std::size_t i = 0; i < fragments; ++i) {
    const std::size_t n = base + (i < extra ? 1 : 0);
    const auto code = static_cast<std::uint8_t>(i == 0 ? opcode : WsOpcode::continuation);
    if (!send_frame(i + 1 == fragments, code, payload.subspan(at, n), deadline)) return false;
    at += n;
  }
  return true;
}

bool WebSocketClient::send_binary_messages(const std::vector<Bytes>& messages, Clock::time_point deadline) {
  if (closed_) return false;
  Bytes joined;
  for (const Bytes& m : messages) {
    const Bytes frame = encode_ws_frame(true, static_cast<std::uint8_t>(WsOpcode::binary), m, random_mask());
    joined.insert(joined.end(), frame.begin(), frame.end());
  }
  return stream_->write_all(joined, deadline);
}

bool WebSocketClient::send_raw(ByteView bytes, Clock::time_point deadline) {
  return !closed_ && stream_->write_all(bytes, deadline);
}

WebSocketClient::Event WebSocketClient::closed(std::string how, std::optional<std::uint16_t> code, std::string reason) {
  closed_ = true;
  stream_->close();
  closed_event_ = Closed{std::move(how), code, std::move(reason)};
  return *closed_event_;
}

// Answers what a peer must answer (5.5): a ping with a pong, a close with a close. A pong is reported.
WebSocketClient::Event WebSocketClient::on_control(const WsFrame& frame, Clock::time_point deadline) {
  switch (static_cast<WsOpcode>(frame.opcode)) {
    case WsOpcode::pong: return Pong{frame.payload};
    case WsOpcode::close: {
      const WsClose close = parse_close_payload(frame.payload);
      if (!close_sent_) {
        send_frame(true, frame.opcode, close.code ? close_payload(*close.code, "") : Bytes{},
                   std::min(deadline, Clock::now() + std::chrono::seconds(1)));
      }
      const std::string how = close.code ? "WebSocket close " + std::to_string(*close.code) +
                                               (close.reason.empty() ? "" : " (" + close.reason + ")")
                                         : "WebSocket close without a status code";
      return closed(how, close.code, close.reason);
    }
    default: return ProtocolError{"a control frame with the reserved opcode " + std::to_string(frame.opcode)};
  }
}

WebSocketClient::Event WebSocketClient::receive(Clock::time_point deadline) {
  std::array<std::uint8_t, 64 * 1024> buffer;
  while (true) {
    if (closed_event_) return *closed_event_;
    while (inbox_used_ < inbox_.size()) {
      const auto step = parser_.feed(ByteView(inbox_).subspan(inbox_used_));
      inbox_used_ += step.consumed;
      if (inbox_used_ == inbox_.size()) {
        inbox_.clear();
        inbox_used_ = 0;
      }
      if (step.state == WsFrameParser::State::error) return ProtocolError{parser_.error()};
      if (step.state != WsFrameParser::State::frame) continue;
      WsFrame frame = parser_.take_frame();
      if (frame.masked) return ProtocolError{"the server masked a frame (RFC 6455 5.1: a server must not)"};
      auto outcome = assembler_.add(std::move(frame));
      if (auto* message = std::get_if<WsMessageAssembler::Message>(&outcome)) return std::move(*message);
      if (auto* bad = std::get_if<WsMessageAssembler::Error>(&outcome)) return ProtocolError{bad->why};
      auto* control = std::get_if<WsMessageAssembler::Control>(&outcome);
      if (control == nullptr) continue;  // a fragment: the message goes on
      if (control->frame.opcode == static_cast<std::uint8_t>(WsOpcode::ping)) {
        send_frame(true, static_cast<std::uint8_t>(WsOpcode::pong), control->frame.payload, deadline);
        continue;
      }
      return on_control(control->frame, deadline);
    }
    if (closed_) return Closed{"closed by the harness", std::nullopt, ""};
    const ReadOutcome read = stream_->read_some(buffer, deadline);
    if (read.kind == ReadOutcome::Kind::timeout) return Timeout{};
    if (read.kind == ReadOutcome::Kind::closed) {
      if (parser_.inside_frame()) return ProtocolError{"the stream ended inside a WebSocket frame (" + read.how + ")"};
      return closed(read.how + ", without a WebSocket close");
    }
    inbox_.insert(inbox_.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(read.bytes));
  }
}

void WebSocketClient::close() {
  closed_ = true;
  stream_->close();
}

}  // namespace firemq::conform
