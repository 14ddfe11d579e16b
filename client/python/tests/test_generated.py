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
        "CancelJob", "GetJob", "ListJobs", "Submit", "WatchJob"]
    assert "storage_path" in jobs_pb2.JobStatus.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize("name", ["Client", "Job", "Checkpoint", "to_torch"])
def test_public_api_is_documented(name):
    import lockstep
    obj = getattr(lockstep, name)
    assert obj.__doc__ and len(obj.__doc__) > 80
    for attr, value in vars(obj).items() if isinstance(obj, type) else []:
        if callable(value) and not attr.startswith("_"):
            assert value.__doc__, f"{name}.{attr} has no docstring"
