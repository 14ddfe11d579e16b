#!/usr/bin/env bash
# Kill-and-rejoin drill on real data (issue 4's figures): the tutorial CNN of
# examples/mnist_cnn_multiworker.json on MNIST, or with --model bert the
# BERT example (examples/bert_mlm_brown.json) on the Brown corpus, on a
# local cluster of 2 workers. At
# --kill-step the worker holding rank 1 is killed with SIGKILL; a new worker
# process is started --restart-after seconds later. Prints
#
#   detection   kill -> the coordinator declares rank 1 lost (its log line)
#   rejoin      replacement registered -> generation 2 RUNNING
#   resume      replacement registered -> every rank restored and training
#   recovery    kill -> every rank restored (a generation from memory)
#   recomputed  steps between the restored checkpoint and the kill, or (from
#               a survivor's memory) the one step the kill broke
#   fingerprint the run's final parameters beside an uninterrupted run's
#               (`lockstep train` of the same job: 2 replicas in one process,
#               byte-identical to 2 ranks by construction)
#
# With --signal STOP the rank is stopped (SIGSTOP) instead: silence, not a
# broken stream. Once it is declared lost it gets SIGCONT, learns it was
# dropped, registers again and is the replacement itself.
#
# With --signal TERM it is shut down as Kubernetes does before a restart: it
# finishes its step, the ranks checkpoint that step, it leaves and exits 0;
# --restart-after seconds after its exit a new process under the same
# --name (a restarted pod) takes its place. Also prints the time from the
# SIGTERM to the exit and to training again.
#
#   bazel run //benchmarks:rejoin_drill [-- --kill-step 700 --signal KILL
#       --restart-after 1 --timeout 900 --no-reference --model mnist]
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bazel run //benchmarks:rejoin_drill -- [options]
  --kill-step N      kill rank 1 once the job is past step N (default 700)
  --signal KILL|STOP|TERM  how rank 1 fails: killed (a broken stream),
                     stopped (silence; it resumes with SIGCONT once lost), or
                     shut down gracefully and restarted (default KILL)
  --restart-after S  start the replacement S seconds after the kill (default 1)
  --timeout S        limit for the whole drill's processes (default 900)
  --no-reference     skip the uninterrupted reference run
  --model mnist|bert the job: the MNIST CNN (default) or the BERT example
Environment: LOCKSTEP_MNIST_DIR  folder with the four MNIST .gz files
  (default: <workspace>/../shared/datasets/mnist); LOCKSTEP_BROWN_DIR the
  Brown corpus' train.txt and valid.txt (--model bert)
EOF
}
die() {
  echo "rejoin_drill: $*" >&2
  exit 1
}

kill_step=700
signal=KILL
restart_after=1
run_timeout=900
reference=1
model=mnist
while (($# > 0)); do
  case "$1" in
    --kill-step) kill_step=${2:?}; shift 2 ;;
    --restart-after) restart_after=${2:?}; shift 2 ;;
    --signal) signal=${2:?}; shift 2 ;;
    --timeout) run_timeout=${2:?}; shift 2 ;;
    --no-reference) reference=0; shift ;;
    --model) model=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ "$kill_step" =~ ^[1-9][0-9]*$ && "$run_timeout" =~ ^[1-9][0-9]*$ ]] ||
  die "--kill-step and --timeout must be positive integers"
[[ "$signal" == KILL || "$signal" == STOP || "$signal" == TERM ]] ||
  die "--signal must be KILL, STOP or TERM"
