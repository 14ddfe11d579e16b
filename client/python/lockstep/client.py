"""The lockstep job client: submit a JSON job to the coordinator, watch it,
read its result, metrics and checkpoints.

    import lockstep
    client = lockstep.Client("127.0.0.1:7070")
    job = client.submit("examples/default.json")
    result = job.wait()               # a progress bar; raises if the job fails
    params = job.checkpoint()         # {name: numpy array}
    params.to_torch(model)            # into a torch module, by name
"""

import ipaddress
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings

import grpc

from lockstep import _transfer, errors, types
from lockstep._files import (EVENT_FILE_PREFIX, check_model_blob,
                             parse_safetensors, read_file, read_scalars,
                             scalars_from_events, verify_checkpoint)
from lockstep._generated import jobs_pb2, jobs_pb2_grpc

DEFAULT_ADDRESS = "127.0.0.1:7070"
#: How long ``Job.events()`` keeps retrying an unreachable coordinator
#: (a restarted one resumes from its journal), as ``lockstep watch`` does.
RECONNECT_SECONDS = 60.0


def _read(what, path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.LockstepError(
            f"{what} \"{path}\": cannot read: {e.strerror}") from None


def _read_pem(what, path):
    """A PEM file's bytes; LockstepError with the CLI's words when it is
    not one (gRPC would only say it has an "empty address list")."""
    pem = _read(what, path)
    if b"-----BEGIN " not in pem:
        raise errors.LockstepError(
            f"{what} \"{path}\": not a PEM file (no \"-----BEGIN\" line)")
    return pem


DEFAULT_PORT = 7070


def normalize_address(address):
    """A coordinator address as the CLI reads --coordinator: "host:port",
    "host" (port 7070), "[v6]:port"; an "http://" or "grpc://" in front is
    dropped, TLS's "https://"/"grpcs://" and anything else refused (TLS is
    tls_ca=, not a scheme). LockstepError says what is wrong."""
    text = address.strip()
    if "://" in text:
        scheme, text = text.split("://", 1)
        if scheme.lower() in ("https", "grpcs"):
            raise errors.LockstepError(
                f"coordinator address {address!r}: give host:port, and "
                "tls_ca= (--tls-ca) for TLS, not a scheme")
        if scheme.lower() not in ("http", "grpc"):
            raise errors.LockstepError(
                f"coordinator address {address!r}: unknown scheme "
                f"{scheme!r}; give host:port")
        text = text.rstrip("/")
    if "/" in text:
        raise errors.LockstepError(
            f"coordinator address {address!r}: give host:port, without "
            "a path")
    if not text:
        raise errors.LockstepError("coordinator address is empty: give "
                                   "host:port")
    if text.startswith("["):
        host, _, rest = text.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else None
        if rest and not rest.startswith(":"):
            port = ""
    elif text.count(":") > 1:  # a bare IPv6 address
        host, port = f"[{text}]", None
    else:
        host, _, port = text.partition(":")
        port = port if ":" in text else None
    if port is None:
        port = str(DEFAULT_PORT)
    if not port.isdigit() or not 0 < int(port) < 65536 or not host.strip("[]"):
        raise errors.LockstepError(
            f"coordinator address {address!r}: give host:port with a port "
            "from 1 to 65535")
    return f"{host}:{int(port)}"


def normalize_addresses(addresses):
    """Several coordinators, comma-separated (in standby behind etcd: the
    one leading answers), each as ``normalize_address`` reads it; joined
    with commas again."""
    return ",".join(normalize_address(a) for a in addresses.split(","))


def _is_loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _non_finite(value, path=""):
    """The field path of the first NaN or infinity in a job dict, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "job"
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _job_json(job):
    """A job dict as JSON; InvalidJob naming the field of a NaN or
    infinity (JSON has none; json.dumps would write a bare NaN)."""
    where = _non_finite(job)
    if where is not None:
        raise errors.InvalidJob(f"{where}: not a finite number")
    try:
        return json.dumps(job)
    except (TypeError, ValueError) as e:
        raise errors.InvalidJob(f"job: cannot be written as JSON: {e}") \
            from None


def _refuse_json_text(job):
    """A str job is a file's path; JSON text given instead is named."""
    if isinstance(job, str) and job.lstrip().startswith("{"):
        raise errors.InvalidJob(
            "job: a string is the path of a job file, and this one is JSON "
            "text: pass a dict (json.loads(text)) or the file's path")
    if not isinstance(job, (dict, str, bytes)) and \
            not hasattr(job, "__fspath__"):
        raise errors.InvalidJob(
            f"job: give a dict or a job file's path, not "
            f"{type(job).__name__}")


def _step_of(folder_name):
    """N for a checkpoint folder "step-0000000N", else None."""
    digits = folder_name[5:]
    return int(digits) if folder_name.startswith("step-") and \
        digits.isdigit() else None


def _storage_visible(status):
    """True when the coordinator's storage is mounted here at the path it
    uses: the job's folder is STORAGE/jobs/NAME, and STORAGE/coordinator/
    storage_id holds the id the coordinator reports."""
    if not status.storage_path:
        return False
    if not status.storage_id:  # a coordinator that reports none
        return os.path.isdir(status.storage_path)
    marker = os.path.join(status.storage_path, os.pardir, os.pardir,
                          "coordinator", "storage_id")
    try:
        with open(marker) as f:
            return f.read().strip() == status.storage_id
    except OSError:
        return False


class Client:
    """A connection to a lockstep coordinator's job service.

    Args:
      address: the coordinator, ``host:port`` (default
        ``$LOCKSTEP_COORDINATOR``, else 127.0.0.1:7070, as the CLI's
        ``--coordinator``); a host alone takes port 7070, an ``http://``
        in front is dropped (see ``normalize_address``). Several,
        comma-separated: coordinators in standby behind etcd; a call
        answered UNAVAILABLE (a standby names the leader) goes on to the
        next one.
      tls_ca: talk TLS, trusting this CA (PEM file), as ``--tls-ca``.
      tls_cert, tls_key: a client certificate and its key (PEM files), both
        or neither, as ``--tls-cert``/``--tls-key``.
      token: the coordinator's bearer token; default: ``token_file``'s
        content, else ``$LOCKSTEP_TOKEN`` (as ``--token-file`` and the CLI).
      token_file: a file holding the token.
      timeout: seconds each call (not a watch) may take.
      files: where a job's result, metrics and checkpoints are read from:
        "auto" (the coordinator's storage when it is mounted here at the
        same path, else over the job service, as ``lockstep pull``),
        "local" or "remote".
      lockstep_binary: the ``lockstep`` executable used to validate jobs
        locally and resolve their relative data paths (``lockstep check``);
        default ``$LOCKSTEP_BINARY``, else ``lockstep`` on PATH; False:
        never validate here. Without one, jobs go to the coordinator as given: it validates them with
        the same parser and the same error texts, but cannot resolve
        relative paths against your folder.
    """

    def __init__(self, address=None, *, tls_ca=None, tls_cert=None,
                 tls_key=None, token=None, token_file=None, timeout=30.0,
                 lockstep_binary=None, files="auto"):
        if isinstance(address, (list, tuple)):
            address = ",".join(address) if all(
                isinstance(a, str) for a in address) else address
        if address is not None and not isinstance(address, str):
            raise errors.LockstepError(
                f"coordinator address {address!r}: give a string, "
                "\"host:port\" (or a list of them)")
        # "" (an unset variable's default) means None: $LOCKSTEP_COORDINATOR,
        # else the default address.
        self.address = normalize_addresses(
            address or os.environ.get("LOCKSTEP_COORDINATOR")
            or DEFAULT_ADDRESS)
        self.timeout = timeout
        if files not in ("auto", "local", "remote"):
            raise errors.LockstepError(
                f"files={files!r}: \"auto\", \"local\" or \"remote\"")
        self.files = files
        if (tls_cert is None) != (tls_key is None):
            raise errors.LockstepError(
                "tls_cert and tls_key: give both (a client certificate and "
                "its key) or neither")
        if tls_cert is not None and tls_ca is None:
            raise errors.LockstepError(
                "tls_cert needs tls_ca (the CA that signed the coordinator's "
                "certificate)")
        if token is None and token_file is not None:
            token = _read("token_file", token_file).decode().strip()
            if not token:
                raise errors.LockstepError(
                    f"token_file \"{token_file}\": the file holds no token")
        if token is None:
            token = os.environ.get("LOCKSTEP_TOKEN", "")
        if not isinstance(token, str):
            raise errors.LockstepError(
                f"token: give a string, not {type(token).__name__}")
        # As token_file and --token-file: the whitespace around it (a
        # newline read from a file) is not part of it.
        token = token.strip()
        if any(c.isspace() or not c.isprintable() for c in token):
            raise errors.LockstepError(
                "token: holds whitespace or control characters inside it "
                "(a bearer token is one printable word)")
        self._metadata = (("authorization", f"Bearer {token}"),) if token \
            else ()
        self._tls = tls_ca is not None
        if self._tls:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read_pem("tls_ca", tls_ca),
                private_key=_read_pem("tls_key", tls_key) if tls_key
                else None,
                certificate_chain=_read_pem("tls_cert", tls_cert)
                if tls_cert else None)
            self._channels = [grpc.secure_channel(a, creds)
                              for a in self.address.split(",")]
        else:
            for a in self.address.split(","):
                if token and not _is_loopback(a):
                    warnings.warn(
                        f"sending the bearer token to {a} without TLS "
                        "(pass tls_ca)")
            self._channels = [grpc.insecure_channel(a)
                              for a in self.address.split(",")]
        self._stubs = [jobs_pb2_grpc.JobServiceStub(c)
                       for c in self._channels]
        self._current = 0  # the coordinator that answered last
        self._warned_unchecked = False
        if lockstep_binary is False:
            self._binary = None
        else:
            self._binary = (lockstep_binary
                            or os.environ.get("LOCKSTEP_BINARY")
                            or shutil.which("lockstep"))

    def close(self):
        """Closes the connection (also done by ``with Client(...)``)."""
        for channel in self._channels:
            channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"lockstep.Client({self.address!r}"
                f"{', tls' if self._tls else ''})")

    # -- calls ---------------------------------------------------------

    @property
    def _stub(self):
        """The job service of the coordinator that answered last."""
        return self._stubs[self._current]

    def _next_coordinator(self):
        """After an UNAVAILABLE: the next call asks the next coordinator."""
        self._current = (self._current + 1) % len(self._stubs)

    def _call(self, method, request, what):
        """``method`` (a JobService method's name) on the coordinator that
        answered last, then on each other one while it is UNAVAILABLE."""
        for attempt in range(len(self._stubs)):
            try:
                return getattr(self._stub, method)(
                    request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                if (e.code() != grpc.StatusCode.UNAVAILABLE
                        or attempt + 1 == len(self._stubs)):
                    raise self._error(e, what) from None
                self._next_coordinator()

    def _error(self, e, what):
        address = self.address.split(",")[self._current]
        err = errors.from_rpc_error(e, f"{what} {address}")
        if (isinstance(err, errors.Unavailable) and not self._tls
                and "ssl" in (e.details() or "").lower()):
            err.message += " (does the coordinator use TLS? pass tls_ca)"
        return err

    def check(self, job, data_dir=None, data_on_workers=False):
        """The JSON ``submit`` would send for ``job`` (a dict or a path),
        validated by ``lockstep check``: defaults filled in, relative data
        paths resolved (against ``data_dir``; default the job file's
        folder, or the working folder for a dict) and looked for here
        (``data_on_workers=True``: the paths are the workers' alone, not
        looked for). Raises InvalidJob with the validator's message, naming
        the field."""
        if self._binary is None:
            raise errors.LockstepError(
                "no lockstep binary to validate with: pass lockstep_binary=, "
                "set $LOCKSTEP_BINARY or put lockstep on PATH")
        _refuse_json_text(job)
        if isinstance(job, dict):
            args, stdin = ["-", "--data-dir", data_dir or os.getcwd()], \
                _job_json(job)
        else:
            args = [os.fspath(job)] + (["--data-dir", data_dir]
                                       if data_dir else [])
            stdin = ""
        if data_on_workers:
            args.append("--data-on-workers")
        try:
            run = subprocess.run([self._binary, "check"] + args, input=stdin,
                                 capture_output=True, text=True, timeout=60)
        except OSError as e:
            raise errors.LockstepError(
                f"cannot run {self._binary}: {e.strerror}") from None
        if run.returncode == 2:
            text = run.stderr.strip()
            prefix = "lockstep check: error: "
            raise errors.InvalidJob(
                text[len(prefix):] if text.startswith(prefix) else text)
        if run.returncode != 0:
            raise errors.LockstepError(
                f"{self._binary} check exited {run.returncode}: "
                f"{run.stderr.strip()}")
        for line in run.stderr.splitlines():
            if "not checked here" in line:  # data_on_workers: named, not hid
                warnings.warn(line.replace("lockstep check: ", ""),
                              stacklevel=2)
        return run.stdout

    def submit(self, job, data_dir=None, resume=False, restart=False,
               data_on_workers=False):
        """Submits a job: a dict, or the path of a JSON file. It is
        validated here first (see ``check``) when a lockstep binary is at
        hand. Returns the ``Job``.

        A job's name is its identity: the same spec again returns the job
        of that name (running or ended) and submits nothing; another spec
        raises JobExists naming the fields that differ, unless ``resume``
        (continue the job from its last checkpoint: the model must be the
        same) or ``restart`` (start over; its earlier results are moved
        aside). Every data path must exist here unless ``data_on_workers``
        (see ``check``). Raises InvalidJob (``.field`` names the field: a
        missing data file is ``data.train_path``'s), JobExists,
        Unauthenticated, Unavailable."""
        if resume and restart:
            raise errors.LockstepError(
                "resume and restart: give one (continue from the checkpoint, "
                "or start over)")
        _refuse_json_text(job)
        if self._binary is not None:
            text = self.check(job, data_dir, data_on_workers)
        elif data_dir is not None:
            raise errors.LockstepError(
                "data_dir needs a lockstep binary to resolve the job's paths "
                "(pass lockstep_binary= or put lockstep on PATH)")
        else:
            if not self._warned_unchecked:
                self._warned_unchecked = True
                warnings.warn(
                    "no lockstep binary here (lockstep_binary=, "
                    "$LOCKSTEP_BINARY or PATH): jobs go to the coordinator, "
                    "which validates them, but their data paths are not "
                    "looked for before they start", stacklevel=2)
            if isinstance(job, dict):
                text = _job_json(job)
            else:
                path = os.fspath(job)
                try:
                    with open(path, "rb") as f:
                        text = f.read().decode("utf-8", "replace")
                except OSError as e:
                    # The CLI's words and the same class as with a binary.
                    raise errors.InvalidJob(
                        f"cannot read job file \"{path}\": "
                        f"{e.strerror}") from None
        mode = (jobs_pb2.SUBMIT_RESUME if resume else
                jobs_pb2.SUBMIT_RESTART if restart else jobs_pb2.SUBMIT_NEW)
        reply = self._call("Submit",
                           jobs_pb2.SubmitRequest(job_json=text, mode=mode),
                           "submit to")
        return Job(self, reply.status.name)

    def job(self, name):
        """The ``Job`` of that name (not checked until used)."""
        if not isinstance(name, str) or not name:
            raise errors.LockstepError(
                f"job name {name!r}: give the job's name, a non-empty string")
        return Job(self, name)

    def jobs(self):
        """Every job the coordinator knows, oldest first, as JobStatus."""
        r = self._call("ListJobs", jobs_pb2.ListJobsRequest(),
                       "list from")
        return [types.status_from_proto(j) for j in r.jobs]

    def workers(self):
        """Every registered worker, as WorkerStatus."""
        r = self._call("ListJobs", jobs_pb2.ListJobsRequest(),
                       "list from")
        return [types.worker_from_proto(w) for w in r.workers]


class Job:
    """A job on the coordinator, by name. Its files (result, metrics,
    checkpoints) are read from the coordinator's storage when it is mounted
    here at the same path, else fetched over the job service (chunked,
    CRC-checked, resumed after a broken or damaged transfer; a
    ``TransferWarning`` says when one was)."""

    def __init__(self, client, name):
        self.client = client
        self.name = name

    def __repr__(self):
        return f"lockstep.Job({self.name!r})"

    def _local(self, status):
        """True to read the job's files from the storage, False to fetch
        them (the client's ``files`` setting)."""
        if self.client.files == "auto":
            return _storage_visible(status)
        return self.client.files == "local"

    def _read(self, status, rel, size=0):
        """The bytes of the job's file ``rel`` ("result.json")."""
        if self._local(status):
            return read_file(os.path.join(status.storage_path, rel))
        return _transfer.fetch(self.client, self.name, rel, size)

    def status(self):
        """The job's JobStatus now. Raises JobNotFound."""
        return types.status_from_proto(self.client._call(
            "GetJob", jobs_pb2.GetJobRequest(name=self.name),
            "status from"))

    def cancel(self):
        """Cancels a PENDING or RUNNING job; returns its JobStatus."""
        return types.status_from_proto(self.client._call(
            "CancelJob",
            jobs_pb2.CancelJobRequest(name=self.name), "cancel at"))

    def events(self, timeout=None, reconnect_seconds=RECONNECT_SECONDS):
        """Yields the job's events until it ends: StateChanged, Progress,
        LogLine, Reconnecting, and last Finished. Rides through a
        coordinator restart (retrying for ``reconnect_seconds``; the log
        goes on after the last line seen). ``timeout``: seconds in all,
        then WaitTimeout (a LockstepError and a TimeoutError); a job
        already ended is returned even with timeout=0."""
        client = self.client
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = 0
        state = None
        step = -1
        any_snapshot = False
        down_since = None
        unanswered = 0
        while True:
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 and any_snapshot:
                    raise errors.WaitTimeout(
                        f"job {self.name}: not ended after {timeout} s "
                        f"(last state {state})", "DEADLINE_EXCEEDED")
                # Asked once at least (timeout=0 on an ended job returns
                # it): a second for the first answer.
                if not any_snapshot:
                    remaining = max(remaining, 1.0)
            call = client._stub.WatchJob(
                jobs_pb2.WatchJobRequest(name=self.name, events_seen=seen),
                timeout=remaining, metadata=client._metadata)
            error = None
            try:
                for msg in call:
                    down_since = None
                    any_snapshot = True
                    s = types.status_from_proto(msg)
                    seen = msg.events_total
                    for line in msg.events:
                        yield types.LogLine(s, line)
                    if s.state != state:
                        state = s.state
                        yield types.StateChanged(s, s.state, s.message)
                    if s.step != step and s.step > 0:
                        step = s.step
                        yield types.Progress(s, s.step, s.total_steps,
                                             s.epoch, s.loss)
                    if s.done:
                        yield types.Finished(s, s.state, s.message)
                        return
            except grpc.RpcError as e:
                error = e
            finally:
                call.cancel()
            code = error.code() if error is not None else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline:
                if not any_snapshot and time.monotonic() >= deadline:
                    raise errors.WaitTimeout(
                        f"job {self.name}: no answer from {client.address} "
                        f"within {timeout} s", "DEADLINE_EXCEEDED")
                continue  # the loop's check raises WaitTimeout
            if code == grpc.StatusCode.UNAVAILABLE and not any_snapshot:
                # Never reached: say so once every coordinator was asked.
                unanswered += 1
                if unanswered < len(client._stubs):
                    client._next_coordinator()
                    continue
            if error is not None and (code != grpc.StatusCode.UNAVAILABLE
                                      or not any_snapshot):
                raise client._error(error, "watch at")
            if code == grpc.StatusCode.UNAVAILABLE:
                client._next_coordinator()  # another one may lead now
            # The stream ended early or the coordinator went away.
            now = time.monotonic()
            if down_since is None:
                down_since = now
                text = (error.details() if error is not None
                        else "the stream ended early")
                yield types.Reconnecting(
                    s, f"watch at {client.address}: {text}", reconnect_seconds)
            elif now - down_since > reconnect_seconds:
                if error is not None:
                    raise client._error(error, "watch at")
                raise errors.Unavailable(
                    f"watch at {client.address}: the stream ended early",
                    "UNAVAILABLE")
            time.sleep(1.0)

    def wait(self, progress=True, timeout=None, file=None):
        """Waits for the job to end and returns its result (``result()``).
        Raises JobFailed or JobCancelled with the job's own message.
        ``progress``: a progress bar (tqdm.auto: a widget in a notebook, a
        line in a terminal; plain text lines when tqdm is missing) and the
        job's log lines; ``file``: where they go (default stderr)."""
        from lockstep._progress import ProgressView
        view = ProgressView(self.name, file or sys.stderr) if progress \
            else None
        try:
            for event in self.events(timeout=timeout):
                if view is not None:
                    view.show(event)
                if isinstance(event, types.Finished):
                    final = event.status
        finally:
            if view is not None:
                view.close()
        if final.state == "FAILED":
            raise errors.JobFailed(final)
        if final.state == "CANCELLED":
            raise errors.JobCancelled(final)
        return self.result(final)

    def _ended_status(self, status, what):
        status = status or self.status()
        if status.state == "FAILED":
            raise errors.JobFailed(status)
        if status.state == "CANCELLED":
            raise errors.JobCancelled(status)
        if not status.result_path:
            raise errors.JobNotFinished(
                f"job {self.name} is {status.state}: no {what} yet (a "
                "SUCCEEDED job has one; wait() waits for it)")
        return status

    def result(self, status=None):
        """result.json of a SUCCEEDED job, as a dict (test accuracy and
        loss, fingerprint, steps, samples/s, checkpoint path, ...). Raises
        JobFailed or JobCancelled for a job that ended so, JobNotFinished
        for one still running, CheckpointError for a file that cannot be
        read."""
        status = self._ended_status(status, "result")
        blob = self._read(status, "result.json")
        try:
            return json.loads(blob)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise errors.CheckpointError(
                f"result \"{status.result_path}\": not JSON: {e}") from None

    def metrics(self):
        """The chief's TensorBoard scalars (loss, accuracy, learning rate,
        samples/s, test figures) as rows step, tag, value, wall_time: a
        pandas DataFrame when pandas is installed, else a list of dicts."""
        status = self.status()
        if self._local(status):
            rows = read_scalars(os.path.join(status.storage_path, "summaries"))
        else:
            rows = []
            for rel, size in _transfer.list_files(self.client, self.name,
                                                  "summaries/"):
                if os.path.basename(rel).startswith(EVENT_FILE_PREFIX):
                    rows += scalars_from_events(
                        _transfer.fetch(self.client, self.name, rel, size),
                        f"{self.name}:{rel}")
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows,
                                columns=["step", "tag", "value", "wall_time"])

    def checkpoints(self):
        """The steps of the job's committed checkpoints, oldest first."""
        status = self.status()
        if self._local(status):
            folder = os.path.join(status.storage_path, "checkpoints")
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                return []
            except OSError as e:
                raise errors.CheckpointError(
                    f"cannot list checkpoints \"{folder}\": {e.strerror}") \
                    from None
        else:
            names = {rel.split("/")[1] for rel, _ in _transfer.list_files(
                self.client, self.name, "checkpoints/") if rel.count("/") >= 2}
        return sorted(step for step in map(_step_of, names)
                      if step is not None)

    def checkpoint(self, step=None):
        """The model's parameters at a committed checkpoint (default: the
        last one) as a ``Checkpoint``: {name: numpy array}, under the
        names the job's model gives them (PyTorch / Hugging Face
        state-dict names with ``"param_names": "torch"`` and the presets,
        Keras names otherwise)."""
        status = self.status()
        if step is None:
            if not status.checkpoint_path:
                raise errors.CheckpointError(
                    f"job {self.name} ({status.state}) has no committed "
                    "checkpoint yet")
            folder = os.path.basename(status.checkpoint_path)
        else:
            folder = f"step-{int(step):08d}"
            if int(step) not in self.checkpoints():
                steps = self.checkpoints()
                raise errors.CheckpointError(
                    f"job {self.name} has no checkpoint at step {step}; "
                    f"committed: {', '.join(map(str, steps)) or 'none'}")
        rel = f"checkpoints/{folder}/model.safetensors"
        path = os.path.join(status.storage_path, rel)
        blob = self._read(status, rel)
        try:
            check_model_blob(
                self._read(status, f"checkpoints/{folder}/state.json"), blob,
                folder)
        except errors.CheckpointError as e:
            raise errors.CheckpointError(
                f"checkpoint {folder} of job {self.name} is damaged on the "
                f"coordinator's storage ({e}); committed: "
                f"{', '.join(map(str, self.checkpoints())) or 'none'} "
                "(step=N reads another)", "DATA_LOSS") from None
        return Checkpoint(path, blob=blob)

    def pull(self, dest, step=None):
        """Copies the job's result.json, summaries and its last committed
        checkpoint (or ``step``'s) into the folder ``dest``, laid out as
        the job's folder (``lockstep pull JOB DEST``). Always over the job
        service; files already in ``dest`` are checked, not fetched again.
        Returns the paths written."""
        if os.path.exists(dest) and not os.path.isdir(dest):
            raise errors.LockstepError(
                f"pull into \"{dest}\": a file is there; give a folder")
        status = self.status()
        if step is not None:
            folder = f"checkpoints/step-{int(step):08d}/"
        elif status.checkpoint_path:
            folder = f"checkpoints/{os.path.basename(status.checkpoint_path)}/"
        else:
            folder = None
        files = _transfer.list_files(self.client, self.name)
        wanted = [(rel, size) for rel, size in files
                  if rel == "result.json" or rel.startswith("summaries/")
                  or (folder and rel.startswith(folder))]
        if step is not None and not any(rel.startswith(folder)
                                         for rel, _ in wanted):
            steps = self.checkpoints()
            raise errors.CheckpointError(
                f"job {self.name} has no checkpoint at step {step}; "
                f"committed: {', '.join(map(str, steps)) or 'none'}")
        written = []
        for rel, size in wanted:
            target = os.path.join(dest, *rel.split("/"))
            _transfer.fetch_to(self.client, self.name, rel, size, target)
            written.append(target)
        # The copy is the storage's, byte for byte (each file's CRC-32
        # above); whether those bytes are the checkpoint that was committed
        # is its state.json's CRC32Cs' say, as when a job resumes from it.
        if folder and any(rel.startswith(folder) for rel, _ in wanted):
            try:
                verify_checkpoint(os.path.join(dest, *folder.split("/")))
            except errors.CheckpointError as e:
                steps = self.checkpoints()
                raise errors.CheckpointError(
                    f"pulled into {dest}, but checkpoint {folder[:-1]} is "
                    f"damaged on the coordinator's storage ({e}); committed: "
                    f"{', '.join(map(str, steps)) or 'none'} (step=N pulls "
                    "another)", "DATA_LOSS") from None
        return written


class Checkpoint(dict):
    """{name: numpy array} read from a checkpoint's model.safetensors.
    ``step`` and ``path`` (on the coordinator's storage) say where it came
    from."""

    def __init__(self, path, blob=None):
        super().__init__(parse_safetensors(
            read_file(path) if blob is None else blob, path))
        self.path = path
        self.step = _step_of(os.path.basename(os.path.dirname(path)))

    def to_torch(self, module, strict=True):
        """Loads these parameters into a torch module by name (see
        ``lockstep.to_torch``) and returns the module."""
        from lockstep.torch_io import to_torch
        return to_torch(self, module, strict=strict)
