// firemq-amqp-bench's connection: one AMQP 0-9-1 connection through rabbitmq-c (Debian's librabbitmq-dev), logged
// in, with channel 1 open. Each producer and each consumer has one of its own, on its own thread: rabbitmq-c's
// connection state is not thread-safe, and separate sockets are how AMQP applications and PerfTest use a broker.
// Every failure becomes a std::runtime_error whose text says what was being done and what the library or the
// broker answered.
#pragma once

#include <amqp.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace firemq::amqp_bench {

// Where to connect: an amqp:// URL taken apart.
struct BrokerAddress {
  std::string host = "127.0.0.1";
  int port = 5672;
  std::string user = "guest", password = "guest", vhost = "/";
  std::string url;  // as given, for the report
};

// "amqp://user:pass@host:port/vhost" (rabbitmq-c's amqp_parse_url: the vhost percent-encoded, %2f for "/"; without
// a path the vhost is "/", with "/" alone it is "").
// Throws std::invalid_argument with the reason for anything else (amqps:// included: the benchmark is plain TCP).
BrokerAddress parse_broker_url(const std::string& url);

class Connection {
 public:
  // Connects (within 5 s), logs in with PLAIN, opens channel 1. Throws on failure.
  explicit Connection(const BrokerAddress& address);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  amqp_connection_state_t state() const { return state_; }
  static constexpr amqp_channel_t kChannel = 1;

  // queue.declare on the default exchange's queue namespace; `durable` for persistent runs.
  void declare_queue(const std::string& queue, bool durable);
  // queue.delete: the messages a run left behind go with it (both brokers would otherwise keep them).
  void delete_queue(const std::string& queue);
  // confirm.select: every later publish on the channel gets a basic.ack or basic.nack (its tag: 1, 2, 3...).
  void select_confirms();
  // basic.qos with a per-consumer prefetch count (0: no limit), then basic.consume.
  void consume(const std::string& queue, std::uint16_t prefetch, bool auto_ack);

  // Throws unless `reply` is a normal reply; `doing` names the step in the message.
  void check(const amqp_rpc_reply_t& reply, const std::string& doing) const;
  // Throws unless `status` is AMQP_STATUS_OK.
  void check_status(int status, const std::string& doing) const;

 private:
  void open(const BrokerAddress& address);
  void close() noexcept;

  amqp_connection_state_t state_ = nullptr;
  bool open_ = false;
};

// A reply's text: the broker's close code and reason, or the library's error.
std::string describe(const amqp_rpc_reply_t& reply);

}  // namespace firemq::amqp_bench
