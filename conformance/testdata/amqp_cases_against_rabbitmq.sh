#!/usr/bin/env bash
# Runs the AMQP-only cases (conformance/cases/amqp.json) against RabbitMQ from Debian (rabbitmq-server), started
# here on private ports with its own data dir, never the system's service. The harness still needs a FireMQ
# --url (it checks the target is reachable), so a reference broker runs beside it; the cases use only the AMQP
# side, --amqp-url, which points at RabbitMQ.
# Usage: amqp_cases_against_rabbitmq.sh BROKER CONFORM [HARNESS ARGS...]
set -euo pipefail
broker=$1 conform=$2
shift 2
work=$(mktemp -d /tmp/firemq-rabbitmq.XXXXXX)
amqp_port=${RABBITMQ_TEST_PORT:-25680}
rabbit_pid="" broker_pid=""
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null || true
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

"$broker" --bind 127.0.0.1 --port 0 --amqp-port off --ws-port off --port-file "$work/ports.json" \
          --data-dir "$work/data" >"$work/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 100); do [ -s "$work/ports.json" ] && break; sleep 0.1; done
fire_port=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fire"])' "$work/ports.json")
"$conform" --url "fire://guest:guest@127.0.0.1:$fire_port/" --amqp-url "amqp://guest:guest@127.0.0.1:$amqp_port/" \
           --group amqp --reports "$work/reports" "$@"
