#!/usr/bin/python3
"""RabbitMQ's stock Grafana dashboard against the broker, through a real Prometheus (docs/management.md,
"Prometheus"): the broker and Debian's prometheus are started here, each on private ports, Prometheus scraping
/metrics every second (job firemq) and /metrics/detailed with the per-queue families of vhost / (job
firemq-detailed); AMQP traffic made with pika moves the counters; then the PromQL of every panel of RabbitMQ's
RabbitMQ-Overview dashboard runs through Prometheus's HTTP API and must return series, with the right values where
the test knows them. Also: /metrics/detailed's family and vhost filters, read directly.

Prometheus is stopped at the end, even when the test fails or the broker does not start (and killed with this
process if it dies first).

Usage: prometheus_test.py BROKER_EXECUTABLE  (FIREMQ_PROMETHEUS names another prometheus than /usr/bin/prometheus)
"""
import ctypes, json, os, signal, socket, subprocess, sys, tempfile, time, unittest, urllib.error, urllib.parse
import urllib.request

import pika

BROKER = None
PROMETHEUS = os.environ.get("FIREMQ_PROMETHEUS", "/usr/bin/prometheus")

# The label that the dashboard's $namespace selects (see the scrape config in PrometheusTest.start_prometheus).
NAMESPACE = "firemq"
# What /metrics/detailed is asked for by the second job, as RabbitMQ's documentation sets it up.
DETAILED_FAMILIES = ["queue_coarse_metrics", "queue_consumer_count"]

# RabbitMQ-Overview, the dashboard rabbitmq_prometheus ships (rabbitmq/rabbitmq-server,
# deps/rabbitmq_prometheus/docker/grafana/dashboards/RabbitMQ-Overview.json, "version": 20210322, the join form:
# every query multiplies by rabbitmq_identity_info of the cluster and namespace chosen in the dashboard's
# variables). Each panel's title and its query, in the dashboard's order, with the join written once:
# J is the stat panels' join, JN the graphs' (which also take the node's name for the legend).
J = (' * on(instance) group_left(rabbitmq_cluster) '
     'rabbitmq_identity_info{rabbitmq_cluster="$rabbitmq_cluster", namespace="$namespace"}')
JN = (' * on(instance) group_left(rabbitmq_cluster, rabbitmq_node) '
      'rabbitmq_identity_info{rabbitmq_cluster="$rabbitmq_cluster", namespace="$namespace"}')


def by_node_rate(metric):
    return f"sum(rate({metric}[60s]){JN}) by(rabbitmq_node)"


def difference(limit, used):
    return f"({limit}{JN}) -\n({used}{JN})"


