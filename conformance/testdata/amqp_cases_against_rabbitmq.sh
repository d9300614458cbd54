#!/usr/bin/env bash
# Runs the AMQP-only cases (conformance/cases/amqp.json, and the interop cases that need no FireMQ connection)
# against RabbitMQ from Debian (rabbitmq-server), started here on private ports with its own data dir, never the
# system's service (scripts/rabbitmq-private-node.sh; RABBITMQ_TEST_PORT, 25680 by default, and the two above it):
# the harness's --url amqp://, which skips every case that opens a FireMQ connection. The run must pass and must
# have run every case of the amqp group (a skip there would hide a gap).
# Usage: amqp_cases_against_rabbitmq.sh CONFORM [HARNESS ARGS...]
set -euo pipefail
conform=$1
shift 1
work=$(mktemp -d /tmp/firemq-rabbitmq.XXXXXX)
amqp_port=${RABBITMQ_TEST_PORT:-25680}
node=$(dirname "$0")/../../scripts/rabbitmq-private-node.sh
started=""
cleanup() {
  [ -n "$started" ] && { bash "$node" stop "$amqp_port" "$work" || true; }
  rm -rf "$work"
}
trap cleanup EXIT
bash "$node" start "$amqp_port" "$work"  # stops what it started when it fails
started=1

"$conform" --url "amqp://guest:guest@127.0.0.1:$amqp_port/" --reports "$work/reports" "$@"
/usr/bin/python3 - "$work/reports/latest/report.json" "$(dirname "$0")/../cases/amqp.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
# A case with broker_args needs a reference broker started with its own flags: it cannot run against RabbitMQ.
own_broker = {c["id"] for c in json.load(open(sys.argv[2]))["cases"] if "broker_args" in c}
amqp = [c for c in cases if c["group"] == "amqp" and c["id"] not in own_broker]
not_run = [c["id"] for c in amqp if c["verdict"] not in ("pass", "fail", "error")]
if not amqp or not_run:
    sys.exit(f"the amqp group did not run whole against RabbitMQ: {len(amqp)} cases, not run: {not_run}")
print(f"{len(amqp)} amqp cases ran against RabbitMQ")
PY
