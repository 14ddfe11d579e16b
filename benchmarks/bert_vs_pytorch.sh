#!/usr/bin/env bash
# lockstep against PyTorch on the text model of examples/bert_mlm_brown.json
# (BERT-tiny size: 2 layers, hidden 128, 2 heads, intermediate 512,
# sequence 128, a vocabulary of 8192 learned from the Brown corpus' train.txt,
# AdamW with clipping and polynomial decay after warm-up), on the same
# batches: //benchmarks:text_batches writes the samples lockstep trains on
# (masks and order) and the PyTorch peer (bert_peer.py, torch_bert.py) reads
# them.
#
#   Speed: training samples/s and peak RSS, the same global batch (32)
#     lockstep train, 1 process, T threads    PyTorch, 1 process, T threads
#                                             (OpenBLAS on 1 thread and on T;
#                                             glibc malloc tuned)
#     lockstep cluster, 2 workers x 1 thread  PyTorch DDP (Gloo), 2 ranks x 1
#                                             (and with malloc tuned)
#   each against PyTorch's fastest row; peak RSS by peak_rss.py (getrusage
#   of each process; the largest worker or rank)
#   Learning: masked-token accuracy on valid.txt after each epoch
#     lockstep cluster 1 worker (batch 32), lockstep cluster 2 workers (16
#     each: the same global batch), PyTorch (one process)
#
#   bazel run //benchmarks:bert_vs_pytorch [-- --epochs 3 --steps 40
#       --threads 2 --repeat 1 --no-learning --no-speed --timeout 1800]
set -euo pipefail

readonly PY=/usr/bin/python3  # Debian's interpreter: the one with python3-torch

usage() {
  cat <<'USAGE'
usage: bazel run //benchmarks:bert_vs_pytorch -- [options]
  --epochs N      epochs of the learning runs (default 3)
  --steps N       timed steps of the speed runs (default 40; lockstep's
                  figure covers every step, PyTorch's skips 5 warm-up steps)
  --threads T     threads of the one-process rows (default 2)
  --repeat K      run the speed rows K times, round after round, and keep
                  each system's best (default 1; use 3 on a shared machine,
                  where other work lowers single runs)
  --no-learning   only the speed rows
  --no-speed      only the learning runs
  --timeout S     limit in seconds for each run's processes (default 1800)
Environment: LOCKSTEP_BROWN_DIR  folder with train.txt and valid.txt
  (default: <workspace>/../shared/datasets/brown)
USAGE
}

die() {
  echo "bert_vs_pytorch: $*" >&2
  exit 1
}

epochs=3
steps=40
threads=2
repeat=1
learning=1
speed=1
run_timeout=1800
while (($# > 0)); do
  case "$1" in
    --epochs | --steps | --threads | --timeout | --repeat)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      opt=$1 val=$2
      shift 2
      ;;
    --no-learning) learning=0; shift; continue ;;
    --no-speed) speed=0; shift; continue ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  [[ "$val" =~ ^[1-9][0-9]*$ ]] || die "$opt must be a positive integer, got '$val'"
  case "$opt" in
    --epochs) epochs=$val ;;
    --steps) steps=$val ;;
    --threads) threads=$val ;;
    --repeat) repeat=$val ;;
    --timeout) run_timeout=$val ;;
    *) usage >&2; die "unknown option: $opt" ;;
  esac
done

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found in the runfiles; run through" \
    "'bazel run //benchmarks:bert_vs_pytorch'"
batches_tool=$(runfile benchmarks/text_batches) || die "text_batches not in the runfiles"
peer=$(runfile benchmarks/bert_peer.py) || die "bert_peer.py not in the runfiles"
rss=$(runfile benchmarks/peak_rss.py) || die "peak_rss.py not in the runfiles"
summaries=$(runfile benchmarks/summaries.py) || die "summaries.py not in the runfiles"
example=$(runfile examples/bert_mlm_brown.json) ||
  die "examples/bert_mlm_brown.json not found in the runfiles"
require_brown bert_vs_pytorch
require_torch_gloo

work_dir lockstep-bert-bench

