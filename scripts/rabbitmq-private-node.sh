#!/usr/bin/env bash
# A private RabbitMQ node from Debian's rabbitmq-server for tests: its own AMQP port, distribution port (PORT+1)
# and epmd (PORT+2), its own data, logs and (empty) plugin list under DIR, never the system's service.
#
#   rabbitmq-private-node.sh start PORT DIR   starts the node and returns once PORT accepts connections
#                                             (60 s at most; on failure prints the node's output and stops it)
#   rabbitmq-private-node.sh stop PORT DIR    stops that node's Erlang VM, then its epmd; leaves DIR in place
#
# As root the node runs as the rabbitmq user (Debian's wrapper), so DIR is handed to that user.
set -euo pipefail
usage() { echo "usage: $0 start|stop PORT DIR" >&2; exit 2; }
[ $# -eq 3 ] || usage
action=$1
port=$2
dir=$3
case "$port" in '' | *[!0-9]*) usage ;; esac
epmd_port=$((port + 2))

port_open() { (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null; }

# The Erlang VM of this node: the only one started with our private epmd port.
vm_pids() { pgrep -f "beam.*-epmd_port $epmd_port( |$)" || true; }

stop_node() {
  local pids
  pids=$(vm_pids)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 50); do  # up to 5 s for the VM to go, then kill -9
      [ -z "$(vm_pids)" ] && break
      sleep 0.1
    done
    pids=$(vm_pids)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
  fi
  # Its epmd: an epmd daemon whose environment names our epmd port (never the system's, on 4369).
  for pid in $(pgrep -x epmd || true); do
    if tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -qx "ERL_EPMD_PORT=$epmd_port"; then
      kill "$pid" 2>/dev/null || true
    fi
  done
}

start_node() {
  if port_open; then
    echo "port $port is already taken: refusing to start a RabbitMQ node there" >&2
    exit 1
  fi
  mkdir -p "$dir/home" "$dir/mnesia" "$dir/log"
  echo "[]." >"$dir/enabled_plugins"
  local server=/usr/lib/rabbitmq/bin/rabbitmq-server
  if [ "$(id -u)" -eq 0 ]; then
    chown -R rabbitmq:rabbitmq "$dir"  # Debian's wrapper runs the node as the rabbitmq user
    server=/usr/sbin/rabbitmq-server
    if ! su rabbitmq -s /bin/sh -c "test -w '$dir/mnesia'"; then
      echo "the rabbitmq user cannot write $dir (a parent directory closed to it?)" >&2
      exit 1
    fi
  fi
  env HOME="$dir/home" RABBITMQ_NODENAME="firemq-private-$port@localhost" RABBITMQ_NODE_PORT="$port" \
      RABBITMQ_DIST_PORT=$((port + 1)) ERL_EPMD_PORT="$epmd_port" RABBITMQ_MNESIA_BASE="$dir/mnesia" \
      RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
      RABBITMQ_CONFIG_FILE="$dir/none" ERL_CRASH_DUMP="$dir/erl_crash.dump" "$server" >"$dir/rabbitmq.out" 2>&1 </dev/null &
  for _ in $(seq 1 120); do
    port_open && return 0
    sleep 0.5
  done
  echo "RabbitMQ did not start on port $port:" >&2
  tail -20 "$dir/rabbitmq.out" >&2 || true
  stop_node
  exit 1
}

case "$action" in
  start) start_node ;;
  stop) stop_node ;;
  *) usage ;;
esac
