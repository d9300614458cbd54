#!/usr/bin/python3
"""The AMQP 0-9-1 listener with real clients: pika (Debian's python3-pika) and amqp-tools, against the broker
binary on free ports. Covers the handshake and login, declares with x- arguments, publishing with confirms (and a mandatory
return), consuming with prefetch, ack, nack, get, channel and connection errors, and the spec's interop table
in both directions with a FireMQ client written here (python3-msgpack): a message published over one protocol
is consumed over the other.

Usage: amqp_pika_test.py BROKER_EXECUTABLE [--broker-arg ARG]... [UNITTEST ARGS]
       amqp_pika_test.py AMQP_URL RabbitMqChannelSemantics RabbitMqClientItems   (a broker that runs already,
                                                     RabbitMQ too: the classes that need no FireMQ listener)
"""
import datetime, decimal, json, os, signal, socket, struct, subprocess, sys, tempfile, time, unittest, urllib.parse

import msgpack
import pika

BROKER = None
BROKER_ARGS = []  # --broker-arg: testing flags (--amqp-fault=NAME) for every broker started


class Broker:
    """firemq-broker with the fire and amqp listeners on free ports, the others off."""

    def __init__(self, directory, amqp_port="0", extra=()):  # amqp_port: a number, 0 or off
        self.directory = directory
        definitions = os.path.join(directory, "definitions.json")
        with open(definitions, "w") as f:
            json.dump({"users": [{"name": "guest", "password": "guest"}], "vhosts": [{"name": "/"}],
                       "permissions": [{"user": "guest", "vhost": "/"}]}, f)
        self.args = [BROKER, "--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "off",
                     "--wss-port", "off", "--definitions", definitions, "--data-dir", os.path.join(directory, "data")]
        self.args += ["--amqp-port", amqp_port]
        self.args += BROKER_ARGS + list(extra)
        self.start()

    def start(self):
        ports = os.path.join(self.directory, "ports.json")
        if os.path.exists(ports):
            os.remove(ports)
        self.log = open(os.path.join(self.directory, "broker.log"), "ab")
        self.process = subprocess.Popen(self.args + ["--port-file", ports], stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while not os.path.exists(ports):
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the broker did not start: " + open(self.log.name).read()[-2000:])
            time.sleep(0.02)
        self.ports = json.load(open(ports))

    def restart(self):
        self.stop()
        self.args = [a if a != "0" or self.args[i - 1] not in ("--port", "--amqp-port") else str(
            self.ports["fire" if self.args[i - 1] == "--port" else "amqp"]) for i, a in enumerate(self.args)]
        self.start()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)
        self.log.close()

    def wait_for_log(self, text, seconds=5):
        """The broker's log once it holds `text`, or as it is after `seconds`."""
        deadline = time.time() + seconds
        while text not in open(self.log.name, "rb").read() and time.time() < deadline:
            time.sleep(0.05)
        return open(self.log.name, "rb").read()

    def amqp(self, password="guest"):
        credentials = pika.PlainCredentials("guest", password)
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.ports["amqp"], "/", credentials, connection_attempts=1, socket_timeout=5))


class RemoteBroker:
    """A broker that runs already, given by its AMQP URL: for the tests that use pika alone."""

    def __init__(self, url):
        self.url = urllib.parse.urlparse(url)
        self.ports = {"amqp": self.url.port or 5672}

    def stop(self):
        pass

    def amqp(self, password=None):
        credentials = pika.PlainCredentials(self.url.username, self.url.password if password is None else password)
        return pika.BlockingConnection(pika.ConnectionParameters(
            self.url.hostname, self.ports["amqp"], "/", credentials, connection_attempts=1, socket_timeout=5))


class FireClient:
    """A FireMQ client over TCP: FMQ1, then len u32 | op u8 | hlen u32 | header | payload."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"FMQ1")
        self.send(0x01, {"ver": 1, "auth": {"mech": "plain", "user": "guest", "pass": "guest"}})
        op, header, _ = self.receive()
        assert op == 0x02, (op, header)

    def send(self, op, header, payload=b""):
        h = msgpack.packb(header, use_bin_type=True)
        self.sock.sendall(struct.pack(">IBI", 5 + len(h) + len(payload), op, len(h)) + h + payload)

    def read_exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def receive(self):
        length, op, hlen = struct.unpack(">IBI", self.read_exactly(9))
        rest = self.read_exactly(length - 5)
        header = msgpack.unpackb(rest[:hlen], raw=False, strict_map_key=False) if hlen else {}
        return op, header, rest[hlen:]

    def request(self, op, header, payload=b""):
        self.send(op, header, payload)
        return self.receive()

    def close(self):
        self.sock.close()


class WithBroker(unittest.TestCase):
    """One broker for the test class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.broker = RemoteBroker(BROKER) if BROKER.startswith("amqp://") else Broker(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.tmp.cleanup()


def pump(connection, seconds=0.4):
    """Lets pika dispatch what arrives for the whole period (process_data_events returns at the first event)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        connection.process_data_events(time_limit=max(0.0, deadline - time.time()))


def amqp_frame(kind, channel, payload):
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def read_frames(sock, count):
    """`count` frames as (type, channel, payload), skipping heartbeats."""
    data, frames = b"", []
    while len(frames) < count:
        while len(data) < 7 or len(data) < 8 + struct.unpack(">I", data[3:7])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed after %d frames" % len(frames))
            data += chunk
        kind, channel, size = struct.unpack(">BHI", data[:7])
        if kind != 8:
            frames.append((kind, channel, data[7:7 + size]))
        data = data[8 + size:]
    return frames


def raw_amqp_open(port, rcvbuf=None):
    """A hand-made AMQP client up to connection.open: the socket and the broker's answer to open (open-ok, or a
    connection.close) as (class, method, payload). `rcvbuf`: the socket's SO_RCVBUF, set before it connects."""
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    read_frames(sock, 1)  # start
    sock.sendall(amqp_frame(1, 0, struct.pack(">HHI", 10, 11, 0) + b"\x05PLAIN" + struct.pack(">I", 12) +
                            b"\x00guest\x00guest" + b"\x05en_US"))
    read_frames(sock, 1)  # tune
    sock.sendall(amqp_frame(1, 0, struct.pack(">HHHIH", 10, 31, 10, 131072, 0)))
    sock.sendall(amqp_frame(1, 0, struct.pack(">HH", 10, 40) + b"\x01/\x00\x00"))
    _, _, answer = read_frames(sock, 1)[0]
    class_id, method_id = struct.unpack(">HH", answer[:4])
    return sock, (class_id, method_id, answer[4:])


def raw_amqp_session(port):
    """A hand-made AMQP client up to an open channel 1: to see the broker's bytes as they are."""
    sock, answer = raw_amqp_open(port)
    assert answer[:2] == (10, 41), answer  # open-ok
    sock.sendall(amqp_frame(1, 1, struct.pack(">HH", 20, 10) + b"\x00"))
    read_frames(sock, 1)  # channel.open-ok
    return sock


