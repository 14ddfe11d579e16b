"""Every error class, with the message the user sees."""

import json
import re
import warnings

import pytest

import cluster as cluster_mod
import jobs
import lockstep


def test_invalid_job_is_refused_here_naming_the_field(cluster, tmp_path):
    job = jobs.mlp_job("py-bad", str(tmp_path))
    del job["data"]["test_path"]
    client = cluster.client()
    with pytest.raises(lockstep.InvalidJob) as e:
        client.submit(job, data_dir=str(tmp_path))
    assert e.value.field == "data.test_path"
    assert str(e.value) == 'data.test_path: required for format "csv"'
    job = jobs.mlp_job("py-bad", str(tmp_path))
    job["optimizer"]["learning_rate"] = -1
    with pytest.raises(lockstep.InvalidJob) as e:
        client.submit(job, data_dir=str(tmp_path))
    assert e.value.field == "optimizer.learning_rate", str(e.value)
    # Nothing reached the coordinator.
    assert "py-bad" not in [j.name for j in client.jobs()]


def test_invalid_job_file_is_named(cluster, tmp_path):
    client = cluster.client()
    missing = tmp_path / "nope.json"
    with pytest.raises(lockstep.InvalidJob) as e:
        client.submit(missing)
    assert str(e.value).startswith(f'cannot read job file "{missing}"')
    assert e.value.field is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",')
    with pytest.raises(lockstep.InvalidJob, match=r"bad\.json"):
        client.submit(bad)


