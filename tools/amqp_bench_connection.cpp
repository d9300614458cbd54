#include "tools/amqp_bench_connection.h"

#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <stdexcept>
#include <vector>

namespace firemq::amqp_bench {

namespace {

// RabbitMQ's default, and what both brokers accept: a 64 KiB body fits in one body frame.
constexpr int kFrameMax = AMQP_DEFAULT_FRAME_SIZE;
// Every RPC (declare, qos, close) gets an answer within this, or the run fails with a clear error. Deleting a
// queue that holds millions of persistent messages takes RabbitMQ some seconds, hence not less.
constexpr timeval kRpcTimeout{60, 0};

std::string text(amqp_bytes_t bytes) { return std::string(static_cast<const char*>(bytes.bytes), bytes.len); }

}  // namespace

BrokerAddress parse_broker_url(const std::string& url) {
  std::vector<char> writable(url.begin(), url.end());  // amqp_parse_url cuts the string it is given
  writable.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(writable.data(), &info) != AMQP_STATUS_OK)
    throw std::invalid_argument("--url " + url + ": expected amqp://user:password@host:port/vhost");
  if (info.ssl) throw std::invalid_argument("--url " + url + ": amqps:// is not supported, the benchmark is plain TCP");
  return BrokerAddress{info.host, info.port, info.user, info.password, info.vhost, url};
}

std::string describe(const amqp_rpc_reply_t& reply) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "no reply (missing RPC reply type)";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const auto* close = static_cast<const amqp_connection_close_t*>(reply.reply.decoded);
        return "connection closed by the broker: " + std::to_string(close->reply_code) + " " + text(close->reply_text);
      }
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const auto* close = static_cast<const amqp_channel_close_t*>(reply.reply.decoded);
        return "channel closed by the broker: " + std::to_string(close->reply_code) + " " + text(close->reply_text);
      }
      return "unexpected method " + std::to_string(reply.reply.id) + " from the broker";
  }
  return "unknown reply";
}

Connection::Connection(const BrokerAddress& a) {
  state_ = amqp_new_connection();
  if (state_ == nullptr) throw std::runtime_error("out of memory for a connection");
  // A constructor that throws runs no destructor: what was opened so far is closed here.
  try {
    open(a);
  } catch (...) {
    close();
    throw;
  }
}

void Connection::open(const BrokerAddress& a) {
  amqp_socket_t* socket = amqp_tcp_socket_new(state_);
  const std::string where = a.host + ":" + std::to_string(a.port);
  if (socket == nullptr) throw std::runtime_error("no socket for " + where);
  timeval connect_timeout{5, 0};
  check_status(amqp_socket_open_noblock(socket, a.host.c_str(), a.port, &connect_timeout), "connecting to " + where);
  amqp_set_rpc_timeout(state_, &kRpcTimeout);
  // No heartbeats (0): a benchmark's connections are never idle, and rabbitmq-c serves them only while reading.
  check(amqp_login(state_, a.vhost.c_str(), 0, kFrameMax, 0, AMQP_SASL_METHOD_PLAIN, a.user.c_str(),
                   a.password.c_str()),
        "logging in to " + where + " as " + a.user);
  open_ = true;
  amqp_channel_open(state_, kChannel);
  check(amqp_get_rpc_reply(state_), "opening channel 1");
}

Connection::~Connection() { close(); }

void Connection::close() noexcept {
  if (state_ == nullptr) return;
  if (open_) {
    amqp_channel_close(state_, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(state_, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(state_);
  state_ = nullptr;
}

void Connection::check(const amqp_rpc_reply_t& reply, const std::string& doing) const {
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error(doing + ": " + describe(reply));
}

void Connection::check_status(int status, const std::string& doing) const {
  if (status != AMQP_STATUS_OK) throw std::runtime_error(doing + ": " + amqp_error_string2(status));
}

void Connection::declare_queue(const std::string& queue, bool durable) {
  amqp_queue_declare(state_, kChannel, amqp_cstring_bytes(queue.c_str()), /*passive=*/0, durable,
                     /*exclusive=*/0, /*auto_delete=*/0, amqp_empty_table);
  check(amqp_get_rpc_reply(state_), "declaring queue " + queue);
}

void Connection::delete_queue(const std::string& queue) {
  amqp_queue_delete(state_, kChannel, amqp_cstring_bytes(queue.c_str()), /*if_unused=*/0, /*if_empty=*/0);
  check(amqp_get_rpc_reply(state_), "deleting queue " + queue);
}

void Connection::select_confirms() {
  amqp_confirm_select(state_, kChannel);
  check(amqp_get_rpc_reply(state_), "confirm.select");
}

void Connection::consume(const std::string& queue, std::uint16_t prefetch, bool auto_ack) {
  if (prefetch > 0) {
    amqp_basic_qos(state_, kChannel, 0, prefetch, /*global=*/0);
    check(amqp_get_rpc_reply(state_), "basic.qos prefetch " + std::to_string(prefetch));
  }
  amqp_basic_consume(state_, kChannel, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, /*no_local=*/0, auto_ack,
                     /*exclusive=*/0, amqp_empty_table);
  check(amqp_get_rpc_reply(state_), "basic.consume on " + queue);
}

}  // namespace firemq::amqp_bench
