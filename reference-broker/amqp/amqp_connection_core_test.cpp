// An AMQP 0-9-1 connection without a socket: client frames in, the broker's frames decoded back, through the
// real core model, so the channel-to-session mapping is tested end to end (the pika test, amqp_pika_test.py,
// does it again with a real client over TCP).
#include "reference-broker/amqp/amqp_connection_core.h"

#include <gtest/gtest.h>

#include "reference-broker/core/time_source.h"

namespace firemq {
namespace {

namespace m = amqp::method;
using amqp::Method;

struct RecordingWire final : OutboundBuffer {
  Bytes written;
  bool closing = false;
  Bytes* outbound() override { return &written; }
  void queued(std::size_t) override {}
  void close_after_flush() override { closing = true; }
};

class AmqpConnectionCoreTest : public ::testing::Test {
 protected:
  // Everything the broker wrote since the last call, as frames.
  std::vector<amqp::Frame> frames() {
    std::vector<amqp::Frame> out;
    amqp::FrameDecoder decoder(false);
    decoder.set_frame_max(0);
    ByteView rest = wire_.written;
    while (!rest.empty()) {
      auto step = decoder.feed(rest);
      rest = rest.subspan(step.consumed);
      EXPECT_NE(step.state, amqp::FrameDecoder::State::error);
      if (step.state == amqp::FrameDecoder::State::frame) out.push_back(decoder.take_frame());
    }
    wire_.written.clear();
    return out;
  }
  std::vector<Method> methods() {
    std::vector<Method> out;
    for (const auto& f : frames()) {
      if (f.type == amqp::FrameType::method) out.push_back(*amqp::decode_method(f.payload));
    }
    return out;
  }
  Method only_method() {
    auto all = methods();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? Method::of(m::kConnectionCloseOk) : all[0];
  }
  void send(std::uint16_t channel, const Method& method) {
    core_.feed(amqp::encode_frame(amqp::FrameType::method, channel, amqp::encode_method(method)));
  }
  void publish(std::uint16_t channel, const std::string& key, const std::string& body,
               amqp::ContentHeader header = {}) {
    core_.feed(amqp::encode_content(channel, Method::of(m::kBasicPublish).set("routing_key", key), header,
                                    as_bytes(body), amqp::kFrameMinSize));
  }
  void start_ok(const std::string& password, amqp::FieldTable capabilities = {}) {
    core_.feed(Bytes(amqp::kProtocolHeader.begin(), amqp::kProtocolHeader.end()));
    frames();
    send(0, Method::of(m::kConnectionStartOk)
                .set("mechanism", std::string("PLAIN"))
                .set("response", std::string("\0guest\0", 7) + password)
                .set("client_properties", amqp::FieldTable{{"capabilities", capabilities}}));
  }
  void open_connection(amqp::FieldTable capabilities = {}) {
    start_ok("guest", std::move(capabilities));
    frames();
    send(
        0,
        Method::of(m::kConnectionTuneOk).set("frame_max", std::uint64_t{131072}).set("channel_max", std::uint64_t{10}));
    send(0, Method::of(m::kConnectionOpen).set("virtual_host", std::string("/")));
    ASSERT_EQ(only_method().id(), m::kConnectionOpenOk);
  }
  // Up to connection.open of `vhost`, leaving the broker's answer to it unread.
  void start_ok_then_open(const std::string& vhost) {
    start_ok("guest");
    frames();
    send(0, Method::of(m::kConnectionTuneOk));
    send(0, Method::of(m::kConnectionOpen).set("virtual_host", vhost));
  }
  void open_channel(std::uint16_t channel) {
    send(channel, Method::of(m::kChannelOpen));
    ASSERT_EQ(only_method().id(), m::kChannelOpenOk);
  }
  void declare(std::uint16_t channel, const std::string& queue) {
    send(channel, Method::of(m::kQueueDeclare).set("queue", queue));
    ASSERT_EQ(only_method().id(), m::kQueueDeclareOk);
  }
  void consume(std::uint16_t channel, const std::string& queue, const std::string& tag, bool no_ack = false) {
    send(channel, Method::of(m::kBasicConsume).set("queue", queue).set("consumer_tag", tag).set("no_ack", no_ack));
    ASSERT_EQ(only_method().id(), m::kBasicConsumeOk);
  }
  void qos(std::uint16_t channel, std::uint64_t prefetch_count, bool global) {
    send(channel, Method::of(m::kBasicQos).set("prefetch_count", prefetch_count).set("global", global));
    ASSERT_EQ(only_method().id(), m::kBasicQosOk);
  }

