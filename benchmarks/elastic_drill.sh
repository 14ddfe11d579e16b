#!/usr/bin/env bash
# Elastic drill on real data (issue "Elastic jobs"): the tutorial CNN of
# examples/mnist_cnn_multiworker.json on MNIST (or with --model bert the
# BERT example on the Brown corpus) as an elastic job of {"min": 2,
# "max": 3} workers on a local cluster of 3. Past --kill-step the worker
# holding rank 2 is killed (SIGKILL) and no replacement comes: after the
# rejoin grace the job goes on with 2. Past --join-step a fresh worker
# starts: the job grows back to 3 at a step boundary. Prints
#
#   shrink      kill -> generation 2 (2 workers) running, and its start step
#               (from the survivors' memory: only the broken step redone)
#   grow        the new worker registered -> generation 3 (3 workers)
#               running, from the step the ranks regrouped at
#   history     result.json's membership (which world ran from which step)
#   accuracy    the test accuracy beside the same job trained by 3 replicas
#               throughout (`lockstep train`), goal: within 0.005
#
#   bazel run //benchmarks:elastic_drill [-- --kill-step 300 --join-step 600
#       --rejoin-grace 2 --timeout 1200 --model mnist --steps N]
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bazel run //benchmarks:elastic_drill -- [options]
  --kill-step N     kill rank 2 once the job is past step N (default 300)
  --join-step N     start a fresh worker once past step N (default 600)
  --rejoin-grace S  cluster.rejoin_grace_seconds of the job (default 2)
  --timeout S       limit for the whole drill's processes (default 1200)
  --model mnist|bert  the job (default mnist)
  --steps N         train N steps instead of the example's epochs
Environment: LOCKSTEP_MNIST_DIR (default <workspace>/../shared/datasets/mnist),
  LOCKSTEP_BROWN_DIR (--model bert)
USAGE
}
die() {
  echo "elastic_drill: $*" >&2
  exit 1
}

kill_step=300
join_step=600
grace=2
run_timeout=1200
model=mnist
steps=0
while (($# > 0)); do
  case "$1" in
    --kill-step) kill_step=${2:?}; shift 2 ;;
    --join-step) join_step=${2:?}; shift 2 ;;
    --rejoin-grace) grace=${2:?}; shift 2 ;;
    --timeout) run_timeout=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ "$kill_step" =~ ^[1-9][0-9]*$ && "$join_step" =~ ^[1-9][0-9]*$ &&
  "$run_timeout" =~ ^[1-9][0-9]*$ ]] ||
  die "--kill-step, --join-step and --timeout must be positive integers"
