#!/usr/bin/env bash
# Sharded state (cluster.shard: "optimizer", ZeRO-1, and "gradients",
# ZeRO-2): memory and speed.
#
#   memory  a BERT-base shape (12 layers, hidden 768, vocab 30,522: 109.5 M
#           parameters) with AdamW on the Brown corpus, --steps steps, on 2
#           and 4 workers, shard "none" against "optimizer" and
#           "gradients", each with copies (the default: each part also kept
#           by the next worker) and without ("copies": false): each
#           worker's peak RSS (getrusage, benchmarks/peak_rss.py) and
#           optimizer state (result.json optimizer_state_bytes), the RSS
#           saved per worker as a share of what the mode shards (the
#           unsharded optimizer state; with "gradients" also the gradients,
#           4 bytes a parameter), ideal (N-2)/N with copies, (N-1)/N
#           without
#   limit   (root, cgroup v1 memory) each of 4 workers in a memory cgroup of
#           its own, limited halfway between the peak RSS unsharded and
#           sharded with copies: the unsharded job is killed, both sharded
#           ones train
#   speed   the BERT example (examples/bert_mlm_brown.json) on 2 workers
#           for --speed-steps steps, every mode, taking turns for --speed-rounds rounds (each
#           mode's best round counts: this 2-core machine's noise is about
#           10% run to run), the same timing rule as cluster_vs_ddp
#           (step_times_rate), and whether all end on the same fingerprint
#
#   bazel run //benchmarks:shard_memory [-- --steps 3 --speed-steps 60
#       --speed-rounds 2 --warmup 10 --workers "2 4" --timeout 1200
#       --modes "none optimizer nocopies gradients gradnocopies"
#       --no-limit --no-speed]
set -euo pipefail

readonly PY=/usr/bin/python3

usage() {
  cat <<'USAGE'
usage: bazel run //benchmarks:shard_memory -- [options]
  --steps N        training steps of each memory run (default 3)
  --workers "A B"  worker counts of the memory runs (default "2 4")
  --speed-steps N  steps of each speed run (default 60)
  --speed-rounds N rounds of the speed runs, the modes taking turns; each
                   mode's best counts (default 2)
  --warmup N       untimed steps of each speed run (default 10)
  --timeout S      limit for each run's processes (default 1200)
  --modes "A B"    the modes compared, "none" first (default "none
                   optimizer nocopies gradients gradnocopies")
  --no-limit       skip the cgroup memory limit runs
  --no-speed       skip the speed runs
Environment: LOCKSTEP_BROWN_DIR (default <workspace>/../shared/datasets/brown)
USAGE
}
die() {
  echo "shard_memory: $*" >&2
  exit 1
}

steps=3
worker_counts="2 4"
speed_steps=60
speed_rounds=2
warmup=10
run_timeout=1200
limit=1
speed=1
modes="none optimizer nocopies gradients gradnocopies"
while (($# > 0)); do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --workers) worker_counts=${2:?}; shift 2 ;;
    --speed-steps) speed_steps=${2:?}; shift 2 ;;
    --speed-rounds) speed_rounds=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --timeout) run_timeout=${2:?}; shift 2 ;;
    --modes) modes=${2:?}; shift 2 ;;
    --no-limit) limit=0; shift ;;
    --no-speed) speed=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for v in "$steps" "$speed_steps" "$warmup" "$run_timeout" "$speed_rounds"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "step counts and --timeout must be positive integers"
done
((speed_steps > warmup)) || die "--speed-steps must exceed --warmup"
[[ "$modes" == none\ * ]] || die "--modes must start with none (the baseline)"
for m in $modes; do
  [[ " none optimizer nocopies gradients gradnocopies " == *" $m "* ]] ||
    die "unknown mode '$m' (none, optimizer, nocopies, gradients, gradnocopies)"
