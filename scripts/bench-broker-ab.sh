#!/usr/bin/env bash
# Two builds of the reference broker side by side, on both of its protocols: a change to what they share (the
# connection engine, the core) must not cost either protocol (docs/benchmarks.md, "The one connection engine").
#
#   scripts/bench-broker-ab.sh BEFORE_BROKER AFTER_BROKER [--seconds N] [--rounds N] [--protocol fire|amqp]
#
# Each round starts both brokers (FireMQ and AMQP on free ports, fresh data dirs), then runs every row against
# each, alternating which goes first, and reads each broker's CPU time around each run. FireMQ rows are
# firemq-bench's (its end-to-end rate: publish with confirms while one consumer takes them), AMQP rows
# firemq-amqp-bench's. Prints a Markdown table of the medians over the rounds: rate and broker CPU per message.
# Needs `make build` (build/tools); BUILD= picks another build tree for the tools.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
seconds=3
rounds=3
only=""
brokers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --protocol) only=${2:?--protocol needs fire or amqp}; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-broker-ab: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) brokers+=("$1"); shift ;;
  esac
done
[ ${#brokers[@]} -eq 2 ] || { echo "bench-broker-ab: give two broker executables, before and after (see --help)" >&2; exit 2; }
for f in "${brokers[@]}" "$build/tools/firemq-bench" "$build/tools/firemq-amqp-bench"; do
  [ -x "$f" ] || { echo "bench-broker-ab: $f is missing or not executable" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/firemq-bench-ab.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_broker() {  # start_broker INDEX: the broker's pid in pids[INDEX], its ports in $work/INDEX/ports.json
  local dir="$work/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  "${brokers[$1]}" --bind 127.0.0.1 --port 0 --tls-port off --ws-port off --wss-port off --amqp-port 0 \
    --data-dir "$dir/data" --port-file "$dir/ports.json" > "$dir/broker.log" 2>&1 &
  pids[$1]=$!
  for _ in $(seq 1 500); do
    [ -s "$dir/ports.json" ] && return 0
    sleep 0.02
  done
  echo "bench-broker-ab: ${brokers[$1]} did not start:" >&2
  tail -20 "$dir/broker.log" >&2
  exit 1
}
port_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/$1/ports.json" "$2"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# name|protocol|flags: the FireMQ rows run 200,000 messages (firemq-bench), the AMQP rows --seconds.
rows=(
  "publish + consume, confirms, window 1000|fire|--sizes 16 --count 200000"
  "publish + consume, confirms, window 1000|fire|--sizes 1024 --count 200000"
  "publish + consume, confirms, window 1000, persistent|fire|--sizes 1024 --count 100000 --persistent"
  "publish only|amqp|-x 1 -y 0 -s 16"
  "confirms window 100|amqp|-x 1 -y 0 -c 100 -s 16"
  "producer + consumer, prefetch 100|amqp|-x 1 -y 1 -q 100 -s 16"
  "confirms window 100|amqp|-x 1 -y 0 -c 100 -s 1024"
  "producer + consumer, prefetch 100|amqp|-x 1 -y 1 -q 100 -s 1024"
  "confirms window 100, persistent|amqp|-x 1 -y 0 -c 100 -s 1024 -f"
  "confirms window 100|amqp|-x 1 -y 0 -c 100 -s 65536"
)

# --protocol: that protocol's rows only.
if [ -n "$only" ]; then
  kept=()
  for row in "${rows[@]}"; do [ "$(cut -d'|' -f2 <<< "$row")" = "$only" ] && kept+=("$row"); done
  rows=("${kept[@]}")
fi

run_row() {  # run_row ROUND ROW BROKER_INDEX: one line "rate cpu_us_per_msg" in $work/r-ROUND-ROW-INDEX
  local round=$1 row=$2 b=$3 name protocol flags out rate messages before after
  IFS='|' read -r name protocol flags <<< "${rows[$row]}"
  out="$work/r-$round-$row-$b"
  before=$(cpu_ticks "${pids[$b]}")
  if [ "$protocol" = fire ]; then
    # shellcheck disable=SC2086
    "$build/tools/firemq-bench" --url "fire://guest:guest@127.0.0.1:$(port_of "$b" fire)/" $flags --json > "$out.json"
    read -r rate messages < <(/usr/bin/python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1])) if x["confirms"]][0]; print(r["end_to_end_msgs_per_s"], r["messages"] * 2)' "$out.json")
  else
    # shellcheck disable=SC2086
    "$build/tools/firemq-amqp-bench" --url "amqp://guest:guest@127.0.0.1:$(port_of "$b" amqp)" $flags --time "$seconds" --json > "$out.json"
    read -r rate messages < <(/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); m=r["received"] if r["consumers"] else (r["confirmed"] or r["published"]); print(m / r["seconds"], r["published"])' "$out.json")
  fi
  after=$(cpu_ticks "${pids[$b]}")
  # CPU per message published (firemq-bench's runs publish twice: without and with confirms).
  /usr/bin/python3 -c 'import sys; t,m,hz=map(float,sys.argv[1:4]); print(sys.argv[4], t/hz*1e6/max(m,1))' \
    "$((after - before))" "$messages" "$(getconf CLK_TCK)" "$rate" > "$out.txt"
}

for round in $(seq 1 "$rounds"); do
  start_broker 0
  start_broker 1
  for row in "${!rows[@]}"; do
    echo "bench-broker-ab: round $round/$rounds, row $((row + 1))/${#rows[@]}" >&2
    order=(0 1); [ $(((row + round) % 2)) -eq 1 ] && order=(1 0)
    for b in "${order[@]}"; do run_row "$round" "$row" "$b"; done
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid"; wait "$pid" 2> /dev/null || true; done
  pids=()
done

/usr/bin/python3 - "$work" "$rounds" "${#rows[@]}" "${rows[@]}" <<'PY'
import statistics, sys
work, rounds, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = sys.argv[4:4 + count]
def median(row, b, field):
    values = [float(open(f"{work}/r-{r}-{row}-{b}.txt").read().split()[field]) for r in range(1, rounds + 1)]
    return statistics.median(values)
print("| Protocol | Row | Flags | Rate before | Rate after | After/before | CPU µs/msg before | CPU µs/msg after |")
print("|---|---|---|---|---|---|---|---|")
for i, row in enumerate(rows):
    name, protocol, flags = row.split("|")
    r0, r1 = median(i, 0, 0), median(i, 1, 0)
    c0, c1 = median(i, 0, 1), median(i, 1, 1)
    print(f"| {protocol} | {name} | `{flags}` | {r0:,.0f}/s | {r1:,.0f}/s | {r1 / r0:.2f}x | {c0:.2f} | {c1:.2f} |")
PY