  BrokerConfig config_;
  Definitions definitions_ = *Definitions::parse(R"({"users": [{"name": "guest", "password": "guest"}],
      "vhosts": [{"name": "/"}], "permissions": [{"user": "guest", "vhost": "/"}]})");
  ManualTime time_;
  Core core_model_{definitions_, time_};
  RecordingWire wire_;
  AmqpConnectionCore core_{SessionEnv{config_, definitions_, core_model_}, wire_, "test", {}};
};

TEST_F(AmqpConnectionCoreTest, ProtocolHeaderGetsStartWithRabbitMqsCapabilities) {
  core_.feed(Bytes(amqp::kProtocolHeader.begin(), amqp::kProtocolHeader.end()));
  Method start = only_method();
  ASSERT_EQ(start.id(), m::kConnectionStart);
  EXPECT_EQ(start.number("version_minor"), 9u);
  EXPECT_EQ(start.text("mechanisms"), "PLAIN AMQPLAIN");
  const auto* caps = amqp::find(start.table("server_properties"), "capabilities")->get_if<amqp::FieldTable>();
  for (const char* cap : {"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
                          "connection.blocked", "authentication_failure_close", "per_consumer_qos"}) {
    EXPECT_EQ(*amqp::find(*caps, cap), amqp::FieldValue(true)) << cap;
  }
}

TEST_F(AmqpConnectionCoreTest, WrongProtocolHeaderIsAnsweredWithOursThenClosed) {
  core_.feed(Bytes{'A', 'M', 'Q', 'P', 1, 1, 0, 9});
  EXPECT_EQ(wire_.written, Bytes(amqp::kProtocolHeader.begin(), amqp::kProtocolHeader.end()));
  EXPECT_TRUE(wire_.closing);
}

TEST_F(AmqpConnectionCoreTest, WrongPasswordIsConnectionClose403OnStartOkForAClientThatAsksForIt) {
  start_ok("wrong", amqp::FieldTable{{"authentication_failure_close", amqp::FieldValue(true)}});
  Method close = only_method();
  ASSERT_EQ(close.id(), m::kConnectionClose);
  EXPECT_EQ(close.number("reply_code"), 403u);
  EXPECT_EQ(close.number("class_id"), 10u);
  EXPECT_EQ(close.number("method_id"), 11u);
  EXPECT_TRUE(wire_.closing);
}

TEST_F(AmqpConnectionCoreTest, WrongPasswordJustClosesTheSocketForAClientWithoutAuthenticationFailureClose) {
  start_ok("wrong");  // as RabbitMQ: no connection.close, which such a client may not expect before tune
  EXPECT_TRUE(frames().empty());
  EXPECT_TRUE(wire_.closing);
}

TEST_F(AmqpConnectionCoreTest, UnknownVhostIsRefusedAtOpen) {
  start_ok_then_open("nowhere");
  Method close = only_method();
  EXPECT_EQ(close.number("reply_code"), 403u);
  EXPECT_EQ(close.number("method_id"), 40u);
}

TEST_F(AmqpConnectionCoreTest, TheConnectionCountsOnceAgainstMaxConnectionsWhateverItsChannels) {
  // As RabbitMQ: a connection, not a channel, is what max-connections counts, from connection.open on.
  const ConnectionCounts& counts = core_model_.connection_counts();
  open_connection();
  EXPECT_EQ(counts.on_vhost("/"), 1u);  // no channel yet
  open_channel(1);
  open_channel(2);
  open_channel(3);
  EXPECT_EQ(counts.on_vhost("/"), 1u);
  EXPECT_EQ(counts.of_user("guest"), 1u);
  core_.on_connection_lost();
  core_.on_connection_lost();  // again when the socket goes: released once
  EXPECT_EQ(counts.on_vhost("/"), 0u);
  EXPECT_EQ(counts.of_user("guest"), 0u);
}

TEST_F(AmqpConnectionCoreTest, OverMaxConnectionsOpenIsRefusedWith530InRabbitMqsWords) {
  ASSERT_FALSE(definitions_.set_vhost_limits("/", nlohmann::json{{"max-connections", 0}}));  // 0 allows none
  start_ok_then_open("/");
  Method close = only_method();
  EXPECT_EQ(close.number("reply_code"), 530u);
  EXPECT_NE(
      close.text("reply_text").find("access to vhost '/' refused for user 'guest': connection limit (0) is reached"),
      std::string::npos)
      << close.text("reply_text");
  EXPECT_EQ(close.number("method_id"), 40u);
  EXPECT_TRUE(wire_.closing);
  EXPECT_EQ(core_model_.connection_counts().on_vhost("/"), 0u);
}

TEST_F(AmqpConnectionCoreTest, PublishWithConfirmThenGetCarriesThePropertiesBack) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  send(1, Method::of(m::kConfirmSelect));
  ASSERT_EQ(only_method().id(), m::kConfirmSelectOk);
  amqp::ContentHeader header;
  header.set("content_type", std::string("text/plain")).set("expiration", std::string("60000"));
  header.set("headers", amqp::FieldTable{{"n", std::int32_t{-5}}});
  publish(1, "q", "hello", header);
  core_.flush();
  Method ack = only_method();
  ASSERT_EQ(ack.id(), m::kBasicAck);
  EXPECT_EQ(ack.number("delivery_tag"), 1u);
  EXPECT_TRUE(ack.flag("multiple"));

  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));
  auto got = frames();
  ASSERT_EQ(got.size(), 3u);  // get-ok, header, body
  EXPECT_EQ(amqp::decode_method(got[0].payload)->id(), m::kBasicGetOk);
  auto props = amqp::decode_content_header(got[1].payload);
  ASSERT_TRUE(props.ok());
  EXPECT_EQ(*props->get("content_type"), amqp::Arg(std::string("text/plain")));
  EXPECT_EQ(*props->get("expiration"), amqp::Arg(std::string("60000")));
  // The int32 header comes back an int32 (`I`), the type its AMQP publisher gave it, as from RabbitMQ.
  EXPECT_EQ(std::get<amqp::FieldTable>(*props->get("headers")), (amqp::FieldTable{{"n", std::int32_t{-5}}}));
  EXPECT_EQ(got[2].payload, Bytes({'h', 'e', 'l', 'l', 'o'}));
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));
  EXPECT_EQ(only_method().id(), m::kBasicGetEmpty);
}

