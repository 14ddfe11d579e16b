"""Plain Python views of the coordinator's messages, and the events that
``Job.events()`` yields."""

import dataclasses
from typing import Dict, List, Optional

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclasses.dataclass
class WorkerStatus:
    """One registered worker daemon as the coordinator sees it."""
    worker_id: str
    name: str
    host: str
    pid: int
    address: str
    replicas: int
    job: str            # "" when idle
    rank: int           # -1 when idle
    alive: bool
    heartbeat_age_seconds: float
    step: int
    shard: str
    devices: List[str]
    waiting: str        # what its ring waits on, when it has waited > 1 s
    # Recently (half-life 10 s; 0 unknown): transit of the ring messages
    # from its previous rank per MiB, and its own work per step.
    ring_ms_per_mib: float = 0.0
    compute_ms_per_step: float = 0.0


@dataclasses.dataclass
class Straggler:
    """The rank that holds a running job back (``lockstep status``'s
    ``straggler:`` line)."""
    rank: int
    worker_id: str
    cause: str          # "link" or "compute"
    text: str


@dataclasses.dataclass
class MembershipChange:
    """One generation's world: an elastic job's result is a pure function
    of this history (``result.json``'s ``membership``)."""
    generation: int
    from_step: int
    workers: int
    replicas: int       # workers x replicas_per_worker
    why: str            # "start", or the loss or growth that changed it
    started_unix_seconds: float = 0.0  # when the generation started


@dataclasses.dataclass
class JobStatus:
    """A job's state and progress (``lockstep status JOB``)."""
    name: str
    state: str          # PENDING, RUNNING, RECOVERING, SUCCEEDED, FAILED, CANCELLED
    message: str        # why PENDING / RECOVERING / FAILED / CANCELLED
    generation: int
    step: int
    total_steps: int
    epoch: int
    epochs: int
    loss: float
    accuracy: float
    samples_per_sec: float
    eta_seconds: float  # < 0: unknown
    learning_rate: float
    workers_needed: int
    workers_alive: int
    workers: List[WorkerStatus]
    test_loss: float
    test_accuracy: float
    fingerprint: str
    result_path: str
    checkpoint_path: str   # the last committed checkpoint's folder
    storage_path: str      # the job's folder on the coordinator's storage
    submitted_unix_seconds: float
    wall_seconds: float
    restarts: int
    max_restarts: int
    membership: List[MembershipChange]  # one per generation so far
    straggler: Optional[Straggler] = None  # while RUNNING with one
    # The coordinator's storage identity: a client that reads the same id
    # at storage_path/../../coordinator/storage_id sees its files.
    storage_id: str = ""
    # While RECOVERING: "failure", "leave" (planned) or "grow"; while
    # PENDING or RECOVERING: what the job waits for and how long at most
    # (< 0: no bound). A running job's last speed and ETA are not shown
    # while it waits (samples_per_sec 0, eta_seconds -1).
    recovery: str = ""
    waiting_for: str = ""
    waiting_seconds_left: float = -1.0
    # Requests naming another generation of the job, refused, by kind
    # ("progress", "checkpoint_slice", "finish", "nccl_id", "samples").
    fenced: Dict[str, int] = dataclasses.field(default_factory=dict)
    # cluster.shard ("optimizer", or "" with the state whole on every
    # worker) and the most optimizer state bytes a worker reported holding;
    # sharded, whether each part is also kept by the next worker
    # (cluster.copies).
    shard: str = ""
    optimizer_state_bytes: int = 0
    shard_copies: bool = False
    # precision "fp16": rank 0's loss scale (0.0: none) and the steps
    # skipped on an overflow so far.
    loss_scale: float = 0.0
    skipped_steps: int = 0

    @property
    def done(self):
        """True once the job is SUCCEEDED, FAILED or CANCELLED."""
        return self.state in TERMINAL_STATES


def _fields_from(cls, msg, **overrides):
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in overrides:
            values[f.name] = overrides[f.name]
        else:
            v = getattr(msg, f.name)
            values[f.name] = list(v) if f.name == "devices" else v
    return cls(**values)


def worker_from_proto(msg):
    return _fields_from(WorkerStatus, msg)


def status_from_proto(msg):
    from lockstep._generated import jobs_pb2
    return _fields_from(
        JobStatus, msg, state=jobs_pb2.JobState.Name(msg.state),
        workers=[worker_from_proto(w) for w in msg.workers],
        membership=[_fields_from(MembershipChange, m)
                    for m in msg.membership],
        straggler=(_fields_from(Straggler, msg.straggler)
                   if msg.HasField("straggler") else None),
        fenced=dict(msg.fenced))


@dataclasses.dataclass
class Event:
    """Base of what ``Job.events()`` yields; ``status`` is the snapshot the
    event came with."""
    status: JobStatus


@dataclasses.dataclass
class StateChanged(Event):
    """The job moved to ``state`` (``message`` says why, if anything)."""
    state: str
    message: str


@dataclasses.dataclass
class Progress(Event):
    """A new step was reported: ``status`` has loss, accuracy, samples/s
    and ETA."""
    step: int
    total_steps: int
    epoch: int
    loss: float


@dataclasses.dataclass
class LogLine(Event):
    """A line of the job's log (epoch results, checkpoints, failures)."""
    text: str


@dataclasses.dataclass
class Reconnecting(Event):
    """The coordinator could not be reached; the watch retries until
    ``give_up_in`` seconds have passed (a restarted coordinator resumes
    from its journal and the watch goes on where it left off)."""
    error: str
    give_up_in: float


@dataclasses.dataclass
class Finished(Event):
    """The job ended; ``state`` is SUCCEEDED, FAILED or CANCELLED."""
    state: str
    message: str

