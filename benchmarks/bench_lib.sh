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

now() { date +%s.%N; }
# log_time REGEX FILE: the timestamp (seconds) of FILE's first line matching
# REGEX, from the lockstep log line's leading RFC 3339 time; 1 if none.
log_time() {
  local line
  line=$(grep -m1 -E "$1" "$2" || true)
  [[ -n "$line" ]] || return 1
  date -d "${line%% *}" +%s.%N
}

# start_cluster DIR WORKERS THREADS [WRAPPER...]: a coordinator (storage
# DIR/storage) and WORKERS `lockstep worker --threads THREADS` on 127.0.0.1,
# logs in DIR; each worker's command is prefixed with WRAPPER and the
# worker's index (e.g. peak_rss.py DIR/rss.) when given. Worker i appends
# the end time of every step it runs to DIR/step_times.i.jsonl
# (`--step-times`, worker/step_times.h; read by step_times_rate). Sets
# cluster_addr. After netns_up, worker i runs in host i and the coordinator
# in host 0, each on its host's address.
start_cluster() {
  local dir=$1 w=$2 threads=$3 i
  shift 3
  local in0=() host0=127.0.0.1
  if [[ -n "$netns_prefix" ]]; then
    in0=(ip netns exec "$netns_prefix-h0")
    host0=${netns_addr[0]}
  fi
  start_bg "$dir/coordinator.log" "${in0[@]}" "$lockstep" coordinator \
    --listen "$host0:0" --address-file "$dir/address" --storage "$dir/storage"
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
  rm -f "$dir"/step_times.*.jsonl  # an earlier run's, in a reused folder
  for ((i = 0; i < w; i++)); do
    local wrap=() in=() listen=()
    (($# == 0)) || wrap=("${@:1:$#-1}" "${!#}$i")
    if [[ -n "$netns_prefix" ]]; then
      in=(ip netns exec "$netns_prefix-h$i")
      listen=(--listen "${netns_addr[i]}:0")
    fi
    start_bg "$dir/worker$i.log" "${in[@]}" "${wrap[@]}" "$lockstep" worker \
      --coordinator "$cluster_addr" --threads "$threads" "${listen[@]}" \
      --step-times "$dir/step_times.$i.jsonl"
  done
}

# The timing rule of the cluster benchmarks, the same for lockstep and
# PyTorch: wall time from the end of the last warm-up step to the end of
# the last timed step, on every rank, the maximum over ranks. The PyTorch
# peers time themselves so (ddp_peer.py, mobilenet_ddp_peer.py); for
# lockstep the workers record every step's end (start_cluster).
#
# step_times_rate DIR WARMUP GLOBAL_BATCH: samples/s of the lockstep job run
# on the cluster started in DIR: (last step - WARMUP) x GLOBAL_BATCH over
# the longest rank's time from the end of step WARMUP to the end of the last
# step. Dies when a rank is missing or the ranks disagree (a job that
# restarted: its generations are not one timed run).
step_times_rate() {
  step_times_report "$@" rate
}
# step_times_note DIR WARMUP GLOBAL_BATCH: a line for the log: the slowest
# rank's window and how much of it lockstep spent between steps (epoch-end
# evaluation and checkpoints, progress reports: the `ends` the workers
# record), which the PyTorch peers do not do.
step_times_note() {
  step_times_report "$@" note
}
step_times_report() {
  local dir=$1 warmup=$2 gb=$3 mode=$4 out
  out=$("$PY" - "$warmup" "$gb" "$mode" "$dir"/step_times.*.jsonl <<'PYEOF'
import json, sys
warmup, gb, mode, paths = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], \
    sys.argv[4:]
if warmup < 1:
    sys.exit("step_times_rate: WARMUP must be >= 1 (the clock starts at the "
             "end of the last warm-up step)")
runs = {}
for path in paths:
    try:
        lines = [l for l in open(path).read().splitlines() if l.strip()]
    except OSError as e:
        sys.exit(f"step_times_rate: {path}: {e.strerror}")
    if len(lines) != 1:
        sys.exit(f"step_times_rate: {path}: {len(lines)} runs, expected one "
                 "(a restarted generation is not one timed run)")
    run = json.loads(lines[0])
    runs[run["rank"]] = run
if not runs or sorted(runs) != list(range(len(paths))):
    sys.exit(f"step_times_rate: ranks {sorted(runs)} in {len(paths)} file(s)")
windows = []
for rank, run in sorted(runs.items()):
    end = dict(zip(run["steps"], run["times"]))
    last = max(run["steps"], default=0)
    if warmup not in end or last <= warmup:
        sys.exit(f"step_times_rate: rank {rank} ran steps up to {last}; "
                 f"needs step {warmup} (the last warm-up step) and later ones")
    between = sum(e - t for s, t, e in zip(run["steps"], run["times"],
                                           run.get("ends", []))
                  if warmup <= s < last)
    windows.append((end[last] - end[warmup], rank, last, between))
lasts = {w[2] for w in windows}
if len(lasts) != 1:
    sys.exit(f"step_times_rate: the ranks ended at different steps {lasts}")
seconds, rank, last, between = max(windows)
if mode == "rate":
    print((last - warmup) * gb / seconds)
else:
    print(f"window {seconds:.2f} s for steps {warmup + 1}..{last} on the "
          f"slowest rank ({rank}), of which {between:.2f} s between steps "
          "(evaluation, checkpoints, reports)")
PYEOF
) || die "cannot time the lockstep run from $dir/step_times.*.jsonl"
  echo "$out"
}

# A PyTorch peer exits with this status when torch runs on a slow BLAS
# (torch_common.require_fast_blas): the run would be invalid.
SLOW_BLAS_EXIT=3
# peer_failed STATUS WHAT...: stops the script for a peer that exited with
# STATUS; a slow BLAS gets its own explanation and the script exits 3 too.
# Never returns.
peer_failed() {
  local rc=$1
  shift
  if ((rc == SLOW_BLAS_EXIT)); then
    # The script's own die (its name in front) in a subshell, then exit 3:
    # a caller of the script can tell this invalid run from a failure.
    (die "$*: PyTorch runs on a slow BLAS (the reference BLAS, not OpenBLAS" \
      "or MKL; see the peer's message). Its matmuls are ~7-8x slower, so" \
      "the comparison would flatter lockstep: the run is invalid and" \
      "nothing was measured. Fix: apt-get install libopenblas0-pthread (or" \
      "update-alternatives --config libblas.so.3-x86_64-linux-gnu), then" \
      "run again.") || true
    exit "$SLOW_BLAS_EXIT"
  fi
  die "$*: the PyTorch peer failed (exit status $rc; 124: ran past" \
    "${run_timeout:-?}s)"
}
# peer_status STATUS...: of a run's ranks, SLOW_BLAS_EXIT if any rank
# exited with it, else the first non-zero status, else 0.
peer_status() {
  local rc first=0
  for rc in "$@"; do
    if ((rc == SLOW_BLAS_EXIT)); then
      echo "$SLOW_BLAS_EXIT"
      return 0
    fi
    ((first != 0)) || first=$rc
  done
  echo "$first"
}

# wait_ranks DIR WHAT PID...: waits for every rank of a PyTorch run (each
# under its timeout); if any failed, shows DIR/rank*.log and stops through
# peer_failed (a slow BLAS on any rank wins).
wait_ranks() {
  local dir=$1 what=$2
  shift 2
  local pid rc statuses=()
  for pid in "$@"; do
    rc=0
    wait_bg "$pid" || rc=$?
    statuses+=("$rc")
  done
  rc=$(peer_status "${statuses[@]}")
  if ((rc != 0)); then
    show_logs "$dir"/rank*.log
    peer_failed "$rc" "$what (exit status by rank: ${statuses[*]})"
  fi
}

# decode_threads: the threads lockstep decodes images on per worker, as
# core/data/batch_prefetcher.cc's FillThreads: clamp(cores / 4, 1, 8), cores
# being std::thread::hardware_concurrency() (the online processors).
decode_threads() {
  local cores
  cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
  local n=$((cores / 4))
  ((n >= 1)) || n=1
  ((n <= 8)) || n=8
  echo "$n"
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
  trap 'stop_all; netns_down; rm -rf "$tmp"' EXIT
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

# Ranks on hosts of their own, over shaped links (root only):
# netns_up N RATE makes N network namespaces ("hosts", addresses
# 10.213.0.2.. of a private /24 used only inside them) on a bridge in a
# switch namespace of its own, and limits each host's link to RATE
# ("1gbit", "10gbit") in both directions with tbf; netns_exec R CMD...
# runs CMD in host R (it execs, so $! is CMD's pid); netns_down removes
# them all (the namespaces take their veths). Sets netns_addr[R].
netns_prefix=""
netns_addr=()
# netns_rate_bits RATE: bits/s of "100mbit", "1gbit", "10gbit"; fails
# otherwise.
netns_rate_bits() {
  [[ "$1" =~ ^([0-9]+)([kKmMgG]?)bit$ ]] || return 1
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2],,}
  case "$unit" in
    k) echo $((n * 1000)) ;;
    m) echo $((n * 1000000)) ;;
    g) echo $((n * 1000000000)) ;;
    *) echo "$n" ;;
  esac
}
# netns_check RATE: why netns_up RATE cannot run here (on stderr, and
# fails), before anything is started: a bad rate, not root, no ip/tc.
netns_check() {
  netns_rate_bits "$1" >/dev/null ||
    { echo "--link: '$1' is not a rate like 100mbit, 1gbit, 10gbit" >&2; return 1; }
  ((EUID == 0)) || { echo "--link needs root (ip netns add)" >&2; return 1; }
  command -v ip >/dev/null && command -v tc >/dev/null ||
    { echo "--link needs ip and tc (Debian package iproute2)" >&2; return 1; }
}
netns_up() {
  local n=$1 rate=$2 r ns bits burst
  netns_check "$rate" || return 1
  bits=$(netns_rate_bits "$rate")
  # tbf's bucket must hold a timer tick of traffic at RATE (HZ may be 100).
  burst=$((bits / 8 / 100))
  ((burst >= 65536)) || burst=65536
  netns_prefix="lsbench$$"
  ip netns add "$netns_prefix-sw" || return 1
  ip -n "$netns_prefix-sw" link add br0 type bridge &&
    ip -n "$netns_prefix-sw" link set br0 up || return 1
  for ((r = 0; r < n; r++)); do
    ns=$netns_prefix-h$r
    netns_addr[r]=10.213.0.$((r + 2))
    ip netns add "$ns" &&
      ip -n "$netns_prefix-sw" link add "v$r" type veth peer name eth0 netns "$ns" &&
      ip -n "$netns_prefix-sw" link set "v$r" master br0 &&
      ip -n "$netns_prefix-sw" link set "v$r" up &&
      ip -n "$ns" addr add "${netns_addr[r]}/24" dev eth0 &&
      ip -n "$ns" link set eth0 up &&
      ip -n "$ns" link set lo up &&
      tc -n "$netns_prefix-sw" qdisc add dev "v$r" root tbf rate "$rate" burst "$burst" latency 50ms &&
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms ||
      return 1
  done
}
netns_exec() {
  local r=$1
  shift
  exec ip netns exec "$netns_prefix-h$r" "$@"
}
netns_down() {
  [[ -n "$netns_prefix" ]] || return 0
  local ns
  for ns in $(ip netns list | cut -d' ' -f1 | grep "^$netns_prefix-"); do
    ip netns del "$ns" 2>/dev/null || true
  done
  netns_prefix=""
}
