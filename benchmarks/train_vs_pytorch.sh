#!/usr/bin/env bash
# Side-by-side training speed on real MNIST: `lockstep train` against a
# PyTorch peer (benchmarks/pytorch_peer.py) with the same model, batch,
# thread count and optimizer. Prints one table row per (model, threads).
#
#   bazel run //benchmarks:train_vs_pytorch [-- --steps-mlp N --steps-cnn N
#       --threads 1,2 --batch 64 --models mlp,cnn --repeat 1]
set -euo pipefail

readonly PY=/usr/bin/python3  # Debian's interpreter: the one with python3-torch

usage() {
  cat <<'EOF'
usage: bazel run //benchmarks:train_vs_pytorch -- [options]
  --steps-mlp N   timed training steps for the MLP (default 1500)
  --steps-cnn N   timed training steps for the CNN (default 400)
  --threads LIST  comma-separated thread counts (default 1,2)
  --batch N       batch size (default 64)
  --models LIST   comma-separated subset of mlp,cnn (default mlp,cnn)
  --repeat K      run each side K times, report the best (default 1; use 3
                  on a shared machine, where bursts of other work lower runs)
Environment: LOCKSTEP_MNIST_DIR  folder with the four MNIST .gz files
  (default: <workspace>/../shared/datasets/mnist)
EOF
}

die() {
  echo "train_vs_pytorch: $*" >&2
  exit 1
}

steps_mlp=1500
steps_cnn=400
threads_list=1,2
batch=64
models=mlp,cnn
repeat=1
while (($# > 0)); do
  case "$1" in
    --steps-mlp | --steps-cnn | --threads | --batch | --models | --repeat)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      opt=$1 val=$2
      shift 2
      ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  case "$opt" in
    --steps-mlp) steps_mlp=$val ;;
    --steps-cnn) steps_cnn=$val ;;
    --threads) threads_list=$val ;;
    --batch) batch=$val ;;
    --models) models=$val ;;
    --repeat) repeat=$val ;;
    *) usage >&2; die "unknown option: $opt" ;;
  esac
done

positive_int() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
for v in "$steps_mlp" "$steps_cnn" "$batch" "$repeat"; do
  positive_int "$v" || die "steps, batch and repeat must be positive integers, got '$v'"
