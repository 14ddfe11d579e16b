#!/usr/bin/python3
"""PyTorch reference of lockstep's "precision": "bf16" policy for the MLP and
the CNN presets (tests/bf16_policy_torch_test.cc).

lockstep's bf16 rounds every input of a matrix product or convolution to
bfloat16 (round to nearest, ties to even), forward and backward, and keeps
everything else in float32: the products of two bfloat16 values are exact,
their sums float32, a product's output is not rounded, a bias's gradient is
the unrounded output gradient's sum. This script runs that policy in float64
(custom autograd functions for linear and conv2d), so the only difference
left to lockstep's float32 sums is their rounding; and torch.autocast's own
step (cpu, bfloat16), for a second, looser comparison.

  --model mlp  x [N, 8, 8, 1] -> flatten -> fc1 (32, relu) -> fc2 (16,
               relu) -> fc3 (10)
  --model cnn  x [N, 12, 12, 1] -> conv (4 filters 3x3 valid, relu) ->
               max pool 2 -> flatten (NCHW order, as lockstep's under
               param_names "torch") -> fc1 (16, relu) -> fc2 (10)
  --model mobile  x [N, 10, 10, 1] -> conv (4 filters 3x3, relu) ->
               depthwise conv 3x3 ("dw", relu) -> flatten -> fc (10)

Outputs (in --out DIR): model.safetensors (float32 weights, torch names and
layouts), batch.safetensors (x NHWC, labels as float32), expected.safetensors
(loss [1] and grad.<name> of the policy in float64; autocast_loss [1] and
autocast_grad.<name> in float32).
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_reference import write_safetensors  # noqa: E402


def r(t):
    """t rounded to bfloat16 (nearest, ties to even), in t's dtype."""
    return t.to(torch.bfloat16).to(t.dtype)


class Linear(torch.autograd.Function):
    """y = r(x) r(w)^T + b; dx = r(dy) r(w), dw = r(dy)^T r(x), db = sum dy."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return r(x) @ r(w).t() + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        return r(dy) @ r(w), r(dy).t() @ r(x), dy.sum(0)


class Conv(torch.autograd.Function):
    """conv2d (`groups`: depthwise) of the rounded x and w plus b; its
    gradients from r(dy)."""

    @staticmethod
    def forward(ctx, x, w, b, groups):
        ctx.save_for_backward(x, w)
        ctx.groups = groups
        return F.conv2d(r(x), r(w), b, groups=groups)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        g = ctx.groups
        dx = torch.nn.grad.conv2d_input(x.shape, r(w), r(dy), groups=g)
        dw = torch.nn.grad.conv2d_weight(r(x), w.shape, r(dy), groups=g)
        return dx, dw, dy.sum((0, 2, 3)), None


def init(model, gen):
    shapes = {"mlp": {"fc1": (32, 64), "fc2": (16, 32), "fc3": (10, 16)},
              "cnn": {"conv": (4, 1, 3, 3), "fc1": (16, 100), "fc2": (10, 16)},
              "mobile": {"conv": (4, 1, 3, 3), "dw": (4, 1, 3, 3),
                         "fc": (10, 144)}}
    w = {}
    for name, shape in shapes[model].items():
        fan_in = 1
        for d in shape[1:]:
            fan_in *= d
        w[name + ".weight"] = torch.randn(shape, generator=gen) / fan_in ** 0.5
        w[name + ".bias"] = torch.randn(shape[0], generator=gen) * 0.1
    return w


def forward(model, w, x, policy):
    """Logits of x [N, H, W, 1]; policy: the bf16 functions, else plain."""
    lin = Linear.apply if policy else F.linear
    if model == "mlp":
        h = x.reshape(x.shape[0], -1)
        h = F.relu(lin(h, w["fc1.weight"], w["fc1.bias"]))
        h = F.relu(lin(h, w["fc2.weight"], w["fc2.bias"]))
        return lin(h, w["fc3.weight"], w["fc3.bias"])
    conv = Conv.apply if policy else (
        lambda x, w, b, groups: F.conv2d(x, w, b, groups=groups))
    h = F.relu(conv(x.permute(0, 3, 1, 2), w["conv.weight"], w["conv.bias"],
                    1))
    if model == "mobile":
        h = F.relu(conv(h, w["dw.weight"], w["dw.bias"], 4))
        return lin(h.reshape(x.shape[0], -1), w["fc.weight"], w["fc.bias"])
    h = F.max_pool2d(h, 2)
    # NCHW's order: lockstep's flatten under param_names "torch".
    h = F.relu(lin(h.reshape(x.shape[0], -1), w["fc1.weight"],
                   w["fc1.bias"]))
    return lin(h, w["fc2.weight"], w["fc2.bias"])


def step(model, weights, x, labels, dtype, policy, autocast):
    leaves = {n: t.detach().clone().to(dtype).requires_grad_(True)
              for n, t in weights.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = forward(model, leaves, x.to(dtype), policy)
    loss = F.cross_entropy(logits.float() if autocast else logits, labels)
    loss.backward()
    return loss.detach(), {n: t.grad.detach() for n, t in leaves.items()}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--model", choices=["mlp", "cnn", "mobile"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    weights = init(a.model, gen)
    side = {"mlp": 8, "cnn": 12, "mobile": 10}[a.model]
    x = torch.rand(a.batch, side, side, 1, generator=gen) * 2 - 1
    labels = torch.randint(10, (a.batch,), generator=gen)
    loss, grads = step(a.model, weights, x, labels, torch.float64, True, False)
    ac_loss, ac_grads = step(a.model, weights, x, labels, torch.float32,
                             False, True)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), weights)
    write_safetensors(os.path.join(a.out, "batch.safetensors"),
                      {"x": x, "labels": labels.float()})
    expected = {"loss": loss.reshape(1), "autocast_loss": ac_loss.reshape(1)}
    for n in weights:
        expected["grad." + n] = grads[n].contiguous()
        expected["autocast_grad." + n] = ac_grads[n].float().contiguous()
    write_safetensors(os.path.join(a.out, "expected.safetensors"), expected)
    print("loss=%.9g autocast_loss=%.9g out=%s" % (loss.item(), ac_loss.item(),
                                                    a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
