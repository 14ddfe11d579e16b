#!/usr/bin/env bash
# Multi-process data-parallel training speed on one machine, real MNIST, the
# tutorial CNN of examples/mnist_cnn.json (batch 64 per replica, Adam):
#
#   lockstep cluster, 1 worker   coordinator + 1 `lockstep worker --threads 1`
#   lockstep cluster, 2 workers  coordinator + 2 workers (gRPC ring all-reduce)
#   PyTorch DDP (Gloo), 2 ranks  benchmarks/ddp_peer.py, one process per rank
#   PyTorch, 1 process           benchmarks/ddp_peer.py --world-size 1
#   (both PyTorch rows again with glibc malloc tuned, see MALLOC_TUNED)
#   (reference) `lockstep train` in one process, 1 and 2 replicas
#
# every process on 127.0.0.1, one compute thread each, the same number of
# steps. Prints a table of samples/s and the ratios.
#
# Timing, the same rule for lockstep and PyTorch: every system runs
# --warmup + --steps steps; the figure is --steps x global batch over the
# wall time from the end of the last warm-up step to the end of the last
# timed step, on every rank, the maximum over ranks. lockstep's workers
# record each step's end (`lockstep worker --step-times`, read by
# bench_lib.sh's step_times_rate); the PyTorch peer times itself so. The
# in-process `lockstep train` reference rows keep result.json's figure (its
# training loop, every step).
#
#   bazel run //benchmarks:cluster_vs_ddp [-- --steps 600 --warmup 20
#       --repeat 1 --timeout 600 --quiet-wait 60 --no-reference
#       --no-tuned-malloc --compression none|bf16 --link RATE]
# --link RATE (root): the 2-rank rows only, each rank (and the coordinator
# with worker 0) in a network namespace of its own whose link is limited to
# RATE (1gbit, 10gbit) by tbf in both directions (bench_lib.sh netns_up).
set -euo pipefail

readonly PY=/usr/bin/python3  # Debian's interpreter: the one with python3-torch

usage() {
  cat <<'EOF'
usage: bazel run //benchmarks:cluster_vs_ddp -- [options]
  --steps N       training steps per run, batch 64 per replica (default 600)
  --warmup N      untimed steps before the timed ones, on every system
                  (default 20; at least 1: the clock starts at the end of
                  the last warm-up step)
  --repeat K      run every system K times, report the best (default 1; use 3
                  on a shared machine)
  --timeout S     limit in seconds for each run's processes (default 600)
  --quiet-wait S  before each run, wait up to S seconds for the CPUs to be
                  >= 90% idle over 2 s (default 60; 0: do not wait)
  --no-reference  skip the in-process `lockstep train` reference rows
  --no-tuned-malloc  skip the PyTorch rows with glibc malloc tuned
  --compression C  the lockstep jobs' cluster.compression: none (default) or
                  bf16 (gradients as bfloat16 on the ring)
  --link RATE     root: only the 2-rank rows, every rank on a host of its own
                  (network namespaces) over a link shaped to RATE (1gbit,
                  10gbit) in both directions
Environment: LOCKSTEP_MNIST_DIR  folder with the four MNIST .gz files
  (default: <workspace>/../shared/datasets/mnist)
EOF
}

die() {
  echo "cluster_vs_ddp: $*" >&2
  exit 1
}

steps=600
warmup=20
repeat=1
run_timeout=600
quiet_wait=60
reference=1
tuned_malloc=1
compression=none
link=""
while (($# > 0)); do
  case "$1" in
    --steps | --warmup | --repeat | --timeout | --quiet-wait | --compression | --link)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      opt=$1 val=$2
      shift 2
      ;;
    --no-reference) reference=0; shift; continue ;;
    --no-tuned-malloc) tuned_malloc=0; shift; continue ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  case "$opt" in
    --steps) steps=$val ;;
    --warmup) warmup=$val ;;
    --repeat) repeat=$val ;;
    --timeout) run_timeout=$val ;;
    --quiet-wait) quiet_wait=$val ;;
    --compression) compression=$val ;;
    --link) link=$val ;;
    *) usage >&2; die "unknown option: $opt" ;;
  esac