// The engine's turn (net/amqp_protocol.cpp): feed acts on at most max_frames frames and says how many bytes it
// took, ending at a frame's end, so the rest is fed again on the next turn and nothing is lost or done twice.
TEST_F(AmqpConnectionCoreTest, FeedTakesAtMostItsFramesAndSaysHowManyBytes) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  Bytes three;  // three publishes of three frames each: nine frames
  for (const char* body : {"a", "b", "c"}) {
    const Bytes publish = amqp::encode_content(1, Method::of(m::kBasicPublish).set("routing_key", std::string("q")), {},
                                               as_bytes(body), amqp::kFrameMinSize);
    three.insert(three.end(), publish.begin(), publish.end());
  }
  const std::size_t one_publish = three.size() / 3;
  const std::size_t taken = core_.feed(three, 4);  // the first publish and the method frame of the second
  const Bytes method_frame = amqp::encode_frame(amqp::FrameType::method, 1,
                                                amqp::encode_method(
                                                    Method::of(m::kBasicPublish).set("routing_key", std::string("q"))));
  EXPECT_EQ(taken, one_publish + method_frame.size());
  EXPECT_EQ(core_.feed(ByteView(three).subspan(taken)), three.size() - taken);  // no bound: the rest
  send(1, Method::of(m::kQueueDeclare).set("queue", std::string("q")).set("passive", true));
  EXPECT_EQ(only_method().number("message_count"), 3u);
}

