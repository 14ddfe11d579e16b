#!/usr/bin/env bash
# Packs what a GPU machine without Bazel or Debian's libraries needs to run
# the CUDA tests and the BERT GPU benchmark: every CUDA test binary,
# lockstep, data_batches, and the shared libraries they load that are not
# glibc's, libstdc++'s or CUDA's (those come from the GPU machine), into
# OUT/bundle.tar.xz, with scripts/gpu_run.sh beside it and the Brown corpus
# and MNIST when they are there. Usage: scripts/gpu_bundle.sh [OUT] (default .devcarry,
# which .git/info/exclude should ignore). Builds with --config=cuda first.
# LOCKSTEP_BUNDLE_FUZZ=1 adds the --config=fuzz binaries of tests/fuzz, their
# corpora and fuzz_campaign.sh (gpu_run.sh fuzzes with the machine's cores
# after the GPU checks when LOCKSTEP_FUZZ_DEADLINE is set there).
# On the GPU machine, from the checkout: bash OUT/gpu_run.sh RESULTS_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.devcarry}
fuzz=()
if [[ "${LOCKSTEP_BUNDLE_FUZZ:-0}" == 1 ]]; then
  bazel build --config=fuzz --symlink_prefix=/ //tests/fuzz/...
  fuzz_bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz
  for f in "$fuzz_bin"/*_fuzzer; do fuzz+=("$f"); done
fi
bazel build --config=cuda //kernels/cuda/... //core/gpu/... \
  //core/layers:transformer_cuda_test //core/train:optimizer_cuda_test \
  //tests:gpu_cluster_test \
  //client:lockstep //benchmarks:data_batches
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"
list=()
for p in kernels/cuda kernels/cuda/layers core/gpu; do
  for f in "$bin/$p"/*_test; do [[ -f $f && -x $f ]] && list+=("${f#$bin/}"); done
done
list+=(core/layers/transformer_cuda_test core/train/optimizer_cuda_test
  tests/gpu_cluster_test client/lockstep
  benchmarks/data_batches)
for rel in "${list[@]}"; do
  mkdir -p "$stage/bin/$(dirname "$rel")"
  cp -L "$bin/$rel" "$stage/bin/$rel"
done
printf '%s\n' "${list[@]}" >"$stage/tests.txt"
if ((${#fuzz[@]} > 0)); then
  mkdir -p "$stage/fuzz"
  cp -L "${fuzz[@]}" tests/fuzz/fuzz_campaign.sh "$stage/fuzz/"
  chmod u+w "$stage/fuzz"/* && strip --strip-debug "$stage/fuzz"/*_fuzzer
  cp -r tests/fuzz/corpus "$stage/fuzz/corpus"
fi
for f in "${list[@]/#/$bin/}" "${fuzz[@]}"; do ldd "$f"; done | awk '/=>/ {print $3}' |
  sort -u | grep -v -E 'libstdc\+\+|libgcc_s|/usr/local/cuda|/libc\.so|/libm\.so|ld-linux|libpthread|libdl\.so|librt\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$out/bundle.tar.xz" .
cp scripts/gpu_run.sh "$out/"
for d in brown mnist; do
  if [[ -d ../shared/datasets/$d ]]; then
    rm -rf "${out:?}/$d" && cp -r "../shared/datasets/$d" "$out/$d"
  fi
done
du -sh "$out"/*