((join_step > kill_step)) || die "--join-step must come after --kill-step"
[[ "$grace" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--rejoin-grace must be seconds"
[[ "$steps" =~ ^[0-9]+$ ]] || die "--steps must be a number of steps"
[[ "$model" == mnist || "$model" == bert ]] || die "--model must be mnist or bert"

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found; run through 'bazel run //benchmarks:elastic_drill'"
if [[ "$model" == mnist ]]; then
  job=mnist_cnn_multiworker
  require_mnist elastic_drill
else
  job=bert_mlm_brown
  require_brown elastic_drill
fi
example=$(runfile "examples/$job.json") ||
  die "examples/$job.json not found in the runfiles"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-elastic.XXXXXX")
trap stop_all EXIT
json() {  # json FILE EXPR: a value of result.json (python3's json)
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

if [[ "$model" == mnist ]]; then
  sed "s#\"mnist/#\"$mnist/#" "$example" >"$tmp/base.json"
else
  sed "s#\"../../shared/datasets/brown/#\"$brown/#" "$example" >"$tmp/base.json"
fi
# The same job as 3 fixed workers (the reference) and as 2..3 (the drill).
python3 - "$tmp" "$grace" "$steps" <<'PY'
import json, sys
tmp, grace, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
job = json.load(open(tmp + "/base.json"))
if steps > 0:
    job.pop("epochs", None)
    job["steps"] = steps
job.setdefault("cluster", {})["workers"] = 3
json.dump(job, open(tmp + "/fixed.json", "w"), indent=1)
job["cluster"]["workers"] = {"min": 2, "max": 3}
job["cluster"]["rejoin_grace_seconds"] = grace
json.dump(job, open(tmp + "/job.json", "w"), indent=1)
PY

echo "reference: lockstep train (3 replicas, one process) ..."
timeout -s KILL "$run_timeout" "$lockstep" train "$tmp/fixed.json" \
  --storage "$tmp/reference" --threads 1 >"$tmp/reference.log" 2>&1 ||
  die "the reference run failed: $(tail -3 "$tmp/reference.log")"

echo "cluster: coordinator + 3 workers; kill rank 2 past step $kill_step, a new worker past step $join_step ..."
start_cluster "$tmp" 3 1
address=$cluster_addr
"$lockstep" submit "$tmp/job.json" --coordinator "$address" >/dev/null

deadline=$((SECONDS + run_timeout))
wait_step() {  # wait_step N: until the job is past step N; sets $status
  local step=0
  while ((step <= $1)); do
    ((SECONDS < deadline)) || die "the job never passed step $1"
    status=$("$lockstep" status "$job" --coordinator "$address")
    step=$(sed -n 's#.*step \([0-9]*\)/.*#\1#p' <<<"$status" | head -1)
    step=${step:-0}
    sleep 0.05
  done
}
wait_step "$kill_step"
victim=$(sed -n 's/.*rank 2 w[0-9]* *[^ ]* pid \([0-9]*\).*/\1/p' <<<"$status" | head -1)
[[ -n "$victim" ]] || die "no rank 2 in: $status"
kill -KILL "$victim"
t_kill=$(now)
echo "SIGKILL to rank 2 (pid $victim) past step $kill_step"
wait_step "$join_step"
start_bg "$tmp/worker3.log" "$lockstep" worker --coordinator "$address" \
  --threads 1
echo "a fresh worker starts past step $join_step"
"$lockstep" watch "$job" --coordinator "$address" >"$tmp/watch.log" 2>&1 || true

t_gen2=$(log_time "RUNNING generation 2 " "$tmp/coordinator.log") || die "generation 2 never ran"
t_reg=$(log_time "registered with" "$tmp/worker3.log") || die "the new worker never registered"
t_gen3=$(log_time "RUNNING generation 3 " "$tmp/coordinator.log") || die "generation 3 never ran"
shrink=$(grep -m1 -o "membership: 3 -> 2 workers[^:]*" "$tmp/coordinator.log" || true)
grow=$(grep -m1 -o "membership: 2 -> 3 workers[^:]*" "$tmp/coordinator.log" || true)
gen2=$(grep -m1 -o "RUNNING generation 2 from step [0-9]* ([^)]*)" "$tmp/coordinator.log" || true)
final=$(grep -m1 -E "job $job (SUCCEEDED|FAILED|CANCELLED)" "$tmp/watch.log" || true)
result=$tmp/storage/jobs/$job/result.json
[[ -s "$result" ]] || die "no result.json (see $tmp)"
acc=$(json "$result" 'r["test_accuracy"]')
ref=$(json "$tmp/reference/jobs/$job/result.json" 'r["test_accuracy"]')

echo
echo "outcome:   ${final:-no end state seen (see $tmp)}"
printf 'shrink:    %.2f s from the kill to 2 workers running (rejoin grace %s s; goal: grace + 2 s)\n' \
  "$(echo "$t_gen2 - $t_kill" | bc)" "$grace"
echo "           ${gen2:-?}; ${shrink:-?}"
printf 'grow:      %.2f s from the new worker registering to 3 workers running; %s\n' \
  "$(echo "d = $t_gen3 - $t_reg; if (d < 0) 0 else d" | bc)" "${grow:-?}"
echo "history:   $(json "$result" '"; ".join("from step %d: %d workers" % (m["from_step"], m["workers"]) for m in r["membership"])')"
printf 'accuracy:  %.4f elastic, %.4f on 3 replicas throughout: |diff| %.4f (goal <= 0.005)\n' \
  "$acc" "$ref" "$(echo "d = $acc - $ref; if (d < 0) -d else d" | bc -l)"
echo "logs:      $tmp"
