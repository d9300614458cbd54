// The op table of the spec's "Op codes" section, as data in one place: code, name, direction, payload.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace firemq {

enum class OpCode : std::uint8_t {
  hello = 0x01,
  welcome = 0x02,
  ping = 0x03,
  pong = 0x04,
  close = 0x05,
  ok = 0x06,
  error = 0x07,
  flow = 0x08,
  declare_exchange = 0x10,
  delete_exchange = 0x11,
  declare_queue = 0x12,
  delete_queue = 0x13,
  purge_queue = 0x14,
  bind = 0x15,
  unbind = 0x16,
  publish = 0x20,
  confirm = 0x21,
  return_ = 0x22,  // "return"
  subscribe = 0x30,
  unsubscribe = 0x31,
  credit = 0x32,
  deliver = 0x33,
  cancelled = 0x34,
  ack = 0x35,
  nack = 0x36,
  get = 0x37,
  get_ok = 0x38,
};

enum class Direction { client_to_server, server_to_client, both };

struct OpInfo {
  OpCode code;
  std::string_view name;  // the spec's name, e.g. "declare_exchange"
  Direction direction;
  bool has_payload;  // "Only publish, return, deliver and get_ok carry a payload."
};

inline constexpr std::array<OpInfo, 27> kOps = {{
    {OpCode::hello, "hello", Direction::client_to_server, false},
    {OpCode::welcome, "welcome", Direction::server_to_client, false},
    {OpCode::ping, "ping", Direction::both, false},
    {OpCode::pong, "pong", Direction::both, false},
    {OpCode::close, "close", Direction::both, false},
    {OpCode::ok, "ok", Direction::server_to_client, false},
    {OpCode::error, "error", Direction::server_to_client, false},
    {OpCode::flow, "flow", Direction::server_to_client, false},
    {OpCode::declare_exchange, "declare_exchange", Direction::client_to_server, false},
    {OpCode::delete_exchange, "delete_exchange", Direction::client_to_server, false},
    {OpCode::declare_queue, "declare_queue", Direction::client_to_server, false},
    {OpCode::delete_queue, "delete_queue", Direction::client_to_server, false},
    {OpCode::purge_queue, "purge_queue", Direction::client_to_server, false},
    {OpCode::bind, "bind", Direction::client_to_server, false},
    {OpCode::unbind, "unbind", Direction::client_to_server, false},
    {OpCode::publish, "publish", Direction::client_to_server, true},
    {OpCode::confirm, "confirm", Direction::server_to_client, false},
    {OpCode::return_, "return", Direction::server_to_client, true},
    {OpCode::subscribe, "subscribe", Direction::client_to_server, false},
    {OpCode::unsubscribe, "unsubscribe", Direction::client_to_server, false},
    {OpCode::credit, "credit", Direction::client_to_server, false},
    {OpCode::deliver, "deliver", Direction::server_to_client, true},
    {OpCode::cancelled, "cancelled", Direction::server_to_client, false},
    {OpCode::ack, "ack", Direction::client_to_server, false},
    {OpCode::nack, "nack", Direction::client_to_server, false},
    {OpCode::get, "get", Direction::client_to_server, false},
    {OpCode::get_ok, "get_ok", Direction::server_to_client, true},
}};

// The table entry for an op byte, or nullptr for an op version 1 does not define.
const OpInfo* find_op(std::uint8_t code);

// The spec's name of `op`.
std::string_view op_name(OpCode op);

}  // namespace firemq
