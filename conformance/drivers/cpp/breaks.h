// The rules the example driver breaks on purpose (--break NAME), one at a time: proof that the client cases
// catch each one (conformance/client-breaks.json lists the cases each must fail, and the rule they must name).
// An SDK author copying the driver leaves this file out: with no break set, nothing here changes anything.
//
// Three kinds: the client's behaviour on a connection (fire_client.cpp reads `Breaks`), its codec (the driver's
// decode_frame and encode_frame: CodecBreaks rewrites what the real codec reads and writes, so that it behaves
// as a codec with that bug would), and its URL parser (UrlBreaks rewrites the real parser's result).
#pragma once

#include <string>
#include <vector>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/url.h"

namespace firemq::example {

struct Breaks {
  // On a connection (fire_client.cpp, driver.cpp)
  bool seq_from_2 = false;               // numbers publishes 2, 3, 4, ... ("starting at 1")
  bool no_pong = false;                  // ignores the server's pings ("A peer that receives ping replies pong.")
  bool no_close_reply = false;           // closes the socket on the server's close without its own close
  bool no_rid = false;                   // sends requests without a rid ("Requests carry a request id (rid)")
  bool publish_while_paused = false;     // ignores flow ("Clients stop publishing until pause: false.")
  bool no_ping = false;                  // never pings ("each side sends ping when it has sent nothing for h / 2")
  bool never_declares_dead = false;      // waits on a silent server forever ("considers the peer dead ... 2 x h")
  bool fmq1_on_websocket = false;        // sends FMQ1 over ws and wss too ("without `FMQ1`")
  bool no_fmq1 = false;                  // sends no FMQ1 on fire and fires ("Client first sends the 4 ASCII bytes")
  bool close_not_200 = false;            // a normal shutdown's close says 320 ("Code 200 means a normal shutdown.")
  bool close_without_frame = false;      // a normal shutdown just ends the socket (the lifecycle's close exchange)
  bool keep_socket_after_close = false;  // keeps the socket after the close exchange ("... and closes the socket")
  bool ignore_fatal = false;  // goes on after a fatal error ("the server closes the connection after this frame")
  bool same_sub = false;      // every subscription is sub 1 ("unique on the connection")
  bool ack_ignores_multiple = false;  // an ack or nack with multiple settles only its own tag
  bool ack_not_sent = false;          // the ack command answers ok and sends nothing (an SDK that loses acks)
  bool ping_every_h = false;          // pings after h of silence, not h / 2 ("when it has sent nothing for h / 2")
  bool upto_confirms_one = false;     // upto n settles seq n alone ("confirms every outstanding publish with seq <= n")
  bool nack_rejects_all = false;      // a nack settles every outstanding seq up to it ("rejects one publish")
  bool hello_ver_2 = false;           // says ver 2 in hello ("Must be `1`.")
  bool ping_before_hello = false;     // sends a ping before its hello (hello comes first)
  bool caps_as_string = false;        // hello's caps as one string ("`caps` [str]")
  bool huge_hello = false;            // client info of 70 KiB ("Before welcome, a frame may be at most 65 536 bytes.")
  bool seq_on_unconfirmed = false;    // numbers publishes that want no confirm too ("`0` means no confirm is wanted")
  bool props_dropped = false;         // sends publishes without the application's props
  bool headers_as_strings = false;    // sends every header value as its JSON text ("Values are any MessagePack type")
  bool nack_without_requeue = false;  // leaves requeue out of nack, so that it is false
  bool get_no_ack_inverted = false;   // sends get with the opposite no_ack
  bool close_code_as_string = false;  // close's code as a string ({"code": uint, ...})
  bool ignores_max_frame = false;     // sends a publish bigger than welcome.max_frame ("must fit in one frame")
  bool pong_header_array = false;  // a pong whose header is an empty MessagePack array ("header is a MessagePack map")
  bool pong_header_int_key = false;      // a pong whose header has an integer key ("with string keys")
  bool split_pong_on_websocket = false;  // a pong in two WebSocket messages ("One binary WebSocket message per frame")
  bool body_cut = false;  // reports deliveries without their body's last byte ("The payload is the message body.")
  bool get_empty_as_error = false;  // reports an empty queue's get as an error ("ok with empty: true")
  bool no_return_event = false;     // never reports a return ("Sent for a mandatory publish that no queue received")
  bool unknown_op_is_an_error =
      false;  // reports an op of a later version as an error ("without breaking version 1 clients")
  bool cancelled_ignored = false;          // never reports the server's cancelled ("The server ended a subscription")
  bool cancelled_ends_connection = false;  // takes the server's cancelled for the end of the connection
  bool hello_ignores_url_credentials =
      false;                             // logs in as guest whatever the URL's userinfo ("fire://user:password@host")
  bool hello_ignores_url_vhost = false;  // asks for vhost / whatever the URL says ("the vhost is the URL path ...")

