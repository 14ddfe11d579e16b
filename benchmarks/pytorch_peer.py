#!/usr/bin/python3
# The PyTorch side of benchmarks/train_vs_pytorch.sh: trains the same MNIST
# model as a lockstep job (same batch, threads, Adam, loss) and prints one
# JSON line with its training-loop samples per second.
#
# Run with Debian's interpreter (/usr/bin/python3, package python3-torch).
#   pytorch_peer.py --model mlp|cnn --mnist-dir DIR --steps N --threads T
#   pytorch_peer.py --info      # torch version and the BLAS it really uses
import argparse
import json
import os
import sys
import time

WARMUP_STEPS = 20


def parse_args():
    p = argparse.ArgumentParser(
        description="PyTorch peer of benchmarks/train_vs_pytorch.sh")
    p.add_argument("--model", choices=["mlp", "cnn"])
    p.add_argument("--mnist-dir")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--info", action="store_true",
                   help="print torch version and BLAS in use, then exit")
    args = p.parse_args()
    if not args.info and (args.model is None or args.mnist_dir is None):
        p.error("--model and --mnist-dir are required (or --info)")
    if args.steps < 1 or args.threads < 1 or args.batch < 1:
        p.error("--steps, --threads and --batch must be >= 1")
    return args


ARGS = parse_args()
# Thread budget, set before torch loads. torch.set_num_threads sizes OpenMP's
# pool, but Debian's OpenBLAS (pthread build) keeps a pool of its own, sized
# from OPENBLAS_NUM_THREADS, that torch never touches. With T > 1, T OpenMP
# workers that spin-wait plus T OpenBLAS threads on T cores starve each other:
# on 2 cores that ran 2-3x slower than one thread. So by default PyTorch's own
# ops get T threads and BLAS runs on the calling thread, the fastest of the
# arrangements measured (README). An OPENBLAS_NUM_THREADS or OMP_WAIT_POLICY
# set in the environment wins.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch_common import (alternatives_blas, blas_in_use,  # noqa: E402
                          read_idx, warn_if_not_openblas)


def load_mnist(mnist_dir, model):
    images = read_idx(os.path.join(mnist_dir, "train-images-idx3-ubyte.gz"),
                      2051, 16)
    labels = read_idx(os.path.join(mnist_dir, "train-labels-idx1-ubyte.gz"),
                      2049, 8)
    n = labels.shape[0]
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    x = x.reshape(n, 784) if model == "mlp" else x.reshape(n, 1, 28, 28)
    y = torch.from_numpy(labels.astype(np.int64))
    return x.contiguous(), y


def build_model(model):
    if model == "mlp":
        return nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, 10))
    return nn.Sequential(  # NCHW, PyTorch's native layout
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32 * 13 * 13, 64), nn.ReLU(),
        nn.Linear(64, 10))


class Batches:
    """Contiguous batches of a fresh random permutation each epoch; the last
    batch of an epoch may be short, as in lockstep's ShardPlan."""

    def __init__(self, x, y, batch, gen):
        self.x, self.y, self.batch, self.gen = x, y, batch, gen
        self.perm, self.pos = None, 0

    def next(self):
        n = self.y.shape[0]
        if self.perm is None or self.pos >= n:
            self.perm = torch.randperm(n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return self.x.index_select(0, idx), self.y.index_select(0, idx)


def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    blas, blas_path = blas_in_use()
    warn_if_not_openblas(blas, blas_path)
    if ARGS.info:
        print(json.dumps({"torch": torch.__version__, "blas": blas,
                          "blas_path": blas_path,
                          "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"],
                          "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                          "alternatives_libblas": alternatives_blas(),
                          "torch_threads": torch.get_num_threads()}))
        return

    torch.manual_seed(ARGS.seed)
    gen = torch.Generator().manual_seed(ARGS.seed)
    x, y = load_mnist(ARGS.mnist_dir, ARGS.model)
    model = build_model(ARGS.model)
    # Keras' Adam defaults (lockstep follows Keras): eps 1e-7, not torch's 1e-8.
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    batches = Batches(x, y, ARGS.batch, gen)

    def step():
        xb, yb = batches.next()
        loss = loss_fn(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return yb.shape[0], loss

    model.train()
    for _ in range(WARMUP_STEPS):
        step()
    samples = 0
    t0 = time.perf_counter()
    for _ in range(ARGS.steps):
        n, loss = step()
        samples += n
    seconds = time.perf_counter() - t0
    final_loss = loss.item()
    print(json.dumps({
        "samples_per_sec": samples / seconds, "steps": ARGS.steps,
        "threads": ARGS.threads, "model": ARGS.model, "batch": ARGS.batch,
        "seconds": round(seconds, 3), "final_loss": round(final_loss, 4),
        "torch": torch.__version__, "blas": blas,
        "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"])}))


if __name__ == "__main__":
    main()
