#!/usr/bin/python3
"""The PyTorch side of lockstep's image-folder cluster test
(tests/onnx_image_test.cc): torchvision's --model (--classes outputs) from
its initial weights (init.safetensors), trained on the batches lockstep
trains on (benchmarks/data_batches: each epoch in the job's global order,
images NHWC as decoded) for --steps steps of Adam (Keras' epsilon, as
lockstep's), as DDP trains it on --replicas ranks: each global batch cut
into the replicas' contiguous blocks, each block's batch norms on its own
statistics, the gradient the global batch's mean, and the running
statistics moved toward the blocks' sample-weighted mean (lockstep's rule;
DDP would keep rank 0's). Then the test split's accuracy of torch's model
and of lockstep's (its checkpoint's model.safetensors, by name), both in
eval mode.

  torch_image_steps.py --init DIR/init.safetensors --batches DIR
      --steps N --lr LR --replicas R --model resnet18 --classes K
      --lockstep CKPT/model.safetensors

Prints one JSON line: {"torch": acc, "lockstep": acc, "train_losses": [..]}.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_batches import Batches, load_by_name  # noqa: E402


def images(x):
    """NHWC as decoded -> NCHW as torch's convolutions read them."""
    return x.permute(0, 3, 1, 2).contiguous()


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x[i:i + 256]).argmax(1) == y[i:i + 256]).sum())
                    for i in range(0, len(y), 256))
    return right / len(y)


def step(model, opt, x, y, replicas):
    """One data-parallel step over `replicas` contiguous blocks."""
    stats = [b for n, b in model.named_buffers()
             if n.endswith(("running_mean", "running_var"))]
    before = [b.clone() for b in stats]
    moved = [torch.zeros_like(b) for b in stats]
    n = len(y)
    opt.zero_grad()
    total = 0.0
    for r in range(replicas):
        lo, hi = r * n // replicas, (r + 1) * n // replicas
        for b, old in zip(stats, before):
            b.copy_(old)
        loss = F.cross_entropy(model(x[lo:hi]), y[lo:hi], reduction="sum")
        (loss / n).backward()
        total += loss.item()
        for m, b in zip(moved, stats):
            m += b * (hi - lo) / n
    with torch.no_grad():
        for b, m in zip(stats, moved):
            b.copy_(m)
    opt.step()
    return total / n


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("init", "batches", "lockstep", "model"):
        p.add_argument("--" + flag, required=True)
    for flag in ("steps", "replicas", "classes"):
        p.add_argument("--" + flag, type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    a = p.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    batches = Batches(a.batches)

    def build():
        return getattr(torchvision.models, a.model)(num_classes=a.classes)

    model = build()
    load_by_name(model, a.init)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, eps=1e-7)
    losses = []
    model.train()
    for s in range(a.steps):
        x, y = batches.step(s)
        losses.append(step(model, opt, images(x), y[:, 0], a.replicas))
    tx, ty = batches.split("test")
    tx, ty = images(tx), ty[:, 0]
    theirs = build()
    load_by_name(theirs, a.lockstep)
    print(json.dumps({"torch": accuracy(model, tx, ty),
                      "lockstep": accuracy(theirs, tx, ty),
                      "train_losses": losses}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
