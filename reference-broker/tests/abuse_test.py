#!/usr/bin/python3
"""Clients that try to take more than their share (docs/security.md, "Abuse tests"), against the broker as a
separate process on loopback. Each abuser is bounded in count and time. For each, the broker's descriptors and
memory stay within the documented bounds, a well-behaved client beside it keeps its ping latency within a stated
factor, and what the abuser held is freed when it goes.

- a thousand connections that send FMQ1 and half a hello, then stall (--max-handshakes);
- a client that subscribes to five thousand queues (--max-subscriptions);
- a client that takes deliveries with a huge credit and never acks (--max-unacked);
- a client that floods requests and never reads the replies (the bounded outbound queue: kMaxPendingBytes);
- a client that is being closed, neither reads nor closes, and keeps sending (kMaxClosingTime);
- a management request whose JSON body is nested 50,000 deep, to a queue PUT and an exchange's publish (kMaxNesting);
- a durable declare of 20 KB of deeply nested arguments (stored compactly) and of 1 MB of arguments (refused on
  every protocol: kMaxArgumentsBytes);
- a definitions file, given or in the data directory, nested 50,000 deep (kMaxDefinitionsNesting);
- a management body with a number no double holds (1e999999), which nlohmann's parser throws out_of_range for;
- a durable queue whose name is not UTF-8, over FireMQ and in a management path (502, 400);
- three hundred HTTP sockets that send nothing or half a request (--max-handshakes, which HTTP shares), and an
  idle keep-alive connection (kHttpIdleTimeout);
- on a broker whose descriptor limit is 256, four hundred idle HTTP sockets (kReservedDescriptors).

Usage: abuse_test.py BROKER_EXECUTABLE
"""
import base64, http.client, json, os, resource, socket, statistics, struct, subprocess, sys, tempfile, time, unittest

import msgpack

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME, ERROR, PING, PONG, make_certificates

OK, PUBLISH, SUBSCRIBE, DELIVER, DECLARE_QUEUE, GET = 0x06, 0x20, 0x30, 0x33, 0x12, 0x37

MAX_HANDSHAKES = 100
MAX_SUBSCRIPTIONS = 500
MAX_UNACKED = 1000
# guest as the other tests have it (with the management tag, for the API's declares), and a monitoring user with
# no permissions at all, who may still send the management API a body (it is read before the permission check).
DEFINITIONS = {"users": [{"name": "guest", "password": "guest", "tags": ["management"]},
                         {"name": "watcher", "password": "watcher", "tags": ["monitoring"]}],
               "vhosts": [{"name": "/"}], "permissions": [{"user": "guest", "vhost": "/"}]}
WATCHER_AUTH = "Basic " + base64.b64encode(b"watcher:watcher").decode()
# A well-behaved client's ping round trip during an abuse may grow by this factor over its own before it, or to
# this many milliseconds, whichever is larger: the abusers share the broker's one thread, so some growth is
# expected, but never a stall.
LATENCY_FACTOR = 20
LATENCY_FLOOR_MS = 50
# What the broker may hold beyond its descriptors before the abuse: the bound itself plus a margin for the
# listeners' sockets, the store's files and the test's own well-behaved connections.
DESCRIPTOR_MARGIN = 40
# Memory an abuser may add to the broker's resident set (the outbound queue alone may hold 8 MiB).
MEMORY_BOUND_MB = 64


def frame(op, header, payload=b""):
    return transports.stream_frame(op, header, payload)


