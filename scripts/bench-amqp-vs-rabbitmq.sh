#!/usr/bin/env bash
# The reference broker's AMQP 0-9-1 listener side by side with RabbitMQ on this machine (docs/benchmarks.md,
# "AMQP 0-9-1, side by side with RabbitMQ"). After `make build`:
#
#   scripts/bench-amqp-vs-rabbitmq.sh [--seconds N] [--output FILE] [--results DIR] [--broker PATH] [--rows REGEX]
#
# Starts the reference broker (--broker, default build/reference-broker/firemq-broker: AMQP and FireMQ TCP on free
# ports, a fresh data dir) and a private RabbitMQ node from Debian's rabbitmq-server binaries (never the system
# service: its own node name, directories, ports and epmd, all under a temp dir; default configuration, no
# plugins), then runs the same firemq-amqp-bench matrix against both, alternating which goes first row by row, and
# prints a Markdown table with the ratios (--output: also to FILE; --results: each run's JSON and CPU time kept in
# DIR). Both brokers are stopped and the temp dir removed on exit, whatever happens.
#
# Each throughput row also runs firemq-bench through the reference broker's own FireMQ port, right after its AMQP
# run and with as many messages as that run published (the same work; one publish per write, as rabbitmq-c does;
# the consumer acks each delivery with credit 100), so that the table shows what the AMQP path costs beside the
# FireMQ path: the columns "FireMQ path rate", "CPU µs/msg: RabbitMQ / ref AMQP / ref FireMQ" (each broker's CPU
# time over the run, from /proc/PID/stat, per message published), "AMQP/FireMQ CPU" and "≤1.5x" (issue 32's bar);
# then the clients' own CPU per message (firemq-amqp-bench's on the AMQP path, firemq-bench's on the FireMQ path)
# and how much of a core the reference broker and its AMQP client each used over the AMQP run: a row whose client
# uses a whole core while the broker does not is bound by the client, not the broker.
# The rows "publish only, 100 per write" and "confirms window 200, 100 per write" have both benches write 100
# publishes at a time (firemq-amqp-bench --batch), so that the brokers' reads are full whatever the client's pace.
# Latency rows have no FireMQ run. --rows runs only the rows whose "name size delivery" (e.g. "publish only 16 B
# transient", "confirms sync 64 KiB persistent") matches the extended regex, for a quick run.
#
# Ports (override with the environment if taken): RabbitMQ's AMQP port FIREMQ_BENCH_RABBIT_PORT (25810), its
# distribution port FIREMQ_BENCH_RABBIT_DIST_PORT (25811) and its epmd FIREMQ_BENCH_EPMD_PORT (25812).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
seconds=3
output=""
keep_results=""
broker=$build/reference-broker/firemq-broker
rows_regex=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --output) output=${2:?--output needs a file}; shift 2 ;;
    --results) keep_results=${2:?--results needs a directory}; shift 2 ;;
    --broker) broker=${2:?--broker needs the broker executable}; shift 2 ;;
    --rows) rows_regex=${2:?--rows needs a regex}; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "bench-amqp-vs-rabbitmq: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

bench=$build/tools/firemq-amqp-bench
fire_bench=$build/tools/firemq-bench
rabbit_bin=/usr/lib/rabbitmq/bin
for f in "$bench" "$fire_bench" "$broker"; do
  [ -x "$f" ] || { echo "bench-amqp-vs-rabbitmq: $f is missing: run make build first" >&2; exit 1; }
done
[ -x "$rabbit_bin/rabbitmq-server" ] || {
  echo "bench-amqp-vs-rabbitmq: RabbitMQ is missing: install Debian's rabbitmq-server (scripts/install-deps.sh)" >&2
  exit 1
}

rabbit_port=${FIREMQ_BENCH_RABBIT_PORT:-25810}
rabbit_dist_port=${FIREMQ_BENCH_RABBIT_DIST_PORT:-25811}
epmd_port=${FIREMQ_BENCH_EPMD_PORT:-25812}
for port in "$rabbit_port" "$rabbit_dist_port" "$epmd_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "bench-amqp-vs-rabbitmq: port $port is taken; set FIREMQ_BENCH_RABBIT_PORT, _DIST_PORT or FIREMQ_BENCH_EPMD_PORT" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/firemq-bench-amqp.XXXXXX")
mkdir -p "$work/results"
broker_pid=""
rabbit_started=false

