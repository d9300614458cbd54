#!/usr/bin/env bash
# The .deb installs and certifies a client where SDK CIs run: in a minimal chroot of each Debian release
# (debootstrap --variant=minbase, from debootstrap's default Debian mirror or FIREMQ_DEBIAN_MIRROR), apt
# installs the package, resolving its Depends from that release only, and the installed firemq-conform
# certifies the installed example driver (/usr/bin/firemq-example-driver): every client case over every
# transport it declares. Prints PASS or FAIL per release; exits 0 only when every release passed.
#
# Usage: scripts/check-package-debian.sh [--deb FILE] [--build DIR] [RELEASE...]
#   --deb FILE   the package to check (default: build it, cmake --build DIR --target package)
#   --build DIR  the build tree (default: build/ of this checkout)
#   RELEASE      Debian releases (default: bookworm trixie)
# Needs root (debootstrap, chroot), debootstrap (apt-get install debootstrap) and the network to Debian's
# mirror. Not part of `make test`: the first run downloads two base systems (about a minute each).
# The chroots stay in /var/tmp/firemq-chroots (FIREMQ_CHROOTS): RELEASE-base is the pristine debootstrap,
# made once and reused; RELEASE is a fresh copy of it for each run, where the package is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=${FIREMQ_CHROOTS:-/var/tmp/firemq-chroots}
mirror=${FIREMQ_DEBIAN_MIRROR:-}  # empty: debootstrap's default
build=$here/build
deb=
releases=()
while [ $# -gt 0 ]; do
  case $1 in
    --deb) deb=$(realpath "$2"); shift 2 ;;
    --build) build=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) releases+=("$1"); shift ;;
  esac
done
[ ${#releases[@]} -gt 0 ] || releases=(bookworm trixie)

fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "debootstrap and chroot need root"
command -v debootstrap >/dev/null || fail "debootstrap is missing: apt-get install debootstrap"

mkdir -p "$root"
exec 9>"$root/.lock"
flock -w 600 9 || fail "another run held $root/.lock for 10 minutes"

# Whatever this script mounts is unmounted on exit, also when a step fails.
mounted=()
cleanup() {
  local dir
  for dir in "${mounted[@]}"; do umount "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null || true; done
}
trap cleanup EXIT

if [ -z "$deb" ]; then
  echo "building the package in $build"
  cmake --build "$build" --target package -j 2 >"$root/package-build.log" 2>&1 ||
    { tail -30 "$root/package-build.log"; fail "cmake --build $build --target package failed"; }
  deb=$(ls -t "$build"/firemq_*.deb | head -1)
fi
[ -f "$deb" ] || fail "no package $deb"
echo "package: $deb"
echo "Depends: $(dpkg-deb -f "$deb" Depends)"

# check_release RELEASE: 0 when the package installs and certifies the example driver there.
check_release() {
  local release=$1 base=$root/$1-base dir=$root/$1 log=$root/$1.log
  : >"$log"
  if [ ! -f "$base/.firemq-base-complete" ]; then
    echo "[$release] debootstrap --variant=minbase $release (once; later runs reuse $base)"
    rm -rf "$base.partial"
    debootstrap --variant=minbase "$release" "$base.partial" ${mirror:+"$mirror"} >>"$log" 2>&1 ||
      { tail -20 "$log"; echo "[$release] debootstrap failed (log: $log)"; return 1; }
    rm -rf "$base"
    mv "$base.partial" "$base"
    touch "$base/.firemq-base-complete"
  fi
  # A fresh copy for each run: the package's Depends are installed from nothing but the base system.
  rm -rf "$dir"
  cp -a "$base" "$dir"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  cp "$deb" "$dir/tmp/firemq.deb"
  in_chroot() { chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                  DEBIAN_FRONTEND=noninteractive "$@"; }
  echo "[$release] $(in_chroot cat /etc/debian_version): apt-get install ./firemq.deb"
  in_chroot apt-get update -qq >>"$log" 2>&1 || { tail -20 "$log"; echo "[$release] apt-get update failed"; return 1; }
  in_chroot apt-get install -y -q --no-install-recommends /tmp/firemq.deb >>"$log" 2>&1 ||
    { tail -30 "$log"; echo "[$release] apt-get install failed (log: $log)"; return 1; }
  echo "[$release] installed: $(in_chroot dpkg-query -W -f='${Package} ${Version}' firemq); its libraries from" \
       "$release: $(in_chroot dpkg-query -W -f='${db:Status-Abbrev}${Package} ${Version}\n' libssl3 libssl3t64 \
          librabbitmq4 libstdc++6 openssl 2>/dev/null | sed -n 's/^ii *//p' | paste -sd, | sed 's/,/, /g')"
  # Every installed program finds its libraries, and none is Boost's.
  local program libraries missing=
  for program in $(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's|^\./usr/bin/\(.\)|/usr/bin/\1|p'); do
    # ldd's own failure (no ldd, not a dynamic program) fails the check rather than passing it unseen.
    libraries=$(in_chroot ldd "$program" 2>&1) || { missing+=" $program(ldd: ${libraries//$'\n'/ })"; continue; }
    if grep -q 'not found' <<<"$libraries"; then missing+=" $program"; fi
    if grep -q boost <<<"$libraries"; then missing+=" $program(boost)"; fi
  done
  [ -z "$missing" ] || { echo "[$release] shared libraries missing for:$missing"; return 1; }
  # firemq-conform finds the installed broker and data beside its own bin/ through /proc/self/exe.
  mount -t proc proc "$dir/proc"
  mounted+=("$dir/proc")
  echo "[$release] firemq-conform --driver /usr/bin/firemq-example-driver"
  local status=0 output
  output=$(cd / && in_chroot sh -c 'cd /tmp && firemq-conform --driver /usr/bin/firemq-example-driver \
             --reports /tmp/reports' 2>&1) || status=$?
  umount "$dir/proc"
  mounted=("${mounted[@]/$dir\/proc}")
  echo "$output" >>"$log"
  echo "$output" | grep -E '^firemq-conform: [0-9]+ cases|^(fire|fires|ws|wss) +[0-9]+ pass' | sed "s/^/[$release]   /" || true
  if [ $status -ne 0 ]; then echo "$output" | tail -40; echo "[$release] firemq-conform failed, exit $status"; return 1; fi
  return 0
}

results=()
overall=0
for release in "${releases[@]}"; do
  started=$SECONDS
  if check_release "$release"; then verdict=PASS; else verdict=FAIL; overall=1; fi
  results+=("$verdict $release: $(($SECONDS - started)) s (log: $root/$release.log)")
done
echo
printf '%s\n' "${results[@]}"
exit $overall
