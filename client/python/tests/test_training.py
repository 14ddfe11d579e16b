"""submit -> wait -> result -> metrics -> checkpoint -> to_torch, on a real
coordinator and two workers; torch's forward from the loaded weights must
reproduce lockstep's own evaluation of them."""

import io
import os

import numpy as np
import pytest

import jobs
import lockstep

if os.environ.get("LOCKSTEP_REQUIRE_TORCH") == "1":
    import torch  # the test command installed it: a failed import is a defect
else:
    torch = pytest.importorskip(
        "torch", reason="python3-torch is not installed (the README's test "
        "command installs it)")


def torch_eval(model, x, y):
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y))
        acc = (logits.argmax(1).numpy() == y).mean()
    return float(loss), float(acc)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(8, 16)
        self.dense_1 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.dense_1(torch.relu(self.dense(x)))


class Cnn(torch.nn.Module):
    """The CNN a PyTorch user writes: NCHW images, nn.Flatten. With
    "param_names": "torch" lockstep flattens its feature maps channel by
    channel too, so the dense layer's weights mean the same here."""

    def __init__(self):
        super().__init__()
        self.conv2d = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.flatten = torch.nn.Flatten()
        self.dense = torch.nn.Linear(64, 3)

    def forward(self, x):
        # The CSV rows are 4x4 one-channel images.
        h = torch.relu(self.conv2d(x.reshape(-1, 1, 4, 4)))
        return self.dense(self.flatten(h))


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_submit_wait_result_checkpoint_to_torch(cluster, tmp_path, kind):
    features = 8 if kind == "mlp" else 16
    paths = jobs.write_csv(str(tmp_path), features)
    job_dict = (jobs.mlp_job if kind == "mlp" else jobs.cnn_job)(
        f"py-{kind}", str(tmp_path))
    client = cluster.client()
    job = client.submit(job_dict, data_dir=str(tmp_path))
    assert job.name == f"py-{kind}"
    shown = io.StringIO()
    result = job.wait(progress=True, file=shown, timeout=120)
    status = job.status()
    assert status.state == "SUCCEEDED"
    assert status.step == status.total_steps == 16  # 2 epochs of 256/32
    # One generation of the job's 2 workers, from step 0.
    assert [(m.generation, m.from_step, m.workers, m.why)
            for m in status.membership] == [(1, 0, 2, "start")]
    assert status.straggler is None  # none once finished
    assert result["fingerprint"] == status.fingerprint
    assert result["test_accuracy"] == pytest.approx(status.test_accuracy)
    text = shown.getvalue()
    assert f"job py-{kind} SUCCEEDED" in text, text
    assert "16/16" in text, text
    # The relative data paths were resolved against data_dir.
    assert f'"train_path": "{paths["train"]}"' in client.check(
        job_dict, data_dir=str(tmp_path))

    ckpt = job.checkpoint()
    assert ckpt.step == 16
    assert job.checkpoints()[-1] == 16
    model = Mlp() if kind == "mlp" else Cnn()
    assert sorted(ckpt) == sorted(model.state_dict())
    ckpt.to_torch(model)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), ckpt[name])
    x, y = jobs.read_csv(paths["test"])
    loss, acc = torch_eval(model, x, y)
    # lockstep evaluated the same final weights on the same 64 samples.
    assert acc == pytest.approx(result["test_accuracy"], abs=1e-6)
    assert loss == pytest.approx(result["test_loss"], rel=1e-5)
    assert acc > 0.5  # it learned (3 classes: chance is 0.33)

    earlier = job.checkpoint(step=12)
    assert earlier.step == 12
    assert not np.array_equal(earlier["dense.weight"], ckpt["dense.weight"])
    with pytest.raises(lockstep.CheckpointError,
                       match=r"no checkpoint at step 5; committed: 8, 12, 16"):
        job.checkpoint(step=5)

    rows = job.metrics()
    if not isinstance(rows, list):
        rows = rows.to_dict("records")
    tags = {r["tag"] for r in rows}
    assert {"train/loss", "train/accuracy", "learning_rate", "eval/loss",
            "eval/accuracy"} <= tags, sorted(tags)
    steps = sorted({r["step"] for r in rows})
    assert steps[-1] == 16 and 2 in steps, steps


def test_to_torch_names_what_does_not_match(cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    job = cluster.client().submit(
        jobs.mlp_job("py-mismatch", str(tmp_path), epochs=1),
        data_dir=str(tmp_path))
    job.wait(progress=False, timeout=120)
    ckpt = job.checkpoint()

    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = torch.nn.Linear(8, 32)
            self.head = torch.nn.Linear(32, 3)

    with pytest.raises(lockstep.WeightsMismatch) as e:
        ckpt.to_torch(Other())
    assert e.value.missing == ["head.weight", "head.bias"]
    assert sorted(e.value.unexpected) == ["dense_1.bias", "dense_1.weight"]
    assert ("dense.weight", (16, 8), (32, 8)) in e.value.mismatched
    assert "missing in the checkpoint (2): head.weight, head.bias" in str(
        e.value)
    assert "param_names" not in str(e.value)  # the names are torch's


def test_a_keras_named_checkpoint_says_which_naming_torch_needs(cluster,
                                                                tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    spec = jobs.mlp_job("py-keras-names", str(tmp_path), epochs=1)
    del spec["model"]["param_names"]  # Keras names: dense/kernel [in, out]
    job = cluster.client().submit(spec, data_dir=str(tmp_path))
    job.wait(progress=False, timeout=120)
    ckpt = job.checkpoint()
    assert "dense/kernel" in ckpt and ckpt["dense/kernel"].shape == (8, 16)
    with pytest.raises(lockstep.WeightsMismatch) as e:
        ckpt.to_torch(Mlp())
    assert sorted(e.value.missing) == [
        "dense.bias", "dense.weight", "dense_1.bias", "dense_1.weight"]
    assert ('The checkpoint has Keras names ("dense/bias") and layouts: '
            'give the job\'s model "param_names": "torch"') in str(e.value)


def write_safetensors(path, tensors):
    """A torch state dict as safetensors (F32), with numpy alone."""
    import json
    import struct
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_a_torch_state_dict_starts_a_torch_named_cnn(cluster, tmp_path):
    """The other direction: the weights of the torch CNN users write (NCHW,
    nn.Flatten) as a job's initial weights mean the same in lockstep. With
    a learning rate too small to move them, the job's test loss and
    accuracy are torch's on the same samples."""
    paths = jobs.write_csv(str(tmp_path), 16)
    torch.manual_seed(5)
    model = Cnn()
    write_safetensors(str(tmp_path / "init.safetensors"), model.state_dict())
    spec = jobs.cnn_job("py-cnn-init", str(tmp_path))
    spec["epochs"] = 1
    spec["optimizer"] = {"type": "sgd", "learning_rate": 1e-30}
    spec["model"]["init"] = {"safetensors": "init.safetensors"}
    result = cluster.client().submit(spec, data_dir=str(tmp_path)).wait(
        progress=False, timeout=120)
    x, y = jobs.read_csv(paths["test"])
    loss, acc = torch_eval(model, x, y)
    assert result["test_accuracy"] == pytest.approx(acc, abs=1e-6)
    assert result["test_loss"] == pytest.approx(loss, rel=1e-5)
