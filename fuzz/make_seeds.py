#!/usr/bin/env python3
"""Writes the fuzz seed corpora from the test vectors (vectors/*.json), one file per vector and target.

Run with Debian's python: /usr/bin/python3 fuzz/make_seeds.py. Files are named seed-<vector name>, so that a
rerun rewrites the same files; inputs kept from fuzzer findings are named crash-* or regress-* and are left alone.
"""
import json
import pathlib
import struct
import zlib

import msgpack

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = HERE.parent / "vectors"
PREAMBLE = b"FMQ1"


def load(name):
    return json.loads((VECTORS / name).read_text())["vectors"]


def write(target, name, data):
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ("seed-" + name)).write_bytes(data)


def split_frame(frame):
    """(op, header bytes) of a TCP frame: len u32, op u8, hlen u32, header, payload."""
    op = frame[4]
    hlen = int.from_bytes(frame[5:9], "big")
    return op, frame[9:9 + hlen]


def frame(op, header, payload=b""):
    """A TCP frame, encoded here with python-msgpack (independent of the C++ codec)."""
    h = msgpack.packb(header, use_bin_type=True)
    return struct.pack(">IBI", 5 + len(h) + len(payload), op, len(h)) + h + payload


def session_scenario():
    """A client's day: topology, publishes with confirms, a subscription, acks, nacks, get, deletes."""
    return b"".join([
        frame(0x12, {"rid": 1, "name": "q", "args": {"x-max-priority": 5, "x-dead-letter-exchange": "x"}}),
        frame(0x12, {"rid": 15, "name": "t", "args": {"x-message-ttl": 3, "x-max-length": 2, "x-overflow": "reject-publish-dlx",
                                                      "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "q",
                                                      "x-expires": 50, "x-single-active-consumer": True}}),
        frame(0x20, {"seq": 4, "key": "t", "props": {"expiration": 1, "priority": 9}}, b"ttl"),
        frame(0x20, {"seq": 5, "key": "t"}, b"over"),
        frame(0x20, {"seq": 6, "key": "t"}, b"over again"),
        frame(0x12, {"rid": 2, "name": "", "exclusive": True, "auto_delete": True}),
        frame(0x10, {"rid": 3, "name": "x", "type": "topic", "args": {"alternate-exchange": "h"}}),
        frame(0x10, {"rid": 4, "name": "h", "type": "headers", "auto_delete": True}),
        frame(0x15, {"rid": 5, "exchange": "x", "queue": "q", "key": "a.#"}),
        frame(0x15, {"rid": 6, "exchange": "x", "to_exchange": "h", "key": "*.b"}),
        frame(0x15, {"rid": 7, "exchange": "h", "queue": "q", "args": {"x-match": "any", "k": 1}}),
        frame(0x20, {"seq": 1, "exchange": "x", "key": "a.b", "mandatory": True, "headers": {"k": 1}}, b"one"),
        frame(0x20, {"seq": 2, "exchange": "x", "key": "zz", "mandatory": True}, b"two"),
        frame(0x20, {"seq": 3, "key": "q", "props": {"user_id": "guest", "priority": 3}}, b"three"),
        frame(0x30, {"rid": 8, "sub": 1, "queue": "q", "credit": 2}),
        frame(0x35, {"tag": 1}),
        frame(0x36, {"tag": 2, "requeue": True}),
        frame(0x32, {"sub": 1, "credit": 3}),
        frame(0x37, {"rid": 9, "queue": "q"}),
        frame(0x35, {"tag": 0, "multiple": True}),
        frame(0x31, {"rid": 10, "sub": 1}),
        frame(0x16, {"rid": 11, "exchange": "x", "queue": "q", "key": "a.#"}),
        frame(0x14, {"rid": 12, "name": "q"}),
        frame(0x13, {"rid": 13, "name": "q", "if_empty": True}),
        frame(0x11, {"rid": 14, "name": "x"}),
        frame(0x03, {}),
    ])


def store_record(kind, body):
    """A message store record (reference-broker/store/store_record.h), written here independently of the C++:
    size u32, CRC-32 of type and body u32, type u8, body."""
    typed = bytes([kind]) + body
    return struct.pack(">II", len(typed), zlib.crc32(typed)) + typed


