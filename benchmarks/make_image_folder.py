#!/usr/bin/python3
"""Writes an image folder of PNGs (torchvision.io.write_png) for the image
benchmarks and tests: by default a learnable two-class one,
DIR/{horizontal,vertical}/NNNN.png, SIZE x SIZE RGB stripes in random
colours with noise; with --mnist, MNIST's digits (grey, 28 x 28) as
DIR/train/D/NNNN.png and DIR/test/D/NNNN.png, the first --per-class images
of each digit from the train files and the first --test-per-class from
t10k.

  make_image_folder.py DIR [--per-class 320] [--size 96] [--seed 1]
  make_image_folder.py DIR --mnist MNIST_DIR --per-class N --test-per-class M
"""
import argparse
import gzip
import os
import sys

import numpy as np
import torch
import torchvision


def stripes(a):
    g = torch.Generator().manual_seed(a.seed)
    for label, name in enumerate(("horizontal", "vertical")):
        os.makedirs(os.path.join(a.dir, name), exist_ok=True)
        for i in range(a.per_class):
            period = int(torch.randint(4, 16, (1,), generator=g))
            idx = torch.arange(a.size)
            on = ((idx // period) % 2).float()
            mask = on[:, None] if label == 0 else on[None, :]
            mask = mask.expand(a.size, a.size)
            c0 = torch.rand(3, 1, 1, generator=g)
            c1 = torch.rand(3, 1, 1, generator=g)
            img = c0 * (1 - mask) + c1 * mask
            img = img + 0.1 * torch.randn(3, a.size, a.size, generator=g)
            img = (img.clamp(0, 1) * 255).to(torch.uint8)
            torchvision.io.write_png(
                img, os.path.join(a.dir, name, "%04d.png" % i))


def idx(path, header):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read()[header:], dtype=np.uint8)


def digits(mnist, prefix, per_class, out):
    images = idx(os.path.join(mnist, prefix + "-images-idx3-ubyte.gz"), 16)
    labels = idx(os.path.join(mnist, prefix + "-labels-idx1-ubyte.gz"), 8)
    images = images.reshape(len(labels), 28, 28)
    for d in range(10):
        os.makedirs(os.path.join(out, str(d)), exist_ok=True)
        for i, at in enumerate(np.flatnonzero(labels == d)[:per_class]):
            torchvision.io.write_png(
                torch.from_numpy(images[at].copy())[None],
                os.path.join(out, str(d), "%04d.png" % i))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--per-class", type=int, default=320)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mnist", help="a folder with MNIST's four IDX .gz files")
    p.add_argument("--test-per-class", type=int, default=100)
    a = p.parse_args()
    if a.mnist:
        digits(a.mnist, "train", a.per_class, os.path.join(a.dir, "train"))
        digits(a.mnist, "t10k", a.test_per_class, os.path.join(a.dir, "test"))
    else:
        stripes(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
