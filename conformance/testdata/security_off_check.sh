#!/usr/bin/env bash
# Proof that the security cases can fail: the suite's security group runs against a reference broker that keeps
# none of its security settings (a wrapper given as --broker drops --loopback-addresses and the --max-* bounds,
# lets guest in from anywhere, and loads the definitions without their limits). Every security case must then
# fail, except the one that checks that a user who is not loopback-only gets in (which holds either way).
# Usage: security_off_check.sh BROKER CONFORM
set -euo pipefail
broker=$1 conform=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/broker-without-security" <<WRAPPER
#!/usr/bin/python3
import json, os, sys
args, out = sys.argv[1:], []
while args:
    flag = args.pop(0)
    if flag in ("--loopback-addresses", "--max-subscriptions", "--max-unacked"):
        args.pop(0)
        continue
    if flag == "--definitions":
        definitions = json.load(open(args.pop(0)))
        definitions.pop("parameters", None)
        for user in definitions["users"]:
            user.pop("limits", None)
        path = os.path.join("$work", "definitions-without-limits-%d.json" % os.getpid())
        with open(path, "w") as f:  # closed before execv, which would lose what is still buffered
            json.dump(definitions, f)
        out += [flag, path]
        continue
    out.append(flag)
os.execv("$broker", ["$broker", "--loopback-users", ""] + out)
WRAPPER
chmod +x "$work/broker-without-security"
set +e
"$conform" --transport fire --group security --broker "$work/broker-without-security" --reports "$work/reports" >"$work/out" 2>&1
run=$?
set -e
failed=$(/usr/bin/python3 "$(dirname "$0")/failed_cases.py" "$work/reports/latest/report.json")
all=$("$conform" --group security --list 2>/dev/null | grep -o '^security\.[a-z0-9.-]*' | sort -u)
must_fail=$(echo "$all" | grep -v '^security.loopback.other-users-connect-from-elsewhere$')
missing=$(comm -23 <(echo "$must_fail") <(echo "$failed"))
unexpected=$(comm -13 <(echo "$must_fail") <(echo "$failed"))
if [ "$run" -eq 0 ] || [ -z "$all" ] || [ -n "$missing" ] || [ -n "$unexpected" ]; then
  echo "security off: run status $run"
  echo "  should have failed but did not: ${missing:-none}"
  echo "  failed but should have passed: ${unexpected:-none}"
  tail -20 "$work/out"
  exit 1
fi
echo "security off: caught by $(echo "$failed" | wc -l) case(s): $(echo $failed)"
