"""Cancel, list, and a watch that rides through a coordinator restart."""

import pytest

import jobs
import lockstep


def test_cancel_ends_the_job_and_wait_raises(cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    client = cluster.client()
    job = client.submit(jobs.mlp_job("py-cancel", str(tmp_path), epochs=2000),
                        data_dir=str(tmp_path))
    for event in job.events(timeout=60):
        if isinstance(event, lockstep.Progress):
            break
    listed = {j.name: j for j in client.jobs()}
    assert listed["py-cancel"].state == "RUNNING"
    busy = [w for w in client.workers() if w.job == "py-cancel"]
    assert sorted(w.rank for w in busy) == [0, 1]
    status = job.cancel()
    assert status.state in ("CANCELLED", "RUNNING")
    with pytest.raises(lockstep.JobCancelled) as e:
        job.wait(progress=False, timeout=60)
    assert e.value.status.state == "CANCELLED"
    assert job.status().state == "CANCELLED"
    assert str(e.value).startswith("job py-cancel CANCELLED")


def test_events_ride_through_a_coordinator_restart(cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8, train=4096)
    client = cluster.client()
    # 4096 samples / 32 per step = 128 steps an epoch, 40 epochs: several
    # seconds, so the coordinator dies while the job runs.
    job = client.submit(jobs.mlp_job("py-restart", str(tmp_path), epochs=40),
                        data_dir=str(tmp_path))
    seen = []
    killed = False
    for event in job.events(timeout=180):
        seen.append(event)
        if (isinstance(event, lockstep.Progress) and not killed
                and event.step < event.total_steps // 2):
            cluster.kill_coordinator()
            killed = True
            cluster.start_coordinator()
    kinds = [type(e).__name__ for e in seen]
    assert "Reconnecting" in kinds, kinds
    assert isinstance(seen[-1], lockstep.Finished), kinds
    assert seen[-1].state == "SUCCEEDED", seen[-1].message
    lines = [e.text for e in seen if isinstance(e, lockstep.LogLine)]
    # The log goes on after the restart without repeating a line.
    assert len(lines) == len(set(lines)), lines
    assert killed
    assert job.result()["steps"] == 5120
    steps = [e.step for e in seen if isinstance(e, lockstep.Progress)]
    assert steps == sorted(steps) and steps[-1] == 5120, steps
