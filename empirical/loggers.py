"""Logging hooks of a sweep: each run's per-epoch and per-layer metrics for the tools researchers use.

``logger = "tensorboard"`` in a sweep file's ``[sweep]`` table (:data:`LOGGERS`) writes one
TensorBoard event file per run under ``runs/<hash>/tensorboard/``: every scalar key of ``log.jsonl``
(``train_loss``, ``test_acc``, ``weight_norm``, ...) and every per-layer key as
``layers/<parameter>/<key>``, at the evaluation's optimizer step. It is written by the sweep worker
when the run has finished, from the run's own ``log.jsonl`` (the record), so a resumed, packed or
custom-trained run gets the event file an uninterrupted one would; a run whose event file exists is
left alone. TensorBoard is optional (``pip install 'initmem[tensorboard]'``).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from .runfolder import read_log

#: Loggers a sweep may name, and the package each needs.
LOGGERS = {"tensorboard": "tensorboard"}
#: The folder of a run's event file.
EVENTS_DIR = "tensorboard"


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


def write_events(run_dir: str | Path, logger: str = "tensorboard") -> Path | None:
    """Write the run's event file from its ``log.jsonl`` (module docstring); None when it exists."""
    if check_logger(logger) is not None:
        raise ValueError(check_logger(logger))
    if event_files(run_dir):
        return None
    from torch.utils.tensorboard import SummaryWriter  # optional package, loaded only to log

    writer = SummaryWriter(log_dir=str(Path(run_dir) / EVENTS_DIR))
    try:
        for record in read_log(run_dir):
            step = int(record["step"])
            for key, value in record.items():
                if key not in ("epoch", "step") and _number(value):
                    writer.add_scalar(key, float(value), step)
            for layer, fields in (record.get("layers") or {}).items():
                for key, value in fields.items():
                    if _number(value):
                        writer.add_scalar(f"layers/{layer}/{key}", float(value), step)
    finally:
        writer.close()
    return event_files(run_dir)[-1]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


__all__ = ["EVENTS_DIR", "LOGGERS", "check_logger", "event_files", "write_events"]
