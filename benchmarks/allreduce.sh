#!/usr/bin/env bash
# Side-by-side all-reduce speed on one machine: lockstep's gRPC ring
# (allreduce_lockstep) against Gloo's ring over TCP (allreduce_gloo), one OS
# process per rank on 127.0.0.1, for each world size. Prints a table of
# median times, bus bandwidths and the lockstep/Gloo ratio; with
# `--systems lockstep,gloo,lockstep-tls,lockstep-bf16` also lockstep's ring
# over mutual TLS (certificates made here with the openssl CLI) and with
# bfloat16 on the wire (cluster.compression "bf16"), each against lockstep's
# plain float32 ring; with `mpi`, Open MPI's MPI_Allreduce over TCP (by
# mpirun); with `lockstep-checksum`, lockstep with its ring checksum
# (cluster.ring_checksum true). Bus bandwidth always counts float32 bytes.
#   bazel run //benchmarks:allreduce [-- --worlds 2,4 --sizes 4K,...,256M
#       --iters N --warmup N --lanes N --chunk-elements N --segment-bytes N
#       --systems lockstep,gloo --repeat K --timeout S --link RATE]
# --link RATE puts every rank on a host of its own (a network namespace)
# whose link is limited to RATE (1gbit, 10gbit) by tbf in both directions
# (root; bench_lib.sh's netns_up).
set -euo pipefail

readonly PY=/usr/bin/python3

usage() {
  cat <<'EOF'
usage: bazel run //benchmarks:allreduce -- [options]
  --worlds LIST          comma-separated world sizes (default 2,4)
  --sizes LIST           bytes of float32: 4096, 64K, 16M, 1G ...
                         (default 4K,64K,1M,4M,16M,64M,256M)
  --iters N              timed iterations per size (default: 1 GiB / size,
                         clamped to 10..200); the median is reported
  --warmup N             untimed iterations per size first (default 3)
  --lanes N              lockstep: gRPC streams to the next rank (default 2)
  --chunk-elements N     lockstep: floats per ring message (default 1048576)
  --segment-bytes N      Gloo: max segment in bytes (default Gloo's, 1 MiB)
  --systems LIST         subset of lockstep,gloo,mpi,lockstep-tls,
                         lockstep-bf16,lockstep-checksum (default
                         lockstep,gloo); mpi is Open
                         MPI's MPI_Allreduce (btl tcp, started by mpirun);
                         lockstep-tls is lockstep's ring over mutual TLS,
                         certificates made with /usr/bin/openssl;
                         lockstep-bf16 sends bfloat16; lockstep-checksum
                         checks a checksum on every message
  --repeat K             run each system K times per world, alternating, and
                         keep the best median per size (default 1; use 3 on a
                         shared machine, where bursts of other work slow runs)
  --timeout S            bound on one system's run at one world (default 600)
  --link RATE            every rank in a network namespace of its own, its
                         link shaped to RATE (100mbit, 1gbit, 10gbit) in
                         both directions with tbf (root); mpirun itself
                         runs in the switch's namespace (below)
EOF
}

die() {
  echo "allreduce: $*" >&2
  exit 1
}

worlds=2,4
sizes=4K,64K,1M,4M,16M,64M,256M
iters=0
warmup=3
lanes=2
chunk_elements=1048576
segment_bytes=0
systems=lockstep,gloo
repeat=1
timeout_s=600
link=""
while (($# > 0)); do
  case "$1" in
    --worlds | --sizes | --iters | --warmup | --lanes | --chunk-elements | \
      --segment-bytes | --systems | --repeat | --timeout | --link)
      (($# >= 2)) || { usage >&2; die "$1 needs a value"; }
      opt=$1 val=$2
      shift 2
      ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  case "$opt" in
    --worlds) worlds=$val ;;
    --sizes) sizes=$val ;;
    --iters) iters=$val ;;
    --warmup) warmup=$val ;;
    --lanes) lanes=$val ;;
    --chunk-elements) chunk_elements=$val ;;
    --segment-bytes) segment_bytes=$val ;;
    --systems) systems=$val ;;
    --repeat) repeat=$val ;;
    --timeout) timeout_s=$val ;;
    --link) link=$val ;;
    *) usage >&2; die "unknown option: $opt" ;;
  esac
done