# ---- the private RabbitMQ node ----

# Everything RabbitMQ's scripts read, pointed into the temp dir; HOME holds the node's own Erlang cookie.
rabbit_env() {
  env HOME="$work/rabbit/home" RABBITMQ_NODENAME="firemq-bench-rabbit-$$@localhost" \
    RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log" \
    RABBITMQ_NODE_PORT="$rabbit_port" RABBITMQ_DIST_PORT="$rabbit_dist_port" ERL_EPMD_PORT="$epmd_port" \
    RABBITMQ_CONFIG_FILE="$work/rabbit/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/enabled_plugins" \
    RABBITMQ_CONF_ENV_FILE="$work/rabbit/rabbitmq-env.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$work/rabbit/advanced.config" \
    RABBITMQ_PID_FILE="$work/rabbit/pid" "$@"
}

start_rabbit() {
  mkdir -p "$work/rabbit/home" "$work/rabbit/mnesia" "$work/rabbit/log"
  echo "listeners.tcp.default = $rabbit_port" > "$work/rabbit/rabbitmq.conf"  # otherwise RabbitMQ's defaults
  echo "[]." > "$work/rabbit/enabled_plugins"
  : > "$work/rabbit/rabbitmq-env.conf"
  rabbit_env epmd -daemon
  rabbit_started=true
  rabbit_env "$rabbit_bin/rabbitmq-server" > "$work/rabbit/server.log" 2>&1 &
  if ! rabbit_env "$rabbit_bin/rabbitmqctl" wait --timeout 180 "$work/rabbit/pid" > "$work/rabbit/wait.log" 2>&1; then
    echo "bench-amqp-vs-rabbitmq: RabbitMQ did not start:" >&2
    tail -20 "$work/rabbit/server.log" "$work/rabbit/wait.log" >&2
    exit 1
  fi
}

stop_rabbit() {
  [ "$rabbit_started" = true ] || return 0
  if ! rabbit_env timeout 60 "$rabbit_bin/rabbitmqctl" stop "$work/rabbit/pid" > /dev/null 2>&1; then
    [ -s "$work/rabbit/pid" ] && kill -KILL "$(cat "$work/rabbit/pid")" 2> /dev/null || true
  fi
  rabbit_env epmd -kill > /dev/null 2>&1 || true  # the epmd of our port only
}

# ---- the reference broker ----

start_reference_broker() {
  mkdir -p "$work/firemq"
  "$broker" --bind 127.0.0.1 --port 0 --tls-port off --ws-port off --wss-port off --amqp-port 0 \
    --data-dir "$work/firemq/data" --port-file "$work/firemq/ports.json" > "$work/firemq/broker.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1 500); do
    [ -s "$work/firemq/ports.json" ] && break
    kill -0 "$broker_pid" 2> /dev/null || { echo "bench-amqp-vs-rabbitmq: the reference broker did not start:" >&2
                                            tail -20 "$work/firemq/broker.log" >&2; exit 1; }
    sleep 0.02
  done
  port_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/firemq/ports.json" "$1"; }
  firemq_port=$(port_of amqp)
  fire_port=$(port_of fire)
}

stop_reference_broker() {
  [ -n "$broker_pid" ] || return 0
  kill -TERM "$broker_pid" 2> /dev/null || true
  wait "$broker_pid" 2> /dev/null || true
}

