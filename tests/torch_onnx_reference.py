#!/usr/bin/python3
"""PyTorch reference for lockstep's ONNX import agreement test.

A small residual CNN, as a user would write it in torch (or with --model
torchvision's resnet18 or mobilenet_v2, random weights):
  conv 3x3 (pad 1) -> batch norm -> ReLU
  -> conv 3x3 (pad 1) -> batch norm, added to its input -> ReLU
  -> max pool 2x2 -> flatten (NCHW order) -> linear -> ReLU -> linear
with seeded weights, exported by torch.onnx.export in training mode
(opset 17, no constant folding) so the batch norms and the parameters keep
their state-dict names. One training step's loss (sparse categorical
cross-entropy, mean), logits and every parameter's gradient are written for
the test to compare with lockstep's step on the imported graph.

Outputs (in --out DIR):
  model.onnx            the exported graph
  state_dict.json       the state dict's tensors' shapes by name (less
                        num_batches_tracked)
  init.safetensors      those tensors as exported (a peer that trains the
                        module from the graph's initial weights)
  batch.safetensors     x [N, H, W, C] (NHWC: lockstep's images) and
                        labels [N] (float32)
  expected.safetensors  loss [1], logits [N, K] (the training pass's: batch
                        statistics), inference_logits [N, K] (running
                        statistics), grad.<state-dict name> for every
                        trainable parameter, grad64.<name> (the same step
                        in float64) and torch_fp32_error.<name> (the
                        largest |fp32 - float64| of torch's own)
"""

import argparse
import copy
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_reference import write_safetensors  # noqa: E402