TEST_F(AmqpConnectionCoreTest, AnExclusiveQueueBelongsToTheConnectionNotTheChannel) {
  // RabbitMQ ties exclusivity to the connection: usable from its other channels, kept when the declaring channel
  // closes, deleted when the connection ends.
  open_connection();
  open_channel(1);
  open_channel(2);
  send(1, Method::of(m::kQueueDeclare).set("queue", std::string("mine")).set("exclusive", true));
  ASSERT_EQ(only_method().id(), m::kQueueDeclareOk);
  send(1, Method::of(m::kChannelClose));
  ASSERT_EQ(only_method().id(), m::kChannelCloseOk);
  send(2, Method::of(m::kQueueDeclare).set("queue", std::string("mine")).set("passive", true));
  ASSERT_EQ(only_method().id(), m::kQueueDeclareOk);
  const auto& queues = core_model_.vhost("/")->queues();
  EXPECT_TRUE(queues.contains("mine"));
  core_.on_connection_lost();
  EXPECT_FALSE(queues.contains("mine"));
}

TEST_F(AmqpConnectionCoreTest, ChannelErrorClosesOnlyThatChannel) {
  open_connection();
  open_channel(1);
  open_channel(2);
  send(1, Method::of(m::kQueueDeclare).set("queue", std::string("missing")).set("passive", true));
  Method close = only_method();
  ASSERT_EQ(close.id(), m::kChannelClose);
  EXPECT_EQ(close.number("reply_code"), 404u);
  EXPECT_EQ(close.number("class_id"), 50u);
  EXPECT_EQ(close.number("method_id"), 10u);
  EXPECT_EQ(close.text("reply_text").rfind("NOT_FOUND - ", 0), 0u) << close.text("reply_text");
  send(1, Method::of(m::kQueueDeclare).set("queue", std::string("ignored")));  // discarded until close-ok
  EXPECT_TRUE(methods().empty());
  send(1, Method::of(m::kChannelCloseOk));
  declare(2, "still-works");
  open_channel(1);  // the number is free again
  EXPECT_FALSE(wire_.closing);
}

TEST_F(AmqpConnectionCoreTest, PrefetchLimitsUnacknowledgedDeliveries) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  for (const char* body : {"a", "b", "c"}) publish(1, "q", body);
  send(1, Method::of(m::kBasicQos).set("prefetch_count", std::uint64_t{1}));
  ASSERT_EQ(only_method().id(), m::kBasicQosOk);
  send(1, Method::of(m::kBasicConsume).set("queue", std::string("q")).set("consumer_tag", std::string("c1")));
  auto first = methods();
  ASSERT_EQ(first.size(), 2u);  // consume-ok, then one deliver only
  EXPECT_EQ(first[0].id(), m::kBasicConsumeOk);
  EXPECT_EQ(first[1].id(), m::kBasicDeliver);
  EXPECT_EQ(first[1].text("consumer_tag"), "c1");
  send(1, Method::of(m::kBasicAck).set("delivery_tag", first[1].number("delivery_tag")));
  Method second = only_method();
  EXPECT_EQ(second.id(), m::kBasicDeliver);
  EXPECT_EQ(second.number("delivery_tag"), 2u);
}

// RabbitMQ 3.10's basic.qos global=false lifts the channel's global prefetch (rabbit_limiter:unlimit_prefetch): a
// consumer that existed before it, with no limit of its own, is held by nothing any more.
TEST_F(AmqpConnectionCoreTest, APerConsumerQosLiftsTheGlobalPrefetch) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  consume(1, "q", "c1");
  qos(1, 1, true);
  publish(1, "q", "held by the global prefetch after this one");
  ASSERT_EQ(only_method().id(), m::kBasicDeliver);
  qos(1, 1, false);
  publish(1, "q", "delivered");
  EXPECT_EQ(only_method().id(), m::kBasicDeliver);
}

