"""A job's name is its identity: the same spec again returns that job and
runs nothing; another spec is refused naming the fields that differ;
resume=True continues the job from its checkpoint (same model only) and
restart=True starts it over with its earlier results moved aside. Each
outcome is checked against a fresh run of the same spec under another
name (the fingerprints)."""

import copy
import os

import pytest

import jobs
import lockstep


def test_a_name_is_an_identity(cluster, tmp_path):
    data = str(tmp_path)
    jobs.write_csv(data, 8)
    client = cluster.client()

    def run(spec, **kwargs):
        return client.submit(spec, data_dir=data, **kwargs).wait(
            progress=False, timeout=120)

    spec = jobs.mlp_job("py-id", data)
    first = run(spec)
    assert first["steps"] == 16

    # The same spec again: the same job, nothing runs.
    again = client.submit(spec, data_dir=data)
    assert again.status().generation == 1
    assert again.result() == first

    # Another learning rate: refused, naming the field and what to do.
    changed = copy.deepcopy(spec)
    changed["optimizer"]["learning_rate"] = 0.02
    with pytest.raises(lockstep.JobExists) as e:
        client.submit(changed, data_dir=data)
    assert ('job "py-id" already exists (SUCCEEDED at step 16) with another '
            'spec: optimizer.learning_rate (0.01 -> 0.02); submit with '
            '--resume (Python: resume=True)') in str(e.value)

    # resume=True with more epochs: on from the last checkpoint, ending on
    # the bits of an uninterrupted 4-epoch run.
    longer = dict(copy.deepcopy(spec), epochs=4)
    resumed = run(longer, resume=True)
    assert resumed["steps"] == 32 and resumed["resumed_from_step"] == 16
    assert client.job("py-id").status().generation == 2
    straight = run(dict(copy.deepcopy(longer), name="py-id-straight"))
    assert resumed["fingerprint"] == straight["fingerprint"]

    # resume=True with another model: refused, naming the model's field.
    wider = copy.deepcopy(longer)
    wider["model"]["layers"][0]["units"] = 32
    with pytest.raises(lockstep.JobExists,
                       match=r"--resume \(resume=True\) continues the same "
                       r"model from its checkpoint, but the model differs: "
                       r"model\.layers\[0\]\.units \(16 -> 32\)"):
        client.submit(wider, data_dir=data, resume=True)
    with pytest.raises(lockstep.LockstepError, match="give one"):
        client.submit(wider, data_dir=data, resume=True, restart=True)

    # restart=True: from step 0 with the new spec; the earlier results are
    # moved aside, not deleted.
    restarted = run(changed, restart=True)
    assert restarted["steps"] == 16 and restarted["resumed_from_step"] == 0
    fresh = run(dict(copy.deepcopy(changed), name="py-id-fresh"))
    assert restarted["fingerprint"] == fresh["fingerprint"]
    folder = client.job("py-id").status().storage_path
    aside = [n for n in os.listdir(folder) if n.startswith("previous-")]
    assert len(aside) == 1, os.listdir(folder)
    assert sorted(os.listdir(os.path.join(folder, aside[0]))) == [
        "checkpoints", "result.json", "summaries"]
