#!/usr/bin/env bash
# MobileNetV2 data-parallel training over an image folder: lockstep's
# cluster (coordinator + W workers, 1 thread each, the gRPC ring) beside
# PyTorch DDP on Gloo (W ranks, 1 thread each), the same model (torchvision's
# mobilenet_v2 features at --alpha, the seed's head: global average
# pooling, dense 512 + ReLU, dense 2), batch per replica, Adam, ImageNet
# normalization, and the same PNG folder (benchmarks/make_image_folder.py:
# two classes of stripes). Both decode the PNGs as they train, off the
# training thread, on the same number of threads per worker/rank, D =
# clamp(cores / 4, 1, 8): lockstep on its prefetch thread and helpers
# (libpng; core/data/batch_prefetcher.cc's FillThreads), PyTorch in D
# DataLoader worker processes (PIL; --decode-workers D, prefetch_factor 4,
# persistent). W = 1 and 2, so the scaling shows too. --sync adds lockstep's
# 2 workers with sync batch norm (statistics over the global batch, summed
# inside the pass); PyTorch 1.13's SyncBatchNorm has no CPU path, so its
# row stays DDP's per-replica batch norm.
#
#   bazel run //benchmarks:mobilenet_cluster_vs_ddp [-- --steps 20
#       --warmup 3 --alpha 0.35 --size 96 --batch 32 --per-class 640
#       --repeat 1 --timeout 900 --sync]
# Timing, the same rule on both sides: --warmup + --steps steps, and
# samples/s = --steps x global batch over the wall time from the end of the
# last warm-up step to the end of the last step, on every rank, the maximum
# over ranks (lockstep: `lockstep worker --step-times`, bench_lib.sh's
# step_times_rate; PyTorch: mobilenet_ddp_peer.py's own clock).
set -euo pipefail

readonly PY=/usr/bin/python3

die() {
  echo "mobilenet_cluster_vs_ddp: $*" >&2
  exit 1
}

steps=20 warmup=3 alpha=0.35 size=96 batch=32 per_class=640 repeat=1 sync=0
run_timeout=900
while (($# > 0)); do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --alpha) alpha=${2:?}; shift 2 ;;
    --size) size=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --per-class) per_class=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --timeout) run_timeout=${2:?}; shift 2 ;;
    --sync) sync=1; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
for v in "$steps" "$warmup" "$batch" "$per_class" "$repeat" "$size" "$run_timeout"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    die "--steps, --warmup, --batch, --per-class, --repeat, --size and" \
      "--timeout take positive integers, got '$v' (--warmup >= 1: the clock" \
      "starts at the end of the last warm-up step)"
done

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) || die "client/lockstep not in the runfiles"
peer=$(runfile benchmarks/mobilenet_ddp_peer.py) || die "mobilenet_ddp_peer.py not in the runfiles"
maker=$(runfile benchmarks/make_image_folder.py) || die "make_image_folder.py not in the runfiles"
require_torch_gloo
"$PY" -c "import torchvision" 2>/dev/null ||
  die "/usr/bin/python3 has no torchvision (scripts/install_deps.sh installs it)"
pids=()
work_dir lockstep-mobilenet-cluster
# Exits 3 (a slow BLAS: the comparison would be invalid) before anything runs.
info=$("$PY" "$peer" --info) ||
  peer_failed $? "$PY mobilenet_ddp_peer.py --info"
decode=$(decode_threads)

folder=$tmp/images
echo "writing $((2 * per_class)) PNGs of ${size}x${size} to $folder ..." >&2
"$PY" "$maker" "$folder" --per-class "$per_class" --size "$size"

write_job() {  # write_job FILE NAME WORKERS SYNC(0|1)
  "$PY" - "$@" "$folder" "$alpha" "$size" "$batch" "$((steps + warmup))" <<'PYEOF'
import json, sys
path, name, workers, sync, folder, alpha, size, batch, steps = sys.argv[1:]
job = {
    "name": name, "seed": 1,
    "model": {"input_shape": [int(size), int(size), 3], "param_names": "torch",
              "layers": [
                  {"type": "mobilenet_v2", "alpha": float(alpha),
                   "include_top": False, "sync": sync == "1"},
                  {"type": "global_average_pooling2d", "name": "pool"},
                  {"type": "dense", "name": "fc", "units": 512,
                   "activation": "relu"},
                  {"type": "dense", "name": "out", "units": 2}]},
    "loss": "sparse_categorical_crossentropy",
    "optimizer": {"type": "adam", "learning_rate": 0.001},
    "data": {"format": "image_folder", "train_path": folder,
             "validation_split": 0.05, "image_size": int(size),
             "preprocessing": "imagenet"},
    "batch_size_per_replica": int(batch), "steps": int(steps),
    "checkpoint": {"every_steps": 0, "keep": 1},
    "cluster": {"workers": int(workers), "replicas_per_worker": 1},
}
with open(path, "w") as f:
    json.dump(job, f, indent=1)
PYEOF
}

run_cluster() {  # run_cluster WORKERS RUN SYNC(0|1): sets sps, note
  local w=$1 r=$2 name="mnv2_w$1_r$2_s$3"
  local dir=$tmp/$name
  mkdir -p "$dir"
  write_job "$dir/job.json" "$name" "$w" "$3"
  start_cluster "$dir" "$w" 1
  start_bg "$dir/submit.log" "$lockstep" submit "$dir/job.json" \
    --coordinator "$cluster_addr" --wait
  if ! wait_bg "${pids[-1]}"; then
    show_logs "$dir/submit.log" "$dir/coordinator.log" "$dir"/worker*.log
    die "lockstep submit failed (or ran past ${run_timeout}s) for $w worker(s)"
  fi
  stop_all  # the workers have appended their step times as the job ended
  sps=$(step_times_rate "$dir" "$warmup" "$((batch * w))") || exit 1
  note=$(step_times_note "$dir" "$warmup" "$((batch * w))") || exit 1
  rm -rf "$dir/storage"
}

