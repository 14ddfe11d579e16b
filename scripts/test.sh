#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, runs the
# whole suite, and ends with one line "N passed, N failed, N skipped"
# counted over individual test cases (from each test's XML report).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh || exit 1

# Real MNIST for the tests that need it (they skip, saying why, without it).
if [[ -z "${LOCKSTEP_MNIST_DIR:-}" && -d ../shared/datasets/mnist ]]; then
  export LOCKSTEP_MNIST_DIR="$(cd ../shared/datasets/mnist && pwd)"
fi

bazel test //... --test_output=errors "$@"
rc=$?
python3 scripts/count_tests.py
counted=$?
# 0: all passed; 1: tests failed; 4: no test targets. Anything else (a build
# failure, 3, 2...) fails the run too.
if [[ $rc -ne 0 && $rc -ne 4 ]]; then exit $rc; fi
exit $counted
