#!/usr/bin/env bash
# lockstep against PyTorch on the text model of examples/bert_mlm_brown.json
# (BERT-tiny size: 2 layers, hidden 128, 2 heads, intermediate 512,
# sequence 128, a vocabulary of 8192 learned from the Brown corpus' train.txt,
# AdamW with clipping and polynomial decay after warm-up), on the same
# batches: //benchmarks:data_batches writes the samples lockstep trains on
# (masks and order) and the PyTorch peer (bert_peer.py, torch_bert.py) reads
# them.
#
#   Speed: training samples/s and peak RSS, the same global batch (32)
#     lockstep train, 1 process, T threads    PyTorch, 1 process, T threads
#     lockstep train of the same module
#       exported as ONNX (torch_bert.py,
#       torch.onnx.export), 1 process
#                                             (OpenBLAS on 1 thread and on T;
#                                             glibc malloc tuned)
#     lockstep cluster, 2 workers x 1 thread  PyTorch DDP (Gloo), 2 ranks x 1
#                                             (and with malloc tuned)
#   each against PyTorch's fastest row; peak RSS by peak_rss.py (getrusage
#   of each process; the largest worker or rank)
#   Learning: masked-token accuracy on valid.txt after each epoch
#     lockstep cluster 1 worker (batch 32), lockstep cluster 2 workers (16
#     each: the same global batch), lockstep cluster 1 worker training the
#     module exported as ONNX from lockstep's initial weights (its dropout
#     masks its own), PyTorch (one process), for each seed of
#     --seeds: the job's seed (initial weights, data order, masks, dropout);
#     lockstep writes its initial weights (`lockstep train --stop-after-steps
#     0`: a step-0 checkpoint) and PyTorch starts from them (bert_peer.py
#     --init, loaded by name), and both train on that seed's batches. The
#     table gives each figure's mean and (min to max) range over the seeds.
#
#   bazel run //benchmarks:bert_vs_pytorch [-- --epochs 3 --steps 40
#       --threads 2 --repeat 1 --seeds 1,2,3 --no-learning --no-speed
#       --timeout 1800]
#   On a GPU (a --config=cuda build, a torch with CUDA):
#   LOCKSTEP_BENCH_PYTHON=/path/to/python bazel run --config=cuda \
#       //benchmarks:bert_vs_pytorch -- --device cuda:0 --batch 32,256
#     the one-process speed rows on that GPU, FP32 (TF32 off on both sides),
#     for each global batch of --batch: lockstep train --devices cuda:0
#     against bert_peer.py --device cuda:0 on the same batches
# A PyTorch on a slow BLAS (not OpenBLAS or MKL) stops the run: the peer
# exits 3 and nothing is measured.
set -euo pipefail

# Debian's interpreter (the one with python3-torch) unless named.
readonly PY=${LOCKSTEP_BENCH_PYTHON:-/usr/bin/python3}

