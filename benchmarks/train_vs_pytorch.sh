#!/usr/bin/env bash
# Side-by-side training speed on real MNIST: `lockstep train` against a
# PyTorch peer (benchmarks/pytorch_peer.py) with the same model, batch,
# thread count and optimizer. Prints one table row per (model, device, batch,
# threads).
#
#   bazel run //benchmarks:train_vs_pytorch [-- --steps-mlp N --steps-cnn N
#       --threads 1,2 --batch 64 --models mlp,cnn --repeat 1]
#
# GPU mode (issue 5): lockstep's GPU replicas exist only in a --config=cuda
# build, so the lockstep in this script's runfiles must be built with it:
#
#   LOCKSTEP_BENCH_PYTHON=/path/to/venv/bin/python \
#     bazel run --config=cuda //benchmarks:train_vs_pytorch -- \
#       --device cuda:0 --batch 64,512 --models mlp,cnn
#
# runs `lockstep train JOB --devices cuda:0` and the PyTorch peer with the
# model and each batch on the same GPU. Debian's python3-torch has no CUDA:
# LOCKSTEP_BENCH_PYTHON names an interpreter whose torch has. Before
# measuring anything, the script checks that PyTorch sees the GPU and that
# lockstep can make a replica on it (a one-step job), and stops naming what
# is missing.
set -euo pipefail

# Debian's interpreter (the one with python3-torch) unless overridden.
readonly PY=${LOCKSTEP_BENCH_PYTHON:-/usr/bin/python3}

usage() {
  cat <<'EOF'
usage: bazel run //benchmarks:train_vs_pytorch -- [options]
  --steps-mlp N   timed training steps for the MLP (default 1500)
  --steps-cnn N   timed training steps for the CNN (default 400)
  --threads LIST  comma-separated thread counts (default 1,2 on cpu; with a
                  cuda device, the core count: lockstep's host-side work and
                  torch.set_num_threads)
  --batch LIST    comma-separated batch sizes (default 64)
  --models LIST   comma-separated subset of mlp,cnn (default mlp,cnn)
  --device LIST   comma-separated cpu or cuda:N (default cpu). cuda:N needs a
                  lockstep built with --config=cuda (bazel run --config=cuda
                  //benchmarks:train_vs_pytorch -- --device cuda:0) and a torch
                  with CUDA (LOCKSTEP_BENCH_PYTHON); TF32 is off on both sides
  --repeat K      run each side K times, report the best (default 1; use 3
                  on a shared machine, where bursts of other work lower runs)
  --precision LIST  comma-separated fp32,bf16,fp16 (default fp32): the
                  job's "precision" against PyTorch under torch.autocast on
                  the same device in that dtype (fp16: GPU only, with
                  GradScaler on PyTorch's side, loss scaling on lockstep's)
Environment: LOCKSTEP_MNIST_DIR  folder with the four MNIST .gz files
  (default: <workspace>/../shared/datasets/mnist)
  LOCKSTEP_BENCH_PYTHON  interpreter for the PyTorch peer (default
  /usr/bin/python3, Debian's CPU-only python3-torch)
EOF
}

die() {
  echo "train_vs_pytorch: $*" >&2
  exit 1
}

steps_mlp=1500
steps_cnn=400
threads_list=
batch_list=64
models=mlp,cnn
device_list=cpu
repeat=1
precision_list=fp32
while (($# > 0)); do
  case "$1" in
    --steps-mlp | --steps-cnn | --threads | --batch | --models | --device | --repeat | --precision)
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
    --batch) batch_list=$val ;;
    --models) models=$val ;;
    --device) device_list=$val ;;
    --repeat) repeat=$val ;;
    --precision) precision_list=$val ;;
    *) usage >&2; die "unknown option: $opt" ;;
  esac
done

positive_int() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
for v in "$steps_mlp" "$steps_cnn" "$repeat"; do
  positive_int "$v" || die "steps and repeat must be positive integers, got '$v'"
