#!/bin/bash
# Generates the Python client's gRPC and protobuf modules from proto/ with
# Debian's protoc and grpc_python_plugin:
#   scripts/gen_python_protos.sh [OUT_ROOT]
# writes OUT_ROOT/lockstep/_generated/{jobs_pb2,jobs_pb2_grpc,tensorboard_pb2}.py
# (default OUT_ROOT: client/python, the package in the checkout). The files
# are never edited by hand; client/python/tests/test_generated.py fails when
# the committed ones differ from what the current protos produce.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-client/python}"
plugin="$(command -v grpc_python_plugin || true)"
if ! command -v protoc >/dev/null || [[ -z "$plugin" ]]; then
  echo "gen_python_protos.sh: needs protoc and grpc_python_plugin" \
       "(apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
  exit 2
fi
mkdir -p "$out/lockstep/_generated"
# The virtual include path makes the generated imports package-relative
# (from lockstep._generated import jobs_pb2).
protoc -Ilockstep/_generated=proto \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$plugin" \
  proto/jobs.proto
protoc -Ilockstep/_generated=proto --python_out="$out" proto/tensorboard.proto
