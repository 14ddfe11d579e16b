#!/usr/bin/env bash
# count_tests.py counts this run's results only: cases from each reported
# test's last attempt, a configured test without a result, a report-less or
# killed test, and nothing from targets the run never named.
set -uo pipefail
script="$(dirname "$0")/count_tests.py"
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  script="$TEST_SRCDIR/${TEST_WORKSPACE:-lockstep}/scripts/count_tests.py"
fi
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/count_tests.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
failures=0

report() {  # report FILE PASSED FAILED SKIPPED
  {
    echo '<?xml version="1.0"?><testsuites><testsuite name="s">'
    for ((i = 0; i < $2; i++)); do echo "<testcase name=\"p$i\" status=\"run\"/>"; done
    for ((i = 0; i < $3; i++)); do
      echo "<testcase name=\"f$i\" status=\"run\"><failure message=\"x\"/></testcase>"
    done
    for ((i = 0; i < $4; i++)); do
      echo "<testcase name=\"s$i\" status=\"run\" result=\"skipped\"><skipped/></testcase>"
    done
    echo '</testsuite></testsuites>'
  } >"$1"
}
configured() {  # configured LABEL KIND
  printf '{"id":{"targetConfigured":{"label":"%s"}},"configured":{"targetKind":"%s"}}\n' "$1" "$2"
}
result() {  # result LABEL SHARD ATTEMPT STATUS [XML]
  local outputs='[{"name":"test.log","uri":"file:///nonexistent/test.log"}'
  if [[ -n "${5:-}" ]]; then outputs+=",{\"name\":\"test.xml\",\"uri\":\"file://$5\"}"; fi
  printf '{"id":{"testResult":{"label":"%s","run":1,"shard":%d,"attempt":%d}},"testResult":{"status":"%s","testActionOutput":%s]}}\n' \
    "$1" "$2" "$3" "$4" "$outputs"
}
expect() {  # expect NAME WANT_LINE WANT_RC EVENTS [GREP]  (EVENTS: one or
  # more files, space-separated)
  local out rc
  # shellcheck disable=SC2086
  out="$(python3 "$script" $4)"
  rc=$?
  local last="${out##*$'\n'}"
  if [[ "$last" != "$2" || $rc -ne $3 ]]; then
    echo "FAIL $1: got '$last' rc $rc, want '$2' rc $3"; echo "$out"; failures=$((failures + 1))
  elif [[ -n "${5:-}" ]] && ! grep -qF -- "$5" <<<"$out"; then
    echo "FAIL $1: output lacks '$5'"; echo "$out"; failures=$((failures + 1))
  else
    echo "ok   $1"
  fi
}

# All green: two targets, one sharded into two reports; a test_suite and a
# library are not tests.
report "$dir/a.xml" 3 0 1
report "$dir/b1.xml" 2 0 0
report "$dir/b2.xml" 1 0 2
{
  configured //x:a cc_test\ rule
  configured //x:b sh_test\ rule
  configured //x:suite test_suite\ rule
  configured //x:lib cc_library\ rule
  result //x:a 1 1 PASSED "$dir/a.xml"
  result //x:b 1 1 PASSED "$dir/b1.xml"
  result //x:b 2 1 PASSED "$dir/b2.xml"
} >"$dir/green.json"
expect green "6 passed, 0 failed, 3 skipped" 0 "$dir/green.json"

# A flaky retry: only the last attempt counts.
report "$dir/try1.xml" 1 1 0
report "$dir/try2.xml" 2 0 0
{
  configured //x:a cc_test\ rule
  result //x:a 1 1 FAILED "$dir/try1.xml"
  result //x:a 1 2 FLAKY "$dir/try2.xml"
} >"$dir/flaky.json"
expect last_attempt "2 passed, 0 failed, 0 skipped" 0 "$dir/flaky.json"

# A test that did not build has a configured event and no result; a
# timed-out one has no report; a killed one reported only passing cases.
report "$dir/killed.xml" 4 0 0
{
  configured //x:a cc_test\ rule
  configured //x:broken cc_test\ rule
  configured //x:slow cc_test\ rule
  configured //x:killed cc_test\ rule
  result //x:a 1 1 PASSED "$dir/a.xml"
  result //x:slow 1 1 TIMEOUT
  result //x:killed 1 1 FAILED "$dir/killed.xml"
} >"$dir/broken.json"
expect not_built "7 passed, 3 failed, 1 skipped" 1 "$dir/broken.json" \
  "//x:broken: no result in this run"
expect timed_out "7 passed, 3 failed, 1 skipped" 1 "$dir/broken.json" \
  "//x:slow: TIMEOUT without a test report"
expect killed "7 passed, 3 failed, 1 skipped" 1 "$dir/broken.json" \
  "//x:killed: FAILED with no failing case"

# Failing cases count one each; a stale report of a target this run did
# not name is never read.
report "$dir/red.xml" 5 2 0
report "$dir/stale.xml" 0 9 0
{
  configured //x:red cc_test\ rule
  result //x:red 1 1 FAILED "$dir/red.xml"
} >"$dir/red.json"
expect failing_cases "5 passed, 2 failed, 0 skipped" 1 "$dir/red.json"

# Two stages (the suite, then the fuzz stage): a target in both counts in
# each; a failure in the second stage fails the run.
report "$dir/replay.xml" 1 0 0
report "$dir/fuzzed.xml" 0 1 0
{
  configured //f:x_test sh_test\ rule
  result //f:x_test 1 1 PASSED "$dir/replay.xml"
} >"$dir/stage1.json"
{
  configured //f:x_test sh_test\ rule
  result //f:x_test 1 1 FAILED "$dir/fuzzed.xml"
} >"$dir/stage2.json"
expect two_stages "1 passed, 1 failed, 0 skipped" 1 "$dir/stage1.json $dir/stage2.json"
expect one_stage "1 passed, 0 failed, 0 skipped" 0 "$dir/stage1.json"
# Named stages (the test command's suite, fuzz, asan and tsan) are counted
# apart on the same line too.
expect named_stages "1 passed, 1 failed, 0 skipped (suite 1/0/0, fuzz 0/1/0)" \
  1 "suite=$dir/stage1.json fuzz=$dir/stage2.json"

# Nothing run is not a pass; an unreadable events file is an error.
: >"$dir/empty.json"
expect nothing_ran "0 passed, 0 failed, 0 skipped" 1 "$dir/empty.json"
echo 'not json' >"$dir/bad.json"
python3 "$script" "$dir/bad.json" >/dev/null 2>"$dir/err"
if [[ $? -eq 0 ]] || ! grep -q "bad.json:1: not a build event" "$dir/err"; then
  echo "FAIL bad_events: $(cat "$dir/err")"; failures=$((failures + 1))
else
  echo "ok   bad_events"
fi

if ((failures > 0)); then echo "$failures failed"; exit 1; fi
echo "all passed"
