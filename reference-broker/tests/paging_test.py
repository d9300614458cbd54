#!/usr/bin/python3
"""Paging against the broker as a separate process (docs/durability.md, "Paging"): a queue longer than the memory
high watermark. The broker runs with a 40 MB watermark, so it pages bodies out past 20 MB; the test queues 120 MB
of messages with no consumer, transient ones in a non-durable queue (scratch file) and persistent ones in a durable
queue (read back from the message store), every publish confirmed, and no flow {pause: true} ever sent. Without
paging the watermark pauses the publisher a third of the way through. Then every message is consumed back in
order with its exact body.

Usage: paging_test.py BROKER_EXECUTABLE
"""
import hashlib, socket, struct, sys, tempfile, unittest

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME

OK, FLOW, DECLARE_QUEUE, PUBLISH, CONFIRM, SUBSCRIBE, DELIVER = 0x06, 0x08, 0x12, 0x20, 0x21, 0x30, 0x33

WATERMARK = 40_000_000
BODY_SIZE = 64 * 1024
MESSAGES = 1800  # 118 MB: three times the watermark
WINDOW = 64      # unconfirmed publishes at a time


class PayloadClient(StreamClient):
    """A StreamClient that keeps the last frame's payload (the test compares bodies), reading 1 MiB at a time."""

    def receive(self):
        while len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">I", self.buffer[:4])[0]:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        n = struct.unpack(">I", self.buffer[:4])[0]
        body, self.buffer = self.buffer[4:4 + n], self.buffer[4 + n:]
        hlen = struct.unpack(">I", body[1:5])[0]
        self.last_payload = body[5 + hlen:]
        return transports.decode(body)


def body_of(i):
    """A body that differs per message throughout, so a body read back from the wrong place shows."""
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * (BODY_SIZE // len(seed) + 1))[:BODY_SIZE]


class PagingTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="firemq-paging-test-")
        transports.make_certificates(self.directory)
        self.broker = Broker(self.directory, "--memory-high-watermark", str(WATERMARK))

    def tearDown(self):
        self.broker.stop()

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.broker.ports["fire"]))
        sock.sendall(b"FMQ1")
        client = PayloadClient(sock)
        client.sock.settimeout(10)
        client.send(0x01, HELLO)
        op, _ = client.receive()
        self.assertEqual(op, WELCOME)
        return client

    def declare(self, client, name, durable):
        client.send(DECLARE_QUEUE, {"rid": 1, "name": name, "durable": durable})
        op, header = client.receive()
        self.assertEqual(op, OK, header)

    def publish_all(self, client, queue, persistent):
        """Publishes MESSAGES bodies with confirms, WINDOW at a time; fails on a nack, a flow pause, or a broker
        that stops reading (a paused publisher blocks in send before it can read the flow frame)."""
        sent, confirmed = 0, 0
        while confirmed < MESSAGES:
            try:
                while sent < MESSAGES and sent - confirmed < WINDOW:
                    sent += 1
                    client.send(PUBLISH, {"seq": sent, "exchange": "", "key": queue, "persistent": persistent},
                                body_of(sent))
                op, header = client.receive()
            except socket.timeout:
                self.fail(f"the broker stopped taking publishes after {confirmed} confirms: paused by the memory "
                          "alarm, so it did not page bodies out")
            self.assertNotEqual(op, FLOW, f"flow {header} after {confirmed} confirms: the broker did not page")
            self.assertEqual(op, CONFIRM, header)
            self.assertFalse(header.get("nack", False), header)
            confirmed = header["upto"]

    def consume_all(self, client, queue):
        client.send(SUBSCRIBE, {"rid": 2, "sub": 1, "queue": queue, "no_ack": True, "credit": MESSAGES})
        received = 0
        while received < MESSAGES:
            op, header = client.receive()
            if op == OK:
                continue
            self.assertEqual(op, DELIVER, header)
            received += 1
            body = client.last_payload
            self.assertEqual(len(body), BODY_SIZE)
            self.assertTrue(body == body_of(received), f"message {received}: its body came back different")

    def run_queue(self, name, durable, persistent):
        publisher = self.connect()
        self.declare(publisher, name, durable)
        self.publish_all(publisher, name, persistent)
        self.consume_all(self.connect(), name)

    def test_transient_messages_past_the_watermark_page_to_the_scratch_file(self):
        self.run_queue("transient", durable=False, persistent=False)

    def test_persistent_messages_past_the_watermark_are_read_back_from_the_store(self):
        self.run_queue("persistent", durable=True, persistent=True)


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
