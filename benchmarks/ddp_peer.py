#!/usr/bin/python3
# The PyTorch side of benchmarks/cluster_vs_ddp.sh: trains the model of a
# lockstep job file (the same JSON that lockstep runs) with PyTorch, either
# as one plain process (--world-size 1) or as one rank of a DistributedData-
# Parallel group on the Gloo backend (--world-size N, one process per rank),
# and prints one JSON line (rank 0 only) with the training-loop samples/s.
#
# Run with Debian's interpreter (/usr/bin/python3, package python3-torch).
#   ddp_peer.py --job JOB.json --steps N [--rank R --world-size W
#               --rendezvous-file PATH] [--threads 1] [--warmup 20]
#   ddp_peer.py --info     # torch version, Gloo, and the BLAS really in use
#
# What it mirrors from the job file: the layers (conv2d / max_pool2d /
# flatten / dense / dropout, with their activations), Keras initialisation
# (Glorot-uniform kernels, zero biases), the optimizer (adam / adamw / sgd
# with the job's hyper-parameters and Keras defaults, e.g. Adam eps 1e-7),
# the learning-rate schedule (constant / piecewise, warm-up), the batch per
# replica, the data (mnist_idx, divided by data.scale), and lockstep's data
# split: one seeded permutation of the training set per epoch, cut into
# global batches of batch x world_size, rank r taking positions
# [r*b, (r+1)*b). Each rank's loss is its summed cross-entropy x world_size /
# (samples in the global batch), so DDP's gradient average is the exact
# global-batch mean, as in lockstep. Images are NCHW (PyTorch's own layout).
#
# Timing, the rule lockstep's side uses too (cluster_vs_ddp.sh): wall time
# from the end of the last warm-up step to the end of the last timed step,
# on every rank; the slowest rank's. A torch on a slow BLAS (not OpenBLAS or
# MKL) makes the peer exit 3 (torch_common.require_fast_blas).
import argparse
import datetime
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(
        description="PyTorch (DDP/Gloo) peer of benchmarks/cluster_vs_ddp.sh")
    p.add_argument("--job", help="lockstep job file (absolute data paths)")
    p.add_argument("--steps", type=int, default=600,
                   help="timed training steps (after --warmup)")
    p.add_argument("--warmup", type=int, default=20,
                   help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--rendezvous-file",
                   help="rank 0 hosts a TCPStore on a free 127.0.0.1 port and "
                        "writes the port here; the other ranks read it. Must "
                        "not exist yet; required when --world-size > 1")
    p.add_argument("--timeout", type=int, default=120,
                   help="seconds the rendezvous and each collective may take")
    p.add_argument("--host", default="127.0.0.1",
                   help="rank 0's TCPStore address (its network namespace's "
                        "own with cluster_vs_ddp --link)")
    p.add_argument("--info", action="store_true",
                   help="print torch version, Gloo and BLAS in use, then exit")
    args = p.parse_args()
    if args.info:
        return args
    if args.job is None:
        p.error("--job is required (or --info)")
    if args.steps < 1 or args.threads < 1 or args.world_size < 1 or \
            args.warmup < 0:
        p.error("--steps, --threads, --world-size must be >= 1, --warmup >= 0")
    if not 0 <= args.rank < args.world_size:
        p.error("--rank must be in [0, world-size)")
    if args.world_size > 1 and not args.rendezvous_file:
        p.error("--rendezvous-file is required when --world-size > 1")
    return args


ARGS = parse_args()
# One compute thread per process by default, set before torch loads: torch's
# OpenMP pool gets --threads, and Debian's OpenBLAS (pthread build, a pool of
# its own that torch never resizes) runs on the calling thread, as in
# pytorch_peer.py. OPENBLAS_NUM_THREADS set in the environment wins.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch_common import (alternatives_blas, blas_in_use,  # noqa: E402
                          make_schedule, read_idx, rendezvous_store,
                          require_fast_blas, slowest_seconds)


def die(msg):
    sys.exit(f"ddp_peer (rank {ARGS.rank}): {msg}")


# --- The job: model, optimizer, schedule, data. ------------------------------

def pair(v, what):
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, list) and len(v) == 2:
        return (int(v[0]), int(v[1]))
    die(f"{what}: expected an integer or [h, w], got {v!r}")


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


def activation(layer, where, last):
    act = layer.get("activation", "linear")
    if act == "linear":
        return []
    if act == "softmax":
        if last:  # fused into the cross-entropy, as Keras and lockstep do
            return []
        return [nn.Softmax(dim=1)]
    if act not in ACTIVATIONS:
        die(f"{where}.activation: {act!r} is not supported here")
    return [ACTIVATIONS[act]()]


