"""A job's files fetched over the job service (JobService.ListJobFiles and
ReadJobFile) when the coordinator's storage is not mounted here, as
``lockstep pull`` fetches them: every chunk's CRC-32 and the whole file's
are checked, and a broken or damaged transfer resumes from the last
verified byte."""

import os
import time
import warnings
import zlib

import grpc

from lockstep import errors
from lockstep._generated import jobs_pb2

#: Attempts per file before a transfer gives up (CheckpointError).
MAX_ATTEMPTS = 5

# What no retry mends: the request itself is wrong or refused.
_FINAL = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
          grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
          grpc.StatusCode.UNIMPLEMENTED)


class TransferWarning(UserWarning):
    """A file transfer was resumed or started over (a broken stream, a
    chunk or file that failed its CRC-32); the message says which and
    why. The file that is returned has passed every check."""


def _file_error(client, e, what):
    """The exception for a failed file call: the job's own errors as
    usual, a missing or refused file as CheckpointError."""
    code = e.code() if hasattr(e, "code") else None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return errors.CheckpointError(
            f"{what} {client.address}: this coordinator does not serve "
            "files (an older version): read them from its storage")
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.DATA_LOSS):
        return errors.CheckpointError(f"{what} {client.address}: "
                                      f"{e.details()}", code.name)
    return client._error(e, what)


def list_files(client, job, prefix=""):
    """[(path, size)] of the job's folder (under ``prefix``), by path."""
    try:
        r = client._stub.ListJobFiles(
            jobs_pb2.ListJobFilesRequest(job=job, prefix=prefix),
            timeout=client.timeout, metadata=client._metadata)
    except grpc.RpcError as e:
        raise _file_error(client, e, "list files from") from None
    return [(f.path, f.size) for f in r.files]


class _Memory:
    def __init__(self):
        self.data = bytearray()
        self.crc = 0

    @property
    def size(self):
        return len(self.data)

    def append(self, data):
        self.data += data
        self.crc = zlib.crc32(data, self.crc)

    def reset(self):
        self.data = bytearray()
        self.crc = 0


class _Disk:
    """``path``.partial, continued if an earlier pull left one; renamed to
    ``path`` by commit()."""

    def __init__(self, path):
        self.path = path
        self.partial = path + ".partial"
        self.crc = 0
        try:
            self.f = open(self.partial, "r+b")
        except FileNotFoundError:
            self.f = open(self.partial, "w+b")
        while True:
            block = self.f.read(1 << 20)
            if not block:
                break
            self.crc = zlib.crc32(block, self.crc)
        self.size = self.f.tell()

    def append(self, data):
        self.f.seek(self.size)
        self.f.write(data)
        self.size += len(data)
        self.crc = zlib.crc32(data, self.crc)

    def reset(self):
        self.f.seek(0)
        self.f.truncate()
        self.size = 0
        self.crc = 0

    def commit(self):
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.replace(self.partial, self.path)

    def close(self):
        if not self.f.closed:
            self.f.close()


def _fetch_into(client, job, path, size, sink):
    expect_size = 0
    problem = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if attempt > 1:
            time.sleep(0.2 * (attempt - 1))
        start_over = False
        problem = None
        # Each attempt may take the call timeout plus a second per MiB.
        left = max(0, size - sink.size) / float(1 << 20)
        call = client._stub.ReadJobFile(
            jobs_pb2.ReadJobFileRequest(job=job, path=path, offset=sink.size,
                                        expect_size=expect_size),
            timeout=client.timeout + left, metadata=client._metadata)
        try:
            for chunk in call:
                if chunk.offset != sink.size:
                    problem = (f"a chunk came for byte {chunk.offset}, "
                               f"expected {sink.size}")
                    break
                if zlib.crc32(chunk.data) != chunk.crc32:
                    problem = (f"the chunk at byte {chunk.offset} failed its "
                               "CRC-32 (damaged on the way)")
                    break
                sink.append(chunk.data)
                expect_size = chunk.file_size
                if chunk.last:
                    if sink.size == chunk.file_size and \
                            sink.crc == chunk.file_crc32:
                        return
                    problem = (f"the whole file ({sink.size} bytes) failed "
                               "its CRC-32")
                    start_over = True
                    break
            else:
                problem = "the transfer ended before the file's last chunk"
        except grpc.RpcError as e:
            code = e.code()
            if code in _FINAL:
                raise _file_error(client, e, "read a file from") from None
            problem = e.details() or code.name
            if code == grpc.StatusCode.FAILED_PRECONDITION:
                start_over = True  # the file changed meanwhile
        finally:
            call.cancel()
        if start_over:
            sink.reset()
            expect_size = 0
        if attempt < MAX_ATTEMPTS:
            again = ("reading it again from the start" if start_over
                     else f"reading again from byte {sink.size}")
            warnings.warn(f"{path}: {problem}; {again} (attempt "
                          f"{attempt + 1} of {MAX_ATTEMPTS})",
                          TransferWarning, stacklevel=4)
    raise errors.CheckpointError(
        f"{path}: not fetched from {client.address} after {MAX_ATTEMPTS} "
        f"attempts: {problem}", "DATA_LOSS")


def fetch(client, job, path, size=0):
    """The bytes of one of the job's files (``size`` as listed, for the
    deadline), every check passed."""
    sink = _Memory()
    _fetch_into(client, job, path, size, sink)
    return bytes(sink.data)


def fetch_to(client, job, path, size, target):
    """Writes one of the job's files to ``target``; a file already there is
    checked (its CRC-32 against the coordinator's) instead of fetched
    again, and a ``target``.partial an earlier attempt left is continued."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    if os.path.exists(target) and not os.path.exists(target + ".partial"):
        os.replace(target, target + ".partial")
    sink = _Disk(target)
    try:
        _fetch_into(client, job, path, size, sink)
        sink.commit()
    finally:
        sink.close()
