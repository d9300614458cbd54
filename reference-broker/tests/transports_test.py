#!/usr/bin/python3
"""The broker's four transports, tested as a separate process on real sockets with Python's own TLS and a
WebSocket client written here (independent of the broker's Beast and of the harness's client).

Covers: hello and close on fire, fires, ws and wss; the WebSocket endpoint's HTTP answers (404, 426, a bad
upgrade); the URL's ?vhost=; text, oversized, fragmented and never-finished messages; TLS 1.0/1.1 and plain
bytes refused on the TLS port; client certificates with --tls-ca; SIGTERM's close 320 over WebSocket; and that
abandoned half-open connections of every kind leave no descriptor behind while other connections go on.

Usage: transports_test.py BROKER_EXECUTABLE
"""
import base64, json, os, signal, socket, ssl, struct, subprocess, sys, tempfile, time, unittest

import msgpack

BROKER = None
HANDSHAKE_TIMEOUT_MS = 1500


def make_certificates(directory):
    """A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=FireMQ test CA")
    with open(os.path.join(directory, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", "san.cnf")


class Broker:
    """firemq-broker with every listener on a free port."""

    DEFINITIONS = {"users": [{"name": "guest", "password": "guest"}],
                   "vhosts": [{"name": "/"}, {"name": "dev"}],
                   "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "dev"}]}

    FREE_PORTS = ["--port", "0", "--tls-port", "0", "--ws-port", "0", "--wss-port", "0", "--amqp-port", "off",
                  "--amqps-port", "off"]

    def __init__(self, directory, *extra, definitions=None, listeners=FREE_PORTS, preexec_fn=None):
        self.directory = directory
        definitions_file = os.path.join(directory, "definitions.json")
        with open(definitions_file, "w") as f:
            json.dump(definitions or self.DEFINITIONS, f)
        ports = os.path.join(directory, "ports.json")
        if os.path.exists(ports):
            os.remove(ports)
        self.log = open(os.path.join(directory, "broker.log"), "ab")
        c = lambda name: os.path.join(directory, name)
        if listeners and "--amqps-port" not in listeners:
            # With its certificate the broker opens amqps on 5671 unless told otherwise, and tests run side by side:
            # only the default-ports test (listeners=[]) may take a default port.
            listeners = [*listeners, "--amqps-port", "off"]
        self.process = subprocess.Popen(
            [BROKER, "--bind", "127.0.0.1", *listeners,
             "--tls-cert", c("server.pem"), "--tls-key", c("server.key"), "--port-file", ports,
             "--data-dir", c("data"), "--definitions", definitions_file,
             "--handshake-timeout-ms", str(HANDSHAKE_TIMEOUT_MS), *extra],
            stdout=self.log, stderr=self.log, preexec_fn=preexec_fn)
        deadline = time.time() + 20
        while not os.path.exists(ports):
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the broker did not start: " + open(c("broker.log")).read()[-2000:])
            time.sleep(0.02)
        self.ports = json.load(open(ports))

    def open_descriptors(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)
        self.log.close()


def encode(op, header, payload=b""):
    """A frame without len: the WebSocket form; the stream form adds len."""
    h = msgpack.packb(header)
    return bytes([op]) + struct.pack(">I", len(h)) + h + payload


def stream_frame(op, header, payload=b""):
    body = encode(op, header, payload)
    return struct.pack(">I", len(body)) + body


def decode(body):
    hlen = struct.unpack(">I", body[1:5])[0]
    return body[0], msgpack.unpackb(body[5:5 + hlen], raw=False)


HELLO = {"ver": 1, "auth": {"mech": "plain", "user": "guest", "pass": "guest"}}
WELCOME, CLOSE, ERROR, PING, PONG = 0x02, 0x05, 0x07, 0x03, 0x04


class StreamClient:
    """fire:// and fires://: FMQ1, then length-prefixed frames."""

    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(5)
        self.buffer = b""

    def send(self, op, header, payload=b""):
        self.sock.sendall(stream_frame(op, header, payload))

    def receive(self):
        while len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">I", self.buffer[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        n = struct.unpack(">I", self.buffer[:4])[0]
        body, self.buffer = self.buffer[4:4 + n], self.buffer[4 + n:]
        return decode(body)


def first_answer_to_hello(sock):
    """fire:// or fires://: FMQ1 and a hello on `sock`; the op of the broker's first frame."""
    client = StreamClient(sock)
    client.sock.sendall(b"FMQ1")
    client.send(0x01, HELLO)
    return client.receive()[0]


class WsClient:
    """ws:// and wss://: an RFC 6455 client, masked frames, one FireMQ frame per binary message."""

    def __init__(self, sock, path="/fire", version="13", key=None, origin=None):
        self.sock = sock
        self.sock.settimeout(5)
        key = key if key is not None else base64.b64encode(os.urandom(16)).decode()
        origin_line = f"Origin: {origin}\r\n" if origin is not None else ""  # what a browser adds
        request = (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: {version}\r\n{origin_line}\r\n")
        sock.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = sock.recv(4096)
            if not chunk:
                break
            response += chunk
        head, _, self.buffer = response.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head else 0

    def send_raw(self, opcode, data, fin=True):
        mask = os.urandom(4)
        n = len(data)
        first = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 65536:
            length = bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(first + length + mask + masked)

    def send(self, op, header, payload=b""):
        self.send_raw(0x2, encode(op, header, payload))

    def receive_message(self):
        """(opcode, data) of the next WebSocket frame from the server, or None at the end of the stream."""
        def need(n):
            while len(self.buffer) < n:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return False
                self.buffer += chunk
            return True
        if not need(2):
            return None
        opcode, n, start = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F, 2
        if n == 126:
            need(4)
            n, start = struct.unpack(">H", self.buffer[2:4])[0], 4
        elif n == 127:
            need(10)
            n, start = struct.unpack(">Q", self.buffer[2:10])[0], 10
        if not need(start + n):
            return None
        data, self.buffer = self.buffer[start:start + n], self.buffer[start + n:]
        return opcode, data

    def receive(self):
        message = self.receive_message()
        if message is None or message[0] != 0x2:
            return None
        return decode(message[1])

    def close_code(self):
        message = self.receive_message()
        while message is not None and message[0] != 0x8:
            message = self.receive_message()
        return struct.unpack(">H", message[1][:2])[0] if message and len(message[1]) >= 2 else None


class TransportsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name)
        cls.tls = ssl.create_default_context(cafile=os.path.join(cls.temp.name, "ca.pem"))

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.temp.cleanup()

    def tcp(self, scheme):
        return socket.create_connection(("127.0.0.1", self.broker.ports[scheme]), timeout=5)

    def tls_socket(self, scheme, context=None):
        return (context or self.tls).wrap_socket(self.tcp(scheme), server_hostname="localhost")

    def open(self, scheme, path="/fire"):
        if scheme == "fire":
            client = StreamClient(self.tcp("fire"))
            client.sock.sendall(b"FMQ1")
        elif scheme == "fires":
            client = StreamClient(self.tls_socket("fires"))
            client.sock.sendall(b"FMQ1")
        else:
            sock = self.tcp("ws") if scheme == "ws" else self.tls_socket("wss")
            client = WsClient(sock, path)
            self.assertEqual(client.status, 101)
        return client

    def welcome(self, client, header=HELLO):
        client.send(0x01, header)
        op, reply = client.receive()
        self.assertEqual(op, WELCOME, reply)
        return reply

    def test_hello_ping_and_close_on_every_transport(self):
        for scheme in ("fire", "fires", "ws", "wss"):
            with self.subTest(scheme=scheme):
                client = self.open(scheme)
                welcome = self.welcome(client)
                self.assertIn(" -> 127.0.0.1:%d" % self.broker.ports[scheme], welcome["conn_id"])
                client.send(PING, {})
                self.assertEqual(client.receive()[0], PONG)
                client.send(CLOSE, {"code": 200, "msg": "bye"})
                self.assertEqual(client.receive(), (CLOSE, {"code": 200, "msg": "closed"}))

    def test_websocket_close_follows_the_fire_close(self):
        client = self.open("ws")
        self.welcome(client)
        client.send(CLOSE, {"code": 200, "msg": "bye"})
        self.assertEqual(client.receive()[0], CLOSE)
        self.assertEqual(client.close_code(), 1000)

    def test_another_path_is_404_and_not_upgraded(self):
        client = WsClient(self.tcp("ws"), path="/elsewhere")
        self.assertEqual(client.status, 404)

    def test_plain_http_request_on_the_endpoint_is_426(self):
        sock = self.tcp("ws")
        sock.sendall(b"GET /fire HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertIn(b" 426 ", sock.recv(4096))

    def test_upgrade_with_a_wrong_version_or_no_key_is_refused(self):
        self.assertNotEqual(WsClient(self.tcp("ws"), version="8").status, 101)
        self.assertNotEqual(WsClient(self.tcp("ws"), key="").status, 101)

    def test_url_vhost_is_the_connections_vhost(self):
        client = self.open("ws", "/fire?vhost=dev")
        self.welcome(client, dict(HELLO, vhost=""))
        # A queue declared there is not in vhost /.
        client.send(0x12, {"rid": 1, "name": "transports-test-dev-only"})
        self.assertEqual(client.receive()[0], 0x06)
        other = self.open("ws", "/fire?vhost=%2F")
        self.welcome(other)
        other.send(0x12, {"rid": 1, "name": "transports-test-dev-only", "passive": True})
        op, reply = other.receive()
        self.assertEqual((op, reply["code"]), (ERROR, 404))

    def test_url_vhost_and_hello_vhost_that_differ_are_403(self):
        client = self.open("ws", "/fire?vhost=dev")
        client.send(0x01, dict(HELLO, vhost="/"))
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 403, True))

    def test_text_message_is_501_then_close_1003(self):
        client = self.open("ws")
        client.send_raw(0x1, b"not a frame")
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 501, True))
        self.assertIn("text", reply["msg"])
        self.assertEqual(client.close_code(), 1003)

    def test_fragmented_message_is_one_frame(self):
        client = self.open("wss")
        body = encode(0x01, HELLO)
        client.send_raw(0x2, body[:3], fin=False)
        client.send_raw(0x0, body[3:10], fin=False)
        client.send_raw(0x0, body[10:], fin=True)
        self.assertEqual(client.receive()[0], WELCOME)

    def test_message_over_the_limit_is_501_before_it_is_all_sent(self):
        client = self.open("ws")
        # 64 KiB of a message announced as 1 MiB: refused at the 65,536-byte limit, the rest never needed.
        header = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", 1 << 20) + b"\0\0\0\0"
        client.sock.sendall(header + b"\x01" + b"\0" * 70000)
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 501, True))
        self.assertIn("65536", reply["msg"])

    def test_two_frames_in_one_message_are_refused(self):
        client = self.open("ws")
        client.send_raw(0x2, encode(0x01, HELLO) + encode(PING, {}))
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 501, True))

    def test_websocket_ping_gets_pong(self):
        client = self.open("ws")
        client.send_raw(0x9, b"are you there")
        self.assertEqual(client.receive_message(), (0xA, b"are you there"))

    def test_plain_bytes_on_the_tls_port_are_refused_and_others_go_on(self):
        witness = self.open("fires")
        self.welcome(witness)
        sock = self.tcp("fires")
        sock.sendall(b"FMQ1" + stream_frame(0x01, HELLO))
        sock.settimeout(5)
        try:
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
        witness.send(PING, {})
        self.assertEqual(witness.receive()[0], PONG)

    def test_tls_1_1_is_refused(self):
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.check_hostname = False
        old.verify_mode = ssl.CERT_NONE
        old.set_ciphers("DEFAULT:@SECLEVEL=0")
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        for scheme in ("fires", "wss"):
            with self.subTest(scheme=scheme), self.assertRaises((ssl.SSLError, ConnectionResetError)):
                self.tls_socket(scheme, old)

    def s_client(self, scheme, cipher):
        """openssl s_client over TLS 1.2 offering only `cipher`: (handshake done, the cipher it reports)."""
        result = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.broker.ports[scheme]}",
                                 "-tls1_2", "-cipher", cipher, "-servername", "localhost"],
                                input=b"", capture_output=True, timeout=20)
        out = result.stdout.decode(errors="replace")
        chosen = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("Cipher    :")]
        return result.returncode == 0 and bool(chosen) and chosen[0] != "0000", chosen[0] if chosen else None

    def test_tls_1_2_takes_forward_secret_aead_suites_only_in_the_servers_order(self):
        for scheme in ("fires", "wss"):
            with self.subTest(scheme=scheme):
                # Static RSA key exchange, CBC with SHA-1 MACs: refused.
                for weak in ("AES128-SHA", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA"):
                    self.assertFalse(self.s_client(scheme, weak)[0], weak)
                self.assertEqual(self.s_client(scheme, "ECDHE-RSA-AES128-GCM-SHA256"), (True, "ECDHE-RSA-AES128-GCM-SHA256"))
                # The server's preference wins: offered last, AES-128-GCM (first in the broker's list) is chosen.
                self.assertEqual(self.s_client(scheme, "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256"),
                                 (True, "ECDHE-RSA-AES128-GCM-SHA256"))

    def test_abandoned_handshakes_leave_nothing_behind(self):
        witness = self.open("fire")
        self.welcome(witness)
        baseline = self.broker.open_descriptors()
        abandoned = []
        for _ in range(20):
            abandoned.append(self.tcp("fire"))                       # nothing sent
            half = self.tcp("fire"); half.sendall(b"FMQ1\0\0"); abandoned.append(half)
            abandoned.append(self.tcp("fires"))                      # no ClientHello
            http = self.tcp("ws"); http.sendall(b"GET /fire HTTP/1.1\r\nHo"); abandoned.append(http)
            abandoned.append(self.tcp("wss"))
            upgraded = WsClient(self.tcp("ws")); upgraded.send_raw(0x2, b"\x01\0", fin=False)
            abandoned.append(upgraded.sock)                          # a fragment, then silence
        vanished = [self.tcp(s) for s in ("fire", "fires", "ws", "wss") for _ in range(10)]
        for sock in vanished:
            sock.close()
        witness.send(PING, {})
        self.assertEqual(witness.receive()[0], PONG)
        # The handshake deadline closes what is left half-open.
        deadline = time.time() + HANDSHAKE_TIMEOUT_MS / 1000 + 5
        while self.broker.open_descriptors() > baseline and time.time() < deadline:
            time.sleep(0.1)
        self.assertLessEqual(self.broker.open_descriptors(), baseline)
        for sock in abandoned:
            sock.close()
        witness.send(PING, {})
        self.assertEqual(witness.receive()[0], PONG)


class ClientCertificateTest(unittest.TestCase):
    def test_tls_ca_requires_a_client_certificate(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, "--tls-ca", os.path.join(temp, "ca.pem"))
            try:
                context = ssl.create_default_context(cafile=os.path.join(temp, "ca.pem"))
                anonymous = context.wrap_socket(
                    socket.create_connection(("127.0.0.1", broker.ports["fires"]), timeout=5),
                    server_hostname="localhost")
                # TLS 1.3 reports the refusal at the first read.
                with self.assertRaises((ssl.SSLError, ConnectionResetError)):
                    anonymous.sendall(b"FMQ1" + stream_frame(0x01, HELLO))
                    if not anonymous.recv(1):
                        raise ConnectionResetError("closed")
                context.load_cert_chain(os.path.join(temp, "client.pem"), os.path.join(temp, "client.key"))
                self.assertEqual(first_answer_to_hello(context.wrap_socket(
                    socket.create_connection(("127.0.0.1", broker.ports["fires"]), timeout=5),
                    server_hostname="localhost")), WELCOME)
            finally:
                broker.stop()


class ShutdownTest(unittest.TestCase):
    def test_sigterm_sends_close_320_over_websocket_and_exits_0(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp)
            client = WsClient(ssl.create_default_context(cafile=os.path.join(temp, "ca.pem")).wrap_socket(
                socket.create_connection(("127.0.0.1", broker.ports["wss"]), timeout=5), server_hostname="localhost"))
            client.send(0x01, HELLO)
            self.assertEqual(client.receive()[0], WELCOME)
            broker.process.send_signal(signal.SIGTERM)
            op, reply = client.receive()
            self.assertEqual((op, reply["code"]), (CLOSE, 320))
            client.send(CLOSE, {"code": 200, "msg": "bye"})
            self.assertEqual(broker.process.wait(10), 0)
            broker.stop()


class DefaultPortsTest(unittest.TestCase):
    """The spec's "Transports": TCP on 5673 and TLS on 5674 by default (and the URL defaults 15672 and 15671 for
    ws and wss); AMQP 0-9-1 on 5672, and inside TLS on 5671, as RabbitMQ's. The conformance suite tests the URL it
    is given, so the reference broker's defaults are checked here."""

    DEFAULTS = {"fire": 5673, "fires": 5674, "ws": 15672, "wss": 15671, "amqp": 5672, "amqps": 5671}

    def test_the_broker_listens_on_the_specs_default_ports(self):
        taken = [port for port in self.DEFAULTS.values() if port_in_use(port)]
        if taken:
            self.skipTest(f"another program listens on {taken} on this machine")
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, listeners=[])
            try:
                self.assertEqual(broker.ports, self.DEFAULTS)
                self.assertEqual(first_answer_to_hello(socket.create_connection(("127.0.0.1", 5673), timeout=5)),
                                 WELCOME)
                tls = ssl.create_default_context(cafile=os.path.join(temp, "ca.pem"))
                self.assertEqual(first_answer_to_hello(tls.wrap_socket(
                    socket.create_connection(("127.0.0.1", 5674), timeout=5), server_hostname="localhost")), WELCOME)
            finally:
                broker.stop()


def port_in_use(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