done
IFS=, read -r -a threads_arr <<<"$threads_list"
IFS=, read -r -a models_arr <<<"$models"
((${#threads_arr[@]} > 0)) || die "--threads: empty list"
((${#models_arr[@]} > 0)) || die "--models: empty list"
for t in "${threads_arr[@]}"; do
  positive_int "$t" || die "--threads: '$t' is not a positive integer"
done
for m in "${models_arr[@]}"; do
  [[ "$m" == mlp || "$m" == cnn ]] || die "--models: '$m' is not mlp or cnn"
done

# --- Inputs: the two programs, MNIST, torch. ---------------------------------

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found in the runfiles; run through" \
    "'bazel run //benchmarks:train_vs_pytorch'"
peer=$(runfile benchmarks/pytorch_peer.py) ||
  die "benchmarks/pytorch_peer.py not found in the runfiles"

require_mnist train_vs_pytorch

if ! "$PY" -c 'import torch' 2>/dev/null; then
  die "$PY cannot import torch. Install the PyTorch peer with" \
    "'scripts/install_deps.sh --bench' (Debian's python3-torch + OpenBLAS)."
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

json_get() {  # json_get FILE|- KEY: one top-level field of a JSON object
  "$PY" -c 'import json, sys
f = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])
print(json.load(f)[sys.argv[2]])' "$1" "$2"
}

# --- Header. -----------------------------------------------------------------

info=$("$PY" "$peer" --info)  # warns loudly on stderr if not OpenBLAS
torch_version=$(json_get - torch <<<"$info")
blas=$(json_get - blas <<<"$info")
blas_path=$(json_get - blas_path <<<"$info")
openblas_threads=$(json_get - openblas_threads <<<"$info")
wait_policy=$(json_get - omp_wait_policy <<<"$info")
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
command="bazel run //benchmarks:train_vs_pytorch -- --steps-mlp $steps_mlp"
command+=" --steps-cnn $steps_cnn --threads $threads_list --batch $batch"
[[ "$models" == mlp,cnn ]] || command+=" --models $models"
((repeat == 1)) || command+=" --repeat $repeat"

echo "lockstep vs PyTorch, training-loop samples/s on real MNIST (higher is better)"
echo "cpu: ${cpu:-unknown}, $cores cores; load average before start: $load"
echo "torch $torch_version, BLAS: $blas ($blas_path); $("$lockstep" version 2>/dev/null || echo 'lockstep ?')"
echo "command: $command"
echo "per row: lockstep train JOB --threads T (steps as above, Adam 1e-3, no checkpoints);"
echo "         $PY pytorch_peer.py --model M --steps N --threads T --batch B (20 warm-up steps untimed)"
echo "         (torch.set_num_threads(T); OpenBLAS threads: $openblas_threads; OMP_WAIT_POLICY: ${wait_policy:-default})"
((repeat == 1)) || echo "each figure: the best of $repeat runs"
busy=$("$PY" -c 'import os; print(int(os.getloadavg()[0] >= 0.5 * os.cpu_count()))')
if ((busy)); then
  echo "WARNING: the machine is busy (load $load on $cores cores): numbers will be low and noisy."
fi
echo

# --- Runs. -------------------------------------------------------------------

write_job() {  # write_job FILE NAME MODEL STEPS
  "$PY" - "$@" "$batch" "$mnist" <<'EOF'
import json, os, sys
path, name, model, steps, batch, mnist = sys.argv[1:]
if model == "mlp":
    arch = {"input_shape": [784], "layers": [
        {"type": "dense", "units": 256, "activation": "relu"},
        {"type": "dense", "units": 256, "activation": "relu"},
        {"type": "dense", "units": 10}]}
else:
    arch = {"input_shape": [28, 28, 1], "layers": [
        {"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
        {"type": "max_pool2d", "pool_size": 2},
        {"type": "flatten"},
        {"type": "dense", "units": 64, "activation": "relu"},
        {"type": "dense", "units": 10}]}
job = {
    "name": name, "seed": 1, "model": arch,
    "loss": "sparse_categorical_crossentropy",
    "optimizer": {"type": "adam", "learning_rate": 0.001},
    "data": {
        "format": "mnist_idx",
        "train_images": os.path.join(mnist, "train-images-idx3-ubyte.gz"),
        "train_labels": os.path.join(mnist, "train-labels-idx1-ubyte.gz"),
        "test_images": os.path.join(mnist, "t10k-images-idx3-ubyte.gz"),
        "test_labels": os.path.join(mnist, "t10k-labels-idx1-ubyte.gz"),
        "scale": 255, "shuffle": True},
    "batch_size_per_replica": int(batch),
    "steps": int(steps),
    "checkpoint": {"every_steps": 0, "keep": 1},
    "summary": {"every_steps": 1000000},
    "cluster": {"workers": 1, "replicas_per_worker": 1, "collective": "ring"},
}
with open(path, "w") as f:
    json.dump(job, f, indent=1)
EOF
}

best() { "$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' "$@"; }

rows=$tmp/rows.tsv
: >"$rows"
for model in "${models_arr[@]}"; do
  steps=$steps_mlp
  [[ "$model" == cnn ]] && steps=$steps_cnn
  for t in "${threads_arr[@]}"; do
    name=bench_${model}_t${t}
    job=$tmp/$name.json
    log=$tmp/$name.log
    write_job "$job" "$name" "$model" "$steps"

    ours=0 theirs=0
    for ((r = 1; r <= repeat; r++)); do
      echo "running $model, $t thread(s), run $r/$repeat: lockstep ..." >&2
      storage=$tmp/storage_${name}_$r
      if ! "$lockstep" train "$job" --storage "$storage" --threads "$t" >"$log" 2>&1; then
        echo "--- last lines of lockstep's output ($name) ---" >&2
        tail -n 30 "$log" >&2
        die "lockstep train failed for $model, $t thread(s)"
      fi
      result=$storage/jobs/$name/result.json
      [[ -f "$result" ]] || die "lockstep finished but wrote no $result"
      ours=$(best "$ours" "$(json_get "$result" samples_per_sec)")
      rm -rf "$storage"

      echo "running $model, $t thread(s), run $r/$repeat: pytorch ..." >&2
      peer_out=$("$PY" "$peer" --model "$model" --mnist-dir "$mnist" \
        --steps "$steps" --threads "$t" --batch "$batch" 2>"$tmp/$name.peer.err") || {
        cat "$tmp/$name.peer.err" >&2
        die "pytorch peer failed for $model, $t thread(s)"
      }
      theirs=$(best "$theirs" "$(json_get - samples_per_sec <<<"$peer_out")")
    done
    printf '%s\t%s\t%s\t%s\t%s\n' "$model" "$t" "$batch" "$ours" "$theirs" >>"$rows"
  done
done

# --- Table. ------------------------------------------------------------------

"$PY" - "$rows" <<'EOF'
import sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
fmt = "{:<6} {:<8} {:<6} {:<19} {:<18} {}"
print(fmt.format("model", "threads", "batch", "lockstep samples/s",
                 "pytorch samples/s", "ratio"))
for model, t, batch, ours, theirs in rows:
    ours, theirs = float(ours), float(theirs)
    ratio = f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"
    print(fmt.format(model, t, batch, f"{ours:,.0f}", f"{theirs:,.0f}", ratio))
print("ratio = lockstep / pytorch (> 1: lockstep is faster)")
EOF
