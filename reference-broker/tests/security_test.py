#!/usr/bin/python3
"""Secure by default (docs/security.md), tested on the broker as a separate process:

- guest may log in only from loopback (RabbitMQ's loopback_users) on every transport. No address off the machine
  is used: the broker is told that only 127.0.0.2 is loopback (--loopback-addresses, a flag for tests), so the
  test's connections from 127.0.0.1 are "remote";
- passwords are kept only as RabbitMQ's salted SHA-256 hashes, checked here with Python's hashlib;
- the data directory is 0700 and the files the broker writes in it 0600;
- a refused login is logged with the peer's address and the user name (escaped), never the password;
- a WebSocket upgrade from a web page of a foreign origin (its Origin header) is not loopback for
  loopback_users, whatever its peer address: guest is refused, other users are not (--trusted-origins).

Usage: security_test.py BROKER_EXECUTABLE
"""
import base64, hashlib, json, os, stat, sys, tempfile, unittest

import transports_test as transports
from transports_test import Broker, ERROR, HELLO, WELCOME, make_certificates

REMOTE_PASSWORD = "remote-secret"


def rabbit_hash(password, salt=b"\x01\x02\x03\x04"):
    """RabbitMQ's rabbit_password_hashing_sha256: base64(salt ++ SHA-256(salt ++ password))."""
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def matches(password_hash, password):
    raw = base64.b64decode(password_hash)
    return len(raw) == 36 and hashlib.sha256(raw[:4] + password.encode()).digest() == raw[4:]


DEFINITIONS = {
    "users": [{"name": "guest", "password": "guest"},
              {"name": "remote", "password_hash": rabbit_hash(REMOTE_PASSWORD),
               "hashing_algorithm": "rabbit_password_hashing_sha256"}],
    "vhosts": [{"name": "/"}],
    "permissions": [{"user": "guest", "vhost": "/"}, {"user": "remote", "vhost": "/"}]}


def hello(user, password):
    return dict(HELLO, auth={"mech": "plain", "user": user, "pass": password})


