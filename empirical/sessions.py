"""How long a sweep took, and on how loaded a machine: one record per ``run_sweep`` call.

Setting
    A sweep folder is filled by one or more calls of :func:`~initmem.empirical.sweep.run_sweep`
    (a sweep that died and was run again, a second driver). Each call appends one line to
    ``DIR/sessions.jsonl`` when it ends (also when it is interrupted by an exception or Ctrl-C). A
    call that finds every run finished trains nothing and records nothing, so running a finished
    sweep's command again leaves the record, and the document made from it, as it was.

Conventions
    ``wall_s``: seconds of wall-clock time from the call's start (before the folder is prepared
    and the predictions written) to its end. ``load_mean`` / ``load_max``: the machine's 1-minute
    load average (``os.getloadavg``), sampled at the start, every ``interval_s`` seconds and at the
    end; ``cpus``: ``os.cpu_count()``. ``runs_trained``: runs the call finished (done, diverged or
    failed); ``runs_before``: runs already finished when it started. Times in UTC.

A study document states these numbers from the folder (:func:`sessions_sentence`), so the same
folder always gives the same sentence: the document is reproducible, the time is the measured one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

SESSIONS_FILE = "sessions.jsonl"


@dataclass
class Session:
    """One ``run_sweep`` call's record (fields as in the module docstring)."""

    started: str
    wall_s: float
    runs_before: int
    runs_trained: int
    load_mean: float
    load_max: float
    load_samples: int
    cpus: int
    ended_by: str = "finished"


@dataclass
class SessionClock:
    """Measures one sweep call: ``start()``, ``trained()`` per finished run, ``stop(sweep_dir)``.

    A daemon thread samples the load average every ``interval_s`` seconds; ``stop`` appends the
    :class:`Session` to ``sweep_dir / sessions.jsonl`` and returns it."""

    interval_s: float = 30.0
    runs_before: int = 0
    _loads: list[float] = field(default_factory=list)
    _trained: int = 0
    _start: float = 0.0
    _started: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> SessionClock:
        self._start = time.monotonic()
        self._started = datetime.now(UTC).isoformat(timespec="seconds")
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def trained(self, n: int = 1) -> None:
        self._trained += n

    def stop(self, sweep_dir: str | Path, ended_by: str = "finished") -> Session:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self._sample()
        session = Session(
            started=self._started,
            wall_s=round(time.monotonic() - self._start, 1),
            runs_before=self.runs_before,
            runs_trained=self._trained,
            load_mean=round(sum(self._loads) / len(self._loads), 2),
            load_max=round(max(self._loads), 2),
            load_samples=len(self._loads),
            cpus=os.cpu_count() or 1,
            ended_by=ended_by,
        )
        path = Path(sweep_dir) / SESSIONS_FILE
        with path.open("a") as f:
            f.write(json.dumps(asdict(session)) + "\n")
        return session

    def _sample(self) -> None:
        self._loads.append(os.getloadavg()[0])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()


def read_sessions(sweep_dir: str | Path) -> list[Session]:
    """The folder's session records, oldest first ([] when the file is missing; a line that does
    not parse is skipped: a sweep killed while writing it)."""
    path = Path(sweep_dir) / SESSIONS_FILE
    if not path.exists():
        return []
    sessions = []
    for line in path.read_text().splitlines():
        try:
            sessions.append(Session(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return sessions


def sessions_sentence(sessions: list[Session]) -> str:
    """What the records say: the sweep's wall time summed over its calls, the runs they trained and
    the load average (mean over samples, weighted by each call's count, and the highest), or ""
    when the folder has no record (filled before records were kept)."""
    if not sessions:
        return ""
    wall = covered_seconds(sessions)
    trained = sum(s.runs_trained for s in sessions)
    samples = sum(s.load_samples for s in sessions)
    mean = sum(s.load_mean * s.load_samples for s in sessions) / samples
    calls = "one call" if len(sessions) == 1 else f"{len(sessions)} calls"
    empty = " from an empty folder" if sessions[0].runs_before == 0 else ""
    interrupted = sum(s.ended_by != "finished" for s in sessions)
    text = (
        f"The sweep (`initmem sweep run`, predictions included) took {wall / 60:.1f} minutes of wall "
        f"time{empty} in {calls} ({trained} runs trained; first started {sessions[0].started}), "
        f"at a 1-minute load average of {mean:.1f} on average and {max(s.load_max for s in sessions):.1f} "
        f"at most, on {sessions[-1].cpus} cores."
    )
    if interrupted:
        text += f" {interrupted} of the calls ended early (interrupted or failed) and were resumed."
    if wall < sum(s.wall_s for s in sessions) - 0.5:
        text += " Some calls ran at the same time (the time counts their overlap once)."
    return text


def covered_seconds(sessions: list[Session]) -> float:
    """Seconds of wall time the calls cover, their overlaps counted once (two drivers on one folder
    run at the same time); the plain sum where a start time cannot be read."""
    try:
        spans = sorted(
            (start := datetime.fromisoformat(s.started).timestamp(), start + s.wall_s)
            for s in sessions
        )
    except (TypeError, ValueError):
        return sum(s.wall_s for s in sessions)
    total, end = 0.0, -float("inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


__all__ = [
    "SESSIONS_FILE",
    "Session",
    "SessionClock",
    "covered_seconds",
    "read_sessions",
    "sessions_sentence",
]
