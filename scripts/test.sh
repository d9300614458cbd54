#!/usr/bin/env bash
# make test: the normal build and its tests, and the fuzz build and its corpus replay and brief runs.
#
# The fuzz build (clang, ASan and UBSan, every broker library) is a third of a fresh clone's compile time, and
# CTest spends much of its time waiting on timers (heartbeats, deadlines, restarts). So the fuzz tree builds in
# the background at the lowest CPU priority from the start: it takes only the time the normal build and the
# tests leave idle, and the tests' timing keeps the headroom it is judged with.
#
# usage: scripts/test.sh BUILD_DIR FUZZ_BUILD_DIR JOBS
set -uo pipefail
build=${1:-build}
fuzz_build=${2:-build-fuzz}
jobs=${3:-$(nproc)}
cd "$(dirname "$0")/.."

# make's own targets, so that both builds are configured as `make build` and `make fuzz-build` configure them.
make_args=(--no-print-directory BUILD="$build" FUZZ_BUILD="$fuzz_build" JOBS="$jobs")

mkdir -p "$fuzz_build"
fuzz_log="$fuzz_build/background-build.log"
# In a session of its own, so that the whole build (make and its compilers) can be stopped as one group. A new
# session is also a new scheduler autogroup, where a process's nice value counts only against its own group:
# the group itself is set to nice 19, or the fuzz build would take half the CPU from the normal build.
# (Set from inside the new session: written from here before the child's setsid, it would nice this script's own.)
setsid sh -c 'echo 19 2> /dev/null > /proc/self/autogroup; exec nice -n 19 make "$@" fuzz-build' sh "${make_args[@]}" \
  > "$fuzz_log" 2>&1 &
fuzz_pid=$!
# A failing normal build or an interrupted run must not leave the fuzz build running.
trap 'kill -- -$fuzz_pid 2> /dev/null' EXIT

make "${make_args[@]}" build || exit 1
ctest --test-dir "$build" --output-on-failure -j "$jobs"
tests=$?

echo "Waiting for the fuzz build ($fuzz_log)"
if ! wait $fuzz_pid; then
  tail -n 60 "$fuzz_log"
  echo "the fuzz build failed: $fuzz_log" >&2
  exit 1
fi
trap - EXIT
ctest --test-dir "$fuzz_build" --output-on-failure -j "$jobs"
fuzz_tests=$?

[ $tests -eq 0 ] && [ $fuzz_tests -eq 0 ]
