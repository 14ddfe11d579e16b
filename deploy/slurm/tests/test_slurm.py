"""deploy/slurm/lockstep.sbatch on a real Slurm cluster (one node, 2 CPUs):
the batch job trains to the local cluster's fingerprint; a worker killed
inside the allocation rejoins; scancel drains to a checkpoint that a
resubmission resumes; a requeued job resumes; --serve runs jobs submitted
from outside with TLS and a token; bad requests fail with their reason."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster  # noqa: E402
from slurm_cluster import test_cluster  # noqa: E402

# The daemons' waits, times LOCKSTEP_TEST_SLOWDOWN under --config=tsan.
SLOWDOWN = test_cluster.SLOWDOWN

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "lockstep.sbatch")

if os.geteuid() != 0:
    pytest.skip("a Slurm cluster needs root here (slurmd starts jobs as "
                "their user)", allow_module_level=True)
if slurm_cluster.missing_programs():
    pytest.fail("missing " + ", ".join(slurm_cluster.missing_programs()) +
                ": scripts/install_deps.sh installs slurm-wlm and munge",
                pytrace=False)


def binary():
    path = os.environ.get("LOCKSTEP_BINARY", "")
    if not os.access(path, os.X_OK):
        raise RuntimeError("LOCKSTEP_BINARY must name the lockstep binary")
    return os.path.realpath(path)


def mlp_job(name, epochs=12, units=1024):
    """2 dense layers on the built-in synthetic data: 32 steps an epoch
    with 2 workers, a few seconds of training on one CPU each."""
    return {
        "name": name, "seed": 7,
        "model": {"input_shape": [8, 8, 1], "layers": [
            {"type": "flatten"},
            {"type": "dense", "units": units, "activation": "relu"},
            {"type": "dense", "units": units, "activation": "relu"},
            {"type": "dense", "units": 10}]},
        "loss": "sparse_categorical_crossentropy",
        "optimizer": {"type": "adam", "learning_rate": 0.0005},
        "data": {"format": "synthetic", "train_samples": 4096,
                 "test_samples": 512, "seed": 5, "num_classes": 10},
        "batch_size_per_replica": 64,
        "epochs": epochs,
        "checkpoint": {"every_steps": 40, "keep": 3},
        "summary": {"every_steps": 40},
        "cluster": {"workers": 2, "replicas_per_worker": 1},
    }


STEPS = 12 * 32


def write_job(folder, job):
    path = os.path.join(folder, job["name"] + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


@pytest.fixture(autouse=True)
def no_sanitizer_reports(tmp_path):
    """Fails a test whose daemons (their logs under its folder) reported a
    race: under TSan a report ends the process, which a drill that kills
    workers would not notice."""
    yield
    reports = test_cluster.sanitizer_reports(str(tmp_path))
    assert not reports, "sanitizer reports:\n" + "\n".join(reports)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    c = slurm_cluster.SlurmCluster(str(tmp_path_factory.mktemp("slurm")))
    yield c
    c.stop()


class Batch:
    """One batch job of lockstep.sbatch and its storage."""

    def __init__(self, slurm, folder, args, storage=None, options=(),
                 env=None):
        self.slurm = slurm
        self.folder = folder
        self.storage = storage or os.path.join(folder, "storage")
        run_env = {
            "LOCKSTEP_BIN": binary(),
            "LOCKSTEP_STORAGE": self.storage,
            # One node: the daemons stay on the loopback interface.
            "LOCKSTEP_HOST": "127.0.0.1",
            "LOCKSTEP_LISTEN_HOST": "127.0.0.1",
        }
        run_env.update(env or {})
        self.id = slurm.sbatch(
            SCRIPT, *args,
            options=["--ntasks=2", f"--output={folder}/out-%j.txt",
                     *options],
            env=run_env)

    def run_dir(self):
        return os.path.join(self.storage, "slurm", self.id)

    def output(self):
        try:
            with open(os.path.join(self.folder, f"out-{self.id}.txt")) as f:
                return f.read()
        except OSError:
            return ""

    def log(self, name):
        try:
            with open(os.path.join(self.run_dir(), name)) as f:
                return f.read()
        except OSError:
            return ""

    def logs(self):
        return "\n".join(
            f"== {n}\n{self.log(n)[-3000:]}"
            for n in ("coordinator.log", "worker-0.log", "worker-1.log")) + \
            "\n== output\n" + self.output()[-3000:]

    def coordinator(self, timeout=60):
        path = os.path.join(self.run_dir(), "coordinator")
        deadline = time.monotonic() + timeout * SLOWDOWN
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("no coordinator address published: " +
                             self.logs())

    def cli(self, *args, timeout=60, extra=()):
        return subprocess.run(
            [binary(), *args, "--coordinator", self.coordinator(), *extra],
            capture_output=True, text=True, timeout=timeout)

    def wait_step(self, name, step, timeout=90):
        timeout *= SLOWDOWN
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            r = self.cli("status", name)
            last = r.stdout + r.stderr
            m = re.search(r"step (\d+)/", last)
            if r.returncode == 0 and m and int(m.group(1)) >= step:
                return int(m.group(1))
            time.sleep(0.2)
        raise AssertionError(f"{name} did not reach step {step} within "
                             f"{timeout} s: {last}\n{self.logs()}")

    def wait(self, states, timeout=120):
        try:
            return self.slurm.wait_state(self.id, states, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}") from None

    def result(self, name):
        with open(os.path.join(self.storage, "jobs", name,
                               "result.json")) as f:
            return json.load(f)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The fingerprint of mlp_job("slurm-mlp") on a local cluster: a
    coordinator and 2 workers on 127.0.0.1, no Slurm."""
    folder = str(tmp_path_factory.mktemp("local"))
    storage = os.path.join(folder, "storage")
    address_file = os.path.join(folder, "address")
    procs = []
    try:
        log = open(os.path.join(folder, "daemons.log"), "ab")
        procs.append(subprocess.Popen(
            [binary(), "coordinator", "--listen", "127.0.0.1:0", "--storage",
             storage, "--address-file", address_file], stdout=log,
            stderr=log))
        deadline = time.monotonic() + 30 * SLOWDOWN
        while not (os.path.exists(address_file) and
                   os.path.getsize(address_file)):
            assert time.monotonic() < deadline, "the coordinator did not start"
            time.sleep(0.05)
        with open(address_file) as f:
            address = f.read().strip()
        for i in range(2):
            procs.append(subprocess.Popen(
                [binary(), "worker", "--coordinator", address, "--threads",
                 "1", "--name", f"local{i}"], stdout=log, stderr=log))
        job = write_job(folder, mlp_job("slurm-mlp"))
        r = subprocess.run([binary(), "submit", job, "--wait",
                            "--coordinator", address], capture_output=True,
                           text=True, timeout=300 * SLOWDOWN)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(storage, "jobs", "slurm-mlp",
                               "result.json")) as f:
            result = json.load(f)
        assert result["steps"] == STEPS
        return result["fingerprint"]
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        reports = test_cluster.sanitizer_reports(folder)
        assert not reports, "sanitizer reports:\n" + "\n".join(reports)


