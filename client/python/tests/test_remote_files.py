"""A job's files read by a client that does not see the coordinator's
storage: the coordinator keeps it on a tmpfs in a mount namespace of its
own, so this process (another working folder, no such mount) gets result,
metrics, checkpoints and ``lockstep pull`` over the job service only. They
must equal the coordinator's files byte for byte; a transfer damaged on the
way is detected and resumed; a wrong token is refused."""

import json
import os
import subprocess

import numpy as np
import pytest

import cluster as cluster_mod
import jobs
import lockstep
from flip_proxy import FlipProxy
from lockstep._files import read_safetensors, read_scalars

TOKEN = "remote-files-token"


def _can_unshare():
    try:
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"],
            capture_output=True, timeout=10).returncode == 0
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not _can_unshare(),
    reason="needs root for a mount namespace (unshare --mount): the "
    "coordinator's storage must be invisible to the client")


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A private-storage cluster with a token, and a finished MLP job."""
    folder = str(tmp_path_factory.mktemp("remote"))
    c = cluster_mod.Cluster(folder, token=TOKEN, private_storage=True)
    data = str(tmp_path_factory.mktemp("data"))
    jobs.write_csv(data, 8)
    with c.client() as client:
        job = client.submit(jobs.mlp_job("far", data), data_dir=data)
        job.wait(progress=False, timeout=120 * cluster_mod.SLOWDOWN)
    yield c
    c.stop()


def coordinator_bytes(c, path):
    with open(c.coordinator_path(path), "rb") as f:
        return f.read()


def coordinator_files(c, job_dir):
    """{relative path: bytes} of the job's folder as the coordinator sees
    it (what pull fetches: result, summaries, checkpoints)."""
    root = c.coordinator_path(job_dir)
    out = {}
    for folder, _, names in os.walk(root):
        for n in names:
            full = os.path.join(folder, n)
            out[os.path.relpath(full, root)] = open(full, "rb").read()
    return out


def test_the_storage_is_not_visible_here_and_files_come_over_the_api(remote):
    client = remote.client()
    job = client.job("far")
    status = job.status()
    assert status.state == "SUCCEEDED"
    assert len(status.storage_id) == 32
    # Here the storage path is an empty folder (the tmpfs is the
    # coordinator's alone): nothing to read locally.
    assert os.listdir(remote.storage) == []
    assert not job._local(status)
    marker = os.path.join(status.storage_path, "..", "..", "coordinator",
                          "storage_id")
    assert coordinator_bytes(remote, marker).decode().strip() == \
        status.storage_id

    # result(): the coordinator's result.json, parsed.
    want = coordinator_bytes(remote, status.result_path)
    assert job._read(status, "result.json") == want
    assert job.result() == json.loads(want)

    # checkpoints() and checkpoint(): the committed steps, and every tensor
    # of model.safetensors with its exact bytes.
    folder = os.path.join(status.storage_path, "checkpoints")
    steps = sorted(int(n[5:]) for n in os.listdir(
        remote.coordinator_path(folder)) if n.startswith("step-"))
    assert job.checkpoints() == steps and len(steps) == 3
    for step in (None, steps[0]):
        params = job.checkpoint(step)
        name = os.path.basename(status.checkpoint_path) if step is None \
            else f"step-{step:08d}"
        local = read_safetensors(remote.coordinator_path(
            os.path.join(folder, name, "model.safetensors")))
        assert list(params) == list(local)
        for k in local:
            assert params[k].tobytes() == local[k].tobytes(), k
    with pytest.raises(lockstep.CheckpointError,
                       match=r"no checkpoint at step 5; committed: "):
        job.checkpoint(5)

    # metrics(): the chief's scalars, as read from its own event files.
    rows = job.metrics()
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    want_rows = read_scalars(remote.coordinator_path(
        os.path.join(status.storage_path, "summaries")))
    assert rows == want_rows and len(rows) > 10


def test_pull_copies_the_jobs_folder_byte_for_byte(remote, tmp_path):
    status = remote.client().job("far").status()
    theirs = coordinator_files(remote, status.storage_path)
    last = os.path.basename(status.checkpoint_path)
    wanted = {k: v for k, v in theirs.items()
              if k == "result.json" or k.startswith("summaries/")
              or k.startswith(f"checkpoints/{last}/")}
    assert f"checkpoints/{last}/model.safetensors" in wanted

    def mine(dest):
        return {os.path.relpath(os.path.join(d, n), dest):
                open(os.path.join(d, n), "rb").read()
                for d, _, names in os.walk(dest) for n in names}

    # The CLI.
    dest = str(tmp_path / "cli")
    run = subprocess.run(
        [cluster_mod.binary(), "pull", "far", dest, "--coordinator",
         remote.address, "--token-file", remote.token_file],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert mine(dest) == wanted
    assert f"pulled {len(wanted)} files" in run.stdout
    # Again, with one file damaged here: the rest are checked and kept, the
    # damaged one is fetched again.
    with open(os.path.join(dest, "result.json"), "r+b") as f:
        f.write(b"X")
    run = subprocess.run(
        [cluster_mod.binary(), "pull", "far", dest, "--coordinator",
         remote.address, "--token-file", remote.token_file],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "result.json: the whole file" in run.stderr
    assert mine(dest) == wanted

    # An older checkpoint by --step, and a step that was never committed.
    steps = remote.client().job("far").checkpoints()
    run = subprocess.run(
        [cluster_mod.binary(), "pull", "far", str(tmp_path / "old"), "--step",
         str(steps[0]), "--coordinator", remote.address, "--token-file",
         remote.token_file], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert os.listdir(tmp_path / "old" / "checkpoints") == \
        [f"step-{steps[0]:08d}"]
    run = subprocess.run(
        [cluster_mod.binary(), "pull", "far", str(tmp_path / "none"),
         "--step", "7", "--coordinator", remote.address, "--token-file",
         remote.token_file], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "lockstep pull: error: job far has no checkpoint at step 7; "
        f"committed: {', '.join(map(str, steps))}")

    # Python's pull.
    written = remote.client().job("far").pull(str(tmp_path / "py"))
    assert len(written) == len(wanted)
    assert mine(str(tmp_path / "py")) == wanted


def test_a_damaged_transfer_is_detected_and_resumed(remote, tmp_path):
    status = remote.client().job("far").status()
    want = read_safetensors(remote.coordinator_path(
        os.path.join(status.checkpoint_path, "model.safetensors")))
    # The safetensors header names each tensor's dtype: one bit of it is
    # flipped on the way back, inside the chunk's payload.
    proxy = FlipProxy(remote.port, b'"dtype":"F32"')
    try:
        with lockstep.Client(proxy.address, token=TOKEN) as client:
            with pytest.warns(lockstep.TransferWarning,
                              match=r"model\.safetensors: the chunk at byte 0 "
                              r"failed its CRC-32 \(damaged on the way\); "
                              r"reading again from byte 0 \(attempt 2 of 5\)"):
                params = client.job("far").checkpoint()
        assert proxy.flipped == 1
        for k in want:
            assert params[k].tobytes() == want[k].tobytes(), k
    finally:
        proxy.close()

    proxy = FlipProxy(remote.port, b'"dtype":"F32"')
    try:
        run = subprocess.run(
            [cluster_mod.binary(), "pull", "far", str(tmp_path / "cli"),
             "--coordinator", proxy.address, "--token-file",
             remote.token_file], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert proxy.flipped == 1
        assert "model.safetensors: the chunk at byte 0 failed its CRC-32 " \
            "(damaged on the way); reading again from byte 0" in run.stderr
        got = read_safetensors(str(tmp_path / "cli" / "checkpoints" /
                                   os.path.basename(status.checkpoint_path) /
                                   "model.safetensors"))
        for k in want:
            assert np.array_equal(got[k], want[k]), k
    finally:
        proxy.close()


def test_a_wrong_token_is_refused(remote, tmp_path):
    with lockstep.Client(remote.address, token="not-the-token") as client:
        job = client.job("far")
        for read in (job.result, job.metrics, job.checkpoint, job.checkpoints,
                     lambda: job.pull(str(tmp_path / "x"))):
            with pytest.raises(lockstep.Unauthenticated,
                               match="bearer token"):
                read()
    token = tmp_path / "wrong"
    token.write_text("not-the-token\n")
    run = subprocess.run(
        [cluster_mod.binary(), "pull", "far", str(tmp_path / "cli"),
         "--coordinator", remote.address, "--token-file", str(token)],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "bearer token" in run.stderr
    assert not os.path.exists(tmp_path / "cli")


def test_pull_says_when_the_storages_checkpoint_is_damaged(remote, tmp_path):
    """A checkpoint whose bytes on the coordinator's storage no longer match
    its CRC32Cs (state.json) is pulled as it is, but pull exits 1 saying
    so and naming the committed steps, as a resume from it would."""
    status = remote.client().job("far").status()
    last = os.path.basename(status.checkpoint_path)
    model = remote.coordinator_path(
        os.path.join(status.storage_path, "checkpoints", last,
                     "model.safetensors"))
    with open(model, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        good = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([good[0] ^ 0x10]))
    try:
        dest = str(tmp_path / "damaged")
        run = subprocess.run(
            [cluster_mod.binary(), "pull", "far", dest, "--coordinator",
             remote.address, "--token-file", remote.token_file],
            capture_output=True, text=True, timeout=60)
        assert run.returncode == 1, run.stderr
        assert (f"lockstep pull: error: pulled into {dest}, but checkpoint "
                f"checkpoints/{last} is damaged on the coordinator's "
                "storage (") in run.stderr, run.stderr
        assert "committed: " in run.stderr
        assert os.path.exists(
            os.path.join(dest, "checkpoints", last, "model.safetensors"))
        # Python's pull and checkpoint() say the same.
        job = remote.client().job("far")
        py_dest = str(tmp_path / "py-damaged")
        with pytest.raises(lockstep.CheckpointError) as info:
            job.pull(py_dest)
        assert info.value.code == "DATA_LOSS"
        assert str(info.value).startswith(
            f"pulled into {py_dest}, but checkpoint checkpoints/{last} is "
            "damaged on the coordinator's storage (model.safetensors: "), \
            str(info.value)
        assert "committed: " in str(info.value)
        with pytest.raises(lockstep.CheckpointError) as info:
            job.checkpoint()
        assert str(info.value).startswith(
            f"checkpoint {last} of job far is damaged on the coordinator's "
            "storage (model.safetensors: "), str(info.value)
    finally:
        with open(model, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(good)