nonneg_int() { [[ "$1" =~ ^[0-9]+$ ]]; }
positive_int() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
for v in "$warmup" "$lanes" "$chunk_elements" "$repeat" "$timeout_s"; do
  positive_int "$v" || die "warmup, lanes, chunk-elements, repeat and timeout must be positive integers, got '$v'"
done
nonneg_int "$iters" || die "--iters: '$iters' is not a non-negative integer"
nonneg_int "$segment_bytes" || die "--segment-bytes: '$segment_bytes' is not a non-negative integer"
IFS=, read -r -a worlds_arr <<<"$worlds"
IFS=, read -r -a systems_arr <<<"$systems"
((${#worlds_arr[@]} > 0)) || die "--worlds: empty list"
((${#systems_arr[@]} > 0)) || die "--systems: empty list"
for w in "${worlds_arr[@]}"; do
  if ! positive_int "$w" || ((w < 2 || w > 64)); then
    die "--worlds: '$w' is not in 2..64"
  fi
done
for s in "${systems_arr[@]}"; do
  [[ "$s" == lockstep || "$s" == gloo || "$s" == mpi ||
    "$s" == lockstep-tls || "$s" == lockstep-bf16 || "$s" == lockstep-checksum ]] ||
    die "--systems: '$s' is not lockstep, gloo, mpi, lockstep-tls, lockstep-bf16 or lockstep-checksum"
done
[[ "$sizes" =~ ^[0-9]+[KkMmGg]?(,[0-9]+[KkMmGg]?)*$ ]] ||
  die "--sizes: '$sizes' is not a list like 4K,64K,1M"

# --- The two programs. --------------------------------------------------------

. "${RUNFILES_DIR:-$0.runfiles}/lockstep/benchmarks/bench_lib.sh"
[[ -z "$link" ]] || netns_check "$link" || exit 1
declare -A bin
bin[lockstep]=$(runfile benchmarks/allreduce_lockstep) ||
  die "benchmarks/allreduce_lockstep not found in the runfiles; run through" \
    "'bazel run //benchmarks:allreduce'"
bin[lockstep-tls]=${bin[lockstep]}
bin[lockstep-bf16]=${bin[lockstep]}
bin[lockstep-checksum]=${bin[lockstep]}
if [[ ",$systems," == *,mpi,* ]]; then
  bin[mpi]=$(runfile benchmarks/allreduce_mpi) ||
    die "benchmarks/allreduce_mpi not found in the runfiles (it needs" \
      "libopenmpi-dev: scripts/install_deps.sh --bench)"
  command -v mpirun >/dev/null ||
    die "mpi needs mpirun (Debian package openmpi-bin: scripts/install_deps.sh --bench)"
fi
bin[gloo]=$(runfile benchmarks/allreduce_gloo) ||
  die "benchmarks/allreduce_gloo not found in the runfiles (it needs" \
    "libgloo-dev: scripts/install_deps.sh --bench)"

# Per-system flags, on top of the shared --rank/--world/--rendezvous/--sizes/
# --iters/--warmup.
declare -A extra
extra[lockstep]="--lanes $lanes --chunk-elements $chunk_elements"
extra[gloo]="--segment-bytes $segment_bytes"
extra[lockstep-bf16]="${extra[lockstep]} --wire bf16"
extra[lockstep-checksum]="${extra[lockstep]} --checksum on"
extra[mpi]=""
# Open MPI over TCP on the loopback only (no shared memory: every system here
# crosses process boundaries over 127.0.0.1), its own algorithm choice, no
# core binding (more ranks than cores at world 4). Root needs mpi_env. With
# --link the ranks use eth0 (each host's shaped link), mpirun's own traffic
# and its PMIx server the bridge, where every host reaches them (run_system).
mpi_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
mpirun_cmd=(mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl self,tcp)
mpi_ifs=(--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
mpi_link_env=(PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=br0)
[[ -z "$link" ]] ||
  mpi_ifs=(--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include br0)
per_op_timeout=$((timeout_s < 120 ? timeout_s : 120))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-allreduce.XXXXXX")
pids=()  # ranks still to reap; killed on any exit
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  netns_down
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# lockstep-tls: a CA and one certificate for 127.0.0.1 (server and client
# use, as a worker's), shared by every rank, as a cluster's workers would.
if [[ ",$systems," == *,lockstep-tls,* ]]; then
  [[ -x /usr/bin/openssl ]] ||
    die "lockstep-tls needs /usr/bin/openssl (Debian package openssl)"
  certs=$tmp/certs
  mkdir -p "$certs"
  (
    cd "$certs"
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    /usr/bin/openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 \
      -subj /CN=bench-ca
    /usr/bin/openssl req "${ec[@]}" -keyout rank.key -out rank.csr \
      -subj /CN=bench-rank
    san=IP:127.0.0.1
    for ((r = 2; r < 66; r++)); do san+=",IP:10.213.0.$r"; done  # --link hosts
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >rank.ext
    /usr/bin/openssl x509 -req -in rank.csr -CA ca.pem -CAkey ca.key \
      -set_serial 2 -days 2 -extfile rank.ext -out rank.pem
  ) >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log" >&2; die "could not make the TLS certificates"; }
  extra[lockstep-tls]="${extra[lockstep]} --tls-cert $certs/rank.pem --tls-key $certs/rank.key --tls-ca $certs/ca.pem"
fi

# True while PID runs (a zombie, exited but not yet reaped, counts as done).
alive() {
  local st
  { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
  st=${st##*) }
  [[ "${st:0:1}" != Z ]]
}

kill_ranks() {  # TERM, then KILL whatever is left 2 s later
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 20); do
    local any=0
    for p in "${pids[@]}"; do alive "$p" && any=1; done
    ((any)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

show_logs() {  # show_logs DIR WORLD
  local r
  for ((r = 0; r < $2; r++)); do
    if [[ -s "$1/err.$r" ]]; then
      echo "--- rank $r, last lines of stderr ---" >&2
      tail -n 15 "$1/err.$r" >&2
    fi
  done
}

# run_system SYSTEM WORLD: starts WORLD ranks, waits (bounded), and appends
# rank 0's RESULT lines to $rows as "world system size iters median min".
run_system() {
  local sys=$1 world=$2 dir r p rc
  dir=$tmp/$sys-w$world
  mkdir -p "$dir/rendezvous"
  echo "running $sys, world $world ..." >&2
  local -A rank_of=()
  if [[ -n "$link" ]]; then
    netns_down
    netns_up "$world" "$link" || die "--link: could not make the network namespaces"
  fi
  if [[ $sys == mpi ]]; then  # mpirun starts every rank; rank 0 prints
    local launch=(env "${mpi_env[@]}") rank_cmd=()
    if [[ -n "$link" ]]; then
      # mpirun runs in the switch's namespace, reachable from every host at
      # 10.213.0.1 on the bridge; its PMIx server listens there (by default
      # it would listen on a 127.0.0.1 the hosts cannot reach), and each rank
      # enters its host's namespace (the rank mpirun gave it) before it
      # starts. The ranks' traffic goes over the hosts' shaped eth0.
      ip -n "$netns_prefix-sw" addr add 10.213.0.1/24 dev br0 ||
        die "--link: could not give the bridge an address for mpirun"
      launch=(ip netns exec "$netns_prefix-sw" "${launch[@]}" "${mpi_link_env[@]}")
      rank_cmd=(bash -c "exec ip netns exec $netns_prefix-h\$OMPI_COMM_WORLD_RANK \"\$@\"" _)
    fi
    "${launch[@]}" "${mpirun_cmd[@]}" "${mpi_ifs[@]}" -np "$world" "${rank_cmd[@]}" \
      "${bin[mpi]}" --rendezvous "$dir/rendezvous" \
      --sizes "$sizes" --iters "$iters" --warmup "$warmup" \
      --timeout-s "$per_op_timeout" --deadline-s $((timeout_s + 30)) \
      >"$dir/out.0" 2>"$dir/err.0" &
    pids+=($!)
    rank_of[$!]="0-$((world - 1)) (mpirun)"
  fi
  for ((r = 0; r < world; r++)); do
    [[ $sys == mpi ]] && break
    local where=() host=()
    if [[ -n "$link" ]]; then
      where=(ip netns exec "$netns_prefix-h$r")
      host=(--host "${netns_addr[r]}")
    fi
    # shellcheck disable=SC2086  # extra[] holds several flags
    "${where[@]}" "${bin[$sys]}" --rank "$r" --world "$world" --rendezvous "$dir/rendezvous" \
      --sizes "$sizes" --iters "$iters" --warmup "$warmup" ${extra[$sys]} \
      "${host[@]}" --timeout-s "$per_op_timeout" --deadline-s $((timeout_s + 30)) \
      >"$dir/out.$r" 2>"$dir/err.$r" &
    pids+=($!)
    rank_of[$!]=$r
  done
  local deadline=$((SECONDS + timeout_s))
  while true; do
    local left=() failed=""
    for p in "${pids[@]}"; do
      if alive "$p"; then
        left+=("$p")
        continue
      fi
      rc=0
      wait "$p" || rc=$?
      if ((rc > 128)); then
        failed+=" rank ${rank_of[$p]} (killed by signal $((rc - 128)))"
      elif ((rc != 0)); then
        failed+=" rank ${rank_of[$p]} (exit $rc)"
      fi
    done
    pids=("${left[@]}")
    if [[ -n "$failed" ]]; then
      kill_ranks
      show_logs "$dir" "$world"
      die "$sys at world $world failed:$failed"
    fi
    ((${#pids[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      kill_ranks
      show_logs "$dir" "$world"
      die "$sys at world $world did not finish within ${timeout_s}s" \
        "(raise --timeout, or lower --iters/--sizes)"
    fi
    sleep 0.2
  done
  grep '^#' "$dir/out.0" >&2 || true
  grep '^RESULT ' "$dir/out.0" | while read -r _ size n median min; do
    echo "$world $sys $size $n $median $min"
  done >>"$rows"
  rm -rf "$dir"
}

# --- Header. -------------------------------------------------------------------

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
gloo_pkg=$(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo '?')
echo "all-reduce (sum of float32, in place): lockstep gRPC ring vs Gloo ring (TCP)"
echo "cpu: ${cpu:-unknown}, $cores cores; load average before start: $load"
if [[ -n "$link" ]]; then
  echo "one OS process per rank, each in a network namespace of its own, links shaped to $link (tbf, both directions); libgloo-dev $gloo_pkg"
else
  echo "one OS process per rank, 127.0.0.1; libgloo-dev $gloo_pkg"
fi
echo "command: bazel run -c opt //benchmarks:allreduce -- --worlds $worlds --sizes $sizes" \
  "--iters $iters --warmup $warmup --lanes $lanes --chunk-elements $chunk_elements" \
  "--segment-bytes $segment_bytes --systems $systems --repeat $repeat${link:+ --link $link}"
echo "per rank: allreduce_lockstep ... ${extra[lockstep]}; allreduce_gloo ... ${extra[gloo]}"
if [[ -n "${extra[lockstep-tls]:-}" ]]; then
  echo "lockstep-tls: allreduce_lockstep ... ${extra[lockstep]} --tls-cert/--tls-key/--tls-ca (mutual TLS, EC P-256)"
fi
if [[ ",$systems," == *,lockstep-bf16,* ]]; then
  echo "lockstep-bf16: allreduce_lockstep ... ${extra[lockstep-bf16]}"
fi
if [[ ",$systems," == *,lockstep-checksum,* ]]; then
  echo "lockstep-checksum: allreduce_lockstep ... ${extra[lockstep-checksum]} (cluster.ring_checksum true)"
fi
if [[ ",$systems," == *,mpi,* ]]; then
  echo "mpi: ${link:+ip netns exec SWITCH ${mpi_link_env[*]} }${mpirun_cmd[*]} ${mpi_ifs[*]} -np W${link:+ bash -c 'exec ip netns exec HOST-\$OMPI_COMM_WORLD_RANK ...' _} allreduce_mpi ...; $(mpirun --version 2>/dev/null | head -n 1)"
fi
echo "time = median over iterations (after warm-up) of the slowest rank's time$( ((repeat == 1)) || echo ", best of $repeat runs");"
echo "busbw = size / time x 2(n-1)/n (GB/s = 1e9 B/s); ratio = lockstep busbw / gloo busbw"
if "$PY" -c 'import os, sys; sys.exit(0 if os.getloadavg()[0] >= 0.5 * os.cpu_count() else 1)'; then
  echo "WARNING: the machine is busy (load $load on $cores cores): numbers will be low and noisy."
fi
echo

# --- Runs: per world, both systems back to back, the order alternating. ---------

rows=$tmp/rows
: >"$rows"
i=0
for w in "${worlds_arr[@]}"; do
  for ((k = 0; k < repeat; k++)); do
    order=("${systems_arr[@]}")
    if ((i % 2 == 1)); then  # reversed every other time
      rev=()
      for ((j = ${#order[@]} - 1; j >= 0; j--)); do rev+=("${order[j]}"); done
      order=("${rev[@]}")
    fi
    for s in "${order[@]}"; do run_system "$s" "$w"; done
    i=$((i + 1))
  done
done

# --- Table. -------------------------------------------------------------------

"$PY" - "$rows" <<'EOF'
import sys

res = {}
for line in open(sys.argv[1]):
    world, sys_, size, n, median, low = line.split()
    key = (int(world), sys_, int(size))
    if key not in res or float(median) < res[key][1]:  # best of --repeat runs
        res[key] = (int(n), float(median))

def human_size(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"

def human_time(s):
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"

def busbw(size, world, t):
    return size / t * 2 * (world - 1) / world / 1e9

# More columns, each a system's busbw and a ratio: Open MPI against lockstep
# (lockstep/mpi), lockstep's variants against its plain float32 ring.
variants = [(v, label, ratio) for v, label, ratio in (
                ("mpi", "mpi", "lockstep/mpi"),
                ("lockstep-tls", "tls", "tls/plain"),
                ("lockstep-bf16", "bf16", "bf16/plain"),
                ("lockstep-checksum", "checksum", "checksum/plain"))
            if any(s == v for (_, s, _) in res)]
fmt = "{:>5} {:>9} {:>6} {:>13} {:>13} {:>14} {:>14} {:>7}"
head = ["world", "size", "iters", "lockstep", "gloo", "lockstep GB/s",
        "gloo GB/s", "ratio"]
for _, label, ratio in variants:
    fmt += " {:>9} {:>12}"
    head += [f"{label} GB/s", ratio]
print(fmt.format(*head))
worst = None
for world, size in sorted({(w, s) for (w, _, s) in res}):
    lk, gl = res.get((world, "lockstep", size)), res.get((world, "gloo", size))
    n = next(r for r in [lk, gl] + [res.get((world, v, size))
                                     for v in ("mpi", "lockstep-tls",
                                               "lockstep-bf16",
                                               "lockstep-checksum")]
             if r)[0]
    cells = []
    bws = []
    for r in (lk, gl):
        cells.append(human_time(r[1]) if r else "-")
    for r in (lk, gl):
        bws.append(busbw(size, world, r[1]) if r else None)
    ratio = bws[0] / bws[1] if None not in bws else None
    if ratio is not None and size >= 1 << 20 and (worst is None or ratio < worst[0]):
        worst = (ratio, world, size)
    row = [world, human_size(size), n, cells[0], cells[1],
           f"{bws[0]:.3f}" if bws[0] else "-",
           f"{bws[1]:.3f}" if bws[1] else "-",
           f"{ratio:.2f}x" if ratio else "-"]
    for v, label, _ in variants:
        t = res.get((world, v, size))
        tbw = busbw(size, world, t[1]) if t else None
        if tbw and bws[0]:
            r = bws[0] / tbw if label == "mpi" else tbw / bws[0]
        row += [f"{tbw:.3f}" if tbw else "-",
                f"{r:.2f}x" if tbw and bws[0] else "-"]
    print(fmt.format(*row))
print("ratio = lockstep busbw / gloo busbw (> 1: lockstep is faster)")
for v, label, _ in variants:
    print({"mpi": "lockstep/mpi = lockstep busbw / Open MPI busbw (> 1: lockstep is faster)",
           "tls": "tls/plain = lockstep busbw over mutual TLS / over plaintext",
           "bf16": "bf16/plain = lockstep busbw with bfloat16 on the wire / "
                   "float32 (busbw counts float32 bytes)",
           "checksum": "checksum/plain = lockstep busbw with the ring checksum "
                       "(cluster.ring_checksum true) / without"}[label])
if worst:
    print(f"smallest ratio at sizes >= 1 MiB: {worst[0]:.2f}x "
          f"(world {worst[1]}, {human_size(worst[2])})")
else:
    print("smallest ratio at sizes >= 1 MiB: n/a (no size >= 1 MiB with both systems)")
EOF
