# %% [markdown]
# # lockstep from Python: train BERT, watch it, use its weights in PyTorch
#
# A notebook in plain Python cells (`# %%`: VS Code, Jupytext and Spyder
# open it as a notebook; `python3 examples/notebook.py` runs it whole).
# Run it from the repository root with a cluster up, for example:
#
#     bazel-bin/client/lockstep coordinator --storage /tmp/lockstep &
#     bazel-bin/client/lockstep worker --coordinator 127.0.0.1:7070 &
#     bazel-bin/client/lockstep worker --coordinator 127.0.0.1:7070 &
#
# and the package importable (`pip install client/python`, or
# `PYTHONPATH=client/python`). The job reads the Brown corpus from
# ../shared/datasets/brown (examples/bert_mlm_brown.json's paths).

# %%
import json
import os
import sys

import lockstep

ADDRESS = os.environ.get("LOCKSTEP_COORDINATOR", "127.0.0.1:7070")
JOB = os.environ.get("LOCKSTEP_NOTEBOOK_JOB", "examples/bert_mlm_brown.json")
client = lockstep.Client(ADDRESS)
print(client, "workers:", sorted(w.name for w in client.workers() if w.alive))

# %% Submit: validated here first, relative data paths resolved against the
# job file's folder, then a progress bar until it ends.
job = client.submit(JOB)
result = job.wait(progress=True)
print(f"test accuracy {result['test_accuracy']:.4f}, "
      f"fingerprint {result['fingerprint']}")

# %% The loss curve, from the chief's TensorBoard scalars.
rows = job.metrics()
rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
loss = [(r["step"], r["value"]) for r in rows if r["tag"] == "train/loss"]
print("loss at", [s for s, _ in loss[:3]], "...:",
      [round(v, 3) for _, v in loss[:3]], "...", round(loss[-1][1], 3))
try:
    import matplotlib.pyplot as plt
    plt.plot(*zip(*loss))
    plt.xlabel("step")
    plt.ylabel("training loss")
    plt.show()
except ImportError:
    pass  # python3-matplotlib draws the curve when installed

# %% The final weights in PyTorch, by name. benchmarks/torch_bert.py is a
# BertForMaskedLM with Hugging Face's module tree (transformers' own class
# takes the same state dict).
import torch  # noqa: E402

sys.path.insert(0, "benchmarks")
import torch_bert  # noqa: E402

ckpt = job.checkpoint()
preset = json.loads(client.check(JOB))["model"]["layers"][0]
model = torch_bert.BertForMaskedLM(torch_bert.Config(preset)).eval()
ckpt.to_torch(model)
print(f"loaded {len(ckpt)} tensors from step {ckpt.step}")

# %% Fill a mask in torch with the job's own vocabulary (WordPiece, greedy
# longest match, as lockstep tokenizes).
with open(os.path.join(os.path.dirname(ckpt.path), "vocab.txt")) as f:
    vocab = [line.rstrip("\n") for line in f]
index = {t: i for i, t in enumerate(vocab)}


def wordpiece(word):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in index:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


text = os.environ.get("LOCKSTEP_NOTEBOOK_TEXT",
                      "the man went to the [MASK] .")
tokens = ["[CLS]"]
for word in text.lower().split():
    tokens += [word.upper()] if word == "[mask]" else wordpiece(word)
tokens.append("[SEP]")
at = tokens.index("[MASK]")
ids = torch.tensor([[index[t] for t in tokens]])
with torch.no_grad():
    logits = model(ids, torch.zeros_like(ids), torch.ones(ids.shape),
                   torch.tensor([[at]]))
p = torch.softmax(logits[0, 0], -1)
top = torch.topk(p, 5)
print("fill-mask:", " ".join(tokens))
for prob, i in zip(top.values.tolist(), top.indices.tolist()):
    print(f"  {vocab[i]:<12} {prob:.4f}")
