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
# Each test binary on its own (LOCKSTEP_GPU_TEST_JOBS at a time, default
# 4: they share the GPU), its log in the list's order.
run_test() {
  local t=$1 d log rc
  d=$(mktemp -d)
  log=$b/logs/$(tr / _ <<<"$t")
  out=$(cd "$d" && TEST_TMPDIR=$d TEST_SRCDIR=$rf TEST_WORKSPACE=lockstep \
    timeout 300 env LD_LIBRARY_PATH="$libs" "$b/bin/$t" 2>&1)
  rc=$?
  {
    echo "== $t rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' <<<"$out" | tr '\n' ' ')"
    ((rc == 0)) || grep -E -B3 -A12 'Failure|FAILED|rror' <<<"$out" | head -n 80
  } >"$log"
  # A failed test's own output and the logs and JSON its processes left.
  if ((rc != 0)); then
    echo "$out" >"$d/test_output.txt"
    (cd "$d" && find . \( -name '*.log' -o -name '*.txt' -o -name '*.json' \) \
      -size -4M -print0 | tar -czf "$results/failed_$(tr / _ <<<"$t").tgz" --null -T -)
  fi
}
mkdir -p "$b/logs"
start=$SECONDS
# LOCKSTEP_GPU_TESTS: an extended regex; only the test binaries it matches.
while read -r t; do
  [[ "$t" == *_test ]] || continue
  grep -q -E "${LOCKSTEP_GPU_TESTS:-.}" <<<"$t" || continue
  run_test "$t" &
  while (($(jobs -rp | wc -l) >= ${LOCKSTEP_GPU_TEST_JOBS:-4})); do wait -n; done
done <"$b/tests.txt"
wait
while read -r t; do
  [[ "$t" == *_test && -f "$b/logs/$(tr / _ <<<"$t")" ]] && cat "$b/logs/$(tr / _ <<<"$t")"
done <"$b/tests.txt" >"$results/tests.log" 2>&1
echo "tests took $((SECONDS - start)) s"
echo "test binaries passing: $(grep -c 'rc=0' "$results/tests.log") of $(grep -c '^==' "$results/tests.log")"
grep '^==' "$results/tests.log" | grep -v 'rc=0'
# The GPU checklist's benchmarks: the CNN on MNIST (train_vs_pytorch) and
# BERT on Brown (bert_vs_pytorch), beside the machine's PyTorch eager, at
# the batches of LOCKSTEP_GPU_CNN_BATCHES and LOCKSTEP_GPU_BERT_BATCHES
# (LOCKSTEP_GPU_BERT_TF32=1: BERT with TF32 on both sides), each in the
# precisions of LOCKSTEP_GPU_CNN_PRECISION and LOCKSTEP_GPU_BERT_MIXED
# (default "--bf16 --fp16": against torch.autocast; " " for fp32 only).
py=$(command -v python3)
if [[ -d "$here/mnist" ]]; then
  RUNFILES_DIR=$rf LOCKSTEP_BENCH_PYTHON=$py LOCKSTEP_MNIST_DIR=$here/mnist \
    timeout 240 bash "$root/benchmarks/train_vs_pytorch.sh" --device cuda:0 --models cnn \
    --batch "${LOCKSTEP_GPU_CNN_BATCHES:-64,256,512}" --steps-cnn 1000 \
    --precision "${LOCKSTEP_GPU_CNN_PRECISION:-fp32,bf16,fp16}" \
    >"$results/train_bench.log" 2>&1
  echo "train_vs_pytorch rc=$?"
  tail -n 6 "$results/train_bench.log"
else
  echo "no MNIST in $here: train_vs_pytorch skipped"
fi
if [[ -d "$here/brown" ]]; then
  RUNFILES_DIR=$rf LOCKSTEP_BENCH_PYTHON=$py LOCKSTEP_BROWN_DIR=$here/brown \
    timeout 420 bash "$root/benchmarks/bert_vs_pytorch.sh" --device cuda:0 \
    --batch "${LOCKSTEP_GPU_BERT_BATCHES:-32,256}" ${LOCKSTEP_GPU_BERT_TF32:+--tf32} \
    ${LOCKSTEP_GPU_BERT_MIXED:---bf16 --fp16} \
    --steps 300 --epochs 1 --threads "$(nproc)" >"$results/bert_bench.log" 2>&1
  echo "bert_vs_pytorch rc=$?"
  tail -n 24 "$results/bert_bench.log"