def store_str(s):
    return struct.pack(">I", len(s)) + s


def store_segment():
    """A segment as the store writes one: publishes to two queues, a delivery, a removal, a queue dropped."""
    q1, q2 = b"/\x00orders", b"/\x00audit"
    message = frame(0x20, {"exchange": "ex", "key": "k", "persistent": True,
                           "props": {"message_id": "m1", "expiration": 60000},
                           "headers": {"n": -1, "f": 1.5, "b": b"\x00\x01", "a": [1, "x"]}}, b"body")[4:]
    refs = store_str(q1) + struct.pack(">QQB", 1, 0, 0) + store_str(q2) + struct.pack(">QQB", 7, 1700000000000, 1)
    publish = store_record(1, struct.pack(">QI", 1, 2) + refs + message)
    delivered = store_record(2, struct.pack(">Q", 1) + store_str(q1))
    removed = store_record(3, struct.pack(">Q", 1) + store_str(q2))
    dropped = store_record(4, store_str(q1))
    return publish + delivered + removed + dropped


def main():
    frames = load("frames.json") + load("encodings.json")
    for v in frames:
        frame = bytes.fromhex(v["frame"])
        op, header = split_frame(frame)
        write("fuzz_frame_decoder", v["name"], bytes([len(frame) % 64]) + PREAMBLE + frame)
        write("fuzz_header_decoder", v["name"], bytes([op]) + header)
        write("fuzz_round_trip", v["name"], frame)
    # Sessions: realistic request sequences built from the vectors' client-to-server frames.
    client_ops = {0x05, 0x03, 0x04, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x20, 0x30, 0x31, 0x32, 0x35, 0x36, 0x37}
    client_frames = [bytes.fromhex(v["frame"]) for v in load("frames.json") if v["op"] in client_ops]
    for routing in (0x00, 0x0f, 0xf0):
        write("fuzz_session", "scenario-%02x" % routing, bytes([routing]) + session_scenario())
    for routing in (0x00, 0x55, 0xff):
        write("fuzz_session", "client-frames-%02x" % routing, bytes([routing]) + b"".join(client_frames))
    for v in frames:
        if v["op"] in client_ops:
            write("fuzz_session", v["name"], b"\x00" + bytes.fromhex(v["frame"]))
    # Every frame of frames.json in one stream: sessions of several frames.
    stream = b"".join(bytes.fromhex(v["frame"]) for v in load("frames.json"))
    write("fuzz_frame_decoder", "all-frames", b"\x07" + PREAMBLE + stream)
    write("fuzz_round_trip", "all-frames", stream)
    for v in load("invalid.json"):
        data = bytes.fromhex(v["input"])
        if v["framing"] == "stream" and not v.get("includes_preamble"):
            data = PREAMBLE + data
        write("fuzz_frame_decoder", v["name"], b"\x01" + data)
    for v in load("urls.json"):
        write("fuzz_url", v["name"], v["url"].encode())
    # Segment files: a whole one, one cut short (a torn tail), one with a damaged record in the middle.
    segment = store_segment()
    write("fuzz_store_record", "segment", segment)
    write("fuzz_store_record", "torn-tail", segment[:-5])
    damaged = bytearray(segment)
    damaged[20] ^= 0xff
    write("fuzz_store_record", "damaged", bytes(damaged))
    for name, request in http_requests():
        write("fuzz_http_request", name, request)
    # AMQP 0-9-1: byte 0 < 0x80 fuzzes the decoders, >= 0x80 a whole connection.
    for name, stream in amqp_streams():
        write("fuzz_amqp_frame", name, b"\x05" + stream)
        write("fuzz_amqp_frame", "connection-" + name, b"\x85" + stream)


AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


def amqp_frame(kind, channel, payload):
    """An AMQP 0-9-1 frame: type, channel, size, payload, frame-end 0xCE."""
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def shortstr(s):
    return bytes([len(s)]) + s


def longstr(s):
    return struct.pack(">I", len(s)) + s


def amqp_method(channel, class_id, method_id, fields=b""):
    return amqp_frame(1, channel, struct.pack(">HH", class_id, method_id) + fields)


