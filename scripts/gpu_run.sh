#!/usr/bin/env bash
# On a GPU machine, from the checkout, with the folder scripts/gpu_bundle.sh
# made: runs every CUDA test binary and bert_vs_pytorch --device cuda:0
# (needs a python3 with CUDA torch). Usage: bash BUNDLE/gpu_run.sh RESULTS
# (tests.log and bert_bench.log there).
set -u
root=$PWD
here=$(cd "$(dirname "$0")" && pwd)
results=${1:?usage: gpu_run.sh RESULTS_DIR}
mkdir -p "$results"
b=$(mktemp -d)
tar -C "$b" -xJf "$here/bundle.tar.xz"
nvidia-smi -L
# CUDA's libraries from this machine: the toolkit's or a pip venv's.
libs=$b/lib
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  p=$(find /usr/local /opt /usr/lib -name "$n*" 2>/dev/null | head -n 1)
  echo "$n -> ${p:-not found}"
  [[ -n "$p" ]] && libs="$libs:$(dirname "$p")"
done
# Where bert_vs_pytorch.sh looks for its binaries (RUNFILES_DIR below).
for f in client/lockstep benchmarks/data_batches; do
  printf '#!/bin/bash\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$b/bin/$f" >"$root/$f"
  chmod +x "$root/$f"
done
# Runfiles as Bazel lays them out (TEST_SRCDIR/lockstep/...): the checkout,
# where the wrappers above stand for client/lockstep (the cluster tests
# start it) and benchmarks/data_batches.
rf=$(mktemp -d) && ln -s "$root" "$rf/lockstep"
while read -r t; do
  [[ "$t" == *_test ]] || continue
  d=$(mktemp -d)
  out=$(cd "$d" && TEST_TMPDIR=$d TEST_SRCDIR=$rf TEST_WORKSPACE=lockstep \
    timeout 300 env LD_LIBRARY_PATH="$libs" "$b/bin/$t" 2>&1)
  rc=$?
  echo "== $t rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' <<<"$out" | tr '\n' ' ')"
  ((rc == 0)) || grep -E -B3 -A12 'Failure|FAILED|rror' <<<"$out" | head -n 80
done <"$b/tests.txt" >"$results/tests.log" 2>&1
echo "test binaries passing: $(grep -c 'rc=0' "$results/tests.log") of $(grep -c '^==' "$results/tests.log")"
grep '^==' "$results/tests.log" | grep -v 'rc=0'
if [[ -d "$here/brown" ]]; then
  RUNFILES_DIR=$rf LOCKSTEP_BENCH_PYTHON=$(command -v python3) LOCKSTEP_BROWN_DIR=$here/brown \
    timeout 300 bash "$root/benchmarks/bert_vs_pytorch.sh" --device cuda:0 --batch 32,256 \
    --steps 300 --epochs 1 --threads "$(nproc)" >"$results/bert_bench.log" 2>&1
  echo "bert_vs_pytorch rc=$?"
  tail -n 12 "$results/bert_bench.log"
else
  echo "no Brown corpus in $here: benchmark skipped"
fi
# The fuzz campaign (a bundle made with LOCKSTEP_BUNDLE_FUZZ=1), on every
# core until LOCKSTEP_FUZZ_DEADLINE (unix seconds), the targets named in
# LOCKSTEP_FUZZ_TARGETS (default all) in that order.
if [[ -d "$b/fuzz" && -n "${LOCKSTEP_FUZZ_DEADLINE:-}" ]]; then
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$b/lib LOCKSTEP_FUZZ_JOBS=${LOCKSTEP_FUZZ_JOBS:-$(nproc)} \
    bash "$b/fuzz/fuzz_campaign.sh" "$b/fuzz" "$b/fuzz/corpus" "$b/fuzzout" \
    ${LOCKSTEP_FUZZ_TARGETS:-} >"$results/fuzz.log" 2>&1
  echo "fuzz campaign rc=$?"
  cat "$results/fuzz.log"
  mkdir -p "$results/fuzz_crashes" && cp "$b/fuzzout/crashes"/* "$results/fuzz_crashes/" 2>/dev/null
  for t in "$b/fuzzout/logs"/*.log; do tail -n 5 "$t" >"$results/fuzz_$(basename "$t")"; done
fi