else
  echo "no Brown corpus in $here: benchmark skipped"
fi
# LOCKSTEP_GPU_PROFILE=1: each kernel's GPU time (ncu) over about two steps
# of BERT at batch 256 (after 20 steps) in float32 and in each precision of
# LOCKSTEP_GPU_PROFILE_MIXED (default "bf16"; "" for none), and of the CNN
# at batch 512, summed by kernel name; each table also in
# RESULTS/profile_NAME.txt.
profile() {  # profile NAME JOB SKIP COUNT
  local name=$1 job=$2 skip=$3 count=$4
  timeout 150 ncu --metrics gpu__time_duration.sum --csv --launch-skip "$skip" \
    --launch-count "$count" "$root/client/lockstep" train "$job" --devices cuda:0 \
    --storage "$b/prof_$name" --threads "$(nproc)" >"$b/ncu_$name.csv" 2>"$b/ncu_$name.err"
  echo "ncu $name rc=$?"
  tail -n 3 "$b/ncu_$name.err"
  "$py" - "$b/ncu_$name.csv" <<'PYEOF' | tee "$results/profile_$name.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
at = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
head = rows[at]; rows = rows[at + 1:]
k, v = head.index("Kernel Name"), head.index("Metric Value")
u = head.index("Metric Unit")
tot = collections.defaultdict(float); n = collections.Counter()
for r in rows:
    try: t = float(r[v].replace(",", ""))
    except ValueError: continue
    t *= {"nsecond": 1e-3, "usecond": 1, "msecond": 1e3}.get(r[u], 1)
    tot[r[k][:70]] += t; n[r[k][:70]] += 1
all_us = sum(tot.values())
print(f"{len(rows)} kernels, {all_us:.0f} us of GPU time")
for name, t in sorted(tot.items(), key=lambda x: -x[1])[:18]:
    print(f"{t:10.0f} us {100*t/all_us:5.1f}% {n[name]:5d}x  {name}")
PYEOF
}
if [[ "${LOCKSTEP_GPU_PROFILE:-0}" == 1 && -d "$here/brown" ]] && command -v ncu >/dev/null; then
  for precision in fp32 ${LOCKSTEP_GPU_PROFILE_MIXED-bf16}; do
  "$py" - "$root/examples/bert_mlm_brown.json" "$here/brown" "$b/bert_$precision.json" "$precision" <<'PYEOF'
import json, os, sys
job = json.load(open(sys.argv[1]))
job["name"] = "bert_prof_" + sys.argv[4]
job["precision"] = sys.argv[4]
job["data"]["train_path"] = os.path.join(sys.argv[2], "train.txt")
job["data"]["test_path"] = os.path.join(sys.argv[2], "valid.txt")
job["batch_size_per_replica"] = 256
job.pop("epochs"); job["steps"] = 40
job["checkpoint"] = {"every_steps": 0, "keep": 1}
job["cluster"]["workers"] = 1
json.dump(job, open(sys.argv[3], "w"))
PYEOF
  profile "bert_$precision" "$b/bert_$precision.json" 6000 800
  done
  if [[ -d "$here/mnist" ]]; then
    "$py" - "$root/examples/mnist_cnn.json" "$here/mnist" "$b/cnn_prof.json" <<'PYEOF'
import json, os, sys
job = json.load(open(sys.argv[1]))
job["name"] = "cnn_prof"
for k, v in list(job["data"].items()):
    if isinstance(v, str) and v.endswith(".gz"):
        job["data"][k] = os.path.join(sys.argv[2], os.path.basename(v))
job["batch_size_per_replica"] = 512
job.pop("epochs", None); job["steps"] = 60
job["checkpoint"] = {"every_steps": 0, "keep": 1}
job["cluster"]["workers"] = 1
json.dump(job, open(sys.argv[3], "w"))
PYEOF
    profile cnn "$b/cnn_prof.json" 1500 300
  fi
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
