# Shared by the benchmark scripts (sourced, not run): finding runfiles and
# the datasets (MNIST, Brown), processes started and stopped by PID, a local
# cluster, JSON fields, waiting for a quiet machine. Every script sources it
# with
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

# PyTorch (Debian's 1.13, glibc malloc) frees its multi-MB activation and
# gradient tensors every step; glibc returns each to the kernel (mmap/munmap)
# and the next step faults the pages in again: about a third of a step in the
# kernel. jemalloc/tcmalloc or these glibc settings keep them. The "malloc
# tuned" rows run PyTorch with them, as a careful deployment would.
MALLOC_TUNED=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296

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

# require_brown NAME: sets `brown` to the absolute folder holding the Brown
# corpus' train.txt and valid.txt ($LOCKSTEP_BROWN_DIR, default
# <workspace>/../shared/datasets/brown); without them prints
# "NAME: SKIPPED: ..." and exits 0 (nothing measured).
require_brown() {
  local name=$1 f workspace=${BUILD_WORKSPACE_DIRECTORY:-$PWD}
  brown=${LOCKSTEP_BROWN_DIR:-$workspace/../shared/datasets/brown}
  for f in train.txt valid.txt; do
    if [[ ! -f "$brown/$f" ]]; then
      echo "$name: SKIPPED: this benchmark needs the Brown corpus and" \
        "$brown/$f is missing. Set LOCKSTEP_BROWN_DIR to a folder with" \
        "train.txt and valid.txt (plain text, one passage per line)." \
        "Nothing was measured."
      exit 0
    fi
  done
  brown=$(cd "$brown" && pwd -P)
}

# --- Processes: every one started here is recorded and killed by PID. -------
#
# Each runs under `timeout` ($run_timeout seconds, so even a SIGKILLed script
# leaves nothing running past the limit); the recorded PID is timeout's,
# which passes TERM on. The script sets run_timeout and traps EXIT to call
# stop_all; it defines die.

pids=()
stop_pid() {  # TERM, up to 10 s, then KILL; never waits longer
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
stop_all() {
  local pid
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  pids=()
}
start_bg() {  # start_bg LOG CMD...: a bounded background process; PID in pids
  local log=$1
  shift
  timeout -k 10 "$run_timeout" "$@" >"$log" 2>&1 &
  pids+=($!)
}
wait_bg() {  # wait_bg PID: its exit status; bounded (timeout); then forgotten
  local pid=$1 rc=0 q kept=()
  wait "$pid" || rc=$?  # a signal to the script interrupts this wait
  for q in "${pids[@]}"; do [[ "$q" == "$pid" ]] || kept+=("$q"); done
  pids=("${kept[@]}")
  return "$rc"
}

# start_cluster DIR WORKERS THREADS [WRAPPER...]: a coordinator (storage
# DIR/storage) and WORKERS `lockstep worker --threads THREADS` on 127.0.0.1,
# logs in DIR; each worker's command is prefixed with WRAPPER and the
# worker's index (e.g. peak_rss.py DIR/rss.) when given. Sets cluster_addr.
start_cluster() {
  local dir=$1 w=$2 threads=$3 i
  shift 3
  start_bg "$dir/coordinator.log" "$lockstep" coordinator --listen 127.0.0.1:0 \
    --address-file "$dir/address" --storage "$dir/storage"
  local coordinator_pid=${pids[-1]}
  for ((i = 0; i < 300; i++)); do  # up to 30 s
    [[ -s "$dir/address" ]] && break
    kill -0 "$coordinator_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -s "$dir/address" ]]; then
    show_logs "$dir/coordinator.log"
    die "the coordinator wrote no address file within 30 s"
  fi
  cluster_addr=$(cat "$dir/address")
  for ((i = 0; i < w; i++)); do
    local wrap=()
    (($# == 0)) || wrap=("${@:1:$#-1}" "${!#}$i")
    start_bg "$dir/worker$i.log" "${wrap[@]}" "$lockstep" worker \
      --coordinator "$cluster_addr" --threads "$threads"
  done
}

# require_torch_gloo: exits naming the fix when $PY lacks torch with Gloo.
require_torch_gloo() {
  if ! "$PY" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
    die "$PY cannot import torch with Gloo. Install the PyTorch peer with" \
      "'scripts/install_deps.sh --bench' (Debian's python3-torch + OpenBLAS)."
  fi
}

# work_dir NAME: sets `tmp` to a new folder, removed on exit after every
# process started here is stopped; INT and TERM exit through that too.
work_dir() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'stop_all; rm -rf "$tmp"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

json_get() {  # json_get FILE|- KEY: one top-level field of a JSON object
  "$PY" -c 'import json, sys
f = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])
print(json.load(f)[sys.argv[2]])' "$1" "$2"
}

show_logs() {  # show_logs FILE...: the last lines of each, on stderr
  local f
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    echo "--- last lines of $(basename "$f") ---" >&2
    tail -n 20 "$f" >&2
  done
}

commas() { "$PY" -c 'import sys; print(f"{float(sys.argv[1]):,.0f}")' "$1"; }

idle_percent() {  # CPU idle (idle + iowait) over the next 2 s, percent
  local a b
  a=$(head -n 1 /proc/stat)
  sleep 2
  b=$(head -n 1 /proc/stat)
  "$PY" -c 'import sys
a = [int(x) for x in sys.argv[1].split()[1:9]]
b = [int(x) for x in sys.argv[2].split()[1:9]]
d = [y - x for x, y in zip(a, b)]
print(int(100 * (d[3] + d[4]) / max(sum(d), 1)))' "$a" "$b"
}
wait_quiet() {  # up to --quiet-wait seconds for a >= 90% idle machine
  ((quiet_wait > 0)) || return 0
  local start=$SECONDS idle
  while :; do
    idle=$(idle_percent)
    ((idle >= 90)) && return 0
    if ((SECONDS - start >= quiet_wait)); then
      echo -n "[busy: ${idle}% idle after ${quiet_wait}s of waiting] " >&2
      quiet_misses=$((quiet_misses + 1))
      return 0
    fi
  done
}
quiet_misses=0

best() { "$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' "$@"; }