done
for v in "$steps" "$repeat" "$run_timeout"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    die "--steps, --repeat and --timeout must be positive integers, got '$v'"
done
[[ "$warmup" =~ ^[1-9][0-9]*$ ]] ||
  die "--warmup must be an integer >= 1 (the clock starts at the end of the" \
    "last warm-up step), got '$warmup'"
[[ "$quiet_wait" =~ ^[0-9]+$ ]] || die "--quiet-wait must be an integer >= 0"
[[ "$compression" == none || "$compression" == bf16 ]] ||
  die "--compression: expected none or bf16, got '$compression'"

# --- Inputs: the binary, the peer, the example job, MNIST, torch. -----------

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
[[ -z "$link" ]] || netns_check "$link" || exit 1
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found in the runfiles; run through" \
    "'bazel run //benchmarks:cluster_vs_ddp'"
peer=$(runfile benchmarks/ddp_peer.py) ||
  die "benchmarks/ddp_peer.py not found in the runfiles"
example=$(runfile examples/mnist_cnn.json) ||
  die "examples/mnist_cnn.json not found in the runfiles"
summaries=$(runfile benchmarks/summaries.py) ||
  die "benchmarks/summaries.py not found in the runfiles"

require_mnist cluster_vs_ddp

require_torch_gloo

work_dir lockstep-cluster-bench

# --- Header. -----------------------------------------------------------------

# Exits 3 (a slow BLAS: the comparison would be invalid) before anything runs.
info=$("$PY" "$peer" --info) || peer_failed $? "$PY ddp_peer.py --info"
torch_version=$(json_get - torch <<<"$info")
blas=$(json_get - blas <<<"$info")
blas_path=$(json_get - blas_path <<<"$info")
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
command="bazel run //benchmarks:cluster_vs_ddp -- --steps $steps"
((warmup == 20)) || command+=" --warmup $warmup"
((repeat == 1)) || command+=" --repeat $repeat"
((quiet_wait == 60)) || command+=" --quiet-wait $quiet_wait"
((reference == 1)) || command+=" --no-reference"
((tuned_malloc == 1)) || command+=" --no-tuned-malloc"
[[ "$compression" == none ]] || command+=" --compression $compression"
[[ -z "$link" ]] || command+=" --link $link"
batch=$(json_get "$example" batch_size_per_replica)

if [[ -n "$link" ]]; then
  netns_up 2 "$link" || die "--link: could not make the network namespaces"
  echo "lockstep cluster vs PyTorch DDP (Gloo): training samples/s on real MNIST, every rank on a host of its own (network namespace), links shaped to $link (higher is better)"
else
  echo "lockstep cluster vs PyTorch DDP (Gloo): training samples/s on real MNIST, 127.0.0.1 (higher is better)"
fi
echo "cpu: ${cpu:-unknown}, $cores cores; load average before start: $load"
echo "torch $torch_version, BLAS: $blas ($blas_path); $("$lockstep" version 2>/dev/null || echo 'lockstep ?')"
echo "command: $command"
echo "job: examples/mnist_cnn.json (model, Adam, schedule, seed), \"steps\": $((warmup + steps)), batch $batch per replica, checkpoints only at epoch ends and the end, cluster.compression \"$compression\""
echo "timing, both sides: $warmup warm-up steps, then samples/s over the wall time from the end of step $warmup to the end of"
echo "  step $((warmup + steps)), on every rank, the maximum over ranks"
echo "  lockstep: lockstep coordinator --listen 127.0.0.1:0 --address-file F --storage DIR"
echo "            lockstep worker --coordinator \$(cat F) --threads 1 --step-times DIR/step_times.I.jsonl   (x workers)"
echo "            lockstep submit JOB.json --coordinator \$(cat F) --wait   -> every rank's step end times"
echo "            (the window holds whatever lockstep does between those steps, e.g. an epoch end's evaluation and checkpoint)"
echo "  pytorch:  $PY ddp_peer.py --job JOB.json --steps $steps --warmup $warmup --rank R --world-size W --rendezvous-file F"
echo "            (DDP, Gloo, torch.set_num_threads(1), OpenBLAS 1 thread; W=1: plain torch, no DDP)"
((reference == 0)) || echo "  ref rows: lockstep train JOB.json --threads W -> samples_per_sec of result.json (its training loop, every step)"
echo "            GLIBC_TUNABLES in the environment: ${GLIBC_TUNABLES:-none}"
((tuned_malloc == 0)) || echo "            \"malloc tuned\" rows: GLIBC_TUNABLES=$MALLOC_TUNED"
((repeat == 1)) || echo "each figure: the best of $repeat runs"
busy=$("$PY" -c 'import os; print(int(os.getloadavg()[0] >= 0.5 * os.cpu_count()))')
if ((busy)); then
  echo "WARNING: the machine is busy (load $load on $cores cores): numbers will be low and noisy."