class Net(nn.Module):
    def __init__(self, channels, height, width, filters, hidden, classes,
                 dropout):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, filters, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(filters)
        self.conv2 = nn.Conv2d(filters, filters, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(filters)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.fc1 = nn.Linear(filters * (height // 2) * (width // 2), hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(h + self.bn2(self.conv2(h)))
        h = torch.flatten(self.pool(h), 1)
        return self.fc2(self.drop(F.relu(self.fc1(h))))


class Ops(nn.Module):
    """What hand-written torch code exports beyond layers: a linear, a
    view, an RMSNorm written out (pow, mean, rsqrt, a weight), a softmax
    along the middle axis, concatenations, a sum and a mean over axes,
    the first and last place along an axis (x[:, 0], x[:, -1]), an upper
    triangle (torch.triu: Trilu on a batch), a log-softmax."""

    def __init__(self, channels, height, width, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(channels * height * width, 4 * hidden)
        self.g = nn.Parameter(torch.ones(hidden))
        self.fc2 = nn.Linear(6 * hidden + 4, classes)
        self.hidden = hidden

    def forward(self, x):
        h = self.fc1(torch.flatten(x, 1)).view(-1, 4, self.hidden)
        r = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
        s = torch.softmax(r, dim=1)
        c = torch.cat([r, s], dim=-1)                   # [4, 2h]
        # x[:, 0] and x[:, -1]: one place along an axis.
        z = torch.cat([c.sum(dim=1), c.mean(dim=-1), r.mean(dim=1),
                       h[:, 0], s[:, -1],
                       torch.triu(s, diagonal=1).sum(dim=1)],
                      dim=-1)                            # [2h + 4 + 4h]
        z = torch.log_softmax(z, dim=-1) + z
        return self.fc2(torch.tanh(z))


class Branches(nn.Module):
    """Feature maps split, concatenated and averaged (Inception- and
    ShuffleNet-like): a conv, its channels split in two (torch.chunk),
    a conv on each half (one dilated: DeepLab's atrous convolution), the halves and the input concatenated along the
    channels with a slice of the first half (a[:, 1:]), an average pool of
    3 with stride 2 and padding 1 (the pads
    counted, PyTorch's default), one of 2 with the pads not counted, and
    a linear."""

    def __init__(self, channels, height, width, filters, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 2 * filters, 3, padding=1)
        self.left = nn.Conv2d(filters, filters, 3, padding=2, dilation=2)
        self.right = nn.Conv2d(filters, filters, 1)
        self.pool1 = nn.AvgPool2d(3, stride=2, padding=1)
        self.pool2 = nn.AvgPool2d(2, stride=1, padding=1,
                                  count_include_pad=False)
        h = (height + 1) // 2 + 1
        w = (width + 1) // 2 + 1
        self.fc = nn.Linear((3 * filters - 1 + channels) * h * w, classes)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        a, b = torch.chunk(h, 2, dim=1)
        h = torch.cat([F.relu(self.left(a)), x, torch.tanh(self.right(b)),
                       a[:, 1:]], dim=1)
        h = self.pool2(self.pool1(h))
        return self.fc(torch.flatten(h, 1))


def build(a):
    """The module --model names, seeded; its dropout off unless --dropout
    (a random mask no reference step could share)."""
    torch.manual_seed(a.seed)
    if a.model == "residual_cnn":
        net = Net(a.channels, a.height, a.width, a.filters, a.hidden,
                  a.classes, a.dropout)
        bns = (net.bn1, net.bn2)
    elif a.model == "branches":
        net = Branches(a.channels, a.height, a.width, a.filters, a.classes)
        bns = ()
    elif a.model == "ops":
        net = Ops(a.channels, a.height, a.width, a.hidden, a.classes)
        with torch.no_grad():
            net.g.uniform_(0.5, 1.5)
        bns = ()
    else:
        import torchvision
        net = getattr(torchvision.models, a.model)(num_classes=a.classes)
        if a.model == "mobilenet_v2":
            net.classifier[0].p = a.dropout
        if a.model == "mobilenet_v3_small":
            net.classifier[2].p = a.dropout
        bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    # Non-trivial batch norm parameters and running statistics.
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
            bn.running_mean.uniform_(-0.1, 0.1)
            bn.running_var.uniform_(0.8, 1.2)
    return net


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--height", type=int, default=8)
    p.add_argument("--width", type=int, default=6)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--filters", type=int, default=4)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--classes", type=int, default=5)
    p.add_argument("--model", default="residual_cnn",
                   choices=["residual_cnn", "resnet18", "mobilenet_v2",
                            "mobilenet_v3_small", "ops", "branches"],
                   help="the small residual CNN above, or torchvision's "
                        "(random weights, --classes outputs)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="a dropout before the last linear (then no "
                        "reference step: its mask is random)")
    a = p.parse_args(argv)
    net = build(a)
    os.makedirs(a.out, exist_ok=True)
    net.train()
    example = torch.zeros(2, a.channels, a.height, a.width)
    torch.onnx.export(net, example, os.path.join(a.out, "model.onnx"),
                      input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"},
                                    "logits": {0: "batch"}},
                      opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    # What a lockstep checkpoint of it must hold to load back into torch:
    # every parameter and running statistic by name and shape.
    with open(os.path.join(a.out, "state_dict.json"), "w") as f:
        json.dump({k: list(v.shape) for k, v in net.state_dict().items()
                   if not k.endswith("num_batches_tracked")}, f)
    write_safetensors(os.path.join(a.out, "init.safetensors"),
                      {k: v.contiguous() for k, v in net.state_dict().items()
                       if not k.endswith("num_batches_tracked")})
    if a.dropout > 0:
        return 0

    gen = torch.Generator().manual_seed(a.seed + 1)
    x = torch.rand(a.batch, a.height, a.width, a.channels, generator=gen)
    x = x * 2 - 1
    labels = torch.randint(a.classes, (a.batch,), generator=gen)
    # Inference first (the batch norms on their running statistics, which
    # the training pass below moves).
    net.eval()
    with torch.no_grad():
        inference = net(x.permute(0, 3, 1, 2))
    net.train()
    # The same step in float64: a deep net in training mode amplifies fp32
    # rounding, so the test measures both against it.
    net64 = copy.deepcopy(net).double()
    loss64 = F.cross_entropy(net64(x.double().permute(0, 3, 1, 2)), labels)
    loss64.backward()
    logits = net(x.permute(0, 3, 1, 2))
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    write_safetensors(os.path.join(a.out, "batch.safetensors"),
                      {"x": x, "labels": labels.float()})
    expected = {"grad." + name: p.grad.contiguous()
                for name, p in net.named_parameters()}
    for (name, p), p64 in zip(net.named_parameters(), net64.parameters()):
        expected["grad64." + name] = p64.grad.float().contiguous()
        expected["torch_fp32_error." + name] = (
            (p.grad.double() - p64.grad).abs().max().float().reshape(1))
    expected["loss"] = loss.detach().reshape(1)
    expected["logits"] = logits.detach()
    expected["inference_logits"] = inference
    write_safetensors(os.path.join(a.out, "expected.safetensors"), expected)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
