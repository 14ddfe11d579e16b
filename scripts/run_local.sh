#!/usr/bin/env bash
# The main command: installs what is missing, builds lockstep, starts a local
# cluster (a coordinator and two worker daemons on 127.0.0.1) and submits the
# default job (a learnable built-in synthetic dataset), streaming progress
# until it ends. The processes are stopped on exit. Installs only what
# building and running need (scripts/install_deps.sh --run).
# Usage: scripts/run_local.sh [JOB.json] [--workers N] [--replicas N] [--resume]
# Results: ./lockstep_storage/jobs/NAME/{result.json,checkpoints,summaries}
# (LOCKSTEP_STORAGE overrides the folder); daemon logs in the same folder.
# Each run starts afresh: an earlier run's jobs and coordinator journal are
# moved to lockstep_storage/previous-<time>/ (never deleted); --resume keeps
# them (the coordinator resumes its journal, the job its checkpoint).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --run
bazel build //client:lockstep
bin=bazel-bin/client/lockstep

job=examples/default.json
workers=2
replicas=1
resume=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --resume) resume=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) job="$1"; shift ;;
  esac
done
storage="${LOCKSTEP_STORAGE:-lockstep_storage}"
mkdir -p "$storage"
if [ "$resume" = 0 ] && { [ -e "$storage/jobs" ] || [ -e "$storage/coordinator" ]; }; then
  previous="$storage/previous-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$previous"
  for d in jobs coordinator; do
    if [ -e "$storage/$d" ]; then mv "$storage/$d" "$previous/"; fi
  done
  echo "an earlier run's results were moved to $previous (--resume keeps them)"
fi
logs="$storage/logs"
mkdir -p "$logs"
addr_file="$logs/coordinator.address"
rm -f "$addr_file"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The dashboard and metrics on a free port (printed below).
"$bin" coordinator --listen 127.0.0.1:0 --address-file "$addr_file" \
  --storage "$storage" --http 127.0.0.1:0 >"$logs/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$addr_file" ] && break; sleep 0.1; done
if [ ! -s "$addr_file" ]; then
  echo "the coordinator did not start; see $logs/coordinator.log" >&2
  cat "$logs/coordinator.log" >&2
  exit 1
fi
addr="$(cat "$addr_file")"
# Split the cores between the workers (each runs its replicas on them).
cores="$(nproc)"
threads=$(( cores / workers )); [ "$threads" -ge 1 ] || threads=1
for i in $(seq 1 "$workers"); do
  "$bin" worker --coordinator "$addr" --replicas "$replicas" \
    --threads "$threads" >"$logs/worker$i.log" 2>&1 &
  pids+=($!)
done
echo "local cluster: coordinator $addr, $workers workers x $replicas replicas" \
  "($threads threads each); logs in $logs/"
dashboard=$(sed -n 's/.*dashboard on \(http:[^ ]*\).*/\1/p' "$logs/coordinator.log")
[ -n "$dashboard" ] && echo "dashboard: $dashboard (metrics at ${dashboard}metrics)"
# submit --wait ends with the job's result in one line (or why it failed);
# `lockstep status NAME --coordinator ADDR` would show it again.
exec_status=0
"$bin" submit "$job" --coordinator "$addr" --wait || exec_status=$?
exit $exec_status
