#!/usr/bin/python3
"""What polling the management API costs the data path (docs/management.md, "Cost on the data path").

Starts one firemq-broker, then runs firemq-bench against it ROUNDS times without and with a client that polls
GET /api/queues every 100 ms (as a dashboard would), alternating, in the same broker run; prints each run's
end-to-end rates and the ranges, and the polls' answer times; and first, on the idle broker, what one poll takes
back to back (an upper bound of the broker thread's time per poll: the client's own time is in it too).

Usage: management_bench.py BROKER_EXECUTABLE BENCH_EXECUTABLE [--rounds N] [--count N]
"""
import argparse, base64, json, os, signal, subprocess, tempfile, threading, time, urllib.request


def start_broker(executable, directory):
    ports = os.path.join(directory, "ports.json")
    process = subprocess.Popen([executable, "--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "0",
                                "--wss-port", "off", "--amqp-port", "off", "--port-file", ports],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while not os.path.exists(ports):
        if process.poll() is not None or time.time() > deadline:
            raise RuntimeError("the broker did not start")
        time.sleep(0.02)
    return process, json.load(open(ports))


class Poller(threading.Thread):
    """GET /api/queues every 100 ms until stopped; keeps each answer's time."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.request = urllib.request.Request(f"http://127.0.0.1:{port}/api/queues")
        self.request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        self.stopping = threading.Event()
        self.seconds = []

    def poll(self):
        started = time.perf_counter()
        with urllib.request.urlopen(self.request, timeout=10) as response:
            response.read()
            if response.status != 200:
                raise RuntimeError(f"GET /api/queues answered {response.status}")
        self.seconds.append(time.perf_counter() - started)
        return started

    def run(self):
        while not self.stopping.is_set():
            started = self.poll()
            self.stopping.wait(max(0.0, 0.1 - (time.perf_counter() - started)))


def bench(executable, port, count):
    done = subprocess.run([executable, "--url", f"fire://127.0.0.1:{port}", "--count", str(count), "--json"],
                          capture_output=True, text=True, check=True)
    return {(r["body_bytes"], r["confirms"]): r["end_to_end_msgs_per_s"] for r in json.loads(done.stdout)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("broker")
    parser.add_argument("bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=300000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        process, ports = start_broker(args.broker, temp)
        results = {"without": [], "with": []}
        polls = []
        idle = Poller(ports["ws"])
        for _ in range(500):
            idle.poll()
        idle.seconds.sort()
        print(f"idle broker, 500 polls back to back: median {idle.seconds[250] * 1000:.2f} ms, "
              f"99th percentile {idle.seconds[495] * 1000:.2f} ms", flush=True)
        try:
            for round_number in range(args.rounds):
                for mode in ("without", "with"):
                    poller = Poller(ports["ws"]) if mode == "with" else None
                    if poller:
                        poller.start()
                    figures = bench(args.bench, ports["fire"], args.count)
                    if poller:
                        poller.stopping.set()
                        poller.join()
                        polls += poller.seconds
                    results[mode].append(figures)
                    print(f"round {round_number + 1} {mode:7} polling: " +
                          ", ".join(f"{size} B{' confirms' if confirms else ''} {rate / 1000:.0f} k"
                                    for (size, confirms), rate in sorted(figures.items())), flush=True)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(10)
    print("end-to-end msg/s, ranges over the rounds:")
    for scenario in sorted(results["without"][0]):
        ranges = {mode: (min(r[scenario] for r in runs), max(r[scenario] for r in runs)) for mode, runs in results.items()}
        size, confirms = scenario
        print(f"  {size} B, confirms {'yes' if confirms else 'no'}: without {ranges['without'][0] / 1000:.0f} - "
              f"{ranges['without'][1] / 1000:.0f} k, with {ranges['with'][0] / 1000:.0f} - {ranges['with'][1] / 1000:.0f} k")
    polls.sort()
    print(f"{len(polls)} polls: median {polls[len(polls) // 2] * 1000:.1f} ms, max {polls[-1] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
