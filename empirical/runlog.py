"""The run folder: what one training run writes, and how to read it back (docs/run-format.md).

Every file that a reader may see half-written is written to a temporary name first and then moved into
place with ``os.replace`` (atomic on POSIX): ``result.json``, ``last.pt``, ``best.pt``, the parquet
tables, ``predictions.npz``. ``log.jsonl`` is appended one line per evaluation; on resume it is cut back
to the checkpoint's epoch.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .config import RunConfig

#: Files a run writes (a folder holding any of them already holds a run).
RUN_FILES = (
    "config.json",
    "log.jsonl",
    "metrics.parquet",
    "layers.parquet",
    "predictions.npz",
    "best.pt",
    "last.pt",
    "result.json",
)


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run (also ``result.json``). Accuracies are fractions in [0, 1]; epochs count
    from 1 (epoch 0 is the evaluation at init); ``diverged_step`` is the 0-based optimizer step whose loss
    was first non-finite, or at which the weight norm was found above ``max_weight_norm``."""

    status: str
    best_val_acc: float
    test_acc: float
    best_epoch: int
    final_train_acc: float
    final_test_acc: float
    epochs_run: int
    steps_run: int
    diverged_step: int | None
    reason: str | None
    wall_time: float
    hash: str
    run_dir: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def summary(self) -> str:
        """Two human-readable lines."""
        head = f"{self.status} after {self.epochs_run} epochs ({self.steps_run} steps, {self.wall_time:.1f} s)"
        if self.status == "diverged":
            head += f": {self.reason}"
        return (
            f"{head}\nbest epoch {self.best_epoch}: val acc {self.best_val_acc:.4f}, "
            f"test acc {self.test_acc:.4f}; final train acc {self.final_train_acc:.4f}, "
            f"final test acc {self.final_test_acc:.4f}; run dir {self.run_dir}"
        )


def load_result(run_dir: str | Path) -> RunResult:
    """The :class:`RunResult` of a finished run (FileNotFoundError if ``result.json`` is absent)."""
    with (Path(run_dir) / "result.json").open() as fh:
        return RunResult.from_dict(json.load(fh))


