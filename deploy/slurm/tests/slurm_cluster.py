"""A real single-machine Slurm cluster from Debian's packages: munged with a
generated key, slurmctld and slurmd with a generated slurm.conf, all in a
temporary folder, every port free, every process started here killed by
PID at the end. Needs root (slurmd starts jobs as their user)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

# Free ports and test certificates: the Python client tests' helpers (they
# import the client package beside them).
_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "..", "client", "python")
sys.path[:0] = [_CLIENT, os.path.join(_CLIENT, "tests")]
import cluster as test_cluster  # noqa: E402
from cluster import free_port  # noqa: E402

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "scontrol", "scancel", "squeue", "srun")


def sbin(name):
    return shutil.which(name, path=os.environ.get("PATH", "") +
                        ":/usr/sbin:/sbin")


def missing_programs():
    """What this machine lacks to run the cluster (empty: nothing)."""
    return [p for p in DAEMONS if not sbin(p)] + \
        [p for p in COMMANDS if not shutil.which(p)]


class SlurmCluster:
    """One node (this machine, under its short hostname, 2 CPUs) and one
    partition. ``env`` is what Slurm's commands need (SLURM_CONF)."""

    def __init__(self, folder):
        # munged's socket path must stay under 108 bytes: Bazel's test
        # folders are long, so the daemons' files go to a short /tmp folder.
        self.folder = folder
        self.root = os.path.realpath(
            subprocess.check_output(["mktemp", "-d", "/tmp/lsslurm.XXXXXX"],
                                    text=True).strip())
        self.procs = {}
        self.node = socket.gethostname().split(".")[0]
        self.env = dict(os.environ)
        self.env["SLURM_CONF"] = os.path.join(self.root, "slurm.conf")
        for var in list(self.env):
            if var.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and \
                    var != "SLURM_CONF":
                del self.env[var]
        try:
            self._start()
        except Exception:
            self.stop()
            raise

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def _start(self):
        for d in ("munge", "state", "spool", "log"):
            os.makedirs(self.path(d), mode=0o700, exist_ok=True)
        with open(self.path("munge", "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge", "munge.key"), 0o400)
        socket_path = self.path("munge", "munge.socket")
        self._spawn("munged", [
            sbin("munged"), "--foreground", "--force",
            f"--socket={socket_path}",
            f"--key-file={self.path('munge', 'munge.key')}",
            f"--pid-file={self.path('munge', 'munged.pid')}",
            f"--log-file={self.path('log', 'munged.log')}",
            f"--seed-file={self.path('munge', 'seed')}"])
        self._wait_for(lambda: os.path.exists(socket_path), "munged's socket",
                       "munged")
        cpus = 2
        conf = f"""# Written by deploy/slurm/tests/slurm_cluster.py
ClusterName=lockstep-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket_path}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('log', 'slurmctld.log')}
SlurmdLogFile={self.path('log', 'slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(conf)
        self._spawn("slurmctld", [sbin("slurmctld"), "-D", "-i", "-f",
                                  self.env["SLURM_CONF"]])
        self._spawn("slurmd", [sbin("slurmd"), "-D", "-N", self.node, "-f",
                               self.env["SLURM_CONF"]])

        def idle():
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env,
                               capture_output=True, text=True, timeout=10)
            return r.returncode == 0 and r.stdout.strip() == "idle"
        self._wait_for(idle, "the node to be idle", "slurmd", timeout=60)

    def _spawn(self, name, args):
        log = open(self.path("log", f"{name}.out"), "ab")
        self.procs[name] = subprocess.Popen(
            args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            env=self.env, start_new_session=True)
        log.close()

    def _wait_for(self, ready, what, daemon, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            p = self.procs.get(daemon)
            if p is not None and p.poll() is not None:
                raise RuntimeError(f"{daemon} exited ({p.returncode}): " +
                                   self.daemon_log(daemon))
            time.sleep(0.1)
        raise RuntimeError(f"waited {timeout} s for {what}: " +
                           self.daemon_log(daemon))

    def daemon_log(self, name):
        text = ""
        for f in (f"{name}.log", f"{name}.out"):
            try:
                with open(self.path("log", f), "rb") as h:
                    text += h.read().decode(errors="replace")[-3000:]
            except OSError:
                pass
        return text

    def run(self, *args, check=True, timeout=60):
        r = subprocess.run(list(args), env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {r.returncode}: "
                               f"{r.stdout}{r.stderr}")
        return r

    def sbatch(self, script, *args, options=(), env=None):
        """Submits; the batch job's id."""
        run_env = dict(self.env)
        run_env.update(env or {})
        r = subprocess.run(["sbatch", "--parsable", *options, script, *args],
                           env=run_env, capture_output=True, text=True,
                           timeout=60, cwd=self.folder)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch exited {r.returncode}: {r.stderr}")
        return r.stdout.strip().split(";")[0]

    def job(self, job_id):
        """scontrol's fields of a batch job: JobState, ExitCode, Restarts..."""
        out = self.run("scontrol", "show", "job", str(job_id)).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_state(self, job_id, states, timeout):
        timeout *= test_cluster.SLOWDOWN
        deadline = time.monotonic() + timeout
        last = {}
        while time.monotonic() < deadline:
            last = self.job(job_id)
            if last.get("JobState") in states:
                return last
            time.sleep(0.25)
        raise AssertionError(f"batch job {job_id} not in {states} within "
                             f"{timeout} s: {last.get('JobState')} "
                             f"({last.get('Reason')})")

    def stop(self):
        """Cancels every job, then kills the daemons and anything left of
        the jobs (their processes name this cluster's or the test's
        folders) by PID."""
        if self.procs.get("slurmctld") is not None and \
                self.procs["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--full", "--signal=KILL",
                            "--partition=debug"], env=self.env,
                           capture_output=True, timeout=30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                r = subprocess.run(["squeue", "-h"], env=self.env,
                                   capture_output=True, text=True, timeout=10)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.25)
        for name in reversed(DAEMONS):
            p = self.procs.get(name)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        for pid in leftover_pids(cmdline=(self.root,
                                          os.path.realpath(self.folder)),
                                 environ=(self.root,)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def leftover_pids(cmdline, environ):
    """Processes whose command line names one of ``cmdline`` or whose
    environment names one of ``environ`` (a job's slurmstepd and its
    lockstep daemons carry SLURM_CONF), never this process or its
    ancestors."""
    spared = set()
    pid = os.getpid()
    while pid > 1:
        spared.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in spared:
            continue
        for what, folders in (("cmdline", cmdline), ("environ", environ)):
            try:
                with open(f"/proc/{entry}/{what}", "rb") as f:
                    text = f.read().decode(errors="replace")
            except OSError:
                continue
            if any(folder in text for folder in folders):
                found.append(int(entry))
                break
    return found
