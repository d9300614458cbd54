#!/usr/bin/env bash
# package.deb_installs_and_runs: the Debian package `make package` builds installs, runs and goes away again.
# Builds the .deb from BUILD_DIR (cpack, into a temporary directory), checks its hand-written Depends against
# what dpkg-shlibdeps finds for its programs (and, with FIREMQ_STATIC_BOOST, that none needs a Boost library),
# installs it for real (dpkg -i), then,
# from a directory outside the source tree, with only /usr/bin and /bin on PATH:
#   - firemq-conform's and firemq-bench's defaults name the installed broker and data (--help);
#   - one broker case against the installed broker, and two client cases with the installed example driver
#     (the second reads the installed vectors);
#   - with the installed requirements.json moved away, the harness fails: it never falls back to a source tree
#     on the same machine, so a file missing from the package fails this test;
# and removes the package (dpkg -r), also when a step fails. Needs root (skips, exit 77, otherwise).
# Usage: deb_package_check.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
started=$SECONDS

fail() { echo "FAIL: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: installing the .deb needs root (dpkg -i into /usr); run the tests as root to check the package"
  exit 77
fi
for tool in cpack dpkg dpkg-deb dpkg-shlibdeps flock; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done

# One check at a time on this machine: two test runs (two build trees) would install one package over the other.
exec 9>/run/lock/firemq-deb-package-check.lock
flock -w 120 9 || fail "another package check held /run/lock/firemq-deb-package-check.lock for 2 minutes"

work=$(mktemp -d /tmp/firemq-deb-check.XXXXXX)
installed=false
cleanup() {
  if [ "$installed" = true ]; then
    dpkg -r firemq >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; echo "FAIL: dpkg -r firemq failed"; }
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "building the package from $build"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/package" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack could not build the package"; }
deb=$(echo "$work"/package/firemq_*.deb)
[ -f "$deb" ] || { cat "$work/cpack.log"; fail "cpack made no firemq_*.deb"; }
echo "built $(basename "$deb"), $(($(stat -c %s "$deb") / 1024)) KiB"

# Depends is written by hand in CMakeLists.txt (one .deb for Debian 12, Debian 13 and Ubuntu): it must name every
# package dpkg-shlibdeps finds for the package's programs (alone or as the first of alternatives, as
# "libssl3 | libssl3t64"), and the openssl command. With FIREMQ_STATIC_BOOST (the default) no program needs a
# Boost library, and Depends names none: Debian 13 has no libboost-program-options1.74.0.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
mkdir -p "$work/unpacked/debian"
dpkg-deb -x "$deb" "$work/unpacked"
touch "$work/unpacked/debian/control"
programs=("$work"/unpacked/usr/bin/*)
shlibdeps=$(cd "$work/unpacked" && dpkg-shlibdeps -O "${programs[@]}" 2>/dev/null) ||
  fail "dpkg-shlibdeps failed on the package's programs"
shlibdeps=${shlibdeps#shlibs:Depends=}
echo "dpkg-shlibdeps: $shlibdeps"
# The package names of a Depends field, one a line; with --first, only the first of each group of alternatives.
names() { tr ',' '\n' <<<"$1" | { if [ "${2:-}" = --first ]; then sed 's/|.*//'; else tr '|' '\n'; fi; } |
          sed 's/(.*)//; s/ //g' | grep -v '^$' | sort -u; }
missing=$(comm -23 <(names "$shlibdeps") <(names "$depends" --first))
[ -z "$missing" ] || fail "Depends lacks what dpkg-shlibdeps finds: $missing (CMakeLists.txt, CPACK_DEBIAN_PACKAGE_DEPENDS)"
names "$depends" | grep -qx openssl || fail "Depends lacks openssl (the harness makes its TLS runs' certificates with it)"
if grep -q '^FIREMQ_STATIC_BOOST:BOOL=ON$' "$build/CMakeCache.txt"; then
  [[ $depends != *boost* ]] || fail "Depends names Boost, but FIREMQ_STATIC_BOOST links it statically"
  for program in "${programs[@]}"; do
    ! ldd "$program" | grep -q boost || fail "$(basename "$program") links a shared Boost library: $(ldd "$program" | grep boost)"
  done
fi

# Another copy would clash: an installed firemq package, or files the package would overwrite.
status=$(dpkg-query -W -f='${db:Status-Status} ${Version}' firemq 2>/dev/null || true)
[[ $status == installed* ]] &&
  fail "a firemq package is already installed ($status); this test installs and removes its own: dpkg -r firemq first"
clashes=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | grep -v '/$' | sed 's|^\.||' |
          while read -r file; do if [ -e "$file" ]; then echo "$file"; fi; done)
[ -z "$clashes" ] || fail "files of the package are already on this system (another install?): $clashes"

installed=true
dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log"; fail "dpkg -i $(basename "$deb") failed"; }
echo "installed: $(dpkg-query -W -f='${Package} ${Version}' firemq)"

# Everything below runs the installed files only: outside the source tree, with nothing but the system's PATH.
cd "$work"
installed_run() { env -i PATH=/usr/bin:/bin HOME="$work" "$@"; }

expect_in() {  # expect_in WHAT TEXT PATTERN
  grep -qF -- "$3" <<<"$2" || { echo "$2"; fail "$1: no '$3' in its output"; }
}
expect_in "firemq-conform --help" "$(installed_run firemq-conform --help)" "--broker arg (=/usr/bin/firemq-broker)"
expect_in "firemq-conform --help" "$(installed_run firemq-conform --help)" \
  "--conformance arg (=/usr/share/firemq/conformance)"
expect_in "firemq-bench --help" "$(installed_run firemq-bench --help)" "--broker arg (=/usr/bin/firemq-broker)"

conform_passes() {  # conform_passes SUMMARY CASE-ID [FLAGS...]: the run passes, with that summary
  local summary=$1 id=$2 output
  shift 2
  echo "+ firemq-conform ${*:+$* }$id"
  output=$(installed_run firemq-conform --reports "$work/reports" "$@" "$id" 2>&1) ||
    { echo "$output"; fail "firemq-conform $* $id failed"; }
  expect_in "firemq-conform $id" "$output" "$summary"
}
conform_passes "1 case: 1 pass, 0 fail" framing.preamble.then-hello
# The example driver declares all four transports: the connect case runs over each (fires and wss with the
# certificates the installed harness makes through the openssl command, a dependency of the package); the URL
# case opens no connection and runs over fire only.
conform_passes "4 cases: 4 pass, 0 fail, 0 skipped" client.connect.hello-then-welcome --driver /usr/bin/firemq-example-driver
conform_passes "4 cases: 1 pass, 0 fail, 3 skipped" client.url.valid-vectors-parse --driver /usr/bin/firemq-example-driver

# Installed, the harness reads the installed data only: without it, it fails and names the installed file.
requirements=/usr/share/firemq/conformance/requirements.json
mv "$requirements" "$work/requirements.json"
if output=$(installed_run firemq-conform --reports "$work/reports" framing.preamble.then-hello 2>&1); then
  mv "$work/requirements.json" "$requirements"
  echo "$output"
  fail "firemq-conform passed without $requirements: it read another copy"
fi
mv "$work/requirements.json" "$requirements"
expect_in "firemq-conform without $requirements" "$output" "$requirements"

dpkg -r firemq >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r firemq failed"; }
installed=false
[ ! -e /usr/bin/firemq-conform ] || fail "dpkg -r left /usr/bin/firemq-conform behind"
echo "PASS: the package installs, runs a broker case and two client cases, and is removed ($((SECONDS - started)) s)"
