#!/usr/bin/env python3
"""Writes fuzz/firemq.dict, the libFuzzer dictionary: the preamble, op bytes, MessagePack markers, every
header key and argument name as a fixstr, and URL pieces. Run: /usr/bin/python3 fuzz/make_dict.py"""
import pathlib

KEYS = """ver vhost auth mech user pass heartbeat client caps server name version conn_id max_frame
code msg rid messages consumers empty fatal pause type durable auto_delete internal passive args if_unused
exclusive if_empty exchange queue to_exchange key seq mandatory persistent props headers upto nack sub credit
no_ack tag redelivered multiple requeue remaining content_type content_encoding correlation_id reply_to
expiration message_id timestamp user_id app_id priority plain x-match x-message-ttl x-expires x-max-length
x-max-length-bytes x-overflow x-dead-letter-exchange x-dead-letter-routing-key x-single-active-consumer
x-max-priority x-queue-type alternate-exchange"""
OPS = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
       0x20, 0x21, 0x22, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39]
MARKERS = [("len_min", b"\x00\x00\x00\x05"), ("hlen0", b"\x00\x00\x00\x00"), ("len_64k", b"\x00\x00\xff\xfc"),
           ("map16", b"\xde"), ("map32", b"\xdf"), ("array16", b"\xdc"), ("array32", b"\xdd"),
           ("str8", b"\xd9"), ("bin8", b"\xc4"), ("ext8", b"\xc7"), ("fixext1", b"\xd4"),
           ("float32", b"\xca"), ("float64", b"\xcb"), ("uint64", b"\xcf"), ("int64", b"\xd3"),
           ("nil", b"\xc0"), ("true", b"\xc3"), ("false", b"\xc2")]
URL_PIECES = ["fire://", "fires://", "ws://", "wss://", "?vhost=", "%2F", "@", "[::1]"]


def escape(data):
    return "".join("\\x%02x" % c if c < 0x20 or c >= 0x7f or c in (0x22, 0x5c) else chr(c) for c in data)


def main():
    lines = ["# libFuzzer dictionary for FireMQ frames (written by make_dict.py).", 'preamble="FMQ1"']
    lines += ['op_%02x="%s"' % (op, escape(bytes([op]))) for op in OPS]
    lines += ['%s="%s"' % (name, escape(data)) for name, data in MARKERS]
    for key in sorted(set(KEYS.split())):
        encoded = key.encode()
        lines.append('key_%s="%s"' % (key.replace("-", "_"), escape(bytes([0xa0 | len(encoded)]) + encoded)))
    lines += ['url_%d="%s"' % (i, piece) for i, piece in enumerate(URL_PIECES)]
    (pathlib.Path(__file__).resolve().parent / "firemq.dict").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
