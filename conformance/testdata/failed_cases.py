#!/usr/bin/env python3
"""Prints the ids of the cases that failed in a firemq-conform report.json, sorted, one a line.

The fault checks compare these with the cases that must fail. They read the report, not the console: the
console names the first 20 failures only ("... and N more").
Usage: failed_cases.py REPORT_JSON
"""
import json
import sys

with open(sys.argv[1]) as report:
    cases = json.load(report)["cases"]
print("\n".join(sorted({case["id"] for case in cases if case["verdict"] == "fail"})))
