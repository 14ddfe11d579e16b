#!/usr/bin/python3
"""torchvision reference for lockstep's mobilenet_v2 agreement test.

Builds torchvision.models.mobilenet_v2(width_mult=--alpha,
num_classes=--classes) (with --head: its features under a fine-tuning head,
global average pooling and a Linear "fc", as lockstep's include_top false
with a pooling and a dense layer) with seeded random weights, every batch norm given a
random scale, shift, running mean and running variance (torchvision's own
init leaves them trivial), and the classifier's dropout at --dropout. Runs:
  1. inference (eval mode) on an NHWC batch: the logits;
  2. one training step (train mode: batch statistics, the running statistics
     move by PyTorch's momentum 0.1 with the unbiased variance), in float64
     from the same float32 weights: the mean cross-entropy, every
     parameter's gradient and the running statistics after the step; and
     how far torch's own float32 gradients are from those.

Outputs (in --out DIR):
  model.safetensors     the state dict as it is (F32, and I64 for the
                        num_batches_tracked counters), as a user converting
                        torchvision's weights would write it
  batch.safetensors     x [N, H, W, 3] and labels [N] (float32)
  expected.safetensors  eval_logits [N, K] (fp32), loss [1], grad.<name> for
                        every parameter and after.<name> for every running
                        statistic (F64), torch_fp32_error.<name> [1]
"""

import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_reference import write_safetensors  # noqa: E402


def keep_clips_clear(model, nchw):
    """Moves batch-norm shifts so that no ReLU6 input of the training step
    lies near a clip (0 or 6).

    At a clip the gradient jumps by a whole term: where fp32 rounding puts
    an input on the other side than float64 does (a few 1e-6 off, deep in
    the net), every gradient below differs by percents, for lockstep or
    torch alike, depending on the CPU's BLAS kernels. So each channel of a
    conv-batch norm-ReLU6 block gets the smallest shift of its batch norm's
    bias (a multiple of the margin) that keeps its inputs at least
    0.1 / (4 x its values) from both clips, in forward order, in float64
    with batch statistics (the training step's values).
    """
    probe = copy.deepcopy(model).double()
    probe.train()
    shifts = {}

    def nudge(bn, inputs, out):
        c = out.shape[1]
        per_channel = out.numel() // c
        margin = min(2e-4, 0.1 / (4 * per_channel))
        values = out.transpose(0, 1).reshape(c, -1)
        delta = torch.zeros(c, dtype=out.dtype)
        for ch in range(c):
            v = values[ch]
            for k in range(0, 2000):
                d = margin * ((k + 1) // 2) * (1 if k % 2 else -1)
                near = torch.minimum((v + d).abs(), (v + d - 6).abs())
                if near.min().item() >= margin:
                    delta[ch] = d
                    break
            else:
                raise RuntimeError(f"no clear shift for channel {ch}")
        shifts[bn] = delta
        return out + delta.reshape(1, c, 1, 1)

    hooks = []
    originals = dict(zip(probe.modules(), model.modules()))
    for block in probe.modules():
        kids = list(block.children())
        if (len(kids) == 3 and isinstance(kids[1], torch.nn.BatchNorm2d)
                and isinstance(kids[2], torch.nn.ReLU6)):
            hooks.append(kids[1].register_forward_hook(nudge))
    with torch.no_grad():
        probe(nchw.double())
        for bn, delta in shifts.items():
            originals[bn].bias.add_(delta.float())
    for h in hooks:
        h.remove()


class Headed(torch.nn.Module):
    """mobilenet_v2's features, global average pooling, a Linear "fc"."""

    def __init__(self, base, classes):
        super().__init__()
        self.features = base.features
        self.fc = torch.nn.Linear(base.last_channel, classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.fc(torch.flatten(x, 1))


def build(a, dropout):
    model = torchvision.models.mobilenet_v2(width_mult=a.alpha,
                                            num_classes=a.classes,
                                            dropout=dropout)
    return Headed(model, a.classes) if a.head else model


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--alpha", type=float, default=0.35)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--head", action="store_true",
                   help="the features under pooling and a Linear fc")
    p.add_argument("--load", default="",
                   help="instead: load this safetensors file (a lockstep "
                        "checkpoint's model.safetensors) into the model, "
                        "non-strictly, and write loaded.safetensors with its "
                        "eval logits on --batch-file's x and, as 1-element "
                        "counts, the missing and unexpected keys")
    p.add_argument("--batch-file", default="")
    a = p.parse_args(argv)
    if a.load:
        return load(a)
    torch.manual_seed(a.seed)
    model = build(a, a.dropout)
    gen = torch.Generator().manual_seed(a.seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.5)
                m.num_batches_tracked.fill_(7)
            elif isinstance(m, torch.nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.1)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    x = torch.rand(a.batch, a.size, a.size, 3, generator=gen) * 2 - 1
    labels = torch.randint(a.classes, (a.batch,), generator=gen)
    nchw = x.permute(0, 3, 1, 2).contiguous()
    keep_clips_clear(model, nchw)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    model.eval()
    with torch.no_grad():
        eval_logits = model(nchw)

    # The training step in float64 too: the reference the test measures both
    # fp32 results (torch's and lockstep's) against.
    model64 = copy.deepcopy(model).double()
    model.train()
    logits = model(nchw)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    model64.train()
    loss64 = F.cross_entropy(model64(nchw.double()), labels)
    loss64.backward()
    grads32 = dict(model.named_parameters())

    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), state)
    write_safetensors(os.path.join(a.out, "batch.safetensors"),
                      {"x": x, "labels": labels.float()})
    expected = {"eval_logits": eval_logits,
                "loss": loss64.detach().reshape(1)}
    for name, param in model64.named_parameters():
        g64 = param.grad.detach()
        expected["grad." + name] = g64.contiguous()
        # How far torch's own fp32 gradient is from the float64 one.
        expected["torch_fp32_error." + name] = (
            (grads32[name].grad.double() - g64).abs().max().reshape(1))
    for name, buf in model64.named_buffers():
        if buf.dtype == torch.float64:
            expected["after." + name] = buf.detach().clone()
    write_safetensors(os.path.join(a.out, "expected.safetensors"), expected)
    return 0


def load(a):
    from torch_bert_reference import read_safetensors
    model = build(a, 0.2)
    weights, _ = read_safetensors(a.load)
    result = model.load_state_dict(weights, strict=False)
    # Everything but the batch-norm counters must have come from the file.
    missing = [k for k in result.missing_keys
               if not k.endswith("num_batches_tracked")]
    for k in missing + list(result.unexpected_keys):
        print("key not matched:", k, file=sys.stderr)
    batch, _ = read_safetensors(a.batch_file)
    model.eval()
    with torch.no_grad():
        logits = model(batch["x"].permute(0, 3, 1, 2).contiguous())
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "loaded.safetensors"), {
        "eval_logits": logits,
        "missing": torch.tensor([float(len(missing))]),
        "unexpected": torch.tensor([float(len(result.unexpected_keys))]),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