def resident_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def eventually(condition, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def log_in(test, broker, timeout=10):
    """A well-behaved client of `broker`, logged in over fire:// as guest (the welcome asserted by `test`)."""
    client = StreamClient(socket.create_connection(("127.0.0.1", broker.ports["fire"]), timeout=timeout))
    client.sock.sendall(b"FMQ1")
    client.send(0x01, HELLO)
    op, reply = client.receive()
    test.assertEqual(op, WELCOME, reply)
    return client


class AbuseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        transports.HANDSHAKE_TIMEOUT_MS = 20000  # the bound, not the deadline, must act on stalled handshakes
        cls.broker = Broker(cls.temp.name, "--max-handshakes", str(MAX_HANDSHAKES),
                            "--max-subscriptions", str(MAX_SUBSCRIPTIONS), "--max-unacked", str(MAX_UNACKED),
                            definitions=DEFINITIONS)
        cls.pid = cls.broker.process.pid

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.temp.cleanup()

    def connect(self):
        return log_in(self, self.broker)

    def ping_ms(self, client, count=50):
        """The median round trip of `count` pings, one at a time."""
        times = []
        for _ in range(count):
            start = time.perf_counter()
            client.send(PING, {})
            op, _ = client.receive()
            self.assertEqual(op, PONG)
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    def assert_latency_kept(self, before_ms, during_ms):
        allowed = max(before_ms * LATENCY_FACTOR, LATENCY_FLOOR_MS)
        self.assertLess(during_ms, allowed, f"ping went from {before_ms:.2f} ms to {during_ms:.2f} ms")

    def receive_until(self, client, wanted_op, count):
        """Reads frames until `count` of `wanted_op` came; returns every frame read."""
        frames, seen = [], 0
        while seen < count:
            f = client.receive()
            self.assertIsNotNone(f, "the broker closed the connection")
            frames.append(f)
            seen += f[0] == wanted_op
        return frames

    def test_a_thousand_stalled_handshakes_hold_at_most_the_bound(self):
        bystander = self.connect()
        before_ms = self.ping_ms(bystander)
        descriptors_before = self.broker.open_descriptors()
        half_hello = frame(0x01, HELLO)[:12]  # FMQ1 follows; len and a few bytes of the header, then nothing
        stalled = []
        try:
            for _ in range(1000):
                s = socket.create_connection(("127.0.0.1", self.broker.ports["fire"]), timeout=10)
                s.sendall(b"FMQ1" + half_hello)
                stalled.append(s)
            # The broker took them all in and dropped the oldest past the bound.
            self.assertTrue(eventually(lambda: self.broker.open_descriptors() <= descriptors_before + MAX_HANDSHAKES + 2),
                            f"{self.broker.open_descriptors()} descriptors open")
            self.assertLessEqual(self.broker.open_descriptors(), descriptors_before + MAX_HANDSHAKES + DESCRIPTOR_MARGIN)
            # A real client still gets in during the flood (its handshake is too quick to be the oldest) ...
            newcomer = self.connect()
            newcomer.sock.close()
            # ... and the one already in keeps its latency.
            self.assert_latency_kept(before_ms, self.ping_ms(bystander))
        finally:
            for s in stalled:
                s.close()
        self.assertTrue(eventually(lambda: self.broker.open_descriptors() <= descriptors_before),
                        f"{self.broker.open_descriptors()} descriptors open after the abusers left, {descriptors_before} before")
        bystander.sock.close()

    def test_subscribing_to_thousands_of_queues_stops_at_the_bound(self):
        bystander = self.connect()
        before_ms = self.ping_ms(bystander)
        memory_before = resident_mb(self.pid)
        abuser = self.connect()
        queues = 5000
        batch = b"".join(frame(DECLARE_QUEUE, {"rid": i + 1, "name": f"abuse-sub-{i}", "exclusive": True})
                         for i in range(queues))
        batch += b"".join(frame(SUBSCRIBE, {"rid": queues + i + 1, "sub": i + 1, "queue": f"abuse-sub-{i}", "credit": 10})
                          for i in range(queues))
        abuser.sock.sendall(batch)
        replies = [f for f in self.receive_until_count(abuser, 2 * queues)]
        subscribe_replies = [f for f in replies if f[1].get("rid", 0) > queues]
        refused = [h for op, h in subscribe_replies if op == ERROR]
        self.assertEqual(len(subscribe_replies) - len(refused), MAX_SUBSCRIPTIONS)
        self.assertEqual({(h["code"], h.get("fatal", False)) for h in refused}, {(506, False)})
        self.assertIn("limit of 500 subscriptions (--max-subscriptions)", refused[0]["msg"])
        self.assertLess(resident_mb(self.pid) - memory_before, MEMORY_BOUND_MB)
        self.assert_latency_kept(before_ms, self.ping_ms(bystander))
        abuser.sock.close()
        # Its exclusive queues go with it.
        self.assertTrue(eventually(lambda: self.queue_gone(bystander, "abuse-sub-4999")))
        bystander.sock.close()

    def receive_until_count(self, client, count):
        frames = []
        while len(frames) < count:
            f = client.receive()
            self.assertIsNotNone(f, "the broker closed the connection")
            frames.append(f)
        return frames

    def queue_gone(self, client, name):
        client.send(DECLARE_QUEUE, {"rid": 2, "name": name, "passive": True})
        while True:
            op, h = client.receive()
            if h.get("rid") == 2:
                return op == ERROR and h["code"] == 404

    def test_a_consumer_that_never_acks_gets_at_most_the_bound(self):
        bystander = self.connect()
        before_ms = self.ping_ms(bystander)
        publisher = self.connect()
        messages = 5000
        publisher.send(DECLARE_QUEUE, {"rid": 1, "name": "abuse-unacked"})
        self.assertEqual(publisher.receive()[0], OK)
        publisher.sock.sendall(b"".join(frame(PUBLISH, {"key": "abuse-unacked"}, b"x" * 16) for _ in range(messages)))
        abuser = self.connect()
        abuser.send(SUBSCRIBE, {"rid": 1, "sub": 1, "queue": "abuse-unacked", "credit": 1_000_000_000})
        deliveries = [f for f in self.receive_until(abuser, DELIVER, MAX_UNACKED) if f[0] == DELIVER]
        # Nothing more comes while it holds MAX_UNACKED, whatever its credit.
        abuser.sock.settimeout(1.0)
        with self.assertRaises(socket.timeout):
            abuser.receive()
        self.assertEqual(len(deliveries), MAX_UNACKED)
        self.assert_latency_kept(before_ms, self.ping_ms(bystander))
        abuser.sock.close()
        # What it held is requeued: every message is ready again.
        def all_ready():
            bystander.send(DECLARE_QUEUE, {"rid": 3, "name": "abuse-unacked", "passive": True})
            op, h = bystander.receive()
            return op == OK and h.get("messages") == messages
        self.assertTrue(eventually(all_ready))
        bystander.sock.close()
        publisher.sock.close()

    def test_a_flood_of_requests_never_read_stops_being_read(self):
        bystander = self.connect()
        before_ms = self.ping_ms(bystander)
        memory_before = resident_mb(self.pid)
        abuser = self.connect()
        abuser.sock.setblocking(False)
        # Passive declares of a missing queue: each one's error reply is larger than the request.
        request = frame(DECLARE_QUEUE, {"rid": 1, "name": "abuse-no-such-queue-" + "n" * 64, "passive": True})
        chunk = request * 1000
        sent, blocked_since, deadline = 0, None, time.time() + 20
        while time.time() < deadline:
            try:
                offset = sent % len(chunk)  # a partial send continues where it stopped: frames stay whole
                sent += abuser.sock.send(chunk[offset:])
                blocked_since = None
            except BlockingIOError:
                blocked_since = blocked_since or time.time()
                if time.time() - blocked_since > 1.0:
                    break  # the broker stopped reading: its outbound queue for this client is full
                time.sleep(0.01)
        self.assertIsNotNone(blocked_since, f"the broker kept reading: {sent} bytes taken in 20 s")
        self.assertLess(resident_mb(self.pid) - memory_before, MEMORY_BOUND_MB)
        self.assert_latency_kept(before_ms, self.ping_ms(bystander))
        descriptors = self.broker.open_descriptors()
        abuser.sock.close()
        self.assertTrue(eventually(lambda: self.broker.open_descriptors() < descriptors))
        bystander.sock.close()

    def test_a_closed_client_that_keeps_sending_and_never_reads_is_cut_off(self):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so that the replies below wait in the broker
        sock.settimeout(10)
        sock.connect(("127.0.0.1", self.broker.ports["fire"]))
        abuser = StreamClient(sock)
        sock.sendall(b"FMQ1")
        abuser.send(0x01, HELLO)
        self.assertEqual(abuser.receive()[0], WELCOME)
        # Replies it never reads, then a frame too short to hold its op: 501, fatal; the broker is now closing it.
        request = frame(DECLARE_QUEUE, {"rid": 1, "name": "abuse-closing-" + "n" * 64, "passive": True})
        sock.sendall(request * 60000 + struct.pack(">I", 0))  # ~8 MB of replies: more than the socket buffers hold, less than the outbound bound
        started = time.time()
        with self.assertRaises((ConnectionResetError, BrokenPipeError)):
            while time.time() - started < 30:
                sock.sendall(b"\0" * 65536)  # drained by the closing connection, until its time is up
        self.assertLess(time.time() - started, 15)

    def api(self, method, path, body, user="watcher"):
        connection = http.client.HTTPConnection("127.0.0.1", self.broker.ports["ws"], timeout=10)
        auth = "Basic " + base64.b64encode(f"{user}:{user}".encode()).decode()
        connection.request(method, path, body, {"Authorization": auth, "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()

    def test_a_management_body_nested_50000_deep_is_refused_with_400(self):
        deep = "[" * 50000 + "]" * 50000
        for path, body in [("/api/queues/%2f/abuse-deep", '{"durable": false, "arguments": {"x": ' + deep + '}}'),
                           ("/api/exchanges/%2f/amq.default/publish",
                            '{"routing_key": "q", "payload": "", "properties": {"headers": {"x": ' + deep + '}}}')]:
            with self.subTest(path=path):
                status, answer = self.api("PUT" if "queues" in path else "POST", path, body)
                self.assertEqual(status, 400)
                self.assertIn(b"the body is nested deeper than 64 levels", answer)
                self.assertIsNone(self.broker.process.poll())
        self.connect()  # still serving

    def api_overview(self, broker=None):
        """A well-behaved management client: GET /api/overview on a connection of its own; returns the status."""
        connection = http.client.HTTPConnection("127.0.0.1", (broker or self.broker).ports["ws"], timeout=5)
        try:
            connection.request("GET", "/api/overview", headers={"Authorization": WATCHER_AUTH})
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def test_three_hundred_idle_and_half_request_http_sockets_hold_at_most_the_bound(self):
        bystander = self.connect()
        before_ms = self.ping_ms(bystander)
        descriptors_before = self.broker.open_descriptors()
        half_request = b"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthor"  # and then nothing
        stalled = []
        try:
            for i in range(300):
                s = socket.create_connection(("127.0.0.1", self.broker.ports["ws"]), timeout=10)
                if i % 2:
                    s.sendall(half_request)
                stalled.append(s)
            # The HTTP sockets are in the one handshake list: past the bound the oldest are dropped.
            self.assertTrue(eventually(lambda: self.broker.open_descriptors() <= descriptors_before + MAX_HANDSHAKES + 2),
                            f"{self.broker.open_descriptors()} descriptors open, {descriptors_before} before")
            during = self.broker.open_descriptors()
            print(f"\n  300 stalled HTTP sockets: {descriptors_before} descriptors before, {during} during", file=sys.stderr)
            # The API and a new FireMQ client still get in, and the client already in keeps its latency.
            self.assertEqual(self.api_overview(), 200)
            self.connect().sock.close()
            self.assert_latency_kept(before_ms, self.ping_ms(bystander))
        finally:
            for s in stalled:
                s.close()
        self.assertTrue(eventually(lambda: self.broker.open_descriptors() <= descriptors_before),
                        f"{self.broker.open_descriptors()} descriptors open after the abusers left, {descriptors_before} before")
        bystander.sock.close()

    def test_an_idle_keep_alive_http_connection_is_closed_after_the_idle_timeout(self):
        sock = socket.create_connection(("127.0.0.1", self.broker.ports["ws"]), timeout=15)
        sock.sendall(b"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + WATCHER_AUTH.encode() +
                     b"\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:200])
        answered = time.time()
        # The rest of the answer, then the close: kHttpIdleTimeout (5 s), not the handshake timeout (20 s here).
        while sock.recv(65536):
            pass
        idle = time.time() - answered
        self.assertGreater(idle, 4)
        self.assertLess(idle, 8)
        sock.close()

    def test_a_number_no_double_holds_is_refused_with_400(self):
        status, answer = self.api("PUT", "/api/queues/%2f/abuse-overflow", '{"arguments": {"x-message-ttl": 1e999999}}')
        self.assertEqual(status, 400, answer)
        self.assertIn(b"number overflow", answer)
        self.assertIsNone(self.broker.process.poll())
        self.connect()  # still serving

    def test_names_that_are_not_utf8_are_refused_with_502_and_the_broker_serves(self):
        # A durable declare of a queue named b"q\x8e" once threw out of the definitions.json save: the broker lived,
        # but the client's connection was left unanswered. Now 502 (fatal, as every 502), and others are served.
        client = self.connect()
        header = b"\x83" + msgpack.packb("rid") + msgpack.packb(1) + msgpack.packb("name") + b"\xa2q\x8e" + \
            msgpack.packb("durable") + msgpack.packb(True)
        body = bytes([DECLARE_QUEUE]) + struct.pack(">I", len(header)) + header
        client.sock.sendall(struct.pack(">I", len(body)) + body)
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply.get("fatal", False), reply["msg"]),
                         (ERROR, 502, True, "the queue name is not UTF-8"))
        client = self.connect()
        client.send(DECLARE_QUEUE, {"rid": 2, "name": "abuse-after-not-utf8", "durable": True})
        op, reply = client.receive()
        self.assertEqual((op, reply["rid"]), (OK, 2), reply)
        # The management API's path is held to the same (found by fuzz_management: a PUT of a user named
        # %8E ended the process through the same JSON text).
        status, answer = self.api("PUT", "/api/queues/%2f/q%8E", '{"durable": true}', user="guest")
        self.assertEqual(status, 400, answer)
        self.assertIn(b"not UTF-8", answer)
        status, _ = self.api("GET", "/api/queues/%2f/abuse-after-not-utf8", None, user="guest")
        self.assertEqual(status, 200)
        self.api("DELETE", "/api/queues/%2f/abuse-after-not-utf8", None, user="guest")

    def test_arguments_are_bounded_in_size_and_stored_compactly(self):
        # A 20 KB durable declare of arguments nested 60 deep: accepted, and stored in about its own size (it
        # was 1.3 MB pretty-printed, and without a depth bound 220 MB).
        nested = "[" * 60 + ",".join(["0"] * 10000) + "]" * 60
        status, answer = self.api("PUT", "/api/queues/%2f/abuse-nested-args",
                                  '{"durable": true, "arguments": {"x-pad": ' + nested + '}}', user="guest")
        self.assertEqual(status, 201, answer)
        stored = os.path.getsize(os.path.join(self.temp.name, "data", "definitions.json"))
        self.assertLess(stored, 3 * len(nested))
        # A megabyte of arguments is refused on every protocol, whatever the user may configure.
        big = {"x-pad": "a" * 1000000}
        status, answer = self.api("PUT", "/api/queues/%2f/abuse-big-args",
                                  '{"durable": true, "arguments": ' + json.dumps(big) + '}', user="guest")
        self.assertEqual(status, 400, answer)
        self.assertIn(b"over the limit of 65536 (MessagePack-encoded)", answer)
        client = self.connect()
        client.send(DECLARE_QUEUE, {"rid": 1, "name": "abuse-big-args", "args": big})
        op, header = client.receive()
        self.assertEqual((op, header["code"], header.get("fatal", False)), (ERROR, 506, False))
        self.assertIn("are 1000012 bytes, over the limit of 65536", header["msg"])
        status, _ = self.api("GET", "/api/queues/%2f/abuse-big-args", None, user="guest")
        self.assertEqual(status, 404)
        self.api("DELETE", "/api/queues/%2f/abuse-nested-args", None, user="guest")


class CorruptFilesTest(unittest.TestCase):
    """Definitions nested 50,000 deep: refused with a message, not a stack overflow (kMaxDefinitionsNesting)."""
    DEEP = "[" * 50000 + "]" * 50000

    def test_a_deep_definitions_file_stops_the_broker_with_a_message(self):
        given = json.dumps(DEFINITIONS)[:-1] + ', "queues": [{"name": "q", "vhost": "/", "durable": true, ' \
            '"arguments": {"x": ' + self.DEEP + '}}]}'
        with tempfile.TemporaryDirectory() as directory:
            with open(os.path.join(directory, "definitions.json"), "w") as f:
                f.write(given)
            run = subprocess.run([transports.BROKER, "--bind", "127.0.0.1", "--port", "0", "--ws-port", "0",
                                  "--amqp-port", "off", "--data-dir", os.path.join(directory, "data"),
                                  "--definitions", os.path.join(directory, "definitions.json")],
                                 capture_output=True, text=True, timeout=20)
            self.assertGreater(run.returncode, 0, run.stderr)  # an exit with a status, not a signal
            self.assertIn("nested deeper than 196 levels", run.stderr + run.stdout)

    def test_a_deep_stored_definitions_file_is_set_aside_and_the_broker_serves(self):
        # As any unreadable data-directory definitions.json (docs/durability.md, "What the broker does with a
        # damaged data directory"): reported, renamed, and the broker starts without that topology.
        with tempfile.TemporaryDirectory() as directory:
            make_certificates(directory)
            os.makedirs(os.path.join(directory, "data"), mode=0o700)
            stored = os.path.join(directory, "data", "definitions.json")
            with open(stored, "w") as f:
                f.write('{"queues": [{"name": "q", "vhost": "/", "durable": true, "arguments": {"x": ' + self.DEEP + '}}]}')
            broker = Broker(directory, definitions=DEFINITIONS)
            try:
                log_in(self, broker)
                self.assertTrue(os.path.exists(stored + ".unreadable"))
            finally:
                broker.stop()
            with open(os.path.join(directory, "broker.log")) as log:
                self.assertIn("nested deeper than 196 levels", log.read())


class DescriptorReserveTest(unittest.TestCase):
    """A broker whose descriptor limit is low (256, soft and hard, so that it cannot raise it) and whose handshake
    bound is above it: the descriptors, not the bound, run short first. The reserve (kReservedDescriptors) keeps the
    API and new FireMQ connections working: near the limit the longest-waiting handshake is dropped."""
    LIMIT = 256

    def test_four_hundred_idle_http_sockets_leave_room_for_the_api_and_firemq(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            transports.HANDSHAKE_TIMEOUT_MS = 20000  # the reserve, not the deadline, must act on idle sockets
            limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (self.LIMIT, self.LIMIT))
            broker = Broker(temp, "--max-handshakes", "100000", definitions=DEFINITIONS, preexec_fn=limit)
            stalled = []
            try:
                for _ in range(400):
                    stalled.append(socket.create_connection(("127.0.0.1", broker.ports["ws"]), timeout=10))
                self.assertTrue(eventually(lambda: broker.open_descriptors() <= self.LIMIT - 30),
                                f"{broker.open_descriptors()} descriptors open")
                print(f"\n  400 idle HTTP sockets, limit {self.LIMIT}: {broker.open_descriptors()} descriptors open",
                      file=sys.stderr)
                self.assertEqual(AbuseTest.api_overview(self, broker), 200)
                log_in(self, broker, timeout=5).sock.close()
                self.assertIsNone(broker.process.poll())
            finally:
                for s in stalled:
                    s.close()
                broker.stop()


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
