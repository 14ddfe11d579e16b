"""Helpers both PyTorch peers share (pytorch_peer.py, ddp_peer.py).

Import it after the peer has set its thread variables: blas_in_use() loads
torch. Nothing here runs at import time.
"""
import gzip
import os
import subprocess
import sys


def blas_in_use():
    """(short name, path) of the BLAS mapped into this process after a matmul.

    Debian's torch links libblas.so.3, which is whatever the alternatives
    system points to: OpenBLAS, or the slow reference BLAS.
    """
    import torch  # the caller set its thread variables first

    a = torch.ones(64, 64)
    (a @ a).sum().item()  # make sure the BLAS library is loaded and used
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                paths.add(parts[5])
    for path in sorted(paths):
        base = os.path.basename(path)
        low = path.lower()
        if "openblas" in low:
            return "openblas", path
        if "mkl" in base.lower():
            return "mkl", path
        if "blis" in low:
            return "blis", path
    for path in sorted(paths):
        if os.path.basename(path).startswith(("libblas.so", "libcblas.so")):
            return "reference", path  # netlib: no "openblas" in the real path
    return "unknown", ""


def alternatives_blas():
    try:
        out = subprocess.run(
            ["update-alternatives", "--query", "libblas.so.3-x86_64-linux-gnu"],
            capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in out.splitlines():
        if line.startswith("Value:"):
            return line.split(":", 1)[1].strip()
    return ""


def warn_if_not_openblas(name, path):
    if name in ("openblas", "mkl"):
        return
    bar = "!" * 78
    print(f"{bar}\n!! WARNING: PyTorch is using the {name} BLAS ({path or '?'}),"
          f" not OpenBLAS.\n!! Its matmuls are ~7-8x slower, so this comparison"
          f" would flatter lockstep.\n!! Fix: apt-get install libopenblas0-pthread"
          f" (or update-alternatives --config\n!!   libblas.so.3-x86_64-linux-gnu)"
          f" and run again.\n{bar}", file=sys.stderr)


def read_idx(path, magic, header):
    """The uint8 payload of an IDX file (gzip or raw); exits on a bad magic."""
    import numpy as np

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    got = int.from_bytes(raw[0:4], "big")
    if got != magic:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: magic {got}, "
                 f"expected {magic}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header)
