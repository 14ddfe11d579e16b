# Shared by the benchmark scripts (sourced, not run): finding runfiles and
# the real MNIST folder. Every script sources it with
#   . "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
# and lists it in its sh_binary's data.

# runfile REL: the path of workspace file REL among this script's runfiles
# (`bazel run` sets RUNFILES_DIR; bazel-bin/... has $0.runfiles).
runfile() {
  local rel=$1 base
  for base in "${RUNFILES_DIR:-}" "$0.runfiles"; do
    if [[ -n "$base" && -e "$base/lockstep/$rel" ]]; then
      echo "$base/lockstep/$rel"
      return 0
    fi
  done
  return 1
}

# require_mnist NAME: sets `mnist` to the absolute folder holding the four
# MNIST IDX .gz files ($LOCKSTEP_MNIST_DIR, default
# <workspace>/../shared/datasets/mnist); without them prints
# "NAME: SKIPPED: ..." naming the missing file and exits 0 (nothing measured).
require_mnist() {
  local name=$1 f workspace=${BUILD_WORKSPACE_DIRECTORY:-$PWD}
  local files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
    t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
  mnist=${LOCKSTEP_MNIST_DIR:-$workspace/../shared/datasets/mnist}
  for f in "${files[@]}"; do
    if [[ ! -f "$mnist/$f" ]]; then
      echo "$name: SKIPPED: this benchmark needs real MNIST and $mnist/$f" \
        "is missing. Put the four IDX .gz files (${files[*]}) in one folder" \
        "and set LOCKSTEP_MNIST_DIR to it, or place them in" \
        "<workspace>/../shared/datasets/mnist. Nothing was measured."
      exit 0
    fi
  done
  mnist=$(cd "$mnist" && pwd -P)  # job files need absolute data paths
}