class SecurityTest(transports.TransportsTest):
    """Reuses the transports test's connections (open, welcome); its own tests are not run again here."""

    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, "--loopback-addresses", "127.0.0.2/32", definitions=DEFINITIONS)
        cls.tls = transports.ssl.create_default_context(cafile=os.path.join(cls.temp.name, "ca.pem"))

    def refusal(self, scheme, header):
        client = self.open(scheme)
        client.send(0x01, header)
        op, reply = client.receive()
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 403, True), reply)
        return reply["msg"]

    def test_guest_from_elsewhere_is_refused_on_every_transport_saying_why(self):
        for scheme in ("fire", "fires", "ws", "wss"):
            with self.subTest(scheme=scheme):
                self.assertIn("user 'guest' may only connect over loopback (loopback_users)",
                              self.refusal(scheme, hello("guest", "guest")))

    def test_a_wrong_password_from_elsewhere_does_not_tell_that_guest_is_loopback_only(self):
        self.assertEqual(self.refusal("fire", hello("guest", "wrong")), "login refused: unknown user or wrong password")

    def test_another_user_is_admitted_from_elsewhere_with_its_rabbitmq_hash(self):
        for scheme in ("fire", "fires", "ws", "wss"):
            with self.subTest(scheme=scheme):
                self.welcome(self.open(scheme), hello("remote", REMOTE_PASSWORD))

    def test_the_data_directory_is_private(self):
        data = os.path.join(self.temp.name, "data")
        mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
        self.assertEqual(mode(data), 0o700)
        self.assertEqual(mode(os.path.join(data, "messages")), 0o700)
        files = [os.path.join(data, "definitions.json"), os.path.join(data, "lock")]
        files += [os.path.join(data, "messages", name) for name in os.listdir(os.path.join(data, "messages"))]
        for path in files:
            self.assertEqual(mode(path), 0o600, path)

    def test_the_stored_definitions_hold_rabbitmq_hashes_and_no_password(self):
        with open(os.path.join(self.temp.name, "data", "definitions.json")) as f:
            text = f.read()
        self.assertNotIn('"password"', text)
        self.assertNotIn(REMOTE_PASSWORD, text)
        users = {u["name"]: u for u in json.loads(text)["users"]}
        for name, password in (("guest", "guest"), ("remote", REMOTE_PASSWORD)):
            self.assertEqual(users[name]["hashing_algorithm"], "rabbit_password_hashing_sha256")
            self.assertTrue(matches(users[name]["password_hash"], password), users[name])
        self.assertNotEqual(users["guest"]["password_hash"], rabbit_hash("guest"), "the salt is random")

    def test_a_refused_login_is_logged_with_the_peer_and_user_never_the_password(self):
        secret = "never-in-the-log-7f3a"
        self.refusal("fire", hello("guest", secret))
        self.refusal("fire", hello("forged\nfiremq-broker: fake line", secret))
        self.broker.log.flush()
        with open(os.path.join(self.temp.name, "broker.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
        self.assertIn("hello refused (403) from 127.0.0.1, user 'guest': login refused", log)
        self.assertIn("user 'forged\\x0afiremq-broker: fake line'", log)  # the newline is escaped: no forged line
        self.assertNotIn("\nfiremq-broker: fake line", log)
        self.assertNotIn(secret, log)

# Only SecurityTest's own tests: the inherited ones run in transports_test.py.
for name in [n for n in dir(transports.TransportsTest) if n.startswith("test_")]:
    if name not in SecurityTest.__dict__:
        setattr(SecurityTest, name, None)


class EmptyLoopbackUsersTest(unittest.TestCase):
    def test_an_empty_list_admits_guest_from_anywhere(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, "--loopback-addresses", "127.0.0.2/32", "--loopback-users", "",
                            definitions=DEFINITIONS)
            try:
                client = transports.StreamClient(
                    transports.socket.create_connection(("127.0.0.1", broker.ports["fire"]), timeout=5))
                client.sock.sendall(b"FMQ1")
                client.send(0x01, hello("guest", "guest"))
                self.assertEqual(client.receive()[0], WELCOME)
            finally:
                broker.stop()


class OriginTest(unittest.TestCase):
    """What a browser on the broker's own host does for any page: connect from 127.0.0.1 and send the page's
    origin. Loopback is the default here (127.0.0.0/8), so only the Origin tells a foreign page from a local one."""

    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, definitions=DEFINITIONS)
        cls.tls = transports.ssl.create_default_context(cafile=os.path.join(cls.temp.name, "ca.pem"))

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.temp.cleanup()

    def first_answer(self, origin, user="guest", password="guest", scheme="ws", broker=None):
        broker = broker or self.broker
        sock = transports.socket.create_connection(("127.0.0.1", broker.ports[scheme]), timeout=5)
        if scheme == "wss":
            sock = self.tls.wrap_socket(sock, server_hostname="localhost")
        client = transports.WsClient(sock, origin=origin)
        self.assertEqual(client.status, 101)
        client.send(0x01, hello(user, password))
        return client.receive()

    def assert_refused(self, answer):
        op, reply = answer
        self.assertEqual((op, reply["code"], reply["fatal"]), (ERROR, 403, True), reply)
        self.assertIn("user 'guest' may only connect over loopback (loopback_users), and a web page from origin",
                      reply["msg"])

    def test_guest_from_a_foreign_origin_is_refused_on_ws_and_wss(self):
        for scheme in ("ws", "wss"):
            with self.subTest(scheme=scheme):
                self.assert_refused(self.first_answer("https://evil.example", scheme=scheme))
        self.assert_refused(self.first_answer("null"))  # a sandboxed page or file:// says nothing of its host

    def test_guest_without_an_origin_or_from_a_loopback_origin_is_welcome(self):
        for origin in (None, "http://localhost:8080", "https://127.0.0.1", "http://[::1]:3000", "HTTP://LocalHost"):
            with self.subTest(origin=origin):
                self.assertEqual(self.first_answer(origin)[0], WELCOME)

    def test_a_look_alike_of_a_loopback_origin_is_foreign(self):
        for origin in ("http://localhost.evil.example", "http://127.0.0.1.evil.example", "http://evil.example#localhost"):
            with self.subTest(origin=origin):
                self.assert_refused(self.first_answer(origin))

    def test_another_user_is_welcome_from_any_origin(self):
        self.assertEqual(self.first_answer("https://evil.example", "remote", REMOTE_PASSWORD)[0], WELCOME)

    def test_trusted_origins_replace_the_default(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, "--trusted-origins", "https://app.example.com", definitions=DEFINITIONS)
            try:
                self.assertEqual(self.first_answer("https://APP.example.com", broker=broker)[0], WELCOME)
                self.assertEqual(self.first_answer(None, broker=broker)[0], WELCOME)
                self.assert_refused(self.first_answer("http://localhost:8080", broker=broker))  # loopback not listed
                self.assert_refused(self.first_answer("https://app.example.com:8443", broker=broker))
            finally:
                broker.stop()

    def test_trusted_origins_with_loopback_add_to_it(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, "--trusted-origins", "loopback, https://app.example.com", definitions=DEFINITIONS)
            try:
                self.assertEqual(self.first_answer("https://app.example.com", broker=broker)[0], WELCOME)
                self.assertEqual(self.first_answer("http://localhost:8080", broker=broker)[0], WELCOME)
                self.assert_refused(self.first_answer("https://evil.example", broker=broker))
            finally:
                broker.stop()

    def test_a_trusted_origin_that_is_not_one_is_a_clear_error(self):
        result = transports.subprocess.run([transports.BROKER, "--trusted-origins", "app.example.com"],
                                           capture_output=True, text=True, timeout=10)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--trusted-origins: 'app.example.com' is neither loopback nor an origin", result.stderr)


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