[[ "$restart_after" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  die "--restart-after must be a number of seconds"
[[ "$model" == mnist || "$model" == bert ]] || die "--model must be mnist or bert"

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found; run through 'bazel run //benchmarks:rejoin_drill'"
if [[ "$model" == mnist ]]; then
  job=mnist_cnn_multiworker
  require_mnist rejoin_drill
else
  job=bert_mlm_brown
  require_brown rejoin_drill
fi
example=$(runfile "examples/$job.json") ||
  die "examples/$job.json not found in the runfiles"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-rejoin.XXXXXX")
pids=()
cleanup() {
  # Each recorded PID is timeout's: its child (the lockstep process) first,
  # or a SIGKILLed timeout leaves it running.
  local pid
  for pid in "${pids[@]}"; do
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT
start() {  # start LOG CMD...: background, bounded by --timeout, PID recorded
  local log=$1
  shift
  timeout -s KILL "$run_timeout" "$@" >"$log" 2>&1 &
  pids+=($!)
}
fingerprint() { sed -n 's/.*"fingerprint": *"\([0-9a-f]*\)".*/\1/p' "$1"; }

if [[ "$model" == mnist ]]; then
  sed "s#\"mnist/#\"$mnist/#" "$example" >"$tmp/job.json"
else
  sed "s#\"../../shared/datasets/brown/#\"$brown/#" "$example" >"$tmp/job.json"
fi

if ((reference)); then
  echo "reference: lockstep train (2 replicas, one process) ..."
  timeout -s KILL "$run_timeout" "$lockstep" train "$tmp/job.json" \
    --storage "$tmp/reference" --threads 1 >"$tmp/reference.log" 2>&1 ||
    die "the reference run failed: $(tail -3 "$tmp/reference.log")"
fi

echo "cluster: coordinator + 2 workers; kill rank 1 past step $kill_step ..."
start "$tmp/coordinator.log" "$lockstep" coordinator --listen 127.0.0.1:0 \
  --storage "$tmp/storage" --address-file "$tmp/address"
for _ in $(seq 100); do [[ -s "$tmp/address" ]] && break; sleep 0.1; done
[[ -s "$tmp/address" ]] || die "the coordinator did not start: $(cat "$tmp/coordinator.log")"
address=$(cat "$tmp/address")
for i in 1 2; do
  start "$tmp/worker$i.log" "$lockstep" worker --coordinator "$address" \
    --threads 1 --name "node$i"
done
"$lockstep" submit "$tmp/job.json" --coordinator "$address" >/dev/null

step=0
status=""
deadline=$((SECONDS + run_timeout))
while ((step <= kill_step)); do
  ((SECONDS < deadline)) || die "the job never passed step $kill_step"
  status=$("$lockstep" status "$job" --coordinator "$address")
  step=$(sed -n 's#.*step \([0-9]*\)/.*#\1#p' <<<"$status" | head -1)
  step=${step:-0}
  sleep 0.05
done
victim=$(sed -n 's/.*rank 1 w[0-9]* *[^ ]* pid \([0-9]*\).*/\1/p' <<<"$status" | head -1)
victim_id=$(sed -n 's/.*rank 1 \(w[0-9]*\) .*/\1/p' <<<"$status" | head -1)
[[ -n "$victim" && -n "$victim_id" ]] || die "no rank 1 in: $status"
victim_log=$(grep -l "as $victim_id " "$tmp"/worker*.log | head -1)
victim_name=node$(basename "$victim_log" .log | tr -dc 0-9)
kill "-$signal" "$victim"
t_kill=$(now)
echo "SIG$signal to rank 1 ($victim_id, pid $victim) at step ~$step"
t_exit=""
if [[ "$signal" == TERM ]]; then
  while kill -0 "$victim" 2>/dev/null; do
    ((SECONDS < deadline)) || die "rank 1 did not exit after SIGTERM"
    sleep 0.01
  done
  t_exit=$(now)
  sleep "$restart_after"
  start "$tmp/worker3.log" "$lockstep" worker --coordinator "$address" \
    --threads 1 --name "$victim_name"
  replacement_log=$tmp/worker3.log
elif [[ "$signal" == KILL ]]; then
  sleep "$restart_after"
  start "$tmp/worker3.log" "$lockstep" worker --coordinator "$address" --threads 1
  replacement_log=$tmp/worker3.log
else
  while ! grep -q ") lost: " "$tmp/coordinator.log"; do
    ((SECONDS < deadline)) || die "rank 1 was never declared lost"
    sleep 0.1
  done
  kill -CONT "$victim"
  replacement_log=$victim_log
fi
"$lockstep" watch "$job" --coordinator "$address" >"$tmp/watch.log" 2>&1 || true

t_lost=$(log_time "\) (lost|left): " "$tmp/coordinator.log") || die "no loss in the coordinator log"
t_reg=$(log_time "registering again|registered with" <(
  if [[ "$signal" != STOP ]]; then cat "$replacement_log"
  else grep -A1000 "registering again" "$replacement_log" | grep "registered with"; fi
)) || die "the replacement never registered"
t_gen2=$(log_time "RUNNING generation 2" "$tmp/coordinator.log") || die "generation 2 never ran"
t_resume=0
for f in "$tmp"/worker*.log; do
  t=$(log_time "restored .*resuming at step" "$f") || continue
  t_resume=$(echo "if ($t > $t_resume) $t else $t_resume" | bc)
done
restored=$(sed -n 's/.*RUNNING generation 2 from step \([0-9]*\).*/\1/p' \
  "$tmp/coordinator.log" | head -1)
recomputed=$(sed -n 's/.*steps \([0-9]*\)\.\.\([0-9]*\) are recomputed.*/\1 \2/p' \
  "$tmp/coordinator.log" | head -1)
final=$(grep -m1 -E "job $job (SUCCEEDED|FAILED|CANCELLED)" "$tmp/watch.log" || true)
fp=$(fingerprint "$tmp/storage/jobs/$job/result.json" 2>/dev/null || true)

echo
echo "outcome:       ${final:-no end state seen (see $tmp)}"
printf 'detection:     %.2f s after SIG%s (goal <= 3 s for a broken stream, <= 10 s for silence)\n' \
  "$(echo "$t_lost - $t_kill" | bc)" "$signal"
if [[ -n "$t_exit" ]]; then
  printf 'exit:          %.2f s from SIGTERM to the worker exiting (step finished, checkpoint saved)\n' \
    "$(echo "$t_exit - $t_kill" | bc)"
  printf 'back:          %.2f s from SIGTERM to the replacement training (restarted %s s after the exit)\n' \
    "$(echo "$t_resume - $t_kill" | bc)" "$restart_after"
fi
# Generation 2 may start within the Register call itself (the back-off
# already over), before the worker logs "registered": that is 0.
printf 'rejoin:        %.2f s from the replacement registering to generation 2\n' \
  "$(echo "d = $t_gen2 - $t_reg; if (d < 0) 0 else d" | bc)"
printf 'resume:        %.2f s from the replacement registering to every rank restored (goal <= 5 s)\n' \
  "$(echo "$t_resume - $t_reg" | bc)"
memory=$(sed -n "s/.*RUNNING generation 2 from step [0-9]* (\(rank [0-9]*'s memory; the latest checkpoint is step [0-9]*\)).*/\1/p" \
  "$tmp/coordinator.log" | head -1)
if [[ -n "$memory" ]]; then
  printf 'recovery:      %.2f s from SIG%s to every rank restored\n' \
    "$(echo "$t_resume - $t_kill" | bc)" "$signal"
  echo "recomputed:    1 step at most: restored step ${restored:-?} from $memory; the step the failure broke is done again"
elif [[ -n "$recomputed" ]]; then
  read -r from to <<<"$recomputed"
  echo "recomputed:    $((to - from)) steps (restored step $from, the failure at step $to)"
else
  echo "recomputed:    0 steps (restored step ${restored:-?}, the step it stopped at)"
fi
echo "fingerprint:   $fp (this run)"
if ((reference)); then
  ref=$(fingerprint "$tmp/reference/jobs/$job/result.json")
  echo "               $ref (uninterrupted)"
  [[ -n "$fp" && "$fp" == "$ref" ]] && echo "               EQUAL" || echo "               DIFFERENT"
fi
echo "logs:          $tmp"
