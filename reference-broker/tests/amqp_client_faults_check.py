#!/usr/bin/python3
"""The AMQP client tests can fail: for each fault of amqp_client_faults.json, the broker started with
--amqp-fault NAME must fail exactly the listed tests of each client (Go's amqp091-go, bunny, pika), and nothing
else. Without a fault they all pass (their own CTest tests); this shows their verdicts depend on the behaviour.

Usage: amqp_client_faults_check.py BROKER_EXECUTABLE AMQP_GO_TEST_BINARY FAULTS_JSON
"""
import json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def failed_go(output):
    return set(re.findall(r"^--- FAIL: (\S+)", output, re.M))


def failed_bunny(output):
    return set(re.findall(r"^\s*\d+\) (?:Failure|Error):\n\w+#(\w+)", output, re.M))


def failed_pika(output):
    return set(re.findall(r"^(?:FAIL|ERROR): (\w+) \(__main__\.", output, re.M))


def main():
    broker, go_test, faults_file = sys.argv[1:4]
    faults = json.load(open(faults_file))["faults"]
    clients = {
        "go": (lambda f: [go_test, "-test.v", "-test.timeout", "100s", "-broker", broker,
                          "-broker-arg=--amqp-fault=" + f], failed_go),
        "bunny": (lambda f: ["/usr/bin/ruby", os.path.join(HERE, "amqp_bunny_test.rb"), broker,
                             "--broker-arg", "--amqp-fault=" + f], failed_bunny),
        "pika": (lambda f: ["/usr/bin/python3", "-W", "ignore", os.path.join(HERE, "amqp_pika_test.py"), broker,
                            "--broker-arg", "--amqp-fault=" + f, "RabbitMqChannelSemantics", "RabbitMqClientItems"],
                 failed_pika),
    }
    passed = failed = 0
    for fault, expected in faults.items():
        for client, (command, parse) in clients.items():
            done = subprocess.run(command(fault), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=200)
            got = parse(done.stdout)
            want = set(expected[client])
            # A run that failed without naming a failed test (a crash, a broker that did not start) is no verdict.
            ok = got == want and (done.returncode != 0) == bool(want)
            print("%s %s --amqp-fault %s: failed %s" % ("ok  " if ok else "FAIL", client, fault, sorted(got) or "none"))
            if ok:
                passed += 1
            else:
                failed += 1
                print("  expected to fail: %s (exit %d)\n%s" % (sorted(want) or "none", done.returncode,
                                                               done.stdout[-3000:]))
    print("amqp_client_faults: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
