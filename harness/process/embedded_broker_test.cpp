// The reference broker as a real process on a real socket: SIGTERM sends close 320 to every client, flushes,
// and exits 0 (issue: "SIGTERM: close 320 to every client, flush, exit 0").
#include "harness/process/embedded_broker.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/client/wire.h"
#include "protocol/messages.h"

namespace firemq::conform {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<EmbeddedBroker> start_broker(const std::string& name, std::vector<std::string> extra_args = {}) {
  EmbeddedOptions options;
  options.broker_path = FIREMQ_BROKER_PATH;
  options.extra_args = std::move(extra_args);
  options.work_dir = std::filesystem::temp_directory_path() /
                     ("firemq-broker-test-" + name + "-" + std::to_string(::getpid()));
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

void open_session(WireConnection& wire, std::uint16_t port, const std::string& user = "guest",
                  const std::string& password = "guest") {
  ASSERT_TRUE(wire.connect("127.0.0.1", port, Clock::now() + 5s).ok());
  Bytes bytes(kPreamble.begin(), kPreamble.end());
  op::Hello hello;
  hello.ver = 1;
  hello.auth = {"plain", user, password};
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

// A port of the ephemeral range could be held by another test's outgoing connection while the broker restarts.
TEST(BrokerProcess, PortsAreChosenBelowTheEphemeralRange) {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  auto broker = start_broker("ports");
  ASSERT_NE(broker, nullptr);
  EXPECT_LT(broker->port(), ephemeral_low);
  EXPECT_LT(broker->amqp_port(), ephemeral_low);
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

// Sends a request and returns the first frame that answers it.
std::optional<Message> ask(WireConnection& wire, const Message& request, std::string_view payload = "") {
  if (!wire.send(encode_frame(request, as_bytes(payload)), Clock::now() + 5s)) return std::nullopt;
  return next_message(wire);
}

op::DeclareQueue declare(std::uint64_t rid, const std::string& name, bool durable) {
  op::DeclareQueue d;
  d.rid = rid;
  d.name = name;
  d.durable = durable;
  return d;
}

op::Publish persistent_publish(std::uint64_t seq, const std::string& queue, bool persistent) {
  op::Publish p;
  p.seq = seq;
  p.key = queue;
  p.persistent = persistent;
  return p;
}

// --storage-fault fsync:N on a real process. At start the broker syncs the data directory (fsync 1) and saves
// its definitions (the file and the directory: 2 and 3). A durable declare first makes the message store durable
// (its segment and directory: 4 and 5), then saves the definitions (6 and 7); the first fsync of the storage
// thread, after a persistent publish, is number 8.
TEST(BrokerProcess, AFailedDefinitionsFsyncAnswersTheDeclareWithFatal541AndTheBrokerGoesOn) {
  auto broker = start_broker("fault-definitions", {"--storage-fault", "fsync:6"});
  ASSERT_NE(broker, nullptr);
  WireConnection wire;
  open_session(wire, broker->port());
  auto reply = ask(wire, declare(1, "dq", true));
  ASSERT_TRUE(reply && std::holds_alternative<op::Error>(*reply));
  EXPECT_EQ(std::get<op::Error>(*reply).code, 541u);
  EXPECT_TRUE(std::get<op::Error>(*reply).fatal) << "541 is fatal in the spec's table";
  EXPECT_NE(std::get<op::Error>(*reply).msg.find("definitions not saved"), std::string::npos);
  WireConnection other;  // the broker goes on for everyone else
  open_session(other, broker->port());
  reply = ask(other, op::Ping{});
  EXPECT_TRUE(reply && std::holds_alternative<op::Pong>(*reply));
  EXPECT_EQ(broker->stop(), 0);
}

TEST(BrokerProcess, AFailedStoreFsyncNacksWith541AndPausesPublishersAndTransientPublishesAreStillConfirmed) {
  auto broker = start_broker("fault-store", {"--storage-fault", "fsync:8"});
  ASSERT_NE(broker, nullptr);
  WireConnection wire;
  open_session(wire, broker->port());
  auto reply = ask(wire, declare(1, "dq", true));
  ASSERT_TRUE(reply && std::holds_alternative<op::Ok>(*reply));
  reply = ask(wire, persistent_publish(1, "dq", true), "kept?");
  ASSERT_TRUE(reply && std::holds_alternative<op::Confirm>(*reply));
  const auto& nack = std::get<op::Confirm>(*reply);
  EXPECT_TRUE(nack.nack);
  EXPECT_EQ(nack.seq, 1u);
  EXPECT_EQ(nack.code, 541u);
  EXPECT_NE(nack.msg.find("fsync"), std::string::npos) << nack.msg;
  // The failed store raises the disk alarm (docs/durability.md): a connection that published is paused.
  auto flow = next_message(wire);
  ASSERT_TRUE(flow && std::holds_alternative<op::Flow>(*flow));
  EXPECT_TRUE(std::get<op::Flow>(*flow).pause);
  // One that has not published is still read: its persistent publish is nacked, its transient one confirmed.
  WireConnection other;
  open_session(other, broker->port());
  ASSERT_TRUE(ask(other, declare(2, "tq", false)));
  const Bytes both = [] {
    Bytes bytes = encode_frame(persistent_publish(1, "dq", true), as_bytes("refused"));
    const Bytes transient = encode_frame(persistent_publish(2, "tq", false), as_bytes("transient"));
    bytes.insert(bytes.end(), transient.begin(), transient.end());
    return bytes;
  }();
  ASSERT_TRUE(other.send(both, Clock::now() + 5s));  // one read: both are taken before the pause
  reply = next_message(other);
  ASSERT_TRUE(reply && std::holds_alternative<op::Confirm>(*reply));
  EXPECT_TRUE(std::get<op::Confirm>(*reply).nack) << "nothing more is made durable until a restart";
  reply = next_message(other);
  ASSERT_TRUE(reply && std::holds_alternative<op::Confirm>(*reply));
  EXPECT_FALSE(std::get<op::Confirm>(*reply).nack);
  EXPECT_EQ(std::get<op::Confirm>(*reply).upto, 2u);
  EXPECT_EQ(broker->stop(), 0);
  EXPECT_NE(tail_of(broker->log_file()).find("message store failed"), std::string::npos);
}

// "the users, vhosts and permissions survive a restart": started once with --definitions, the broker keeps them
// in its data directory, and a restart without the flag still knows them.
TEST(BrokerProcess, UsersFromADefinitionsFileSurviveARestartWithoutTheFile) {
  EmbeddedOptions options;
  options.broker_path = FIREMQ_BROKER_PATH;
  options.definitions_file = FIREMQ_CONFORMANCE_DIR "/definitions.json";
  options.work_dir = std::filesystem::temp_directory_path() /
                     ("firemq-broker-test-users-" + std::to_string(::getpid()));
  auto first = EmbeddedBroker::start(options);
  ASSERT_TRUE(first.ok()) << first.error();
  const std::filesystem::path data_dir = (*first)->data_dir();
  EXPECT_EQ((*first)->stop(), 0);

  EmbeddedOptions again;
  again.broker_path = FIREMQ_BROKER_PATH;
  again.work_dir = std::filesystem::temp_directory_path() / ("firemq-broker-test-users2-" + std::to_string(::getpid()));
  again.data_dir = data_dir;
  auto second = EmbeddedBroker::start(again);
  ASSERT_TRUE(second.ok()) << second.error();
  WireConnection wire;
  open_session(wire, (*second)->port(), "conform-other", "conform-secret");
  EXPECT_EQ((*second)->stop(), 0);
}

TEST(BrokerProcess, ASecondBrokerOnTheSameDataDirectoryIsRefused) {
  auto first = start_broker("lock");
  ASSERT_NE(first, nullptr);
  EmbeddedOptions options;
  options.broker_path = FIREMQ_BROKER_PATH;
  options.work_dir = std::filesystem::temp_directory_path() /
                     ("firemq-broker-test-lock2-" + std::to_string(::getpid()));
  options.data_dir = first->data_dir();
  auto second = EmbeddedBroker::start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().find("is in use by another firemq-broker"), std::string::npos) << second.error();
  EXPECT_EQ(first->stop(), 0);
}

}  // namespace
}  // namespace firemq::conform
