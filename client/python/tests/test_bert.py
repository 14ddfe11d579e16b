"""A tiny BERT masked language model trained on two workers; its last
checkpoint loaded by name into a PyTorch BertForMaskedLM (Hugging Face's
module tree) fills a mask with the probabilities `lockstep predict` gives."""

import os
import random
import re
import subprocess
import sys

import pytest

import cluster as cluster_mod
import lockstep

if os.environ.get("LOCKSTEP_REQUIRE_TORCH") == "1":
    import torch  # the test command installed it: a failed import is a defect
else:
    torch = pytest.importorskip(
        "torch", reason="python3-torch is not installed (the README's test "
        "command installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import torch_bert  # noqa: E402  the benchmarks' HF-named BERT

PRESET = {"vocab_size": 96, "hidden": 32, "layers": 1, "heads": 2,
          "intermediate": 64, "max_positions": 32, "dropout": 0.0}
SENTENCE = "the cat sat on the [MASK]"


def write_corpus(folder):
    rnd = random.Random(0)
    animals = ["cat", "dog", "bird", "horse", "fish", "cow"]
    places = ["mat", "house", "tree", "field", "river", "barn"]
    verbs = ["sat on", "ran to", "looked at", "slept near"]

    def line():
        return (f"the {rnd.choice(animals)} {rnd.choice(verbs)} the "
                f"{rnd.choice(places)} and the {rnd.choice(animals)} "
                "watched it carefully")
    for name, n in (("train.txt", 400), ("valid.txt", 40)):
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n".join(line() for _ in range(n)) + "\n")


def bert_job():
    return {
        "name": "py-bert", "seed": 1,
        "model": dict(PRESET, preset="bert_mlm"),
        "loss": "sparse_categorical_crossentropy",
        "optimizer": {"type": "adam", "learning_rate": 0.003},
        "data": {"format": "text", "train_path": "train.txt",
                 "test_path": "valid.txt", "vocab_size": 96,
                 "sequence_length": 32, "mask_rate": 0.15,
                 "max_predictions": 4},
        "batch_size_per_replica": 8, "epochs": 2,
        "checkpoint": {"every_steps": 1000, "keep": 2},
        "summary": {"every_steps": 10},
        "cluster": {"workers": 2, "replicas_per_worker": 1},
    }


def parse_predict(text):
    """(tokens, mask index, {token: probability}, vocab path)."""
    vocab = re.search(r"vocabulary (\S+)", text).group(1)
    tokens = re.search(r"^tokens: (.*)$", text, re.M).group(1).split(" ")
    at = int(re.search(r"\[MASK\] 1 of 1 \(token (\d+)\)", text).group(1))
    probs = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^\s+\d+\. (\S+)\s+([0-9.]+)$", text, re.M)}
    return tokens, at, probs, vocab


def test_bert_checkpoint_in_torch_fills_the_mask_as_lockstep_does(
        cluster, tmp_path):
    write_corpus(str(tmp_path))
    job_dict = bert_job()
    client = cluster.client()
    job = client.submit(job_dict, data_dir=str(tmp_path))
    result = job.wait(progress=False, timeout=180)
    assert result["steps"] == job.status().total_steps
    ckpt = job.checkpoint()
    # One encoder layer, as asked: 16 tensors in it, 10 outside.
    assert len([k for k in ckpt if ".layer.0." in k]) == 16
    assert len(ckpt) == 26
    assert not [k for k in ckpt if ".layer.1." in k]

    model = torch_bert.BertForMaskedLM(torch_bert.Config(PRESET)).eval()
    ckpt.to_torch(model)

    job_file = tmp_path / "job.json"
    job_file.write_text(client.check(job_dict, data_dir=str(tmp_path)))
    run = subprocess.run(
        [cluster_mod.binary(), "predict", str(job_file), "--text", SENTENCE,
         "--checkpoint", os.path.dirname(ckpt.path), "--top-k", "5"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    tokens, at, probs, vocab_path = parse_predict(run.stdout)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]", tokens
    assert tokens[at] == "[MASK]" and len(probs) == 5, run.stdout
    with open(vocab_path) as f:
        vocab = [line.rstrip("\n") for line in f]
    index = {t: i for i, t in enumerate(vocab)}
    ids = torch.tensor([[index[t] for t in tokens]])
    with torch.no_grad():
        logits = model(ids, torch.zeros_like(ids),
                       torch.ones(ids.shape, dtype=torch.float32),
                       torch.tensor([[at]]))
    p = torch.softmax(logits[0, 0], dim=-1)
    for token, prob in probs.items():
        # predict prints 4 decimals; fp32 differences are far below that.
        assert float(p[index[token]]) == pytest.approx(prob, abs=6e-5), (
            token, float(p[index[token]]), prob)
    top = [vocab[i] for i in torch.topk(p, 5).indices.tolist()]
    assert top[0] == max(probs, key=probs.get), (top, probs)