fi
((cores >= 2)) || echo "WARNING: $cores core(s): the 2-process rows share one core."
echo

# --- Jobs. -------------------------------------------------------------------

write_job() {  # write_job FILE NAME WORKERS: examples/mnist_cnn.json, warm-up + timed steps
  "$PY" - "$example" "$@" "$((warmup + steps))" "$mnist" "$compression" <<'EOF'
import json, os, sys
example, path, name, workers, steps, mnist, compression = sys.argv[1:]
with open(example) as f:
    job = json.load(f)
job["name"] = name
job.pop("epochs", None)
job["steps"] = int(steps)
for key in ("train_images", "train_labels", "test_images", "test_labels"):
    job["data"][key] = os.path.join(mnist, os.path.basename(job["data"][key]))
# No mid-run checkpoints (they are outside the timed loop either way).
job["checkpoint"] = {"every_steps": 0, "keep": 1}
job["cluster"]["workers"] = int(workers)
job["cluster"]["replicas_per_worker"] = 1
job["cluster"]["compression"] = compression
with open(path, "w") as f:
    json.dump(job, f, indent=1)
EOF
}

# The chief's TensorBoard scalars `allreduce_seconds`,
# `allreduce_wait_seconds` and `step_seconds` (one step sampled every
# summary.every_steps), as "all-reduce A ms of a B ms step, W ms of it
# waited for after backward (H% hidden; N samples)": where a cluster step's
# time goes, and how much of the all-reduce overlaps backward.
allreduce_share() {  # allreduce_share SUMMARIES_DIR WORKERS
  "$summaries" "$1" allreduce_seconds allreduce_wait_seconds step_seconds | "$PY" -c '
import json, sys
s = json.load(sys.stdin)
if int(sys.argv[1]) == 1:  # a ring of one: nothing crosses the wire
    t = s.get("step_seconds", {})
    if t:
        print(f"chief: a {1000 * sum(t.values()) / len(t):.1f} ms step, no "
              f"all-reduce (one worker; mean of {len(t)} sampled steps)")
    sys.exit(0)
a, t = s.get("allreduce_seconds", {}), s.get("step_seconds", {})
w = s.get("allreduce_wait_seconds", {})
steps = sorted(set(a) & set(t) & set(w))
if steps:
    am = sum(a[k] for k in steps) / len(steps)
    tm = sum(t[k] for k in steps) / len(steps)
    wm = sum(w[k] for k in steps) / len(steps)
    hidden = 100 * (1 - wm / am) if am > 0 else 0
    print(f"chief: all-reduce {1000 * am:.1f} ms of a {1000 * tm:.1f} ms step, "
          f"{1000 * wm:.1f} ms of it waited for after backward ({hidden:.0f}% "
          f"hidden; mean of {len(steps)} sampled steps)")' "$2"
}

# Each run_* sets `sps` (samples/s) and `note` (a line for the log).