# write_job FILE NAME WORKERS BATCH STEPS|epochs: the example on absolute
# Brown paths; STEPS gives a speed job of that many steps, "epochs" the
# learning job ($epochs epochs, the decay over all their steps, $spe per
# epoch, as the example decays over its 3 epochs).
spe=0
write_job() {
  "$PY" - "$example" "$brown" "$epochs" "$spe" "$@" <<'PYEOF'
import json, os, sys
example, brown, epochs, per_epoch, path, name, workers, batch, steps = \
    sys.argv[1:]
with open(example) as f:
    job = json.load(f)
job["name"] = name
job["data"]["train_path"] = os.path.join(brown, "train.txt")
job["data"]["test_path"] = os.path.join(brown, "valid.txt")
job["batch_size_per_replica"] = int(batch)
job["cluster"]["workers"] = int(workers)
job["checkpoint"] = {"every_steps": 0, "keep": 1}
if steps == "epochs":
    job["epochs"] = int(epochs)
    job["lr_schedule"]["decay_steps"] = int(epochs) * int(per_epoch)
else:
    job.pop("epochs", None)
    job["steps"] = int(steps)
with open(path, "w") as f:
    json.dump(job, f, indent=1)
PYEOF
}

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
info=$("$PY" "$peer" --info)
echo "lockstep vs PyTorch on a BERT masked LM (examples/bert_mlm_brown.json), Brown corpus"
echo "cpu: ${cpu:-unknown}, $(nproc) cores; load average before start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $(json_get - torch <<<"$info"), BLAS: $(json_get - blas <<<"$info"); $("$lockstep" version)"
echo "command: bazel run //benchmarks:bert_vs_pytorch -- --epochs $epochs --steps $steps --threads $threads --repeat $repeat$( ((learning)) || echo ' --no-learning')$( ((speed)) || echo ' --no-speed')"

# --- The batches both sides train on. -----------------------------------------
mkdir -p "$tmp/batches" "$tmp/jobs"
write_job "$tmp/jobs/data.json" bert_data 1 32 1
"$batches_tool" "$tmp/jobs/data.json" "$tmp/batches" "$epochs" ||
  die "text_batches failed"
spe=$(json_get "$tmp/batches/meta.json" steps_per_epoch)
write_job "$tmp/jobs/learn1.json" bert_learn1 1 32 epochs
write_job "$tmp/jobs/learn2.json" bert_learn2 2 16 epochs
echo "data: $(json_get "$tmp/batches/meta.json" train_samples) training sequences of 128 tokens" \
  "($spe steps of 32 per epoch), $(json_get "$tmp/batches/meta.json" test_samples) test sequences"
echo

# --- Runs. ----------------------------------------------------------------------

# run_train NAME THREADS: `lockstep train` on jobs/NAME.json; sets sps, rss.
run_train() {
  local name=$1 t=$2 dir=$tmp/$1
  rm -rf "$dir"  # an earlier round's storage, address and logs
  mkdir -p "$dir"
  start_bg "$dir/train.log" "$rss" "$dir/rss" "$lockstep" train \
    "$tmp/jobs/$name.json" --storage "$dir/storage" --threads "$t"
  wait_bg "${pids[-1]}" || { show_logs "$dir/train.log"; die "lockstep train $name failed"; }
  sps=$(json_get "$dir/storage/jobs/$(json_get "$tmp/jobs/$name.json" name)/result.json" samples_per_sec)
  rss_mib=$(cat "$dir/rss")
}