// What each consumer got, in order, from the frames sent since the last read: "tag:body" each.
std::vector<std::string> deliveries_in(const std::vector<amqp::Frame>& frames) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 2 < frames.size(); ++i) {
    auto method = amqp::decode_method(frames[i].payload);
    if (!method.ok() || method->id() != m::kBasicDeliver) continue;
    const Bytes& body = frames[i + 2].payload;
    out.push_back(method->text("consumer_tag") + ":" + std::string(body.begin(), body.end()));
  }
  return out;
}

// A nack of several deliveries requeues them in one batch per consumer, in the order of the consumer tags, each
// dispatched before the next (RabbitMQ's channel sends the queue one requeue per {queue, consumer tag}).
TEST_F(AmqpConnectionCoreTest, ANackOfSeveralRequeuesOneBatchPerConsumerInTagOrder) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  consume(1, "q", "c12");
  consume(1, "q", "c13");
  for (const char* body : {"m19", "m26", "m27"}) publish(1, "q", body);
  ASSERT_EQ(deliveries_in(frames()), (std::vector<std::string>{"c12:m19", "c13:m26", "c12:m27"}));
  send(1, Method::of(m::kBasicNack).set("delivery_tag", std::uint64_t{0}).set("multiple", true).set("requeue", true));
  // c12's two first: the line is c13, c12 after c12 took m27; then c13's m26, c13 being first in line again.
  EXPECT_EQ(deliveries_in(frames()), (std::vector<std::string>{"c13:m19", "c12:m27", "c13:m26"}));
}

// A deleted queue cancels its consumers in the order of their tags, as RabbitMQ's channel does.
TEST_F(AmqpConnectionCoreTest, ADeletedQueueCancelsItsConsumersInTagOrder) {
  open_connection(amqp::FieldTable{{"consumer_cancel_notify", true}});
  open_channel(1);
  declare(1, "q");
  consume(1, "q", "c6");
  consume(1, "q", "c25");
  send(1, Method::of(m::kQueueDelete).set("queue", std::string("q")));
  auto sent = methods();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].text("consumer_tag"), "c25");
  EXPECT_EQ(sent[1].text("consumer_tag"), "c6");
  EXPECT_EQ(sent[2].id(), m::kQueueDeleteOk);
}

// A global prefetch that is used up holds a no-ack consumer of the channel too (rabbit_limiter's can_send), until
// an ack makes room; its own deliveries do not count towards the limit.
TEST_F(AmqpConnectionCoreTest, AUsedUpGlobalPrefetchHoldsNoAckConsumersToo) {
  open_connection();
  open_channel(1);
  declare(1, "acked");
  declare(1, "no-ack");
  consume(1, "acked", "c1");
  qos(1, 1, true);
  publish(1, "acked", "fills the channel's prefetch");
  Method first = only_method();
  ASSERT_EQ(first.id(), m::kBasicDeliver);
  consume(1, "no-ack", "c2", true);
  publish(1, "no-ack", "waits for the ack");
  EXPECT_TRUE(methods().empty());
  send(1, Method::of(m::kBasicAck).set("delivery_tag", first.number("delivery_tag")));
  Method second = only_method();
  EXPECT_EQ(second.id(), m::kBasicDeliver);
  EXPECT_EQ(second.text("consumer_tag"), "c2");
}

TEST_F(AmqpConnectionCoreTest, UnknownDeliveryTagIsChannelClose406) {
  open_connection();
  open_channel(1);
  send(1, Method::of(m::kBasicAck).set("delivery_tag", std::uint64_t{42}));
  Method close = only_method();
  EXPECT_EQ(close.number("reply_code"), 406u);
  EXPECT_EQ(close.number("class_id"), 60u);
  EXPECT_EQ(close.number("method_id"), 80u);
}

TEST_F(AmqpConnectionCoreTest, BadFrameEndIsConnectionClose501) {
  open_connection();
  Bytes frame = amqp::encode_frame(amqp::FrameType::method, 1, amqp::encode_method(Method::of(m::kChannelOpen)));
  frame.back() = 0;
  core_.feed(frame);
  Method close = only_method();
  EXPECT_EQ(close.id(), m::kConnectionClose);
  EXPECT_EQ(close.number("reply_code"), 501u);
  EXPECT_TRUE(wire_.closing);
}