class PikaChannel(WithBroker):
    """A pika connection and channel per test, and a queue name of the test's own."""

    def setUp(self):
        self.connection = self.broker.amqp()
        self.channel = self.connection.channel()
        self.queue = "q-" + self.id().split(".")[-1]

    def tearDown(self):
        if self.connection.is_open:
            self.connection.close()


class AmqpWithPika(PikaChannel):
    def test_server_properties_name_rabbitmqs_capabilities(self):
        caps = self.connection._impl.server_capabilities
        for cap in ("publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
                    "connection.blocked", "authentication_failure_close", "per_consumer_qos"):
            self.assertTrue(caps.get(cap), cap)

    def test_wrong_password_is_refused(self):
        with self.assertRaises((pika.exceptions.ProbableAuthenticationError,
                                pika.exceptions.AuthenticationError)):
            self.broker.amqp(password="wrong")

    def test_a_refused_login_is_logged_without_the_password(self):
        # As FireMQ's refused hello: the peer's address and the user name, never the password.
        with self.assertRaises((pika.exceptions.ProbableAuthenticationError,
                                pika.exceptions.AuthenticationError)):
            self.broker.amqp(password="not-the-password-42")
        log = self.broker.wait_for_log(b"AMQP connection.start-ok refused (403) from 127.0.0.1, user 'guest': ")
        self.assertIn(b"AMQP connection.start-ok refused (403) from 127.0.0.1, user 'guest': ", log)
        self.assertNotIn(b"not-the-password-42", log)

    def test_a_login_refused_at_open_is_logged(self):
        with self.assertRaises(pika.exceptions.AMQPConnectionError):
            pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", self.broker.ports["amqp"], "no-such-vhost", pika.PlainCredentials("guest", "guest"),
                connection_attempts=1, socket_timeout=5))
        log = self.broker.wait_for_log(b"AMQP connection.open refused (403) from 127.0.0.1, user 'guest': ")
        self.assertIn(b"AMQP connection.open refused (403) from 127.0.0.1, user 'guest': ", log)

    def test_publish_with_confirms_then_get(self):
        self.channel.queue_declare(self.queue, arguments={"x-max-length": 10, "x-message-ttl": 60000})
        self.channel.confirm_delivery()
        self.channel.basic_publish("", self.queue, b"hello", pika.BasicProperties(content_type="text/plain"),
                                   mandatory=True)
        method, properties, body = self.channel.basic_get(self.queue)
        self.assertEqual(body, b"hello")
        self.assertEqual(properties.content_type, "text/plain")
        self.assertEqual(method.message_count, 0)
        self.channel.basic_ack(method.delivery_tag)
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))

    def test_mandatory_unroutable_is_returned(self):
        self.channel.confirm_delivery()
        with self.assertRaises(pika.exceptions.UnroutableError):
            self.channel.basic_publish("", "no-such-queue", b"x", mandatory=True)

    def test_max_length_drops_the_head(self):
        self.channel.queue_declare(self.queue, arguments={"x-max-length": 2})
        for body in (b"1", b"2", b"3"):
            self.channel.basic_publish("", self.queue, body)
        declared = self.channel.queue_declare(self.queue, passive=True)
        self.assertEqual(declared.method.message_count, 2)
        self.assertEqual(self.channel.basic_get(self.queue, auto_ack=True)[2], b"2")

    def test_inequivalent_redeclare_closes_the_channel_with_406(self):
        self.channel.queue_declare(self.queue, arguments={"x-max-length": 10})
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            self.channel.queue_declare(self.queue, arguments={"x-max-length": 11})
        self.assertEqual(raised.exception.reply_code, 406)
        # The connection and its other channels go on.
        self.assertEqual(self.connection.channel().queue_declare(self.queue, passive=True).method.queue, self.queue)

    def test_passive_declare_of_a_missing_queue_is_404(self):
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            self.channel.queue_declare("missing-" + self.queue, passive=True)
        self.assertEqual(raised.exception.reply_code, 404)

    def test_consume_with_prefetch_and_ack(self):
        self.channel.queue_declare(self.queue)
        for i in range(5):
            self.channel.basic_publish("", self.queue, str(i).encode())
        self.channel.basic_qos(prefetch_count=2)
        received = []
        self.channel.basic_consume(self.queue, lambda ch, method, props, body: received.append((method, body)))
        pump(self.connection)
        self.assertEqual([b for _, b in received], [b"0", b"1"])  # no more than the prefetch
        self.channel.basic_ack(received[0][0].delivery_tag)
        pump(self.connection)
        self.assertEqual([b for _, b in received], [b"0", b"1", b"2"])
        self.channel.basic_ack(received[2][0].delivery_tag, multiple=True)
        pump(self.connection)
        self.assertEqual(len(received), 5)

    def test_nack_with_requeue_redelivers(self):
        self.channel.queue_declare(self.queue)
        self.channel.basic_publish("", self.queue, b"again")
        method, _, _ = self.channel.basic_get(self.queue)
        self.assertFalse(method.redelivered)
        self.channel.basic_nack(method.delivery_tag, requeue=True)
        method, _, body = self.channel.basic_get(self.queue)
        self.assertTrue(method.redelivered)
        self.assertEqual(body, b"again")
        self.channel.basic_reject(method.delivery_tag, requeue=False)
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))

    def test_an_exclusive_queue_belongs_to_the_connection_not_the_channel(self):
        # As RabbitMQ: any channel of the declaring connection may use it, it outlives the declaring channel, other
        # connections get 405 RESOURCE_LOCKED, and it is deleted when the connection closes.
        self.channel.queue_declare(self.queue, exclusive=True)
        second = self.connection.channel()
        second.basic_publish("", self.queue, b"from channel 2")
        self.assertEqual(second.basic_get(self.queue, auto_ack=True)[2], b"from channel 2")
        self.channel.close()
        self.assertEqual(second.queue_declare(self.queue, passive=True).method.message_count, 0)
        other = self.broker.amqp()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            other.channel().queue_declare(self.queue, passive=True)
        self.assertEqual(raised.exception.reply_code, 405)
        self.connection.close()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            other.channel().queue_declare(self.queue, passive=True)
        self.assertEqual(raised.exception.reply_code, 404)
        other.close()

    def test_topic_exchange_and_exchange_binding(self):
        self.channel.exchange_declare("x-" + self.queue, "topic")
        self.channel.exchange_declare("x2-" + self.queue, "fanout")
        self.channel.exchange_bind("x2-" + self.queue, "x-" + self.queue, "a.*")
        self.channel.queue_declare(self.queue)
        self.channel.queue_bind(self.queue, "x2-" + self.queue)
        self.channel.basic_publish("x-" + self.queue, "a.b", b"routed")
        self.channel.basic_publish("x-" + self.queue, "b.b", b"dropped")
        self.assertEqual(self.channel.basic_get(self.queue, auto_ack=True)[2], b"routed")
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))

    def test_transaction_publishes_at_commit_only(self):
        self.channel.queue_declare(self.queue)
        self.channel.tx_select()
        self.channel.basic_publish("", self.queue, b"rolled back")
        self.channel.tx_rollback()
        self.channel.basic_publish("", self.queue, b"committed")
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))
        self.channel.tx_commit()
        self.assertEqual(self.channel.basic_get(self.queue, auto_ack=True)[2], b"committed")
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))

    def test_queue_delete_cancels_consumers(self):
        self.channel.queue_declare(self.queue)
        cancelled = []
        self.channel.add_on_cancel_callback(lambda frame: cancelled.append(frame))
        self.channel.basic_consume(self.queue, lambda *a: None)
        other = self.connection.channel()
        other.queue_delete(self.queue)
        pump(self.connection)
        self.assertEqual(len(cancelled), 1)

    def test_amqp_to_firemq_keeps_the_interop_table(self):
        self.channel.queue_declare(self.queue)
        # pika cannot write a float (its encode_value has no case for one): `d` is covered by amqp_interop_test.
        headers = {"none": None, "flag": True, "int": -7, "big": 2**40, "str": "s", "bytes": b"\x00\x01",
                   "list": [1, "a"], "map": {"k": "v"}, "decimal": decimal.Decimal("3.14"),
                   "time": datetime.datetime(2020, 9, 13, 12, 26, 40)}
        self.channel.basic_publish("", self.queue, b"body", pika.BasicProperties(
            content_type="application/json", delivery_mode=2, expiration="60000", priority=3,
            timestamp=1600000000, message_id="m1", headers=headers))
        fire = FireClient(self.broker.ports["fire"])
        op, get_ok, payload = fire.request(0x37, {"rid": 1, "queue": self.queue, "no_ack": True})
        fire.close()
        self.assertEqual(op, 0x38, get_ok)
        self.assertEqual(payload, b"body")
        props = get_ok["props"]
        self.assertEqual(props["expiration"], 60000)  # decimal string -> uint ms
        self.assertEqual(props["content_type"], "application/json")
        self.assertEqual((props["priority"], props["timestamp"], props["message_id"]), (3, 1600000000, "m1"))
        h = get_ok["headers"]
        self.assertEqual((h["none"], h["flag"], h["int"], h["big"], h["str"]), (None, True, -7, 2**40, "s"))
        self.assertEqual((h["bytes"], h["list"], h["map"]), (b"\x00\x01", [1, "a"], {"k": "v"}))
        self.assertAlmostEqual(h["decimal"], 3.14)  # D -> float
        self.assertEqual(h["time"], 1600000000)     # T -> uint

    def test_firemq_to_amqp_keeps_the_interop_table(self):
        self.channel.queue_declare(self.queue)
        fire = FireClient(self.broker.ports["fire"])
        # pika 1.2 reads `l` as unsigned and truncates `d` to an integer (its data.py decode_value), so negative
        # ints and floats are checked by amqp_interop_test and by the raw bytes below, not through pika's values.
        headers = {"none": None, "flag": True, "uint": 7, "str": "s", "bin": b"\x00\x01", "array": [1, "a"],
                   "map": {"k": "v"}}
        fire.send(0x20, {"seq": 1, "key": self.queue, "persistent": True, "headers": headers,
                         "props": {"expiration": 60000, "content_type": "text/plain", "priority": 4,
                                   "timestamp": 1600000000, "correlation_id": "c1"}}, b"from fire")
        op, confirm, _ = fire.receive()
        fire.close()
        self.assertEqual((op, confirm), (0x21, {"upto": 1}))
        method, properties, body = self.channel.basic_get(self.queue, auto_ack=True)
        self.assertEqual(body, b"from fire")
        self.assertEqual(properties.expiration, "60000")  # uint ms -> decimal string
        self.assertEqual(properties.delivery_mode, 2)     # persistent: true -> delivery-mode 2
        self.assertEqual((properties.content_type, properties.priority, properties.timestamp,
                          properties.correlation_id), ("text/plain", 4, 1600000000, "c1"))
        self.assertEqual(properties.headers, headers)

    def test_firemq_ints_and_floats_reach_amqp_as_l_and_d(self):
        self.channel.queue_declare(self.queue)
        fire = FireClient(self.broker.ports["fire"])
        fire.send(0x20, {"key": self.queue, "headers": {"i": -7, "f": 2.5}}, b"x")
        fire.close()
        sock = raw_amqp_session(self.broker.ports["amqp"])
        # basic.get on channel 1, no-ack; the content header frame follows get-ok.
        sock.sendall(amqp_frame(1, 1, struct.pack(">HHH", 60, 70, 0) + bytes([len(self.queue)]) +
                                self.queue.encode() + b"\x01"))
        frames = read_frames(sock, 3)
        sock.close()
        header = frames[1][2]
        table = header[header.index(b"\x01i"):]
        self.assertIn(b"\x01il" + struct.pack(">q", -7), table)
        self.assertIn(b"\x01fd" + struct.pack(">d", 2.5), table)

    def test_consume_over_amqp_what_firemq_publishes(self):
        self.channel.queue_declare(self.queue)
        received = []
        self.channel.basic_consume(self.queue, lambda ch, m, p, body: received.append(body), auto_ack=True)
        fire = FireClient(self.broker.ports["fire"])
        fire.send(0x20, {"key": self.queue}, b"live")
        pump(self.connection)
        fire.close()
        self.assertEqual(received, [b"live"])


