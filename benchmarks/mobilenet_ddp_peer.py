#!/usr/bin/python3
"""The PyTorch side of benchmarks/mobilenet_cluster_vs_ddp.sh: MobileNetV2
(torchvision's features, width --alpha) with the seed's head (global average
pooling, dense 512 + ReLU, dense --classes) trained on an image folder with
DistributedDataParallel over Gloo, one process per rank. The images come
from torchvision's ImageFolder (PIL decode, resize to --size, ImageNet
normalization) through a DataLoader: with --decode-workers N > 0, N worker
processes decode ahead of the training thread (prefetch_factor 4,
persistent), as lockstep decodes on its prefetch thread and helpers
(core/data/batch_prefetcher.cc: clamp(cores / 4, 1, 8) threads); with 0,
the training thread decodes. Each rank takes its share of each shuffled
global batch. Adam, as the lockstep job.

Timing, the rule lockstep's side uses too: wall time from the end of the
last warm-up step to the end of the last timed step, on every rank; the
slowest rank's. Prints one JSON line (rank 0) with the timed steps'
samples/s.

  mobilenet_ddp_peer.py --folder DIR --rank R --world-size W
      --rendezvous-file F [--steps 20 --warmup 3 --batch 32 --alpha 0.35
      --size 96 --classes 2 --threads 1 --decode-workers 0 --timeout 300]
  mobilenet_ddp_peer.py --info     # torch version and the BLAS in use
"""
import argparse
import datetime
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--rendezvous-file")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--alpha", type=float, default=0.35)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--decode-workers", type=int, default=0,
                   help="DataLoader worker processes decoding the images "
                        "(0: the training thread decodes)")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--info", action="store_true",
                   help="print torch version and BLAS in use, then exit")
    a = p.parse_args()
    if a.info:
        return a
    if a.folder is None:
        p.error("--folder is required (or --info)")
    if min(a.steps, a.threads, a.world_size, a.batch) < 1 or a.warmup < 0 \
            or a.decode_workers < 0:
        p.error("--steps, --threads, --world-size, --batch must be >= 1; "
                "--warmup and --decode-workers >= 0")
    if not 0 <= a.rank < a.world_size:
        p.error("--rank must be in [0, world-size)")
    if a.world_size > 1 and not a.rendezvous_file:
        p.error("--rendezvous-file is required with --world-size > 1")
    return a


ARGS = parse_args()
# Threads set before torch loads, as the other peers do: torch's OpenMP pool
# gets --threads and Debian's OpenBLAS (pthread build, a pool torch never
# resizes) runs on the calling thread; OPENBLAS_NUM_THREADS set in the
# environment wins.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torchvision  # noqa: E402
from torchvision import transforms  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import (blas_in_use, rendezvous_store,  # noqa: E402
                          require_fast_blas, slowest_seconds)


def die(msg):
    print("mobilenet_ddp_peer: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    blas, blas_path = blas_in_use()
    require_fast_blas(blas, blas_path)  # exits 3 on a slow BLAS
    if a.info:
        print(json.dumps({"torch": torch.__version__,
                          "torchvision": torchvision.__version__,
                          "blas": blas, "blas_path": blas_path,
                          "openblas_threads":
                              os.environ["OPENBLAS_NUM_THREADS"]}))
        return 0
    torch.manual_seed(1)
    world, rank = a.world_size, a.rank
    tf = transforms.Compose([
        transforms.Resize((a.size, a.size)),
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])
    data = torchvision.datasets.ImageFolder(a.folder, transform=tf)
    sampler = torch.utils.data.distributed.DistributedSampler(
        data, num_replicas=world, rank=rank, shuffle=True, seed=1,
        drop_last=True)
    extra = {}
    if a.decode_workers > 0:
        extra = {"prefetch_factor": 4, "persistent_workers": True}
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch,
                                         sampler=sampler,
                                         num_workers=a.decode_workers,
                                         drop_last=True, **extra)
    base = torchvision.models.mobilenet_v2(width_mult=a.alpha).features
    last = base[-1][0].out_channels
    model = torch.nn.Sequential(base, torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(last, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, a.classes))
    if world > 1:
        store = rendezvous_store(a.rendezvous_file, rank, world, a.timeout, die)
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=world,
            timeout=datetime.timedelta(seconds=a.timeout))
        net = torch.nn.parallel.DistributedDataParallel(model)
    else:
        net = model
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()

    def batches():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                yield xb, yb
            epoch += 1

    it = batches()

    def step():
        xb, yb = next(it)
        loss = loss_fn(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return xb.shape[0] * world

    net.train()
    for _ in range(a.warmup):
        step()
    # The clock starts as the last warm-up step ends (no barrier: lockstep's
    # side has none either; DDP's all-reduce already keeps the ranks in step).
    samples = 0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        samples += step()
    seconds = time.perf_counter() - t0
    seconds = slowest_seconds(seconds, world)
    if rank == 0:
        print(json.dumps({"samples_per_sec": samples / seconds,
                          "seconds": seconds, "steps": a.steps,
                          "warmup_steps": a.warmup, "world_size": world,
                          "decode_workers": a.decode_workers,
                          "threads": a.threads, "blas": blas,
                          "openblas_threads":
                              int(os.environ["OPENBLAS_NUM_THREADS"])}),
              flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
