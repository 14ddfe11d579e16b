#!/usr/bin/python3
"""Writes a learnable two-class image folder for the image benchmarks:
DIR/{horizontal,vertical}/NNNN.png, SIZE x SIZE RGB stripes in random colours
with noise (torchvision.io.write_png).

  make_image_folder.py DIR [--per-class 320] [--size 96] [--seed 1]
"""
import argparse
import os
import sys

import torch
import torchvision


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--per-class", type=int, default=320)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    g = torch.Generator().manual_seed(a.seed)
    for label, name in enumerate(("horizontal", "vertical")):
        os.makedirs(os.path.join(a.dir, name), exist_ok=True)
        for i in range(a.per_class):
            period = int(torch.randint(4, 16, (1,), generator=g))
            idx = torch.arange(a.size)
            stripes = ((idx // period) % 2).float()
            mask = stripes[:, None] if label == 0 else stripes[None, :]
            mask = mask.expand(a.size, a.size)
            c0 = torch.rand(3, 1, 1, generator=g)
            c1 = torch.rand(3, 1, 1, generator=g)
            img = c0 * (1 - mask) + c1 * mask
            img = img + 0.1 * torch.randn(3, a.size, a.size, generator=g)
            img = (img.clamp(0, 1) * 255).to(torch.uint8)
            torchvision.io.write_png(
                img, os.path.join(a.dir, name, "%04d.png" % i))
    return 0


if __name__ == "__main__":
    sys.exit(main())
