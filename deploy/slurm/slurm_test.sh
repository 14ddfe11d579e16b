#!/bin/bash
# Runs deploy/slurm/tests (pytest) under Bazel: a real Slurm cluster on this
# machine runs lockstep.sbatch. Its JUnit report is the test's XML, so the
# test command counts each case.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-lockstep}"
export LOCKSTEP_BINARY="$PWD/${LOCKSTEP_BINARY}"
exec /usr/bin/python3 -m pytest -p no:cacheprovider -q \
  --basetemp="${TEST_TMPDIR}/pytest" \
  --junitxml="${XML_OUTPUT_FILE:-${TEST_TMPDIR}/pytest.xml}" \
  deploy/slurm/tests