done

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found; run through 'bazel run //benchmarks:shard_memory'"
peak_rss=$(runfile benchmarks/peak_rss.py) || die "benchmarks/peak_rss.py not found"
example=$(runfile examples/bert_mlm_brown.json) || die "examples/bert_mlm_brown.json not found"
require_brown shard_memory
netns_prefix=""

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-shard.XXXXXX")
cgroups=()
cleanup() {
  stop_all
  local c
  for c in "${cgroups[@]}"; do rmdir "$c" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The jobs: BERT-base on the first 4,000 lines of Brown (evaluated on 40),
# and the BERT example as shipped.
head -n 4000 "$brown/train.txt" >"$tmp/train.txt"
head -n 40 "$brown/valid.txt" >"$tmp/test.txt"
"$PY" - "$tmp" "$example" "$brown" "$steps" "$speed_steps" <<'PY'
import json, sys
tmp, example, brown, steps, speed_steps = sys.argv[1:6]
job = json.load(open(example))
base = dict(job)
base["name"] = "bertbase"
base["model"] = dict(job["model"], vocab_size=30522, hidden=768, layers=12,
                     heads=12, intermediate=3072, max_positions=512)
base["data"] = dict(job["data"], vocab_size=30522, sequence_length=32,
                    max_predictions=5, train_path=tmp + "/train.txt",
                    test_path=tmp + "/test.txt")
base["batch_size_per_replica"] = 2
base.pop("epochs", None)
base.pop("lr_schedule", None)
base["steps"] = int(steps)
base["checkpoint"] = {"every_steps": 0, "keep": 1}
base["summary"] = {"every_steps": 1000}
base["restart"] = {"max_restarts": 0}
json.dump(base, open(tmp + "/bertbase.json", "w"), indent=1)
ex = dict(job)
ex["name"] = "example"
ex["data"] = dict(job["data"], train_path=brown + "/train.txt",
                  test_path=brown + "/valid.txt")
ex.pop("epochs", None)
ex["steps"] = int(speed_steps)
ex["checkpoint"] = {"every_steps": 0, "keep": 1}
json.dump(ex, open(tmp + "/example.json", "w"), indent=1)
PY

# The modes compared: the state whole, sharded with copies (the default),
# sharded without; the optimizer state alone or the gradients too.
readonly MODES=$modes
# job_variant IN OUT WORKERS MODE
job_variant() {
  "$PY" - "$@" <<'PY'
import json, sys
src, dst, workers, mode = sys.argv[1:5]
job = json.load(open(src))
job.setdefault("cluster", {})
job["cluster"]["workers"] = int(workers)
job["cluster"]["shard"] = ("none" if mode == "none" else
                           "gradients" if mode.startswith("grad") else
                           "optimizer")
if mode.endswith("nocopies"):
    job["cluster"]["copies"] = False
json.dump(job, open(dst, "w"), indent=1)
PY
}
# The mode's name in the tables.
mode_name() {
  case "$1" in
    none) echo "none" ;;
    optimizer) echo "optimizer" ;;
    nocopies) echo "optimizer, copies false" ;;
    gradients) echo "gradients" ;;
    gradnocopies) echo "gradients, copies false" ;;
  esac
}

