#!/usr/bin/env bash
# A model brought as ONNX, training speed beside PyTorch training the module
# it was exported from, one process each on the same threads:
#   PyTorch:  benchmarks/onnx_peer.py: torchvision's resnet18 or
#     mobilenet_v2 (10 classes, random weights), exported to ONNX as
#     lockstep.export writes it, then timed (SGD, random NCHW inputs)
#   lockstep: //core/model:model_benchmark's onnx mode on that file
#     (Model::TrainStep of the imported graph and an SGD update; no data
#     pipeline), the same batch and image size
#   native:   for mobilenet_v2, the same network from lockstep's own layers
#     (the mobilenet_v2 preset with its classifier, 10 classes:
#     model_benchmark's mobilenet_v2 ... top), the same way
#
#   bazel run //benchmarks:onnx_vs_torch [-- --threads 2 --batch 32
#       --steps 5 --repeat 1 --cases resnet18x64,resnet18x128,mobilenet_v2x96]
# --steps is for 64x64; larger images run steps x (64/size)^2 (at least 2).
set -euo pipefail

readonly PY=/usr/bin/python3  # Debian's interpreter: the one with torch

die() {
  echo "onnx_vs_torch: $*" >&2
  exit 1
}

threads=2
steps=5
batch=32
repeat=1
cases=resnet18x64,resnet18x128,mobilenet_v2x96
while (($# > 0)); do
  case "$1" in
    --threads) threads=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --cases) cases=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
for v in "$threads" "$steps" "$batch" "$repeat"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--threads, --steps, --batch and --repeat take positive integers, got '$v'"
done

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
bench=$(runfile core/model/model_benchmark) ||
  die "core/model/model_benchmark not in the runfiles; run through bazel run"
peer=$(runfile benchmarks/onnx_peer.py) || die "onnx_peer.py not in the runfiles"
"$PY" -c "import torch, torchvision" 2>/dev/null ||
  die "/usr/bin/python3 has no torch/torchvision (scripts/install_deps.sh installs them)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# samples/s of one run's output (the number before "samples/s").
rate() { awk '{for (i = 2; i <= NF; ++i) if ($i == "samples/s") print $(i - 1)}' | tail -1; }

printf '%-16s %12s %12s %12s %9s %9s\n' case "imported/s" "native/s" "torch/s" \
  "/torch" "/native"
IFS=, read -ra list <<<"$cases"
for c in "${list[@]}"; do
  model=${c%x*}
  size=${c#*x}
  n=$(( steps * 64 * 64 / (size * size) ))
  ((n >= 2)) || n=2
  best_ls=0 best_pt=0 best_nat=0
  for ((k = 0; k < repeat; ++k)); do
    rc=0
    "$PY" "$peer" "$threads" "$n" "$model" "$size" "$batch" "$tmp/model.onnx" \
      >"$tmp/pt" 2>"$tmp/err" || rc=$?
    if ((rc != 0)); then
      cat "$tmp/err" >&2
      ((rc != SLOW_BLAS_EXIT)) || peer_failed "$rc" "onnx_peer.py"
      die "onnx_peer.py $model $size failed"
    fi
    best_pt=$(best "$best_pt" "$(rate <"$tmp/pt")")
    "$bench" "$threads" "$n" onnx "$tmp/model.onnx" "$batch" >"$tmp/ls" ||
      die "model_benchmark on the exported $model failed"
    best_ls=$(best "$best_ls" "$(rate <"$tmp/ls")")
    if [[ "$model" == mobilenet_v2 ]]; then
      "$bench" "$threads" "$n" mobilenet_v2 1.0 "$size" "$batch" top \
        >"$tmp/nat" || die "model_benchmark's native mobilenet_v2 failed"
      best_nat=$(best "$best_nat" "$(rate <"$tmp/nat")")
    fi
  done
  ratio() { "$PY" -c 'import sys; print("%.2fx" % (float(sys.argv[1]) / float(sys.argv[2])))' "$1" "$2"; }
  native="—" vs_native="—"
  if [[ "$best_nat" != 0 ]]; then
    native=$(printf '%.0f' "$best_nat")
    vs_native=$(ratio "$best_ls" "$best_nat")
  fi
  printf '%-16s %12.0f %12s %12.0f %9s %9s\n' "$model@$size" "$best_ls" \
    "$native" "$best_pt" "$(ratio "$best_ls" "$best_pt")" "$vs_native"
done
echo "batch $batch, $threads threads (PyTorch: OMP_NUM_THREADS=$threads and OpenBLAS ${OPENBLAS_NUM_THREADS:-1} thread(s), set before torch loads); samples/s over the timed steps after 2 warm-up steps; best of $repeat run(s)"
