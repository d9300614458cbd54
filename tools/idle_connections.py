#!/usr/bin/env python3
"""What an idle FireMQ connection costs the broker (docs/benchmarks.md, issue 15).

Starts firemq-broker on free ports (or uses --port and --pid of a running one), reads its VmRSS from
/proc/PID/status, opens --count connections that each complete hello/welcome (guest/guest) and then stay idle,
reads VmRSS again and prints the difference per connection. --transport ws opens them over WebSocket (/fire).
--warm first makes each connection read one burst of frames (a 60 KiB publish to a missing exchange is
refused by a soft error, the connection stays open): what a connection that was once busy keeps while idle.

Raw sockets and a tiny MessagePack encoder, so it needs nothing beyond Python 3.
"""
import argparse, base64, json, os, resource, signal, socket, struct, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))


def msgpack(value):
    """Enough MessagePack for a hello and a publish header: maps, strings, small ints, bools."""
    if isinstance(value, bool):
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        assert 0 <= value < 128
        return bytes([value])
    if isinstance(value, str):
        raw = value.encode()
        assert len(raw) < 256
        return (bytes([0xA0 | len(raw)]) if len(raw) < 32 else b"\xd9" + bytes([len(raw)])) + raw
    if isinstance(value, dict):
        assert len(value) < 16
        return bytes([0x80 | len(value)]) + b"".join(msgpack(k) + msgpack(v) for k, v in value.items())
    raise TypeError(value)


def frame_body(op, header, payload=b""):
    """A frame without its len (a WebSocket message); the stream form puts len in front."""
    h = msgpack(header)
    return bytes([op]) + struct.pack(">I", len(h)) + h + payload


def stream_frame(op, header, payload=b""):
    body = frame_body(op, header, payload)
    return struct.pack(">I", len(body)) + body


HELLO = (1, {"ver": 1, "auth": {"mech": "plain", "user": "guest", "pass": "guest"}})
# A publish the broker refuses with a soft error (the exchange does not exist): a burst the reader must take in.
WARM = (16, {"seq": 0, "exchange": "idle-connections-missing", "key": "k"}, b"x" * (60 * 1024))


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def read_stream_frame(sock):
    (length,) = struct.unpack(">I", recv_exactly(sock, 4))
    return recv_exactly(sock, length)


def ws_message(payload):
    """One masked binary WebSocket message (a client must mask)."""
    mask = os.urandom(4)
    n = len(payload)
    head = b"\x82" + (bytes([0x80 | n]) if n < 126 else (bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536
                                                          else bytes([0x80 | 127]) + struct.pack(">Q", n)))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_ws_message(sock):
    b0, b1 = recv_exactly(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack(">H", recv_exactly(sock, 2))
    elif n == 127:
        (n,) = struct.unpack(">Q", recv_exactly(sock, 8))
    return recv_exactly(sock, n)


def open_fire(port, warm):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"FMQ1" + stream_frame(*HELLO))
    if read_stream_frame(sock)[0] != 2:
        raise RuntimeError("no welcome")
    if warm:
        sock.sendall(stream_frame(*WARM))
        read_stream_frame(sock)  # the soft error for the missing exchange
    return sock


def open_ws(port, warm):
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /fire HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += recv_exactly(sock, 1)
    if b" 101 " not in reply.split(b"\r\n")[0]:
        raise RuntimeError("upgrade refused: " + reply.split(b"\r\n")[0].decode())
    sock.sendall(ws_message(frame_body(*HELLO)))
    if read_ws_message(sock)[0] != 2:
        raise RuntimeError("no welcome")
    if warm:
        sock.sendall(ws_message(frame_body(*WARM)))
        read_ws_message(sock)
    return sock


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def start_broker(executable, directory):
    ports = os.path.join(directory, "ports.json")
    process = subprocess.Popen([executable, "--port", "0", "--ws-port", "0", "--tls-port", "off",
                                "--wss-port", "off", "--amqp-port", "off", "--data-dir",
                                os.path.join(directory, "data"), "--port-file", ports],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(directory, "broker.log"), "w"))
    for _ in range(300):
        if os.path.exists(ports) and os.path.getsize(ports) > 0:
            return process, json.load(open(ports))
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the broker did not report its ports")


def measure(pid, port, transport, count, warm):
    opener = open_fire if transport == "fire" else open_ws
    opener(port, warm).close()  # the first connection's one-off allocations (listener, session maps) not counted
    time.sleep(0.5)
    before = resident_bytes(pid)
    sockets = [opener(port, warm) for _ in range(count)]
    time.sleep(1)
    after = resident_bytes(pid)
    for s in sockets:
        s.close()
    return before, after


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default=os.path.join(HERE, "..", "build", "reference-broker", "firemq-broker"))
    parser.add_argument("--port", type=int, help="a running broker's port (with --pid); default: start one")
    parser.add_argument("--pid", type=int)
    parser.add_argument("--transport", choices=["fire", "ws"], default="fire")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warm", action="store_true", help="each connection reads a 60 KiB burst before idling")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    process = None
    if args.port is None:
        directory = tempfile.mkdtemp(prefix="idle-connections-")
        process, ports = start_broker(args.broker, directory)
        pid, port = process.pid, ports[args.transport]
    else:
        pid, port = args.pid, args.port
    try:
        before, after = measure(pid, port, args.transport, args.count, args.warm)
    finally:
        if process:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    print(f"{args.count} idle {args.transport} connections{' (warm)' if args.warm else ''}: broker RSS "
          f"{before / 1e6:.1f} MB before, {after / 1e6:.1f} MB after: {(after - before) / args.count:.0f} B per "
          f"connection")


if __name__ == "__main__":
    main()
