#!/usr/bin/python3
"""PyTorch reference for lockstep's image-head agreement test.

The model is the seed's fine-tuning head over a small convolution:
  conv2d (3x3, valid, ReLU or ReLU6, --groups) [-> depthwise conv2d (3x3, stride 2,
  TensorFlow 'same' padding, ReLU6)] -> global average pooling -> dense
with a sparse categorical cross-entropy over --classes logits, or (--loss
bce) one sigmoid output and binary cross-entropy, mean over the batch. torch runs it
in NCHW; the files below hold NHWC images and the parameters in Keras'
layout (conv kernels [kh, kw, in, out], dense kernels [in, out]) under Keras
names ("conv/kernel"), or with --names torch in PyTorch's own layout and
names ("conv.weight"), as a torch state dict would have them.

Outputs (in --out DIR):
  model.safetensors     conv/kernel, conv/bias, head/kernel, head/bias
  batch.safetensors     x [N, H, W, C] and labels [N] (float32)
  expected.safetensors  loss [1], logits [N, K] and grad.<name> for every
                        parameter
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_reference import write_safetensors  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--height", type=int, default=9)
    p.add_argument("--width", type=int, default=7)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--filters", type=int, default=6)
    p.add_argument("--classes", type=int, default=5)
    p.add_argument("--activation", choices=["relu", "relu6"], default="relu")
    p.add_argument("--loss", choices=["sce", "bce"], default="sce")
    p.add_argument("--names", choices=["keras", "torch"], default="keras")
    p.add_argument("--groups", type=int, default=1,
                   help="the conv's groups (channels and filters split)")
    p.add_argument("--depthwise", action="store_true",
                   help="a depthwise conv2d (MobileNetV2's) after the conv")
    p.add_argument("--conv-std", type=float, default=0.4,
                   help="the conv weights' scale (2.0 puts many "
                        "pre-activations past relu6's 6)")
    a = p.parse_args(argv)
    gen = torch.Generator().manual_seed(a.seed)

    def normal(*shape, std):
        return (torch.randn(*shape, generator=gen) * std).requires_grad_()

    conv_w = normal(a.filters, a.channels // a.groups, 3, 3, std=a.conv_std)
    conv_b = normal(a.filters, std=0.2)
    dw_w = normal(a.filters, 1, 3, 3, std=0.5)
    dw_b = normal(a.filters, std=0.2)
    outputs = 1 if a.loss == "bce" else a.classes
    head_w = normal(outputs, a.filters, std=0.5)
    head_b = normal(outputs, std=0.1)
    x = torch.rand(a.batch, a.height, a.width, a.channels, generator=gen) * 2 - 1
    labels = torch.randint(2 if a.loss == "bce" else a.classes, (a.batch,),
                           generator=gen)

    act = F.relu6 if a.activation == "relu6" else F.relu
    pre = F.conv2d(x.permute(0, 3, 1, 2), conv_w, conv_b, groups=a.groups)
    h = act(pre)
    if a.depthwise:
        # TensorFlow 'same' with stride 2: the extra row or column of
        # padding goes after (bottom, right).
        def pads(size):
            out = (size + 1) // 2
            total = max((out - 1) * 2 + 3 - size, 0)
            return total // 2, total - total // 2
        top, bottom = pads(h.shape[2])
        left, right = pads(h.shape[3])
        h = F.relu6(F.conv2d(F.pad(h, (left, right, top, bottom)), dw_w, dw_b,
                             stride=2, groups=a.filters))
    pooled = F.adaptive_avg_pool2d(h, 1).flatten(1)  # [N, F]
    logits = pooled @ head_w.t() + head_b
    if a.loss == "bce":  # the logit under the sigmoid output
        loss = F.binary_cross_entropy_with_logits(logits[:, 0],
                                                  labels.float())
    else:
        loss = F.cross_entropy(logits, labels)
    loss.backward()

    # Keras layouts: conv [out, in, kh, kw] -> [kh, kw, in, out], dense
    # [out, in] -> [in, out].
    def conv(t):
        return t.detach().permute(2, 3, 1, 0).contiguous()

    def dense(t):
        return t.detach().t().contiguous()

    # Depthwise [C, 1, kh, kw] -> Keras [kh, kw, C, 1].
    def depthwise(t):
        return t.detach().permute(2, 3, 0, 1).contiguous()

    if a.names == "torch":  # the state dict as it is
        def same(t):
            return t.detach().contiguous()
        conv = dense = depthwise = same
    sep = "." if a.names == "torch" else "/"
    kernel = "weight" if a.names == "torch" else "kernel"
    params = {
        "conv" + sep + kernel: (conv(conv_w), conv(conv_w.grad)),
        "conv" + sep + "bias": (conv_b.detach(), conv_b.grad),
        "head" + sep + kernel: (dense(head_w), dense(head_w.grad)),
        "head" + sep + "bias": (head_b.detach(), head_b.grad),
    }
    if a.depthwise:
        dw_kernel = "weight" if a.names == "torch" else "depthwise_kernel"
        params["dw" + sep + dw_kernel] = (depthwise(dw_w), depthwise(dw_w.grad))
        params["dw" + sep + "bias"] = (dw_b.detach(), dw_b.grad)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"),
                      {k: v for k, (v, _) in params.items()})
    write_safetensors(os.path.join(a.out, "batch.safetensors"),
                      {"x": x, "labels": labels.float()})
    expected = {"grad." + k: g.contiguous() for k, (_, g) in params.items()}
    expected["loss"] = loss.detach().reshape(1)
    expected["logits"] = logits.detach()
    expected["probabilities"] = (torch.sigmoid(logits) if a.loss == "bce"
                                 else torch.softmax(logits, 1)).detach()
    # How many pre-activations each clip acts on (the test wants both).
    expected["clipped_low"] = (pre < 0).float().sum().reshape(1)
    expected["clipped_high"] = (pre > 6).float().sum().reshape(1)
    write_safetensors(os.path.join(a.out, "expected.safetensors"), expected)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
