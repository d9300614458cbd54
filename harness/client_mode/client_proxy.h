// The harness as a client's peer (client mode, docs/client-certification.md): a proxy between the client
// under test and the reference broker that judges every frame the CLIENT sends, with the wire monitor's rules
// applied to the client side (wire_monitor.h, Side::client) and the client-only rules of client_rules.h, and
// records the transcript both ways. It can also play a server that is awkward but within the spec: split its
// frames into single bytes, add header keys the client does not know, lower welcome.max_frame, ping the client,
// close with 320, send a fatal error, keep its pings to itself, go silent.
//
// The client connects over any of the four transports (client_proxy_stream.h has the server side of each):
// fire (FMQ1, then length-prefixed frames), fires (the same inside TLS), ws (an HTTP/1.1 upgrade on /fire,
// then one binary WebSocket message per frame, no FMQ1) and wss (ws inside TLS). The proxy always talks fire://
// to the broker: it adds FMQ1 and the len fields for a WebSocket client, and strips them again on the way back.
//
// Two threads per proxied connection (one a direction); one mutex guards the monitors, the transcript and
// writes to the client. stop() (or the destructor) ends and joins everything.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/client/websocket_framing.h"
#include "harness/client_mode/client_proxy_stream.h"
#include "harness/model/run_result.h"
#include "harness/model/transport.h"
#include "harness/rules/client_rules.h"
#include "harness/rules/wire_monitor.h"
#include "protocol/error.h"
#include "protocol/frame.h"

namespace firemq::conform {

// Awkward-but-legal behaviour of the server, applied to every frame the broker sends.
struct ServerQuirks {
  // Each frame written one byte at a time (TCP may deliver any split); over WebSocket also cut into one-byte
  // fragments, which "a client must accept" (RFC 6455 5.4; docs/spec-notes.md, Q50).
  bool single_bytes = false;
  bool unknown_header_keys = false;  // "Implementations ignore header keys they do not know."
  std::uint64_t max_frame = 0;       // welcome.max_frame lowered to this (0: as the broker says)
  // The broker's own pings are held back: the client hears the server's heartbeat only as pongs to its pings,
  // so a client that does not ping after h / 2 of its silence cannot hide behind its pongs.
  bool no_pings = false;
  // Nothing more reaches the client (the client's frames still reach the broker, which stays alive): with a
  // heartbeat the client must consider the server dead 2 x h after the last byte it got (client_rules.h).
  bool silent = false;
  // Positive confirms are held back and only the highest goes on, once the broker sends anything but a nack or
  // kConfirmHold has passed: one upto then settles several outstanding publishes, as "upto n confirms every
  // outstanding publish with seq <= n" allows; nacks pass at once, so each still comes before any upto covering
  // it.
  bool coalesce_confirms = false;
};

inline constexpr std::chrono::milliseconds kConfirmHold{300};

// How the client reaches the proxy.
struct ProxyTransport {
  Transport transport = Transport::fire;
  std::shared_ptr<ProxyTls> tls;  // fires and wss: the proxy's certificate
};

class ClientProxy {
 public:
  // Listens on 127.0.0.1 (a free port) for clients over `transport` and forwards to the broker's fire listener
  // at upstream_host:upstream_port. Times in the transcript and violations count from `origin` (the case's
  // start).
  static Result<std::unique_ptr<ClientProxy>, std::string> start(const std::string& upstream_host,
                                                                 std::uint16_t upstream_port, ProxyTransport transport,
                                                                 ServerQuirks quirks, Clock::time_point origin);
  ~ClientProxy();
  std::uint16_t port() const { return port_; }

