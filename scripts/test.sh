#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, runs the
# whole suite, and ends with one line "N passed, N failed, N skipped"
# counted over individual test cases of this run (its build events name the
# targets it ran and their XML reports; scripts/count_tests.py).
# Arguments: Bazel flags (--nocache_test_results) and target patterns
# (//core/...) for a partial run; by default //... .
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --test || exit 1

# Real MNIST for the tests that need it (they skip, saying why, without it).
if [[ -z "${LOCKSTEP_MNIST_DIR:-}" && -d ../shared/datasets/mnist ]]; then
  export LOCKSTEP_MNIST_DIR="$(cd ../shared/datasets/mnist && pwd)"
fi
# And the Brown corpus (train.txt, valid.txt) for the text-model tests.
if [[ -z "${LOCKSTEP_BROWN_DIR:-}" && -d ../shared/datasets/brown ]]; then
  export LOCKSTEP_BROWN_DIR="$(cd ../shared/datasets/brown && pwd)"
fi

# The CUDA code is built and its device-free tests run wherever the toolkit
# is (CI has it); tests that need a GPU skip, saying why.
cuda_config=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda_config=(--config=cuda); fi

# Tests that compare with PyTorch fail here, instead of skipping, when torch
# cannot be imported: this command installed it.
export LOCKSTEP_REQUIRE_TORCH=1

flags=()
targets=()
for arg in "$@"; do
  if [[ "$arg" == -* ]]; then flags+=("$arg"); else targets+=("$arg"); fi
done
if ((${#targets[@]} == 0)); then targets=(//...); fi

events="$(mktemp "${TMPDIR:-/tmp}/lockstep-test-events.XXXXXX")"
fuzz_events="$(mktemp "${TMPDIR:-/tmp}/lockstep-fuzz-events.XXXXXX")"
trap 'rm -f "$events" "$fuzz_events"' EXIT
bazel test --test_output=errors "${cuda_config[@]}" \
  --build_event_json_file="$events" "${flags[@]}" -- "${targets[@]}"
rc=$?
# The fuzz stage (a whole run only): every fuzz target (tests/fuzz) built
# by clang with libFuzzer, ASan and UBSan, and fuzzed from its corpus for
# LOCKSTEP_FUZZ_SECONDS seconds (default 6): a reader that crashes, hangs
# or allocates past 2 GB on a known input fails the run. The suite above
# already replayed each corpus (gcc, no sanitizer).
fuzz_rc=0
stages=("$events")
if [[ "${targets[*]}" == "//..." ]]; then
  # --symlink_prefix=/: bazel-bin and friends keep pointing at the suite's
  # build (client/lockstep), not the fuzz binaries'.
  bazel test --config=fuzz --test_output=errors --symlink_prefix=/ \
    --build_event_json_file="$fuzz_events" "${flags[@]}" -- //tests/fuzz/...
  fuzz_rc=$?
  stages+=("$fuzz_events")
fi
python3 scripts/count_tests.py "${stages[@]}"
counted=$?
# Bazel's exit codes: 0 all passed; 3 some tests failed (count_tests names
# them); 4 no test targets. Anything else (1 build failure, 2 bad command,
# 8 interrupted...) fails the run whatever was counted.
for r in "$rc" "$fuzz_rc"; do
  if [[ $r -ne 0 && $r -ne 3 && $r -ne 4 ]]; then exit "$r"; fi
done
if [[ ($rc -eq 3 || $fuzz_rc -eq 3) && $counted -eq 0 ]]; then exit 3; fi
exit $counted
