#!/usr/bin/env bash
# Installs the Debian 12 packages lockstep needs, skipping what is already
# there. The parts are cumulative:
#   scripts/install_deps.sh --run     build lockstep and run a cluster
#                                     (scripts/run_local.sh uses this part)
#   scripts/install_deps.sh --test    + what the test suite adds
#                                     (scripts/test.sh; the default)
#   scripts/install_deps.sh --bench   + the benchmarks' peers (Gloo, Open MPI)
#   scripts/install_deps.sh --docs    + mkdocs and matplotlib only (the site)
# --list prints the packages of the chosen part instead of installing them.
set -euo pipefail

# Building and running: Bazel, the compiler, gRPC/protobuf/Abseil, the BLAS,
# and the libraries the engine links (images, tokenizer, HTTP, metrics).
run_packages=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  g++ pkgconf python3 ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev nlohmann-json3-dev
  libopenblas-dev libopenblas0-pthread zlib1g-dev libxxhash-dev libutf8proc-dev
  # bfloat16 matrix products (precision "bf16") on CPUs that have them.
  libdnnl-dev
  libjpeg62-turbo-dev libpng-dev
  libssl-dev openssl
  libcpp-httplib-dev prometheus-cpp-dev
  # Imported models (core/onnx): ONNX's protobuf, checker, shape inference.
  libonnx-dev
)
# The documentation site (docs/, mkdocs.yml) and its plots.
docs_packages=(mkdocs python3-matplotlib)
# What the test suite adds.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  # The fuzz targets (tests/fuzz, --config=fuzz): clang with libFuzzer and
  # the sanitizer runtimes.
  clang libclang-rt-14-dev libfuzzer-14-dev
  # The dashboard's browser test.
  chromium
  # Network namespaces, veth pairs and tc for the multi-host drills.
  iproute2
  # PyTorch (with OpenBLAS above): the numerical-agreement tests build the
  # same models in torch, and the benchmarks run it side by side;
  # torchvision's mobilenet_v2 is the reference for lockstep's.
  python3-torch python3-torchvision
  # The Python client (client/python) and its pytest tests.
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-tqdm
  python3-crc32c
  python3-pip
  # deploy/slurm's test starts a real one-node Slurm cluster (its own
  # munged, slurmctld and slurmd, in a temporary folder).
  slurm-wlm munge
  # The coordinators' leader election and journal tests start a real etcd
  # (one member, and three), and read it with etcdctl.
  etcd-server etcd-client
  "${docs_packages[@]}"
)
bench_packages=(libgloo-dev libopenmpi-dev openmpi-bin)

part=test
list=0
for arg in "$@"; do
  case "$arg" in
    --run) part=run ;;
    --test) part=test ;;
    --bench) part=bench ;;
    --docs) part=docs ;;
    --list) list=1 ;;
    *) echo "install_deps.sh: unknown argument '$arg' (--run, --test, --bench, --docs, --list)" >&2
       exit 2 ;;
  esac
done

packages=()
case "$part" in
  run) packages=("${run_packages[@]}") ;;
  docs) packages=("${docs_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  bench) packages=("${run_packages[@]}" "${test_packages[@]}" "${bench_packages[@]}") ;;
esac
# `kubectl kustomize` renders deploy/k8s in a test. Debian's kubectl is
# kubernetes-client; another kubectl (Google's package) also owns
# /usr/bin/kubectl, so install it only when there is none.
if [[ "$part" == test || "$part" == bench ]] && ! command -v kubectl >/dev/null; then
  packages+=(kubernetes-client)
fi
if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
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

echo "lockstep: installing (${part} part) ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "lockstep: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# --no-install-recommends for the run part: a build machine needs none of
# the recommended extras (documentation, GUI helpers).
if [[ "$part" == run ]]; then
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  $SUDO apt-get install -y -q "${missing[@]}"
fi