def test_batch_job_trains_to_the_local_clusters_fingerprint(
        slurm, reference, tmp_path):
    job = write_job(str(tmp_path), mlp_job("slurm-mlp"))
    b = Batch(slurm, str(tmp_path), [job])
    info = b.wait(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
    assert info["JobState"] == "COMPLETED", b.logs()
    assert info["ExitCode"] == "0:0"
    out = b.output()
    # Progress and the result are in the batch job's output file.
    assert re.search(r"\[slurm-mlp\] epoch 12 done +train loss", out), out
    assert f"SUCCEEDED: {STEPS} steps" in out, out
    assert "lockstep job slurm-mlp ended with status 0" in out, out
    result = b.result("slurm-mlp")
    assert result["fingerprint"] == reference
    assert result["steps"] == STEPS
    # Ranks are the tasks' stable names; every worker left cleanly.
    coordinator = b.log("coordinator.log")
    for task in (0, 1):
        assert f'registered as "slurm-{b.id}-{task}"' in coordinator
        log = b.log(f"worker-{task}.log")
        assert f"worker slurm-{b.id}-{task} exited with status 0" in log
        # The node's 2 CPUs shared by its 2 tasks.
        assert f"task {task} on {slurm.node}: worker slurm-{b.id}-{task}, " \
            "1 threads" in log, log


def worker_pid(batch, task):
    name = f"slurm-{batch.id}-{task}"
    for pid in slurm_cluster.leftover_pids(cmdline=(name,), environ=()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == b"worker" and \
                name.encode() in argv:
            return pid
    raise AssertionError(f"no worker process named {name}")


def test_a_worker_killed_inside_the_allocation_rejoins(
        slurm, reference, tmp_path):
    job = write_job(str(tmp_path), mlp_job("slurm-mlp"))
    b = Batch(slurm, str(tmp_path), [job])
    b.wait_step("slurm-mlp", 80)
    victim = worker_pid(b, 1)
    os.kill(victim, signal.SIGKILL)
    info = b.wait(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
    assert info["JobState"] == "COMPLETED", b.logs()
    log = b.log("worker-1.log")
    assert f"worker slurm-{b.id}-1 exited with status 137; restarting it " \
           "(1 of 5)" in log, log
    out = b.output()
    # Generation 2 from the survivor's memory (or the last checkpoint),
    # with the same process name.
    assert re.search(r"RUNNING generation 2 from step \d+ "
                     r"(\(rank \d's memory; the latest checkpoint is step "
                     r"\d+\) )?\(restart 1 of 3", out), out
    coordinator = b.log("coordinator.log")
    assert coordinator.count(f'registered as "slurm-{b.id}-1"') == 2, \
        coordinator
    assert b.result("slurm-mlp")["fingerprint"] == reference


def resumed_step(out):
    """The step a requeued or resubmitted batch job resumed its lockstep job
    at. The new coordinator takes the job over from the journal as
    RECOVERING; `submit --attach` then finds it RECOVERING at the drained
    step, or, when the new workers (started first) registered before it
    asked, already RUNNING generation 2 from that step."""
    resumed = re.search(r"RUNNING generation 2 from step (\d+) \(after a "
                        r"planned leave, ", out)
    assert resumed, out
    drained = int(resumed.group(1))
    found = re.search(r"job slurm-mlp is already (RECOVERING|RUNNING) at "
                      r"step (\d+) \(generation (\d)\): following it", out)
    assert found, out
    state, step, generation = found.group(1), int(found.group(2)), \
        found.group(3)
    if state == "RECOVERING":
        assert (step, generation) == (drained, "1"), out
    else:
        assert step >= drained and generation == "2", out
    return drained


def committed_step(storage, name):
    folder = os.path.join(storage, "jobs", name, "checkpoints")
    with open(os.path.join(folder, "latest")) as f:
        latest = f.read().strip()
    with open(os.path.join(folder, latest, "state.json")) as f:
        return json.load(f)["step"]


def test_scancel_drains_to_a_checkpoint_that_a_resubmission_resumes(
        slurm, reference, tmp_path):
    job = write_job(str(tmp_path), mlp_job("slurm-mlp"))
    first = Batch(slurm, str(tmp_path), [job])
    seen = first.wait_step("slurm-mlp", 100)
    slurm.run("scancel", first.id)
    info = first.wait(("CANCELLED", "COMPLETED", "FAILED"), timeout=60)
    assert info["JobState"] == "CANCELLED", first.logs()
    # Every process is gone before KillWait (30 s) would have killed it.
    slurm.wait_state(first.id, ("CANCELLED",), 5)
    deadline = time.monotonic() + 40
    while slurm_cluster.leftover_pids(
            cmdline=(first.run_dir(), f"slurm-{first.id}-"), environ=()) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    drained = committed_step(first.storage, "slurm-mlp")
    assert seen <= drained < STEPS
    for task in (0, 1):
        log = first.log(f"worker-{task}.log")
        assert f"left after step {drained}" in log, log
        assert f"worker slurm-{first.id}-{task} exited with status 0" in log
    # The coordinator (signalled at the same moment) served the drain
    # (--shutdown-grace, when its signal came first) and journaled the job
    # as RECOVERING after a planned leave.
    coordinator = first.log("coordinator.log")
    planned = coordinator.find(f"RECOVERING from generation 1 at step "
                               f"{drained}: ")
    assert planned >= 0, coordinator
    assert "a planned leave (no restart counted)" in coordinator[planned:]
    assert coordinator.find("journal written", planned) > planned
    assert "stopped by SIGTERM: the workers drained to a checkpoint" in \
        first.output()
    # A new batch job on the same storage takes the job over from the
    # journal and resumes at that step.
    second = Batch(slurm, str(tmp_path), [job], storage=first.storage)
    info = second.wait(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
    assert info["JobState"] == "COMPLETED", second.logs()
    assert resumed_step(second.output()) == drained
    result = second.result("slurm-mlp")
    assert result["membership"][-1]["from_step"] == drained
    assert result["fingerprint"] == reference


def start_requeued(slurm, job_id, timeout=60):
    """Slurm holds a requeued job back (Reason=BeginTime, about 2 minutes
    here): once it is PENDING again, move its start to 3 s from now. (Not
    "now": a start in the very second of the requeue gets the previous run's
    revoked credential and the job FAILS, "Job credential revoked".)"""
    deadline = time.monotonic() + timeout * SLOWDOWN
    moved = False
    while time.monotonic() < deadline:
        info = slurm.job(job_id)
        if info["JobState"] == "PENDING" and not moved:
            slurm.run("scontrol", "update", f"JobId={job_id}",
                      "StartTime=now+3", check=False)
            moved = True
        if info.get("Restarts") == "1" and info["JobState"] in (
                "RUNNING", "COMPLETED", "FAILED"):
            return
        time.sleep(0.25)


def test_a_requeued_batch_job_resumes_from_its_checkpoint(
        slurm, reference, tmp_path):
    job = write_job(str(tmp_path), mlp_job("slurm-mlp"))
    b = Batch(slurm, str(tmp_path), [job], options=["--requeue"])
    seen = b.wait_step("slurm-mlp", 100)
    slurm.run("scontrol", "requeue", b.id)
    start_requeued(slurm, b.id)
    info = b.wait(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
    assert info["JobState"] == "COMPLETED", b.logs()
    assert info["Restarts"] == "1"
    out = b.output()
    assert f"batch job {b.id} (restart 1)" in out, out
    drained = resumed_step(out)
    assert seen <= drained < STEPS
    result = b.result("slurm-mlp")
    assert result["membership"][-1]["from_step"] == drained
    assert result["fingerprint"] == reference


def test_the_time_limit_warning_drains_and_requeues(slurm, reference,
                                                   tmp_path):
    # --signal=B:USR1@N is the time limit's warning to the batch script;
    # here it is sent by hand (scancel --batch), as Slurm would.
    job = write_job(str(tmp_path), mlp_job("slurm-mlp"))
    b = Batch(slurm, str(tmp_path), [job], options=["--requeue"],
              env={"LOCKSTEP_REQUEUE_AT_TIMEOUT": "1"})
    seen = b.wait_step("slurm-mlp", 100)
    slurm.run("scancel", "--batch", "--signal=USR1", b.id)
    start_requeued(slurm, b.id, timeout=90)
    info = b.wait(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
    assert info["JobState"] == "COMPLETED", b.logs()
    assert info["Restarts"] == "1"
    out = b.output()
    assert "the time limit is near: the workers drain to a checkpoint" in out
    assert f"requeueing batch job {b.id}: it resumes from the checkpoint" in \
        out, out
    drained = resumed_step(out)
    assert seen <= drained < STEPS
    result = b.result("slurm-mlp")
    assert result["membership"][-1]["from_step"] == drained
    assert result["fingerprint"] == reference


def test_serve_runs_jobs_submitted_from_outside_with_tls_and_a_token(
        slurm, tmp_path):
    folder = str(tmp_path)
    # A CA and one certificate for 127.0.0.1, server and client use (the
    # client tests' "worker" one): the coordinator and every worker present
    # it, as on a Slurm site.
    certs = slurm_cluster.test_cluster.make_certs(folder)
    token = os.path.join(folder, "token")
    with open(token, "w") as f:
        f.write("s3cret-token\n")
    b = Batch(slurm, folder, ["--serve"], env={
        "LOCKSTEP_TLS_CA": certs["ca.pem"],
        "LOCKSTEP_TLS_CERT": certs["worker.pem"],
        "LOCKSTEP_TLS_KEY": certs["worker.key"],
        "LOCKSTEP_TOKEN_FILE": token})
    client = ("--tls-ca", certs["ca.pem"], "--token-file", token)
    for name in ("first", "second"):
        job = write_job(folder, mlp_job(name, epochs=2, units=64))
        r = subprocess.run(
            [binary(), "submit", job, "--wait", "--coordinator",
             b.coordinator(), *client], capture_output=True, text=True,
            timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr + b.logs()
        assert f"job {name} SUCCEEDED: 64 steps" in r.stdout, r.stdout
    # Without the token the coordinator refuses; without TLS it cannot be
    # reached at all.
    r = b.cli("list", extra=("--tls-ca", certs["ca.pem"]))
    assert r.returncode != 0
    assert "token" in r.stderr.lower(), r.stderr
    r = b.cli("list", extra=("--token-file", token))
    assert r.returncode != 0, r.stdout
    assert "TLS" in r.stderr, r.stderr
    assert "TLS" in b.log("coordinator.log")
    slurm.run("scancel", b.id)
    info = b.wait(("CANCELLED", "COMPLETED", "FAILED"), timeout=60)
    assert info["JobState"] == "CANCELLED"
    assert "serving: lockstep submit JOB.json --coordinator 127.0.0.1:" in \
        b.output()


def test_bad_requests_fail_the_batch_job_naming_the_reason(slurm, tmp_path):
    folder = str(tmp_path)
    # Four workers asked for, two tasks given.
    job = mlp_job("too-many")
    job["cluster"]["workers"] = 4
    b = Batch(slurm, folder, [write_job(folder, job)])
    info = b.wait(("FAILED", "COMPLETED"), timeout=60)
    assert info["JobState"] == "FAILED"
    assert info["ExitCode"] == "2:0"
    assert "asks for cluster.workers=4 but the allocation has 2 task(s)" in \
        b.output(), b.output()
    # A job the validator refuses: its message names the field.
    job = mlp_job("bad-rate")
    job["optimizer"]["learning_rate"] = -1
    b = Batch(slurm, folder, [write_job(folder, job)])
    info = b.wait(("FAILED", "COMPLETED"), timeout=60)
    assert info["JobState"] == "FAILED"
    out = b.output()
    assert "optimizer.learning_rate" in out, out
    assert "is not a valid job" in out, out
    # A missing job file, and no job file at all.
    b = Batch(slurm, folder, [os.path.join(folder, "nope.json")])
    assert b.wait(("FAILED", "COMPLETED"), timeout=60)["JobState"] == "FAILED"
    assert "cannot read the job file" in b.output()
    b = Batch(slurm, folder, [])
    assert b.wait(("FAILED", "COMPLETED"), timeout=60)["JobState"] == "FAILED"
    assert "usage: sbatch" in b.output()
