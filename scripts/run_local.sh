#!/usr/bin/env bash
# The main command: installs what is missing, builds lockstep, and trains the
# default job (a learnable built-in synthetic dataset) with progress shown.
# Usage: scripts/run_local.sh [JOB.json] [extra `lockstep train` flags]
# Results: ./lockstep_storage/jobs/NAME/{result.json,checkpoints,summaries}
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
bazel build //client:lockstep
job="${1:-examples/default.json}"
shift || true
exec bazel-bin/client/lockstep train "$job" --storage "${LOCKSTEP_STORAGE:-lockstep_storage}" "$@"
