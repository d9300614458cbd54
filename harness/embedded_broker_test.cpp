// The reference broker as a real process on a real socket: SIGTERM sends close 320 to every client, flushes,
// and exits 0 (issue: "SIGTERM: close 320 to every client, flush, exit 0").
#include "harness/embedded_broker.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <unistd.h>

#include "harness/wire.h"
#include "protocol/messages.h"

namespace firemq::conform {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<EmbeddedBroker> start_broker(const std::string& name) {
  EmbeddedOptions options;
  options.broker_path = FIREMQ_BROKER_PATH;
  options.work_dir = std::filesystem::temp_directory_path() / ("firemq-broker-test-" + name + "-" + std::to_string(::getpid()));
  auto broker = EmbeddedBroker::start(options);
  EXPECT_TRUE(broker.ok()) << (broker.ok() ? "" : broker.error());
  return broker.ok() ? std::move(*broker) : nullptr;
}

std::optional<Message> next_message(WireConnection& wire) {
  WireEvent event = wire.receive(Clock::now() + 5s);
  auto* frame = std::get_if<FrameEvent>(&event);
  if (frame == nullptr) return std::nullopt;
  auto message = decode_frame(frame->frame);
  if (!message) return std::nullopt;
  return *message;
}

void open_session(WireConnection& wire, std::uint16_t port) {
  ASSERT_TRUE(wire.connect("127.0.0.1", port, Clock::now() + 5s).ok());
  Bytes bytes(kPreamble.begin(), kPreamble.end());
  op::Hello hello;
  hello.ver = 1;
  hello.auth = {"plain", "guest", "guest"};
  const Bytes frame = encode_frame(hello);
  bytes.insert(bytes.end(), frame.begin(), frame.end());
  ASSERT_TRUE(wire.send(bytes, Clock::now() + 5s));
  auto welcome = next_message(wire);
  ASSERT_TRUE(welcome && std::holds_alternative<op::Welcome>(*welcome));
}

TEST(BrokerProcess, SigtermSendsClose320ToEveryClientAndExitsZero) {
  auto broker = start_broker("sigterm");
  ASSERT_NE(broker, nullptr);
  WireConnection first, second;
  open_session(first, broker->port());
  open_session(second, broker->port());

  int status = -2;
  std::thread stopper([&] { status = broker->stop(); });
  for (WireConnection* wire : {&first, &second}) {
    auto close = next_message(*wire);
    ASSERT_TRUE(close && std::holds_alternative<op::Close>(*close));
    EXPECT_EQ(std::get<op::Close>(*close).code, 320u);
    EXPECT_TRUE(std::holds_alternative<ClosedEvent>(wire->receive(Clock::now() + 5s)));
  }
  stopper.join();
  EXPECT_EQ(status, 0);
}

TEST(BrokerProcess, AClientThatDisconnectsAbruptlyLeavesOthersServed) {
  auto broker = start_broker("abrupt");
  ASSERT_NE(broker, nullptr);
  WireConnection leaving, staying;
  open_session(leaving, broker->port());
  open_session(staying, broker->port());
  const Bytes half_a_frame = {0x00, 0x00, 0x01};
  leaving.send(half_a_frame, Clock::now() + 1s);
  leaving.disconnect();
  ASSERT_TRUE(staying.send(encode_frame(op::Ping{}), Clock::now() + 1s));
  auto pong = next_message(staying);
  EXPECT_TRUE(pong && std::holds_alternative<op::Pong>(*pong));
  EXPECT_EQ(broker->stop(), 0);
}

// restart (the restart_broker step): the same port and data dir, gracefully or with kill -9, the log kept.
TEST(BrokerProcess, RestartComesBackOnTheSamePortWithTheSameDataDir) {
  auto broker = start_broker("restart");
  ASSERT_NE(broker, nullptr);
  const std::uint16_t port = broker->port();
  EXPECT_EQ(broker->data_dir().filename(), "data");
  for (const bool kill : {false, true}) {
    WireConnection before;
    open_session(before, port);
    auto restarted = broker->restart(kill);
    ASSERT_TRUE(restarted.ok()) << restarted.error();
    EXPECT_EQ(restarted->exit_status, kill ? -1 : 0) << restarted->what;
    EXPECT_EQ(broker->port(), port);
    EXPECT_TRUE(broker->running());
    WireConnection after;
    open_session(after, port);
  }
  EXPECT_NE(tail_of(broker->log_file(), 100'000).find("restart (killed with SIGKILL)"), std::string::npos);
  EXPECT_EQ(broker->stop(), 0);
}

TEST(BrokerProcess, UnreadableDefinitionsFileStopsTheBrokerWithAClearError) {
  EmbeddedOptions options;
  options.broker_path = FIREMQ_BROKER_PATH;
  options.definitions_file = "/nonexistent/definitions.json";
  options.work_dir = std::filesystem::temp_directory_path() / ("firemq-broker-test-defs-" + std::to_string(::getpid()));
  auto broker = EmbeddedBroker::start(options);
  ASSERT_FALSE(broker.ok());
  EXPECT_NE(broker.error().find("cannot read definitions file '/nonexistent/definitions.json'"), std::string::npos)
      << broker.error();
}

}  // namespace
}  // namespace firemq::conform
