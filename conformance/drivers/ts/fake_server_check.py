#!/usr/bin/python3
"""The TypeScript driver's client keeps the heartbeat and flow rules (which client cases check through the
broker too), seen from a fake server on a local socket (it reads FMQ1 and hello, sends welcome, then does what
the check needs):

- heartbeats: with a negotiated interval h, "each side sends ping when it has sent nothing for h / 2 seconds.
  Each side considers the peer dead when it has received nothing for 2 x h seconds." (the driver reports the
  connection closed, by heartbeat);
- flow: "Clients stop publishing until pause: false." (also when a resume and a new pause come in one read).

Usage: fake_server_check.py NODE DRIVER_JS
"""
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

import msgpack

WELCOME, PING, FLOW, PUBLISH = 0x02, 0x03, 0x08, 0x20
H = 1  # the heartbeat interval the heartbeat check negotiates, in seconds


def read_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the client closed the connection")
        data += chunk
    return data


def read_frame(conn):
    (length,) = struct.unpack(">I", read_exactly(conn, 4))
    body = read_exactly(conn, length)
    (hlen,) = struct.unpack(">I", body[1:5])
    return body[0], msgpack.unpackb(body[5:5 + hlen]) if hlen else {}


def frame(op, header):
    h = msgpack.packb(header)
    return struct.pack(">IBI", 1 + 4 + len(h), op, len(h)) + h


def all_of(*conditions):
    """An `until` for Session.watch that is true once each condition has held for some frame or line, in any
    order."""
    met = [False] * len(conditions)

    def until(what, value):
        for i, condition in enumerate(conditions):
            met[i] = met[i] or condition(what, value)
        return all(met)
    return until