OVERVIEW_PANELS = [
    ("Ready messages", f"sum(rabbitmq_queue_messages_ready{J})"),
    ("Incoming messages / s", f"sum(rate(rabbitmq_channel_messages_published_total[60s]){J})"),
    ("Publishers", f"sum(rabbitmq_channels{J}) - sum(rabbitmq_channel_consumers{J})"),
    ("Connections", f"sum(rabbitmq_connections{J})"),
    ("Queues", f"sum(rabbitmq_queues{J})"),
    ("Unacknowledged messages", f"sum(rabbitmq_queue_messages_unacked{J})"),
    ("Outgoing messages / s", " +\n".join(f"sum(rate({m}[60s]){J})" for m in (
        "rabbitmq_channel_messages_redelivered_total", "rabbitmq_channel_messages_delivered_total",
        "rabbitmq_channel_messages_delivered_ack_total", "rabbitmq_channel_get_total",
        "rabbitmq_channel_get_ack_total"))),
    ("Consumers", f"sum(rabbitmq_channel_consumers{J})"),
    ("Channels", f"sum(rabbitmq_channels{J})"),
    ("Nodes", f"sum(rabbitmq_build_info{J})"),
    ("NODES (table: versions, host, node name)", f"rabbitmq_build_info{JN}"),
    ("Memory available before publishers blocked",
     difference("rabbitmq_resident_memory_limit_bytes", "rabbitmq_process_resident_memory_bytes")),
    ("Disk space available before publishers blocked", f"rabbitmq_disk_space_available_bytes{JN}"),
    ("File descriptors available", difference("rabbitmq_process_max_fds", "rabbitmq_process_open_fds")),
    ("TCP sockets available", difference("rabbitmq_process_max_tcp_sockets", "rabbitmq_process_open_tcp_sockets")),
    ("Messages ready to be delivered to consumers", f"sum(rabbitmq_queue_messages_ready{JN}) by(rabbitmq_node)"),
    ("Messages pending consumer acknowledgement", f"sum(rabbitmq_queue_messages_unacked{JN}) by(rabbitmq_node)"),
    ("Messages published / s", by_node_rate("rabbitmq_channel_messages_published_total")),
    ("Messages confirmed to publishers / s", by_node_rate("rabbitmq_channel_messages_confirmed_total")),
    ("Messages routed to queues / s", by_node_rate("rabbitmq_queue_messages_published_total")),
    ("Messages unconfirmed to publishers / s", by_node_rate("rabbitmq_channel_messages_unconfirmed")),
    ("Unroutable messages dropped / s", by_node_rate("rabbitmq_channel_messages_unroutable_dropped_total")),
    ("Unroutable messages returned to publishers / s",
     by_node_rate("rabbitmq_channel_messages_unroutable_returned_total")),
    ("Messages delivered / s",
     f"sum(\n  (rate(rabbitmq_channel_messages_delivered_total[60s]){JN}) +\n"
     f"  (rate(rabbitmq_channel_messages_delivered_ack_total[60s]){JN})\n) by(rabbitmq_node)"),
    ("Messages redelivered / s", by_node_rate("rabbitmq_channel_messages_redelivered_total")),
    ("Messages delivered with manual ack / s", by_node_rate("rabbitmq_channel_messages_delivered_ack_total")),
    ("Messages delivered auto ack / s", by_node_rate("rabbitmq_channel_messages_delivered_total")),
    ("Messages acknowledged / s", by_node_rate("rabbitmq_channel_messages_acked_total")),
    ("Polling operations with auto ack / s", by_node_rate("rabbitmq_channel_get_total")),
    ("Polling operations that yield no result / s", by_node_rate("rabbitmq_channel_get_empty_total")),
    ("Polling operations with manual ack / s", by_node_rate("rabbitmq_channel_get_ack_total")),
    ("Total queues", f"rabbitmq_queues{JN}"),
    ("Queues declared / s", by_node_rate("rabbitmq_queues_declared_total")),
    ("Queues created / s", by_node_rate("rabbitmq_queues_created_total")),
    ("Queues deleted / s", by_node_rate("rabbitmq_queues_deleted_total")),
    ("Total channels", f"rabbitmq_channels{JN}"),
    ("Channels opened / s", by_node_rate("rabbitmq_channels_opened_total")),
    ("Channels closed / s", by_node_rate("rabbitmq_channels_closed_total")),
    ("Total connections", f"rabbitmq_connections{JN}"),
    ("Connections opened / s", by_node_rate("rabbitmq_connections_opened_total")),
    ("Connections closed / s", by_node_rate("rabbitmq_connections_closed_total")),
]

# Panels allowed to come back empty, with the reason: a feature this broker does not have. None: every panel of
# the overview reads a family the broker serves (the Erlang-specific ones are on other dashboards).
EXPECTED_EMPTY = {}

# The rate panels that the traffic below must move above zero in the last minute. (Messages unconfirmed / s is the
# rate of a gauge that is 0 before and after: present, not moved.)
MOVED_BY_TRAFFIC = [
    "Incoming messages / s", "Outgoing messages / s", "Messages published / s",
    "Messages confirmed to publishers / s", "Messages routed to queues / s", "Unroutable messages dropped / s",
    "Unroutable messages returned to publishers / s", "Messages delivered / s", "Messages redelivered / s",
    "Messages delivered with manual ack / s", "Messages delivered auto ack / s", "Messages acknowledged / s",
    "Polling operations with auto ack / s", "Polling operations that yield no result / s",
    "Polling operations with manual ack / s", "Queues declared / s", "Queues created / s", "Queues deleted / s",
    "Channels opened / s", "Channels closed / s", "Connections opened / s", "Connections closed / s",
]

