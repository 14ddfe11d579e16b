"""Exceptions raised by the lockstep client: one class per kind of failure.

Every error carries the server's (or the local validator's) message
unchanged; a ``grpc.RpcError`` never escapes the client.
"""

import re

import grpc


class LockstepError(Exception):
    """Base class of every lockstep client error."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        #: The gRPC status code name ("NOT_FOUND", ...) when a call failed.
        self.code = code


class InvalidJob(LockstepError):
    """The job was refused. ``field`` names the offending field
    ("data.test_path", "optimizer.learning_rate"), or is None when the
    message names none (a file that cannot be read, JSON that does not
    parse)."""

    def __init__(self, message, code=None):
        super().__init__(message, code)
        m = re.match(r"([A-Za-z_][\w]*(?:\[\d+\])?(?:\.[\w]+(?:\[\d+\])?)*): ",
                     message)
        self.field = m.group(1) if m else None


class JobNotFound(LockstepError):
    """No job of that name on the coordinator."""


class JobExists(LockstepError):
    """A job of that name is still PENDING or RUNNING."""


class Unauthenticated(LockstepError):
    """The coordinator refused the token or certificate (or none was sent)."""


class Unavailable(LockstepError):
    """The coordinator could not be reached (or did not answer in time)."""


class JobFailed(LockstepError):
    """The job ended FAILED; ``status`` is its final JobStatus."""

    def __init__(self, status):
        super().__init__(f"job {status.name} FAILED: {status.message}")
        self.status = status


class JobCancelled(LockstepError):
    """The job ended CANCELLED; ``status`` is its final JobStatus."""

    def __init__(self, status):
        text = f"job {status.name} CANCELLED"
        if status.message:
            text += f": {status.message}"
        super().__init__(text)
        self.status = status


class JobNotFinished(LockstepError):
    """The job has not ended yet, so it has no result (``wait()`` waits)."""


class WaitTimeout(LockstepError, TimeoutError):
    """``events(timeout=)`` or ``wait(timeout=)`` ran out before the job
    ended (a ``TimeoutError`` too)."""


class CheckpointError(LockstepError):
    """A checkpoint, result or summary file is missing or damaged (the
    message names the file and what is wrong)."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidJob,
    grpc.StatusCode.NOT_FOUND: JobNotFound,
    grpc.StatusCode.ALREADY_EXISTS: JobExists,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: Unauthenticated,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
}


def from_rpc_error(error, what):
    """The client exception for a failed call; ``what`` says which call
    and where ("submit to 127.0.0.1:7070")."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    cls = _BY_CODE.get(code, LockstepError)
    name = code.name if code is not None else None
    # A refused job's message is the validator's own text ("data.x: ..."),
    # so that InvalidJob.field can name the field.
    if cls is InvalidJob:
        return InvalidJob(details or "", name)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        # The CLI's words (rpc/rpc_util.cc): a gRPC server without the
        # service, such as a worker's collective port.
        details = (f"the server there does not serve this call "
                   f"(UNIMPLEMENTED{': ' + details if details else ''}): "
                   "another service listens at that address (another "
                   "lockstep daemon, or another program), or another "
                   "lockstep version")
    elif not details and name is not None:
        details = f"{name} with no message"
    return cls(f"{what}: {details}" if details else what, name)