  // In the codec (CodecBreaks)
  bool float32_as_float64 = false;  // widens every float32 to a float64 (a language without float32)
  bool little_endian = false;       // reads and writes len and hlen little-endian ("big-endian")
  bool len_without_op = false;      // len counts hlen, header and payload but not op ("1 + 4 + hlen + payload length")
  bool hlen_before_op = false;      // lays a frame out as len, hlen, op ("| len | op | hlen | header | payload |")
  bool hlen_zero_refused = false;   // refuses hlen 0 ("hlen may be 0, meaning an empty map")
  bool payload_cut = false;         // keeps the payload without its last byte ("payload is the rest of the frame")
  bool payload_on_any_op = false;   // accepts a payload on any op ("Only publish, return, deliver and get_ok ...")
  bool omitted_fields_refused = false;  // refuses a header that leaves a field out ("take their zero value")
  bool unknown_keys_refused = false;    // refuses a header key it does not know ("ignore header keys they do not know")
  bool header_only = false;             // refuses a payload wherever it is ("an optional raw payload")
  bool websocket_with_len = false;      // reads and writes a WebSocket message with len ("the same without len")
  bool limits_ignored = false;          // accepts a frame of any size ("at most 65 536 bytes", "welcome.max_frame")

  // In the URL parser (UrlBreaks)
  bool url_accepts_amqp = false;  // takes amqp:// as fire:// ("the schemes fire://, fires:// (TLS), ws:// and wss://")
  bool url_ignores_userinfo = false;        // guest/guest whatever the URL says (fire://user:password@host)
  bool url_vhost_keeps_slash = false;       // the vhost keeps the path's leading / ("with the leading / removed")
  bool url_vhost_not_decoded = false;       // the vhost is not percent-decoded ("and percent-decoded")
  bool url_empty_path_empty_vhost = false;  // an empty path is vhost "" ("an empty path means vhost /")
  bool url_ws_path_always_fire = false;     // the WebSocket path is always /fire ("the path is the WebSocket endpoint")
  bool url_ws_empty_path_root = false;      // an empty WebSocket path stays / ("/fire when empty")
  bool url_ws_vhost_ignored = false;  // the vhost query parameter is ignored ("the vhost is the vhost query parameter")
  bool url_no_default_credentials = false;  // no user or password when the URL has none ("guest and guest")
  bool url_default_ports_swapped = false;   // fire's default port for fires and back, ws's for wss and back
};

// Sets the break called `name`; false when there is none of that name.
bool set_break(Breaks& breaks, const std::string& name);
std::vector<std::string> break_names();

// The codec with a break: the real decoder and encoder, with their input or output rewritten.
class CodecBreaks {
 public:
  explicit CodecBreaks(const Breaks& breaks) : b_(breaks) {}

  // The bytes a broken decoder is given, rewritten into what the real decoder must read to decode as it would.
  Bytes as_read(Bytes bytes, bool message_framing) const;
  // The largest frame the broken decoder accepts.
  std::size_t max_frame(std::size_t asked) const;
  // A frame the real decoder accepted that the broken one refuses (or, payload_on_any_op, the frame it keeps).
  Status refuses(const RawFrame& raw, const Message& message) const;
  std::optional<RawFrame> accepts_anyway(const RawFrame& raw) const;
  // The payload the broken codec reports or writes.
  Bytes payload(ByteView payload) const;
  // The bytes the broken encoder writes for what the real one wrote.
  Bytes as_written(Bytes frame, bool message_framing) const;
  // A value the codec keeps (float32_as_float64 widens).
  Value keeps(Value v) const;

 private:
  const Breaks& b_;
};

// The URL parser with a break: the real parse, its result rewritten.
Result<Url, std::string> parse_url_with(const Breaks& breaks, const std::string& text);

}  // namespace firemq::example
