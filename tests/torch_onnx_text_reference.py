#!/usr/bin/python3
"""PyTorch reference for lockstep's ONNX import of text models.

--model bert: the BERT masked language model of benchmarks/torch_bert.py
(Hugging Face's module tree and names, the decoder tied to the word
embeddings), seeded, exported by torch.onnx.export in training mode (opset
17, no constant folding) with the inputs named as lockstep's text data
fields: token_ids, segment_ids, padding_mask [N, L] and mask_positions
[N, P] (-1: an unused slot), the output "logits" [N, P, V]. Dropout is off
(a random mask no reference step could share).

--model gpt: a 2-layer GPT-style causal language model as nanoGPT writes
one (its module names: transformer.wte, transformer.h.0.attn.c_attn, ...;
pre-LayerNorm blocks, the causal mask a non-persistent buffer applied with
masked_fill, exact GELU, the head tied to the token embedding), one input
token_ids [N, L] and "logits" [N, L, V]; each position's label is the
next token (the last position's -1).

One training step on a seeded batch (padding in one sample, an unused slot):
the loss (cross-entropy, the mean over the used slots), the logits and
every parameter's gradient, in float32 and float64.

Outputs (in --out DIR):
  model.onnx            the exported graph
  init.safetensors      its initial parameters by state-dict name
  batch.safetensors     the four inputs (float32) and labels [N, P] (-1
                        where a slot is unused)
  expected.safetensors  loss [1], logits, grad.<name>, grad64.<name> (the
                        step in float64) and torch_fp32_error.<name> (the
                        largest |fp32 - float64| of torch's own)
"""

import argparse
import copy
import os
import sys

import math

