#!/usr/bin/python3
"""An --alarm-command for the reference broker (or any FireMQ broker with a low memory high watermark): raises a
memory alarm by leaving a large message in a queue of its own, and clears it by deleting that queue.

    memory_alarm_command.py HOST PORT [BALLAST_BYTES]    (FIREMQ_ALARM=raise or FIREMQ_ALARM=clear)

Start the broker with a watermark below BALLAST_BYTES (default 1 100 000), e.g. --memory-high-watermark 1000000.
`raise` returns once the broker told this publisher flow {pause: true}: the alarm holds. `clear` returns once the
queue is deleted; the broker's flow {pause: false} follows as its memory falls. A broker vendor writes the same
for their broker (for RabbitMQ: rabbitmqctl set_vm_memory_high_watermark 0.0000001, then 0.4)."""
import os
import socket
import struct
import sys

import msgpack

HELLO, WELCOME, OK, ERROR, FLOW = 0x01, 0x02, 0x06, 0x07, 0x08
DECLARE_QUEUE, DELETE_QUEUE, PUBLISH = 0x12, 0x13, 0x20
BALLAST_QUEUE = "conform-alarm-ballast"


class Connection:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.buffer = b""
        self.sock.sendall(b"FMQ1")
        self.send(HELLO, {"ver": 1, "auth": {"mech": "plain", "user": os.environ.get("FIREMQ_ALARM_USER", "guest"),
                                             "pass": os.environ.get("FIREMQ_ALARM_PASS", "guest")}})
        self.expect(WELCOME)

    def send(self, op, header, payload=b""):
        h = msgpack.packb(header)
        body = bytes([op]) + struct.pack(">I", len(h)) + h + payload
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def receive(self):
        while len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">I", self.buffer[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("the broker closed the connection")
            self.buffer += chunk
        n = struct.unpack(">I", self.buffer[:4])[0]
        body, self.buffer = self.buffer[4:4 + n], self.buffer[4 + n:]
        hlen = struct.unpack(">I", body[1:5])[0]
        return body[0], (msgpack.unpackb(body[5:5 + hlen], raw=False) if hlen else {})

    def expect(self, op, **fields):
        """The next frame of `op` whose header has `fields`; an error frame ends the command."""
        while True:
            got, header = self.receive()
            if got == ERROR:
                sys.exit(f"the broker answered error {header}")
            if got == op and all(header.get(k) == v for k, v in fields.items()):
                return header


def main():
    if len(sys.argv) not in (3, 4) or os.environ.get("FIREMQ_ALARM") not in ("raise", "clear"):
        sys.exit("usage: FIREMQ_ALARM=raise|clear memory_alarm_command.py HOST PORT [BALLAST_BYTES]")
    host, port = sys.argv[1], int(sys.argv[2])
    ballast = int(sys.argv[3]) if len(sys.argv) == 4 else 1_100_000
    c = Connection(host, port)
    if os.environ["FIREMQ_ALARM"] == "raise":
        c.send(DECLARE_QUEUE, {"rid": 1, "name": BALLAST_QUEUE})
        c.expect(OK, rid=1)
        c.send(PUBLISH, {"key": BALLAST_QUEUE}, b"b" * ballast)
        c.expect(FLOW, pause=True)
    else:
        c.send(DELETE_QUEUE, {"rid": 1, "name": BALLAST_QUEUE})
        c.expect(OK, rid=1)
    c.sock.close()


if __name__ == "__main__":
    main()
