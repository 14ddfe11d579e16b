#!/usr/bin/python3
"""Runs a command and, when it exits, writes its peak resident set size in
MiB (getrusage's ru_maxrss of the child) to FILE. TERM and INT are passed on
to the command, so a benchmark can stop a daemon through this wrapper.

  peak_rss.py FILE COMMAND [ARG ...]
"""
import resource
import signal
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
try:
    child = subprocess.Popen(sys.argv[2:])
except OSError as e:
    sys.exit(f"peak_rss.py: cannot run {sys.argv[2]}: {e.strerror}")
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda n, _frame: child.send_signal(n))
rc = child.wait()
with open(sys.argv[1], "w") as f:
    f.write("%.1f\n" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
                        / 1024.0))
sys.exit(rc if rc >= 0 else 128 - rc)
