#!/usr/bin/python3
"""The PyTorch side of benchmarks/mobilenet_cluster_vs_ddp.sh: MobileNetV2
(torchvision's features, width --alpha) with the seed's head (global average
pooling, dense 512 + ReLU, dense --classes) trained on an image folder with
DistributedDataParallel over Gloo, one process per rank. The images come
from torchvision's ImageFolder (PIL decode, resize to --size, ImageNet
normalization) through a DataLoader in the training process (num_workers 0;
lockstep decodes on its prefetch thread); each rank takes its share of each
shuffled global batch. Adam, as the lockstep job. Prints one JSON line
(rank 0) with the timed steps' samples/s (the slowest rank's clock).

  mobilenet_ddp_peer.py --folder DIR --rank R --world-size W
      --rendezvous-file F [--steps 20 --warmup 3 --batch 32 --alpha 0.35
      --size 96 --classes 2 --threads 1 --timeout 300]
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torchvision
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import rendezvous_store, slowest_seconds  # noqa: E402


def die(msg):
    print("mobilenet_ddp_peer: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", required=True)
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
    p.add_argument("--timeout", type=int, default=300)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
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
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch,
                                         sampler=sampler, num_workers=0,
                                         drop_last=True)
    base = torchvision.models.mobilenet_v2(width_mult=a.alpha).features
    last = base[-1][0].out_channels
    model = torch.nn.Sequential(base, torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(last, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, a.classes))
    if world > 1:
        if not a.rendezvous_file:
            die("--rendezvous-file is required with --world-size > 1")
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
    if world > 1:
        dist.barrier()
    samples = 0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        samples += step()
    seconds = time.perf_counter() - t0
    seconds = slowest_seconds(seconds, world)
    if rank == 0:
        print(json.dumps({"samples_per_sec": samples / seconds,
                          "seconds": seconds, "steps": a.steps,
                          "world_size": world}))
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
