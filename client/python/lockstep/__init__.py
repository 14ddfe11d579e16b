"""lockstep: submit, watch and read the results of synchronous
data-parallel training jobs on a lockstep cluster, from Python.

    import lockstep
    client = lockstep.Client("127.0.0.1:7070")
    job = client.submit({"name": "mlp", ...})   # or a path to a job file
    job.wait()                                  # progress; raises on failure
    job.result()["test_accuracy"]
    job.checkpoint().to_torch(torch_model)

A torch model of your own: lockstep.export(module, example,
"model.onnx"), then "model": {"onnx": "model.onnx"} in the job.

See help(lockstep.Client) and help(lockstep.Job).
"""

from lockstep.client import Checkpoint, Client, Job
from lockstep.client import normalize_address, normalize_addresses
from lockstep.errors import (CheckpointError, InvalidJob, JobCancelled,
                             JobExists, JobFailed, JobNotFinished, JobNotFound,
                             LockstepError, Unauthenticated, Unavailable,
                             WaitTimeout)
from lockstep.torch_io import WeightsMismatch, export, to_torch
from lockstep._transfer import TransferWarning
from lockstep.types import (Event, Finished, JobStatus, LogLine,
                            MembershipChange, Progress, Reconnecting,
                            StateChanged, Straggler, WorkerStatus)
from lockstep._files import read_safetensors

__version__ = "0.1.0"

__all__ = [
    "Checkpoint", "CheckpointError", "Client", "Event", "Finished",
    "InvalidJob", "Job", "JobCancelled", "JobExists", "JobFailed",
    "JobNotFinished", "JobNotFound", "JobStatus", "LockstepError", "LogLine",
    "MembershipChange", "Progress", "Straggler", "normalize_address",
    "normalize_addresses",
    "Reconnecting", "StateChanged", "TransferWarning", "Unauthenticated",
    "Unavailable", "WaitTimeout",
    "WeightsMismatch", "WorkerStatus", "export", "read_safetensors",
    "to_torch",
]
