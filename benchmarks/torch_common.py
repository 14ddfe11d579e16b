"""Helpers the PyTorch peers share (pytorch_peer.py, ddp_peer.py,
bert_peer.py, mobilenet_ddp_peer.py, torchvision_step.py).

Import it after the peer has set its thread variables: blas_in_use() loads
torch. Nothing here runs at import time.
"""
import datetime
import gzip
import os
import subprocess
import sys
import time


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


# The exit status of a peer that refuses to run on a slow BLAS; the scripts
# stop with a clear error when a peer exits with it.
SLOW_BLAS_EXIT = 3


def require_fast_blas(name, path):
    """Exits with SLOW_BLAS_EXIT unless torch runs on OpenBLAS or MKL.

    With the reference BLAS (or an unknown one) PyTorch's matmuls are ~7-8x
    slower, so any comparison would flatter lockstep: such a run is invalid
    and must never print "goal MET"."""
    if name in ("openblas", "mkl"):
        return
    bar = "!" * 78
    print(f"{bar}\n!! ERROR: PyTorch is using the {name} BLAS ({path or '?'}),"
          f" not OpenBLAS or MKL.\n!! Its matmuls are ~7-8x slower, so this"
          f" comparison would flatter lockstep;\n!! the run is invalid and"
          f" nothing is measured.\n!! Fix: apt-get install libopenblas0-pthread"
          f" (or update-alternatives --config\n!!   libblas.so.3-x86_64-linux-gnu)"
          f" and run again.\n{bar}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.exit(SLOW_BLAS_EXIT)


def read_safetensors(path):
    """{name: torch tensor} of a .safetensors file (a lockstep checkpoint's
    model.safetensors): the checked reader of the torch agreement tests
    (tests/torch_bert_reference.py, in this script's runfiles), which raises
    ValueError naming the file on anything malformed."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests"))
    from torch_bert_reference import read_safetensors as checked_read
    tensors, _ = checked_read(path)
    return tensors


def load_weights_by_name(model, path, die):
    """Copies every tensor of `path` (safetensors) into the parameter or
    buffer of `model` with the same name. Any name the model has and the
    file lacks, any name the file has and the model lacks, or a shape or
    dtype that differs is an error (die): a partial load would silently
    compare different starting points. Returns the number of tensors."""
    import torch

    try:
        weights = read_safetensors(path)
    except (OSError, ValueError) as e:
        die(f"--init {path}: {e}")
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    bad = [f"{k}: file {list(weights[k].shape)} {weights[k].dtype}, model "
           f"{list(own[k].shape)} {own[k].dtype}"
           for k in sorted(set(own) & set(weights))
           if weights[k].shape != own[k].shape or
           weights[k].dtype != own[k].dtype]
    if missing or unexpected or bad:
        die(f"--init {path} does not match the model: {len(missing)} "
            f"missing {missing[:8]}, {len(unexpected)} unexpected "
            f"{unexpected[:8]}, {len(bad)} of another shape or dtype "
            f"{bad[:8]}")
    with torch.no_grad():
        for k, t in own.items():
            t.copy_(weights[k])
    return len(own)


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


def make_schedule(spec, steps_per_epoch, die):
    """step -> learning rate as lockstep's LrSchedule (core/train/lr_schedule.h):
    constant, piecewise (by epoch or step) or polynomial decay, then times
    min(1, (step + 1) / warmup_steps) while warming up, then times the
    replica count with optimizer.scale_with_replicas."""
    base = spec["optimizer"].get("learning_rate", 0.001)
    s = spec.get("lr_schedule", {"type": "constant"})
    t = s.get("type", "constant")
    warm = s.get("warmup_steps", 0)
    if t not in ("constant", "piecewise", "polynomial"):
        die(f"lr_schedule.type {t!r} is not supported here")
    cluster = spec.get("cluster", {})
    replicas = cluster.get("workers", 1) * cluster.get("replicas_per_worker", 1)
    scale = replicas if spec["optimizer"].get("scale_with_replicas") else 1

    def at(step):
        lr = base
        if t == "piecewise":
            x = step // steps_per_epoch if s.get("unit", "epoch") == "epoch" \
                else step
            i = sum(1 for b in s["boundaries"] if x >= b)
            lr = s["values"][i]
        elif t == "polynomial":
            end = s.get("end_learning_rate", 0.0)
            decay = s["decay_steps"]
            frac = 1.0 - min(step, decay) / decay
            lr = (base - end) * frac ** s.get("power", 1.0) + end
        if warm > 0:
            lr *= min(1.0, (step + 1) / warm)
        return lr * scale
    return at


def rendezvous_store(path, rank, world, timeout_s, die, host="127.0.0.1"):
    """A TCPStore: rank 0 serves it on a free port of `host` (its own
    address: a network namespace's when the ranks are on hosts of their
    own) and publishes "HOST PORT" in `path` (written, then renamed); the
    others wait for the file (bounded).
    No port is guessed, and nothing is deleted while a rank still reads it
    (file:// init, whose store deletes its file at teardown, left a rank
    hanging in about one run in fifteen here)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    if rank == 0:
        store = dist.TCPStore(host, 0, world, True, timeout=timeout,
                              wait_for_workers=False)
        with open(path + ".tmp", "w") as f:
            f.write(f"{host} {store.port}")
        os.rename(path + ".tmp", path)
        return store
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            die(f"no rendezvous file {path} from rank 0 within {timeout_s}s")
        time.sleep(0.05)
    with open(path) as f:
        server, port = f.read().split()
    return dist.TCPStore(server, int(port), world, False, timeout=timeout)


def slowest_seconds(seconds, world):
    """The timed loop's seconds on the slowest rank (every rank calls it;
    one rank returns its own)."""
    if world <= 1:
        return seconds
    import torch
    import torch.distributed as dist

    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()