# run_cluster NAME WORKERS: coordinator + WORKERS x 1 thread; sets sps, rss
# (the largest worker's), job_dir.
run_cluster() {
  local name=$1 w=$2 dir=$tmp/$1 i
  rm -rf "$dir"  # an earlier round's storage, address and logs
  mkdir -p "$dir"
  start_cluster "$dir" "$w" "$(((threads + w - 1) / w))" "$rss" "$dir/rss."
  start_bg "$dir/submit.log" "$lockstep" submit "$tmp/jobs/$name.json" \
    --coordinator "$cluster_addr" --wait
  if ! wait_bg "${pids[-1]}"; then
    show_logs "$dir/submit.log" "$dir/coordinator.log" "$dir"/worker*.log
    die "the $w-worker cluster failed on $name"
  fi
  stop_all  # the workers' peak RSS is written as they exit
  job_dir=$dir/storage/jobs/$(json_get "$tmp/jobs/$name.json" name)
  sps=$(json_get "$job_dir/result.json" samples_per_sec)
  rss_mib=0
  for ((i = 0; i < w; i++)); do
    rss_mib=$("$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' \
      "$rss_mib" "$(cat "$dir/rss.$i")")
  done
}

# run_torch NAME WORLD THREADS BLAS_THREADS default|tuned [EXTRA...]: sets
# sps, rss. "tuned": glibc malloc keeps freed memory (MALLOC_TUNED).
run_torch() {
  local name=$1 w=$2 t=$3 bt=$4 malloc=$5 dir=$tmp/$1 r
  shift 5
  rm -rf "$dir"  # an earlier round's rendezvous file and logs
  local envs=(OPENBLAS_NUM_THREADS="$bt" GLOO_SOCKET_IFNAME="${GLOO_SOCKET_IFNAME:-lo}")
  [[ "$malloc" == default ]] || envs+=(GLIBC_TUNABLES="$MALLOC_TUNED")
  mkdir -p "$dir"
  local rank_pids=()
  for ((r = 0; r < w; r++)); do
    local extra=()
    ((w == 1)) || extra=(--rank "$r" --world-size "$w" --rendezvous-file "$dir/rdv")
    start_bg "$dir/rank$r.log" env "${envs[@]}" "$rss" "$dir/rss.$r" \
      "$PY" "$peer" --job "$tmp/jobs/data.json" --batches "$tmp/batches" \
      --steps "$steps" --threads "$t" "${extra[@]}" "$@"
    rank_pids+=("${pids[-1]}")
  done
  local pid failed=0
  for pid in "${rank_pids[@]}"; do wait_bg "$pid" || failed=1; done
  ((failed == 0)) || { show_logs "$dir"/rank*.log; die "the PyTorch peer failed ($name)"; }
  local out
  out=$(grep '^{' "$dir/rank0.log" | tail -n 1)
  sps=$(json_get - samples_per_sec <<<"$out")
  rss_mib=0
  for ((r = 0; r < w; r++)); do
    rss_mib=$("$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' \
      "$rss_mib" "$(cat "$dir/rss.$r")")
  done
}

rows=$tmp/rows.tsv
: >"$rows"
row() {  # row KEY LABEL: the last run's figures into the table (the
  # table keeps each key's best run)
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$sps" "$rss_mib" >>"$rows"
  echo "  $2: $(commas "$sps") samples/s, peak RSS $(commas "$rss_mib") MiB" >&2
}

if ((speed)); then
  write_job "$tmp/jobs/speed1.json" bert_speed1 1 32 "$steps"
  write_job "$tmp/jobs/speed2.json" bert_speed2 2 16 "$steps"
  for ((round = 1; round <= repeat; round++)); do
    echo "speed runs ($steps steps each), round $round of $repeat ..." >&2
    run_train speed1 "$threads"
    row lockstep1 "lockstep train, 1 process, $threads threads"
    run_torch torch1 1 "$threads" 1 default --warmup 5
    row torch1 "PyTorch, 1 process, $threads threads (OpenBLAS 1 thread)"
    if ((threads > 1)); then
      run_torch torch1b 1 "$threads" "$threads" default --warmup 5
      row torch1b "PyTorch, 1 process, $threads threads (OpenBLAS $threads threads)"
    fi
    run_torch torch1m 1 "$threads" 1 tuned --warmup 5
    row torch1m "PyTorch, 1 process, $threads threads, malloc tuned"
    run_cluster speed2 2
    row lockstep2 "lockstep cluster, 2 workers x 1 thread (gRPC ring)"
    run_torch ddp2 2 1 1 default --warmup 5
    row ddp2 "PyTorch DDP (Gloo), 2 ranks x 1 thread"
    run_torch ddp2m 2 1 1 tuned --warmup 5
    row ddp2m "PyTorch DDP (Gloo), 2 ranks x 1 thread, malloc tuned"
  done
fi

if ((learning)); then
  echo "learning runs ($epochs epochs each) ..." >&2
  run_cluster learn1 1
  "$summaries" "$job_dir/summaries" eval/accuracy eval/loss >"$tmp/learn1.json"
  echo "  lockstep 1 worker: $(commas "$sps") samples/s" >&2
  run_cluster learn2 2
  "$summaries" "$job_dir/summaries" eval/accuracy eval/loss >"$tmp/learn2.json"
  echo "  lockstep 2 workers: $(commas "$sps") samples/s" >&2
  start_bg "$tmp/torch_learn.log" env OPENBLAS_NUM_THREADS=1 "$PY" "$peer" \
    --job "$tmp/jobs/learn1.json" --batches "$tmp/batches" --learn \
    --epochs "$epochs" --threads "$threads"
  wait_bg "${pids[-1]}" || { show_logs "$tmp/torch_learn.log"; die "the PyTorch learning run failed"; }
  grep '^{' "$tmp/torch_learn.log" >"$tmp/torch_learn.jsonl"
  echo "  PyTorch: done" >&2
fi
echo >&2

# --- Tables. --------------------------------------------------------------------
"$PY" - "$rows" "$tmp" "$spe" "$epochs" "$learning" "$repeat" <<'PYEOF'
import json, os, sys
rows_path, tmp, spe, epochs, learning, repeat = sys.argv[1:]
spe, epochs = int(spe), int(epochs)
rows = {}
for line in open(rows_path).read().splitlines():
    key, label, sps, rss = line.split("\t")
    if key not in rows or float(sps) > rows[key][1]:  # the best round
        rows[key] = (label, float(sps), float(rss))
if rows:
    fmt = "{:<62} {:>10} {:>14}"
    print("Speed: training samples/s (higher is better), global batch 32"
          + ("" if repeat == "1" else f", the best of {repeat} rounds"))
    print(fmt.format("system", "samples/s", "peak RSS MiB"))
    for key, (label, sps, rss) in rows.items():
        print(fmt.format(label, f"{sps:,.1f}", f"{rss:,.0f}"))
    def ratio(a, b):
        return rows[a][1] / rows[b][1]
    def fastest(*keys):
        return max((k for k in keys if k in rows), key=lambda k: rows[k][1])
    torch1 = fastest("torch1", "torch1b", "torch1m")
    ddp2 = fastest("ddp2", "ddp2m")
    for text, a, b, goal in [
            ("lockstep 1 process / PyTorch's fastest 1-process row",
             "lockstep1", torch1, 1.0),
            ("lockstep 2 workers / PyTorch DDP's fastest row", "lockstep2",
             ddp2, 1.2),
            ("lockstep 2 workers / lockstep 1 process", "lockstep2", "lockstep1", None)]:
        if a in rows and b in rows:
            r = ratio(a, b)
            mark = "" if goal is None else \
                f"  (goal >= {goal}x: {'MET' if r >= goal else 'NOT MET'})"
            print(f"{text + ':':<58} {r:.2f}x{mark}")
    print()
if learning == "1":
    def lockstep_epochs(name):
        s = json.load(open(os.path.join(tmp, name + ".json")))
        acc = s.get("eval/accuracy", {})
        return [acc.get(str(e * spe)) for e in range(1, epochs + 1)]
    one, two = lockstep_epochs("learn1"), lockstep_epochs("learn2")
    torch = [json.loads(l)["test_accuracy"]
             for l in open(os.path.join(tmp, "torch_learn.jsonl"))]
    print("Learning: masked-token accuracy on valid.txt after each epoch "
          "(the same batches and masks)")
    fmt = "{:>5} {:>18} {:>19} {:>9}"
    print(fmt.format("epoch", "lockstep 1 worker", "lockstep 2 workers",
                     "PyTorch"))
    f = lambda v: "-" if v is None else f"{v:.4f}"
    for e in range(epochs):
        print(fmt.format(e + 1, f(one[e]), f(two[e]),
                         f(torch[e] if e < len(torch) else None)))
    if None not in (one[-1], two[-1]) and len(torch) == epochs:
        d1, d2 = one[-1] - torch[-1], two[-1] - one[-1]
        print(f"lockstep - PyTorch after epoch {epochs}: {d1:+.4f} "
              f"(goal >= -0.01: {'MET' if d1 >= -0.01 else 'NOT MET'})")
        print(f"2 workers - 1 worker after epoch {epochs}: {d2:+.4f} "
              f"(goal within 0.01: {'MET' if abs(d2) <= 0.01 else 'NOT MET'})")
PYEOF