run_ddp() {  # run_ddp WORLD RUN default|tuned: sets sps, note
  local w=$1 r=$2 malloc=$3 dir=$tmp/ddp_$3_w$1_r$2 rank
  mkdir -p "$dir"
  local rank_pids=()
  for ((rank = 0; rank < w; rank++)); do
    local envs=(GLOO_SOCKET_IFNAME="${GLOO_SOCKET_IFNAME:-lo}")
    [[ "$malloc" == default ]] || envs+=(GLIBC_TUNABLES="$MALLOC_TUNED")
    start_bg "$dir/rank$rank.log" env "${envs[@]}" "$PY" "$peer" \
      --folder "$folder" --rank "$rank" --world-size "$w" \
      --rendezvous-file "$dir/rendezvous" --steps "$steps" \
      --warmup "$warmup" --batch "$batch" --alpha "$alpha" --size "$size" \
      --threads 1 --decode-workers "$decode"
    rank_pids+=("${pids[-1]}")
  done
  wait_ranks "$dir" "world size $w" "${rank_pids[@]}"
  local out
  out=$(grep '^{' "$dir/rank0.log" | tail -n 1 || true)
  [[ -n "$out" ]] || { show_logs "$dir/rank0.log"; die "rank 0 printed no result"; }
  sps=$(json_get - samples_per_sec <<<"$out")
  note="window $("$PY" -c 'import sys; print(f"{float(sys.argv[1]):.2f}")' \
    "$(json_get - seconds <<<"$out")") s on the slowest rank"
}

echo "MobileNetV2 data-parallel on a PNG folder: lockstep cluster vs PyTorch DDP (Gloo), 127.0.0.1"
echo "cpu: $(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1), $(nproc) cores; load average before start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $(json_get - torch <<<"$info"), torchvision $(json_get - torchvision <<<"$info"), BLAS: $(json_get - blas <<<"$info") ($(json_get - blas_path <<<"$info")); $("$lockstep" version 2>/dev/null || echo 'lockstep ?')"
echo "1 compute thread per worker/rank; images decoded off the training thread on $decode thread(s) per worker/rank on both sides:"
echo "  lockstep: its prefetch thread and helpers, clamp(cores / 4, 1, 8) = $decode (core/data/batch_prefetcher.cc)"
echo "  PyTorch:  DataLoader(num_workers=$decode, prefetch_factor=4, persistent_workers=True)"
echo "timing, both sides: $warmup warm-up steps, then samples/s over the wall time from the end of step $warmup to the end of"
echo "  step $((warmup + steps)), on every rank, the maximum over ranks"
echo "  (lockstep: lockstep worker --step-times; its window holds whatever it does between steps, e.g. an epoch end's evaluation)"
echo

declare -A got
for s in lockstep1 lockstep2 torch1 torch2 sync2; do got[$s]=0; done
for ((r = 1; r <= repeat; r++)); do
  for w in 1 2; do
    echo -n "run $r/$repeat: lockstep, $w worker(s) ... " >&2
    run_cluster "$w" "$r" 0
    echo "$(commas "$sps") samples/s ($note)" >&2
    got[lockstep$w]=$(best "${got[lockstep$w]}" "$sps")
    if ((sync && w == 2)); then
      echo -n "run $r/$repeat: lockstep, $w workers, sync batch norm ... " >&2
      run_cluster "$w" "$r" 1
      echo "$(commas "$sps") samples/s ($note)" >&2
      got[sync2]=$(best "${got[sync2]}" "$sps")
    fi
    for malloc in default tuned; do
      echo -n "run $r/$repeat: PyTorch DDP, $w rank(s), malloc $malloc ... " >&2
      run_ddp "$w" "$r" "$malloc"
      echo "$(commas "$sps") samples/s ($note)" >&2
      got[torch$w]=$(best "${got[torch$w]}" "$sps")
    done
  done
done

"$PY" - "${got[lockstep1]}" "${got[lockstep2]}" "${got[torch1]}" "${got[torch2]}" \
  "${got[sync2]}" "$alpha" "$size" "$batch" "$decode" "$warmup" "$steps" <<'PYEOF'
import sys
l1, l2, t1, t2, s2 = map(float, sys.argv[1:6])
alpha, size, batch, decode, warmup, steps = sys.argv[6:]
print(f"MobileNetV2 alpha {alpha} at {size}x{size}, batch {batch} per replica,"
      " 1 compute thread per worker/rank, PNG folder decoded while training")
print(f"both sides decode on {decode} thread(s) per worker/rank, off the "
      f"training thread; samples/s over steps {int(warmup) + 1}.."
      f"{int(warmup) + int(steps)}, wall time, the slowest rank's")
print(f"{'':22}{'1 worker/rank':>15}{'2 workers/ranks':>17}{'scaling':>9}")
print(f"{'lockstep samples/s':22}{l1:15,.1f}{l2:17,.1f}{l2 / l1:8.2f}x")
print(f"{'PyTorch samples/s':22}{t1:15,.1f}{t2:17,.1f}{t2 / t1:8.2f}x")
print(f"{'lockstep / PyTorch':22}{l1 / t1:14.2f}x{l2 / t2:16.2f}x")
if s2 > 0:
    print(f"{'lockstep sync BN':22}{'':>15}{s2:17,.1f}{s2 / l1:8.2f}x"
          f"   ({s2 / l2:.2f}x lockstep without sync, {s2 / t2:.2f}x PyTorch"
          " without sync)")
PYEOF
