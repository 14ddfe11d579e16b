#!/usr/bin/env bash
# Installs the Debian 12 packages lockstep needs to build, test and run,
# skipping what is already there. Usage: scripts/install_deps.sh [--bench]
# (--bench adds Gloo and Open MPI for //benchmarks:allreduce).
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  g++ pkgconf python3 ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libopenblas0-pthread zlib1g-dev libxxhash-dev libutf8proc-dev
  libjpeg62-turbo-dev libpng-dev
  libssl-dev openssl
  libcpp-httplib-dev prometheus-cpp-dev
  # The fuzz targets (tests/fuzz, --config=fuzz): clang with libFuzzer and
  # the sanitizer runtimes.
  clang libclang-rt-14-dev libfuzzer-14-dev
  chromium
  # PyTorch (with OpenBLAS above): the numerical-agreement tests build the
  # same models in torch, and the benchmarks run it side by side;
  # torchvision's mobilenet_v2 is the reference for lockstep's.
  python3-torch python3-torchvision
  # The Python client (client/python) and its pytest tests.
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-tqdm
  python3-pip
  # deploy/slurm's test starts a real one-node Slurm cluster (its own
  # munged, slurmctld and slurmd, in a temporary folder).
  slurm-wlm munge
)
# `kubectl kustomize` renders deploy/k8s in a test. Debian's kubectl is
# kubernetes-client; another kubectl (Google's package) also owns
# /usr/bin/kubectl, so install it only when there is none.
if ! command -v kubectl >/dev/null; then packages+=(kubernetes-client); fi
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(libgloo-dev libopenmpi-dev openmpi-bin)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "lockstep: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "lockstep: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q "${missing[@]}"