def keras_init(module):
    nn.init.xavier_uniform_(module.weight)  # Glorot-uniform, as Keras
    if module.bias is not None:
        nn.init.zeros_(module.bias)


def build_model(spec):
    """nn.Sequential from a lockstep model spec; input NCHW (or flat)."""
    shape = list(spec["input_shape"])
    if len(shape) == 3:  # lockstep/Keras NHWC -> torch CHW
        h, w, c = shape
        cur = [c, h, w]
    elif len(shape) == 1:
        cur = [shape[0]]
    else:
        die(f"model.input_shape {shape}: expected [h, w, c] or [n]")
    input_chw = list(cur)
    mods = []
    layers = spec["layers"]
    for i, layer in enumerate(layers):
        where = f"model.layers[{i}]"
        t = layer["type"]
        last = i == len(layers) - 1
        if t == "conv2d":
            if len(cur) != 3:
                die(f"{where}: conv2d needs an image input")
            k = pair(layer["kernel_size"], f"{where}.kernel_size")
            s = pair(layer.get("strides", 1), f"{where}.strides")
            padding = layer.get("padding", "valid")
            if padding == "same" and s != (1, 1):
                die(f"{where}: padding 'same' with strides != 1 is not "
                    "supported here")
            conv = nn.Conv2d(cur[0], layer["filters"], k, stride=s,
                             padding=padding,
                             bias=layer.get("use_bias", True))
            keras_init(conv)
            mods.append(conv)
            mods += activation(layer, where, last)
            if padding == "valid":
                cur = [layer["filters"], (cur[1] - k[0]) // s[0] + 1,
                       (cur[2] - k[1]) // s[1] + 1]
            else:
                cur = [layer["filters"], cur[1], cur[2]]
        elif t == "max_pool2d":
            p = pair(layer.get("pool_size", 2), f"{where}.pool_size")
            s = pair(layer.get("strides", layer.get("pool_size", 2)),
                     f"{where}.strides")
            if layer.get("padding", "valid") != "valid":
                die(f"{where}: only padding 'valid' is supported here")
            mods.append(nn.MaxPool2d(p, stride=s))
            cur = [cur[0], (cur[1] - p[0]) // s[0] + 1,
                   (cur[2] - p[1]) // s[1] + 1]
        elif t == "flatten":
            mods.append(nn.Flatten())
            n = 1
            for d in cur:
                n *= d
            cur = [n]
        elif t == "dense":
            if len(cur) != 1:
                die(f"{where}: dense needs a flat input (add a flatten)")
            lin = nn.Linear(cur[0], layer["units"],
                            bias=layer.get("use_bias", True))
            keras_init(lin)
            mods.append(lin)
            mods += activation(layer, where, last)
            cur = [layer["units"]]
        elif t == "dropout":
            mods.append(nn.Dropout(layer["rate"]))
        else:
            die(f"{where}.type {t!r} is not supported here")
    return nn.Sequential(*mods), input_chw


def build_optimizer(spec, params):
    o = spec["optimizer"]
    t = o["type"]
    lr = o.get("learning_rate", 0.001)
    if t in ("adam", "adamw"):
        betas = (o.get("beta_1", 0.9), o.get("beta_2", 0.999))
        eps = o.get("epsilon", 1e-7)  # Keras' default, not torch's 1e-8
        if t == "adam":
            return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps,
                                    weight_decay=o.get("weight_decay", 0.0))
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps,
                                 weight_decay=o.get("weight_decay", 0.004))
    if t == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=o.get("momentum", 0.0),
                               nesterov=o.get("nesterov", False),
                               weight_decay=o.get("weight_decay", 0.0))
    die(f"optimizer.type {t!r} is not supported here")


def load_train(spec, input_chw):
    d = spec["data"]
    if d.get("format") != "mnist_idx":
        die(f"data.format {d.get('format')!r}: only mnist_idx is supported")
    images = read_idx(d["train_images"], 2051, 16)
    labels = read_idx(d["train_labels"], 2049, 8)
    n = labels.shape[0]
    x = torch.from_numpy(images.astype(np.float32) / float(d.get("scale", 1)))
    x = x.reshape([n] + input_chw)  # MNIST has one channel: HW == CHW
    y = torch.from_numpy(labels.astype(np.int64))
    return x.contiguous(), y


