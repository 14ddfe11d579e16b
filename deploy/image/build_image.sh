#!/usr/bin/env bash
# Builds the lockstep container image from the Bazel outputs: bazel builds
# //deploy:image_root.tar (or image_root_gpu.tar), which goes with
# deploy/Containerfile (or Containerfile.gpu) into a fresh build context for
# `podman build` (or `docker build`).
#
# Usage: deploy/image/build_image.sh [--gpu] [--tag NAME:TAG]
#            [--builder podman|docker] [--root-dir DIR]
#   --gpu       the variant with the CUDA runtime libraries (about 1.4 GB)
#   --tag       image name (default lockstep:VERSION, lockstep:VERSION-gpu;
#               also tagged lockstep:latest / lockstep:latest-gpu, the names
#               deploy/k8s's overlays use)
#   --builder   default: podman if installed, else docker
#   --root-dir  also unpack the image root into DIR (to look at, or to try
#               with `chroot DIR /lockstep --version`)
set -euo pipefail

cd "$(dirname "$0")/../.."
gpu=0 tag="" builder="" root_dir=""
while (($#)); do
  case "$1" in
    --gpu) gpu=1; shift ;;
    --tag) tag="$2"; shift 2 ;;
    --builder) builder="$2"; shift 2 ;;
    --root-dir) root_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_image.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

target=//deploy:image_root.tar containerfile=deploy/Containerfile suffix=""
if ((gpu)); then
  target=//deploy:image_root_gpu.tar
  containerfile=deploy/Containerfile.gpu
  suffix=-gpu
fi

# The GPU image's binary is the --config=cuda build (GPU replicas).
config=()
((gpu)) && config=(--config=cuda)
bazel build "${config[@]}" "$target" //client:lockstep
bin="$(bazel info "${config[@]}" bazel-bin 2>/dev/null)"
tar_path="$bin/deploy/$(basename "${target#*:}")"
version="$("$bin/client/lockstep" --version | awk '{print $2}')"
tag="${tag:-lockstep:$version$suffix}"

if [[ -n "$root_dir" ]]; then
  mkdir -p "$root_dir"
  tar --extract --numeric-owner -p --file "$tar_path" --directory "$root_dir"
  echo "image root unpacked in $root_dir ($(du -sh "$root_dir" | cut -f1))"
fi

if [[ -z "$builder" ]]; then
  if command -v podman >/dev/null; then builder=podman
  elif command -v docker >/dev/null; then builder=docker
  else
    echo "build_image.sh: neither podman nor docker found; the image root is $tar_path" >&2
    exit 1
  fi
fi

# A context with just the two files (a hard link where it can, the GPU tar
# is big), so the builder sends nothing else.
context="$(mktemp -d "${TMPDIR:-/tmp}/lockstep_image_context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
ln "$tar_path" "$context/image_root.tar" 2>/dev/null ||
  cp "$tar_path" "$context/image_root.tar"
cp "$containerfile" "$context/Containerfile"

latest=()
[[ "$tag" == "lockstep:$version$suffix" ]] && latest=(--tag "lockstep:latest$suffix")
"$builder" build --file "$context/Containerfile" --tag "$tag" "${latest[@]}" "$context"
echo "built $tag${latest:+ (and lockstep:latest$suffix)} from $tar_path ($(du -h "$tar_path" | cut -f1))"
