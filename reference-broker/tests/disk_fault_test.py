#!/usr/bin/python3
"""Disk faults against the broker as a separate process (docs/durability.md, "What each failure does"): a write or
fsync of the data directory fails with EIO or ENOSPC (--storage-fault, which fails the call where the real write()
or fdatasync() would return its error), then the broker is killed with SIGKILL and started again on the same data
directory. For each fault: what the client is told (the nack or error code and the file it names), the alarm in the
management API (/api/nodes, /api/health/checks/alarms) and /metrics, the publishers paused or refused by the rule,
and after the restart the state matching what clients were told: nothing confirmed lost, a delete refused still
there, a declare refused not there.

Usage: disk_fault_test.py BROKER_EXECUTABLE
"""
import base64, json, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time, unittest, urllib.error, urllib.request

import transports_test as transports
from transports_test import Broker, StreamClient, HELLO, WELCOME, ERROR

OK, FLOW, DECLARE_QUEUE, DELETE_QUEUE = 0x06, 0x08, 0x12, 0x13
PUBLISH, CONFIRM, RETURN, GET, GET_OK = 0x20, 0x21, 0x22, 0x37, 0x38

DEFINITIONS = {"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
               "vhosts": [{"name": "/"}],
               "permissions": [{"user": "guest", "vhost": "/"}]}
LISTENERS = ["--port", "0", "--tls-port", "off", "--ws-port", "0", "--wss-port", "off", "--amqp-port", "off",
             "--amqps-port", "off"]

# How the broker's fsyncs are numbered (--storage-fault fsync:N counts every fsync of the process from 1): at start it
# syncs the data directory (1) and saves its definitions (the file and the directory: 2, 3). A durable declare makes
# the store durable (its segment and directory) and saves the definitions: four more. The storage thread's first
# fsync of a segment comes with its directory's (two), then one per publish waited for in turn.
FSYNCS_AT_START = 3
FSYNCS_PER_DURABLE_DECLARE = 4


class Client(StreamClient):
    """A FireMQ connection that sets flow frames aside (in flows) while it waits for answers."""

    def __init__(self, sock):
        super().__init__(sock)
        self.flows = []

    def request(self, op, header, payload=b""):
        self.send(op, header, payload)
        return self.next_answer()

    def next_answer(self):
        """The next frame that is not flow (flows are kept in self.flows)."""
        while True:
            frame = self.receive()
            if frame is None or frame[0] != FLOW:
                return frame
            self.flows.append(frame[1])

    def wait_for_flow(self, timeout=3):
        deadline = time.time() + timeout
        while not self.flows and time.time() < deadline:
            try:
                frame = self.receive()
            except socket.timeout:
                break
            if frame is not None and frame[0] == FLOW:
                self.flows.append(frame[1])
        return self.flows


class DiskFaultTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certificates = tempfile.mkdtemp(prefix="firemq-disk-fault-certs-")
        transports.make_certificates(cls.certificates)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certificates, ignore_errors=True)

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="firemq-disk-fault-test-")
        for name in ("server.pem", "server.key"):
            shutil.copy(os.path.join(self.certificates, name), self.directory)
        self.broker = None

    def tearDown(self):
        if self.broker is not None:
            self.broker.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    # The broker -----------------------------------------------------------------------------------------------

    def start(self, *extra):
        self.broker = Broker(self.directory, *extra, definitions=DEFINITIONS, listeners=LISTENERS)

    def start_with_shim(self, **fault):
        """A broker whose fdatasync() is disk_fault_shim.c's: the FAULT_* variables choose the call that fails."""
        shim = os.path.join(self.directory, "disk_fault_shim.so")
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "disk_fault_shim.c")
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", shim, source, "-ldl"], check=True)
        variables = {"LD_PRELOAD": shim, **{"FAULT_" + k.upper(): str(v) for k, v in fault.items()}}
        saved = {k: os.environ.get(k) for k in variables}
        os.environ.update(variables)
        try:
            self.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k)
                else:
                    os.environ[k] = v

    def kill_and_restart(self):
        """SIGKILL, then a broker without the fault on the same data directory."""
        self.broker.process.send_signal(signal.SIGKILL)
        self.broker.process.wait(10)
        self.broker.log.close()
        self.start()

    def log(self):
        with open(os.path.join(self.directory, "broker.log"), errors="replace") as f:
            return f.read()

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.broker.ports["fire"]))
        sock.sendall(b"FMQ1")
        client = Client(sock)
        client.send(0x01, HELLO)
        op, _ = client.receive()
        self.assertEqual(op, WELCOME)
        return client

    def api(self, path):
        """(status, parsed JSON) of a GET on the management API."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.broker.ports['ws']}{path}")
        request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.broker.ports['ws']}/metrics", timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def wait_for_alarm(self):
        deadline = time.time() + 3
        while time.time() < deadline:
            status, nodes = self.api("/api/nodes")
            if status == 200 and nodes[0]["disk_free_alarm"]:
                return nodes[0]
            time.sleep(0.02)
        self.fail("the disk alarm never rose: /api/nodes says " + json.dumps(nodes))

    # Requests ---------------------------------------------------------------------------------------------------

    def declare(self, client, rid, name, durable):
        return client.request(DECLARE_QUEUE, {"rid": rid, "name": name, "durable": durable})

    def publish(self, client, seq, queue, persistent, body, mandatory=False):
        """The confirm (and the return, for a mandatory publish that no queue took) of one publish."""
        client.send(PUBLISH, {"seq": seq, "exchange": "", "key": queue, "persistent": persistent,
                              "mandatory": mandatory}, body)
        frames = [client.next_answer()]
        if frames[0][0] == RETURN:
            frames.append(client.next_answer())
        return frames

    def bodies(self, queue):
        """Every message the queue holds now, taken with get (no ack)."""
        client = self.connect()
        found = []
        for rid in range(1, 100):
            client.send(GET, {"rid": rid, "queue": queue, "no_ack": True})
            while len(client.buffer) < 4 or len(client.buffer) < 4 + struct.unpack(">I", client.buffer[:4])[0]:
                client.buffer += client.sock.recv(65536)
            n = struct.unpack(">I", client.buffer[:4])[0]
            body = client.buffer[4:4 + n]
            client.buffer = client.buffer[4 + n:]
            op, header = transports.decode(body)
            if op == OK:
                break
            self.assertEqual(op, GET_OK, header)
            hlen = struct.unpack(">I", body[1:5])[0]
            found.append(body[5 + hlen:])
        client.sock.close()
        return found

    def assert_alarm_shows(self, fragment):
        """The failed store as RabbitMQ shows a disk alarm, with the file and error, in the API and /metrics."""
        node = self.wait_for_alarm()
        self.assertIn(fragment, node["storage_failure"] or "")
        self.assertIn("segment-", node["storage_failure"])
        status, check = self.api("/api/health/checks/alarms")
        self.assertEqual(status, 503, check)
        self.assertEqual(check["alarms"][0]["resource"], "disk")
        self.assertIn(fragment, check["alarms"][0]["reason"])
        self.assertEqual(self.metric("rabbitmq_alarms_free_disk_space_watermark"), 1)
        self.assertEqual(self.metric("firemq_storage_failed"), 1)
        self.assertEqual(self.api("/api/overview")[1]["alarms"], ["disk"], "the UI's banner shows no alarm")

    def assert_no_alarm(self):
        status, nodes = self.api("/api/nodes")
        self.assertEqual(status, 200)
        self.assertFalse(nodes[0]["disk_free_alarm"], nodes)
        self.assertIsNone(nodes[0]["storage_failure"])
        self.assertEqual(self.api("/api/health/checks/alarms"), (200, {"status": "ok"}))
        self.assertEqual(self.api("/api/overview")[1]["alarms"], [])

    # The faults -----------------------------------------------------------------------------------------------

    def test_a_failed_store_fsync_nacks_raises_the_disk_alarm_and_refuses_durable_topology_until_restart(self):
        # Two durable declares, then publishes 1 and 2 confirmed one at a time, and publish 3's fsync fails.
        failing = FSYNCS_AT_START + 2 * FSYNCS_PER_DURABLE_DECLARE + 2 + 1 + 1
        self.start("--storage-fault", f"fsync:{failing}")
        self.assert_no_alarm()
        publisher = self.connect()
        self.assertEqual(self.declare(publisher, 1, "dq", True)[0], OK)
        self.assertEqual(self.declare(publisher, 2, "doomed", True)[0], OK)
        for seq in (1, 2):
            [(op, confirm)] = self.publish(publisher, seq, "dq", True, b"kept-%d" % seq)
            self.assertEqual((op, confirm.get("upto")), (CONFIRM, seq), confirm)
        [(op, nack)] = self.publish(publisher, 3, "dq", True, b"not-kept")
        self.assertEqual(op, CONFIRM)
        self.assertTrue(nack.get("nack"), nack)
        self.assertEqual(nack["code"], 541)
        self.assertIn("segment-", nack["msg"])
        self.assertIn("Input/output error", nack["msg"])

        # The alarm: the publisher is paused, and the API, the health check and /metrics show it with the file.
        self.assertEqual(publisher.wait_for_flow(), [{"pause": True}])
        self.assert_alarm_shows("Input/output error")
        self.assertEqual(self.log().count("alarm: message store failed"), 1, self.log()[-3000:])

        # The rule: durable deletes and declares are refused (541) and change nothing; transient work goes on.
        deleter = self.connect()
        op, error = self.declare(deleter, 1, "doomed", True)  # a redeclare of what exists changes nothing: ok
        self.assertEqual(op, OK, error)
        op, error = deleter.request(DELETE_QUEUE, {"rid": 2, "name": "doomed"})
        self.assertEqual((op, error.get("code")), (ERROR, 541), error)
        self.assertIn("message store failed", error["msg"])
        op, error = self.declare(self.connect(), 1, "late", True)
        self.assertEqual((op, error.get("code")), (ERROR, 541), error)
        self.assertEqual(self.api("/api/queues/%2F/late")[0], 404, "a declare told it failed is there")
        self.assertEqual(self.api("/api/queues/%2F/doomed")[0], 200, "a delete told it failed is done")
        other = self.connect()
        self.assertEqual(self.declare(other, 1, "tq", False)[0], OK)
        [(op, confirm)] = self.publish(other, 1, "tq", False, b"transient")
        self.assertEqual((op, confirm.get("upto")), (CONFIRM, 1), confirm)
        self.assertEqual(other.wait_for_flow(), [{"pause": True}], "a publisher is paused once it has published")

        # After kill -9: what was confirmed is there (the nacked one may be too: written, not fsync'd), the queue
        # whose delete was refused is there, the refused declare is not, and the alarm is gone with the restart.
        self.kill_and_restart()
        self.assert_no_alarm()
        bodies = self.bodies("dq")
        self.assertEqual(bodies[:2], [b"kept-1", b"kept-2"], bodies)
        self.assertEqual(self.api("/api/queues/%2F/doomed")[0], 200)
        self.assertEqual(self.api("/api/queues/%2F/late")[0], 404)

    def test_a_delete_is_refused_when_the_storage_threads_fsync_of_its_segment_failed_first(self):
        # Issue 27, item 7a: the storage thread's fdatasync of the segment fails (slowly), and meanwhile a queue
        # delete makes the broker thread fdatasync the same segment, which says 0 (the kernel reported the error
        # once, to the first call). Segment fdatasyncs: each durable declare's (1, 2), publish 1's (3), publish 2's (4).
        self.start_with_shim(path="segment-", nth=4, delay_ms=600)
        publisher = self.connect()
        self.assertEqual(self.declare(publisher, 1, "dq", True)[0], OK)
        self.assertEqual(self.declare(publisher, 2, "doomed", True)[0], OK)
        [(op, confirm)] = self.publish(publisher, 1, "dq", True, b"kept")
        self.assertEqual((op, confirm.get("upto")), (CONFIRM, 1), confirm)
        publisher.send(PUBLISH, {"seq": 2, "exchange": "", "key": "doomed", "persistent": True}, b"lost")
        time.sleep(0.15)  # the storage thread is in its failing fdatasync now
        op, answer = self.connect().request(DELETE_QUEUE, {"rid": 1, "name": "doomed"})
        self.assertEqual((op, answer.get("code")), (ERROR, 541), "the delete was answered ok although the fsync of "
                         f"its record failed: {answer}")
        self.assertIn("Input/output error", answer["msg"])
        op, nack = publisher.next_answer()
        self.assertTrue(nack.get("nack"), nack)
        self.assert_alarm_shows("Input/output error")
        time.sleep(0.1)  # five ticks: the delete's change is still due, and no tick may try (and log) it again
        self.assertLessEqual(self.log().count("durable definitions not saved"), 1, self.log()[-2000:])
        self.kill_and_restart()
        self.assertEqual(self.bodies("dq"), [b"kept"])

    def test_a_durable_declare_whose_definitions_fsync_failed_is_not_there_to_publish_to(self):
        # The declare's store sync is fsyncs 4 and 5; the definitions file's own fsync, 6, fails.
        self.start("--storage-fault", f"fsync:{FSYNCS_AT_START + 3}")
        op, error = self.declare(self.connect(), 1, "orders", True)
        self.assertEqual((op, error.get("code")), (ERROR, 541), error)
        self.assertIn("definitions", error["msg"])
        self.assertEqual(self.api("/api/queues/%2F/orders")[0], 404, "told it failed, but the queue is there")
        # So a persistent publish to it is returned unroutable, not confirmed into a queue a restart would not have.
        frames = self.publish(self.connect(), 1, "orders", True, b"order-1", mandatory=True)
        self.assertEqual([op for op, _ in frames], [RETURN, CONFIRM], frames)
        self.kill_and_restart()
        self.assertEqual(self.api("/api/queues/%2F/orders")[0], 404)
        client = self.connect()
        self.assertEqual(self.declare(client, 1, "orders", True)[0], OK)
        self.assertEqual(self.bodies("orders"), [], "a message came back that no queue had taken")

    def test_a_segment_write_failing_with_enospc_nacks_naming_it_and_raises_the_alarm(self):
        # Writes: the definitions file at start (1) and after the durable declare (2); the segment's first, 3.
        self.start("--storage-fault", "write:3:enospc")
        publisher = self.connect()
        self.assertEqual(self.declare(publisher, 1, "dq", True)[0], OK)
        [(op, nack)] = self.publish(publisher, 1, "dq", True, b"not-kept")
        self.assertTrue(nack.get("nack"), nack)
        self.assertEqual(nack["code"], 541)
        self.assertIn("No space left on device", nack["msg"])
        self.assertEqual(publisher.wait_for_flow(), [{"pause": True}])
        self.assert_alarm_shows("No space left on device")
        self.kill_and_restart()
        self.assert_no_alarm()
        self.assertEqual(self.bodies("dq"), [], "a message nacked before any write came back")


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