class Shards:
    """lockstep's ShardPlan: one seeded permutation per epoch, global batches
    of batch x world (the last of an epoch may be short), rank r taking
    positions [r*b, (r+1)*b) of each."""

    def __init__(self, x, y, batch, rank, world, seed, shuffle):
        self.x, self.y, self.b, self.rank, self.world = x, y, batch, rank, world
        self.seed, self.shuffle = seed, shuffle
        self.n = y.shape[0]
        self.global_batch = batch * world
        self.steps_per_epoch = (self.n + self.global_batch - 1) // \
            self.global_batch
        self.epoch, self.perm = -1, None

    def get(self, step):
        epoch, k = divmod(step, self.steps_per_epoch)
        if epoch != self.epoch:
            if self.shuffle:
                gen = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
                self.perm = torch.randperm(self.n, generator=gen)
            else:
                self.perm = torch.arange(self.n)
            self.epoch = epoch
        start = k * self.global_batch
        global_count = min(self.global_batch, self.n - start)
        lo = min(start + self.rank * self.b, self.n)
        hi = min(lo + self.b, start + global_count)
        idx = self.perm[lo:hi]
        return (self.x.index_select(0, idx), self.y.index_select(0, idx),
                global_count)


# --- Main. -------------------------------------------------------------------

def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    blas, blas_path = blas_in_use()
    # Every rank: each exits 3 before the rendezvous, so none waits for it.
    require_fast_blas(blas, blas_path)
    if ARGS.info:
        print(json.dumps({
            "torch": torch.__version__, "blas": blas, "blas_path": blas_path,
            "alternatives_libblas": alternatives_blas(),
            "gloo": dist.is_available() and dist.is_gloo_available(),
            "openblas_threads": os.environ["OPENBLAS_NUM_THREADS"]}))
        return

    with open(ARGS.job) as f:
        spec = json.load(f)
    world = ARGS.world_size
    seed = int(spec.get("seed", 0))
    batch = int(spec.get("batch_size_per_replica", 32))
    cluster = spec.get("cluster", {})
    if cluster.get("replicas_per_worker", 1) != 1:
        die("cluster.replicas_per_worker must be 1 (one rank per process)")

    torch.manual_seed(seed)  # same initial weights on every rank
    model, input_chw = build_model(spec["model"])
    x, y = load_train(spec, input_chw)
    shards = Shards(x, y, batch, ARGS.rank, world, seed,
                    spec["data"].get("shuffle", True))
    lr_at = make_schedule(spec, shards.steps_per_epoch, die)

    if world > 1:
        store = rendezvous_store(ARGS.rendezvous_file, ARGS.rank, world,
                                 ARGS.timeout, die, ARGS.host)
        dist.init_process_group(
            "gloo", store=store, rank=ARGS.rank, world_size=world,
            timeout=datetime.timedelta(seconds=ARGS.timeout))
        # Defaults, as a DDP user writes it (one 25 MB bucket holds all of
        # this model's gradients; they are all-reduced as backward ends).
        net = nn.parallel.DistributedDataParallel(model)
    else:
        net = model
    opt = build_optimizer(spec, net.parameters())
    loss_fn = nn.CrossEntropyLoss(reduction="sum")

    def step(s):
        xb, yb, global_count = shards.get(s)
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        # Summed loss x world / global count: DDP's average over ranks is
        # then the exact global-batch mean, as lockstep computes it.
        loss_sum = loss_fn(net(xb), yb)
        loss = loss_sum * (world / global_count)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return global_count, loss_sum, yb.shape[0]

    net.train()
    for s in range(ARGS.warmup):
        step(s)
    # The clock starts as the last warm-up step ends, on every rank (no
    # barrier: lockstep's side has none; DDP's all-reduce keeps the ranks
    # in step anyway).
    samples = 0
    t0 = time.perf_counter()
    for s in range(ARGS.warmup, ARGS.warmup + ARGS.steps):
        n, loss_sum, local = step(s)
        samples += n
    seconds = time.perf_counter() - t0
    final_loss = loss_sum.item() / max(local, 1)  # rank's last batch mean
    seconds = slowest_seconds(seconds, world)
    if ARGS.rank == 0:
        print(json.dumps({
            "samples_per_sec": samples / seconds, "steps": ARGS.steps,
            "warmup_steps": ARGS.warmup, "world_size": world,
            "threads": ARGS.threads, "batch_per_replica": batch,
            "global_batch": batch * world, "seconds": round(seconds, 3),
            "final_loss": round(final_loss, 4), "torch": torch.__version__,
            "backend": "gloo" if world > 1 else "none", "blas": blas,
            "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"])}),
            flush=True)
    if world > 1:
        # Every rank is past its last collective; then leave at once. c10d's
        # teardown (destroy_process_group, store and Gloo destructors) can
        # block on a peer that is already gone, and nothing is left to
        # measure or to save.
        dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