# run_job DIR JOBFILE WORKERS [WRAPPER...]: a fresh cluster in DIR runs the
# job to its end; the workers are stopped (their peak RSS written). Returns
# the submit's status.
run_job() {
  local dir=$1 file=$2 w=$3 rc=0
  shift 3
  mkdir -p "$dir"
  start_cluster "$dir" "$w" 1 "$@"
  timeout -k 10 "$run_timeout" "$lockstep" submit "$file" --wait \
    --coordinator "$cluster_addr" >"$dir/submit.log" 2>&1 || rc=$?
  stop_all
  return "$rc"
}
# max_rss DIR W: the largest worker peak RSS (MiB) of the run in DIR.
max_rss() {
  local i m=0 v
  for ((i = 0; i < $2; i++)); do
    v=$(cat "$1/rss.$i" 2>/dev/null || echo 0)
    m=$("$PY" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$m" "$v")
  done
  echo "$m"
}
mib() { "$PY" -c 'import sys; print("%.0f" % (float(sys.argv[1]) / 1048576))' "$1"; }

declare -A rss state params
echo "memory: BERT-base shape (109.5 M parameters), AdamW, $steps steps, 1 thread per worker"
for w in $worker_counts; do
  for shard in $MODES; do
    dir="$tmp/mem-$w-$shard"
    job_variant "$tmp/bertbase.json" "$tmp/mem-$w-$shard.json" "$w" "$shard"
    echo "  $w workers, shard $(mode_name "$shard") ..."
    run_job "$dir" "$tmp/mem-$w-$shard.json" "$w" "$PY" "$peak_rss" "$dir/rss." ||
      { show_logs "$dir/submit.log" "$dir/worker0.log"; die "the $w-worker run (shard $shard) failed"; }
    rss[$w-$shard]=$(max_rss "$dir" "$w")
    state[$w-$shard]=$(json_get "$dir/storage/jobs/bertbase/result.json" optimizer_state_bytes)
    params[$w-$shard]=$(json_get "$dir/storage/jobs/bertbase/result.json" num_parameters)
  done
done
echo
printf '%-8s %-24s %18s %22s %14s %22s\n' workers shard "peak RSS/worker" "optimizer state/worker" "RSS saved" "of what is sharded (ideal)"
for w in $worker_counts; do
  for shard in $MODES; do
    r=${rss[$w-$shard]}
    s=$(mib "${state[$w-$shard]}")
    saved="" share=""
    if [[ "$shard" != none ]]; then
      kept=$([[ "$shard" == *nocopies ]] && echo 1 || echo 2)
      # What the mode shards: the optimizer state, and the gradients too.
      sharded=${state[$w-none]}
      [[ "$shard" == grad* ]] && sharded=$((sharded + 4 * ${params[$w-none]}))
      saved=$("$PY" -c 'import sys; print("%.0f MiB" % (float(sys.argv[1]) - float(sys.argv[2])))' "${rss[$w-none]}" "$r")
      share=$("$PY" -c 'import sys; a, b, s, w, k = map(float, sys.argv[1:6]); print("%.0f%% (%.0f%%)" % (100 * (a - b) / (s / 1048576), 100 * max(w - k, 0) / w))' "${rss[$w-none]}" "$r" "$sharded" "$w" "$kept")
    fi
    printf '%-8s %-24s %14.0f MiB %18s MiB %14s %22s\n' "$w" "$(mode_name "$shard")" "$r" "$s" "$saved" "$share"
  done
done

if ((limit)); then
  echo
  cg=/sys/fs/cgroup/memory
  w=${worker_counts##* }
  if [[ $(id -u) != 0 || ! -w "$cg" ]]; then
    echo "limit: SKIPPED: needs root and a writable cgroup v1 memory controller ($cg)"
  else
    # Halfway between the unsharded peak and the largest sharded one.
    most=0
    for shard in $MODES; do
      [[ "$shard" == none ]] && continue
      most=$("$PY" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$most" "${rss[$w-$shard]}")
    done
    cap=$("$PY" -c 'import sys; print(int((float(sys.argv[1]) + float(sys.argv[2])) / 2))' "${rss[$w-none]}" "$most")
    # in_cgroup.sh RSSFILE CMD...: CMD under peak_rss.py, in the memory
    # cgroup of the worker index RSSFILE ends with.
    {
      echo '#!/bin/bash'
      echo 'i=${1##*.}'
      echo "echo \$\$ > $cg/lockstep-shard-$$-\$i/cgroup.procs || exit 1"
      echo "exec $PY $peak_rss \"\$@\""
    } >"$tmp/in_cgroup.sh"
    chmod +x "$tmp/in_cgroup.sh"
    for ((i = 0; i < w; i++)); do
      mkdir -p "$cg/lockstep-shard-$$-$i"
      cgroups+=("$cg/lockstep-shard-$$-$i")
      echo $((cap * 1048576)) >"$cg/lockstep-shard-$$-$i/memory.limit_in_bytes"
    done
    echo "limit: $w workers, each in a memory cgroup limited to $cap MiB"
    for shard in $MODES; do
      dir="$tmp/limit-$shard"
      outcome=trained
      run_job "$dir" "$tmp/mem-$w-$shard.json" "$w" "$tmp/in_cgroup.sh" "$dir/rss." ||
        outcome="failed: $(grep -m1 -E 'FAILED|lost' "$dir/submit.log" | cut -c1-110)"
      printf '  shard %-24s %s\n' "$(mode_name "$shard")" "$outcome"
    done
  fi
fi

if ((speed)); then
  echo
  echo "speed: the BERT example on 2 workers, $speed_steps steps ($warmup untimed), 1 thread per worker;"
  echo "  the modes take turns, $speed_rounds rounds, each mode's best round counts"
  declare -A rate fp
  for ((round = 1; round <= speed_rounds; round++)); do
    for shard in $MODES; do
      dir="$tmp/speed-$shard-$round"
      job_variant "$tmp/example.json" "$tmp/speed-$shard.json" 2 "$shard"
      run_job "$dir" "$tmp/speed-$shard.json" 2 ||
        { show_logs "$dir/submit.log" "$dir/worker0.log"; die "the speed run (shard $shard) failed"; }
      gb=$(json_get "$dir/storage/jobs/example/result.json" global_batch_size)
      r=$(step_times_rate "$dir" "$warmup" "$gb")
      f=$(json_get "$dir/storage/jobs/example/result.json" fingerprint)
      printf '  round %d  shard %-24s %10s samples/s  fingerprint %s\n' "$round" "$(mode_name "$shard")" "$(commas "$r")" "$f"
      rate[$shard]=$("$PY" -c 'import sys; print(max(float(x) for x in sys.argv[1:]))' "$r" "${rate[$shard]:-0}")
      if [[ -n "${fp[$shard]:-}" && "${fp[$shard]}" != "$f" ]]; then
        fp[$shard]="differs between rounds"
      else
        fp[$shard]=$f
      fi
    done
  done
  for shard in $MODES; do
    printf '  shard %-24s %10s samples/s (best)\n' "$(mode_name "$shard")" "$(commas "${rate[$shard]}")"
  done
  same=1
  for shard in $MODES; do
    [[ "${fp[$shard]}" == "${fp[none]}" ]] || same=0
    [[ "$shard" == none ]] && continue
    "$PY" -c 'import sys; print("  shard %-24s / none: %.3fx" % (sys.argv[1], float(sys.argv[3]) / float(sys.argv[2])))' "$(mode_name "$shard")" "${rate[none]}" "${rate[$shard]}"
  done
  ((same)) && echo "  the same fingerprint" || echo "  FINGERPRINTS DIFFER"
fi
