#!/usr/bin/env bash
# Runs every fuzz target for a set time: make fuzz (FUZZ_SECONDS, default 600 each).
#   fuzz/run.sh BUILD_DIR SECONDS
# Targets run side by side, as many at once as there are cores. New inputs go to BUILD_DIR/fuzz/work/, never
# to the source corpus; a crash, leak or sanitizer report is written to BUILD_DIR/fuzz/work/<target>/artifacts/
# and fails the run. Copy such an input into fuzz/corpus/<target>/ as regress-<what> once it is fixed.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
targets=(fuzz_frame_decoder fuzz_header_decoder fuzz_url fuzz_round_trip fuzz_session fuzz_store_record fuzz_http_request
         fuzz_amqp_frame fuzz_management fuzz_definitions)
parallel=$(nproc)
logs=$build/fuzz/logs
mkdir -p "$logs"

run_target() {
  local target=$1 work=$build/fuzz/work/$1
  mkdir -p "$work/corpus" "$work/artifacts"
  "$build/fuzz/$target" -dict="$here/firemq.dict" -artifact_prefix="$work/artifacts/" \
    -max_total_time="$seconds" -print_final_stats=1 "$work/corpus" "$here/corpus/$target" \
    > "$logs/$target.log" 2>&1
}

pids=()
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do sleep 1; done
  echo "fuzzing $target for ${seconds}s (log: $logs/$target.log)"
  run_target "$target" & pids+=($!)
done

failed=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if ! wait "${pids[$i]}"; then failed=1; fi
  log=$logs/$target.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  findings=$(find "$build/fuzz/work/$target/artifacts" -type f | wc -l)
  printf '%-22s %12s execs %8s exec/s  cov %5s  ft %6s  findings %s\n' "$target" "$execs" "$speed" "$cov" "$ft" "$findings"
  [ "$findings" -eq 0 ] || failed=1
done
exit $failed