class RabbitMqChannelSemantics(PikaChannel):
    """What RabbitMQ's clients rely on beyond the interop table (docs/spec-notes.md, "Channel semantics RabbitMQ's
    clients rely on"), each as pika sees it against RabbitMQ."""

    def channel_close_code(self, call):
        channel = self.connection.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            call(channel)
        self.assertTrue(self.connection.is_open)  # a channel error, not a connection error
        return closed.exception.reply_code

    def test_refusals_are_rabbitmqs_403_channel_errors(self):
        self.assertEqual(self.channel_close_code(lambda ch: ch.exchange_delete("amq.direct")), 403)
        self.assertEqual(self.channel_close_code(lambda ch: ch.exchange_delete("")), 403)
        self.channel.queue_declare(self.queue, exclusive=True, arguments={"x-single-active-consumer": True})
        self.assertEqual(self.channel_close_code(lambda ch: ch.queue_unbind(self.queue, "", self.queue)), 403)
        self.assertEqual(self.channel_close_code(
            lambda ch: ch.basic_consume(self.queue, lambda *a: None, exclusive=True)), 403)
        self.channel.basic_consume(self.queue, lambda *a: None)
        self.assertEqual(self.channel_close_code(
            lambda ch: ch.basic_consume(self.queue, lambda *a: None, exclusive=True)), 403)

    def test_an_empty_queue_name_is_the_last_declared_queue(self):
        named = self.channel.queue_declare("", exclusive=True).method.queue
        self.channel.basic_publish("", named, b"to the last declared")
        method, _, body = self.channel.basic_get("", auto_ack=True)
        self.assertEqual(body, b"to the last declared")
        self.assertEqual(self.channel.queue_purge("").method.message_count, 0)

    def test_a_global_prefetch_bounds_the_channels_consumers_together(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        delivered = []
        self.channel.basic_consume(self.queue, lambda ch, m, p, b: delivered.append(m.delivery_tag))
        self.channel.basic_qos(prefetch_count=2, global_qos=True)  # after the first consumer: it holds at once
        self.channel.basic_consume(self.queue, lambda ch, m, p, b: delivered.append(m.delivery_tag))
        for i in range(4):
            self.channel.basic_publish("", self.queue, b"m%d" % i)
        pump(self.connection)
        self.assertEqual(len(delivered), 2)
        self.channel.basic_ack(delivered[0])
        pump(self.connection)
        self.assertEqual(len(delivered), 3)

    def test_a_full_reject_publish_queue_drops_a_publish_without_confirms(self):
        self.channel.queue_declare(self.queue, exclusive=True,
                                   arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        self.channel.basic_publish("", self.queue, b"kept")
        self.channel.basic_publish("", self.queue, b"dropped")
        # basic.get, which RabbitMQ too answers after the channel's publishes (its message_count may overtake them)
        self.assertEqual(self.channel.basic_get(self.queue, auto_ack=True)[2], b"kept")
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))
        self.assertTrue(self.connection.is_open)

    def test_update_secret_is_answered_update_secret_ok(self):
        # As RabbitMQ's internal users: nothing expires, so any secret is acknowledged and the connection goes on.
        for secret in (b"guest", b"not-the-password"):
            sock, answer = raw_amqp_open(self.broker.ports["amqp"])
            self.assertEqual(answer[:2], (10, 41))
            sock.sendall(amqp_frame(1, 0, struct.pack(">HHI", 10, 70, len(secret)) + secret + b"\x07refresh"))
            _, channel, payload = read_frames(sock, 1)[0]
            self.assertEqual((channel, struct.unpack(">HH", payload[:4])), (0, (10, 71)), secret)
            sock.sendall(amqp_frame(1, 1, struct.pack(">HH", 20, 10) + b"\x00"))  # a channel still opens
            self.assertEqual(struct.unpack(">HH", read_frames(sock, 1)[0][2][:4]), (20, 11), secret)
            sock.close()

    def test_direct_reply_to_answers_a_request_from_another_connection(self):
        self.channel.queue_declare(self.queue)
        replies = []
        self.channel.basic_consume("amq.rabbitmq.reply-to", lambda ch, m, p, b: replies.append(b), auto_ack=True)
        self.channel.basic_publish("", self.queue, b"ping", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        responder = self.broker.amqp()
        try:
            serving = responder.channel()
            method, properties, body = None, None, None
            deadline = time.time() + 5
            while method is None and time.time() < deadline:
                method, properties, body = serving.basic_get(self.queue, auto_ack=True)
            self.assertTrue(properties.reply_to.startswith("amq.rabbitmq.reply-to."), properties.reply_to)
            serving.basic_publish("", properties.reply_to, b"pong")
        finally:
            responder.close()
        pump(self.connection)
        self.assertEqual(replies, [b"pong"])
        self.channel.queue_delete(self.queue)

    def test_x_death_has_rabbitmqs_types(self):
        dead = self.queue + "-dead"
        self.channel.queue_declare(dead, exclusive=True)
        self.channel.queue_declare(self.queue, exclusive=True, arguments={
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
        self.channel.basic_publish("", self.queue, b"short", pika.BasicProperties(expiration="20"))
        deadline = time.time() + 5
        method = None
        while method is None and time.time() < deadline:
            method, properties, _ = self.channel.basic_get(dead, auto_ack=True)
            time.sleep(0.02)
        death = properties.headers["x-death"][0]
        self.assertEqual(death["original-expiration"], "20")
        self.assertIsInstance(death["time"], datetime.datetime)


# How long a test waits for what the broker owes it. The tests below decide nothing by a quiet period: a verdict
# that something did not happen is read from the broker's state after it would have happened (a queue's ready
# count, basic.get, the order of what comes).
DEADLINE = 10


def wait_for(connection, predicate, what, seconds=DEADLINE):
    """Lets pika dispatch until predicate() holds, or fails after `seconds`."""
    deadline = time.time() + seconds
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s" % (what, seconds))
        connection.process_data_events(time_limit=0.01)


def describe(value):
    """A field value with its Python type (pika picks it by the field's type letter), tables by key."""
    if isinstance(value, dict):
        return "{" + ", ".join("%s: %s" % (k, describe(value[k])) for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return "int(%d)" % value  # pika reads l as its own long
    return "%s(%r)" % (type(value).__name__, value)


class RabbitMqClientItems(PikaChannel):
    """The items of docs/spec-notes.md, "Channel semantics RabbitMQ's clients rely on", and RabbitMQ's extensions,
    that RabbitMqChannelSemantics does not cover, as pika's users meet them (the numbers are the spec-notes
    table's), and the order in which a queue serves its consumers."""

    def publish(self, key, *bodies, exchange="", **properties):
        """Publishes on a confirm-mode channel of its own, each publish waiting for its ack: the messages are queued,
        and handed to every consumer that can take them, when it returns."""
        channel = self.connection.channel()
        channel.confirm_delivery()
        for body in bodies:
            channel.basic_publish(exchange, key, body, pika.BasicProperties(**properties))
        channel.close()

    def ready(self, queue, channel=None):
        return (channel or self.channel).queue_declare(queue, passive=True).method.message_count

    def consume(self, queue, channel=None, **options):
        """A consumer whose deliveries are appended to the list returned, as (method, properties, body)."""
        deliveries = []
        (channel or self.channel).basic_consume(queue, lambda ch, m, p, b: deliveries.append((m, p, b)), **options)
        return deliveries

    def get(self, queue, auto_ack=True):
        method, properties, body = self.channel.basic_get(queue, auto_ack=auto_ack)
        self.assertIsNotNone(method, "basic.get %s: empty" % queue)
        return method, properties, body

    def channel_error(self, call):
        """The code of the channel.close that `call` on a new channel gets; the connection goes on."""
        channel = self.connection.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            call(channel)
        self.assertTrue(self.connection.is_open)
        self.connection.channel().queue_declare("", exclusive=True)
        return closed.exception.reply_code

    def test_01_field_table_types_come_back_as_published(self):
        # pika writes int as I (l past 32 bits), Decimal as D, datetime as T, dict as F, list as A; it reads l as
        # unsigned and f, d as int (its data.py), so no negative long and no float here.
        self.channel.queue_declare(self.queue, exclusive=True)
        headers = {"int32": -70000, "long": 2**40, "decimal": decimal.Decimal("123.45"),
                   "time": datetime.datetime(2023, 11, 14, 22, 13, 20), "bytes": b"\x00\x01", "str": "s",
                   "bool": True, "none": None,
                   "nested": {"inner": 7, "deeper": {"when": datetime.datetime(2023, 11, 14, 22, 13, 21)}},
                   "list": [1, decimal.Decimal("0.5"), {"k": "v"}, [2]]}
        self.publish(self.queue, b"got", headers=headers)
        self.assertEqual(describe(self.get(self.queue)[1].headers), describe(headers))
        consumed = self.consume(self.queue, auto_ack=True)
        self.publish(self.queue, b"consumed", headers=headers)
        wait_for(self.connection, lambda: consumed, "the delivery")
        self.assertEqual(describe(consumed[0][1].headers), describe(headers))

    def test_02_per_consumer_and_global_prefetch_hold_together(self):
        # Each consumer's 1 is reached before the channel's 3.
        self.channel.queue_declare(self.queue, exclusive=True)
        self.channel.basic_qos(prefetch_count=1)
        self.channel.basic_qos(prefetch_count=3, global_qos=True)
        first, second = self.consume(self.queue), self.consume(self.queue)
        self.publish(self.queue, b"1", b"2", b"3", b"4", b"5")
        wait_for(self.connection, lambda: first and second, "a delivery to each consumer")
        self.assertEqual(self.ready(self.queue), 3)
        self.assertEqual((len(first), len(second)), (1, 1))
        # The channel's 3 is reached before each consumer's 2.
        channel = self.connection.channel()
        queue = self.queue + "-2"
        channel.queue_declare(queue, exclusive=True)
        channel.basic_qos(prefetch_count=2)
        channel.basic_qos(prefetch_count=3, global_qos=True)
        first, second = self.consume(queue, channel), self.consume(queue, channel)
        self.publish(queue, *[b"%d" % i for i in range(8)])
        wait_for(self.connection, lambda: len(first) + len(second) >= 3, "three deliveries")
        self.assertEqual(self.ready(queue, channel), 5)
        self.assertEqual(len(first) + len(second), 3)
        self.assertLessEqual(max(len(first), len(second)), 2)

    def test_02_a_per_consumer_qos_lifts_the_global_prefetch(self):
        # RabbitMQ 3.10's basic.qos global=false unlimits the channel (rabbit_limiter:unlimit_prefetch); the consumer,
        # made before any per-consumer qos, has no limit of its own.
        self.channel.queue_declare(self.queue, exclusive=True)
        delivered = self.consume(self.queue)
        self.channel.basic_qos(prefetch_count=1, global_qos=True)
        self.publish(self.queue, b"1", b"2")
        wait_for(self.connection, lambda: delivered, "the first delivery")
        self.assertEqual((self.ready(self.queue), len(delivered)), (1, 1))
        self.channel.basic_qos(prefetch_count=1)
        wait_for(self.connection, lambda: len(delivered) == 2, "the second delivery, no longer held")

    def test_02_a_used_up_global_prefetch_holds_no_ack_consumers_too(self):
        no_ack_queue = self.queue + "-no-ack"
        self.channel.queue_declare(self.queue, exclusive=True)
        self.channel.queue_declare(no_ack_queue, exclusive=True)
        acked = self.consume(self.queue)
        self.channel.basic_qos(prefetch_count=1, global_qos=True)
        self.publish(self.queue, b"1")
        wait_for(self.connection, lambda: acked, "the delivery that uses up the prefetch")
        no_ack = self.consume(no_ack_queue, auto_ack=True)
        self.publish(no_ack_queue, b"2")
        pump(self.connection)
        self.assertEqual((self.ready(no_ack_queue), no_ack), (1, []))
        self.channel.basic_ack(acked[0][0].delivery_tag)
        wait_for(self.connection, lambda: no_ack, "the no-ack delivery once the ack made room")

    def test_03_a_crossing_channel_close_keeps_the_connection(self):
        # The publish to a missing exchange gets the broker's channel.close 404, which pika has not read when it sends
        # its own close: pika answers the broker's close, waits for the close-ok of its own, and raises the 404.
        crossings = 0
        for _ in range(5):
            channel = self.connection.channel()
            channel.basic_publish("missing-" + self.queue, "k", b"m")
            if channel.is_open:
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
                    channel.close()
                self.assertEqual(closed.exception.reply_code, 404)
                crossings += 1
        self.assertGreater(crossings, 0, "no channel.close crossed the broker's: nothing was tested")
        # A round trip after pika's close-oks: a broker that took one for a frame on a closed channel (504) has
        # ended the connection by now.
        self.assertEqual(self.connection.channel().queue_declare("", exclusive=True).method.message_count, 0)
        self.assertTrue(self.connection.is_open)

    def test_04_an_expired_message_is_not_delivered(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        self.publish(self.queue, b"lasting")
        self.publish(self.queue, b"short", expiration="1")
        self.publish(self.queue, b"last")
        time.sleep(0.05)  # "short" expires 1 ms after it was queued (no verdict: the order delivered below decides)
        delivered = self.consume(self.queue, auto_ack=True)
        wait_for(self.connection, lambda: len(delivered) >= 2, "two deliveries")
        self.assertEqual([body for _, _, body in delivered], [b"lasting", b"last"])

    def test_05_x_max_length_holds_for_a_requeued_message(self):
        self.channel.queue_declare(self.queue, exclusive=True, arguments={"x-max-length": 2})
        self.publish(self.queue, b"a", b"b")
        method, _, _ = self.get(self.queue, auto_ack=False)
        self.publish(self.queue, b"c")  # b and c ready: the queue is at its length again
        self.channel.basic_nack(method.delivery_tag, requeue=True)  # back at the head, which is dropped
        self.assertEqual([self.get(self.queue)[2] for _ in range(2)], [b"b", b"c"])
        self.assertEqual(self.channel.basic_get(self.queue), (None, None, None))

    def test_06_x_queue_type_classic_equals_no_type_on_redeclare(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        self.channel.queue_declare(self.queue, exclusive=True, arguments={"x-queue-type": "classic"})
        classic = self.queue + "-classic"
        self.channel.queue_declare(classic, exclusive=True, arguments={"x-queue-type": "classic"})
        self.channel.queue_declare(classic, exclusive=True)
        self.assertEqual(self.channel_error(lambda ch: ch.queue_declare(
            self.queue, exclusive=True, arguments={"x-max-length": 5})), 406)  # the others are still compared

    def test_08_any_consumer_of_an_exclusively_consumed_queue_is_403(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        self.consume(self.queue, exclusive=True)
        self.assertEqual(self.channel_error(lambda ch: ch.basic_consume(self.queue, lambda *a: None)), 403)

    def test_10_an_unknown_tag_in_a_transaction_is_406_at_once(self):
        def ack_unknown_tag(channel):
            channel.tx_select()
            channel.basic_ack(99)
            channel.queue_declare("", exclusive=True)  # and no tx.commit: the close comes first
        self.assertEqual(self.channel_error(ack_unknown_tag), 406)

    def test_12_in_confirm_mode_a_publish_to_a_missing_exchange_closes_the_channel_with_404(self):
        def publish(channel):
            channel.confirm_delivery()
            channel.basic_publish("missing-" + self.queue, "k", b"m")  # a nack would raise NackError
        self.assertEqual(self.channel_error(publish), 404)

    def test_13_in_a_transaction_a_publish_to_a_missing_exchange_is_404_at_once(self):
        def publish(channel):
            channel.tx_select()
            channel.basic_publish("missing-" + self.queue, "k", b"m")
            channel.queue_declare("", exclusive=True)  # and no tx.commit: the close comes first
        self.assertEqual(self.channel_error(publish), 404)

    def test_14_requeued_messages_go_back_to_their_positions(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        self.publish(self.queue, b"m1", b"m2", b"m3", b"m4")
        m1, m2, m3 = [self.get(self.queue, auto_ack=False)[0] for _ in range(3)]
        for method in (m3, m1, m2):  # not in queue order
            self.channel.basic_nack(method.delivery_tag, requeue=True)
        got = [self.get(self.queue) for _ in range(4)]
        self.assertEqual([body for _, _, body in got], [b"m1", b"m2", b"m3", b"m4"])
        self.assertEqual([method.redelivered for method, _, _ in got], [True, True, True, False])

    def test_14_requeued_messages_go_back_by_priority(self):
        self.channel.queue_declare(self.queue, exclusive=True, arguments={"x-max-priority": 5})
        self.publish(self.queue, b"low-1", b"low-2")
        self.publish(self.queue, b"high", priority=3)
        high, low = self.get(self.queue, auto_ack=False), self.get(self.queue, auto_ack=False)
        self.assertEqual((high[2], low[2]), (b"high", b"low-1"))
        for method in (low[0], high[0]):
            self.channel.basic_nack(method.delivery_tag, requeue=True)
        self.assertEqual([self.get(self.queue)[2] for _ in range(3)], [b"high", b"low-1", b"low-2"])

    def test_e2_a_wrong_password_is_connection_close_403(self):
        # pika announces authentication_failure_close; it reports the broker's connection.close 403 during the
        # handshake as ProbableAuthenticationError carrying the close (a socket closed without one carries none).
        with self.assertRaises(pika.exceptions.ProbableAuthenticationError) as raised:
            self.broker.amqp(password="wrong-password")
        self.assertIn("ConnectionClosedByBroker: (403) 'ACCESS_REFUSED", str(raised.exception))

    def test_e3_cc_and_bcc_headers_route_and_bcc_is_not_delivered(self):
        exchange = "x-" + self.queue
        self.channel.exchange_declare(exchange, "direct")
        try:
            queues = {}
            for key in ("to", "cc", "bcc", "other"):
                queues[key] = self.queue + "-" + key
                self.channel.queue_declare(queues[key], exclusive=True)
                self.channel.queue_bind(queues[key], exchange, key)
            self.publish("to", b"m", exchange=exchange, headers={"CC": ["cc"], "BCC": ["bcc", "to"]})
            for key in ("to", "cc", "bcc"):
                _, properties, _ = self.get(queues[key])
                self.assertEqual(properties.headers, {"CC": ["cc"]}, key)
                self.assertEqual(self.ready(queues[key]), 0, key)  # once
            self.assertEqual(self.ready(queues["other"]), 0)
            self.publish(queues["to"], b"d", headers={"CC": [queues["cc"]]})  # default exchange: keys name queues
            self.assertEqual((self.get(queues["to"])[2], self.get(queues["cc"])[2]), (b"d", b"d"))
        finally:
            self.channel.exchange_delete(exchange)

    def test_e5_a_higher_priority_consumer_gets_the_messages_while_it_has_room(self):
        self.channel.queue_declare(self.queue, exclusive=True)
        self.channel.basic_qos(prefetch_count=3)
        low = self.consume(self.queue, arguments={"x-priority": 1})
        high = self.consume(self.queue, arguments={"x-priority": 10})
        self.publish(self.queue, b"1", b"2", b"3")
        wait_for(self.connection, lambda: len(high) >= 3, "three deliveries to the higher priority consumer")
        self.assertEqual([body for _, _, body in high], [b"1", b"2", b"3"])
        self.publish(self.queue, b"4")  # the higher one is full
        wait_for(self.connection, lambda: low, "a delivery to the lower priority consumer")
        self.assertEqual([body for _, _, body in low], [b"4"])

    def test_e5_a_single_active_consumer_hands_over_to_the_highest_priority(self):
        # RabbitMQ 3.10: the first consumer is active whatever its priority; when it goes, the waiting one of the
        # highest x-priority is next.
        self.channel.queue_declare(self.queue, exclusive=True, arguments={"x-single-active-consumer": True})
        first_channel = self.connection.channel()
        self.consume(self.queue, first_channel, auto_ack=True)
        low = self.consume(self.queue, auto_ack=True)
        high = self.consume(self.queue, auto_ack=True, arguments={"x-priority": 3})
        first_channel.close()
        self.publish(self.queue, b"1")
        wait_for(self.connection, lambda: low or high, "a delivery to the next active consumer")
        self.assertEqual(([body for _, _, body in high], low), ([b"1"], []))

    def test_round_robin_a_new_consumer_joins_behind_the_one_just_served(self):
        # RabbitMQ's line (core/consumer_line.h): after 1 went to the first of two consumers, the line is second,
        # first, and a third consumer joins behind them.
        self.channel.queue_declare(self.queue, exclusive=True)
        consumers = [self.consume(self.queue, auto_ack=True), self.consume(self.queue, auto_ack=True)]
        self.publish(self.queue, b"1")
        consumers.append(self.consume(self.queue, auto_ack=True))
        self.publish(self.queue, b"2", b"3", b"4")
        wait_for(self.connection, lambda: sum(map(len, consumers)) == 4, "four deliveries")
        self.assertEqual([[body for _, _, body in c] for c in consumers], [[b"1", b"3"], [b"2"], [b"4"]])


class AmqpConnectionLimits(unittest.TestCase):
    """max-connections counts an AMQP connection once, from connection.open to its end, whatever its channels, and
    in the same count as FireMQ's connections; over the limit, connection.open is refused with 530 as RabbitMQ
    refuses it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.broker = Broker(self.tmp.name, extra=["--vhost-limit", "/:max-connections=1"])

    def tearDown(self):
        self.broker.stop()
        self.tmp.cleanup()

    def assert_refused_with_530(self):
        sock, (class_id, method_id, args) = raw_amqp_open(self.broker.ports["amqp"])
        self.assertEqual((class_id, method_id), (10, 50), args)  # connection.close
        code, text_size = struct.unpack(">HB", args[:3])
        self.assertEqual(code, 530)
        self.assertIn(b"connection limit (1) is reached", args[3:3 + text_size])
        sock.close()

    def fire_hello(self):
        """A FireMQ connection's answer to hello: (op, header)."""
        sock = socket.create_connection(("127.0.0.1", self.broker.ports["fire"]), timeout=5)
        fire = FireClient.__new__(FireClient)
        fire.sock = sock
        sock.sendall(b"FMQ1")
        fire.send(0x01, {"ver": 1, "auth": {"mech": "plain", "user": "guest", "pass": "guest"}})
        op, header, _ = fire.receive()
        return fire, op, header

    def test_a_second_amqp_connection_is_refused_with_530_and_channels_are_not_counted(self):
        connection = self.broker.amqp()
        channels = [connection.channel() for _ in range(3)]  # one connection, three channels: all allowed
        for i, channel in enumerate(channels):
            channel.queue_declare("limit-q%d" % i)
        self.assert_refused_with_530()
        self.assertTrue(connection.is_open)
        connection.close()
        # Released exactly once when the connection ended (not once per channel): one may connect again, one only.
        again = self.broker.amqp()
        self.assert_refused_with_530()
        again.close()

    def test_an_amqp_connection_without_channels_is_counted(self):
        sock, answer = raw_amqp_open(self.broker.ports["amqp"])
        self.assertEqual(answer[:2], (10, 41))  # open-ok, and no channel
        self.assert_refused_with_530()
        sock.close()

    def test_firemq_and_amqp_connections_share_the_count(self):
        amqp = self.broker.amqp()
        fire, op, header = self.fire_hello()
        self.assertEqual((op, header.get("code")), (0x07, 506), header)  # error: the vhost's limit is reached
        fire.close()
        amqp.close()
        fire, op, header = self.fire_hello()
        self.assertEqual(op, 0x02, header)  # welcome once the AMQP connection has ended
        self.assert_refused_with_530()
        fire.close()


def closed_by_broker(sock, seconds=3):
    """Whether the broker ends the connection within `seconds` (what it sends meanwhile is read and dropped)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class AmqpHandshakeBound(unittest.TestCase):
    """--max-handshakes bounds AMQP connections between accept and connection.open-ok, in one list with FireMQ's:
    past the bound, the connection that has waited longest is dropped, whichever its protocol."""

    def test_stalled_amqp_handshakes_share_the_bound_with_firemq(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = Broker(directory, extra=["--max-handshakes", "5"])
            try:
                fire = socket.create_connection(("127.0.0.1", broker.ports["fire"]), timeout=5)
                fire.sendall(b"FMQ1")  # and no hello: the oldest in its handshake
                time.sleep(0.3)
                stalled = []
                for _ in range(4):  # five in their handshake: the bound, nobody dropped
                    sock = socket.create_connection(("127.0.0.1", broker.ports["amqp"]), timeout=5)
                    sock.sendall(b"AMQP\x00\x00\x09\x01")
                    read_frames(sock, 1)  # connection.start: accepted, and stalled before start-ok
                    stalled.append(sock)
                self.assertFalse(closed_by_broker(fire, 0.5))
                sixth = socket.create_connection(("127.0.0.1", broker.ports["amqp"]), timeout=5)
                sixth.sendall(b"AMQP\x00\x00\x09\x01")
                read_frames(sixth, 1)
                self.assertTrue(closed_by_broker(fire))  # a FireMQ connection dropped for an AMQP one
                seventh = socket.create_connection(("127.0.0.1", broker.ports["amqp"]), timeout=5)
                seventh.sendall(b"AMQP\x00\x00\x09\x01")
                read_frames(seventh, 1)
                self.assertTrue(closed_by_broker(stalled[0]))  # then the oldest AMQP one
                self.assertFalse(closed_by_broker(stalled[1], 0.5))
                # A real client's handshake is quick: it completes (and drops the oldest stalled one), and once
                # open it is no longer under the bound.
                connection = broker.amqp()
                self.assertTrue(closed_by_broker(stalled[1]))
                more = [socket.create_connection(("127.0.0.1", broker.ports["amqp"]), timeout=5) for _ in range(5)]
                pump(connection, 0.5)
                self.assertTrue(connection.is_open)
                connection.close()
            finally:
                broker.stop()


class AmqpTools(WithBroker):
    """amqp-tools (librabbitmq's command line): another real client, written in C."""

    def run_tool(self, *args, stdin=None):
        url = "amqp://guest:guest@127.0.0.1:%d/" % self.broker.ports["amqp"]
        done = subprocess.run([args[0], "--url", url, *args[1:]], input=stdin, capture_output=True, timeout=20)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_declare_publish_get(self):
        self.assertEqual(self.run_tool("amqp-declare-queue", "-q", "tools-q").strip(), b"tools-q")
        self.run_tool("amqp-publish", "-r", "tools-q", "-C", "text/plain", "-p", stdin=b"from amqp-tools")
        self.assertEqual(self.run_tool("amqp-get", "-q", "tools-q"), b"from amqp-tools")


class AmqpListenerFlag(unittest.TestCase):
    def test_amqp_port_off_leaves_only_the_other_listeners(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = Broker(directory, amqp_port="off")
            try:
                self.assertEqual(list(broker.ports), ["fire"])
            finally:
                broker.stop()


class AmqpOverTls(unittest.TestCase):
    """amqps on --amqps-port (5671 by default, as RabbitMQ's): the TLS listeners' certificate, policy and
    client-certificate option, with AMQP 0-9-1 inside."""

    def start(self, directory, *extra):
        from transports_test import make_certificates  # beside this file: the same throwaway CA and certificates
        make_certificates(directory)
        c = lambda name: os.path.join(directory, name)
        return Broker(directory, extra=["--tls-cert", c("server.pem"), "--tls-key", c("server.key"),
                                        "--amqps-port", "0", *extra])

    def amqps(self, broker, directory, client_certificate=False):
        import ssl
        context = ssl.create_default_context(cafile=os.path.join(directory, "ca.pem"))
        if client_certificate:
            context.load_cert_chain(os.path.join(directory, "client.pem"), os.path.join(directory, "client.key"))
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.ports["amqps"], "/", pika.PlainCredentials("guest", "guest"),
            ssl_options=pika.SSLOptions(context, "127.0.0.1"), connection_attempts=1, socket_timeout=5))

    def test_a_message_goes_through_amqps_to_amqp(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = self.start(directory)
            try:
                self.assertIn("amqps", broker.ports)
                over_tls = self.amqps(broker, directory)
                channel = over_tls.channel()
                channel.queue_declare("tls-q")
                channel.confirm_delivery()
                channel.basic_publish("", "tls-q", b"inside TLS", pika.BasicProperties(content_type="text/plain"))
                plain = broker.amqp()
                method, properties, body = plain.channel().basic_get("tls-q", auto_ack=True)
                self.assertEqual((body, properties.content_type), (b"inside TLS", "text/plain"))
                plain.close()
                over_tls.close()
            finally:
                broker.stop()

    def test_amqp_bytes_without_tls_are_refused_on_the_amqps_port(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = self.start(directory)
            try:
                with socket.create_connection(("127.0.0.1", broker.ports["amqps"]), timeout=5) as s:
                    s.sendall(b"AMQP\x00\x00\x09\x01")
                    # Not a TLS ClientHello: the handshake fails and the socket closes without an AMQP frame.
                    self.assertNotIn(b"\x01\x00\x00", s.recv(100)[:3])
                self.assertIn(b"amqps connection", broker.wait_for_log(b"TLS handshake failed"))
            finally:
                broker.stop()

    def test_tls_ca_requires_a_client_certificate_on_amqps(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = self.start(directory, "--tls-ca", os.path.join(directory, "ca.pem"))
            try:
                with self.assertRaises(pika.exceptions.AMQPConnectionError):
                    self.amqps(broker, directory)
                with_certificate = self.amqps(broker, directory, client_certificate=True)
                self.assertTrue(with_certificate.is_open)
                with_certificate.close()
            finally:
                broker.stop()

    def test_without_a_certificate_amqps_is_off(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = Broker(directory, extra=["--amqps-port", "0"])
            try:
                self.assertNotIn("amqps", broker.ports)
                self.assertIn(b"amqps:// are off", broker.wait_for_log(b"amqps:// are off"))
            finally:
                broker.stop()


class AmqpFlowControl(unittest.TestCase):
    def test_memory_alarm_is_connection_blocked_then_unblocked(self):
        with tempfile.TemporaryDirectory() as directory:
            # The watermark is below one 100 KB message: publishing it raises the memory alarm (paging off, or the
            # queued body would leave memory instead).
            broker = Broker(directory, extra=["--memory-high-watermark", "50000", "--paging-ratio", "2"])
            try:
                connection = broker.amqp()
                events = []
                connection.add_on_connection_blocked_callback(lambda c, frame: events.append("blocked"))
                connection.add_on_connection_unblocked_callback(lambda c, frame: events.append("unblocked"))
                channel = connection.channel()
                channel.queue_declare("big")
                channel.basic_publish("", "big", b"x" * 100000)
                pump(connection, 0.5)
                self.assertEqual(events, ["blocked"])
                # Another connection (consumer-only, never blocked) drains the queue: the alarm clears.
                other = broker.amqp()
                self.assertEqual(len(other.channel().basic_get("big", auto_ack=True)[2]), 100000)
                other.close()
                pump(connection, 0.5)
                self.assertEqual(events, ["blocked", "unblocked"])
                connection.close()
            finally:
                broker.stop()


class AmqpShutdown(unittest.TestCase):
    def test_sigterm_is_connection_close_320(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = Broker(directory)
            try:
                connection = broker.amqp()
                connection.channel()
                broker.process.send_signal(signal.SIGTERM)
                with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as raised:
                    pump(connection, 5)
                self.assertEqual(raised.exception.reply_code, 320)
                self.assertEqual(broker.process.wait(10), 0)
            finally:
                broker.stop()


class AmqpPersistence(unittest.TestCase):
    """persistent: true <-> delivery-mode 2, seen the way that matters: across a restart."""

    def test_delivery_mode_2_survives_a_restart_and_1_does_not(self):
        with tempfile.TemporaryDirectory() as directory:
            broker = Broker(directory)
            try:
                connection = broker.amqp()
                channel = connection.channel()
                channel.queue_declare("durable-q", durable=True)
                channel.confirm_delivery()
                channel.basic_publish("", "durable-q", b"transient", pika.BasicProperties(delivery_mode=1))
                channel.basic_publish("", "durable-q", b"persistent", pika.BasicProperties(delivery_mode=2))
                connection.close()
                broker.restart()
                fire = FireClient(broker.ports["fire"])
                op, get_ok, payload = fire.request(0x37, {"rid": 1, "queue": "durable-q", "no_ack": True})
                self.assertEqual((op, payload), (0x38, b"persistent"))
                op, ok, _ = fire.request(0x37, {"rid": 2, "queue": "durable-q", "no_ack": True})
                self.assertEqual((op, ok.get("empty")), (0x06, True))
                fire.close()
            finally:
                broker.stop()


class AmqpBadInput(WithBroker):
    """Malformed bytes get the right AMQP answer and a clean close; other connections are not disturbed."""

    def raw(self):
        return socket.create_connection(("127.0.0.1", self.broker.ports["amqp"]), timeout=5)

    def read_all(self, sock):
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk

    def test_wrong_protocol_header_gets_ours_then_close(self):
        sock = self.raw()
        sock.sendall(b"AMQP\x01\x01\x00\x09")
        self.assertEqual(self.read_all(sock), b"AMQP\x00\x00\x09\x01")

    def test_bad_frame_end_is_connection_close_501(self):
        survivor = self.broker.amqp()
        sock = self.raw()
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        sock.recv(65536)  # connection.start
        sock.sendall(b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0b\x00")  # frame-end 0x00, not 0xce
        data = self.read_all(sock)
        # connection.close (10, 50) with reply code 501
        self.assertEqual(data[7:11], b"\x00\x0a\x00\x32", data)
        self.assertEqual(struct.unpack(">H", data[11:13])[0], 501)
        self.assertTrue(survivor.channel().queue_declare("after-bad-input").method.queue)
        survivor.close()

    def test_a_closed_client_that_keeps_sending_and_never_reads_is_cut_off(self):
        # As FireMQ's (abuse_test.py): the close of a connection whose peer never reads is bounded (kMaxClosingTime).
        # so that the replies below wait in the broker
        raw, answer = raw_amqp_open(self.broker.ports["amqp"], rcvbuf=4096)
        self.assertEqual(answer[:2], (10, 41))
        raw.sendall(amqp_frame(1, 1, struct.pack(">HH", 20, 10) + b"\x00"))
        read_frames(raw, 1)  # channel.open-ok
        # Replies it never reads (queue.declare-ok, ~220 bytes each), then a frame with a bad frame-end: 501, the
        # broker is now closing the connection.
        name = b"amqp-closing-" + b"n" * 180
        declare = amqp_frame(1, 1, struct.pack(">HHHB", 50, 10, 0, len(name)) + name + b"\x00" + struct.pack(">I", 0))
        raw.sendall(declare * 30000 + b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0b\x00")  # ~6.6 MB of replies
        started = time.time()
        with self.assertRaises((ConnectionResetError, BrokenPipeError)):
            while time.time() - started < 30:
                raw.sendall(b"\0" * 65536)  # drained by the closing connection, until its time is up
        self.assertLess(time.time() - started, 15)


if __name__ == "__main__":
    BROKER = sys.argv.pop(1)
    while len(sys.argv) > 2 and sys.argv[1] == "--broker-arg":
        BROKER_ARGS.append(sys.argv.pop(2))
        sys.argv.pop(1)
    unittest.main(verbosity=2)