import torch
import torch.nn.functional as F
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(os.path.dirname(here), "benchmarks"))
from torch_bert_reference import read_safetensors  # noqa: E402
from torch_bert_reference import write_safetensors  # noqa: E402
import torch_bert  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, length):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.register_buffer(
            "bias", torch.tril(torch.ones(length, length)).view(
                1, 1, length, length), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads, length):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, length)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, width, heads, layers, length):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(length, width),
            h=nn.ModuleList([Block(width, heads, length)
                             for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))
        for block in t.h:
            x = block(x)
        # The head tied to the token embedding (nanoGPT's, GPT-2's).
        return F.linear(t.ln_f(x), t.wte.weight)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--model", default="bert", choices=["bert", "gpt"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=3)
    p.add_argument("--length", type=int, default=10)
    p.add_argument("--predictions", type=int, default=3)
    p.add_argument("--vocab", type=int, default=50)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=0,
                   help="default: 2 * hidden")
    p.add_argument("--max-positions", type=int, default=0,
                   help="default: length + 6")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--std", type=float, default=0.3,
                   help="weights' scale (at BERT's 0.02 attention is nearly "
                        "uniform and its gradients nearly vanish)")
    p.add_argument("--init", help="bert: start from these parameters "
                   "(a safetensors file: a lockstep checkpoint's "
                   "model.safetensors), each by name, all of them")
    p.add_argument("--export-only", action="store_true",
                   help="write model.onnx and init.safetensors only (no "
                        "reference step): a model to train")
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    if a.model == "gpt":
        return gpt(a)
    cfg = torch_bert.Config({
        "vocab_size": a.vocab, "hidden": a.hidden, "layers": a.layers,
        "heads": a.heads, "intermediate": a.intermediate or 2 * a.hidden,
        "max_positions": a.max_positions or a.length + 6,
        "dropout": a.dropout, "initializer_stddev": a.std})
    net = torch_bert.BertForMaskedLM(cfg)
    if a.init:
        state = {k: torch.as_tensor(v) for k, v in
                 read_safetensors(a.init)[0].items()}
        missing, unexpected = net.load_state_dict(state, strict=False)
        # The decoder's weight is the word embeddings' (tied): one name.
        missing = [k for k in missing if k != "cls.predictions.decoder.weight"]
        if missing or unexpected:
            raise SystemExit(f"{a.init}: missing {missing}, "
                             f"unexpected {unexpected}")
    elif not a.export_only:
        # LayerNorms and biases away from 1 and 0, so their gradients count.
        with torch.no_grad():
            for name, t in net.named_parameters():
                if "LayerNorm" in name or name.endswith("bias"):
                    t.add_(torch.empty_like(t).uniform_(-0.2, 0.2))
    os.makedirs(a.out, exist_ok=True)
    # The initial weights by state-dict name (what a native bert_mlm
    # preset starts from to train the same model).
    write_safetensors(os.path.join(a.out, "init.safetensors"),
                      {k: v.detach().contiguous()
                       for k, v in net.named_parameters()})

    gen = torch.Generator().manual_seed(a.seed + 1)
    n, length, pred = a.batch, a.length, a.predictions
    ids = torch.randint(a.vocab, (n, length), generator=gen)
    segments = torch.randint(2, (n, length), generator=gen)
    mask = torch.ones(n, length)
    mask[0, length - 3:] = 0  # one sample padded
    positions = torch.stack([torch.randperm(length - 3, generator=gen)[:pred]
                             for _ in range(n)])
    positions[1, pred - 1] = -1  # an unused slot
    labels = torch.randint(a.vocab, (n, pred), generator=gen)
    labels[positions < 0] = -1

    net.train()
    example = (ids, segments, mask, positions)
    names = ["token_ids", "segment_ids", "padding_mask", "mask_positions"]
    torch.onnx.export(net, example, os.path.join(a.out, "model.onnx"),
                      input_names=names, output_names=["logits"],
                      dynamic_axes={k: {0: "batch"}
                                    for k in names + ["logits"]},
                      opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    if a.export_only:
        return 0

    def step(model, dtype):
        logits = model(ids, segments, mask.to(dtype), positions)
        used = labels >= 0
        loss = F.cross_entropy(logits[used], labels[used])
        loss.backward()
        return loss, logits

    return write_step(a.out, net, step, {
        "token_ids": ids.float(), "segment_ids": segments.float(),
        "padding_mask": mask, "mask_positions": positions.float(),
        "labels": labels.float()})


def write_step(out, net, step, batch):
    """Runs step(model, dtype) -> (loss, logits) on net in float32 and on a
    float64 copy, and writes batch.safetensors (`batch`) and
    expected.safetensors (loss, logits, every parameter's gradient in both
    precisions and torch's own fp32 error)."""
    net64 = copy.deepcopy(net).double()
    step(net64, torch.float64)
    loss, logits = step(net, torch.float32)
    write_safetensors(os.path.join(out, "batch.safetensors"), batch)
    expected = {"loss": loss.detach().reshape(1), "logits": logits.detach()}
    for (name, t), t64 in zip(net.named_parameters(), net64.parameters()):
        expected["grad." + name] = t.grad.contiguous()
        expected["grad64." + name] = t64.grad.float().contiguous()
        expected["torch_fp32_error." + name] = (
            (t.grad.double() - t64.grad).abs().max().float().reshape(1))
    write_safetensors(os.path.join(out, "expected.safetensors"), expected)
    return 0


def gpt(a):
    net = Gpt(a.vocab, a.hidden, a.heads, a.layers, a.length)
    with torch.no_grad():
        for name, t in net.named_parameters():
            if t.dim() >= 2:
                t.normal_(0, a.std)
            elif "ln" in name:
                t.copy_(1 + torch.empty_like(t).uniform_(-0.2, 0.2)
                        if name.endswith("weight")
                        else torch.empty_like(t).uniform_(-0.2, 0.2))
            else:
                t.uniform_(-0.2, 0.2)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "init.safetensors"),
                      {k: v.detach().contiguous()
                       for k, v in net.named_parameters()})
    gen = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(a.vocab, (a.batch, a.length), generator=gen)
    labels = torch.full_like(ids, -1)
    labels[:, :-1] = ids[:, 1:]
    net.train()
    torch.onnx.export(net, (ids,), os.path.join(a.out, "model.onnx"),
                      input_names=["token_ids"], output_names=["logits"],
                      dynamic_axes={"token_ids": {0: "batch"},
                                    "logits": {0: "batch"}},
                      opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    if a.export_only:
        return 0

    def step(model, dtype):
        logits = model(ids)
        used = labels >= 0
        loss = F.cross_entropy(logits[used], labels[used])
        loss.backward()
        return loss, logits

    return write_step(a.out, net, step,
                      {"token_ids": ids.float(), "labels": labels.float()})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
