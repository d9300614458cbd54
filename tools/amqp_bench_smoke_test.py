#!/usr/bin/python3
"""firemq-amqp-bench against the reference broker's AMQP listener, short: every message published is confirmed
and received once, with a latency sample each, in the shapes the side-by-side script uses (a window of confirms,
persistent messages, prefetch with multi-acks, a fixed rate, batched writes); and a bad URL or a refused connection is a clear
error with its exit code.

Usage: amqp_bench_smoke_test.py BENCH_EXECUTABLE BROKER_EXECUTABLE
"""
import json, os, signal, subprocess, sys, tempfile, time, unittest

BENCH = BROKER = None


class Broker:
    """firemq-broker with only the AMQP listener on a free port, and a data directory."""

    def __init__(self, directory):
        ports = os.path.join(directory, "ports.json")
        self.log = open(os.path.join(directory, "broker.log"), "wb")
        self.process = subprocess.Popen(
            [BROKER, "--bind", "127.0.0.1", "--port", "off", "--tls-port", "off", "--ws-port", "off",
             "--wss-port", "off", "--amqp-port", "0", "--data-dir", os.path.join(directory, "data"),
             "--port-file", ports], stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while not os.path.exists(ports) or os.path.getsize(ports) == 0:
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the broker did not start: " + open(self.log.name).read()[-2000:])
            time.sleep(0.02)
        self.url = "amqp://guest:guest@127.0.0.1:%d" % json.load(open(ports))["amqp"]

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(10)
        self.log.close()


def bench(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=60)


class AmqpBenchSmoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.broker = Broker(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.tmp.cleanup()

    def run_json(self, *args):
        done = bench("--url", self.broker.url, "--json", "--time", "30", *args)  # --count ends each run
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def test_every_persistent_message_confirmed_and_received_once(self):
        r = self.run_json("-x", "2", "-y", "2", "--count", "5000", "--confirm", "50", "--persistent",
                          "--prefetch", "50", "--multi-ack-every", "10", "--size", "100")
        self.assertEqual((r["published"], r["confirmed"], r["nacked"], r["received"]), (10000, 10000, 0, 10000))
        self.assertEqual(r["latency"]["samples"], 10000)
        self.assertEqual(r["confirm_latency"]["samples"], 10000)
        self.assertGreater(r["received_msgs_per_s"], 0)
        self.assertLessEqual(r["latency"]["p50_us"], r["latency"]["p99_us"])

    def test_synchronous_confirms_and_64_kib_bodies(self):
        r = self.run_json("-x", "1", "-y", "0", "--count", "200", "--confirm", "1", "--size", "65536")
        self.assertEqual((r["published"], r["confirmed"], r["received"]), (200, 200, 0))

    def test_fixed_rate_holds(self):
        r = self.run_json("-x", "1", "-y", "1", "--rate", "500", "--count", "500", "--prefetch", "100")
        self.assertEqual((r["published"], r["received"]), (500, 500))
        self.assertAlmostEqual(r["sent_msgs_per_s"], 500, delta=50)  # publish n is due at (n - 1) / 500 s

    def test_batched_writes_publish_every_message_once(self):
        # The bench's own framing (--batch): every publish is a well-formed basic.publish with its content, or the
        # broker closes the connection; a count that is not a multiple of the batch writes the rest at the end.
        r = self.run_json("-x", "1", "-y", "1", "--count", "1050", "--batch", "100", "--confirm", "200",
                          "--persistent", "--prefetch", "100", "--size", "1024")
        self.assertEqual((r["published"], r["confirmed"], r["nacked"], r["received"]), (1050, 1050, 0, 1050))
        self.assertEqual(r["publishes_per_write"], 100)
        unconfirmed = self.run_json("-x", "1", "-y", "1", "--count", "333", "--batch", "50", "--prefetch", "100")
        self.assertEqual((unconfirmed["published"], unconfirmed["received"]), (333, 333))
        too_big = bench("--url", self.broker.url, "--batch", "100", "--confirm", "10")
        self.assertEqual(too_big.returncode, 2)
        self.assertIn("--batch larger than --confirm", too_big.stderr)

    def test_bad_url_and_refused_connection_are_clear_errors(self):
        bad = bench("--url", "http://127.0.0.1:1")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("expected amqp://", bad.stderr)
        refused = bench("--url", "amqp://guest:guest@127.0.0.1:1", "--time", "1")
        self.assertEqual(refused.returncode, 1)
        self.assertIn("connecting to 127.0.0.1:1", refused.stderr)
        wrong_password = bench("--url", self.broker.url.replace("guest@", "nope@"), "--time", "1")
        self.assertEqual(wrong_password.returncode, 1)
        self.assertIn("logging in", wrong_password.stderr)


if __name__ == "__main__":
    BENCH, BROKER = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1])
