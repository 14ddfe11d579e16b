#!/usr/bin/env python3
"""Counts test cases over every test target's XML report.

Prints "N passed, N failed, N skipped". A test target without a report
(it did not build, or crashed before writing one) counts as one failure.
Exit status: 0 when nothing failed and something passed, 1 otherwise.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def main():
    targets = subprocess.run(
        ["bazel", "query", "tests(//...) except attr(tags, manual, //...)",
         "--output=label"],
        capture_output=True, text=True, check=False).stdout.split()
    logs = subprocess.run(["bazel", "info", "bazel-testlogs"],
                          capture_output=True, text=True,
                          check=False).stdout.strip()
    passed = failed = skipped = 0
    for label in targets:
        path = os.path.join(logs, label.lstrip("/").replace(":", "/"),
                            "test.xml")
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            print(f"no test report for {label}: counted as failed")
            failed += 1
            continue
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif (case.get("result") == "skipped" or case.get("status") == "notrun"
                  or case.find("skipped") is not None):
                skipped += 1
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