done
IFS=, read -r -a devices_arr <<<"$device_list"
((${#devices_arr[@]} > 0)) || die "--device: empty list"
gpus=()  # the cuda:N entries
for d in "${devices_arr[@]}"; do
  if [[ "$d" =~ ^cuda:[0-9]+$ ]]; then
    gpus+=("$d")
  elif [[ "$d" != cpu ]]; then
    die "--device: '$d' is not cpu or cuda:N"
  fi
done
if [[ -z "$threads_list" ]]; then
  threads_list=1,2
  ((${#gpus[@]} == 0)) || threads_list=$(nproc)
fi
IFS=, read -r -a threads_arr <<<"$threads_list"
IFS=, read -r -a batch_arr <<<"$batch_list"
IFS=, read -r -a models_arr <<<"$models"
IFS=, read -r -a precisions_arr <<<"$precision_list"
for prec in "${precisions_arr[@]}"; do
  [[ "$prec" == fp32 || "$prec" == bf16 || "$prec" == fp16 ]] ||
    die "--precision: '$prec' is not fp32, bf16 or fp16"
  [[ "$prec" != fp16 || ${#gpus[@]} == ${#devices_arr[@]} ]] ||
    die "--precision fp16 runs on GPUs only (every --device a cuda:N)"
done
((${#threads_arr[@]} > 0)) || die "--threads: empty list"
((${#batch_arr[@]} > 0)) || die "--batch: empty list"
((${#models_arr[@]} > 0)) || die "--models: empty list"
for t in "${threads_arr[@]}"; do
  positive_int "$t" || die "--threads: '$t' is not a positive integer"
done
for b in "${batch_arr[@]}"; do
  positive_int "$b" || die "--batch: '$b' is not a positive integer"
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
    "'scripts/install_deps.sh --bench' (Debian's python3-torch + OpenBLAS)," \
    "or for --device cuda:N point LOCKSTEP_BENCH_PYTHON at a torch with CUDA."
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

json_get() {  # json_get FILE|- KEY: one top-level field of a JSON object
  "$PY" -c 'import json, sys
f = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])
print(json.load(f)[sys.argv[2]])' "$1" "$2"
}

# --- GPU preflight: both sides must reach every cuda:N before anything runs. -

write_job() {  # write_job FILE NAME MODEL STEPS BATCH [PRECISION]
  "$PY" - "$1" "$2" "$3" "$4" "$5" "${6:-fp32}" "$mnist" <<'EOF'
import json, os, sys
path, name, model, steps, batch, precision, mnist = sys.argv[1:]
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
if precision != "fp32":
    job["precision"] = precision
with open(path, "w") as f:
    json.dump(job, f, indent=1)
EOF
}

declare -A gpu_desc=()  # cuda:N -> "NAME (driver ..., torch CUDA ..., cuDNN ...)"
if ((${#gpus[@]} > 0)); then
  problems=()
  for g in "${gpus[@]}"; do
    # PyTorch: torch.cuda.is_available() and the ordinal (the peer says why not).
    rc=0
    ginfo=$("$PY" "$peer" --info --device "$g" 2>"$tmp/gpuinfo.err") || rc=$?
    if ((rc != 0)); then
      problems+=("$(tail -n 1 "$tmp/gpuinfo.err")")
      ginfo=
    fi
    # lockstep: a one-step CNN job on the device (conv, pool and dense
    # kernels). A build without --config=cuda says "built without GPU
    # support"; a GPU build on a host without a usable GPU names the reason.
    write_job "$tmp/preflight.json" preflight cnn 1 "${batch_arr[0]}"
    if ! "$lockstep" train "$tmp/preflight.json" --storage "$tmp/preflight" \
      --devices "$g" --threads "${threads_arr[0]}" >"$tmp/preflight.log" 2>&1; then
      why=$(grep -m 1 -i 'error' "$tmp/preflight.log" || tail -n 1 "$tmp/preflight.log")
      if grep -q 'built without GPU support' "$tmp/preflight.log"; then
        why+=" -- rebuild through: bazel run --config=cuda //benchmarks:train_vs_pytorch -- --device $g ..."
      fi
      problems+=("$g: lockstep cannot train on it ($lockstep): $why")
    fi
    rm -rf "$tmp/preflight"
    if [[ -n "$ginfo" ]]; then
      smi=
      if command -v nvidia-smi >/dev/null; then
        smi=$(nvidia-smi -i "${g#cuda:}" --format=csv,noheader \
          --query-gpu=name,driver_version,memory.total 2>/dev/null || true)
      fi
      gpu_desc[$g]="${smi:-$(json_get - gpu <<<"$ginfo")}; torch CUDA $(json_get - torch_cuda <<<"$ginfo"), cuDNN $(json_get - cudnn <<<"$ginfo"); torch TF32 matmul $(json_get - matmul_tf32 <<<"$ginfo"), cuDNN TF32 $(json_get - cudnn_tf32 <<<"$ginfo")"
    fi
  done
  if ((${#problems[@]} > 0)); then
    printf 'train_vs_pytorch: %s\n' "${problems[@]}" >&2
    die "GPU mode cannot run here; nothing was measured."
  fi
fi

# --- Header. -----------------------------------------------------------------

# With a CPU row, a torch on a slow BLAS makes the peer exit 3 (the CPU
# comparison would be invalid): stop here, before anything runs. GPU rows
# alone do not need a fast host BLAS.
info_device=cpu
((${#gpus[@]} < ${#devices_arr[@]})) || info_device=${gpus[0]}
info=$("$PY" "$peer" --info --device "$info_device") ||
  peer_failed $? "$PY pytorch_peer.py --info --device $info_device"
torch_version=$(json_get - torch <<<"$info")
blas=$(json_get - blas <<<"$info")
blas_path=$(json_get - blas_path <<<"$info")
openblas_threads=$(json_get - openblas_threads <<<"$info")
wait_policy=$(json_get - omp_wait_policy <<<"$info")
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
command="bazel run"
((${#gpus[@]} == 0)) || command+=" --config=cuda"
command+=" //benchmarks:train_vs_pytorch -- --steps-mlp $steps_mlp"
command+=" --steps-cnn $steps_cnn --threads $threads_list --batch $batch_list"
[[ "$models" == mlp,cnn ]] || command+=" --models $models"
[[ "$device_list" == cpu ]] || command+=" --device $device_list"
((repeat == 1)) || command+=" --repeat $repeat"

echo "lockstep vs PyTorch, training-loop samples/s on real MNIST (higher is better)"
echo "cpu: ${cpu:-unknown}, $cores cores; load average before start: $load"
echo "torch $torch_version, BLAS: $blas ($blas_path); $("$lockstep" version 2>/dev/null || echo 'lockstep ?')"
for g in "${gpus[@]}"; do
  echo "$g: ${gpu_desc[$g]}"
done
echo "command: $command"
echo "per row: lockstep train JOB --threads T --devices D (D: cpu or cuda:N; steps as above, Adam 1e-3, no checkpoints);"
echo "         $PY pytorch_peer.py --model M --steps N --threads T --batch B --device D (20 warm-up steps untimed)"
echo "         (torch.set_num_threads(T); OpenBLAS threads: $openblas_threads; OMP_WAIT_POLICY: ${wait_policy:-default})"
if ((${#gpus[@]} > 0)); then
  echo "         on cuda:N: FP32, TF32 off on both sides; PyTorch eager, model and each batch on the GPU,"
  echo "         batches assembled 4 ahead on a thread and pinned (DataLoader(pin_memory=True)), copied with"
  echo "         .to(non_blocking=True) in the timed step; torch.cuda.synchronize() around the timed steps"
  echo "         lockstep: one replica per GPU on the device path (NCCL, Adam on the GPU), batches staged pinned one step ahead"
fi
((repeat == 1)) || echo "each figure: the best of $repeat runs"
busy=$("$PY" -c 'import os; print(int(os.getloadavg()[0] >= 0.5 * os.cpu_count()))')
if ((busy)); then
  echo "WARNING: the machine is busy (load $load on $cores cores): numbers will be low and noisy."
fi
echo

# --- Runs. -------------------------------------------------------------------

best() { "$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' "$@"; }

rows=$tmp/rows.tsv
: >"$rows"
for model in "${models_arr[@]}"; do
  steps=$steps_mlp
  [[ "$model" == cnn ]] && steps=$steps_cnn
  for dev in "${devices_arr[@]}"; do
  for batch in "${batch_arr[@]}"; do
  for t in "${threads_arr[@]}"; do
  for prec in "${precisions_arr[@]}"; do
    # "--devices cpu" explicitly: a --config=cuda lockstep on a GPU host
    # would otherwise train on every visible GPU.
    name=bench_${model}_${dev/:/}_b${batch}_t${t}_${prec}
    what="$model, $dev, batch $batch, $t thread(s), $prec"
    job=$tmp/$name.json
    log=$tmp/$name.log
    write_job "$job" "$name" "$model" "$steps" "$batch" "$prec"
    autocast=()
    [[ "$prec" == fp32 ]] || autocast=(--autocast "$prec")

    ours=0 theirs=0
    for ((r = 1; r <= repeat; r++)); do
      echo "running $what, run $r/$repeat: lockstep ..." >&2
      storage=$tmp/storage_${name}_$r
      if ! "$lockstep" train "$job" --storage "$storage" --threads "$t" \
        --devices "$dev" >"$log" 2>&1; then
        echo "--- last lines of lockstep's output ($name) ---" >&2
        tail -n 30 "$log" >&2
        die "lockstep train failed for $what"
      fi
      result=$storage/jobs/$name/result.json
      [[ -f "$result" ]] || die "lockstep finished but wrote no $result"
      ours=$(best "$ours" "$(json_get "$result" samples_per_sec)")
      rm -rf "$storage"

      echo "running $what, run $r/$repeat: pytorch ..." >&2
      rc=0
      peer_out=$("$PY" "$peer" --model "$model" --mnist-dir "$mnist" \
        --steps "$steps" --threads "$t" --batch "$batch" --device "$dev" \
        "${autocast[@]}" 2>"$tmp/$name.peer.err") || rc=$?
      if ((rc != 0)); then
        cat "$tmp/$name.peer.err" >&2
        peer_failed "$rc" "$what"
      fi
      theirs=$(best "$theirs" "$(json_get - samples_per_sec <<<"$peer_out")")
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$dev" "$t" "$batch" "$ours" \
      "$theirs" "$prec" >>"$rows"
  done
  done
  done
  done
done

# --- Table. ------------------------------------------------------------------

"$PY" - "$rows" <<'EOF'
import sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
# CPU only: the table as before; with a GPU, a device column too.
gpu = any(dev != "cpu" for _, dev, *_ in rows)
# With bf16 rows, a precision column (PyTorch's bf16 is torch.autocast).
mixed = any(r[6] != "fp32" for r in rows)
if gpu:
    fmt = "{:<6} {:<7} {:<6} {:<8} {:<10} {:<19} {:<18} {}"
    print(fmt.format("model", "device", "batch", "threads", "precision",
                     "lockstep samples/s", "pytorch samples/s", "ratio"))
elif mixed:
    fmt = "{:<6} {:<8} {:<6} {:<10} {:<19} {:<18} {}"
    print(fmt.format("model", "threads", "batch", "precision",
                     "lockstep samples/s", "pytorch samples/s", "ratio"))
else:
    fmt = "{:<6} {:<8} {:<6} {:<19} {:<18} {}"
    print(fmt.format("model", "threads", "batch", "lockstep samples/s",
                     "pytorch samples/s", "ratio"))
for model, dev, t, batch, ours, theirs, prec in rows:
    ours, theirs = float(ours), float(theirs)
    ratio = f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"
    cells = [f"{ours:,.0f}", f"{theirs:,.0f}", ratio]
    if gpu:
        print(fmt.format(model, dev, batch, t, prec, *cells))
    elif mixed:
        print(fmt.format(model, t, batch, prec, *cells))
    else:
        print(fmt.format(model, t, batch, *cells))
print("ratio = lockstep / pytorch (> 1: lockstep is faster)")
if gpu:
    short = [f"{m} {d} batch {b} ({float(o) / float(p):.2f}x)"
             for m, d, t, b, o, p, _ in rows
             if d != "cpu" and float(p) > 0 and float(o) < float(p)]
    print("issue 5 goal, lockstep >= 1.0x PyTorch eager on the GPU: " +
          ("met on every GPU row" if not short else
           "missed by " + ", ".join(short)))
EOF
