#!/bin/bash
# installed_check.sh HEADER PACKAGE OUT: writes OUT (an empty header) when
# HEADER exists; otherwise fails the build with a message that names Debian's
# PACKAGE and the script that installs it (installed_check.bzl).
header=$1 package=$2 out=$3
if [[ ! -f "$header" ]]; then
  echo "benchmarks: $header is missing: Debian's $package is not installed;" \
    "scripts/install_deps.sh --bench installs it (and every other" \
    "benchmark peer)" >&2
  exit 1
fi
echo "// $package was installed ($header) when this was built." >"$out"
