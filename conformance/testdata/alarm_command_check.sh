#!/usr/bin/env bash
# --alarm-command, both ways: against a reference broker run as a --url target (a 1 MB memory high watermark),
# with memory_alarm_command.py as the command, the alarm case passes; through the fault proxy's drop-flow (a
# broker that never tells its publishers to pause) exactly that case fails, and clears the alarm it left raised.
#   alarm_command_check.sh BROKER CONFORM
set -euo pipefail
broker=$1 conform=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/firemq-alarm-XXXXXX)
trap 'kill "$(cat "$work/pid" 2>/dev/null)" 2>/dev/null; rm -rf "$work"' EXIT

(setsid "$broker" --bind 127.0.0.1 --port 0 --ws-port off --amqp-port off --port-file "$work/port" \
   --data-dir "$work/data" --memory-high-watermark 1000000 --paging-ratio 2 >"$work/log" 2>&1 & echo $! >"$work/pid")
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(grep -o '[0-9][0-9]*' "$work/port")
alarm="/usr/bin/python3 $here/memory_alarm_command.py 127.0.0.1 $port"
case_id=flow.alarm-command.pauses-publishers-and-resumes-them

verdict_of() {  # REPORT_JSON: the case's verdict
  /usr/bin/python3 -c 'import json,sys; print(next(c["verdict"] for c in json.load(open(sys.argv[1]))["cases"] if c["id"] == sys.argv[2]))' "$1" "$case_id"
}

"$conform" --url "fire://guest:guest@127.0.0.1:$port/" --id "$case_id" --alarm-command "$alarm" \
  --reports "$work/good" >"$work/good.out" 2>&1 || { cat "$work/good.out"; echo "alarm check: the good broker failed"; exit 1; }
[ "$(verdict_of "$work/good/latest/report.json")" = pass ] || { cat "$work/good.out"; echo "alarm check: the case did not pass"; exit 1; }

if "$conform" --url "fire://guest:guest@127.0.0.1:$port/" --id "$case_id" --alarm-command "$alarm" --fault drop-flow \
     --reports "$work/broken" >"$work/broken.out" 2>&1; then
  cat "$work/broken.out"; echo "alarm check: the case passed a broker whose flow frames are dropped"; exit 1
fi
[ "$(verdict_of "$work/broken/latest/report.json")" = fail ] || { cat "$work/broken.out"; echo "alarm check: no fail verdict"; exit 1; }
grep -m1 "FAILED $case_id" "$work/broken.out"
# The failed case cleared the alarm it left raised: the broker serves its publishers again.
"$conform" --url "fire://guest:guest@127.0.0.1:$port/" --id "$case_id" --alarm-command "$alarm" \
  --reports "$work/again" >"$work/again.out" 2>&1 || { cat "$work/again.out"; echo "alarm check: the alarm stayed raised"; exit 1; }
echo "alarm check: $case_id passes with --alarm-command and fails when the broker's flow frames are dropped"
