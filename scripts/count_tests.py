#!/usr/bin/env python3
"""Counts the test cases of one Bazel invocation from its build events.

Usage: count_tests.py [NAME=]EVENTS_JSON...  (--build_event_json_file's)

Reads only what this run reported: every test target it configured, and
for each the XML report of its last attempt (per shard and run), wherever
that report lies (fresh or cached). Prints "N passed, N failed, N skipped"
and, before it, one line per target that counts as a failure without a
case to show for it: a test that did not build, was not run, crashed or
timed out before its report said so, or reported nothing. Several event
files (the test command's stages: the suite, then the fuzz stage) are
counted as one run: a target tested in two stages counts in each. Named
stages (suite=FILE fuzz=FILE) add each stage's counts to the line:
"N passed, N failed, N skipped (suite P/F/S, fuzz P/F/S)".
Exit status: 0 when nothing failed and something passed, 1 otherwise.
"""
import json
import sys
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET


def read_events(path):
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{number}: not a build event: {e}")
    return events


def local_path(uri):
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        return None
    return urllib.request.url2pathname(parsed.path)


def count_report(path):
    """(passed, failed, skipped) over one XML report's test cases."""
    root = ET.parse(path).getroot()
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif (case.get("result") == "skipped" or case.get("status") == "notrun"
              or case.find("skipped") is not None):
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    events = []        # (stage, event)
    names = []         # the stages' names ("" when unnamed)
    try:
        for stage, arg in enumerate(argv[1:]):
            name, sep, path = arg.partition("=")
            if not sep:
                name, path = "", arg
            names.append(name)
            events += [(stage, e) for e in read_events(path)]
    except OSError as e:
        print(f"cannot read the build events: {e}", file=sys.stderr)
        return 2

    tests = set()      # (stage, label): test targets this run configured
    results = {}       # (stage, label, run, shard) -> (attempt, status, xml)
    for stage, event in events:
        eid = event.get("id", {})
        if "targetConfigured" in eid:
            kind = event.get("configured", {}).get("targetKind", "")
            if kind.endswith("_test rule"):
                tests.add((stage, eid["targetConfigured"]["label"]))
        elif "testResult" in eid:
            key = eid["testResult"]
            result = event.get("testResult", {})
            xml = None
            for output in result.get("testActionOutput", []):
                if output.get("name") == "test.xml":
                    xml = local_path(output.get("uri", ""))
            slot = (stage, key["label"], key.get("run", 1), key.get("shard", 1))
            attempt = key.get("attempt", 1)
            if slot not in results or results[slot][0] <= attempt:
                results[slot] = (attempt, result.get("status", ""), xml)

    passed = failed = skipped = 0
    per_stage = [[0, 0, 0] for _ in names]
    reported = {slot[:2] for slot in results}
    for stage, label in sorted(tests - reported):
        print(f"{label}: no result in this run (did not build, or was not "
              "run): counted as 1 failure")
        failed += 1
        per_stage[stage][1] += 1
    for slot in sorted(results):
        label = slot[1]
        _, status, xml = results[slot]
        counts = None
        if xml is not None:
            try:
                counts = count_report(xml)
            except (OSError, ET.ParseError) as e:
                print(f"{label}: unreadable test report ({e})")
        if counts is None:
            print(f"{label}: {status or 'no status'} without a test report: "
                  "counted as 1 failure")
            failed += 1
            per_stage[slot[0]][1] += 1
            continue
        p, f, s = counts
        if status not in ("PASSED", "FLAKY") and f == 0:
            # Killed, timed out or crashed after the cases it reported.
            print(f"{label}: {status} with no failing case in its report: "
                  "counted as 1 failure")
            f = 1
        passed, failed, skipped = passed + p, failed + f, skipped + s
        for i, n in enumerate((p, f, s)):
            per_stage[slot[0]][i] += n
    stages = ""
    if any(names):
        stages = " (" + ", ".join(
            f"{name or f'stage {i + 1}'} {c[0]}/{c[1]}/{c[2]}"
            for i, (name, c) in enumerate(zip(names, per_stage))) + ")"
    print(f"{passed} passed, {failed} failed, {skipped} skipped{stages}")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
