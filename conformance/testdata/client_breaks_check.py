#!/usr/bin/python3
"""Proof that the client cases can fail: for each entry of conformance/client-breaks.json, the client cases run
with the example driver broken one way (--break NAME), over each of the entry's transports (fire when it names
none), and exactly the listed cases must fail, each naming the entry's rule among the violations the proxy found.

Usage: client_breaks_check.py CONFORM DRIVER BREAKS_JSON
       client_breaks_check.py --coverage BREAKS_JSON REQUIREMENTS_JSON CLIENT_CASES_DIR

A break that no wire rule sees (the codec, the URL parser, what the driver reports) gives a `message` and/or
`messages` instead of a `rule`: texts each failing case's message must contain. An entry with `groups` runs only
those groups (a break of the codec or the URL parser cannot change what a connection does).

--coverage checks, without running anything, that every requirement a client case claims is the rule of a break
or among its `proves`, and that every requirement that binds only clients is claimed by a client case, unless
requirements.json gives the reason (`untested_because`).
"""
import concurrent.futures
import glob
import json
import pathlib
import subprocess
import sys
import tempfile


def failures(conform, driver, name, transport, groups, reports):
    """The run's exit status and its failing cases: id -> the rules they broke."""
    group_args = [arg for g in groups for arg in ("--group", g)]
    run = subprocess.run([conform, "--driver", driver, "--driver-arg=--break", f"--driver-arg={name}",
                          "--transport", transport, "--reports", str(reports)] + group_args, capture_output=True, text=True)
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


def what_each_names(entry):
    """The rule, or the texts, every failing case of the entry must name."""
    if "rule" in entry:
        return [entry["rule"]]
    return ["message: " + m for m in ([entry["message"]] if "message" in entry else []) + entry.get("messages", [])]


def judge(conform, driver, entry, transport, work):
    """The problems of one entry over one transport (none: it is caught exactly as listed), and a summary line."""
    name, must_fail = entry["break"], set(entry["must_fail"])
    status, failed = failures(conform, driver, name, transport, entry.get("groups", []), pathlib.Path(work) / f"{name}-{transport}")
    problems = [f"should have failed but passed: {i}" for i in sorted(must_fail - failed.keys())]
    problems += [f"failed but is not listed: {i}" for i in sorted(failed.keys() - must_fail)]
    for rule in what_each_names(entry):
        problems += [f"{i} failed without naming {rule} (it names {sorted(r) or 'no rule'})"
                     for i, r in sorted(failed.items()) if not names(rule, r)]
    if status == 0:
        problems.append("the run passed")
    summary = (f"{'ok   ' if not problems else 'WRONG'} --break {name} over {transport}: {len(failed)} case(s) fail, "
               f"naming {', '.join(what_each_names(entry))}")
    return problems, summary


def check_breaks(conform, driver, breaks_file):
    entries = json.loads(pathlib.Path(breaks_file).read_text(encoding="utf-8"))["breaks"]
    runs = [(e, t) for e in entries for t in e.get("transports", ["fire"])]
    ok = True
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for problems, summary in pool.map(lambda run: judge(conform, driver, run[0], run[1], work), runs):
            ok = ok and not problems
            print(summary)
            for p in problems:
                print(f"      {p}")
    print("client breaks: every break is caught by exactly its listed cases" if ok else "client breaks: FAILED")
    return 0 if ok else 1


def check_coverage(breaks_file, requirements_file, cases_dir):
    """Every requirement a client case claims is proved by a break, or requirements.json says why none can."""
    entries = json.loads(pathlib.Path(breaks_file).read_text(encoding="utf-8"))["breaks"]
    proved = {e["rule"] for e in entries if "rule" in e} | {r for e in entries for r in e.get("proves", [])}
    requirements = {r["id"]: r for r in json.loads(pathlib.Path(requirements_file).read_text(encoding="utf-8"))["requirements"]}
    claimed = {}
    for path in sorted(glob.glob(str(pathlib.Path(cases_dir) / "*.json"))):
        for case in json.loads(pathlib.Path(path).read_text(encoding="utf-8"))["cases"]:
            for r in case.get("requirements", []):
                claimed.setdefault(r, []).append(case["id"])
    unknown = sorted(r for r in proved if r not in requirements)
    excused = {i for i, r in requirements.items() if r.get("untested_because")}
    unproved = sorted(r for r in claimed if r not in proved and r not in excused)
    # A requirement only a client can break is claimed by a client case, unless requirements.json says why not.
    unclaimed = sorted(i for i, r in requirements.items() if r["applies_to"] == "client" and i not in claimed and i not in excused)
    for r in unclaimed:
        print(f"WRONG {r} binds only clients, but no client case claims it and requirements.json gives no reason")
    for r in unknown:
        print(f"WRONG a break proves {r}, which requirements.json does not have")
    for r in unproved:
        print(f"WRONG {r} (claimed by {', '.join(claimed[r])}) is failed by no break and has no untested_because")
    observed = sum(1 for r in claimed if r in proved)
    print(f"client requirements: {len(claimed)} claimed by client cases, {observed} failed by a break, "
          f"{len(claimed) - observed - len(unproved)} with an untested_because")
    return 0 if not unknown and not unproved and not unclaimed else 1


def main():
    if sys.argv[1] == "--coverage":
        return check_coverage(*sys.argv[2:5])
    return check_breaks(*sys.argv[1:4])


if __name__ == "__main__":
    sys.exit(main())