cleanup() {
  stop_reference_broker
  stop_rabbit
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the matrix ----

# A publish-only run fills the queue, so each run stops at 1 GiB of bodies (or --seconds, whichever first).
max_bytes=$((1 << 30))

# Each row: "name|body size|delivery|the figure compared (sent, confirmed, received or latency)|firemq-amqp-bench's
# flags|firemq-bench's flags for the same work through the FireMQ port (none for latency rows; --count is added
# at run time)". Every run has its own fresh queue. firemq-bench writes one publish per write (--batch 1), as
# rabbitmq-c does; its window is the AMQP row's confirm window, or the consumer's credit for its prefetch. The
# last two rows of each size and delivery have both benches write 100 publishes at a time (firemq-amqp-bench
# frames them itself, as a client with a write buffer does): the brokers' reads are full, so they show what each
# path costs the broker when the client's pace does not cut its reads to a message or two.
all_rows=()
for size in 16 1024 65536; do
  count=$((max_bytes / size))
  for delivery in transient persistent; do
    flag=""; [ "$delivery" = persistent ] && flag="--persistent"
    common="--size $size $flag --count $count"
    fire="--sizes $size $flag --batch 1"
    batched="--size $size $flag --count $count --batch 100"
    fire_batched="--sizes $size $flag --batch 100"
    all_rows+=("publish only|$size|$delivery|sent|--producers 1 --consumers 0 $common|--no-consumer --confirms off $fire")
    all_rows+=("confirms sync|$size|$delivery|confirmed|--producers 1 --consumers 0 --confirm 1 $common|--no-consumer --confirms on --window 1 $fire")
    all_rows+=("confirms window 100|$size|$delivery|confirmed|--producers 1 --consumers 0 --confirm 100 $common|--no-consumer --confirms on --window 100 $fire")
    all_rows+=("producer + consumer, prefetch 100|$size|$delivery|received|--producers 1 --consumers 1 --prefetch 100 $common|--confirms off --ack --window 100 $fire")
    all_rows+=("publish only, 100 per write|$size|$delivery|sent|--producers 1 --consumers 0 $batched|--no-consumer --confirms off $fire_batched")
    all_rows+=("confirms window 200, 100 per write|$size|$delivery|confirmed|--producers 1 --consumers 0 --confirm 200 $batched|--no-consumer --confirms on --window 200 $fire_batched")
  done
done
for rate in 1000 10000; do
  all_rows+=("latency at $rate msg/s, prefetch 100|1024|transient|latency|--producers 1 --consumers 1 --prefetch 100 --size 1024 --rate $rate|")
done
all_rows+=("latency at 1000 msg/s, prefetch 100|1024|persistent|latency|--producers 1 --consumers 1 --prefetch 100 --size 1024 --persistent --rate 1000|")

# --rows: the rows whose "name size delivery" matches, the size as the table prints it.
size_label() { case "$1" in 16) echo "16 B" ;; 1024) echo "1 KiB" ;; 65536) echo "64 KiB" ;; *) echo "$1 B" ;; esac; }
rows=()
for row in "${all_rows[@]}"; do
  IFS='|' read -r name size delivery _ <<< "$row"
  [[ "$name $(size_label "$size") $delivery" =~ $rows_regex ]] && rows+=("$row")
