#!/usr/bin/python3
"""Checks that what the conformance suite quotes from the spec is in the spec.

Each case's spec.quote (conformance/cases/*.json and client-cases/*.json) and each requirement text
(conformance/requirements.json) must appear in spec/firemq-protocol-v1.txt, with whitespace normalised (the
spec's tables are tab-separated) and "..." standing for words left out: the pieces around it must appear in
that order.

A requirement may name where its sentence comes from before a colon ("`ver` uint: Protocol major version.",
"501 frame-error: Malformed frame."): the text after any ": " may be the quote. Requirements that describe a
table row or a diagram in words rather than quote it (DESCRIBED) are not checked.

Usage: check_quotes.py [REPO_ROOT]   (default: the parent of this file's folder). Exit 1 on a quote not found.
"""
import fnmatch
import json
import pathlib
import re
import sys

# Requirements that put a table row or a figure into words: the spec has no sentence to quote for them.
DESCRIBED = [
    "transport.*.default-*",  # the transport table's address column
    "ops.*",                  # the op table, row by row
    "lifecycle.*",            # the lifecycle diagram
    "reply.ok.*",             # the ok reply's "present for" table
    "props.*",                # the message property table
    "interop.*",              # the AMQP 0-9-1 interop table
]

# Case quotes known not to match, kept here so that the check catches new ones while these wait for the case
# files' owner (the key is "file:case id"). Remove an entry once its quote is fixed; the check says when.
KNOWN_MISMATCHES = {
    "auth.json:auth.second-user.is-accepted",
    "lifecycle.json:lifecycle.before-hello.broker-sends-nothing",
    "lifecycle.json:lifecycle.direction.server-op-from-a-client-is-refused",
    "lifecycle.json:lifecycle.direction.welcome-from-a-client-is-refused",
}


def normalise(text):
    return re.sub(r"\s+", " ", text).strip()


def appears(quote, spec):
    """True when the quote's pieces, split at "...", appear in the spec in order."""
    pieces = [p.strip() for p in re.split(r"\.\.\.|…", normalise(quote)) if p.strip()]
    position = 0
    for piece in pieces:
        found = spec.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return bool(pieces)


def quoted_after_a_label(text, spec):
    """The text, or what follows one of its ": " (a label naming the row it comes from), is in the spec."""
    if appears(text, spec):
        return True
    return any(appears(text[m.end():], spec) for m in re.finditer(r": ", text))


def check_cases(root, spec):
    missing, known_fixed = [], []
    # Broker cases and client cases (client mode, docs/client-certification.md) alike.
    files = sorted((root / "conformance" / "cases").glob("*.json")) + sorted((root / "conformance" / "client-cases").glob("*.json"))
    for path in files:
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            key = f"{path.name}:{case['id']}"
            ok = appears(case["spec"]["quote"], spec)
            if not ok and key not in KNOWN_MISMATCHES:
                missing.append(f"{key}: spec.quote not in the spec: {case['spec']['quote']!r}")
            elif ok and key in KNOWN_MISMATCHES:
                known_fixed.append(key)
    return missing, known_fixed


def check_requirements(root, spec):
    missing, described = [], 0
    catalog = json.loads((root / "conformance" / "requirements.json").read_text(encoding="utf-8"))
    for requirement in catalog["requirements"]:
        if any(fnmatch.fnmatchcase(requirement["id"], pattern) for pattern in DESCRIBED):
            described += 1
        elif not quoted_after_a_label(requirement["text"], spec):
            missing.append(f"requirements.json:{requirement['id']}: text not in the spec: {requirement['text']!r}")
    return missing, described


def main():
    root = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent
    spec = normalise((root / "spec" / "firemq-protocol-v1.txt").read_text(encoding="utf-8"))
    case_missing, known_fixed = check_cases(root, spec)
    requirement_missing, described = check_requirements(root, spec)
    for line in case_missing + requirement_missing:
        print(line)
    for key in known_fixed:
        print(f"{key} now matches: remove it from KNOWN_MISMATCHES in {pathlib.Path(__file__).name}")
    print(f"{len(case_missing) + len(requirement_missing)} quotes not found; {len(KNOWN_MISMATCHES)} known case "
          f"mismatches; {described} requirements describe a table or diagram (not checked)")
    return 1 if case_missing or requirement_missing else 0


if __name__ == "__main__":
    sys.exit(main())
