#!/usr/bin/env bash
# Runs the AMQP-only cases (conformance/cases/amqp.json, and the interop cases that need no FireMQ connection)
# against RabbitMQ from Debian (rabbitmq-server), started here on private ports with its own data dir, never the
# system's service: the harness's --url amqp://, which skips every case that opens a FireMQ connection. The run
# must pass and must have run every case of the amqp group (a skip there would hide a gap).
# Usage: amqp_cases_against_rabbitmq.sh CONFORM [HARNESS ARGS...]
set -euo pipefail
conform=$1
shift 1
work=$(mktemp -d /tmp/firemq-rabbitmq.XXXXXX)
amqp_port=${RABBITMQ_TEST_PORT:-25680}
rabbit_pid=""
cleanup() {
  if [ -n "$rabbit_pid" ]; then
    # The Erlang VM of this node (started below: the only one on our private epmd port), then that epmd.
    vm_pids=$(pgrep -f "beam.*-epmd_port $((amqp_port + 2))" || true)
    [ -n "$vm_pids" ] && kill $vm_pids 2>/dev/null || true
    sleep 2
    epmd_pid=$(pgrep -f "epmd -daemon" -u rabbitmq -n || true)
    for pid in $epmd_pid; do
      tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx "ERL_EPMD_PORT=$((amqp_port + 2))" && kill "$pid" 2>/dev/null || true
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/home" "$work/mnesia" "$work/log"
echo "[]." >"$work/enabled_plugins"
server=/usr/lib/rabbitmq/bin/rabbitmq-server
if [ "$(id -u)" -eq 0 ]; then
  chown -R rabbitmq:rabbitmq "$work"  # Debian's wrapper runs the node as the rabbitmq user
  server=/usr/sbin/rabbitmq-server
fi
env HOME="$work/home" RABBITMQ_NODENAME="firemq-conform-$$@localhost" RABBITMQ_NODE_PORT="$amqp_port" \
    RABBITMQ_DIST_PORT=$((amqp_port + 1)) ERL_EPMD_PORT=$((amqp_port + 2)) RABBITMQ_MNESIA_BASE="$work/mnesia" \
    RABBITMQ_LOG_BASE="$work/log" RABBITMQ_ENABLED_PLUGINS_FILE="$work/enabled_plugins" \
    RABBITMQ_CONFIG_FILE="$work/none" "$server" >"$work/rabbitmq.out" 2>&1 &
rabbit_pid=$!
for _ in $(seq 1 60); do
  (echo >/dev/tcp/127.0.0.1/"$amqp_port") 2>/dev/null && break
  sleep 1
done
(echo >/dev/tcp/127.0.0.1/"$amqp_port") 2>/dev/null || { echo "RabbitMQ did not start:"; tail -20 "$work/rabbitmq.out"; exit 1; }

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
