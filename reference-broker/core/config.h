// The broker's settings, from its command line (main.cpp lists every flag with its default).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/frame.h"
#include "reference-broker/access/loopback.h"
#include "reference-broker/core/alarms.h"

namespace firemq {

// The TLS listeners' files (tls_context.h uses them).
struct TlsFiles {
  std::string certificate;  // PEM: the server's certificate, then any intermediates
  std::string private_key;  // PEM
  std::string client_ca;    // PEM; empty: client certificates are not asked for
  // TLS 1.2's cipher suites, in OpenSSL's cipher-list syntax and in the server's order of preference
  // (--tls-ciphers). The default is Mozilla's "intermediate" list: forward-secret key exchange (ECDHE, DHE) with
  // an AEAD (AES-GCM, ChaCha20-Poly1305) only; no static RSA key exchange, no CBC, no SHA-1 MACs. TLS 1.3's
  // suites, all of them forward-secret AEADs, stay OpenSSL's.
  std::string ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                        "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
                        "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
};

// Testing only (--websocket-fault): a WebSocket transport broken one way, so that the conformance cases for the
// WebSocket rules can be shown to fail (conformance/testdata/websocket_faults_check.sh).
struct WebSocketFaults {
  bool accept_text = false;       // text messages are taken as frames
  bool ignore_url_vhost = false;  // ?vhost= is not looked at
  bool pack_frames = false;       // the frames of one write go out as one message
};

// Testing only (--amqp-fault): the interop table broken one way on the AMQP side, so that the interop cases can
// be shown to fail (conformance/amqp_faults.json, conformance/testdata/amqp_faults_check.sh).
struct AmqpFaults {
  bool drop_delivery_mode = false;     // an AMQP publish's delivery-mode is ignored: never persistent
  bool decimal_ignores_scale = false;  // a `D` header value reaches FireMQ as its unscaled value
  // The channel semantics RabbitMQ's clients rely on (conformance/amqp_semantics_faults.json), each one undone:
  bool crossing_close_ends_channel = false;      // a close crossing ours ends the channel at once (the close-ok is 504)
  bool nack_refused_publishes = false;           // in confirm mode a publish to a missing exchange is nacked
  bool global_qos_per_consumer = false;          // basic.qos global=true is each new consumer's prefetch
  bool lossy_header_types = false;               // AMQP consumers get the interop table's types, not the publisher's
  bool empty_queue_name_as_given = false;        // "" is not the last declared queue
  bool tx_routes_at_commit = false;              // a transaction's publish is routed at tx.commit, not when it arrives
  bool properties_before_exchange = false;       // a bad expiration is refused (406) before a missing exchange (404)
  bool empty_headers_dropped = false;            // an empty headers table is delivered as no headers property
  bool system_exchange_delete_as_fire = false;   // deleting "" or amq.* gets FireMQ's answer (530), not 403
  bool exclusive_consume_on_sac = false;         // an exclusive consume on a single-active-consumer queue is allowed
  bool exclusive_consumer_conflict_405 = false;  // a consume beside an exclusive consumer is 405, not 403
  bool reject_publish_closes = false;     // a full reject-publish queue's refusal of an unconfirmed publish is a 506
  bool tx_unknown_tag_at_commit = false;  // in tx mode an ack of an unknown tag is refused at tx.commit
};

// The listeners, by the URL scheme clients use, on the spec's default ports. No value: that listener is off.
// Port 0 picks a free port, reported in the port file and on stdout.
struct ListenerPorts {
  std::optional<std::uint16_t> fire = 5673;   // TCP
  std::optional<std::uint16_t> fires = 5674;  // TLS; on only with a certificate
  std::optional<std::uint16_t> ws = 15672;    // HTTP: WebSocket at /fire
  std::optional<std::uint16_t> wss = 15671;   // HTTPS: WebSocket at /fire; on only with a certificate
  std::optional<std::uint16_t> amqp = 5672;   // AMQP 0-9-1 ("FireMQ also speaks AMQP 0-9-1 on port 5672")
  std::optional<std::uint16_t> amqps = 5671;  // AMQP 0-9-1 inside TLS, as RabbitMQ's; on only with a certificate
};

// Bounds that no client can push past, whatever its permissions (docs/security.md lists each with its flag).
// Past one, the request is refused with 506 resource-error, not fatal, and nothing else is affected; the
// handshake bound instead drops the connection that has waited longest in its handshake.
struct ClientBounds {
  std::size_t handshakes = 512;              // connections between accept and welcome, broker-wide
  std::size_t subscriptions = 4096;          // per connection
  std::size_t unacked = 65536;               // unacknowledged deliveries per connection, whatever the credit
  std::size_t queues_per_vhost = 100'000;    // a vhost's max-queues limit may set fewer
  std::size_t exchanges_per_vhost = 10'000;  // built-in exchanges included
  std::size_t bindings_per_vhost = 100'000;
};

struct BrokerConfig {
  std::string bind_address = "0.0.0.0";
  ListenerPorts ports;
  TlsFiles tls;  // no certificate: no fires, wss and amqps listeners
  WebSocketFaults websocket_faults;
  AmqpFaults amqp_faults;
  std::string port_file;  // where to write {"fire": P, "fires": P, "ws": P, "wss": P, "amqp": P, "amqps": P} once bound
  std::string definitions_file;               // users, vhosts, permissions; empty: guest/guest on vhost "/"
  LoopbackPolicy loopback;                    // who may log in only from loopback (RabbitMQ's loopback_users)
  OriginPolicy trusted_origins;               // WebSocket Origins that count as this machine for loopback_users
  std::string data_dir = "firemq-data";       // durable definitions and the message store (docs/durability.md)
  std::uint64_t segment_bytes = 64ull << 20;  // the message store starts a new segment file past this size

