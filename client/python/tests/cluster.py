"""A real local lockstep cluster for the client's tests: a coordinator and
workers started from the lockstep binary on free 127.0.0.1 ports, every
wait bounded, every process killed by PID at the end."""

import os
import signal
import socket
import subprocess
import time

import lockstep

# How much slower than a plain build the daemons run: the tsan config sets
# LOCKSTEP_TEST_SLOWDOWN (as for the C++ tests, tests/subprocess.h); the
# cluster's own waits are multiplied by it.
SLOWDOWN = max(1.0, float(os.environ.get("LOCKSTEP_TEST_SLOWDOWN") or 1))


def binary():
    path = os.environ.get("LOCKSTEP_BINARY")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(
            "LOCKSTEP_BINARY must name the lockstep binary (bazel test "
            "//client/python:client_test sets it)")
    return path


def sanitizer_reports(folder):
    """The ThreadSanitizer reports in the daemons' logs (*.log and *.txt)
    under ``folder``, each as "FILE:\\nREPORT" (its first 6,000 characters)."""
    reports = []
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if not name.endswith((".log", ".txt")):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                text = f.read().decode(errors="replace")
            at = text.find("WARNING: ThreadSanitizer")
            if at >= 0:
                reports.append(f"{os.path.relpath(path, folder)}:\n"
                               f"{text[at:at + 6000]}")
    return reports


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(folder):
    """A CA and coordinator/worker certificates for 127.0.0.1 (EC keys),
    written with the openssl CLI as tests/test_certs.cc does."""
    def run(*args):
        subprocess.run(["/usr/bin/openssl", *args], cwd=folder, check=True,
                       capture_output=True, timeout=30)

    def issue(name, ext, serial):
        with open(os.path.join(folder, name + ".ext"), "w") as f:
            f.write(ext)
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", "/CN=" + name)
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-set_serial", str(serial), "-days", "2", "-extfile",
            name + ".ext", "-out", name + ".pem")

    run("req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
        "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca")
    issue("coordinator", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth\n", 2)
    issue("worker", "subjectAltName=IP:127.0.0.1\n"
          "extendedKeyUsage=serverAuth,clientAuth\n", 3)
    return {k: os.path.join(folder, k) for k in
            ("ca.pem", "coordinator.pem", "coordinator.key", "worker.pem",
             "worker.key")}


class Cluster:
    """``workers`` worker daemons and a coordinator on ``storage``."""

    def __init__(self, folder, workers=2, certs=None, token=None,
                 private_storage=False):
        self.folder = folder
        self.storage = os.path.join(folder, "storage")
        # The coordinator's storage in a mount namespace of its own (a
        # tmpfs over self.storage that only it sees): the clients of the
        # test stand where the storage is not mounted. Needs root.
        self.private_storage = private_storage
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.certs = certs
        self.token_file = None
        if token:
            self.token_file = os.path.join(folder, "token")
            with open(self.token_file, "w") as f:
                f.write(token + "\n")
        self.coordinator = None
        self.workers = []
        self.logs = []
        self.start_coordinator()
        for i in range(workers):
            self.workers.append(self._spawn(
                f"worker{i}",
                ["worker", "--coordinator", self.address, "--replicas", "1",
                 "--threads", "1", "--name", f"w{i}"]
                + self._tls("worker")))
        self.wait_workers(workers)

    def _tls(self, role):
        if not self.certs:
            return []
        return ["--tls-cert", self.certs[role + ".pem"], "--tls-key",
                self.certs[role + ".key"], "--tls-ca", self.certs["ca.pem"]]

    def _spawn(self, name, args, prefix=()):
        log = open(os.path.join(self.folder, f"{name}.log"), "ab")
        self.logs.append(log)
        return subprocess.Popen(list(prefix) + [binary()] + args, stdout=log,
                                stderr=log, stdin=subprocess.DEVNULL)

    def coordinator_path(self, path):
        """``path`` (on the coordinator's storage) as the coordinator sees
        it: through /proc/PID/root when its storage is private."""
        if not self.private_storage:
            return path
        return f"/proc/{self.coordinator.pid}/root{os.path.abspath(path)}"

    def start_coordinator(self):
        args = ["coordinator", "--listen", self.address, "--storage",
                self.storage, "--worker-timeout", "4"] + self._tls(
                    "coordinator")
        if self.token_file:
            args += ["--token-file", self.token_file]
        prefix = []
        if self.private_storage:
            os.makedirs(self.storage, exist_ok=True)
            prefix = ["unshare", "--mount", "--propagation", "private", "--",
                      "sh", "-c", 'mount -t tmpfs lockstep-storage "$0" && '
                      'exec "$@"', self.storage]
        self.coordinator = self._spawn("coordinator", args, prefix)
        deadline = time.monotonic() + 30 * SLOWDOWN
        while time.monotonic() < deadline:
            if self.coordinator.poll() is not None:
                raise RuntimeError("the coordinator exited: " + self.log(
                    "coordinator"))
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(
            f"the coordinator did not listen within {30 * SLOWDOWN:g} s")

    def client(self, **kwargs):
        if self.certs:
            kwargs.setdefault("tls_ca", self.certs["ca.pem"])
        if self.token_file:
            kwargs.setdefault("token_file", self.token_file)
        kwargs.setdefault("lockstep_binary", binary())
        return lockstep.Client(self.address, **kwargs)

    def wait_workers(self, n, timeout=30):
        timeout *= SLOWDOWN
        with self.client() as c:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    if sum(w.alive for w in c.workers()) >= n:
                        return
                except lockstep.Unavailable:
                    pass
                time.sleep(0.1)
        raise RuntimeError(
            f"{n} workers did not register within {timeout:g} s")

    def kill_coordinator(self):
        self.coordinator.send_signal(signal.SIGKILL)
        self.coordinator.wait(timeout=10)

    def log(self, name):
        with open(os.path.join(self.folder, f"{name}.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self):
        """Kills every daemon; raises when a sanitizer reported in a log (a
        TSan build writes its reports to the process's stderr, and a report
        ends the process: a test that expects a lost worker would not
        notice otherwise)."""
        for p in [self.coordinator] + self.workers:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        for log in self.logs:
            log.close()
        reports = sanitizer_reports(self.folder)
        if reports:
            raise AssertionError("sanitizer reports:\n" + "\n".join(reports))
