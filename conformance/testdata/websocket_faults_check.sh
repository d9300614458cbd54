#!/usr/bin/env bash
# Proof that the WebSocket cases can fail: for each fault of conformance/websocket_faults.json, the suite runs over
# ws against the reference broker started with --websocket-fault NAME (through a wrapper given as --broker), and
# the listed cases must fail (and, with "exactly", nothing else).
# The same for another of the broker's testing flags: FLAG (default websocket-fault) and the harness's
# arguments after it (default --transport ws); conformance/amqp_faults.json runs with
# amqp-fault --transport fire --group interop.
# Usage: websocket_faults_check.sh BROKER CONFORM FAULTS_JSON [FLAG [CONFORM_ARGS...]]
set -euo pipefail
broker=$1 conform=$2 faults=$3
flag=${4:-websocket-fault}
shift $(($# < 4 ? $# : 4))
conform_args=("$@")
[ ${#conform_args[@]} -gt 0 ] || conform_args=(--transport ws)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
count=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["faults"]))' "$faults")
for i in $(seq 0 $((count - 1))); do
  read -r name exactly < <(/usr/bin/python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["faults"][int(sys.argv[2])]; print(f["fault"], str(f["exactly"]).lower())' "$faults" "$i")
  must_fail=$(/usr/bin/python3 -c 'import json,sys; print("\n".join(sorted(json.load(open(sys.argv[1]))["faults"][int(sys.argv[2])]["must_fail"])))' "$faults" "$i")
  printf '#!/bin/sh\nexec "%s" --%s %s "$@"\n' "$broker" "$flag" "$name" >"$work/broker-$name"
  chmod +x "$work/broker-$name"
  set +e
  "$conform" "${conform_args[@]}" --broker "$work/broker-$name" --reports "$work/reports-$name" >"$work/out-$name" 2>&1
  run=$?
  set -e
  failed=$(/usr/bin/python3 "$(dirname "$0")/failed_cases.py" "$work/reports-$name/latest/report.json")
  missing=$(comm -23 <(echo "$must_fail") <(echo "$failed"))
  unexpected=$(comm -13 <(echo "$must_fail") <(echo "$failed"))
  if [ "$run" -eq 0 ] || [ -n "$missing" ] || { [ "$exactly" = true ] && [ -n "$unexpected" ]; }; then
    echo "$flag $name: run status $run"
    echo "  should have failed but did not: ${missing:-none}"
    [ "$exactly" = true ] && echo "  failed but should have passed: ${unexpected:-none}"
    tail -5 "$work/out-$name"
    status=1
  else
    echo "$flag $name: caught by $(echo "$failed" | wc -l) case(s), as listed"
  fi
done
exit $status
