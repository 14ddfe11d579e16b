#!/bin/bash
# Runs the Python client's pytest suite under Bazel: its JUnit report is the
# test's XML (so the test command counts each case), temporary files go
# under the test's own folder.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-lockstep}"
export LOCKSTEP_BINARY="$PWD/${LOCKSTEP_BINARY}"
for m in grpc google.protobuf numpy pytest; do
  if ! /usr/bin/python3 -c "import $m" 2>/dev/null; then
    echo "client_test: /usr/bin/python3 cannot import $m (scripts/install_deps.sh installs python3-grpcio, python3-protobuf, python3-numpy, python3-pytest)" >&2
    exit 1
  fi
done
exec /usr/bin/python3 -m pytest -p no:cacheprovider -q \
  --basetemp="${TEST_TMPDIR}/pytest" \
  --junitxml="${XML_OUTPUT_FILE:-${TEST_TMPDIR}/pytest.xml}" \
  client/python/tests