run_cluster() {  # run_cluster WORKERS RUN
  local w=$1 r=$2 name="cvd_w$1_r$2"
  local dir=$tmp/$name
  mkdir -p "$dir"
  write_job "$dir/job.json" "$name" "$w"
  start_cluster "$dir" "$w" 1
  local addr=$cluster_addr in0=()
  [[ -z "$link" ]] || in0=(ip netns exec "$netns_prefix-h0")
  local t0=$SECONDS
  start_bg "$dir/submit.log" "${in0[@]}" "$lockstep" submit "$dir/job.json" \
    --coordinator "$addr" --wait
  if ! wait_bg "${pids[-1]}"; then
    show_logs "$dir/submit.log" "$dir/coordinator.log" "$dir"/worker*.log
    die "lockstep submit failed (or ran past ${run_timeout}s) for $w worker(s)"
  fi
  local submit_seconds=$((SECONDS - t0))
  stop_all  # the workers have appended their step times as the job ended
  local result=$dir/storage/jobs/$name/result.json
  [[ -f "$result" ]] || die "the job succeeded but wrote no $result"
  sps=$(step_times_rate "$dir" "$warmup" "$((batch * w))") || exit 1
  local replicas wall loop_sps window
  replicas=$(json_get "$result" replicas)
  wall=$(json_get "$result" wall_seconds)
  loop_sps=$(json_get "$result" samples_per_sec)
  ((replicas == w)) || die "$result: $replicas replicas, expected $w"
  window=$(step_times_note "$dir" "$warmup" "$((batch * w))") || exit 1
  note=$("$PY" -c 'import sys
sps, loop, wall, sub = map(float, sys.argv[1:5])
print(f"{sps:,.0f} samples/s ({sys.argv[5]}); result.json: {loop:,.0f} "
      f"samples/s over the training loop, {wall:.1f} s job wall; {sub:.0f} s "
      "submit to exit")' "$sps" "$loop_sps" "$wall" "$submit_seconds" "$window")
  local share
  share=$(allreduce_share "$dir/storage/jobs/$name/summaries" "$w" 2>/dev/null || true)
  [[ -z "$share" ]] || note+="; $share"
  rm -rf "$dir/storage"
}

run_train() {  # run_train WORKERS RUN: in-process `lockstep train`, W replicas, W threads
  local w=$1 r=$2 name="cvd_train_w$1_r$2"
  local dir=$tmp/$name
  mkdir -p "$dir"
  write_job "$dir/job.json" "$name" "$w"
  start_bg "$dir/train.log" "$lockstep" train "$dir/job.json" \
    --storage "$dir/storage" --threads "$w"
  if ! wait_bg "${pids[-1]}"; then
    show_logs "$dir/train.log"
    die "lockstep train failed (or ran past ${run_timeout}s), $w replica(s)"
  fi
  sps=$(json_get "$dir/storage/jobs/$name/result.json" samples_per_sec)
  note="$(commas "$sps") samples/s"
  rm -rf "$dir/storage"
}

run_torch() {  # run_torch WORLD RUN default|tuned (malloc)
  local w=$1 r=$2 malloc=$3 name="cvd_torch_$3_w$1_r$2" rank
  local dir=$tmp/$name
  mkdir -p "$dir"
  write_job "$dir/job.json" "$name" "$w"
  local rank_pids=()
  for ((rank = 0; rank < w; rank++)); do
    local extra=() envs=(GLOO_SOCKET_IFNAME="${GLOO_SOCKET_IFNAME:-lo}") in=()
    ((w == 1)) || extra=(--rendezvous-file "$dir/rendezvous")
    if [[ -n "$link" ]]; then
      in=(ip netns exec "$netns_prefix-h$rank")
      envs=(GLOO_SOCKET_IFNAME=eth0)
      extra+=(--host "${netns_addr[0]}")
    fi
    [[ "$malloc" == default ]] || envs+=(GLIBC_TUNABLES="$MALLOC_TUNED")
    start_bg "$dir/rank$rank.log" "${in[@]}" env "${envs[@]}" "$PY" "$peer" \
      --job "$dir/job.json" --steps "$steps" --warmup "$warmup" \
      --rank "$rank" --world-size "$w" --threads 1 --timeout 120 "${extra[@]}"
    rank_pids+=("${pids[-1]}")
  done
  wait_ranks "$dir" "world size $w" "${rank_pids[@]}"
  local out
  out=$(grep '^{' "$dir/rank0.log" | tail -n 1 || true)  # rank 0's JSON line
  [[ -n "$out" ]] || { show_logs "$dir/rank0.log"; die "rank 0 printed no result"; }
  sps=$(json_get - samples_per_sec <<<"$out")
  note="$(commas "$sps") samples/s (window $(json_get - seconds <<<"$out") s for $steps steps on the slowest rank)"
}


# --- Runs: the systems interleaved, round after round. -----------------------

systems=(cluster1 cluster2 ddp2 torch1)
((tuned_malloc == 0)) || systems+=(ddpm2 torchm1)
((reference == 0)) || systems+=(train1 train2)
if [[ -n "$link" ]]; then  # one rank alone crosses no link
  systems=(cluster2 ddp2)
  ((tuned_malloc == 0)) || systems+=(ddpm2)
fi
declare -A best_sps
for s in "${systems[@]}"; do best_sps[$s]=0; done
for ((r = 1; r <= repeat; r++)); do
  for s in "${systems[@]}"; do
    w=${s: -1}
    echo -n "run $r/$repeat: $s ... " >&2
    wait_quiet
    case "$s" in
      cluster*) run_cluster "$w" "$r" ;;
      train*) run_train "$w" "$r" ;;
      ddpm* | torchm*) run_torch "$w" "$r" tuned ;;
      ddp* | torch*) run_torch "$w" "$r" default ;;
    esac
    echo "$note" >&2
    best_sps[$s]=$(best "${best_sps[$s]}" "$sps")
  done
