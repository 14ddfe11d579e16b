#!/usr/bin/env bash
# Assembles the container image root for lockstep as a deterministic tar:
# the binary at /lockstep, exactly the shared libraries `ldd` names for it
# (dynamic loader included, each a real file at the path ldd reports), and
# the few files a FROM-scratch image needs. Run by //deploy:image_root.tar.
#
# Usage: make_root.sh --binary PATH --out TAR [--cuda-lib-dir DIR]
#   --cuda-lib-dir  also add the CUDA runtime libraries (GPU variant) from
#                   DIR under /usr/local/cuda/lib64, plus what they need.
set -euo pipefail

binary="" out="" cuda_dir=""
while (($#)); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cuda-lib-dir) cuda_dir="$2"; shift 2 ;;
    *) echo "make_root.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$binary" && -n "$out" ]] || {
  echo "usage: make_root.sh --binary PATH --out TAR [--cuda-lib-dir DIR]" >&2
  exit 2
}

readonly kUid=65532
# The CUDA runtime libraries of the GPU variant, by soname. libcudnn 9 is a
# small shim that dlopens its sub-libraries; the runtime-compiled engines
# dlopen NVRTC (libnvrtc.so.13, which dlopens its builtins). libcuda.so.1 is
# the driver's: the NVIDIA container toolkit mounts it in at run time.
readonly kCudaLibs=(
  libcudart.so.13 libcublas.so.13 libcublasLt.so.13
  libcudnn.so.9 libcudnn_graph.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9
  libcudnn_adv.so.9 libcudnn_heuristic.so.9
  libcudnn_engines_precompiled.so.9 libcudnn_engines_runtime_compiled.so.9
  libnvrtc.so.13 libnvrtc-builtins.so.13.0
  libnccl.so.2
)
readonly kCudaRoot=usr/local/cuda/lib64

stage="$(mktemp -d "${TMPDIR:-/tmp}/lockstep_image_root.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

# Prints the absolute paths ldd resolves for $1 (the loader included, the
# vDSO left out); fails on any "not found".
ldd_paths() {
  local listing
  listing="$(ldd "$1")" || { echo "make_root.sh: ldd $1 failed" >&2; return 1; }
  if grep -q 'not found' <<<"$listing"; then
    echo "make_root.sh: $1 has unresolved libraries:" >&2
    grep 'not found' <<<"$listing" >&2
    return 1
  fi
  # "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
  # "/lib64/ld-linux-x86-64.so.2 (0x...)".
  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' \
    <<<"$listing"
}

# Copies $1's content (symlinks resolved: Debian's alternatives put
# libopenblas.so.0 behind two of them) to $stage/$2 as a regular file.
put_file() {
  mkdir -p "$stage/$(dirname "$2")"
  cp --dereference "$1" "$stage/$2"
  chmod 0755 "$stage/$2"
}

put_file "$binary" lockstep
declare -A libs=()
while read -r p; do libs["$p"]=1; done < <(ldd_paths "$binary")

if [[ -n "$cuda_dir" ]]; then
  for name in "${kCudaLibs[@]}"; do
    [[ -e "$cuda_dir/$name" ]] || {
      echo "make_root.sh: $cuda_dir/$name is missing (CUDA toolkit?)" >&2
      exit 1
    }
    put_file "$cuda_dir/$name" "$kCudaRoot/$name"
    # What the CUDA libraries need from the system (libstdc++, libz, the
    # glibc compatibility stubs libdl/libpthread/librt); their CUDA
    # neighbours come from $cuda_dir through their $ORIGIN runpath.
    while read -r p; do
      case "$(readlink -f "$p")" in
        "$(readlink -f "$cuda_dir")"/*)
          [[ " ${kCudaLibs[*]} " == *" $(basename "$p") "* ]] || {
            echo "make_root.sh: $name needs $p, not in kCudaLibs" >&2
            exit 1
          } ;;
        *) libs["$p"]=1 ;;
      esac
    done < <(ldd_paths "$cuda_dir/$name")
  done
  # cuDNN asks for some sub-libraries by their unversioned names.
  for name in "${kCudaLibs[@]}"; do
    if [[ "$name" == libcudnn_*.so.9 ]]; then
      ln -s "$name" "$stage/$kCudaRoot/${name%.9}"
    fi
  done
  # LD_LIBRARY_PATH (set by Containerfile.gpu) finds them; ld.so.conf serves
  # the NVIDIA container toolkit, which runs ldconfig in the container after
  # mounting the driver, so the cache it writes covers this folder too.
  mkdir -p "$stage/etc/ld.so.conf.d"
  echo "include /etc/ld.so.conf.d/*.conf" >"$stage/etc/ld.so.conf"
  echo "/usr/local/cuda/lib64" >"$stage/etc/ld.so.conf.d/cuda.conf"
fi

for p in "${!libs[@]}"; do put_file "$p" "${p#/}"; done

mkdir -p "$stage/etc" "$stage/tmp" "$stage/var/lib/lockstep"
cat >"$stage/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
lockstep:x:$kUid:$kUid:lockstep:/var/lib/lockstep:/sbin/nologin
EOF
cat >"$stage/etc/group" <<EOF
root:x:0:
nogroup:x:65534:
lockstep:x:$kUid:
EOF
# Kubernetes Service names resolve through DNS; /etc/hosts and
# /etc/resolv.conf are the runtime's (it mounts its own), so not in here.
cat >"$stage/etc/nsswitch.conf" <<EOF
passwd: files
group: files
hosts: files dns
EOF

# Fixed modes, whatever the umask: directories 0755, /tmp 1777, config 0644.
find "$stage" -type d -exec chmod 0755 {} +
find "$stage/etc" -type f -exec chmod 0644 {} +
chmod 1777 "$stage/tmp"

# Deterministic tar: names in byte order, mtime 0, numeric owners, GNU
# format (no pax atime/ctime). Everything is root's except the storage
# folder, owned by the lockstep user: the names before it, then it, then
# any after it (a library ldd found under a path sorting after var/, such
# as a sanitizer build's /work/...), each appended with its owner.
list="$(mktemp "${TMPDIR:-/tmp}/lockstep_image_list.XXXXXX")"
trap 'rm -rf "$stage" "$list" "$list.before" "$list.after"' EXIT
(cd "$stage" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) >"$list"
awk '$0 == "var/lib/lockstep" { found = 1; next }
     { print > (found ? AFTER : BEFORE) }' BEFORE="$list.before" \
  AFTER="$list.after" "$list"
touch "$list.before" "$list.after"
common=(--format=gnu --mtime=@0 --numeric-owner --no-recursion
  --directory="$stage")
rm -f "$out"
tar --create --file="$out" "${common[@]}" --owner=0 --group=0 \
  --verbatim-files-from --files-from="$list.before"
tar --append --file="$out" "${common[@]}" --owner="$kUid" --group="$kUid" \
  var/lib/lockstep
tar --append --file="$out" "${common[@]}" --owner=0 --group=0 \
  --verbatim-files-from --files-from="$list.after"
