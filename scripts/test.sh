#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, runs the
# whole suite, then (a whole run only) its three checking stages: the fuzz
# stage, AddressSanitizer + UBSan over the unit tests and ThreadSanitizer
# over the concurrency-heavy ones. Ends with one line "N passed, N failed,
# N skipped (suite P/F/S, fuzz P/F/S, asan P/F/S, tsan P/F/S)" counted over
# individual test cases of this run (its build events name the targets it
# ran and their XML reports; scripts/count_tests.py), after one line of
# each stage's seconds.
# Arguments: Bazel flags (--nocache_test_results) and target patterns
# (//core/...) for a partial run; by default //... .
# LOCKSTEP_SANITIZER_STAGES=0 leaves the asan and tsan stages out of a
# whole run (a quicker local run; CI runs them).
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

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lockstep-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
stages=()   # NAME=EVENTS for count_tests.py
codes=()    # each stage's Bazel exit code
times=()    # "NAME SECONDS"
# stage NAME BAZEL_TEST_ARGS...: one `bazel test`, its events counted.
stage() {
  local name=$1 start=$SECONDS
  shift
  bazel test --test_output=errors --build_event_json_file="$tmp/$name.json" \
    "$@"
  codes+=($?)
  stages+=("$name=$tmp/$name.json")
  times+=("$name $((SECONDS - start)) s")
}
stage suite "${cuda_config[@]}" "${flags[@]}" -- "${targets[@]}"
if [[ "${targets[*]}" == "//..." ]]; then
  # --symlink_prefix=/ in the stages below: bazel-bin and friends keep
  # pointing at the suite's build (client/lockstep), not theirs; each
  # config builds into an output folder of its own (.bazelrc).
  #
  # The fuzz stage: every fuzz target (tests/fuzz) built by clang with
  # libFuzzer, ASan and UBSan, fuzzed for real on every run (never a cached
  # result) from its corpus in the repository (tests/fuzz/corpus, grown by
  # tests/fuzz/grow_corpus.sh from the campaigns) for LOCKSTEP_FUZZ_SECONDS
  # seconds (default 6): a reader that crashes, hangs or allocates past
  # 2 GB on a known or found input fails the run. The suite above already
  # replayed each corpus (gcc, no sanitizer).
  stage fuzz --config=fuzz --symlink_prefix=/ --nocache_test_results \
    --test_env=LOCKSTEP_FUZZ_SECONDS "${flags[@]}" -- //tests/fuzz/...
  if [[ "${LOCKSTEP_SANITIZER_STAGES:-1}" != 0 ]]; then
    # What fits CI's 45 minutes on 2 cores (docs/testing.md has the
    # figures; the whole suite under each sanitizer is one command there):
    # AddressSanitizer + UndefinedBehaviorSanitizer (gcc, any report
    # aborts, leaks checked) over the unit tests of the wire and the
    # rings: base, rpc, the ring all-reduce in process and its gRPC
    # transport (zero-copy sends, gRPC's slices, the collective service),
    # and the coordinators' etcd client, lease and journal (a real etcd).
    # The readers are under ASan + UBSan in the fuzz stage already.
    sanitized=(//base/... //rpc/... //core/collective/...
      //worker:ring_message_test //worker:grpc_ring_transport_test
      //coordinator:etcd_test)
    stage asan --config=asan --symlink_prefix=/ "${flags[@]}" -- \
      "${sanitized[@]}"
    # ThreadSanitizer over the concurrency-heavy ones, the rings' threads,
    # mailboxes, reactors and aborts (and its canary), and the leader
    # lease's keep-alive thread beside its readers, against Debian's
    # Abseil rebuilt with TSan (scripts/tsan_abseil.sh, once per machine).
    if scripts/tsan_abseil.sh >"$tmp/tsan_abseil.log" 2>&1; then
      stage tsan --config=tsan --symlink_prefix=/ "${flags[@]}" -- \
        //base:tsan_canary_test //core/collective/... \
        //worker:ring_message_test //worker:grpc_ring_transport_test \
        //coordinator:etcd_test
    else
      cat "$tmp/tsan_abseil.log"
      echo "the tsan stage could not rebuild Abseil (above): it fails the run"
      codes+=(1)
    fi
  fi
fi
echo "stage times: $(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
python3 scripts/count_tests.py "${stages[@]}"
counted=$?
# Bazel's exit codes: 0 all passed; 3 some tests failed (count_tests names
# them); 4 no test targets. Anything else (1 build failure, 2 bad command,
# 8 interrupted...) fails the run whatever was counted.
some_failed=0
for r in "${codes[@]}"; do
  if [[ $r -ne 0 && $r -ne 3 && $r -ne 4 ]]; then exit "$r"; fi
  if [[ $r -eq 3 ]]; then some_failed=1; fi
done
if [[ $some_failed -eq 1 && $counted -eq 0 ]]; then exit 3; fi
exit $counted
