#!/usr/bin/env bash
# fuzz_campaign.sh BIN_DIR CORPUS_ROOT OUT_DIR [TARGET...]: the long fuzz
# run (docs/testing.md), one target after another, each on a writable
# copy of its corpus (OUT_DIR/corpus/TARGET) until it has run
# LOCKSTEP_FUZZ_RUNS executions (default 10,000,000) or LOCKSTEP_FUZZ_SECONDS
# seconds (default 1800) have passed, with LOCKSTEP_FUZZ_JOBS processes
# (default 1; more runs libFuzzer's -fork mode). LOCKSTEP_FUZZ_DEADLINE (unix
# seconds) stops the campaign there: the target running then ends early and
# later ones are skipped, each said so. BIN_DIR holds the --config=fuzz
# binaries (bazel-bin/tests/fuzz), CORPUS_ROOT the seed corpora
# (tests/fuzz/corpus). Without TARGET names: every binary in BIN_DIR.
# Prints one line per target: executions, seconds, CPU seconds, coverage,
# crashes (inputs kept in OUT_DIR/crashes); exits 1 when any crashed.
set -uo pipefail
bin_dir=${1:?usage: fuzz_campaign.sh BIN_DIR CORPUS_ROOT OUT_DIR [TARGET...]}
corpus_root=${2:?usage: fuzz_campaign.sh BIN_DIR CORPUS_ROOT OUT_DIR [TARGET...]}
out=${3:?usage: fuzz_campaign.sh BIN_DIR CORPUS_ROOT OUT_DIR [TARGET...]}
shift 3
runs=${LOCKSTEP_FUZZ_RUNS:-10000000}
seconds=${LOCKSTEP_FUZZ_SECONDS:-1800}
jobs=${LOCKSTEP_FUZZ_JOBS:-1}
deadline=${LOCKSTEP_FUZZ_DEADLINE:-0}
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in "$bin_dir"/*_fuzzer; do targets+=("$(basename "$f")"); done
fi
mkdir -p "$out/corpus" "$out/crashes" "$out/logs"
crashed=0
for t in "${targets[@]}"; do
  budget=$seconds
  if ((deadline > 0)); then
    left=$((deadline - $(date +%s)))
    if ((left < 10)); then
      echo "$t: not run (the campaign's deadline has passed)"
      continue
    fi
    ((left < budget)) && budget=$left
  fi
  [[ -x "$bin_dir/$t" ]] || { echo "$t: no binary $bin_dir/$t"; crashed=1; continue; }
  [[ -d "$corpus_root/$t" ]] || { echo "$t: no corpus $corpus_root/$t"; crashed=1; continue; }
  mkdir -p "$out/corpus/$t"
  cp -n "$corpus_root/$t"/* "$out/corpus/$t"/ 2>/dev/null
  fork=()
  ((jobs > 1)) && fork=(-fork="$jobs" -ignore_crashes=1)
  log="$out/logs/$t.log"
  start=$(date +%s)
  # CPU seconds (user + system) of the target and its forked children.
  TIMEFORMAT='cpu %U %S'
  { time "$bin_dir/$t" "${fork[@]}" -runs="$runs" -max_total_time="$budget" \
      -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$out/crashes/$t-" "$out/corpus/$t" >"$log" 2>&1
    echo "rc=$?" >>"$log"; } 2>>"$log"
  wall=$(($(date +%s) - start))
  rc=$(grep -o '^rc=[0-9]*' "$log" | tail -n 1 | cut -d= -f2)
  # Executions: the last "#N" status line (one process) or the fork
  # parent's total; coverage: its "cov:" figure.
  execs=$(grep -o -E '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  stat_execs=$(grep -o -E 'stat::number_of_executed_units: [0-9]+' "$log" | tail -n 1 | awk '{print $2}')
  [[ -n "$stat_execs" && ( -z "$execs" || "$stat_execs" -gt "$execs" ) ]] && execs=$stat_execs
  cov=$(grep -o -E 'cov: [0-9]+' "$log" | tail -n 1 | awk '{print $2}')
  cpu=$(awk '$1 == "cpu" { printf "%.0f", $2 + $3 }' "$log" | tail -n 1)
  found=$(find "$out/crashes" -name "$t-*" -type f | wc -l)
  corpus_n=$(find "$out/corpus/$t" -type f | wc -l)
  printf '%s: %s executions in %s s (%s CPU s, %s processes), cov %s, corpus %s, crashes %s, rc %s\n' \
    "$t" "${execs:-?}" "$wall" "${cpu:-?}" "$jobs" "${cov:-?}" "$corpus_n" "$found" "${rc:-?}"
  if ((found > 0)) || [[ "${rc:-1}" != 0 ]]; then crashed=1; fi
done
exit "$crashed"
