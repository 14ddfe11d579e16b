"""What ``Job.wait(progress=True)`` shows: a tqdm.auto bar when tqdm is
installed (a widget in a notebook, a line in a terminal), else a text line
at most once a second; the job's log lines either way."""

import time

from lockstep import types


def _eta(seconds):
    if seconds is None or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 \
        else f"{seconds}s"


def _epoch(s):
    """"2/3", or "" for a job given steps rather than epochs."""
    return f"{s.epoch}/{s.epochs}" if s.epochs > 0 else ""


def describe(s):
    """One progress line for a JobStatus (like ``lockstep watch``)."""
    epoch = f" epoch {_epoch(s)}" if _epoch(s) else ""
    return (f"[{s.name}]{epoch} step {s.step}/"
            f"{s.total_steps} loss {s.loss:.4f} acc {s.accuracy:.4f} "
            f"{s.samples_per_sec:.0f} samples/s ETA {_eta(s.eta_seconds)}  "
            f"workers {s.workers_alive}/{s.workers_needed}")


class ProgressView:
    def __init__(self, name, file):
        self.name = name
        self.file = file
        self.bar = None
        self.last_print = 0.0
        try:
            from tqdm.auto import tqdm
            self._tqdm = tqdm
        except ImportError:
            self._tqdm = None

    def _say(self, text):
        if self.bar is not None:
            self.bar.write(text, file=self.file)
        else:
            print(text, file=self.file, flush=True)

    def show(self, event):
        s = event.status
        if isinstance(event, types.LogLine):
            # The closing line ("SUCCEEDED: ...") is said once, by Finished.
            if not (s.done and event.text == s.state
                    + (f": {s.message}" if s.message else "")):
                self._say(event.text)
        elif isinstance(event, types.Reconnecting):
            self._say(f"{event.error}; reconnecting for up to "
                      f"{event.give_up_in:.0f} s")
        elif isinstance(event, types.StateChanged) and not s.done:
            self._say(f"[{s.name}] {s.state}"
                      + (f": {s.message}" if s.message else ""))
        elif isinstance(event, types.Progress):
            if self._tqdm is not None:
                if self.bar is None:
                    self.bar = self._tqdm(total=s.total_steps, unit="step",
                                          desc=self.name, file=self.file)
                self.bar.total = s.total_steps
                self.bar.n = s.step
                figures = dict(loss=f"{s.loss:.4f}", acc=f"{s.accuracy:.4f}",
                               samples_s=f"{s.samples_per_sec:.0f}")
                if _epoch(s):
                    figures = dict(epoch=_epoch(s), **figures)
                self.bar.set_postfix(refresh=False, **figures)
                self.bar.refresh()
            elif (time.monotonic() - self.last_print >= 1.0
                  or s.step == s.total_steps):
                self._say(describe(s))
                self.last_print = time.monotonic()
        elif isinstance(event, types.Finished):
            self.close()
            self._say(f"job {s.name} {s.state}"
                      + (f": {s.message}" if s.message else ""))

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
