#!/usr/bin/env bash
# run_fuzzer.sh BINARY CORPUS_DIR: one fuzz target's bounded run (fuzz.bzl).
# A libFuzzer build (--config=fuzz) fuzzes a writable copy of the corpus for
# LOCKSTEP_FUZZ_SECONDS (default 6) seconds; a crashing input is kept in
# TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/.../test.outputs/) and fails
# the test. Any other build replays the corpus (replay_main.cc).
set -euo pipefail
bin=$1
corpus=$2
[[ -d "$corpus" ]] || { echo "run_fuzzer: no corpus folder $corpus" >&2; exit 1; }
n=$(find -L "$corpus" -type f | wc -l)
((n > 0)) || { echo "run_fuzzer: $corpus is empty" >&2; exit 1; }
seconds=${LOCKSTEP_FUZZ_SECONDS:-6}
out=${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}
help=$("$bin" -help=1 2>&1 || true)
if [[ "$help" == *"libFuzzer"* || "$help" == *"Usage:"* ]]; then
  work=${TEST_TMPDIR:-$(mktemp -d)}/corpus
  mkdir -p "$work"
  cp "$corpus"/* "$work"/
  echo "run_fuzzer: ${LOCKSTEP_FUZZ_TARGET:-$bin}: libFuzzer for ${seconds}s from $n seed inputs"
  # -rss_limit_mb: an input that makes the reader allocate more fails;
  # -timeout: one input over 10 s (a hang) fails; -error_exitcode: any crash.
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -error_exitcode=77 \
    -artifact_prefix="$out/" "$work" 2>&1 | tail -n 40
  rc=${PIPESTATUS[0]}
  echo "run_fuzzer: corpus now $(find -L "$work" -type f | wc -l) inputs; exit $rc"
  exit "$rc"
fi
echo "run_fuzzer: ${LOCKSTEP_FUZZ_TARGET:-$bin}: replaying $n seed inputs (not a --config=fuzz build)"
exec "$bin" "$corpus"
