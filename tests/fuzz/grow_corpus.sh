#!/usr/bin/env bash
# grow_corpus.sh BIN_DIR CAMPAIGN_OUT [TARGET...]: keeps what a fuzz
# campaign found (fuzz_campaign.sh's OUT_DIR) in the repository's corpus,
# which CI fuzzes from on every run: for each target, libFuzzer's -merge=1
# adds to tests/fuzz/corpus/TARGET the campaign's inputs that reach
# coverage the corpus does not (a handful, not the campaign's thousands),
# and every input that crashed the target (CAMPAIGN_OUT/crashes/TARGET-*,
# once its defect is fixed) as a regression seed. BIN_DIR holds the
# --config=fuzz binaries. Prints, per target, the corpus before and after;
# commit the new files.
set -uo pipefail
bin_dir=${1:?usage: grow_corpus.sh BIN_DIR CAMPAIGN_OUT [TARGET...]}
out=${2:?usage: grow_corpus.sh BIN_DIR CAMPAIGN_OUT [TARGET...]}
shift 2
corpus_root="$(cd "$(dirname "$0")" && pwd)/corpus"
targets=("$@")
if ((${#targets[@]} == 0)); then
  for d in "$out"/corpus/*/; do targets+=("$(basename "$d")"); done
fi
failed=0
for t in "${targets[@]}"; do
  dest="$corpus_root/$t"
  [[ -d "$dest" ]] || { echo "$t: no corpus $dest"; failed=1; continue; }
  [[ -x "$bin_dir/$t" ]] || { echo "$t: no binary $bin_dir/$t"; failed=1; continue; }
  before=$(find "$dest" -type f | wc -l)
  crashes=0
  for c in "$out"/crashes/"$t"-*; do
    [[ -f "$c" ]] || continue
    cp "$c" "$dest/regression-$(sha1sum "$c" | cut -c1-16)"
    crashes=$((crashes + 1))
  done
  if [[ -d "$out/corpus/$t" ]]; then
    # Edges only (no hit counts): a handful of inputs per new branch.
    if ! "$bin_dir/$t" -merge=1 -use_counters=0 -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 "$dest" "$out/corpus/$t" >"$out/merge-$t.log" 2>&1; then
      echo "$t: merge failed (see $out/merge-$t.log)"
      failed=1
      continue
    fi
  fi
  after=$(find "$dest" -type f | wc -l)
  echo "$t: corpus $before -> $after inputs ($crashes crash inputs kept)"
done
exit "$failed"
