#!/usr/bin/python3
"""A torchvision model's training step, timed, and the same model exported
as ONNX: the peer of
`bazel run //core/model:model_benchmark -- THREADS STEPS onnx OUT BATCH`
(lockstep training the exported graph; benchmarks/onnx_vs_torch.sh runs
both).

usage: /usr/bin/python3 benchmarks/onnx_peer.py THREADS STEPS MODEL SIZE
           BATCH OUT.onnx
MODEL is resnet18 or mobilenet_v2 (10 classes, random weights). The graph is
written to OUT.onnx in training mode (opset 17, no constant folding: what
lockstep.export writes), then the module trains STEPS SGD steps on random
NCHW inputs of SIZE x SIZE; prints ms/step and samples/s after 2 warm-up
steps. Exits 3 (torch_common.require_fast_blas) when torch runs on a slow
BLAS: the comparison would flatter lockstep.
"""
import os
import sys
import time
import warnings

# Threads set before torch loads, as the other peers do.
if len(sys.argv) > 1 and sys.argv[1].isdigit() and int(sys.argv[1]) > 0:
    os.environ["OMP_NUM_THREADS"] = sys.argv[1]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_common import blas_in_use, require_fast_blas  # noqa: E402


def main(argv):
    if len(argv) != 6 or argv[2] not in ("resnet18", "mobilenet_v2"):
        print(__doc__, file=sys.stderr)
        return 2
    threads, steps = int(argv[0]), int(argv[1])
    name, size, batch, out = argv[2], int(argv[3]), int(argv[4]), argv[5]
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    require_fast_blas(*blas_in_use())  # exits 3 on a slow BLAS
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=10)
    if name == "mobilenet_v2":
        model.classifier[0].p = 0.0  # no dropout in either (the same work)
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.zeros(2, 3, size, size), out,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"},
                                        "logits": {0: "batch"}},
                          opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.rand(batch, 3, size, size)
    y = torch.arange(batch) % 10

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
    print("torch %s threads=%d  %.3f ms/step  %.0f samples/s" %
          (name, threads, 1e3 * dt / steps, steps * batch / dt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