DEFINITIONS = {"users": [{"name": "guest", "password": "guest", "tags": ["administrator"]}],
               "vhosts": [{"name": "/"}, {"name": "other"}],
               "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "other"}]}


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when this process ends, even by a signal that skips the cleanups."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process, log=None):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if log is not None:
        log.close()


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode()


def families(text):
    """The metric names of the samples of an exposition."""
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def samples(text):
    """NAME{LABELS} -> value."""
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def wait_until(what, predicate, timeout, step=0.1):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


class PrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.started = time.time()
        cls.temp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.temp.cleanup)  # registered first: runs last, after both processes stopped
        cls.start_broker()
        cls.start_prometheus()
        cls.wait_for_targets()
        cls.traffic_done = None
        cls.make_traffic()
        cls.wait_for_scrapes_after(cls.traffic_done)

    # The broker and Prometheus --------------------------------------------------------------------------------

    @classmethod
    def start_broker(cls):
        d = cls.temp.name
        with open(os.path.join(d, "definitions.json"), "w") as f:
            json.dump(DEFINITIONS, f)
        ports = os.path.join(d, "ports.json")
        cls.broker_log = open(os.path.join(d, "broker.log"), "ab")
        cls.broker = subprocess.Popen(
            [BROKER, "--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "0", "--wss-port", "off",
             "--amqp-port", "0", "--port-file", ports, "--data-dir", os.path.join(d, "data"),
             "--definitions", os.path.join(d, "definitions.json")],
            stdout=cls.broker_log, stderr=cls.broker_log, preexec_fn=die_with_parent)
        cls.addClassCleanup(stop, cls.broker, cls.broker_log)
        wait_until("the broker's port file", lambda: os.path.exists(ports) or cls.broker.poll() is not None, 20)
        if cls.broker.poll() is not None:
            raise RuntimeError("the broker did not start: " + open(os.path.join(d, "broker.log")).read()[-2000:])
        time.sleep(0.05)  # the file is written whole, but give the writer its close
        cls.ports = json.load(open(ports))
        cls.metrics_address = f"127.0.0.1:{cls.ports['ws']}"
        cls.base = f"http://{cls.metrics_address}"

    @classmethod
    def start_prometheus(cls):
        # Grafana fills $namespace from label_values(rabbitmq_identity_info, namespace), and every query selects
        # namespace="$namespace". On Kubernetes the label is the pod's namespace; here there is none, so the scrape
        # config adds one as a target label (an empty one would be no label: no value to choose, and a
        # dashboard left with "$namespace" unresolved). $rabbitmq_cluster comes from the broker's own
        # rabbitmq_identity_info, as the dashboard reads it; no relabelling of the cluster or the node.
        labels = {"namespace": NAMESPACE}
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "firemq", "metrics_path": "/metrics",
                 "static_configs": [{"targets": [cls.metrics_address], "labels": labels}]},
                # The same node's per-queue families, as RabbitMQ's documentation scrapes them: a second job.
                # /metrics/detailed has rabbitmq_identity_info and rabbitmq_build_info too, as RabbitMQ's has (so
                # that its own series can be joined on the identity), and this version of the dashboard joins
                # on(instance) alone: with both jobs under one instance the join finds two identities for it and
                # every query fails ("many-to-many matching not allowed"; later versions join on(instance,
                # job)). So the second job's instance names its endpoint, and its build_info, which the Nodes
                # panel counts, is dropped: one node, not two.
                {"job_name": "firemq-detailed", "metrics_path": "/metrics/detailed",
                 "params": {"family": DETAILED_FAMILIES, "vhost": ["/"]},
                 "static_configs": [{"targets": [cls.metrics_address], "labels": labels}],
                 "relabel_configs": [{"source_labels": ["__address__"], "target_label": "instance",
                                      "replacement": "${1}/metrics/detailed"}],
                 "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "rabbitmq_build_info",
                                             "action": "drop"}]},
            ]}
        config_file = os.path.join(cls.temp.name, "prometheus.yml")
        with open(config_file, "w") as f:
            json.dump(config, f, indent=1)  # JSON is YAML
        cls.prometheus_log = open(os.path.join(cls.temp.name, "prometheus.log"), "ab")
        cls.addClassCleanup(cls.prometheus_log.close)  # after the processes' stops, which are registered later
        for attempt in range(3):  # the free port may be taken between its choice and Prometheus's bind
            port = free_port()
            cls.prometheus = subprocess.Popen(
                [PROMETHEUS, "--config.file", config_file, "--storage.tsdb.path", os.path.join(cls.temp.name, "tsdb"),
                 "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "warn"],
                stdout=cls.prometheus_log, stderr=cls.prometheus_log, preexec_fn=die_with_parent)
            cls.addClassCleanup(stop, cls.prometheus)
            cls.api = f"http://127.0.0.1:{port}"

            def ready():
                if cls.prometheus.poll() is not None:
                    return "exited"
                try:
                    return http_get(cls.api + "/-/ready", timeout=1)[0] == 200
                except (OSError, urllib.error.URLError):
                    return False
            if wait_until("Prometheus to be ready", ready, 30) is True:
                return
        log = open(os.path.join(cls.temp.name, "prometheus.log")).read()
        raise RuntimeError("prometheus did not start: " + log[-2000:])

    @classmethod
    def wait_for_targets(cls):
        """Until both targets are up (at most 30 s), or one has failed its scrapes for 3 s: a broker without an
        endpoint will not grow one, and the tests go on to say what else is missing (test_both_targets_are_up
        fails for the target)."""
        down_since = {}

        def settled():
            targets = cls.api_get("/api/v1/targets")["activeTargets"]
            cls.targets = {t["labels"]["job"]: t for t in targets}
            if set(cls.targets) != {"firemq", "firemq-detailed"}:
                return False
            for job, target in cls.targets.items():
                if target["health"] == "down":
                    down_since.setdefault(job, time.time())
                else:
                    down_since.pop(job, None)
            if all(t["health"] == "up" for t in targets):
                return True
            return all(t["health"] != "unknown" for t in targets) and min(
                down_since.values(), default=time.time()) < time.time() - 3
        wait_until("both scrape targets to be scraped", settled, 30, step=0.2)

    @classmethod
    def api_get(cls, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            status, text = http_get(cls.api + path + ("?" + query if query else ""), timeout=10)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
        answer = json.loads(text)
        if answer["status"] != "success":
            raise RuntimeError(f"{path} {params}: {answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    @classmethod
    def query(cls, expression):
        """The instant vector of a PromQL query, as [(labels, value)]."""
        data = cls.api_get("/api/v1/query", query=expression)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    @classmethod
    def wait_for_scrapes_after(cls, moment):
        """Until both jobs have a sample taken after moment (whatever the broker's metrics say)."""
        def scraped():
            try:
                got = cls.query(f"timestamp(up) > {moment}")
            except RuntimeError:
                return False
            return {labels.get("job") for labels, _ in got} == {"firemq", "firemq-detailed"}
        wait_until("a scrape of both jobs after the traffic", scraped, 20)

    # Traffic ------------------------------------------------------------------------------------------------

    @classmethod
    def amqp(cls, vhost="/"):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", cls.ports["amqp"], vhost, pika.PlainCredentials("guest", "guest"),
            connection_attempts=1, socket_timeout=5))

    @classmethod
    def make_traffic(cls):
        """After the first scrape, so that every counter the dashboard rates moves within its 60 s window. Left
        open for the queries: connections A (3 channels) and B (1), a manual-ack consumer holding one unacked
        message, an auto-ack consumer, 3 + 1 ready messages, 5 queues."""
        a = cls.amqp()
        cls.addClassCleanup(cls.close_quietly, a)
        publish = a.channel()
        publish.confirm_delivery()
        cls.confirmed_publishes = 0

        def send(queue, body, mandatory=False):
            try:
                publish.basic_publish("", queue, body, mandatory=mandatory)
            except pika.exceptions.UnroutableError:
                pass  # the mandatory one: returned, and confirmed all the same
            cls.confirmed_publishes += 1
        for queue in ("prom-ready", "prom-work", "prom-poll", "prom-auto"):
            publish.queue_declare(queue)
        publish.queue_declare("prom-ready")  # again: declared, not created
        for i in range(3):
            send("prom-ready", b"ready %d" % i)
        send("prom-nowhere", b"returned", mandatory=True)
        send("prom-nowhere", b"dropped")

        # Polling: auto ack, manual ack, then empty.
        for i in range(3):
            send("prom-poll", b"poll %d" % i)
        assert publish.basic_get("prom-poll", auto_ack=True)[0] is not None
        method, _, _ = publish.basic_get("prom-poll", auto_ack=False)
        publish.basic_ack(method.delivery_tag)
        assert publish.basic_get("prom-poll", auto_ack=True)[0] is not None
        assert publish.basic_get("prom-poll", auto_ack=True)[0] is None  # empty

        # A manual-ack consumer: two acked, one nacked and redelivered then acked, one left unacknowledged.
        work = a.channel()
        work.basic_qos(prefetch_count=10)
        deliveries = []
        work.basic_consume("prom-work", lambda ch, method, props, body: deliveries.append(method))
        for i in range(4):
            send("prom-work", b"work %d" % i)
        wait_until("4 deliveries", lambda: a.process_data_events(0.05) or len(deliveries) >= 4, 10, step=0)
        work.basic_ack(deliveries[0].delivery_tag)
        work.basic_ack(deliveries[1].delivery_tag)
        work.basic_nack(deliveries[2].delivery_tag, requeue=True)
        wait_until("the redelivery", lambda: a.process_data_events(0.05) or len(deliveries) >= 5, 10, step=0)
        assert deliveries[4].redelivered, deliveries[4]
        work.basic_ack(deliveries[4].delivery_tag)

        # An auto-ack consumer.
        auto = a.channel()
        received = []
        auto.basic_consume("prom-auto", lambda ch, method, props, body: received.append(body), auto_ack=True)
        send("prom-auto", b"auto 0")
        send("prom-auto", b"auto 1")
        wait_until("2 auto-ack deliveries", lambda: a.process_data_events(0.05) or len(received) >= 2, 10, step=0)

        # Another vhost, kept out of the detailed job by its vhost filter.
        b = cls.amqp("other")
        cls.addClassCleanup(cls.close_quietly, b)
        other = b.channel()
        other.queue_declare("prom-other")
        other.basic_publish("", "prom-other", b"elsewhere")

        # Churn: a connection with a channel closed early, an exclusive queue and a deleted one.
        c = cls.amqp()
        first = c.channel()
        c.channel().close()
        first.queue_declare("prom-exclusive", exclusive=True)  # deleted when c closes
        first.queue_declare("prom-temporary")
        first.queue_delete("prom-temporary")
        c.close()

        a.process_data_events(0.1)
        b.process_data_events(0.1)
        cls.expected = {"queues": 5, "connections": 2, "channels": 4, "consumers": 2, "ready": 4, "unacked": 1}
        # Wait for the broker to have seen the close, then note the moment: what Prometheus scrapes after it
        # is the final state.
        wait_until("the churn connection's close", lambda: samples(http_get(cls.base + "/metrics")[1]).get(
            "rabbitmq_connections") in (2, None), 10)
        cls.traffic_done = time.time()

    @staticmethod
    def close_quietly(connection):
        try:
            connection.close()
        except Exception:
            pass

    # The dashboard ------------------------------------------------------------------------------------------

    def variables(self):
        """$namespace and $rabbitmq_cluster as Grafana resolves them: label_values() of rabbitmq_identity_info."""
        namespaces = self.api_get("/api/v1/label/namespace/values", **{"match[]": "rabbitmq_identity_info"})
        clusters = self.api_get("/api/v1/label/rabbitmq_cluster/values",
                                **{"match[]": f'rabbitmq_identity_info{{namespace="{NAMESPACE}"}}'})
        return namespaces, clusters

    def substitute(self, expression):
        namespaces, clusters = self.variables()
        out = expression.replace("$rabbitmq_cluster", clusters[0] if clusters else "")
        out = out.replace("$namespace", namespaces[0] if namespaces else "")
        for grafana in ("$__rate_interval", "$__interval", "$__range"):
            out = out.replace(grafana, "60s")
        self.assertNotIn("$", out)
        return out

    def panel(self, title):
        return self.query(self.substitute(dict(OVERVIEW_PANELS)[title]))

    def panel_value(self, title):
        result = self.panel(title)
        self.assertEqual(len(result), 1, f"{title}: {result}")
        return result[0][1]

    def test_both_targets_are_up(self):
        self.assertEqual({job: (t["health"], t["lastError"]) for job, t in self.targets.items()},
                         {"firemq": ("up", ""), "firemq-detailed": ("up", "")})

    def test_the_dashboard_variables_resolve_to_this_node(self):
        namespaces, clusters = self.variables()
        self.assertEqual(namespaces, [NAMESPACE])
        node = [labels for labels, _ in self.query('rabbitmq_identity_info{job="firemq"}')]
        self.assertEqual(len(node), 1, node)
        self.assertEqual(clusters, [node[0]["rabbitmq_cluster"]])

    def test_every_overview_panel_returns_series(self):
        self.assertEqual(len(OVERVIEW_PANELS), 41)
        empty, failed, report = {}, {}, []
        for title, expression in OVERVIEW_PANELS:
            try:
                result = self.query(self.substitute(expression))
            except RuntimeError as e:
                failed[title] = str(e)
                report.append(f"  ERROR  {title}: {str(e)[-300:]}")
                continue
            if not result:
                empty[title] = expression
            values = ", ".join(f"{v:g}" for _, v in result)
            report.append(f"  {len(result)} series  {title}: {values or '(empty)'}")
        print("\nRabbitMQ-Overview through Prometheus:\n" + "\n".join(report), file=sys.stderr)
        self.assertEqual(failed, {}, "queries that Prometheus refused")
        self.assertEqual(sorted(empty), sorted(EXPECTED_EMPTY),
                         "panels with no series (EXPECTED_EMPTY lists those allowed, with the reason)")

    def test_the_gauges_show_what_is_open(self):
        e = self.expected
        self.assertEqual(self.panel_value("Queues"), e["queues"])
        self.assertEqual(self.panel_value("Total queues"), e["queues"])
        self.assertEqual(self.panel_value("Connections"), e["connections"])
        self.assertEqual(self.panel_value("Total connections"), e["connections"])
        self.assertEqual(self.panel_value("Channels"), e["channels"])
        self.assertEqual(self.panel_value("Consumers"), e["consumers"])
        self.assertEqual(self.panel_value("Publishers"), e["channels"] - e["consumers"])  # the dashboard's formula
        self.assertEqual(self.panel_value("Ready messages"), e["ready"])
        self.assertEqual(self.panel_value("Messages ready to be delivered to consumers"), e["ready"])
        self.assertEqual(self.panel_value("Unacknowledged messages"), e["unacked"])
        self.assertEqual(self.panel_value("Messages pending consumer acknowledgement"), e["unacked"])
        self.assertEqual(self.panel_value("Nodes"), 1)
        # The same figures as the management API gives.
        for path, expected in (("/api/queues", e["queues"]), ("/api/connections", e["connections"]),
                               ("/api/channels", e["channels"]), ("/api/consumers", e["consumers"])):
            request = urllib.request.Request(self.base + path, headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
            with urllib.request.urlopen(request, timeout=5) as response:
                self.assertEqual(len(json.load(response)), expected, path)

    def test_the_node_panels(self):
        [(labels, _)] = self.panel("NODES (table: versions, host, node name)")
        for column in ("rabbitmq_version", "instance", "rabbitmq_node", "rabbitmq_cluster"):
            self.assertTrue(labels.get(column), f"{column} in {labels}")
        for title in ("Memory available before publishers blocked", "Disk space available before publishers blocked",
                      "File descriptors available", "TCP sockets available"):
            self.assertGreater(self.panel_value(title), 0, title)

    def test_the_traffic_moves_every_rate(self):
        still = [title for title in MOVED_BY_TRAFFIC if not self.panel_value(title) > 0]
        self.assertEqual(still, [], "rates that stayed at 0 through the traffic")

    def test_the_counters_count_the_traffic(self):
        def value(metric):
            got = self.query(f'{metric}{{job="firemq"}}')
            return got[0][1] if len(got) == 1 else got
        expected = {
            "rabbitmq_channel_messages_published_total": self.confirmed_publishes + 1,  # + the one in "other"
            "rabbitmq_channel_messages_confirmed_total": self.confirmed_publishes,
            "rabbitmq_channel_messages_unroutable_returned_total": 1,
            "rabbitmq_channel_messages_unroutable_dropped_total": 1,
            "rabbitmq_queue_messages_published_total": self.confirmed_publishes + 1 - 2,
            "rabbitmq_channel_get_total": 2, "rabbitmq_channel_get_ack_total": 1,
            "rabbitmq_channel_get_empty_total": 1,
            "rabbitmq_channel_messages_delivered_ack_total": 5, "rabbitmq_channel_messages_delivered_total": 2,
            "rabbitmq_channel_messages_redelivered_total": 1, "rabbitmq_channel_messages_acked_total": 4,
            "rabbitmq_queues_created_total": 7, "rabbitmq_queues_declared_total": 8,
            "rabbitmq_queues_deleted_total": 2,
            "rabbitmq_connections_opened_total": 3, "rabbitmq_connections_closed_total": 1,
            "rabbitmq_channels_opened_total": 6, "rabbitmq_channels_closed_total": 2,
        }
        self.assertEqual({metric: value(metric) for metric in expected}, expected)

    # /metrics/detailed ----------------------------------------------------------------------------------------

    def test_the_detailed_job_has_the_queues_of_its_vhost(self):
        ready = {labels["queue"]: v for labels, v in self.query("rabbitmq_detailed_queue_messages_ready")}
        self.assertEqual(ready, {"prom-ready": 3, "prom-work": 0, "prom-poll": 0, "prom-auto": 0})
        unacked = {labels["queue"]: v for labels, v in self.query("rabbitmq_detailed_queue_messages_unacked")}
        self.assertEqual(unacked["prom-work"], 1)
        consumers = {labels["queue"]: v for labels, v in self.query("rabbitmq_detailed_queue_consumers")}
        self.assertEqual(consumers, {"prom-ready": 0, "prom-work": 1, "prom-poll": 0, "prom-auto": 1})
        # Its series join on its own rabbitmq_identity_info, as the per-queue dashboards join them.
        joined = self.query('rabbitmq_detailed_queue_messages{queue="prom-ready"} * on(instance) '
                            'group_left(rabbitmq_cluster, rabbitmq_node) rabbitmq_identity_info')
        self.assertEqual([(labels.get("vhost"), bool(labels.get("rabbitmq_cluster")), v) for labels, v in joined],
                         [("/", True, 3)])
        # /metrics itself stays aggregated: no per-queue series from the first job.
        self.assertEqual(self.query('{job="firemq", queue!=""}'), [])

    def detailed(self, query):
        try:
            return http_get(self.base + "/metrics/detailed" + query)[1]
        except urllib.error.HTTPError as e:
            self.fail(f"/metrics/detailed{query}: {e}")

    def test_detailed_gives_only_the_families_asked_for(self):
        identity = {"rabbitmq_identity_info", "rabbitmq_build_info"}
        coarse = {"rabbitmq_detailed_queue_messages_ready", "rabbitmq_detailed_queue_messages_unacked",
                  "rabbitmq_detailed_queue_messages"}
        consumers = {"rabbitmq_detailed_queue_consumers"}
        self.assertEqual(families(self.detailed("")), identity)
        self.assertEqual(families(self.detailed("?family=queue_coarse_metrics")), identity | coarse)
        self.assertEqual(families(self.detailed("?family=queue_consumer_count")), identity | consumers)
        self.assertEqual(families(self.detailed("?family=queue_coarse_metrics&family=queue_consumer_count")),
                         identity | coarse | consumers)
        # A family the broker does not know is left out, the others still answered (as RabbitMQ does).
        self.assertEqual(families(self.detailed("?family=no_such_family")), identity)
        self.assertEqual(families(self.detailed("?family=no_such_family&family=queue_consumer_count")),
                         identity | consumers)

    def test_detailed_gives_only_the_vhosts_asked_for(self):
        def queues(query):
            return {name.split('queue="')[1].split('"')[0]: name.split('vhost="')[1].split('"')[0]
                    for name in samples(self.detailed(query)) if name.startswith("rabbitmq_detailed_queue_messages{")}
        every = {"prom-ready": "/", "prom-work": "/", "prom-poll": "/", "prom-auto": "/", "prom-other": "other"}
        self.assertEqual(queues("?family=queue_coarse_metrics"), every)  # no vhost: all of them
        self.assertEqual(queues("?family=queue_coarse_metrics&vhost=other"), {"prom-other": "other"})
        self.assertEqual(queues("?family=queue_coarse_metrics&vhost=%2F"),
                         {q: v for q, v in every.items() if v == "/"})
        self.assertEqual(queues("?family=queue_coarse_metrics&vhost=%2F&vhost=other"), every)
        self.assertEqual(queues("?family=queue_coarse_metrics&vhost=nowhere"), {})

    @classmethod
    def tearDownClass(cls):
        print(f"prometheus_test: {time.time() - cls.started:.1f} s from the broker's start", file=sys.stderr)


if __name__ == "__main__":
    BROKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
