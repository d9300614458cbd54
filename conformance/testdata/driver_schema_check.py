#!/usr/bin/python3
"""Every line between the harness and the example driver in a client run fits conformance/driver-protocol.schema.json,
and a line that breaks the protocol does not (so that the schema can fail).

Usage: driver_schema_check.py CONFORM DRIVER SCHEMA
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema

PREFIXES = ("to the driver: ", "from the driver: ")


def driver_lines(report):
    for case in report["cases"]:
        for line in case["transcript"]:
            text = line["header"] if isinstance(line["header"], str) else ""
            if line["direction"] == "note" and text.startswith(PREFIXES):
                yield case["id"], json.loads(text.split(": ", 1)[1])


def main():
    conform, driver, schema_file = sys.argv[1:4]
    schema = json.loads(pathlib.Path(schema_file).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    bad_lines = [{"event": "ready", "protocol": 3}, {"id": 1, "ok": False}, {"id": 1, "cmd": "ack"},
                 {"event": "delivered", "body": "no tag"}, {"event": "ready", "protocol": 1, "transports": ["quic"]}]
    problems = [f"the schema accepts a bad line: {b}" for b in bad_lines if validator.is_valid(b)]
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([conform, "--driver", driver, "--reports", work], capture_output=True, check=False)
        report = json.loads((pathlib.Path(work) / "latest" / "report.json").read_text(encoding="utf-8"))
    checked = 0
    for case_id, line in driver_lines(report):
        checked += 1
        for error in validator.iter_errors(line):
            problems.append(f"{case_id}: {line}: {error.message}")
    if checked == 0:
        problems.append("no driver line found in the report")
    for p in problems:
        print(p)
    print(f"{checked} driver lines checked against the schema; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