  // "the smaller non-zero value of the client's and the server's" (welcome.heartbeat)
  std::uint64_t heartbeat_seconds = 60;
  std::size_t max_frame = kDefaultMaxFrame;             // welcome.max_frame
  std::chrono::milliseconds handshake_timeout{10'000};  // FMQ1 + hello must arrive within this
  std::chrono::milliseconds shutdown_grace{5'000};      // SIGTERM: time to flush the close frames
  // How often the management API samples its message rates (RabbitMQ's collect_statistics_interval).
  std::chrono::milliseconds statistics_interval{5'000};
  AlarmLimits alarms;  // flow control
  // Bodies of queued messages leave memory past this share of the memory high watermark (paging.h; RabbitMQ's
  // vm_memory_high_watermark_paging_ratio).
  double paging_ratio = 0.5;
  ClientBounds bounds;
};

// Every outbound queue is bounded: once a connection has this many bytes waiting to be written, the broker
// stops reading from it until the queue drains (a peer that sends but never reads meets this limit).
inline constexpr std::size_t kMaxPendingBytes = 8 * 1024 * 1024;

// The close, in the connection engine (net/connection.cpp), for both protocols. After the last
// frame of a closing connection, how long to wait for the peer's end of the conversation before closing anyway:
// closing with unread input would send a TCP reset, which can destroy the error or close frame in flight.
inline constexpr std::chrono::milliseconds kLingerAfterClose{2000};
// How long a closing connection may take, from its close or fatal error to its end: the writing out of its last
// frames and the lingering together. A peer that neither reads nor closes would otherwise keep a closing
// connection, which is drained, not gated, forever.
inline constexpr std::chrono::milliseconds kMaxClosingTime{5000};

// The HTTP listeners (ws, wss, the management API): a keep-alive connection that has sent no byte of its next
// request for this long is closed, as common servers do (cowboy's idle_timeout, nginx's keepalive_timeout), so
// that idle sockets do not hold descriptors for the whole handshake timeout.
inline constexpr std::chrono::milliseconds kHttpIdleTimeout{5000};

// Descriptors kept free for the broker's own files (the store's segments, definitions.json) and for the next
// client: when an accepted socket's descriptor is this close to the soft RLIMIT_NOFILE, or accept fails with
// EMFILE/ENFILE, the connection that has waited longest in its handshake is dropped (listener.cpp).
inline constexpr int kReservedDescriptors = 32;

// The largest --max-frame: a message must fit one record of the message store (store_record.cpp allows 1 GiB,
// leaving room for its queue list and the headers dead-lettering adds).
inline constexpr std::size_t kMaxFrameLimit = 256 * 1024 * 1024;

// How often expired messages and unused queues are looked for: the precision of TTL and x-expires.
inline constexpr std::chrono::milliseconds kTickInterval{20};

inline constexpr const char* kServerName = "firemq";
inline constexpr const char* kServerVersion = "0.1.0";

}  // namespace firemq
