#!/bin/bash
# Runs the documentation's pytest suite (docs_test.py) under Bazel: its JUnit
# report is the test's XML, so the test command counts each case.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-lockstep}"
export DOCS_ROOT="$PWD"
export LOCKSTEP_BINARY="$PWD/${LOCKSTEP_BINARY}"
for m in pytest markdown matplotlib grpc numpy; do
  if ! /usr/bin/python3 -c "import $m" 2>/dev/null; then
    echo "docs_test: /usr/bin/python3 cannot import $m (scripts/install_deps.sh --test installs mkdocs, python3-matplotlib and the Python client's packages)" >&2
    exit 1
  fi
done
if [[ ! -x /usr/bin/mkdocs ]]; then
  echo "docs_test: /usr/bin/mkdocs is missing (scripts/install_deps.sh --test installs Debian's mkdocs)" >&2
  exit 1
fi
exec /usr/bin/python3 -m pytest -p no:cacheprovider -q \
  --basetemp="${TEST_TMPDIR}/pytest" \
  --junitxml="${XML_OUTPUT_FILE:-${TEST_TMPDIR}/pytest.xml}" \
  tests/docs/docs_test.py