class Session:
    """The driver, connected to the fake server, which has sent welcome."""

    def __init__(self, node, driver_js, heartbeat):
        server = socket.create_server(("127.0.0.1", 0))
        self.driver = subprocess.Popen([node, driver_js], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pending_lines = []  # read from the driver's stdout, not yet looked at
        self.partial = b""
        self.command({"id": 1, "cmd": "connect", "url": f"fire://127.0.0.1:{server.getsockname()[1]}", "heartbeat": heartbeat})
        self.conn, _ = server.accept()
        server.close()
        if read_exactly(self.conn, 4) != b"FMQ1":
            raise AssertionError("the client did not start with FMQ1")
        read_frame(self.conn)  # hello
        self.conn.sendall(frame(WELCOME, {"ver": 1, "server": {"name": "fake", "version": "0"}, "conn_id": "fake",
                                          "heartbeat": heartbeat, "max_frame": 1 << 20, "caps": []}))
        self.watched = [self.conn, self.driver.stdout]

    def command(self, command):
        self.driver.stdin.write(json.dumps(command) + "\n")
        self.driver.stdin.flush()

    def watch(self, seconds, until):
        """Frames from the client and lines from the driver, as (seconds since the start, 'frame' or 'line',
        op or line), for `seconds` or until `until(what, value)` is true."""
        start, seen = time.monotonic(), []
        while time.monotonic() - start < seconds:
            ready, _, _ = select.select(self.watched, [], [], 0.05)
            for source in ready:
                if source is self.conn:
                    try:
                        what, value = "frame", read_frame(self.conn)[0]
                    except EOFError:
                        self.watched.remove(self.conn)  # the client ended it; the driver says so next
                        continue
                    seen.append((round(time.monotonic() - start, 2), what, value))
                    if until(what, value):
                        return seen
                else:
                    self.read_lines()
                while self.pending_lines:
                    line = self.pending_lines.pop(0)
                    seen.append((round(time.monotonic() - start, 2), "line", line))
                    if until("line", line):
                        return seen
        return seen

    def read_lines(self):
        """Reads what the driver wrote (from the descriptor: select does not see lines in a Python buffer)."""
        data = self.partial + os.read(self.driver.stdout.fileno(), 65536)
        *lines, self.partial = data.split(b"\n")
        self.pending_lines += [json.loads(line) for line in lines]

    def end(self):
        self.driver.kill()
        self.driver.wait()
        self.conn.close()


def check_heartbeats(node, driver_js):
    session = Session(node, driver_js, H)
    try:
        seen = session.watch(2 * H + 2, lambda what, value: what == "line" and value.get("event") == "closed")
    finally:
        session.end()
    pings = [t for t, what, value in seen if what == "frame" and value == PING]
    closed = [t for t, what, value in seen if what == "line" and value.get("event") == "closed"]
    print(f"heartbeats: pings at {pings} s; closed reported after {closed} s of server silence")
    problems = []
    if len(pings) < 2 or pings[0] > H:
        problems.append(f"heartbeats: expected a ping every {H / 2} s of silence")
    if not closed or not 2 * H <= closed[0] <= 2 * H + 1:
        problems.append(f"heartbeats: expected the server declared dead between {2 * H} and {2 * H + 1} s")
    return problems


def check_flow(node, driver_js):
    session = Session(node, driver_js, 0)
    try:
        session.watch(2, lambda what, value: what == "line" and value.get("id") == 1)  # connect's reply
        session.conn.sendall(frame(FLOW, {"pause": True}))
        session.watch(2, lambda what, value: what == "line" and value.get("event") == "flow")
        session.command({"id": 2, "cmd": "publish", "exchange": "", "key": "q", "body": "held"})
        paused = session.watch(1, lambda what, value: False)
        session.conn.sendall(frame(FLOW, {"pause": False}))
        # Until both the publish frame and the command's reply: the client sends the frame before it writes the
        # reply, but they come on two channels (the socket, the driver's stdout), and the line can be read first.
        resumed = session.watch(2, all_of(lambda what, value: what == "frame" and value == PUBLISH,
                                          lambda what, value: what == "line" and value.get("id") == 2))
    finally:
        session.end()
    print(f"flow: while paused {paused}; after resume {resumed}")
    problems = []
    if paused:
        problems.append("flow: the client sent or reported something while paused")
    if not [v for _, what, v in resumed if what == "frame" and v == PUBLISH]:
        problems.append("flow: the client did not publish once resumed")
    if not [v for _, what, v in resumed if what == "line" and v.get("id") == 2 and v.get("ok")]:
        problems.append("flow: the publish command was not done once resumed")
    return problems


def check_flow_resume_and_pause_in_one_read(node, driver_js):
    """A resume and a new pause in one TCP chunk: the client has read the pause when it could send the held
    publish, so it holds it until the next resume."""
    session = Session(node, driver_js, 0)
    try:
        session.watch(2, lambda what, value: what == "line" and value.get("id") == 1)  # connect's reply
        session.conn.sendall(frame(FLOW, {"pause": True}))
        session.watch(2, lambda what, value: what == "line" and value.get("event") == "flow")
        session.command({"id": 2, "cmd": "publish", "exchange": "", "key": "q", "body": "held"})
        session.watch(0.5, lambda what, value: False)
        # One send of 2 small frames on loopback: the client reads them in one chunk.
        session.conn.sendall(frame(FLOW, {"pause": False}) + frame(FLOW, {"pause": True}))
        paused_again = session.watch(1, lambda what, value: False)
        session.conn.sendall(frame(FLOW, {"pause": False}))
        resumed = session.watch(2, all_of(lambda what, value: what == "frame" and value == PUBLISH,
                                          lambda what, value: what == "line" and value.get("id") == 2))
    finally:
        session.end()
    print(f"flow, resume and pause in one read: then {paused_again}; after the last resume {resumed}")
    problems = []
    if [v for _, what, v in paused_again if what == "frame" and v == PUBLISH]:
        problems.append("flow: the client published after a resume and a pause in one read")
    if not [v for _, what, v in resumed if what == "frame" and v == PUBLISH]:
        problems.append("flow: the client did not publish once resumed after a resume and a pause in one read")
    return problems


def main():
    node, driver_js = sys.argv[1:3]
    problems = (check_heartbeats(node, driver_js) + check_flow(node, driver_js) +
                check_flow_resume_and_pause_in_one_read(node, driver_js))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
