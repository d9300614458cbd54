#!/usr/bin/python3
"""Every requirement of the catalog is checked by a case or a monitor rule, or says why not, in two places
that must agree: requirements.json ("untested_because", which the reports show) and docs/spec-notes.md
("Requirements no case checks", the reasoning for spec editors).

Usage: coverage_check.py FIREMQ_CONFORM CONFORMANCE_DIR SPEC_NOTES
"""
import fnmatch, json, re, subprocess, sys


def named_in_notes(notes_path):
    """The requirement ids (or id globs such as interop.*) that open the items of the notes' section."""
    text = open(notes_path, encoding="utf-8").read()
    match = re.search(r"^### Requirements no case checks\n(.*?)(?=^## |^### |\Z)", text, re.S | re.M)
    if not match:
        sys.exit(f"{notes_path} has no section \"### Requirements no case checks\"")
    named = set()
    for item in re.findall(r"^- ([^:]+):", match.group(1), re.M):  # "- `a.b`, `c.d`: reason"
        named.update(re.findall(r"`([a-z0-9.*-]+)`", item))
    return named


def main():
    conform, conformance_dir, notes = sys.argv[1:4]
    run = subprocess.run([conform, "--coverage", "--conformance", conformance_dir], capture_output=True, text=True)
    print(run.stdout, end="")
    problems = [] if run.returncode == 0 else [f"firemq-conform --coverage exited {run.returncode}: {run.stderr}"]
    catalog = json.load(open(f"{conformance_dir}/requirements.json", encoding="utf-8"))["requirements"]
    untested = [r["id"] for r in catalog if r.get("untested_because")]
    named = named_in_notes(notes)
    for rid in untested:
        if not any(fnmatch.fnmatchcase(rid, name) for name in named):
            problems.append(f"{rid} says why it is untested in requirements.json but not in {notes}")
    for name in named:
        if not any(fnmatch.fnmatchcase(rid, name) for rid in untested):
            problems.append(f"{notes} explains {name}, which requirements.json does not mark untested")
    for p in problems:
        print("PROBLEM:", p)
    print(f"{len(untested)} untested requirements, each explained in both places" if not problems else "")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