def read_log(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``log.jsonl`` (NaN where a value is undefined)."""
    path = Path(run_dir) / "log.jsonl"
    if not path.is_file():
        return []
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def metrics_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per evaluation: the scalar keys of the log records."""
    return pd.DataFrame([{k: v for k, v in r.items() if k != "layers"} for r in records])


def layers_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (evaluation, layer): ``epoch``, ``step``, ``layer`` and the per-layer keys."""
    rows = [
        {"epoch": r["epoch"], "step": r["step"], "layer": name, **values}
        for r in records
        for name, values in r["layers"].items()
    ]
    return pd.DataFrame(rows)


class RunFiles:
    """Writes one run folder: :meth:`start` (fresh) or :meth:`reopen` (resume), :meth:`append` one
    evaluation record (and its test predictions), :meth:`write_tables`, :meth:`write_predictions`,
    :meth:`save_torch`, and :meth:`write_result` last.

    Test predictions are appended to a raw int16 file (``test_pred.i16``, one row per evaluation) while
    the run goes and packed into ``predictions.npz`` by :meth:`write_predictions`, so a long run never
    rewrites its whole prediction history.
    """

    RAW_PREDICTIONS = "test_pred.i16"

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.records: list[dict[str, Any]] = []
        self._metric_columns: dict[str, list] = {}
        self._layer_columns: dict[str, list] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    def holds_run(self) -> bool:
        return any(self.path(name).exists() for name in (*RUN_FILES, self.RAW_PREDICTIONS))

    def clear(self) -> None:
        for name in (*RUN_FILES, self.RAW_PREDICTIONS):
            self.path(name).unlink(missing_ok=True)

    def recorded_hash(self) -> str | None:
        """The hash in ``config.json`` (None if there is none)."""
        path = self.path("config.json")
        if not path.is_file():
            return None
        return json.loads(path.read_text())["hash"]

    # ------------------------------------------------------------------ starting
    def start(self, config: RunConfig, data_description: dict[str, Any]) -> None:
        """Create the folder, write ``config.json``, drop any log or predictions of an older attempt."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clear()
        payload = {
            "hash": config.hash,
            "config": config.to_dict(),
            "initmem_version": _version(),
            "data": data_description,
        }
        _write_text_atomic(self.path("config.json"), json.dumps(payload, indent=2) + "\n")
        self._set_records([])

    def reopen(self, last_epoch: int, n_test: int) -> list[dict[str, Any]]:
        """Resume: keep the log records (and prediction rows) up to ``last_epoch``; those after it
        belong to work lost in a kill. Returns the kept records."""
        self._set_records([r for r in read_log(self.dir) if r["epoch"] <= last_epoch])
        _write_text_atomic(self.path("log.jsonl"), "".join(_json_line(r) for r in self.records))
        raw = self.path(self.RAW_PREDICTIONS)
        if raw.is_file():
            keep = len(self.records) * n_test * 2
            with raw.open("r+b") as fh:
                fh.truncate(min(keep, raw.stat().st_size))
        return self.records

    # ------------------------------------------------------------------ during the run
    def append(self, record: dict[str, Any], test_pred: np.ndarray | None = None) -> None:
        """Append one evaluation to ``log.jsonl`` (and its test predictions to the raw file)."""
        self._add_to_tables(record)
        if test_pred is not None:
            with self.path(self.RAW_PREDICTIONS).open("ab") as fh:
                fh.write(np.ascontiguousarray(test_pred, dtype="<i2").tobytes())
        with self.path("log.jsonl").open("a") as fh:
            fh.write(_json_line(record))

    def write_tables(self) -> None:
        """Rewrite ``metrics.parquet`` and ``layers.parquet`` from the records so far."""
        _write_parquet_atomic(self._metric_columns, self.path("metrics.parquet"))
        _write_parquet_atomic(self._layer_columns, self.path("layers.parquet"))

    def _set_records(self, records: list[dict[str, Any]]) -> None:
        self.records, self._metric_columns, self._layer_columns = [], {}, {}
        for record in records:
            self._add_to_tables(record)

    def _add_to_tables(self, record: dict[str, Any]) -> None:
        """Keep the tables as growing columns, so rewriting them costs one DataFrame build."""
        self.records.append(record)
        for key, value in record.items():
            if key != "layers":
                self._metric_columns.setdefault(key, []).append(value)
        for name, values in record["layers"].items():
            row = {"epoch": record["epoch"], "step": record["step"], "layer": name, **values}
            for key, value in row.items():
                self._layer_columns.setdefault(key, []).append(value)

    def write_predictions(self, test_labels: np.ndarray, best_test_pred: np.ndarray) -> None:
        """Pack the prediction rows so far into ``predictions.npz`` (see docs/run-format.md)."""
        n_test = len(test_labels)
        raw = self.path(self.RAW_PREDICTIONS)
        rows = np.fromfile(raw, dtype="<i2") if raw.is_file() else np.zeros(0, dtype="<i2")
        test_pred = rows.reshape(-1, n_test)
        epochs = [r["epoch"] for r in self.records][: len(test_pred)]
        tmp = self.path("predictions.tmp.npz")
        np.savez(
            tmp,
            epochs=np.asarray(epochs, dtype=np.int64),
            test_pred=test_pred.astype(np.int16),
            test_labels=np.asarray(test_labels).astype(np.int16),
            best_test_pred=np.asarray(best_test_pred).astype(np.int16),
        )
        os.replace(tmp, self.path("predictions.npz"))

    def save_torch(self, name: str, obj: Any) -> None:
        """``torch.save`` to a temporary name, then move into place."""
        tmp = self.path(name + ".tmp")
        torch.save(obj, tmp)
        os.replace(tmp, self.path(name))

    def load_torch(self, name: str) -> Any:
        return torch.load(self.path(name), map_location="cpu", weights_only=False)

    def write_result(self, result: RunResult) -> None:
        """Write ``result.json`` atomically: from now on the run counts as finished."""
        _write_text_atomic(self.path("result.json"), json.dumps(result.to_dict(), indent=2) + "\n")


def read_predictions(run_dir: str | Path) -> dict[str, np.ndarray]:
    """The arrays of ``predictions.npz``: ``epochs``, ``test_pred``, ``test_labels``, ``best_test_pred``."""
    with np.load(Path(run_dir) / "predictions.npz") as npz:
        return {k: npz[k] for k in npz.files}


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_parquet_atomic(columns: dict[str, list], path: Path) -> None:
    """Write named columns as a parquet table with pyarrow (no pandas round trip: faster per checkpoint);
    ``pandas.read_parquet`` reads it back as a frame with a RangeIndex."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.table(columns), tmp)
    os.replace(tmp, path)


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """The installed initmem version (looked up once per process: the lookup scans the metadata)."""
    try:
        from importlib.metadata import version

        return version("initmem")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


__all__ = [
    "RUN_FILES",
    "RunFiles",
    "RunResult",
    "layers_table",
    "load_result",
    "metrics_table",
    "read_log",
    "read_predictions",
]