done
[ ${#rows[@]} -gt 0 ] || { echo "bench-amqp-vs-rabbitmq: no row matches --rows '$rows_regex'" >&2; exit 2; }

# What the table says it measured: this tree's commit, or the executable --broker named (another build).
broker_label=$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo '?')
[ "$broker" -ef "$build/reference-broker/firemq-broker" ] || broker_label="$broker (--broker)"
echo "bench-amqp-vs-rabbitmq: starting the reference broker and RabbitMQ (RabbitMQ takes a while)..." >&2
start_reference_broker
start_rabbit
rabbit_version=$(rabbit_env "$rabbit_bin/rabbitmqctl" version 2> /dev/null || echo "?")
erlang_version=$(erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().' 2> /dev/null || echo "?")

# The broker's process, for its CPU time (utime + stime in clock ticks) around each run: on a machine shared with
# other work, neither broker may get a whole core, and CPU time per message shows what each one costs.
declare -A pids=([firemq]="$broker_pid" [rabbitmq]="$(cat "$work/rabbit/pid")" [fire]="$broker_pid")
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The benchmark clients' CPU time: what this shell's waited-for children used (cutime + cstime), so that a row bound
# by its client (rabbitmq-c, one system call per frame) shows it: a client near a whole core is the bound.
client_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A urls=([firemq]="amqp://guest:guest@127.0.0.1:$firemq_port" [rabbitmq]="amqp://guest:guest@127.0.0.1:$rabbit_port")
failures=0
run_one() {  # run_one ROW_INDEX RUN COMMAND...: RUN is firemq (AMQP), rabbitmq or fire (the FireMQ path)
  local index=$1 name=$2; shift 2
  local out="$work/results/$index-$name"
  local before; before=$(cpu_ticks "${pids[$name]}")
  local client_before; client_before=$(client_ticks)
  local start; start=$(date +%s%N)
  if ! "$@" > "$out.json" 2> "$out.err"; then
    echo "bench-amqp-vs-rabbitmq: row $index, $name run failed: $(tail -1 "$out.err")" >&2
    failures=$((failures + 1))
  fi
  # broker ticks, ticks per second, client ticks, wall time in ms
  echo $(($(cpu_ticks "${pids[$name]}") - before)) "$(getconf CLK_TCK)" $(($(client_ticks) - client_before)) \
    $((($(date +%s%N) - start) / 1000000)) > "$out.cpu"
}

# The FireMQ path's message count: what the reference broker's AMQP run of the row published (in about
# --seconds), so that both paths do the same work; 100000 (at most the row's 1 GiB) when that run failed.
fire_count() {  # fire_count ROW_INDEX BODY_SIZE
  /usr/bin/python3 -c 'import json,sys
try: n = json.load(open(sys.argv[1]))["published"]
except (OSError, ValueError, KeyError): n = 0
print(n or min(100000, (1 << 30) // int(sys.argv[2])))' "$work/results/$1-firemq.json" "$2"
}

for i in "${!rows[@]}"; do
  IFS='|' read -r name size delivery metric flags fire_flags <<< "${rows[$i]}"
  echo "bench-amqp-vs-rabbitmq: [$((i + 1))/${#rows[@]}] $name, $size B, $delivery" >&2
  # Alternating which broker goes first, so that neither always runs on a machine the other just warmed or loaded;
  # the FireMQ path right after the reference broker's AMQP run, whose message count it takes.
  order=(firemq rabbitmq); [ $((i % 2)) -eq 1 ] && order=(rabbitmq firemq)
  for b in "${order[@]}"; do
    # shellcheck disable=SC2086
    run_one "$i" "$b" "$bench" --url "${urls[$b]}" --time "$seconds" --json $flags
    if [ "$b" = firemq ] && [ -n "$fire_flags" ]; then
      # shellcheck disable=SC2086
      run_one "$i" fire "$fire_bench" --url "fire://127.0.0.1:$fire_port" --json --count "$(fire_count "$i" "$size")" $fire_flags
    fi
  done
  printf '%s|%s|%s|%s\n' "$name" "$size" "$delivery" "$metric" > "$work/results/$i.row"
done

table=$(/usr/bin/python3 - "$work/results" "${#rows[@]}" <<'PY'
import json, os, sys

results, count = sys.argv[1], int(sys.argv[2])

def load(i, broker):
    try:
        return json.load(open(os.path.join(results, f"{i}-{broker}.json")))
    except (OSError, ValueError):
        return None

def size(b):
    return {16: "16 B", 1024: "1 KiB", 65536: "64 KiB"}.get(b, f"{b} B")

def cpu_figures(i, run):
    """The broker's and the client's CPU seconds over the run (the queue's deletion included), and its seconds."""
    ticks, per_second, client, wall_ms = open(os.path.join(results, f"{i}-{run}.cpu")).read().split()
    return int(ticks) / int(per_second), int(client) / int(per_second), int(wall_ms) / 1000

def cpu_us_per_message(i, run, published, whose=0):
    """The broker's (whose=0) or the client's (1) CPU time per message published."""
    return cpu_figures(i, run)[whose] * 1e6 / published if published else float("nan")

def cores_used(i, run):
    """How much of a core the broker and the client each used over the run: near 1.0 is a bound."""
    broker, client, wall = cpu_figures(i, run)
    return f"{broker / wall:.2f} / {client / wall:.2f}" if wall > 0 else "-"

def rate(r, metric):
    return r[f"{metric}_msgs_per_s"]

def fire_rate(r, metric):
    """firemq-bench's figure for the row's: publishes written (sent), or confirmed, or received end to end."""
    return r["end_to_end_msgs_per_s"] if metric == "received" else r["publish_msgs_per_s"]

def msgs(v):
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.1f} k" if v >= 1e4 else f"{v:,.0f}"

print("| row | body | delivery | RabbitMQ | reference broker (AMQP) | ratio | 5x bar | FireMQ path rate"
      " | CPU µs/msg: RabbitMQ / ref AMQP / ref FireMQ | AMQP/FireMQ CPU | ≤1.5x"
      " | client CPU µs/msg: AMQP / FireMQ | cores used, AMQP: broker / client |")
print("|---|---:|---|---:|---:|---:|:---:|---:|---:|---:|:---:|---:|---:|")
for i in range(count):
    name, body, delivery, metric = open(os.path.join(results, f"{i}.row")).read().strip().split("|")
    amqp, rabbit = load(i, "firemq"), load(i, "rabbitmq")
    head = f"| {name} | {size(int(body))} | {delivery} |"
    if amqp is None or rabbit is None:
        print(head + f" {'failed' if rabbit is None else '-'} | {'failed' if amqp is None else '-'} | - | no"
              " | - | - | - | - | - | - |")
        continue
    if metric == "latency":
        la, lr = amqp["latency"], rabbit["latency"]
        ratio50 = lr["p50_us"] / la["p50_us"] if la["p50_us"] else float("inf")
        ratio99 = lr["p99_us"] / la["p99_us"] if la["p99_us"] else float("inf")
        cell = lambda l: f"p50 {l['p50_us'] / 1000:.2f} ms, p99 {l['p99_us'] / 1000:.2f} ms"
        lower = "yes" if ratio50 > 1 and ratio99 > 1 else "no"
        print(head + f" {cell(lr)} | {cell(la)} | {ratio50:.1f}x / {ratio99:.1f}x lower | {lower} (lower)"
              " | - | - | - | - | - | - |")
        continue
    ra, rr = rate(amqp, metric), rate(rabbit, metric)
    ratio = ra / rr if rr else float("inf")
    mb = lambda v: f" ({v * int(body) / 1e6:,.0f} MB/s)" if int(body) >= 1024 else ""
    ca = cpu_us_per_message(i, "firemq", amqp["published"])
    cr = cpu_us_per_message(i, "rabbitmq", rabbit["published"])
    fire = load(i, "fire")
    fire = fire[0] if fire else None  # firemq-bench prints one scenario's figures in a list
    client_amqp = cpu_us_per_message(i, "firemq", amqp["published"], whose=1)
    if fire is None:
        fire_cell, cf, versus, bar, client_fire = "failed", float("nan"), "-", "-", float("nan")
    else:
        fire_cell = f"{msgs(fire_rate(fire, metric))}{mb(fire_rate(fire, metric))}"
        cf = cpu_us_per_message(i, "fire", fire["messages"])
        client_fire = cpu_us_per_message(i, "fire", fire["messages"], whose=1)
        versus = f"{ca / cf:.2f}x" if cf > 0 else "-"
        bar = ("yes" if ca <= 1.5 * cf else "no") if cf > 0 else "-"
    print(head + f" {msgs(rr)}{mb(rr)} | {msgs(ra)}{mb(ra)} | {ratio:.1f}x | {'yes' if ratio >= 5 else 'no'}"
          f" | {fire_cell} | {cr:.1f} / {ca:.1f} / {cf:.1f} | {versus} | {bar}"
          f" | {client_amqp:.1f} / {client_fire:.1f} | {cores_used(i, 'firemq')} |")
PY
)

{
  echo "Reference broker $broker_label against RabbitMQ" \
       "$rabbit_version (Erlang/OTP $erlang_version, default configuration); $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')," \
       "load average $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $seconds s per run (or 1 GiB of bodies)."
  echo
  echo "FireMQ path: firemq-bench through the same reference broker's FireMQ port, as many messages as its AMQP run" \
       "of the row published, one publish per write; its consumer acks each delivery (credit 100, as prefetch 100)."
  echo
  echo "$table"
} | tee ${output:+"$output"}

if [ -n "$keep_results" ]; then
  mkdir -p "$keep_results"
  cp "$work"/results/* "$keep_results"/
fi

if [ "$failures" -gt 0 ]; then
  echo "bench-amqp-vs-rabbitmq: $failures run(s) failed (see above)" >&2
  exit 1
fi