def amqp_table(entries):
    """A field table from (name, type letter, encoded value) triples."""
    body = b"".join(shortstr(n) + t + v for n, t, v in entries)
    return longstr(body)


def amqp_streams():
    """Client conversations: the handshake, then a channel that declares, publishes, gets and acks."""
    handshake = (AMQP_HEADER
                 + amqp_method(0, 10, 11, amqp_table([(b"product", b"S", longstr(b"seed"))]) + shortstr(b"PLAIN")
                               + longstr(b"\x00guest\x00guest") + shortstr(b"en_US"))
                 + amqp_method(0, 10, 31, struct.pack(">HIH", 10, 131072, 0))
                 + amqp_method(0, 10, 40, shortstr(b"/") + shortstr(b"") + b"\x00"))
    args = amqp_table([(b"x-max-length", b"I", struct.pack(">i", 10)), (b"x-message-ttl", b"l", struct.pack(">q", 60000)),
                       (b"nested", b"F", amqp_table([(b"a", b"A", longstr(b"t\x01" + b"V"))])),
                       (b"dec", b"D", b"\x02" + struct.pack(">i", 314)), (b"ts", b"T", struct.pack(">Q", 1600000000)),
                       (b"bytes", b"x", longstr(b"\x00\x01")), (b"f", b"f", struct.pack(">f", 1.5))])
    properties = (struct.pack(">HHQH", 60, 0, 5, 0b1011_0000_1000_0000) + shortstr(b"text/plain")
                  + amqp_table([(b"k", b"S", longstr(b"v"))]) + b"\x02" + shortstr(b"60000"))
    channel = (amqp_method(1, 20, 10, shortstr(b""))
               + amqp_method(1, 50, 10, struct.pack(">H", 0) + shortstr(b"q") + b"\x00" + args)
               + amqp_method(1, 85, 10, b"\x00")
               + amqp_method(1, 60, 40, struct.pack(">H", 0) + shortstr(b"") + shortstr(b"q") + b"\x01")
               + amqp_frame(2, 1, properties) + amqp_frame(3, 1, b"hello")
               + amqp_method(1, 60, 10, struct.pack(">IHB", 0, 1, 0))
               + amqp_method(1, 60, 20, struct.pack(">H", 0) + shortstr(b"q") + shortstr(b"c1") + b"\x00" + longstr(b""))
               + amqp_method(1, 60, 80, struct.pack(">QB", 1, 0))
               + amqp_method(1, 60, 70, struct.pack(">H", 0) + shortstr(b"q") + b"\x01")
               + amqp_method(1, 20, 40, struct.pack(">H", 200) + shortstr(b"bye") + struct.pack(">HH", 0, 0))
               + amqp_method(0, 10, 50, struct.pack(">H", 200) + shortstr(b"bye") + struct.pack(">HH", 0, 0)))
    yield "amqp-session", handshake + channel
    yield "amqp-bad-frame-end", handshake + channel[:-1] + b"\x00"
    yield "amqp-old-protocol-header", b"AMQP\x01\x01\x00\x09"
    yield "amqp-unknown-field-type", handshake + amqp_method(1, 20, 10, shortstr(b"")) + amqp_method(
        1, 50, 10, struct.pack(">H", 0) + shortstr(b"q") + b"\x00" + amqp_table([(b"k", b"Z", b"")]))
    yield "amqp-heartbeat", handshake + amqp_frame(8, 0, b"")


def http_requests():
    """What the HTTP listener of ports 15672 and 15671 reads: an upgrade of /fire, and what it must refuse."""
    upgrade = ("GET /fire?vhost=%2Fdev HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    yield "upgrade", upgrade.encode()
    yield "plain-get", b"GET /fire HTTP/1.1\r\nHost: localhost\r\n\r\n"
    yield "other-path", b"GET /api/overview HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    yield "bad-vhost-post", (b"POST /fire?vhost=%zz HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nUpgrade: websocket\r\n"
                             b"Connection: upgrade\r\nSec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\nhello")
    yield "chunked-short-key", (b"GET /fire?a=1&vhost=&vhost=x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                                b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\n\r\n"
                                b"3\r\nabc\r\n0\r\n\r\n")


if __name__ == "__main__":
    main()
