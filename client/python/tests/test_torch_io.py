"""to_torch without a cluster: tied weights, strictness, dtype; export
and a job trained on its graph by `lockstep train`."""

import json
import os
import subprocess

import numpy as np
import pytest

import lockstep

if os.environ.get("LOCKSTEP_REQUIRE_TORCH") == "1":
    import torch  # the test command installed it: a failed import is a defect
else:
    torch = pytest.importorskip(
        "torch", reason="python3-torch is not installed (the README's test "
        "command installs it)")


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(5, 3)
        self.dec = torch.nn.Linear(3, 5, bias=False)
        self.dec.weight = self.emb.weight  # as Hugging Face ties them
        self.norm = torch.nn.BatchNorm1d(3)


def params():
    rng = np.random.default_rng(0)
    return {"emb.weight": rng.normal(size=(5, 3)).astype(np.float32),
            "norm.weight": np.ones(3, np.float32),
            "norm.bias": np.zeros(3, np.float32),
            "norm.running_mean": np.full(3, 0.5, np.float32),
            "norm.running_var": np.full(3, 2.0, np.float32)}


def test_a_tied_weight_loads_under_every_name():
    p = params()
    m = lockstep.to_torch(p, Tied())
    np.testing.assert_array_equal(m.dec.weight.detach().numpy(),
                                  p["emb.weight"])
    np.testing.assert_array_equal(m.norm.running_var.numpy(), [2, 2, 2])


def test_strict_names_what_is_missing_and_loose_loads_the_rest():
    p = params()
    del p["norm.running_var"]
    p["extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(lockstep.WeightsMismatch) as e:
        lockstep.to_torch(p, Tied())
    assert e.value.missing == ["norm.running_var"]
    assert e.value.unexpected == ["extra.weight"]
    m = lockstep.to_torch(p, Tied(), strict=False)
    np.testing.assert_array_equal(m.emb.weight.detach().numpy(),
                                  p["emb.weight"])
    p["emb.weight"] = np.zeros((5, 4), np.float32)
    with pytest.raises(lockstep.WeightsMismatch,
                       match=r"shapes differ \(checkpoint vs module\): "
                       r"emb.weight \[5, 4\] vs \[5, 3\]"):
        lockstep.to_torch(p, Tied(), strict=False)


class SmallCnn(torch.nn.Module):
    """A user's own CNN: conv, batch norm, ReLU, pooling, dropout, linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.pool = torch.nn.MaxPool2d(2)
        self.drop = torch.nn.Dropout(0.1)
        self.fc = torch.nn.Linear(6 * 4 * 4, 10)

    def forward(self, x):
        h = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(self.drop(torch.flatten(h, 1)))


def test_an_exported_module_trains_and_its_checkpoint_loads_back(tmp_path):
    import cluster

    torch.manual_seed(0)
    module = SmallCnn().eval()
    path = lockstep.export(module, torch.zeros(2, 1, 8, 8),
                                str(tmp_path / "cnn.onnx"))
    assert path == str(tmp_path / "cnn.onnx")
    assert not module.training  # its mode is restored
    job = {"name": "own", "seed": 1,
           "model": {"onnx": "cnn.onnx"},
           "loss": "sparse_categorical_crossentropy",
           "optimizer": {"type": "adam", "learning_rate": 0.003},
           "data": {"format": "synthetic", "train_samples": 1024,
                    "test_samples": 256},
           "batch_size_per_replica": 32, "epochs": 3,
           "checkpoint": {"every_steps": 0}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    r = subprocess.run([cluster.binary(), "train", "job.json", "--storage",
                        "storage", "--threads", "1"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cnn.onnx: " in r.stdout + r.stderr
    result = json.loads(
        (tmp_path / "storage/jobs/own/result.json").read_text())
    assert result["test_accuracy"] > 0.5, r.stdout  # chance is 0.1
    ckpt = tmp_path / "storage/jobs/own/checkpoints"
    step = (ckpt / "latest").read_text().strip()
    params = lockstep.read_safetensors(str(ckpt / step / "model.safetensors"))
    before = module.fc.weight.detach().clone()
    lockstep.to_torch(params, module)  # strict: every name and shape
    assert not torch.equal(before, module.fc.weight.detach())
    np.testing.assert_array_equal(module.bn.running_var.numpy(),
                                  params["bn.running_var"])


class TinyMlm(torch.nn.Module):
    """A masked-LM head over embeddings, of the text format's four fields."""

    def __init__(self, vocab, width):
        super().__init__()
        self.words = torch.nn.Embedding(vocab, width)
        self.segments = torch.nn.Embedding(2, width)
        self.out = torch.nn.Linear(width, vocab)

    def forward(self, ids, segments, mask, positions):
        h = self.words(ids) * mask.unsqueeze(-1) + self.segments(segments)
        index = positions.clamp(min=0).unsqueeze(-1).expand(-1, -1,
                                                            h.shape[-1])
        return self.out(torch.gather(h, 1, index))


def test_a_module_of_several_inputs_exports_and_trains_on_text(tmp_path):
    import cluster

    torch.manual_seed(0)
    module = TinyMlm(64, 16)
    names = ["token_ids", "segment_ids", "padding_mask", "mask_positions"]
    example = (torch.zeros(2, 16, dtype=torch.long),
               torch.zeros(2, 16, dtype=torch.long), torch.ones(2, 16),
               torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="4 input names need a tuple"):
        lockstep.export(module, example[0], str(tmp_path / "x.onnx"), names)
    lockstep.export(module, example, str(tmp_path / "mlm.onnx"), names,
                    "logits")
    sentences = ["the cat sat on the mat and looked at the dog",
                 "a dog ran after the cat in the garden today",
                 "we read the book on the table in the evening"]
    (tmp_path / "train.txt").write_text(
        "\n".join(sentences[i % 3] for i in range(300)) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(sentences) + "\n")
    job = {"name": "mlm", "seed": 1,
           "model": {"onnx": "mlm.onnx", "input": names},
           "loss": "sparse_categorical_crossentropy",
           "optimizer": {"type": "adam", "learning_rate": 0.01},
           "data": {"format": "text", "train_path": "train.txt",
                    "test_path": "valid.txt", "vocab_size": 64,
                    "sequence_length": 16, "max_predictions": 3},
           "batch_size_per_replica": 16, "epochs": 2,
           "checkpoint": {"every_steps": 0}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    r = subprocess.run([cluster.binary(), "train", "job.json", "--storage",
                        "storage", "--threads", "1"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "inputs token_ids [16], segment_ids [16], padding_mask [16], " \
        "mask_positions [3]" in r.stdout + r.stderr
    ckpt = tmp_path / "storage/jobs/mlm/checkpoints"
    step = (ckpt / "latest").read_text().strip()
    params = lockstep.read_safetensors(str(ckpt / step / "model.safetensors"))
    assert sorted(params) == sorted(k for k, _ in module.named_parameters())
    before = module.out.weight.detach().clone()
    lockstep.to_torch(params, module)  # strict: every name and shape
    assert not torch.equal(before, module.out.weight.detach())
