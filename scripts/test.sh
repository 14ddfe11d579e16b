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

# The CUDA code is built and its device-free tests run wherever the toolkit
# is (CI has it); tests that need a GPU skip, saying why.
cuda_config=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda_config=(--config=cuda); fi

bazel test //... --test_output=errors "${cuda_config[@]}" "$@"
rc=$?
python3 scripts/count_tests.py
counted=$?
# 0: all passed; 1: tests failed; 4: no test targets. Anything else (a build
# failure, 3, 2...) fails the run too.
if [[ $rc -ne 0 && $rc -ne 4 ]]; then exit $rc; fi
exit $counted