def test_a_missing_data_file_is_refused_at_submit_naming_the_field(
        cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    (tmp_path / "test.csv").unlink()
    client = cluster.client()
    job = jobs.mlp_job("py-no-data", str(tmp_path))
    with pytest.raises(lockstep.InvalidJob) as e:
        client.submit(job, data_dir=str(tmp_path))
    assert e.value.field == "data.test_path"
    assert str(e.value).startswith(
        f'data.test_path: no such file "{tmp_path / "test.csv"}" (looked for '
        'from this machine: if only the workers see the job\'s data, submit '
        'with --data-on-workers)')
    assert "py-no-data" not in [j.name for j in client.jobs()]
    # The workers' own paths: not looked for here, but named.
    with pytest.warns(UserWarning, match=r"not checked here .*data\.test_path "
                      f'"{tmp_path / "test.csv"}"'):
        text = client.check(job, data_dir=str(tmp_path), data_on_workers=True)
    assert json.loads(text)["name"] == "py-no-data"


def test_an_error_has_one_class_with_or_without_the_binary(cluster, tmp_path):
    missing = tmp_path / "nope.json"
    for binary in (None, False):
        client = cluster.client(lockstep_binary=binary)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(lockstep.InvalidJob) as e:
                client.submit(missing)
        assert str(e.value).startswith(
            f'cannot read job file "{missing}": No such file or directory')
    # Without a binary, submit says once that data paths go unchecked.
    client = cluster.client(lockstep_binary=False)
    with pytest.warns(UserWarning, match="their data paths are not looked for"):
        with pytest.raises(lockstep.InvalidJob):
            client.submit(missing)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        with pytest.raises(lockstep.InvalidJob):
            client.submit(missing)


def test_addresses_are_read_as_the_cli_reads_them():
    # The same cases as client/coordinator_address_test.cc's.
    for given, want in [("127.0.0.1:7071", "127.0.0.1:7071"),
                        ("127.0.0.1", "127.0.0.1:7070"),
                        (" chief ", "chief:7070"),
                        ("http://chief:9000", "chief:9000"),
                        ("http://chief:9000/", "chief:9000"),
                        ("grpc://chief", "chief:7070"),
                        ("[::1]:7071", "[::1]:7071"), ("[::1]", "[::1]:7070"),
                        ("::1", "[::1]:7070")]:
        assert lockstep.normalize_address(given) == want, given
        assert lockstep.Client(given, lockstep_binary=False).address == want
    for given, why in [("https://chief:7070", "not a scheme"),
                       ("ftp://chief", "unknown scheme 'ftp'"),
                       ("http://chief:7070/jobs", "without a path"),
                       ("chief:7070/jobs", "without a path"),
                       ("chief:0", "a port from 1 to 65535"),
                       ("chief:70000", "a port from 1 to 65535"),
                       ("chief:http", "a port from 1 to 65535"),
                       (":7070", "a port from 1 to 65535")]:
        with pytest.raises(lockstep.LockstepError) as e:
            lockstep.normalize_address(given)
        assert why in str(e.value), (given, str(e.value))
        assert str(e.value).startswith(f"coordinator address {given!r}: ")


def test_a_list_of_coordinators_follows_the_one_that_answers(cluster):
    # As client/coordinator_address_test.cc: each entry normalized.
    assert lockstep.normalize_addresses("a, http://b:7071,[::1]") == \
        "a:7070,b:7071,[::1]:7070"
    with pytest.raises(lockstep.LockstepError, match="coordinator address "):
        lockstep.normalize_addresses("a,,b")
    # Nothing listens at the first (a coordinator that died): the calls
    # go on to the second, and stay there.
    dead = f"127.0.0.1:{cluster_mod.free_port()}"
    client = lockstep.Client(f"{dead},{cluster.address}", timeout=5,
                             lockstep_binary=False)
    assert client.address == f"{dead},{cluster.address}"
    client.jobs()
    assert client._current == 1
    with pytest.raises(lockstep.JobNotFound):
        client.job("no-such-job").status()
    assert client._current == 1
    # A watch, too, asks the next one when the first is not there.
    client._current = 0
    with pytest.raises(lockstep.JobNotFound):
        next(client.job("no-such-job").events())


def test_without_the_binary_the_coordinator_refuses_with_the_same_text(
        cluster, tmp_path):
    job = jobs.mlp_job("py-bad-remote", str(tmp_path))
    del job["data"]["test_path"]
    client = cluster.client(lockstep_binary=False)
    with pytest.raises(lockstep.InvalidJob) as e, \
            pytest.warns(UserWarning, match="not looked for"):
        client.submit(job)
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.field == "data.test_path", str(e.value)
    assert 'data.test_path: required for format "csv"' in str(e.value)
    with pytest.raises(lockstep.LockstepError, match="data_dir needs a "
                       "lockstep binary"):
        client.submit(job, data_dir=str(tmp_path))


def test_unknown_job_is_not_found(cluster):
    client = cluster.client()
    with pytest.raises(lockstep.JobNotFound) as e:
        client.job("no-such-job").status()
    assert "no-such-job" in str(e.value)
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(lockstep.JobNotFound):
        client.job("no-such-job").cancel()
    with pytest.raises(lockstep.JobNotFound):
        next(client.job("no-such-job").events())


def test_a_running_name_cannot_be_submitted_twice(cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    client = cluster.client()
    job = client.submit(jobs.mlp_job("py-twice", str(tmp_path), epochs=400),
                        data_dir=str(tmp_path))
    try:
        with pytest.raises(lockstep.JobExists, match="py-twice"):
            client.submit(jobs.mlp_job("py-twice", str(tmp_path)),
                          data_dir=str(tmp_path))
        # The same spec again is that job.
        same = client.submit(
            jobs.mlp_job("py-twice", str(tmp_path), epochs=400),
            data_dir=str(tmp_path))
        assert same.status().generation == job.status().generation == 1
        with pytest.raises(lockstep.JobNotFinished,
                           match="job py-twice is (PENDING|RUNNING): no "
                           "result yet"):
            job.result()
    finally:
        job.cancel()
    with pytest.raises(lockstep.JobCancelled, match="job py-twice CANCELLED"):
        job.result()


def test_a_failed_job_raises_with_its_own_message(cluster, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    (tmp_path / "test.csv").write_text("1,2,3\n")  # 2 features, not 8
    client = cluster.client()
    job = client.submit(jobs.mlp_job("py-fails", str(tmp_path)),
                        data_dir=str(tmp_path))
    with pytest.raises(lockstep.JobFailed) as e:
        job.wait(progress=False, timeout=120)
    assert e.value.status.state == "FAILED"
    assert str(tmp_path / "test.csv") in e.value.status.message
    assert str(e.value).startswith("job py-fails FAILED: ")
    # Its result, too, is the job's failure.
    with pytest.raises(lockstep.JobFailed, match="job py-fails FAILED: "):
        job.result()


def test_nothing_listening_is_unavailable():
    client = lockstep.Client(f"127.0.0.1:{cluster_mod.free_port()}",
                             timeout=2, lockstep_binary=False)
    with pytest.raises(lockstep.Unavailable) as e:
        client.jobs()
    assert "list from 127.0.0.1:" in str(e.value)
    with pytest.raises(lockstep.Unavailable):
        next(client.job("x").events())


def test_a_server_that_is_not_a_coordinator_is_named(tmp_path):
    """A gRPC server without the job service (here one with no service,
    as a worker's collective port is for these calls) answers
    UNIMPLEMENTED with no text: the CLI and this client say what that
    means rather than end in "list from ADDRESS: "."""
    import subprocess
    from concurrent import futures
    import grpc
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        # (Python's server adds "Method not found!"; a C++ one says nothing.)
        want = (rf"list from 127\.0\.0\.1:{port}: the server there does not "
                r"serve this call \(UNIMPLEMENTED(: Method not found!)?\): "
                r"another service listens at that address \(another "
                r"lockstep daemon, or another program\), or another "
                r"lockstep version")
        client = lockstep.Client(f"127.0.0.1:{port}", timeout=5,
                                 lockstep_binary=False)
        with pytest.raises(lockstep.LockstepError) as e:
            client.jobs()
        assert re.fullmatch(want, str(e.value)), str(e.value)
        run = subprocess.run(
            [cluster_mod.binary(), "list", "--coordinator",
             f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30)
        assert run.returncode == 1, run.stderr
        assert re.fullmatch("lockstep list: error: " + want,
                            run.stderr.strip()), run.stderr
    finally:
        server.stop(None)


def test_bad_client_settings_are_named(tmp_path):
    with pytest.raises(lockstep.LockstepError, match="tls_cert and tls_key"):
        lockstep.Client(tls_cert="a.pem")
    empty = tmp_path / "token"
    empty.write_text("\n")
    with pytest.raises(lockstep.LockstepError,
                       match=f'token_file "{empty}": the file holds no token'):
        lockstep.Client(token_file=str(empty))
    with pytest.raises(lockstep.LockstepError,
                       match=r'tls_ca ".*missing.pem": cannot read'):
        lockstep.Client(tls_ca=str(tmp_path / "missing.pem"))


def test_damaged_checkpoint_and_summaries_are_named(tmp_path):
    from lockstep._files import read_safetensors, read_tfrecords
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2],
                               "data_offsets": [0, 16]}}).encode()
    good = len(header).to_bytes(8, "little") + header + bytes(16)
    path = tmp_path / "model.safetensors"
    path.write_bytes(good)
    assert read_safetensors(str(path))["w"].shape == (2, 2)
    path.write_bytes(good[:-4])
    with pytest.raises(lockstep.CheckpointError,
                       match=r'model\.safetensors": tensor "w": bytes \[0, 16\)'
                       r" do not hold shape \[2, 2\] F32"):
        read_safetensors(str(path))
    path.write_bytes((10 ** 12).to_bytes(8, "little") + header)
    with pytest.raises(lockstep.CheckpointError, match="header of "
                       "1000000000000 bytes does not fit"):
        read_safetensors(str(path))
    path.write_bytes(good + b"xx")
    with pytest.raises(lockstep.CheckpointError,
                       match="2 bytes after the last tensor"):
        read_safetensors(str(path))
    # What the C++ reader refuses, this one refuses too.
    def with_header(text, data=bytes(16)):
        raw = text.encode()
        path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)

    for text, message in [
        ('{"w": {"dtype": "F32", "shape": "22", "data_offsets": [0, 16]}}',
         'needs dtype, shape and data_offsets'),
        ('{"w": {"dtype": "F32", "shape": [2, 2.0], "data_offsets": [0, 16]}}',
         'a shape that is not a list of non-negative integers'),
        ('{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16.5]}}',
         'data_offsets that are not non-negative integers'),
        ('{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, '
         '"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
         'the header names "w" twice'),
        ('{"__metadata__": {"a": 1}, '
         '"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
         '__metadata__ is not an object of strings'),
        ('{"w": {"dtype": "F8", "shape": [4], "data_offsets": [0, 16]}}',
         "unknown dtype 'F8'"),
    ]:
        with_header(text)
        with pytest.raises(lockstep.CheckpointError) as e:
            read_safetensors(str(path))
        assert message in str(e.value), (text, str(e.value))
    # BF16 (what model.init takes) is widened to float32 exactly.
    with_header('{"w": {"dtype": "BF16", "shape": [2], '
                '"data_offsets": [0, 4]}}',
                bytes([0x80, 0x3F, 0x20, 0xC0]))  # 1.0, -2.5
    got = read_safetensors(str(path))["w"]
    assert got.dtype.name == "float32" and got.tolist() == [1.0, -2.5]
    events = tmp_path / "events.out.tfevents.1"
    events.write_bytes(bytes(12) + b"abcd" + bytes(4))
    with pytest.raises(lockstep.CheckpointError,
                       match="record 0 at byte 0: the length's CRC"):
        read_tfrecords(str(events))