TEST_F(AmqpConnectionCoreTest, ContentWithoutPublishIsUnexpectedFrame) {
  open_connection();
  open_channel(1);
  core_.feed(amqp::encode_frame(amqp::FrameType::body, 1, as_bytes("x")));
  EXPECT_EQ(only_method().number("reply_code"), 505u);
}

TEST_F(AmqpConnectionCoreTest, MandatoryUnroutableIsReturnedBeforeItsAck) {
  open_connection();
  open_channel(1);
  send(1, Method::of(m::kConfirmSelect));
  frames();
  core_.feed(amqp::encode_content(
      1, Method::of(m::kBasicPublish).set("routing_key", std::string("nowhere")).set("mandatory", true), {},
      as_bytes("x"), 0));
  core_.flush();
  auto sent = methods();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].id(), m::kBasicReturn);
  EXPECT_EQ(sent[0].number("reply_code"), 312u);
  EXPECT_EQ(sent[0].text("reply_text"), "NO_ROUTE");
  EXPECT_EQ(sent[1].id(), m::kBasicAck);
}

TEST_F(AmqpConnectionCoreTest, AReturnedMessageHasNoBccHeader) {
  open_connection();
  open_channel(1);
  amqp::ContentHeader header;
  header.set("headers",
             amqp::FieldTable{{"BCC", amqp::FieldArray{std::string("nowhere-either")}}, {"kept", std::int32_t{1}}});
  core_.feed(amqp::encode_content(
      1, Method::of(m::kBasicPublish).set("routing_key", std::string("nowhere")).set("mandatory", true), header,
      as_bytes("x"), 0));
  core_.flush();
  auto sent = frames();
  ASSERT_EQ(sent.size(), 3u);  // return, header, body
  EXPECT_EQ(amqp::decode_method(sent[0].payload)->id(), m::kBasicReturn);
  auto props = amqp::decode_content_header(sent[1].payload);
  ASSERT_TRUE(props.ok());
  // As RabbitMQ's: BCC routes, and neither a consumer nor the publisher gets it back.
  EXPECT_EQ(std::get<amqp::FieldTable>(*props->get("headers")), (amqp::FieldTable{{"kept", std::int32_t{1}}}));
}

TEST_F(AmqpConnectionCoreTest, TransactionHoldsPublishesAndAcksUntilCommit) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  publish(1, "q", "before");
  send(1, Method::of(m::kTxSelect));
  ASSERT_EQ(only_method().id(), m::kTxSelectOk);
  publish(1, "q", "held");
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));
  auto got = methods();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].id(), m::kBasicGetOk);
  EXPECT_EQ(got[0].number("message_count"), 0u);  // "held" is not in the queue yet
  send(1, Method::of(m::kBasicAck).set("delivery_tag", got[0].number("delivery_tag")));
  send(1, Method::of(m::kTxRollback));
  ASSERT_EQ(only_method().id(), m::kTxRollbackOk);  // drops "held" and the ack
  publish(1, "q", "committed");
  send(1, Method::of(m::kBasicAck).set("delivery_tag", got[0].number("delivery_tag")));
  send(1, Method::of(m::kTxCommit));
  core_.flush();  // the commit's publish is confirmed at the end of the read
  ASSERT_EQ(only_method().id(), m::kTxCommitOk);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")).set("no_ack", true));
  auto after = frames();
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[2].payload, Bytes({'c', 'o', 'm', 'm', 'i', 't', 't', 'e', 'd'}));  // "before" was acked
  send(1, Method::of(m::kConfirmSelect));
  EXPECT_EQ(only_method().number("reply_code"), 406u);  // "cannot switch from tx to confirm mode"
}

