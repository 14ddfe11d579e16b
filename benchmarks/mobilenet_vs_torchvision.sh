#!/usr/bin/env bash
# MobileNetV2 training speed and peak memory, lockstep beside torchvision,
# one process each on the same threads, in one run:
#   lockstep: //core/model:model_benchmark's mobilenet_v2 mode (Model::TrainStep
#     and an SGD update; no data pipeline)
#   PyTorch:  benchmarks/torchvision_step.py, the same network and head
#     (torchvision's mobilenet_v2 features, global average pooling, dense
#     512 + ReLU, dense 10), with glibc malloc as it comes and tuned
#     (MALLOC_TUNED in bench_lib.sh); the faster of the two is the peer
# for each alpha x image size, training the whole network and with the base
# frozen (lockstep: trainable false, no backward below the head; PyTorch:
# requires_grad off, eval mode). Peak RSS from peak_rss.py.
#
#   bazel run //benchmarks:mobilenet_vs_torchvision [-- --threads 2
#       --steps 10 --batch 32 --repeat 1 --cases 0.35x96,1.0x96,0.35x224,1.0x224]
# --steps is for 96x96; larger images run steps x (96/size)^2 (at least 2).
set -euo pipefail

readonly PY=/usr/bin/python3  # Debian's interpreter: the one with torch

die() {
  echo "mobilenet_vs_torchvision: $*" >&2
  exit 1
}

threads=2
steps=10
batch=32
repeat=1
cases=0.35x96,1.0x96,0.35x224,1.0x224
while (($# > 0)); do
  case "$1" in
    --threads) threads=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --cases) cases=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
for v in "$threads" "$steps" "$batch" "$repeat"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--threads, --steps, --batch and --repeat take positive integers, got '$v'"
done

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
bench=$(runfile core/model/model_benchmark) ||
  die "core/model/model_benchmark not in the runfiles; run through bazel run"
peer=$(runfile benchmarks/torchvision_step.py) || die "torchvision_step.py not in the runfiles"
rss=$(runfile benchmarks/peak_rss.py) || die "peak_rss.py not in the runfiles"
"$PY" -c "import torch, torchvision" 2>/dev/null ||
  die "/usr/bin/python3 has no torch/torchvision (scripts/install_deps.sh installs them)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Before anything runs: a torch on a slow BLAS exits 3 (the comparison would
# be invalid; torch_common.require_fast_blas).
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1])
from torch_common import blas_in_use, require_fast_blas
require_fast_blas(*blas_in_use())' "$(dirname "$peer")" ||
  peer_failed $? "the PyTorch BLAS check"

# run_one OUT_RSS CMD...: samples/s of one run (the number before
# "samples/s"); its peak RSS (MiB) into OUT_RSS.
run_one() {
  local rss_file=$1 rc=0
  shift
  "$PY" "$rss" "$rss_file" "$@" 2>"$tmp/err" | tee "$tmp/out" >/dev/null ||
    rc=$?
  if ((rc != 0)); then
    cat "$tmp/err" >&2
    # torchvision_step.py exits 3 on a slow BLAS (torch_common.py).
    ((rc != SLOW_BLAS_EXIT)) || peer_failed "$rc" "$*"
    die "failed: $*"
  fi
  awk '{for (i = 2; i <= NF; ++i) if ($i == "samples/s") print $(i - 1)}' "$tmp/out" | tail -1
}

printf '%-10s %-8s %12s %12s %7s %10s %10s\n' case mode "lockstep/s" "torch/s" ratio "ls MiB" "torch MiB"
IFS=, read -ra list <<<"$cases"
for c in "${list[@]}"; do
  alpha=${c%x*}
  size=${c#*x}
  n=$(( steps * 96 * 96 / (size * size) ))
  ((n >= 2)) || n=2
  for mode in train frozen; do
    extra=()
    [[ $mode == frozen ]] && extra=(frozen)
    best_ls=0 best_pt=0 ls_mib=0 pt_mib=0
    for ((k = 0; k < repeat; ++k)); do
      s=$(run_one "$tmp/rss_ls" "$bench" "$threads" "$n" mobilenet_v2 "$alpha" "$size" "$batch" "${extra[@]}")
      best_ls=$(best "$best_ls" "$s")
      ls_mib=$(cat "$tmp/rss_ls")
      for malloc in plain tuned; do
        if [[ $malloc == tuned ]]; then
          s=$(GLIBC_TUNABLES=$MALLOC_TUNED run_one "$tmp/rss_pt" "$PY" "$peer" "$threads" "$n" "$alpha" "$size" "$batch" "${extra[@]}")
        else
          s=$(run_one "$tmp/rss_pt" "$PY" "$peer" "$threads" "$n" "$alpha" "$size" "$batch" "${extra[@]}")
        fi
        if "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$s" "$best_pt"; then
          best_pt=$s
          pt_mib=$(cat "$tmp/rss_pt")
        fi
      done
    done
    ratio=$("$PY" -c 'import sys; print("%.2fx" % (float(sys.argv[1]) / float(sys.argv[2])))' "$best_ls" "$best_pt")
    printf '%-10s %-8s %12s %12s %7s %10s %10s\n' "$alpha@$size" "$mode" "$best_ls" "$best_pt" "$ratio" "$ls_mib" "$pt_mib"
  done
done
echo "batch $batch, $threads threads (PyTorch: OMP_NUM_THREADS=$threads and OpenBLAS ${OPENBLAS_NUM_THREADS:-1} thread(s), set before torch loads); samples/s over the timed steps after 2 warm-up steps; best of $repeat run(s)"
