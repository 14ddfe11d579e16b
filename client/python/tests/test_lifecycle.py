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


def test_an_ended_job_is_returned_with_timeout_zero_and_its_log_first(
        cluster, tmp_path):
    """wait(timeout=0) and events(timeout=0) on a job that already ended
    return it (they raised TimeoutError before asking); the events come in
    the order lockstep watch prints: the log lines, then the state they
    led to, then Finished. A job that cannot end in time raises
    WaitTimeout, a LockstepError and a TimeoutError."""
    jobs.write_csv(str(tmp_path), 8)
    client = cluster.client()
    job = client.submit(jobs.mlp_job("py-ended", str(tmp_path), epochs=1),
                        data_dir=str(tmp_path))
    first = job.wait(progress=False, timeout=120)
    assert job.wait(progress=False, timeout=0)["steps"] == first["steps"]
    events = list(job.events(timeout=0))
    kinds = [type(e).__name__ for e in events]
    assert kinds[-1] == "Finished", kinds
    state_at = kinds.index("StateChanged")
    assert state_at > 0 and set(kinds[:state_at]) == {"LogLine"}, kinds
    assert events[state_at].state == "SUCCEEDED"
    # Needs more workers than the cluster has: pending until cancelled.
    waiting = client.submit(
        jobs.mlp_job("py-waits", str(tmp_path), workers=5),
        data_dir=str(tmp_path))
    try:
        with pytest.raises(lockstep.WaitTimeout) as e:
            waiting.wait(progress=False, timeout=0.5)
        assert isinstance(e.value, TimeoutError)
        assert isinstance(e.value, lockstep.LockstepError)
        assert str(e.value) == ("job py-waits: not ended after 0.5 s (last "
                                "state PENDING)")
    finally:
        waiting.cancel()