def test_a_checkpoint_folder_is_checked_against_its_crc32cs(tmp_path):
    """What pull checks after copying a checkpoint (lockstep pull's
    VerifyCheckpointFiles): state.json's step and each file's bytes and
    CRC32C; each defect named."""
    import os
    from lockstep import _files
    # CRC-32C's check value, with and without python3-crc32c, and chained.
    assert _files.crc32c(b"123456789") == 0xE3069283
    assert _files._crc32c_python(b"123456789") == 0xE3069283
    blob = os.urandom(70000)
    assert _files.crc32c(blob[:123], 0) == _files._crc32c_python(blob[:123])
    assert _files.crc32c(blob[123:], _files.crc32c(blob[:123])) == \
        _files.crc32c(blob)
    folder = tmp_path / "step-00000003"
    folder.mkdir()
    contents = {"model.safetensors": b"model-bytes",
                "optimizer.safetensors": b"optimizer"}
    for name, data in contents.items():
        (folder / name).write_bytes(data)

    def write_state(step=3, files=None):
        records = {n: {"bytes": len(d), "crc32c": _files.crc32c(d)}
                   for n, d in contents.items()}
        (folder / "state.json").write_text(
            json.dumps({"step": step, "files": files or records}))

    write_state()
    _files.verify_checkpoint(str(folder))
    _files.check_model_blob((folder / "state.json").read_bytes(),
                            b"model-bytes", "step-00000003")
    with pytest.raises(lockstep.CheckpointError) as e:
        _files.check_model_blob((folder / "state.json").read_bytes(),
                                b"model-byteS", "step-00000003")
    assert re.fullmatch(r"model\.safetensors: 11 bytes with CRC32C "
                        r"0x[0-9a-f]{8}, recorded 11 bytes with "
                        r"0x[0-9a-f]{8}", str(e.value)), str(e.value)
    (folder / "optimizer.safetensors").write_bytes(b"optimizer!")
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^optimizer\.safetensors: 10 bytes with CRC32C "
                       r"0x[0-9a-f]{8}, recorded 9 bytes"):
        _files.verify_checkpoint(str(folder))
    (folder / "optimizer.safetensors").unlink()
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^optimizer\.safetensors: missing$"):
        _files.verify_checkpoint(str(folder))
    (folder / "optimizer.safetensors").write_bytes(b"optimizer")
    write_state(step=4)
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^state\.json: records step 4 in folder "
                       r"step-00000003$"):
        _files.verify_checkpoint(str(folder))
    write_state(files={"model.safetensors": {"bytes": 1, "crc32c": 2}})
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^state\.json: no record of "
                       r"optimizer\.safetensors$"):
        _files.verify_checkpoint(str(folder))
    write_state(files={"model.safetensors": {"bytes": 1, "crc32c": 2},
                       "optimizer.safetensors": {"bytes": 1, "crc32c": 2},
                       "../x": {"bytes": 1, "crc32c": 2}})
    with pytest.raises(lockstep.CheckpointError,
                       match=r'^state\.json: malformed \(the record of '
                       r'"\.\./x"\)$'):
        _files.verify_checkpoint(str(folder))
    (folder / "state.json").write_text("{")
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^state\.json: malformed \("):
        _files.verify_checkpoint(str(folder))
    (folder / "state.json").unlink()
    with pytest.raises(lockstep.CheckpointError,
                       match=r"^state\.json: missing$"):
        _files.verify_checkpoint(str(folder))


def test_wrong_arguments_are_named_not_leaked(cluster, tmp_path):
    """Arguments of the wrong kind raise a LockstepError saying so, not an
    AttributeError from inside, a grpc ValueError or a silent default."""
    with pytest.raises(lockstep.LockstepError,
                       match=r"^coordinator address 7070: give a string"):
        lockstep.Client(7070)
    # "" is None (an unset variable's default): the default address.
    assert lockstep.Client("").address == lockstep.Client().address
    assert lockstep.Client(["127.0.0.1:1", "chief"]).address == \
        "127.0.0.1:1,chief:7070"
    # A token read with its newline works (as token_file); one with
    # whitespace inside is refused before gRPC sees it.
    lockstep.Client(cluster.address, token=" abc\n")
    with pytest.raises(lockstep.LockstepError,
                       match="token: holds whitespace or control characters"):
        lockstep.Client(cluster.address, token="ab c")
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(lockstep.LockstepError) as e:
        lockstep.Client(cluster.address, tls_ca=str(not_pem))
    assert str(e.value) == (f'tls_ca "{not_pem}": not a PEM file (no '
                            '"-----BEGIN" line)')
    client = cluster.client()
    with pytest.raises(lockstep.LockstepError,
                       match=r"^job name 5: give the job's name"):
        client.job(5)
    with pytest.raises(lockstep.InvalidJob,
                       match="this one is JSON text: pass a dict"):
        client.submit('{"name": "x"}')
    job = jobs.mlp_job("py-nan", str(tmp_path))
    job["optimizer"]["learning_rate"] = float("nan")
    with pytest.raises(lockstep.InvalidJob) as e:
        client.submit(job, data_dir=str(tmp_path))
    assert str(e.value) == "optimizer.learning_rate: not a finite number"
    assert e.value.field == "optimizer.learning_rate"
    job["optimizer"]["learning_rate"] = 0.1
    job["model"]["layers"][0]["units"] = [1, float("-inf")]
    with pytest.raises(lockstep.InvalidJob,
                       match=r"^model\.layers\[0\]\.units\[1\]: not a finite"):
        client.check(job)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(lockstep.LockstepError,
                       match="a file is there; give a folder"):
        client.job("py-nan").pull(str(a_file))