done
echo >&2
if ((quiet_misses > 0)); then
  echo "WARNING: $quiet_misses run(s) started on a busy machine (other work" \
    "on the cores); their figures are low. Use --repeat 3 or more."
fi

# --- Table. ------------------------------------------------------------------

rows=$tmp/rows.tsv
: >"$rows"
for s in "${systems[@]}"; do
  printf '%s\t%s\n' "$s" "${best_sps[$s]}" >>"$rows"
done
"$PY" - "$rows" "$batch" <<'EOF'
import sys
sps = dict((k, float(v)) for k, v in
           (line.split("\t") for line in open(sys.argv[1]).read().splitlines()))
batch = int(sys.argv[2])
label = {
    "cluster1": ("lockstep cluster (gRPC ring)", 1),
    "cluster2": ("lockstep cluster (gRPC ring)", 2),
    "ddp2": ("PyTorch DDP (Gloo)", 2),
    "torch1": ("PyTorch, one process", 1),
    "ddpm2": ("PyTorch DDP (Gloo), malloc tuned", 2),
    "torchm1": ("PyTorch, one process, malloc tuned", 1),
    "train1": ("ref: lockstep train, in-process", 1),
    "train2": ("ref: lockstep train, in-process", 2),
}
fmt = "{:<35} {:>7} {:>12} {:>10} {:>11}"
print(fmt.format("system", "workers", "global batch", "samples/s", "ms / step"))
for key in ("cluster1", "cluster2", "ddp2", "torch1", "ddpm2", "torchm1",
            "train1", "train2"):
    if key not in sps:
        continue
    name, w = label[key]
    gb = batch * w
    print(fmt.format(name, w, gb, f"{sps[key]:,.0f}",
                     f"{1000.0 * gb / sps[key]:.2f}"))
print("(workers = processes for the cluster and DDP rows, one compute thread "
      "each; replicas and threads of one process for the ref rows)")
print("(cluster, DDP and one-process PyTorch rows: the timed steps over the "
      "wall time from the end of the last warm-up step to the end of the "
      "last step, the slowest rank's; ref rows: result.json's training loop, "
      "every step)")
print()

def ratio(a, b):
    return sps[a] / sps[b] if sps.get(b, 0) > 0 else float("nan")

lines = [
    ("lockstep 2 workers / 1 worker (scaling; 2.00 is the ceiling on 2 cores)",
     "cluster2", "cluster1", None),
    ("lockstep 2 workers / PyTorch DDP 2 processes", "cluster2", "ddp2", 1.2),
    ("lockstep 2 workers / PyTorch DDP 2 processes, malloc tuned",
     "cluster2", "ddpm2", 1.2),
    ("PyTorch DDP 2 processes / PyTorch 1 process (DDP's scaling)",
     "ddp2", "torch1", None),
    ("  the same, malloc tuned", "ddpm2", "torchm1", None),
    ("lockstep cluster 2 workers / lockstep train, 2 replicas in-process",
     "cluster2", "train2", None),
    ("lockstep cluster 1 worker / lockstep train, 1 replica in-process",
     "cluster1", "train1", None),
]
for text, a, b, goal in lines:
    if a not in sps or b not in sps:
        continue
    r = ratio(a, b)
    mark = "" if goal is None else \
        f"  (goal >= {goal}x: {'MET' if r >= goal else 'NOT MET'})"
    print(f"{text + ':':<72} {r:.2f}x{mark}")
EOF
