#!/usr/bin/python3
"""torchvision's MobileNetV2 training step, timed: the peer of
`bazel run //core/model:model_benchmark -- THREADS STEPS mobilenet_v2 ALPHA SIZE
BATCH [frozen]` (the same model: the base without its top, global average
pooling, dense 512 + ReLU, dense 10; SGD; random NCHW inputs).

usage: /usr/bin/python3 benchmarks/torchvision_step.py THREADS STEPS ALPHA
           SIZE BATCH [frozen]
"frozen" freezes the base (requires_grad off, eval mode) as Keras'
base.trainable = False does. Prints ms/step and samples/s after 2 warm-up
steps. Exits 3 (torch_common.require_fast_blas) when torch runs on a slow
BLAS: the comparison would flatter lockstep.
"""
import os
import sys
import time

# Threads set before torch loads, as the other peers do: torch's OpenMP pool
# gets THREADS, and Debian's OpenBLAS (pthread build, a pool torch never
# resizes) runs on the calling thread; OPENBLAS_NUM_THREADS set in the
# environment wins.
if len(sys.argv) > 1 and sys.argv[1].isdigit() and int(sys.argv[1]) > 0:
    os.environ["OMP_NUM_THREADS"] = sys.argv[1]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import blas_in_use, require_fast_blas  # noqa: E402


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    threads, steps = int(argv[0]), int(argv[1])
    alpha, size, batch = float(argv[2]), int(argv[3]), int(argv[4])
    frozen = len(argv) > 5 and argv[5] == "frozen"
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    require_fast_blas(*blas_in_use())  # exits 3 on a slow BLAS
    base = torchvision.models.mobilenet_v2(width_mult=alpha).features
    last = base[-1][0].out_channels
    model = torch.nn.Sequential(base, torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(last, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    if frozen:
        for p in base.parameters():
            p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad],
                          lr=0.01)
    x = torch.rand(batch, 3, size, size)
    y = torch.randint(10, (batch,))
    model.train()
    if frozen:
        base.eval()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    t = time.time()
    for _ in range(steps):
        step()
    dt = time.time() - t
    print("torch%s threads=%d  %.3f ms/step  %.0f samples/s" %
          (" frozen" if frozen else "", threads, 1e3 * dt / steps,
           steps * batch / dt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
