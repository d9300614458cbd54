#!/usr/bin/python3
"""Proof that the client cases can fail: for each entry of conformance/client-breaks.json, the client cases run
with the example driver broken one way (--break NAME), over each of the entry's transports (fire when it names
none), and exactly the listed cases must fail, each naming the entry's rule among the violations the proxy found.

Usage: client_breaks_check.py CONFORM DRIVER BREAKS_JSON

A break of the codec (decode_frame, encode_frame) breaks no wire rule: its entry gives a `message` instead of a
`rule`, a text each failing case's message must contain.
"""
import json
import pathlib
import subprocess
import sys
import tempfile


def failures(conform, driver, name, transport, reports):
    """The run's exit status and its failing cases: id -> the rules they broke."""
    run = subprocess.run([conform, "--driver", driver, "--driver-arg=--break", f"--driver-arg={name}",
                          "--transport", transport, "--reports", str(reports)], capture_output=True, text=True)
    report = json.loads((reports / "latest" / "report.json").read_text(encoding="utf-8"))
    failed = {c["id"]: {v["rule"] for v in c["violations"]} for c in report["cases"] if c["verdict"] not in ("pass", "skipped")}
    for case in report["cases"]:  # what a codec break's entry names, beside the rules
        if case["id"] in failed:
            failed[case["id"]].add("message: " + case["message"])
    return run.returncode, failed


def names(rule, named):
    """Whether a failed case names the entry's rule (or, for "message: TEXT", has TEXT in its message)."""
    if not rule.startswith("message: "):
        return rule in named
    return any(n.startswith("message: ") and rule[len("message: "):] in n for n in named)


def main():
    conform, driver, breaks_file = sys.argv[1:4]
    entries = json.loads(pathlib.Path(breaks_file).read_text(encoding="utf-8"))["breaks"]
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for entry, transport in [(e, t) for e in entries for t in e.get("transports", ["fire"])]:
            name, must_fail = entry["break"], set(entry["must_fail"])
            rule = entry["rule"] if "rule" in entry else "message: " + entry["message"]
            status, failed = failures(conform, driver, name, transport, pathlib.Path(work) / f"{name}-{transport}")
            problems = [f"should have failed but passed: {i}" for i in sorted(must_fail - failed.keys())]
            problems += [f"failed but is not listed: {i}" for i in sorted(failed.keys() - must_fail)]
            problems += [f"{i} failed without naming {rule} (it names {sorted(r) or 'no rule'})"
                         for i, r in sorted(failed.items()) if not names(rule, r)]
            if status == 0:
                problems.append("the run passed")
            ok = ok and not problems
            print(f"{'ok   ' if not problems else 'WRONG'} --break {name} over {transport}: {len(failed)} case(s) fail, "
                  f"naming {rule}")
            for p in problems:
                print(f"      {p}")
    print("client breaks: every break is caught by exactly its listed cases" if ok else "client breaks: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
