#!/usr/bin/python3
"""The management API's message rates over time (docs/management.md, "Message rates"): the broker samples its
counters and depths every collect interval (--collect-statistics-interval-ms, 200 ms here) and answers RabbitMQ's
?msg_rates_age=S&msg_rates_incr=S and ?lengths_age=S&lengths_incr=S with NAME_details.samples, rate, avg_rate and
avg, on /api/overview and /api/queues/V/NAME. Shapes, monotonic timestamps and values the test knows exactly (after
a quiet spell); no timing-tight rate is asserted.

Usage: management_rates_test.py BROKER_EXECUTABLE
"""
import base64, json, sys, tempfile, threading, time, unittest, urllib.error, urllib.request

import transports_test as transports
from transports_test import Broker, make_certificates

DEFINITIONS = {
    "users": [{"name": "guest", "password": "guest", "tags": ["administrator"]},
              {"name": "dev", "password": "d", "tags": ["management"]}],
    "vhosts": [{"name": "/"}, {"name": "other"}],
    "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "other"},
                    {"user": "dev", "vhost": "other"}]}
RANGES = "msg_rates_age=60&msg_rates_incr=1&lengths_age=60&lengths_incr=1"
INTERVAL_S = 0.2


class RatesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.temp = tempfile.TemporaryDirectory()
        make_certificates(cls.temp.name)
        cls.broker = Broker(cls.temp.name, "--collect-statistics-interval-ms", str(int(INTERVAL_S * 1000)),
                            definitions=DEFINITIONS)

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()
        cls.temp.cleanup()

    def call(self, method, path, body=None, user="guest", password="guest"):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.broker.ports['ws']}{path}", data=data, method=method)
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")

    def get(self, path, **kwargs):
        status, body = self.call("GET", path, **kwargs)
        self.assertEqual(status, 200, body)
        return body

    def publish(self, queue, count, spacing, vhost="%2F"):
        """`count` messages through the API's publish, `spacing` seconds apart: a known, modest rate."""
        for i in range(count):
            status, body = self.call("POST", f"/api/exchanges/{vhost}/amq.default/publish",
                                     {"routing_key": queue, "payload": str(i), "payload_encoding": "string",
                                      "properties": {}})
            self.assertEqual((status, body), (200, {"routed": True}))
            time.sleep(spacing)

    def quiet(self):
        """Long enough without traffic that the newest samples are the counters as they are now, and the last
        increment (1 s) saw no change."""
        time.sleep(1 + 3 * INTERVAL_S)

    def check_samples(self, details, now):
        """A details object with samples: RabbitMQ's shape, timestamps newest first, 1 s apart, none in the future."""
        self.assertEqual(set(details), {"rate", "samples", "avg_rate", "avg"}, details)
        samples = details["samples"]
        self.assertGreaterEqual(len(samples), 3)
        for s in samples:
            self.assertEqual(set(s), {"sample", "timestamp"})
        times = [s["timestamp"] for s in samples]
        self.assertEqual(times, sorted(times, reverse=True))
        self.assertEqual({a - b for a, b in zip(times, times[1:])}, {1000})
        self.assertLessEqual(times[0], now * 1000 + 1000)
        self.assertGreater(times[0], now * 1000 - 5000)
        return samples

    def test_a_queue_answers_its_rates_and_depths_over_time(self):
        self.assertEqual(self.call("PUT", "/api/queues/%2F/rates-q", {})[0], 201)
        self.publish("rates-q", 30, 0.1)  # about 3 s at up to 10 a second
        self.quiet()
        q = self.get("/api/queues/%2F/rates-q?" + RANGES)
        publish = q["message_stats"]["publish_details"]
        samples = self.check_samples(publish, time.time())
        values = [s["sample"] for s in samples]
        self.assertEqual(values[0], 30)  # the newest sample is the counter now
        self.assertEqual(values, sorted(values, reverse=True))  # a counter: never down, going back in time
        self.assertLess(values[-1], 30)  # the range reaches back before the publishes ended
        self.assertEqual(publish["rate"], 0.0)  # the last second was quiet
        self.assertGreater(publish["avg_rate"], 0)
        self.assertAlmostEqual(publish["avg_rate"], (values[0] - values[-1]) * 1000 / (samples[0]["timestamp"] - samples[-1]["timestamp"]))
        self.assertAlmostEqual(publish["avg"], sum(values) / len(values))
        # The depths (lengths_age): nothing consumed, so messages and messages_ready are the publishes.
        for field in ("messages", "messages_ready", "messages_unacknowledged"):
            depth = self.check_samples(q[field + "_details"], time.time())
            self.assertEqual(depth[0]["sample"], q[field])
        self.assertEqual(q["messages"], 30)
        # A get of 10 with an ack: deliver_get and ack move, the depth falls.
        self.assertEqual(self.call("POST", "/api/queues/%2F/rates-q/get",
                                   {"count": 10, "ackmode": "ack_requeue_false", "encoding": "auto"})[0], 200)
        self.quiet()
        q = self.get("/api/queues/%2F/rates-q?" + RANGES)
        self.assertEqual(q["message_stats"]["ack_details"]["samples"][0]["sample"], 10)
        self.assertEqual(q["messages_details"]["samples"][0]["sample"], 20)
        self.call("DELETE", "/api/queues/%2F/rates-q")

    def test_without_a_range_the_details_have_the_rate_alone(self):
        self.call("PUT", "/api/queues/%2F/rates-plain", {})
        stop = threading.Event()
        rates, vhost_rates = [], []

        def read_while_publishing():
            while not stop.is_set():
                rates.append(self.get("/api/queues/%2F/rates-plain")["message_stats"]["publish_details"]["rate"])
                vhost_rates.append(self.get("/api/vhosts/%2F")["message_stats"]["publish_details"]["rate"])
                time.sleep(INTERVAL_S)
        reader = threading.Thread(target=read_while_publishing)
        reader.start()
        try:
            self.publish("rates-plain", 20, 0.1)
        finally:
            stop.set()
            reader.join()
        self.assertTrue(any(r > 0 for r in rates), rates)  # the rate of the last interval, while publishing
        self.assertTrue(any(r > 0 for r in vhost_rates), vhost_rates)  # the vhost's too, as RabbitMQ's /api/vhosts
        q = self.get("/api/queues/%2F/rates-plain")
        self.assertEqual(set(q["message_stats"]["publish_details"]), {"rate"})
        self.assertEqual(set(q["messages_details"]), {"rate"})
        overview = self.get("/api/overview")
        self.assertEqual(set(overview["message_stats"]["publish_details"]), {"rate"})
        self.assertEqual(set(overview["queue_totals"]["messages_ready_details"]), {"rate"})
        self.assertEqual(overview["statistics_interval"], int(INTERVAL_S * 1000))
        # Lists answer rates without samples, even when asked (10,000 queues' samples would be too much).
        [listed] = [x for x in self.get("/api/queues/%2F?" + RANGES) if x["name"] == "rates-plain"]
        self.assertEqual(set(listed["message_stats"]["publish_details"]), {"rate"})
        self.call("DELETE", "/api/queues/%2F/rates-plain")

    def test_the_overview_answers_the_brokers_history(self):
        self.call("PUT", "/api/queues/other/rates-other", {})
        before = self.get("/api/overview")["message_stats"]["publish"]
        self.publish("rates-other", 20, 0.1, vhost="other")
        self.quiet()
        overview = self.get("/api/overview?" + RANGES)
        publish = self.check_samples(overview["message_stats"]["publish_details"], time.time())
        self.assertEqual(publish[0]["sample"], overview["message_stats"]["publish"])
        self.assertGreaterEqual(publish[0]["sample"] - publish[-1]["sample"], 1)
        self.assertGreaterEqual(overview["message_stats"]["publish"], before + 20)
        other = self.get("/api/vhosts/other")
        self.assertGreaterEqual(other["message_stats"]["publish"], 20)
        self.assertEqual(set(other["message_stats"]["publish_details"]), {"rate"})
        self.assertEqual((other["messages"], set(other["messages_details"])), (20, {"rate"}))
        for field in ("confirm", "deliver_get", "ack", "redeliver", "return_unroutable", "drop_unroutable"):
            self.check_samples(overview["message_stats"][field + "_details"], time.time())
        ready = self.check_samples(overview["queue_totals"]["messages_ready_details"], time.time())
        self.assertEqual(ready[0]["sample"], overview["queue_totals"]["messages_ready"])
        # dev sees vhost "other" only: its overview's history is that vhost's alone.
        mine = self.get("/api/overview?" + RANGES, user="dev", password="d")
        self.assertEqual(mine["message_stats"]["publish_details"]["samples"][0]["sample"], mine["message_stats"]["publish"])
        self.call("DELETE", "/api/queues/other/rates-other")

    def test_a_queue_deleted_and_declared_again_starts_a_new_history(self):
        self.call("PUT", "/api/queues/%2F/rates-again", {})
        self.publish("rates-again", 5, 0.05)
        self.quiet()
        self.assertEqual(self.get("/api/queues/%2F/rates-again?" + RANGES)["message_stats"]["publish_details"]
                         ["samples"][0]["sample"], 5)
        self.call("DELETE", "/api/queues/%2F/rates-again")
        time.sleep(3 * INTERVAL_S)  # a collection without it: its series dropped
        self.call("PUT", "/api/queues/%2F/rates-again", {})
        self.quiet()
        samples = self.get("/api/queues/%2F/rates-again?" + RANGES)["message_stats"]["publish_details"]["samples"]
        self.assertEqual({s["sample"] for s in samples}, {0})

    def test_a_bad_range_is_refused_with_a_reason(self):
        for query in ("msg_rates_age=60", "msg_rates_age=60&msg_rates_incr=0", "lengths_age=x&lengths_incr=5",
                      "msg_rates_age=-5&msg_rates_incr=5", "lengths_age=60000&lengths_incr=1",
                      "msg_rates_age=100000&msg_rates_incr=1000"):
            for path in ("/api/overview", "/api/queues/%2F"):
                status, body = self.call("GET", f"{path}?{query}")
                self.assertEqual(status, 400, (path, query))
                self.assertEqual(body["error"], "bad_request")
                self.assertIn("Invalid range", body["reason"])


if __name__ == "__main__":
    transports.BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
