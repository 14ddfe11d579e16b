"""The committed stubs are what the current protos produce."""

import filecmp
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PACKAGE = os.path.join(ROOT, "client", "python", "lockstep", "_generated")
FILES = ["jobs_pb2.py", "jobs_pb2_grpc.py", "tensorboard_pb2.py"]


def test_generated_code_matches_the_protos(tmp_path):
    script = os.path.join(ROOT, "scripts", "gen_python_protos.sh")
    run = subprocess.run([script, str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    fresh = tmp_path / "lockstep" / "_generated"
    for name in FILES:
        assert filecmp.cmp(fresh / name, os.path.join(PACKAGE, name),
                           shallow=False), (
            f"client/python/lockstep/_generated/{name} is stale: run "
            "scripts/gen_python_protos.sh and commit the result")
    extra = sorted(set(os.listdir(fresh)) - set(FILES))
    assert not extra, f"generated but not committed: {extra}"


def test_the_stubs_know_every_rpc():
    from lockstep._generated import jobs_pb2
    service = jobs_pb2.DESCRIPTOR.services_by_name["JobService"]
    assert sorted(m.name for m in service.methods) == [
        "CancelJob", "GetJob", "ListJobFiles", "ListJobs", "ReadJobFile",
        "Submit", "WatchJob"]
    assert "storage_path" in jobs_pb2.JobStatus.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize("name", ["Client", "Job", "Checkpoint", "to_torch"])
def test_public_api_is_documented(name):
    import lockstep
    obj = getattr(lockstep, name)
    assert obj.__doc__ and len(obj.__doc__) > 80
    for attr, value in vars(obj).items() if isinstance(obj, type) else []:
        if callable(value) and not attr.startswith("_"):
            assert value.__doc__, f"{name}.{attr} has no docstring"


def test_the_package_installs_with_pip_offline(tmp_path):
    """pip (Debian's python3-pip) builds and installs the package from the
    checkout with no index and no build isolation, generated code included;
    the installed copy imports on its own."""
    import shutil
    import sys
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("python3-pip is not installed")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "client", "python"), src,
                    ignore=shutil.ignore_patterns("tests", "BUILD", "*.sh"))
    target = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir",
         "--no-build-isolation", "--no-index", "--target", str(target),
         str(src)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in FILES:
        assert (target / "lockstep" / "_generated" / name).is_file(), name
    probe = subprocess.run(
        [sys.executable, "-c", "import lockstep; print(lockstep.__file__); "
         "print(lockstep.Client().address)"],
        capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
        env={"PYTHONPATH": str(target), "PATH": os.environ.get("PATH", "")})
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == [
        str(target / "lockstep" / "__init__.py"), "127.0.0.1:7070"]


def test_a_status_carries_its_straggler_and_worker_timings():
    from lockstep._generated import jobs_pb2
    from lockstep.types import Straggler, status_from_proto
    msg = jobs_pb2.JobStatus(name="j", state=jobs_pb2.RUNNING)
    w = msg.workers.add(worker_id="w2", rank=1, ring_ms_per_mib=84.5,
                        compute_ms_per_step=12.0)
    assert status_from_proto(msg).straggler is None
    msg.straggler.rank = 1
    msg.straggler.worker_id = "w2"
    msg.straggler.cause = "link"
    msg.straggler.text = "rank 1 (w2 on h2): its ring links are slow"
    s = status_from_proto(msg)
    assert s.straggler == Straggler(
        rank=1, worker_id="w2", cause="link",
        text="rank 1 (w2 on h2): its ring links are slow")
    assert (s.workers[0].ring_ms_per_mib, s.workers[0].compute_ms_per_step) \
        == (84.5, 12.0)
    assert w.rank == 1


def test_a_status_carries_its_fenced_counts():
    from lockstep._generated import jobs_pb2
    from lockstep.types import status_from_proto
    msg = jobs_pb2.JobStatus(name="j", state=jobs_pb2.RUNNING)
    assert status_from_proto(msg).fenced == {}
    msg.fenced["finish"] = 1
    msg.fenced["progress"] = 2
    assert status_from_proto(msg).fenced == {"finish": 1, "progress": 2}


def test_a_status_carries_its_shard_mode_and_state_bytes():
    from lockstep._generated import jobs_pb2
    from lockstep.types import status_from_proto
    msg = jobs_pb2.JobStatus(name="j", state=jobs_pb2.RUNNING,
                             shard="optimizer",
                             optimizer_state_bytes=19280, shard_copies=True)
    s = status_from_proto(msg)
    assert (s.shard, s.optimizer_state_bytes, s.shard_copies) == (
        "optimizer", 19280, True)
    assert status_from_proto(jobs_pb2.JobStatus(name="j")).shard == ""


def test_a_status_carries_the_fp16_loss_scale():
    from lockstep._generated import jobs_pb2
    from lockstep.types import status_from_proto
    msg = jobs_pb2.JobStatus(name="j", state=jobs_pb2.RUNNING,
                             loss_scale=32768.0, skipped_steps=3)
    s = status_from_proto(msg)
    assert (s.loss_scale, s.skipped_steps) == (32768.0, 3)
    none = status_from_proto(jobs_pb2.JobStatus(name="j"))
    assert (none.loss_scale, none.skipped_steps) == (0.0, 0)
