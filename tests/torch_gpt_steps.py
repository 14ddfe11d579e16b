#!/usr/bin/python3
"""The PyTorch side of lockstep's causal-LM test (tests/onnx_gpt_test.cc):
the GPT of torch_onnx_text_reference.py from its initial weights
(init.safetensors), trained on the batches lockstep trains on
(benchmarks/data_batches: each epoch in the job's global order) for --steps
steps of Adam (Keras' epsilon, as lockstep's), each step's loss the mean
over the global batch's labelled positions (each one's next token); then
the test split's loss of three models: the initial one, torch's after the
steps, and lockstep's (its checkpoint's model.safetensors, by name).

  torch_gpt_steps.py --init DIR/init.safetensors --batches DIR --steps N
      --lr LR --vocab V --hidden H --layers L --heads A --length T
      --lockstep CKPT/model.safetensors

Prints one JSON line: {"initial": .., "torch": .., "lockstep": ..,
"train_losses": [...]}.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(os.path.dirname(here), "benchmarks"))
from torch_batches import Batches, load_by_name  # noqa: E402
from torch_onnx_text_reference import Gpt  # noqa: E402


def test_loss(model, x, y):
    with torch.no_grad():
        logits = model(x)
        used = y >= 0
        return F.cross_entropy(logits[used], y[used]).item()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("init", "batches", "lockstep"):
        p.add_argument("--" + flag, required=True)
    for flag in ("steps", "vocab", "hidden", "layers", "heads", "length"):
        p.add_argument("--" + flag, type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    a = p.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    batches = Batches(a.batches)
    model = Gpt(a.vocab, a.hidden, a.heads, a.layers, a.length)
    load_by_name(model, a.init)
    tx, ty = batches.split("test")
    initial = test_loss(model, tx, ty)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, eps=1e-7)
    losses = []
    model.train()
    for s in range(a.steps):
        bx, by = batches.step(s)
        opt.zero_grad()
        logits = model(bx)
        used = by >= 0
        loss = F.cross_entropy(logits[used], by[used])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    trained = test_loss(model, tx, ty)
    theirs = Gpt(a.vocab, a.hidden, a.heads, a.layers, a.length)
    load_by_name(theirs, a.lockstep)
    theirs.eval()
    print(json.dumps({"initial": initial, "torch": trained,
                      "lockstep": test_loss(theirs, tx, ty),
                      "train_losses": losses}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