usage() {
  cat <<'USAGE'
usage: bazel run //benchmarks:bert_vs_pytorch -- [options]
  --epochs N      epochs of the learning runs (default 3)
  --steps N       timed steps of the speed runs (default 40), after 5
                  untimed warm-up steps on the 2-rank rows of both sides
                  (the cluster benchmarks' timing rule: bench_lib.sh's
                  step_times_rate); the one-process lockstep row covers
                  every step, PyTorch's skips 5 warm-up steps
  --threads T     threads of the one-process rows (default 2)
  --repeat K      run the speed rows K times, round after round, and keep
                  each system's best (default 1; use 3 on a shared machine,
                  where other work lowers single runs)
  --seeds LIST    the learning runs' seeds, comma-separated (default 1,2,3);
                  the table reports mean and range over them
  --no-learning   only the speed rows
  --no-speed      only the learning runs
  --timeout S     limit in seconds for each run's processes (default 1800)
  --device D      cpu (default) or cuda:N: with cuda:N, only the one-process
                  speed rows, on that GPU, lockstep (--config=cuda build)
                  against PyTorch (LOCKSTEP_BENCH_PYTHON's torch with CUDA)
  --batch LIST    the speed rows' global batches, comma-separated (default
                  32, the example's)
  --tf32          with cuda:N: TF32 tensor cores on both sides (the job's
                  cluster.allow_tf32, torch's allow_tf32), not FP32
  --bf16          only the one-process speed rows: lockstep fp32 and
                  "precision": "bf16" against PyTorch fp32 and
                  torch.autocast(bfloat16), on the CPU or with cuda:N per
                  batch
  --fp16          with cuda:N: also "precision": "fp16" (loss scaling)
                  against torch.autocast(float16) with GradScaler
  --link RATE     root: only the 2-rank speed rows (no learning runs), every
                  rank on a host of its own (network namespaces, the
                  coordinator with worker 0) over links shaped to RATE
                  (1gbit, 10gbit) in both directions (bench_lib.sh netns_up)
Environment: LOCKSTEP_BROWN_DIR  folder with train.txt and valid.txt
  (default: <workspace>/../shared/datasets/brown)
  LOCKSTEP_BENCH_PYTHON  the PyTorch peer's interpreter (default /usr/bin/python3)
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
tf32=0
bf16=0
fp16=0
run_timeout=1800
seeds=1,2,3
link=""
device=cpu
batches=32
while (($# > 0)); do
  case "$1" in
    --seeds)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      seeds=$2
      shift 2
      continue
      ;;
    --seeds=*) seeds=${1#*=}; shift; continue ;;
    --link)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      link=$2
      shift 2
      continue
      ;;
    --link=*) link=${1#*=}; shift; continue ;;
    --device | --batch)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      [[ "$1" == --device ]] && device=$2 || batches=$2
      shift 2
      continue
      ;;
    --epochs | --steps | --threads | --timeout | --repeat)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      opt=$1 val=$2
      shift 2
      ;;
    --no-learning) learning=0; shift; continue ;;
    --tf32) tf32=1; shift; continue ;;
    --bf16) bf16=1; shift; continue ;;
    --fp16) fp16=1; shift; continue ;;
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
[[ "$seeds" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  die "--seeds: expected comma-separated integers >= 0, got '$seeds'"
IFS=, read -r -a seeds_arr <<<"$seeds"
[[ -z "$link" ]] || learning=0  # the learning runs do not depend on the link
[[ "$device" == cpu || "$device" =~ ^cuda:[0-9]+$ ]] ||
  die "--device: expected cpu or cuda:N, got '$device'"
[[ "$batches" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  die "--batch: expected comma-separated positive integers, got '$batches'"
IFS=, read -r -a batches_arr <<<"$batches"
if [[ "$device" != cpu ]]; then
  [[ -z "$link" ]] || die "--device cuda:N and --link do not go together"
  learning=0  # the GPU rows are speed rows
elif ((tf32)); then
  die "--tf32 goes with --device cuda:N"
fi
if ((bf16)); then
  [[ -z "$link" ]] || die "--bf16 is one-process rows (no --link)"
  learning=0
fi
if ((fp16)); then
  [[ "$device" != cpu ]] || die "--fp16 runs on a GPU only (--device cuda:N)"
fi

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
[[ -z "$link" ]] || netns_check "$link" || exit 1
lockstep=$(runfile client/lockstep) ||
  die "client/lockstep not found in the runfiles; run through" \
    "'bazel run //benchmarks:bert_vs_pytorch'"
batches_tool=$(runfile benchmarks/data_batches) || die "data_batches not in the runfiles"
peer=$(runfile benchmarks/bert_peer.py) || die "bert_peer.py not in the runfiles"
exporter=$(runfile tests/torch_onnx_text_reference.py) ||
  die "torch_onnx_text_reference.py not in the runfiles"
rss=$(runfile benchmarks/peak_rss.py) || die "peak_rss.py not in the runfiles"
summaries=$(runfile benchmarks/summaries.py) || die "summaries.py not in the runfiles"
tables=$(runfile benchmarks/bert_tables.py) || die "bert_tables.py not in the runfiles"
example=$(runfile examples/bert_mlm_brown.json) ||
  die "examples/bert_mlm_brown.json not found in the runfiles"
require_brown bert_vs_pytorch
require_torch_gloo

work_dir lockstep-bert-bench

# write_job FILE NAME WORKERS BATCH STEPS|epochs: the example on absolute
# Brown paths; STEPS gives a speed job of that many steps, "epochs" the
# learning job ($epochs epochs, the decay over all their steps, $spe per
# epoch, as the example decays over its 3 epochs). The job's seed is
# $job_seed when set, else the example's.
spe=0
job_seed=
job_compression=none
job_precision=fp32
write_job() {
  "$PY" - "$example" "$brown" "$epochs" "$spe" "$job_seed" "$job_compression" "$tf32" "$job_precision" "$@" <<'PYEOF'
import json, os, sys
example, brown, epochs, per_epoch, seed, compression, tf32, precision, \
    path, name, workers, batch, steps = sys.argv[1:]
with open(example) as f:
    job = json.load(f)
job["name"] = name
if seed:
    job["seed"] = int(seed)
job["data"]["train_path"] = os.path.join(brown, "train.txt")
job["data"]["test_path"] = os.path.join(brown, "valid.txt")
job["batch_size_per_replica"] = int(batch)
job["cluster"]["workers"] = int(workers)
job["checkpoint"] = {"every_steps": 0, "keep": 1}
if compression != "none":
    job["cluster"]["compression"] = compression
if tf32 == "1":
    job["cluster"]["allow_tf32"] = True
if precision != "fp32":
    job["precision"] = precision
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

# export_onnx DIR [--init MODEL.safetensors]: torch_bert.py's module at the
# example's sizes (seeded, or from those weights by name) as DIR/model.onnx.
export_onnx() {
  local out=$1
  shift
  "$PY" "$exporter" --out "$out" --export-only --vocab 8192 \
    --hidden 128 --layers 2 --heads 2 --intermediate 512 --length 128 \
    --predictions 20 --max-positions 128 --dropout 0.1 --std 0.02 "$@" \
    >"$out.log" 2>&1 ||
    { show_logs "$out.log"; die "the ONNX export failed"; }
}

# onnx_job JOB OUT NAME GRAPH: JOB with the graph as its model, its four
# inputs fed by the text fields of their names.
onnx_job() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
job = json.load(open(sys.argv[1]))
job["name"] = sys.argv[3]
job["model"] = {"onnx": sys.argv[4], "input": [
    "token_ids", "segment_ids", "padding_mask", "mask_positions"]}
json.dump(job, open(sys.argv[2], "w"), indent=1)
PYEOF
}

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
# Exits 3 (a slow BLAS: the comparison would be invalid) before anything runs.
info=$("$PY" "$peer" --info --device "$device") ||
  peer_failed $? "$PY bert_peer.py --info --device $device"
echo "lockstep vs PyTorch on a BERT masked LM (examples/bert_mlm_brown.json), Brown corpus"
echo "cpu: ${cpu:-unknown}, $(nproc) cores; load average before start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $(json_get - torch <<<"$info"), BLAS: $(json_get - blas <<<"$info"); $("$lockstep" version)"
if [[ "$device" != cpu ]]; then
  echo "$device: $(json_get - gpu <<<"$info"), torch CUDA $(json_get - cuda <<<"$info"); $( ((tf32)) && echo "TF32 on both sides (cluster.allow_tf32, torch allow_tf32)" || echo "FP32, TF32 off on both sides")"
  echo "per row: lockstep train JOB --devices $device (one replica; batches staged pinned one step ahead) against"
  echo "         $PY bert_peer.py --device $device (PyTorch eager; each epoch's batches on the GPU before the timed steps)"
fi
echo "command: bazel run$([[ "$device" == cpu ]] || echo ' --config=cuda') //benchmarks:bert_vs_pytorch -- --epochs $epochs --steps $steps --threads $threads --repeat $repeat --seeds $seeds$( ((learning)) || echo ' --no-learning')$( ((speed)) || echo ' --no-speed')${link:+ --link $link}$([[ "$device" == cpu ]] || echo " --device $device")$([[ "$batches" == 32 ]] || echo " --batch $batches")$( ((tf32)) && echo " --tf32")$( ((bf16)) && echo " --bf16")$( ((fp16)) && echo " --fp16")"
if [[ -n "$link" ]]; then
  netns_up 2 "$link" || die "--link: could not make the network namespaces"
  echo "every rank on a host of its own (network namespace), links shaped to $link (tbf, both directions); the 2-rank speed rows only"
fi

# --- The batches both sides train on. -----------------------------------------
# make_batches B: the batches of global batch B in $tmp/batches_bB (data_bB.json).
make_batches() {
  mkdir -p "$tmp/batches_b$1" "$tmp/jobs"
  write_job "$tmp/jobs/data_b$1.json" bert_data 1 "$1" 1
  "$batches_tool" "$tmp/jobs/data_b$1.json" "$tmp/batches_b$1" "$epochs" ||
    die "data_batches failed (batch $1)"
}
make_batches 32
ln -s "$tmp/batches_b32" "$tmp/batches"
cp "$tmp/jobs/data_b32.json" "$tmp/jobs/data.json"
spe=$(json_get "$tmp/batches/meta.json" steps_per_epoch)
echo "data: $(json_get "$tmp/batches/meta.json" train_samples) training sequences of 128 tokens" \
  "($spe steps of 32 per epoch), $(json_get "$tmp/batches/meta.json" test_samples) test sequences"
echo

# --- Runs. ----------------------------------------------------------------------

# run_train NAME THREADS [EXTRA...]: `lockstep train` on jobs/NAME.json; sets
# sps, rss.
run_train() {
  local name=$1 t=$2 dir=$tmp/$1
  shift 2
  rm -rf "$dir"  # an earlier round's storage, address and logs
  mkdir -p "$dir"
  start_bg "$dir/train.log" "$rss" "$dir/rss" "$lockstep" train \
    "$tmp/jobs/$name.json" --storage "$dir/storage" --threads "$t" "$@"
  wait_bg "${pids[-1]}" || { show_logs "$dir/train.log"; die "lockstep train $name failed"; }
  sps=$(json_get "$dir/storage/jobs/$(json_get "$tmp/jobs/$name.json" name)/result.json" samples_per_sec)
  rss_mib=$(cat "$dir/rss")
}

# run_cluster NAME WORKERS [WARMUP]: coordinator + WORKERS x 1 thread; sets
# sps, rss (the largest worker's), job_dir. With WARMUP, sps is the
# cluster benchmarks' timing rule, as the DDP peer times itself: global
# batch 32 x the steps after step WARMUP over the wall time from its end to
# the last step's end, the slowest rank's (the workers' step times); without,
# result.json's samples/s over every step's own time.
run_cluster() {
  local name=$1 w=$2 dir=$tmp/$1 i
  rm -rf "$dir"  # an earlier round's storage, address and logs
  mkdir -p "$dir"
  start_cluster "$dir" "$w" "$(((threads + w - 1) / w))" "$rss" "$dir/rss."
  local in0=()
  [[ -z "$link" ]] || in0=(ip netns exec "$netns_prefix-h0")
  start_bg "$dir/submit.log" "${in0[@]}" "$lockstep" submit "$tmp/jobs/$name.json" \
    --coordinator "$cluster_addr" --wait
  if ! wait_bg "${pids[-1]}"; then
    show_logs "$dir/submit.log" "$dir/coordinator.log" "$dir"/worker*.log
    die "the $w-worker cluster failed on $name"
  fi
  stop_all  # the workers' peak RSS is written as they exit
  job_dir=$dir/storage/jobs/$(json_get "$tmp/jobs/$name.json" name)
  sps=$(json_get "$job_dir/result.json" samples_per_sec)
  if (($# > 2)); then
    echo "  (result.json, every step's own time: $(commas "$sps") samples/s;" \
      "$(step_times_note "$dir" "$3" 32))" >&2
    sps=$(step_times_rate "$dir" "$3" 32) || exit 1
  fi
  rss_mib=0
  for ((i = 0; i < w; i++)); do
    rss_mib=$("$PY" -c 'import sys; print(max(map(float, sys.argv[1:])))' \
      "$rss_mib" "$(cat "$dir/rss.$i")")
  done
}

# run_torch NAME WORLD THREADS BLAS_THREADS default|tuned [EXTRA...]: sets
# sps, rss. "tuned": glibc malloc keeps freed memory (MALLOC_TUNED). The
# batches are $torch_batches (default: global batch 32's).
torch_batches=
run_torch() {
  local name=$1 w=$2 t=$3 bt=$4 malloc=$5 dir=$tmp/$1 r
  shift 5
  rm -rf "$dir"  # an earlier round's rendezvous file and logs
  local envs=(OPENBLAS_NUM_THREADS="$bt" GLOO_SOCKET_IFNAME="${GLOO_SOCKET_IFNAME:-lo}")
  [[ "$malloc" == default ]] || envs+=(GLIBC_TUNABLES="$MALLOC_TUNED")
  mkdir -p "$dir"
  local rank_pids=()
  for ((r = 0; r < w; r++)); do
    local extra=() in=() renv=("${envs[@]}")
    ((w == 1)) || extra=(--rank "$r" --world-size "$w" --rendezvous-file "$dir/rdv")
    if [[ -n "$link" ]]; then
      in=(ip netns exec "$netns_prefix-h$r")
      renv=(OPENBLAS_NUM_THREADS="$bt" GLOO_SOCKET_IFNAME=eth0)
      [[ "$malloc" == default ]] || renv+=(GLIBC_TUNABLES="$MALLOC_TUNED")
      extra+=(--host "${netns_addr[0]}")
    fi
    start_bg "$dir/rank$r.log" "${in[@]}" env "${renv[@]}" "$rss" "$dir/rss.$r" \
      "$PY" "$peer" --job "$tmp/jobs/data.json" --batches "${torch_batches:-$tmp/batches}" \
      --steps "$steps" --threads "$t" "${extra[@]}" "$@"
    rank_pids+=("${pids[-1]}")
  done
  wait_ranks "$dir" "$name" "${rank_pids[@]}"
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

if ((speed)) && [[ "$device" != cpu ]]; then
  for b in "${batches_arr[@]}"; do
    [[ -d "$tmp/batches_b$b" ]] || make_batches "$b"
    write_job "$tmp/jobs/gpu_b$b.json" "bert_gpu_b$b" 1 "$b" "$steps"
    for prec in $( ((bf16)) && echo bf16) $( ((fp16)) && echo fp16); do
      job_precision=$prec
      write_job "$tmp/jobs/gpu_b${b}_$prec.json" "bert_gpu_b${b}_$prec" 1 "$b" "$steps"
    done
    job_precision=fp32
  done
  for ((round = 1; round <= repeat; round++)); do
    echo "speed runs on $device ($steps steps each), round $round of $repeat ..." >&2
    for b in "${batches_arr[@]}"; do
      run_train "gpu_b$b" "$threads" --devices "$device"
      row "lockstep_b$b" "lockstep train on $device, global batch $b"
      torch_batches=$tmp/batches_b$b
      tf32_flag=()
      ((tf32)) && tf32_flag=(--tf32)
      run_torch "torch_b$b" 1 "$threads" 1 default --warmup 5 --device "$device" "${tf32_flag[@]}"
      torch_batches=
      row "torch_b$b" "PyTorch eager on $device, global batch $b"
      for prec in $( ((bf16)) && echo bf16) $( ((fp16)) && echo fp16); do
        run_train "gpu_b${b}_$prec" "$threads" --devices "$device"
        row "lockstep_b${b}_$prec" "lockstep train $prec on $device, global batch $b"
        torch_batches=$tmp/batches_b$b
        run_torch "torch_b${b}_$prec" 1 "$threads" 1 default --warmup 5 --device "$device" --autocast "$prec"
        torch_batches=
        row "torch_b${b}_$prec" "PyTorch autocast $prec on $device, global batch $b"
      done
    done
  done
elif ((speed)) && ((bf16)); then
  write_job "$tmp/jobs/speed1.json" bert_speed1 1 32 "$steps"
  job_precision=bf16
  write_job "$tmp/jobs/speed1_bf16.json" bert_speed1_bf16 1 32 "$steps"
  job_precision=fp32
  for ((round = 1; round <= repeat; round++)); do
    echo "bf16 speed runs ($steps steps each), round $round of $repeat ..." >&2
    run_train speed1 "$threads"
    row lockstep1 "lockstep train fp32, 1 process, $threads threads"
    run_train speed1_bf16 "$threads"
    row lockstep1_bf16 "lockstep train bf16, 1 process, $threads threads"
    run_torch torch1 1 "$threads" 1 default --warmup 5
    row torch1 "PyTorch fp32, 1 process, $threads threads"
    run_torch torch1_bf16 1 "$threads" 1 default --warmup 5 --autocast
    row torch1_bf16 "PyTorch torch.autocast bf16, 1 process, $threads threads"
  done
  grep -h '^precision' "$tmp/speed1_bf16/train.log" >&2 || true
elif ((speed)); then
  write_job "$tmp/jobs/speed1.json" bert_speed1 1 32 "$steps"
  # The same model as torch_bert.py exports it (the example's sizes): the
  # job's model is the graph, its four inputs fed by the text fields.
  export_onnx "$tmp/onnx"
  onnx_job "$tmp/jobs/speed1.json" "$tmp/jobs/speed1_onnx.json" bert_speed1_onnx "$tmp/onnx/model.onnx"
  # The 2-rank rows: 5 warm-up steps then $steps timed, as the DDP peer.
  write_job "$tmp/jobs/speed2.json" bert_speed2 2 16 "$((steps + 5))"
  if [[ -n "$link" ]]; then  # what a user on a slow link would turn on
    job_compression=bf16
    write_job "$tmp/jobs/speed2b.json" bert_speed2b 2 16 "$((steps + 5))"
    job_compression=none
  fi
  for ((round = 1; round <= repeat; round++)); do
    echo "speed runs ($steps steps each), round $round of $repeat ..." >&2
    if [[ -z "$link" ]]; then
      run_train speed1 "$threads"
      row lockstep1 "lockstep train, 1 process, $threads threads"
      run_train speed1_onnx "$threads"
      row onnx1 "lockstep train, the module imported from ONNX, 1 process"
      run_torch torch1 1 "$threads" 1 default --warmup 5
      row torch1 "PyTorch, 1 process, $threads threads (OpenBLAS 1 thread)"
      if ((threads > 1)); then
        run_torch torch1b 1 "$threads" "$threads" default --warmup 5
        row torch1b "PyTorch, 1 process, $threads threads (OpenBLAS $threads threads)"
      fi
      run_torch torch1m 1 "$threads" 1 tuned --warmup 5
      row torch1m "PyTorch, 1 process, $threads threads, malloc tuned"
    fi  # one process crosses no link
    run_cluster speed2 2 5
    row lockstep2 "lockstep cluster, 2 workers x 1 thread (gRPC ring)"
    if [[ -n "$link" ]]; then
      run_cluster speed2b 2 5
      row lockstep2b "lockstep cluster, 2 workers, bf16 on the wire"
    fi
    run_torch ddp2 2 1 1 default --warmup 5
    row ddp2 "PyTorch DDP (Gloo), 2 ranks x 1 thread"
    run_torch ddp2m 2 1 1 tuned --warmup 5
    row ddp2m "PyTorch DDP (Gloo), 2 ranks x 1 thread, malloc tuned"
  done
fi

# learn_seed SEED: the learning runs of one seed: its batches, lockstep's
# initial weights, lockstep's cluster of 1 and of 2 workers, 1 worker
# training torch_bert.py's module exported with those weights as ONNX, and
# PyTorch from those weights on those batches; figures in
# $tmp/*_sSEED.json(l).
learn_seed() {
  local s=$1 rc=0
  job_seed=$s
  mkdir -p "$tmp/batches_s$s"
  write_job "$tmp/jobs/data_s$s.json" "bert_data_s$s" 1 32 1
  "$batches_tool" "$tmp/jobs/data_s$s.json" "$tmp/batches_s$s" "$epochs" ||
    die "data_batches failed (seed $s)"
  write_job "$tmp/jobs/learn1_s$s.json" "bert_learn1_s$s" 1 32 epochs
  write_job "$tmp/jobs/learn2_s$s.json" "bert_learn2_s$s" 2 16 epochs
  job_seed=
  # lockstep's initial weights: a checkpoint of step 0 (nothing trained).
  start_bg "$tmp/init_s$s.log" "$lockstep" train "$tmp/jobs/learn1_s$s.json" \
    --storage "$tmp/init_s$s" --stop-after-steps 0 --threads "$threads"
  wait_bg "${pids[-1]}" ||
    { show_logs "$tmp/init_s$s.log"; die "lockstep train --stop-after-steps 0 failed (seed $s)"; }
  local init
  init=$(find "$tmp/init_s$s" -path '*step-00000000*' -name model.safetensors | head -n 1)
  [[ -n "$init" ]] ||
    { show_logs "$tmp/init_s$s.log"; die "no step-0 model.safetensors under $tmp/init_s$s (seed $s)"; }
  echo "  seed $s: lockstep's initial weights in $init" >&2
  run_cluster "learn1_s$s" 1
  "$summaries" "$job_dir/summaries" eval/accuracy eval/loss >"$tmp/learn1_s$s.json"
  echo "  seed $s: lockstep 1 worker: $(commas "$sps") samples/s" >&2
  run_cluster "learn2_s$s" 2
  "$summaries" "$job_dir/summaries" eval/accuracy eval/loss >"$tmp/learn2_s$s.json"
  echo "  seed $s: lockstep 2 workers: $(commas "$sps") samples/s" >&2
  # The module torch_bert.py exports, from the same weights, imported.
  export_onnx "$tmp/onnx_s$s" --init "$init"
  onnx_job "$tmp/jobs/learn1_s$s.json" "$tmp/jobs/learn1o_s$s.json" \
    "bert_learn1o_s$s" "$tmp/onnx_s$s/model.onnx"
  run_cluster "learn1o_s$s" 1
  "$summaries" "$job_dir/summaries" eval/accuracy eval/loss >"$tmp/learn1o_s$s.json"
  echo "  seed $s: lockstep 1 worker, imported from ONNX: $(commas "$sps") samples/s" >&2
  start_bg "$tmp/torch_learn_s$s.log" env OPENBLAS_NUM_THREADS=1 "$PY" "$peer" \
    --job "$tmp/jobs/learn1_s$s.json" --batches "$tmp/batches_s$s" --learn \
    --epochs "$epochs" --threads "$threads" --init "$init"
  wait_bg "${pids[-1]}" || rc=$?
  if ((rc != 0)); then
    show_logs "$tmp/torch_learn_s$s.log"
    peer_failed "$rc" "the PyTorch learning run (seed $s)"
  fi
  grep '^{' "$tmp/torch_learn_s$s.log" >"$tmp/torch_learn_s$s.jsonl"
  echo "  seed $s: PyTorch: done ($(grep -m 1 'tensors from' "$tmp/torch_learn_s$s.log" || true))" >&2
}

if ((learning)); then
  echo "learning runs ($epochs epochs each, seeds $seeds) ..." >&2
  for s in "${seeds_arr[@]}"; do learn_seed "$s"; done
fi
echo >&2

# --- Tables. --------------------------------------------------------------------
"$PY" "$tables" "$rows" "$tmp" "$spe" "$epochs" "$learning" "$repeat" "$seeds" "$batches"
