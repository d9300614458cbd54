#!/usr/bin/python3
"""The management HTTP API (docs/management.md) against the broker as a separate process: Python's own HTTP client
(urllib) and FireMQ connections made here, so that what the API shows is what a real client did.

Covers: basic auth (401 without or with bad credentials, a user without a management tag, guest from a
non-loopback address), whoami, the overview, a FireMQ connection with its conn_id, client map, user, vhost and
transport, a subscription's consumer tag (fire-<sub> by default), queues with their counts, declare, publish, get
and delete through the API, bindings, closing a connection (the client gets close 320), the Prometheus metrics,
bad input (malformed JSON, wrong types, unknown vhost, broken percent-encoding, a huge body), and RabbitMQ's
own CLI client, rabbitmqadmin, listing, declaring, publishing, getting and deleting.

Usage: management_test.py BROKER_EXECUTABLE
"""
import base64, json, os, socket, struct, subprocess, sys, tempfile, unittest, urllib.error, urllib.request

import msgpack

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME, CLOSE, make_certificates

OK, PUBLISH, SUBSCRIBE, DECLARE_QUEUE = 0x06, 0x20, 0x30, 0x12

DEFINITIONS = {
    "users": [{"name": "guest", "password": "guest", "tags": ["administrator"]},
              {"name": "watcher", "password": "w", "tags": ["monitoring"]},
              {"name": "app", "password": "a", "tags": []},
              {"name": "dev", "password": "d", "tags": ["management"]}],
    "vhosts": [{"name": "/"}, {"name": "other"}],
    "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "other"},
                    {"user": "app", "vhost": "/"}, {"user": "dev", "vhost": "other"}]}


class ManagementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, definitions=DEFINITIONS)
        cls.base = f"http://127.0.0.1:{cls.broker.ports['ws']}"

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.temp.cleanup()

    def call(self, method, path, body=None, user="guest", password="guest", raw=None, address="127.0.0.1"):
        """(status, parsed JSON or text) of one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(f"http://{address}:{self.broker.ports['ws']}{path}", data=data, method=method)
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", "Basic " + token)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            return status, text

    def client(self, client_map=None, user="guest", password="guest"):
        c = StreamClient(socket.create_connection(("127.0.0.1", self.broker.ports["fire"]), timeout=5))
        c.sock.sendall(b"FMQ1")
        c.send(0x01, dict(HELLO, auth={"mech": "plain", "user": user, "pass": password}, client=client_map or {}))
        op, welcome = c.receive()
        self.assertEqual(op, WELCOME, welcome)
        return c, welcome

    def request(self, client, op, header):
        client.send(op, header)
        reply_op, reply = client.receive()
        self.assertEqual(reply_op, OK, reply)
        return reply

    # Authentication ---------------------------------------------------------------------------------------------

    def test_without_or_with_bad_credentials_it_is_401_asking_for_basic_auth(self):
        request = urllib.request.Request(self.base + "/api/overview")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=5)
        self.assertEqual(e.exception.code, 401)
        self.assertIn("Basic", e.exception.headers["WWW-Authenticate"])
        self.assertEqual(self.call("GET", "/api/overview", password="wrong"), (401, {"error": "not_authorized", "reason": "Login failed"}))

    def test_a_user_without_a_management_tag_is_refused(self):
        self.assertEqual(self.call("GET", "/api/overview", user="app", password="a"),
                         (401, {"error": "not_authorized", "reason": "Not management user"}))

    def test_guest_from_a_non_loopback_address_is_refused_as_on_the_wire(self):
        with tempfile.TemporaryDirectory() as temp:
            make_certificates(temp)
            broker = Broker(temp, "--loopback-addresses", "127.0.0.2/32", definitions=DEFINITIONS)
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{broker.ports['ws']}/api/whoami")
                request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
                with self.assertRaises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(request, timeout=5)
                self.assertEqual(e.exception.code, 401)
            finally:
                broker.stop()

    def test_whoami_and_what_each_tag_may_see(self):
        self.assertEqual(self.call("GET", "/api/whoami"), (200, {"name": "guest", "tags": ["administrator"]}))
        status, vhosts = self.call("GET", "/api/vhosts", user="dev", password="d")
        self.assertEqual((status, [v["name"] for v in vhosts]), (200, ["other"]))  # only where it has permissions
        self.assertEqual(self.call("GET", "/api/users", user="watcher", password="w")[0], 401)
        status, users = self.call("GET", "/api/users")
        self.assertEqual(status, 200)
        self.assertFalse(any("password" in u for u in users), users)  # the hash only
        self.assertEqual({u["hashing_algorithm"] for u in users}, {"rabbit_password_hashing_sha256"})

    # What clients did ---------------------------------------------------------------------------------------------

    def test_a_connection_shows_its_conn_id_client_map_user_vhost_and_transport(self):
        c, welcome = self.client({"product": "management-test", "version": "1.2.3"})
        status, connections = self.call("GET", "/api/connections")
        self.assertEqual(status, 200)
        mine = [x for x in connections if x["name"] == welcome["conn_id"]]
        self.assertEqual(len(mine), 1, connections)
        self.assertEqual(mine[0]["client_properties"], {"product": "management-test", "version": "1.2.3"})
        self.assertEqual((mine[0]["user"], mine[0]["vhost"], mine[0]["transport"], mine[0]["protocol"]),
                         ("guest", "/", "fire", "FireMQ 1"))
        quoted = urllib.request.quote(welcome["conn_id"], safe="")
        self.assertEqual(self.call("GET", "/api/connections/" + quoted)[1]["name"], welcome["conn_id"])
        c.sock.close()

    def test_a_subscriptions_tag_is_shown_fire_sub_by_default(self):
        c, welcome = self.client()
        self.request(c, DECLARE_QUEUE, {"rid": 1, "name": "mgmt-consumed", "exclusive": True})
        self.request(c, SUBSCRIBE, {"rid": 2, "sub": 7, "queue": "mgmt-consumed", "credit": 5})
        self.request(c, SUBSCRIBE, {"rid": 3, "sub": 8, "queue": "mgmt-consumed", "credit": 5, "tag": "my-tag"})
        status, consumers = self.call("GET", "/api/consumers/%2F")
        mine = sorted(x["consumer_tag"] for x in consumers if x["channel_details"]["connection_name"] == welcome["conn_id"])
        self.assertEqual(mine, ["fire-7", "my-tag"])
        status, queue = self.call("GET", "/api/queues/%2F/mgmt-consumed")
        self.assertEqual((status, queue["consumers"], queue["exclusive"]), (200, 2, True))
        c.sock.close()

    def test_deleting_a_connection_gives_the_client_close_320(self):
        c, welcome = self.client()
        quoted = urllib.request.quote(welcome["conn_id"], safe="")
        self.assertEqual(self.call("DELETE", "/api/connections/" + quoted)[0], 204)
        op, close = c.receive()
        self.assertEqual((op, close["code"]), (CLOSE, 320))
        self.assertIn("management", close["msg"])
        self.assertEqual(self.call("DELETE", "/api/connections/no-such-connection")[0], 404)

    # Writes -----------------------------------------------------------------------------------------------------

    def test_declare_publish_get_and_delete_through_the_api(self):
        self.assertEqual(self.call("PUT", "/api/queues/%2F/mgmt-q", {"durable": True, "arguments": {"x-max-length": 5}})[0], 201)
        self.assertEqual(self.call("PUT", "/api/queues/%2F/mgmt-q", {"durable": True, "arguments": {"x-max-length": 5}})[0], 204)
        status, reply = self.call("PUT", "/api/queues/%2F/mgmt-q", {"durable": False})
        self.assertEqual(status, 400)
        self.assertIn("inequivalent arg 'durable'", reply["reason"])
        self.assertEqual(self.call("PUT", "/api/exchanges/%2F/mgmt-x", {"type": "fanout"})[0], 201)
        self.assertEqual(self.call("POST", "/api/bindings/%2F/e/mgmt-x/q/mgmt-q", {"routing_key": "k"})[0], 201)
        status, published = self.call("POST", "/api/exchanges/%2F/mgmt-x/publish",
                                      {"routing_key": "k", "payload": "hello", "properties": {"headers": {"h": 1}}})
        self.assertEqual((status, published), (200, {"routed": True}))
        self.assertEqual(self.call("POST", "/api/exchanges/%2F/amq.default/publish",
                                   {"routing_key": "nowhere", "payload": "x"}), (200, {"routed": False}))
        status, got = self.call("POST", "/api/queues/%2F/mgmt-q/get", {"count": 5, "ackmode": "ack_requeue_true"})
        self.assertEqual(status, 200)
        self.assertEqual([(m["payload"], m["properties"]["headers"]) for m in got], [("hello", {"h": 1})])
        self.assertEqual(self.call("GET", "/api/queues/%2F/mgmt-q")[1]["messages_ready"], 1)  # requeued
        status, bindings = self.call("GET", "/api/bindings/%2F")
        ours = [b for b in bindings if b["source"] == "mgmt-x"]
        self.assertEqual([(b["destination"], b["routing_key"]) for b in ours], [("mgmt-q", "k")])
        self.assertEqual(self.call("DELETE", f"/api/bindings/%2F/e/mgmt-x/q/mgmt-q/{ours[0]['properties_key']}")[0], 204)
        self.assertEqual(self.call("DELETE", "/api/queues/%2F/mgmt-q/contents")[0], 204)
        self.assertEqual(self.call("GET", "/api/queues/%2F/mgmt-q")[1]["messages_ready"], 0)
        self.assertEqual(self.call("DELETE", "/api/queues/%2F/mgmt-q")[0], 204)
        self.assertEqual(self.call("GET", "/api/queues/%2F/mgmt-q")[0], 404)
        self.assertEqual(self.call("DELETE", "/api/exchanges/%2F/mgmt-x")[0], 204)

    def test_writes_follow_the_users_permissions(self):
        # dev has permissions on "other" only: a declare on "/" is refused as on the wire.
        status, reply = self.call("PUT", "/api/queues/%2F/mgmt-dev-q", {}, user="dev", password="d")
        self.assertEqual(status, 401, reply)
        self.assertEqual(self.call("PUT", "/api/queues/other/mgmt-dev-q", {}, user="dev", password="d")[0], 201)

    def test_bad_input_gets_a_clear_4xx(self):
        status, reply = self.call("PUT", "/api/queues/%2F/mgmt-bad", raw=b"{not json")
        self.assertEqual((status, reply["error"]), (400, "bad_request"))
        status, reply = self.call("PUT", "/api/queues/%2F/mgmt-bad", {"durable": "yes"})
        self.assertEqual((status, reply["reason"]), (400, "'durable' must be a boolean"))
        self.assertEqual(self.call("PUT", "/api/queues/no-such-vhost/q", {})[0], 404)
        self.assertEqual(self.call("GET", "/api/queues/%ZZ")[0], 400)
        self.assertEqual(self.call("GET", "/api/no-such-thing")[0], 404)
        status, _ = self.call("PUT", "/api/queues/%2F/mgmt-big", raw=b"{" + b" " * (2 * 1024 * 1024) + b"}")
        self.assertEqual(status, 413)
        # A name with every odd character, percent-encoded in the path, round-trips.
        odd = "mgmt odd/%?#&=\u00e9\u2603"
        path = "/api/queues/%2F/" + urllib.request.quote(odd, safe="")
        self.assertEqual(self.call("PUT", path, {})[0], 201)
        self.assertEqual(self.call("GET", path)[1]["name"], odd)
        self.assertEqual(self.call("DELETE", path)[0], 204)

    def test_what_review_found(self):
        # Definitions hold every password hash: administrators only.
        self.assertEqual(self.call("GET", "/api/definitions", user="dev", password="d")[0], 401)
        # A write without a JSON content type (what a cross-site form sends) is refused.
        request = urllib.request.Request(self.base + "/api/queues/%2F/mgmt-csrf/get", data=b"count=1", method="POST")
        request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        request.add_header("Content-Type", "text/plain")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=5)
        self.assertEqual(e.exception.code, 415)
        # Credentials that are all padding, a payload of the wrong type, a name below a summary: 4xx, no crash.
        request = urllib.request.Request(self.base + "/api/whoami")
        request.add_header("Authorization", "Basic ====")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=5)
        self.assertEqual(e.exception.code, 401)
        self.assertEqual(self.call("POST", "/api/exchanges/%2F/amq.default/publish", {"payload": 5})[0], 400)
        self.assertEqual(self.call("GET", "/api/overview/%2F/x")[0], 404)
        self.assertEqual(self.call("GET", "/api/whoami")[0], 200)  # the broker is still there

    def test_a_name_that_is_not_utf8_does_not_break_listings_or_metrics(self):
        c, _ = self.client()
        name = b"mgmt-bad-\xff"
        header = msgpack.packb({"rid": 1, "name": name, "exclusive": True}, use_bin_type=False)  # raw str bytes
        c.sock.sendall(struct.pack(">I", 5 + len(header)) + bytes([DECLARE_QUEUE]) + struct.pack(">I", len(header)) + header)
        reply = c.sock.recv(65536)  # the ok echoes the name, which Python's msgpack would refuse to decode
        self.assertEqual(reply[4], OK)
        status, queues = self.call("GET", "/api/queues")
        self.assertEqual(status, 200)
        self.assertIn("mgmt-bad-\ufffd", [q["name"] for q in queues])
        with urllib.request.urlopen(self.base + "/metrics", timeout=5) as response:
            response.read().decode("utf-8")  # strict: fails on a byte that is not UTF-8
        c.sock.close()

    # Metrics ----------------------------------------------------------------------------------------------------

    def test_metrics_in_prometheus_text_format(self):
        self.call("PUT", "/api/queues/%2F/mgmt-metrics", {})
        self.call("POST", "/api/exchanges/%2F/amq.default/publish", {"routing_key": "mgmt-metrics", "payload": "m"})
        with urllib.request.urlopen(self.base + "/metrics", timeout=5) as response:
            self.assertTrue(response.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            text = response.read().decode()
        self.assertIn('rabbitmq_detailed_queue_messages_ready{vhost="/",queue="mgmt-metrics"} 1', text)
        for name in ("rabbitmq_connections", "rabbitmq_queues", "rabbitmq_global_messages_received_total",
                     "rabbitmq_resident_memory_limit_bytes", "rabbitmq_alarms_memory_used_watermark"):
            self.assertIn(f"# TYPE {name} ", text)
        for line in text.splitlines():  # every sample is NAME[{LABELS}] NUMBER
            if not line.startswith("#"):
                float(line.rsplit(" ", 1)[1])
        self.call("DELETE", "/api/queues/%2F/mgmt-metrics")

    # RabbitMQ's own CLI client ---------------------------------------------------------------------------------

    def rabbitmqadmin(self, *args):
        """rabbitmqadmin (from Debian's rabbitmq-server) against this broker; its output as JSON when it lists."""
        done = subprocess.run(["rabbitmqadmin", "-H", "127.0.0.1", "-P", str(self.broker.ports["ws"]),
                               "-u", "guest", "-p", "guest", "-f", "raw_json", *args],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return json.loads(done.stdout) if done.stdout.startswith("[") else done.stdout.strip()

    def test_rabbitmqadmin_lists_declares_publishes_gets_and_deletes(self):
        self.assertEqual(self.rabbitmqadmin("declare", "queue", "name=admin-q", "durable=false",
                                            'arguments={"x-max-length": 10}'), "queue declared")
        self.assertEqual(self.rabbitmqadmin("declare", "exchange", "name=admin-x", "type=fanout"), "exchange declared")
        self.assertEqual(self.rabbitmqadmin("declare", "binding", "source=admin-x", "destination=admin-q"),
                         "binding declared")
        self.assertEqual(self.rabbitmqadmin("publish", "exchange=admin-x", "routing_key=any", "payload=hello"),
                         "Message published")
        queues = {q["name"]: q for q in self.rabbitmqadmin("list", "queues")}
        self.assertEqual((queues["admin-q"]["messages"], queues["admin-q"]["arguments"]), (1, {"x-max-length": 10}))
        got = self.rabbitmqadmin("get", "queue=admin-q", "ackmode=ack_requeue_false")
        self.assertEqual([(m["payload"], m["exchange"]) for m in got], [("hello", "admin-x")])
        self.assertIn("admin-x", [x["name"] for x in self.rabbitmqadmin("list", "exchanges")])
        self.assertIn(("admin-x", "admin-q"), [(b["source"], b["destination"]) for b in self.rabbitmqadmin("list", "bindings")])
        self.assertEqual(self.rabbitmqadmin("delete", "queue", "name=admin-q"), "queue deleted")
        self.assertEqual(self.rabbitmqadmin("delete", "exchange", "name=admin-x"), "exchange deleted")
        self.assertNotIn("admin-q", [q["name"] for q in self.rabbitmqadmin("list", "queues")])


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