TEST_F(AmqpConnectionCoreTest, ATransactionRoutesAPublishWhenItArrivesAndEnqueuesItAtCommit) {
  open_connection();
  open_channel(1);
  declare(1, "late");
  declare(1, "early");
  send(1, Method::of(m::kExchangeDeclare).set("exchange", std::string("x")).set("type", std::string("fanout")));
  ASSERT_EQ(only_method().id(), m::kExchangeDeclareOk);
  auto bind = [&](const std::string& queue) {
    send(1, Method::of(m::kQueueBind).set("queue", queue).set("exchange", std::string("x")));
    ASSERT_EQ(only_method().id(), m::kQueueBindOk);
  };
  bind("early");
  send(1, Method::of(m::kTxSelect));
  ASSERT_EQ(only_method().id(), m::kTxSelectOk);
  core_.feed(
      amqp::encode_content(1, Method::of(m::kBasicPublish).set("exchange", std::string("x")), {}, as_bytes("m"), 0));
  bind("late");  // after the publish: RabbitMQ routed it already, so this binding does not count
  send(1, Method::of(m::kTxCommit));
  core_.flush();
  ASSERT_EQ(only_method().id(), m::kTxCommitOk);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("late")).set("no_ack", true));
  EXPECT_EQ(only_method().id(), m::kBasicGetEmpty);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("early")).set("no_ack", true));
  EXPECT_EQ(methods().at(0).id(), m::kBasicGetOk);
}

TEST_F(AmqpConnectionCoreTest, ATransactionsPublishWhoseQueueWentBeforeCommitIsReturned) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  send(1, Method::of(m::kTxSelect));
  ASSERT_EQ(only_method().id(), m::kTxSelectOk);
  core_.feed(
      amqp::encode_content(1, Method::of(m::kBasicPublish).set("routing_key", std::string("q")).set("mandatory", true),
                           {}, as_bytes("m"), 0));
  send(1, Method::of(m::kQueueDelete).set("queue", std::string("q")));
  ASSERT_EQ(only_method().id(), m::kQueueDeleteOk);
  send(1, Method::of(m::kTxCommit));
  core_.flush();
  auto sent = methods();
  ASSERT_EQ(sent.size(), 2u);  // as RabbitMQ's commit: the queues routed to are looked up again, and none is left
  EXPECT_EQ(sent[0].id(), m::kBasicReturn);
  EXPECT_EQ(sent[1].id(), m::kTxCommitOk);
}

TEST_F(AmqpConnectionCoreTest, APublishWrongTwiceIsRefusedForItsExchangeFirst) {
  open_connection();
  for (const auto& [channel, property, value] :
       {std::tuple<std::uint16_t, const char*, const char*>{1, "expiration", "soon"}, {2, "user_id", "someone"}}) {
    open_channel(channel);
    amqp::ContentHeader header;
    header.set(property, std::string(value));
    core_.feed(amqp::encode_content(channel, Method::of(m::kBasicPublish).set("exchange", std::string("missing")),
                                    header, as_bytes("m"), 0));
    core_.flush();
    // RabbitMQ checks the exchange before the properties (rabbit_channel, basic.publish): 404, not 406.
    Method close = only_method();
    ASSERT_EQ(close.id(), m::kChannelClose) << property;
    EXPECT_EQ(close.number("reply_code"), 404u) << property;
  }
}

TEST_F(AmqpConnectionCoreTest, AnEmptyHeadersTableIsDeliveredAsSent) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  for (const amqp::FieldTable& sent :
       {amqp::FieldTable{}, amqp::FieldTable{{"BCC", amqp::FieldArray{std::string("nowhere")}}}}) {
    amqp::ContentHeader header;
    header.set("headers", sent);
    publish(1, "q", "m", header);
    send(1, Method::of(m::kBasicGet).set("queue", std::string("q")).set("no_ack", true));
    auto got = frames();
    ASSERT_EQ(got.size(), 3u);  // get-ok, header, body
    auto props = amqp::decode_content_header(got[1].payload);
    ASSERT_TRUE(props.ok());
    // As RabbitMQ: the table comes back empty (BCC taken out), not left out.
    ASSERT_NE(props->get("headers"), nullptr);
    EXPECT_TRUE(std::get<amqp::FieldTable>(*props->get("headers")).empty());
  }
}

