#!/usr/bin/env bash
# Proof that the durability cases can fail: the reference broker behind a restart command that wipes its data
# directory (a broker that forgets everything at a restart). Every case that expects something to survive must
# fail against it (the transient-message case too: it needs its durable queue back); the three that expect only
# that something is gone must still pass.
#   amnesiac_broker_check.sh BROKER CONFORM DEFINITIONS
set -euo pipefail
broker=$1 conform=$2 definitions=$3
work=$(mktemp -d /tmp/firemq-amnesiac-XXXXXX)
trap 'kill -9 "$(cat "$work/pid" 2>/dev/null)" 2>/dev/null; rm -rf "$work"' EXIT

start_broker() {  # PORT
  (setsid "$broker" --bind 127.0.0.1 --port "$1" --ws-port off --amqp-port off --port-file "$work/port" --data-dir "$work/data" \
     --definitions "$definitions" >>"$work/log" 2>&1 & echo $! >"$work/pid")
}
start_broker 0
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(grep -o '[0-9][0-9]*' "$work/port")

# Stop it (kill -9 either way), wait until it is gone (a zombie counts as gone: its socket is closed), forget
# its data, start it again on the same port.
cat >"$work/restart.sh" <<SCRIPT
pid=\$(cat "$work/pid")
kill -9 "\$pid" 2>/dev/null || true
while [ -e /proc/\$pid ] && ! grep -q ') Z' /proc/\$pid/stat 2>/dev/null; do sleep 0.02; done
rm -rf "$work/data" "$work/port"
(setsid "$broker" --bind 127.0.0.1 --port $port --ws-port off --amqp-port off --port-file "$work/port" --data-dir "$work/data" \\
   --definitions "$definitions" >>"$work/log" 2>&1 & echo \$! >"$work/pid")
SCRIPT

set +e
"$conform" --url "fire://guest:guest@127.0.0.1:$port/" --features conform-definitions --group durability \
  --restart-command "sh $work/restart.sh" --reports "$work/reports" >"$work/out" 2>&1
status=$?
set -e
cat "$work/out"
failed=$(/usr/bin/python3 "$(dirname "$0")/failed_cases.py" "$work/reports/latest/report.json")
expected_to_pass="durability.message.persistent-in-a-transient-queue-goes-with-the-queue
durability.topology.exclusive-queue-is-gone-after-kill-9-even-if-durable
durability.topology.transient-queue-and-exchange-are-gone-after-restart"
selected=$("$conform" --list --group durability | grep -o '^ *durability\.[a-z0-9.-]*' | tr -d ' ' | sort)
must_fail=$(comm -23 <(echo "$selected") <(echo "$expected_to_pass" | sort))
if [ "$status" -eq 0 ]; then echo "amnesiac broker: the run passed"; exit 1; fi
missing=$(comm -23 <(echo "$must_fail") <(echo "$failed"))
unexpected=$(comm -13 <(echo "$must_fail") <(echo "$failed"))
if [ -n "$missing" ] || [ -n "$unexpected" ]; then
  echo "amnesiac broker: cases that should have failed but did not:"; echo "$missing"
  echo "amnesiac broker: cases that failed but should have passed:"; echo "$unexpected"
  exit 1
fi
echo "amnesiac broker: all $(echo "$must_fail" | wc -l) cases that need the data failed, as they must"