  // Changes how the server behaves from the next frame the broker sends (a case sets it before connecting;
  // `silent` after).
  void set_quirks(ServerQuirks quirks);
  // When the client last got a byte before the server went silent (on its latest connection); nullopt while
  // the server is not silent.
  std::optional<Clock::time_point> silent_since();
  // Sends a frame to the client on its latest connection, as the server: a ping; a close, after which the
  // proxy stops forwarding and lets the broker go, as a server that closed would; an error with fatal: true,
  // after which it also closes the client's socket ("the server closes the connection after this frame").
  // False without a connection.
  // With `end_after` (a fatal error only), the proxy holds the connection open that long before it ends it, so
  // that a client which ignores `fatal` is seen still waiting (its own end must come first).
  bool send_to_client(std::uint8_t op, const Map& header,
                      std::chrono::milliseconds end_after = std::chrono::milliseconds(0));
  // Waits until the client has sent a frame of `op` on its latest connection since the last send_to_client.
  bool wait_for_client(std::uint8_t op, Clock::time_point deadline);
  // Waits until the client has ended its latest connection (closed its socket) on its own.
  bool wait_for_client_end(Clock::time_point deadline);
  // The application asked the client for a normal shutdown (the driver's close): its connections' next close
  // must say code 200, and come before the socket ends (client_rules.h).
  void application_closes();
  // The application asked the client to send a frame: its latest connection's next frame of that op must carry
  // the fields as asked (client_rules.h).
  void application_sends(AskedFrame asked);
  // The application asked the client to connect: the next connection it opens must send these (its hello, with
  // the URL's credentials and vhost).
  void application_connects(std::vector<AskedFrame> asked);
  // The command failed: what it asked is no longer owed, on a connection or the next one.
  void application_withdraws(int command);

  // Ends every connection, joins the threads and judges what is still owed. Idempotent.
  void stop();
  std::vector<TranscriptLine> transcript();
  std::vector<MonitorViolation> violations();
  std::size_t connections();

 private:
  struct Connection;
  ClientProxy(int listener, std::uint16_t port, std::string host, std::uint16_t upstream, ProxyTransport transport,
              ServerQuirks quirks, Clock::time_point origin);
  bool websocket() const { return is_websocket(transport_.transport); }
  void accept_loop();
  void client_to_broker(Connection& c);
  // Under mutex_: the client's bytes, judged; what goes on to the broker is appended to `to_broker`. False
  // once the connection is over for the client (it sent a WebSocket close, or bytes it cannot continue from).
  bool judge_from_client(Connection& c, ByteView bytes, Bytes& to_broker);
  bool judge_stream(Connection& c, ByteView bytes, Bytes& to_broker);
  bool judge_websocket(Connection& c, ByteView bytes, Bytes& to_broker);
  bool upgrade(Connection& c, ByteView& bytes);
  bool on_websocket_frame(Connection& c, WsFrame frame, Bytes& to_broker);
  bool on_client_message(Connection& c, const WsMessageAssembler::Message& message, Bytes& to_broker);
  bool refuse_message(Connection& c, std::uint16_t ws_close_code, const std::string& why);
  void broker_to_client(Connection& c);
  // Under mutex_: a complete frame from `from`, seen by the monitors and the transcript.
  void seen(Connection& c, Side from, const RawFrame& frame);
  void note(Connection& c, const std::string& text);
  // Under mutex_: a frame (in its TCP form, len first) to the client, as its transport carries it.
  bool frame_to_client(Connection& c, ByteView stream_frame);
  bool write_to_client(Connection& c, ByteView bytes);
  // Under mutex_: the server ends its side: a WebSocket close (1000) first on ws and wss, then TLS's
  // close_notify and the FIN.
  void end_to_client(Connection& c);
  // Under mutex_: the broker's frame to the client through the quirks (false: the client cannot take it), and
  // the held confirm of coalesce_confirms sent on.
  bool pass_to_client(Connection& c, const RawFrame& original);
  bool flush_held_confirm(Connection& c);
  bool wait_for_broker(Connection& c);

  int listener_;
  std::uint16_t port_;
  std::string upstream_host_;
  std::uint16_t upstream_port_;
  ProxyTransport transport_;
  ServerQuirks quirks_;
  std::optional<Clock::time_point> silent_since_;
  Clock::time_point origin_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable frame_seen_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<AskedFrame> asked_of_next_connection_;  // application_connects, until the client connects
  std::vector<TranscriptLine> transcript_;
};

}  // namespace firemq::conform
