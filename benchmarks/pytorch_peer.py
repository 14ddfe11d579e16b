#!/usr/bin/python3
# The PyTorch side of benchmarks/train_vs_pytorch.sh: trains the same MNIST
# model as a lockstep job (same batch, threads, Adam, loss) and prints one
# JSON line with its training-loop samples per second.
#
# Run with Debian's interpreter (/usr/bin/python3, package python3-torch), or
# for --device cuda with an interpreter whose torch has CUDA (Debian's has
# not; the script's LOCKSTEP_BENCH_PYTHON picks it).
#   pytorch_peer.py --model mlp|cnn --mnist-dir DIR --steps N --threads T
#       [--batch B] [--device cpu|cuda|cuda:N]
#   pytorch_peer.py --info [--device cuda:N]  # torch version, BLAS, the GPU
import argparse
import json
import os
import queue
import re
import sys
import threading
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
    p.add_argument("--device", default="cpu",
                   help="cpu (default), cuda or cuda:N")
    p.add_argument("--autocast", nargs="?", const="bf16",
                   choices=["bf16", "fp16"],
                   help="the forward under torch.autocast on the device in "
                   "bfloat16 (the default) or float16 (GPU only, with "
                   "torch.cuda.amp.GradScaler): lockstep's precision "
                   "\"bf16\" / \"fp16\"")
    p.add_argument("--info", action="store_true",
                   help="print torch version and BLAS in use, then exit")
    args = p.parse_args()
    if not args.info and (args.model is None or args.mnist_dir is None):
        p.error("--model and --mnist-dir are required (or --info)")
    if args.steps < 1 or args.threads < 1 or args.batch < 1:
        p.error("--steps, --threads and --batch must be >= 1")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", args.device):
        p.error(f"--device {args.device}: expected cpu, cuda or cuda:N")
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
                          read_idx, require_fast_blas)


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


class HostPrefetcher:
    """GPU mode: the batches of `batches`, assembled on a background thread up
    to `depth` ahead and pinned there (what DataLoader(pin_memory=True)
    does), as lockstep's BatchPrefetcher (core/data/batch_prefetcher.h, depth 4)
    assembles them; the timed step copies each with .to(non_blocking=True),
    the idiomatic fast path. lockstep stages its batches through pinned
    buffers too (GpuModel::StageInputs), one step ahead."""

    def __init__(self, batches, count, depth=4):
        self.q = queue.Queue(maxsize=depth)
        self.thread = threading.Thread(
            target=self._run, args=(batches, count), daemon=True)
        self.thread.start()

    def _run(self, batches, count):
        for _ in range(count):
            xb, yb = batches.next()
            self.q.put((xb.pin_memory(), yb.pin_memory()))

    def next(self):
        return self.q.get()


def cuda_device_or_exit():
    """The torch.device for --device, or exit naming why there is none."""
    index = int(ARGS.device.split(":")[1]) if ":" in ARGS.device else 0
    if not torch.cuda.is_available():
        built = (f"built with CUDA {torch.version.cuda}" if torch.version.cuda
                 else "a CPU-only build")
        sys.exit(f"--device {ARGS.device}: no CUDA device visible to PyTorch "
                 f"here ({sys.executable}: torch {torch.__version__}, {built};"
                 f" CUDA_VISIBLE_DEVICES="
                 f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')})")
    count = torch.cuda.device_count()
    if index >= count:
        sys.exit(f"--device {ARGS.device}: PyTorch sees {count} CUDA "
                 f"device(s) here (cuda:0..cuda:{count - 1})")
    return torch.device("cuda", index)


def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    on_gpu = ARGS.device != "cpu"
    device = cuda_device_or_exit() if on_gpu else torch.device("cpu")
    if on_gpu:
        # FP32 on the GPU, as lockstep's GPU replicas (GpuModelOptions'
        # allow_tf32 is false, and no job or flag turns it on): no TF32 in
        # cuBLAS matmuls or cuDNN convolutions.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    blas, blas_path = blas_in_use()
    if not on_gpu:  # on the GPU the BLAS only does host-side odds and ends
        require_fast_blas(blas, blas_path)  # exits 3 on a slow BLAS
    if ARGS.info:
        info = {"torch": torch.__version__, "blas": blas,
                "blas_path": blas_path,
                "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"],
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                "alternatives_libblas": alternatives_blas(),
                "torch_threads": torch.get_num_threads()}
        if on_gpu:
            info.update({
                "gpu": torch.cuda.get_device_name(device),
                "torch_cuda": torch.version.cuda or "",
                "cudnn": torch.backends.cudnn.version() or 0,
                "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
                "cudnn_tf32": torch.backends.cudnn.allow_tf32,
                "cudnn_benchmark": torch.backends.cudnn.benchmark})
        print(json.dumps(info))
        return

    torch.manual_seed(ARGS.seed)
    gen = torch.Generator().manual_seed(ARGS.seed)
    x, y = load_mnist(ARGS.mnist_dir, ARGS.model)
    model = build_model(ARGS.model).to(device)
    # Keras' Adam defaults (lockstep follows Keras): eps 1e-7, not torch's 1e-8.
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    dtype = torch.float16 if ARGS.autocast == "fp16" else torch.bfloat16
    if ARGS.autocast == "fp16" and not on_gpu:
        sys.exit("--autocast fp16 runs on a GPU only (as lockstep's fp16)")
    # GradScaler's defaults are lockstep's fp16 loss scaling; disabled it
    # passes the loss and the step through.
    scaler = torch.cuda.amp.GradScaler(enabled=ARGS.autocast == "fp16")
    batches = Batches(x, y, ARGS.batch, gen)
    if on_gpu:
        # Pre-staged (see HostPrefetcher): pinned host batches ready ahead on
        # another thread; the host-to-GPU copy of each batch is part of the
        # timed step, on both sides.
        batches = HostPrefetcher(batches, WARMUP_STEPS + ARGS.steps)

    def step():
        xb, yb = batches.next()
        if on_gpu:
            xb = xb.to(device, non_blocking=True)
            yb = yb.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=dtype,
                            enabled=ARGS.autocast is not None):
            out = model(xb)
        loss = loss_fn(out.float(), yb)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return yb.shape[0], loss

    model.train()
    for _ in range(WARMUP_STEPS):
        step()
    samples = 0
    if on_gpu:
        torch.cuda.synchronize(device)  # warm-up's GPU work stays out
    t0 = time.perf_counter()
    for _ in range(ARGS.steps):
        n, loss = step()
        samples += n
    if on_gpu:
        torch.cuda.synchronize(device)  # the timed steps' GPU work stays in
    seconds = time.perf_counter() - t0
    final_loss = loss.item()
    result = {
        "samples_per_sec": samples / seconds, "steps": ARGS.steps,
        "threads": ARGS.threads, "model": ARGS.model, "batch": ARGS.batch,
        "device": str(device),
        "seconds": round(seconds, 3), "final_loss": round(final_loss, 4),
        "torch": torch.__version__, "blas": blas,
        "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"])}
    if on_gpu:
        result["gpu"] = torch.cuda.get_device_name(device)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
