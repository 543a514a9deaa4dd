"""Logging hooks of a sweep: each run's per-epoch and per-layer metrics for the tools researchers use.

``logger = "tensorboard"`` in a sweep file's ``[sweep]`` table (:data:`LOGGERS`) writes one
TensorBoard event file per run under ``runs/<hash>/tensorboard/``: every scalar key of ``log.jsonl``
(``train_loss``, ``test_acc``, ``weight_norm``, ...) and every per-layer key as
``layers/<parameter>/<key>``, at the evaluation's optimizer step. It is written from the run's own
``log.jsonl`` (the record) by :class:`EventLog`: while the run trains, after each evaluation (the
trainer's ``callback``), so ``tensorboard --logdir DIR`` shows a sweep as it runs, and once more when
it has finished (a packed or custom-trained run gets its events then). ``tensorboard/written_step``
holds the last step written, so a resumed run or a rerun adds only the records after it (no step
twice). TensorBoard is optional (``pip install 'initmem[tensorboard]'``).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

from .runfolder import read_log, write_atomic

#: Loggers a sweep may name, and the package each needs.
LOGGERS = {"tensorboard": "tensorboard"}
#: The folder of a run's event file.
EVENTS_DIR = "tensorboard"
#: The file (in :data:`EVENTS_DIR`) holding the last optimizer step whose record was written.
WRITTEN_STEP = "written_step"


def check_logger(name) -> str | None:
    """Why ``name`` cannot log here (unknown, or its package missing), or None if it can (None: no
    logger asked)."""
    if name is None:
        return None
    if name not in LOGGERS:
        return f"logger must be one of {list(LOGGERS)} (got {name!r})"
    if importlib.util.find_spec(LOGGERS[name]) is None:
        return f"logger {name} needs {LOGGERS[name]}: pip install 'initmem[{LOGGERS[name]}]'"
    return None


def event_files(run_dir: str | Path) -> list[Path]:
    """The TensorBoard event files of a run folder."""
    return sorted((Path(run_dir) / EVENTS_DIR).glob("events.out.tfevents.*"))


class EventLog:
    """A run's TensorBoard events, written from its ``log.jsonl`` as it grows: each :meth:`update`
    writes the records logged after the last step written (``tensorboard/written_step``) and
    flushes, so the events are on disk at every evaluation. Use as the trainer's ``callback``
    (``train(config, callback=EventLog(run_dir))``) and :meth:`close` at the end."""

    def __init__(self, run_dir: str | Path, logger: str = "tensorboard"):
        if (problem := check_logger(logger)) is not None:
            raise ValueError(problem)
        self.dir = Path(run_dir) / EVENTS_DIR
        self.writer: Any = None  # opened at the first record to write: no empty event file

    def __call__(self, record: dict[str, Any] | None = None) -> None:
        self.update()

    def written_step(self) -> int:
        """The last step written (-1: none, or no event file left; an event file without the record,
        which an earlier version wrote once the run had finished, holds every step)."""
        written = bool(event_files(self.dir.parent))
        try:
            step = int((self.dir / WRITTEN_STEP).read_text())
        except (OSError, ValueError):
            return sys.maxsize if written else -1
        return step if written else -1  # the event files were deleted: write them again

    def update(self) -> int:
        """Write the records after :meth:`written_step`; return how many."""
        last = self.written_step()
        records = [r for r in read_log(self.dir.parent) if int(r["step"]) > last]
        if not records:
            return 0
        if self.writer is None:
            # deferred: an optional package, loaded only to log
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(self.dir))
        for record in records:
            step = int(record["step"])
            for key, value in record.items():
                if key not in ("epoch", "step") and _number(value):
                    self.writer.add_scalar(key, float(value), step)
            for layer, fields in (record.get("layers") or {}).items():
                for key, value in fields.items():
                    if _number(value):
                        self.writer.add_scalar(f"layers/{layer}/{key}", float(value), step)
        self.writer.flush()
        write_atomic(self.dir / WRITTEN_STEP, str(int(records[-1]["step"])))
        return len(records)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def write_events(run_dir: str | Path, logger: str = "tensorboard") -> Path | None:
    """Write the run's events not yet written (module docstring); the event file written to, or None
    when every record was written before."""
    events = EventLog(run_dir, logger)
    try:
        written = events.update()
    finally:
        events.close()
    return event_files(run_dir)[-1] if written else None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


__all__ = [
    "EVENTS_DIR",
    "EventLog",
    "LOGGERS",
    "WRITTEN_STEP",
    "check_logger",
    "event_files",
    "write_events",
]
