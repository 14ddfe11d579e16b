"""to_torch without a cluster: tied weights, strictness, dtype."""

import os

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
