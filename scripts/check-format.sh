#!/usr/bin/env bash
# Checks that every tracked C++ file (*.h, *.hpp, *.cc, *.cpp, *.cxx) follows the repository's .clang-format.
#
#   scripts/check-format.sh         lists each file that does not, with the start of its diff; exits 1 if any
#   scripts/check-format.sh --fix   reformats those files in place
#
# clang-format is pinned to Debian 12's clang-format-16 (scripts/install-deps.sh): another version formats some
# lines differently, and the check would then depend on the machine. CTest runs the check as format.clang_format.
# FORMAT_JOBS (default 2) clang-format processes run side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=clang-format-16
fix=false
case "${1:-}" in
  --fix) fix=true ;;
  "") ;;
  *) echo "usage: $0 [--fix]" >&2; exit 2 ;;
esac
if ! command -v "$clang_format" > /dev/null; then
  echo "check-format: $clang_format not found (Debian 12: apt-get install clang-format-16; scripts/install-deps.sh)" >&2
  exit 2
fi

# The files git tracks; outside a git checkout (an unpacked tarball), every C++ file but those of build trees.
patterns=('*.h' '*.hpp' '*.cc' '*.cpp' '*.cxx')
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z -- "${patterns[@]}")
else
  mapfile -d '' files < <(find . \( -path './build*' -o -path './.*' \) -prune -o -type f \
    \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cxx' \) -printf '%P\0' | sort -z)
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: no C++ files found" >&2
  exit 2
fi
jobs=${FORMAT_JOBS:-2}

if $fix; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$jobs" "$clang_format" --style=file -i
  echo "check-format: formatted ${#files[@]} files with $("$clang_format" --version)"
  exit 0
fi

# --dry-run --Werror fails where a file differs from its formatting, or where clang-format cannot read it. A batch
# of files at a time, and each file of a failing batch again on its own, so that each process prints only the
# names it found, a short line at a time (parallel processes' diagnostics would interleave).
mapfile -t bad < <(printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" sh -c '
  cf=$0
  "$cf" --style=file --dry-run --Werror "$@" > /dev/null 2>&1 && exit 0
  for f; do "$cf" --style=file --dry-run --Werror "$f" > /dev/null 2>&1 || printf "%s\n" "$f"; done' "$clang_format" |
  sort)
if [ ${#bad[@]} -eq 0 ]; then
  echo "check-format: ${#files[@]} files follow .clang-format"
  exit 0
fi

max_lines=${FORMAT_DIFF_LINES:-20}
for f in "${bad[@]}"; do
  echo "--- $f does not follow .clang-format:"
  "$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" - | head -n "$max_lines" || true
done
echo
echo "check-format: ${#bad[@]} of ${#files[@]} files do not follow .clang-format (clang-format-16):" >&2
printf '  %s\n' "${bad[@]}" >&2
echo "Run scripts/check-format.sh --fix to reformat them." >&2
exit 1