TEST_F(AmqpConnectionCoreTest, ACommitWhosePublishAFullRejectPublishQueueRefusesIsPartialTxCompletion) {
  open_connection();
  open_channel(1);
  send(1, Method::of(m::kQueueDeclare)
              .set("queue", std::string("full"))
              .set("arguments", amqp::FieldTable{{"x-max-length", amqp::FieldValue(std::int64_t{1})},
                                                 {"x-overflow", amqp::FieldValue(std::string("reject-publish"))}}));
  ASSERT_EQ(only_method().id(), m::kQueueDeclareOk);
  publish(1, "full", "first");
  send(1, Method::of(m::kTxSelect));
  ASSERT_EQ(only_method().id(), m::kTxSelectOk);
  publish(1, "full", "refused");
  send(1, Method::of(m::kTxCommit));
  core_.flush();
  // As RabbitMQ 3.10: the commit is answered, never left waiting, and with the channel's close.
  Method close = only_method();
  ASSERT_EQ(close.id(), m::kChannelClose);
  EXPECT_EQ(close.number("reply_code"), 406u);
  EXPECT_EQ(close.text("reply_text"), "PRECONDITION_FAILED - partial tx completion");
}

TEST_F(AmqpConnectionCoreTest, RecoverInATransactionRequeuesAtOnce) {
  open_connection();
  open_channel(1);
  declare(1, "q");
  publish(1, "q", "m");
  send(1, Method::of(m::kTxSelect));
  ASSERT_EQ(only_method().id(), m::kTxSelectOk);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));
  ASSERT_EQ(methods().at(0).id(), m::kBasicGetOk);
  send(1, Method::of(m::kBasicRecover).set("requeue", true));
  ASSERT_EQ(only_method().id(), m::kBasicRecoverOk);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));  // back in the queue without tx.commit
  auto again = methods();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id(), m::kBasicGetOk);
  EXPECT_TRUE(again[0].flag("redelivered"));
  // A delivery the transaction already settled stays out of the recover, as in RabbitMQ.
  send(1, Method::of(m::kBasicReject).set("delivery_tag", again[0].number("delivery_tag")).set("requeue", false));
  send(1, Method::of(m::kBasicRecover).set("requeue", true));
  ASSERT_EQ(only_method().id(), m::kBasicRecoverOk);
  send(1, Method::of(m::kBasicGet).set("queue", std::string("q")));
  EXPECT_EQ(only_method().id(), m::kBasicGetEmpty);
}

TEST_F(AmqpConnectionCoreTest, AlarmIsConnectionBlockedForPublishersThatTakeIt) {
  open_connection({{"connection.blocked", true}});
  open_channel(1);
  core_.tell_alarm(true);
  EXPECT_TRUE(methods().empty());  // not a publisher (yet): RabbitMQ blocks publishing connections only
  publish(1, "", "x");
  core_.tell_alarm(true);
  Method blocked = only_method();
  EXPECT_EQ(blocked.id(), m::kConnectionBlocked);
  core_.tell_alarm(true);
  EXPECT_TRUE(methods().empty());  // told once
  core_.tell_alarm(false);
  EXPECT_EQ(only_method().id(), m::kConnectionUnblocked);
}

TEST_F(AmqpConnectionCoreTest, CredentialsOfBothMechanisms) {
  auto plain = parse_credentials("PLAIN", std::string("authz\0u\0p", 9));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->user, "u");
  EXPECT_EQ(plain->password, "p");
  // AMQPLAIN as pika sends it: LOGIN S "guest", PASSWORD S "secret", without the table's size.
  constexpr char kAmqplain[] = "\x05LOGINS\x00\x00\x00\x05guest\x08PASSWORDS\x00\x00\x00\x06secret";
  const std::string amqplain(kAmqplain, sizeof kAmqplain - 1);
  auto table = parse_credentials("AMQPLAIN", amqplain);
  ASSERT_TRUE(table.ok()) << table.error().msg;
  EXPECT_EQ(table->user, "guest");
  EXPECT_EQ(table->password, "secret");
  EXPECT_EQ(parse_credentials("EXTERNAL", "").error().code, 503);
  EXPECT_EQ(parse_credentials("PLAIN", "nonul").error().code, 403);
}

}  // namespace
}  // namespace firemq
