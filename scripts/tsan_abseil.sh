#!/usr/bin/env bash
# Builds Debian's own Abseil (the installed version, from Debian's source
# archive) with -fsanitize=thread into third_party/tsan/abseil/lib, for
# --config=tsan: Debian's libabsl is built without ThreadSanitizer, so its
# absl::Mutex hands memory between threads where TSan cannot see it and
# every lock reads as a race. It also writes third_party/tsan/abseil/
# tsan.bazelrc, which .bazelrc's tsan config imports: this folder as every
# TSan binary's DT_RPATH (same sonames; unlike RUNPATH or LD_LIBRARY_PATH
# it serves Debian's gRPC's own Abseil lookups too, and leaves other
# processes alone: Debian's Python cannot load a TSan Abseil, and the
# Python tests start it) and third_party/tsan/suppressions.txt, by
# absolute path. Adds a deb-src entry
# for Debian's archive when apt has none. Idempotent: only rewrites
# tsan.bazelrc when the libraries of the installed version are there.
# Usage: scripts/tsan_abseil.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=$PWD/third_party/tsan/abseil
version=$(dpkg-query -W -f='${Version}' libabsl-dev)
write_rc() {
  cat >"$dest/tsan.bazelrc" <<RC
# Written by scripts/tsan_abseil.sh for this checkout.
build:tsan --linkopt=-Wl,--disable-new-dtags,-rpath,$dest/lib
test:tsan --test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/third_party/tsan/suppressions.txt
RC
}
if [[ -f "$dest/version" && "$(cat "$dest/version")" == "$version" ]]; then
  write_rc
  exit 0
fi
need=()
for p in dpkg-dev cmake g++; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]} > 0)); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat >/etc/apt/sources.list.d/lockstep-debian-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -q
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q "abseil=$version")
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'abseil-*' | head -n 1)
# Debian's own configuration (debian/rules: C++17, shared, its patched
# options.h and sonames), plus ThreadSanitizer.
cmake -S "$src" -B "$work/build" -DCMAKE_CXX_STANDARD=17 \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -g1" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$work/install" >"$work/cmake.log"
make -C "$work/build" -j"$(nproc)" >"$work/make.log" || {
  tail -n 40 "$work/make.log" >&2
  exit 1
}
make -C "$work/build" install >/dev/null
rm -rf "$dest"
mkdir -p "$dest/lib"
cp -a "$work/install/lib"*/libabsl_*.so* "$dest/lib/"
echo "$version" >"$dest/version"
write_rc
echo "tsan_abseil: Abseil $version with ThreadSanitizer in $dest/lib"
