#!/usr/bin/python3
"""Proof that the client cases can fail: for each entry of conformance/client-breaks.json, the client cases run
with the example driver broken one way (--break NAME), and exactly the listed cases must fail, each naming the
entry's rule among the violations the proxy found. An entry that breaks the codec (decode_frame, encode_frame)
breaks no wire rule: it gives a `message` instead, which each failing case's message must contain.

Usage: client_breaks_check.py CONFORM DRIVER BREAKS_JSON
"""
import json
import pathlib
import subprocess
import sys
import tempfile


def failures(conform, driver, name, reports):
    """The run's exit status and its failing cases: id -> the rules they broke."""
    run = subprocess.run([conform, "--driver", driver, "--driver-arg=--break", f"--driver-arg={name}",
                          "--reports", str(reports)], capture_output=True, text=True)
    report = json.loads((reports / "latest" / "report.json").read_text(encoding="utf-8"))
    failed = {c["id"]: ({v["rule"] for v in c["violations"]}, c["message"]) for c in report["cases"] if c["verdict"] != "pass"}
    return run.returncode, failed


def main():
    conform, driver, breaks_file = sys.argv[1:4]
    entries = json.loads(pathlib.Path(breaks_file).read_text(encoding="utf-8"))["breaks"]
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for entry in entries:
            name, must_fail = entry["break"], set(entry["must_fail"])
            rule, message = entry.get("rule"), entry.get("message")
            status, failed = failures(conform, driver, name, pathlib.Path(work) / name)
            problems = [f"should have failed but passed: {i}" for i in sorted(must_fail - failed.keys())]
            problems += [f"failed but is not listed: {i}" for i in sorted(failed.keys() - must_fail)]
            if rule is not None:
                problems += [f"{i} failed without naming {rule} (it names {sorted(r) or 'no rule'})"
                             for i, (r, _) in sorted(failed.items()) if rule not in r]
            else:
                problems += [f"{i} failed without saying {message!r}: {m}"
                             for i, (_, m) in sorted(failed.items()) if message not in m]
            if status == 0:
                problems.append("the run passed")
            ok = ok and not problems
            naming = rule if rule is not None else repr(message)
            print(f"{'ok   ' if not problems else 'WRONG'} --break {name}: {len(failed)} case(s) fail, naming {naming}")
            for p in problems:
                print(f"      {p}")
    print("client breaks: every break is caught by exactly its listed cases" if ok else "client breaks: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
