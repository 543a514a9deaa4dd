"""The run folder ``runs/<hash>/``: every file one run leaves, written and read here and nowhere else.

Files (docs/run-format.md has their contents)::

    config.json  log.jsonl  metrics.parquet  layers.parquet     the trainer's, through RunFiles
    predictions.npz  test_pred.i16  best.pt  last.pt
    result.json                                                 written last: the run is finished
    .lock                                                       held while a worker trains the run
    error.txt                                                   the traceback of a failed attempt

Writing. Every file a reader may see half-written goes through :func:`atomic_file`: it is written under
a temporary name beside its place, then moved there with ``os.replace`` (atomic on POSIX), so a reader
sees the old or the new file, never a part. The small records that mark a run's state (``config.json``,
``result.json``, ``error.txt``, a sweep's manifest) are also flushed to disk first (``durable``: a
crashed machine cannot leave them empty); the checkpoints and tables, rewritten at every checkpoint,
are not (an fsync costs about 2 ms per MB here). ``log.jsonl`` is appended one line per evaluation; on
resume it is cut back to the checkpoint's epoch.

Reading: every reader checks what it reads (integrity, shape, and that the file belongs to this run)
and on failure raises :class:`DamagedFileError` naming the file, what is wrong and the fix; nothing is
unpickled (``allow_pickle=False``), nothing falls back in silence. The one allowance is for a run that
was killed: a log line cut short is skipped (``read_log``; not for a finished run). Files replaced
atomically are never seen half-written, so an unreadable table is damage, not a rewrite. The tables
and predictions carry their run's hash (:data:`TABLE_HASH_KEY`, ``run_hash``). :func:`run_damage` is
the check of a finished run that the analyses apply before using its numbers (``load_sweep`` skips a
damaged run with one warning). A result is trusted only when it is complete: ``result.json`` must pass
:func:`result_problem` (a JSON object, a known status, a test accuracy, every RunResult field it holds
of the right type) and hold config.json's hash. The state of a run (:func:`run_state`, docs/run-format.md has the
table of what each command does in each): finished (``completed`` or ``diverged``: a trusted
``result.json``), ``running`` while a process holds its lock, ``damaged`` (a ``result.json`` that
cannot be trusted), ``failed`` when ``error.txt`` exists, ``pending`` otherwise.

Ownership. One process at a time trains a run folder: it holds the folder's lock (:func:`run_lock`,
``fcntl.flock`` on ``.lock``, released by the kernel however the holder dies). A sweep worker takes it
for each run; :func:`hold_run` takes it for a single run and raises :class:`RunBusyError` (naming the
holder) when another process (or thread) has it. The lock is re-entrant within a thread: a trainer
called by a worker that holds the lock holds it too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import itertools
import json
import os
import shlex
import socket
import threading
import time
import warnings
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .config import RunConfig, config_hash
from .plugins import is_plugin
from .provenance import initmem_version, provenance, utc_now

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
#: Test predictions while the run goes (packed into predictions.npz at each checkpoint, then removed).
RAW_PREDICTIONS = "test_pred.i16"
#: The per-run lock of a sweep worker, and the record of a failed attempt.
LOCK_FILE = ".lock"
ERROR_FILE = "error.txt"
#: Run states. Finished runs are ``completed`` or ``diverged`` (a trusted result.json); ``damaged``
#: runs hold a result.json that cannot be trusted (a sweep trains them again).
FINISHED_STATES = ("completed", "diverged")
RUN_STATES = ("completed", "diverged", "damaged", "running", "failed", "pending")
#: RunResult fields and the JSON types each may hold in result.json (None: JSON null).
RESULT_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "best_val_acc": (int, float),
    "test_acc": (int, float),
    "best_epoch": (int,),
    "final_train_acc": (int, float),
    "final_test_acc": (int, float),
    "epochs_run": (int,),
    "steps_run": (int,),
    "diverged_step": (int, type(None)),
    "reason": (str, type(None)),
    "wall_time": (int, float),
    "hash": (str,),
    "run_dir": (str,),
}
#: What to do about a run whose result.json cannot be trusted.
DAMAGED_RESULT_FIX = (
    "`initmem sweep run` trains it again (from its last.pt if it has one), as does "
    "`initmem train --resume`; or remove the file"
)


class DamagedFileError(ValueError):
    """A file of a run or sweep folder is unreadable or incomplete; the message names it and the fix."""

    def __init__(self, path: str | Path, problem: str, fix: str):
        self.path, self.problem, self.fix = Path(path), problem, fix
        super().__init__(f"{path} is damaged ({problem}); {fix}")


class DamagedRunWarning(UserWarning):
    """A run that analysis skips (its result cannot be trusted); one line naming it and why."""


class RunBusyError(BlockingIOError):
    """Another process holds the run folder (it is training the run). ``exit_status`` is what
    ``initmem train`` exits with (3: try again later; distinct from bad input, 2)."""

    exit_status = 3

    def __init__(self, run_dir: str | Path, holder: str):
        self.run_dir, self.holder = Path(run_dir), holder
        super().__init__(
            f"{run_dir} is being trained by another process ({holder}); wait for it to finish or "
            "stop that process, then rerun"
        )


# ====================================================================== the one writer
@contextlib.contextmanager
def atomic_file(path: str | Path, *, durable: bool = False) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through: on leaving the block it replaces ``path`` at once.

    The file is a temporary name beside ``path`` (hidden, per process); when the block ends without an
    exception it is flushed (and fsynced if ``durable``) and moved onto ``path`` with ``os.replace``;
    on an exception it is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | Path, text: str) -> None:
    """Write a text file durably and atomically (readers see the old or the new text, never a part)."""
    with atomic_file(path, durable=True) as fh:
        fh.write(text.encode())


# ====================================================================== the result
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
    def completed(
        cls,
        run_dir: str | Path,
        run_hash: str,
        *,
        test_acc: float,
        epochs_run: int,
        steps_run: int,
        best_val_acc: float,
        best_epoch: int | None = None,
        final_train_acc: float = 1.0,
        final_test_acc: float | None = None,
        wall_time: float = 0.0,
    ) -> RunResult:
        """The result of a run that finished without diverging (``status`` "completed"): what a
        synthetic run (written without training) records. ``best_epoch`` defaults to the last epoch
        and ``final_test_acc`` to ``test_acc`` (the last evaluation selected)."""
        return cls(
            status="completed",
            best_val_acc=float(best_val_acc),
            test_acc=float(test_acc),
            best_epoch=int(epochs_run if best_epoch is None else best_epoch),
            final_train_acc=float(final_train_acc),
            final_test_acc=float(test_acc if final_test_acc is None else final_test_acc),
            epochs_run=int(epochs_run),
            steps_run=int(steps_run),
            diverged_step=None,
            reason=None,
            wall_time=float(wall_time),
            hash=run_hash,
            run_dir=str(run_dir),
        )

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


def write_result(run_dir: str | Path, result: RunResult | dict[str, Any]) -> None:
    """Write ``result.json``: from now on the run counts as finished."""
    values = result.to_dict() if isinstance(result, RunResult) else result
    write_atomic(Path(run_dir) / "result.json", json.dumps(values, indent=2) + "\n")


def result_problem(values: Any, *, complete: bool = False) -> str | None:
    """Why a parsed ``result.json`` cannot be trusted, or None if it can: it must be a JSON object with
    a ``status`` of :data:`FINISHED_STATES` and a ``test_acc`` (a fraction in [0, 1]; NaN only for a
    diverged run), and every :class:`RunResult` field it holds must have its type
    (:data:`RESULT_TYPES`). ``complete``: every RunResult field must be there (what initmem's trainer
    writes; a custom sweep trainer may write fewer)."""
    if not isinstance(values, dict):
        return f"a JSON {type(values).__name__}, not an object"
    status = values.get("status")
    if status not in FINISHED_STATES:
        return f"status {status!r} is not one of {list(FINISHED_STATES)}"
    missing = [k for k in RESULT_TYPES if k not in values] if complete else []
    if "test_acc" not in values:
        missing = ["test_acc", *[k for k in missing if k != "test_acc"]]
    if missing:
        return f"no {', '.join(missing)}"
    for key, kinds in RESULT_TYPES.items():
        value = values.get(key)
        if key in values and (isinstance(value, bool) or not isinstance(value, kinds)):
            return f"{key} is {value!r}, not {' or '.join(_json_type(k) for k in kinds)}"
    test_acc = values["test_acc"]
    if not (0.0 <= test_acc <= 1.0 or (status == "diverged" and test_acc != test_acc)):
        return f"test_acc is {test_acc!r}, not a fraction in [0, 1]"
    return None


def read_result(
    run_dir: str | Path, *, complete: bool = False, discard_damaged: bool = False
) -> dict[str, Any] | None:
    """The run's ``result.json`` as a dict, or None if the run has not finished.

    A file that cannot be trusted (unreadable JSON, or :func:`result_problem`; ``complete`` as there)
    raises :class:`DamagedFileError`; with ``discard_damaged`` it is removed instead (the run will be
    trained again) with a :class:`DamagedRunWarning`, and None is returned."""
    path = Path(run_dir) / "result.json"
    try:
        text = path.read_text()
    except (FileNotFoundError, IsADirectoryError):
        return None
    try:
        values = json.loads(text)
        problem = result_problem(values, complete=complete) or _foreign_result(run_dir, values)
    except ValueError as err:  # not JSON (cut short, overwritten), or not UTF-8
        problem = f"not JSON: {' '.join(str(err).split())}"
    if problem is None:
        return values
    if not discard_damaged:
        raise DamagedFileError(path, problem, DAMAGED_RESULT_FIX)
    warnings.warn(
        f"{path} was damaged ({problem}): removed, the run trains again",
        DamagedRunWarning,
        stacklevel=2,
    )
    path.unlink(missing_ok=True)
    return None


def _foreign_result(run_dir: str | Path, values: dict[str, Any]) -> str | None:
    """Why a result belongs to another run (its hash is not config.json's), or None."""
    try:
        recorded = RunFiles(run_dir).recorded_hash()
    except DamagedFileError:  # said by whoever reads config.json
        return None
    found = values.get("hash")
    if recorded is None or not isinstance(found, str) or found == recorded:
        return None
    return f"holds the result of run {found}, not of this folder's run {recorded}"


def load_result(run_dir: str | Path) -> RunResult:
    """The :class:`RunResult` of a finished run (FileNotFoundError if ``result.json`` is absent,
    :class:`DamagedFileError` if it is incomplete or unreadable)."""
    values = read_result(run_dir, complete=True)
    if values is None:
        raise FileNotFoundError(f"{Path(run_dir) / 'result.json'}: the run has not finished")
    return RunResult.from_dict(values)


def _json_type(kind: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", type(None): "null"}[kind]


# ====================================================================== the trainer's files
class RunFiles:
    """Writes one run folder: :meth:`start` (fresh) or :meth:`reopen` (resume), :meth:`append` one
    evaluation record (and its test predictions), :meth:`write_tables`, :meth:`write_predictions`,
    :meth:`save_torch`, and :meth:`write_result` last.

    Test predictions are appended to a raw int16 file (``test_pred.i16``, one row per evaluation) while
    the run goes and packed into ``predictions.npz`` by :meth:`write_predictions`, so a long run never
    rewrites its whole prediction history.
    """

    RAW_PREDICTIONS = RAW_PREDICTIONS

    def __init__(self, run_dir: str | Path, run_hash: str | None = None):
        """``run_hash``: the run's config hash, written into the tables and predictions it writes (so
        a reader can tell that they belong to this run; :func:`run_damage`)."""
        self.dir = Path(run_dir)
        self.run_hash = run_hash
        self.records: list[dict[str, Any]] = []
        self._metric_columns: dict[str, list] = {}
        self._layer_columns: dict[str, list] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    def holds_run(self) -> bool:
        return any(self.path(name).exists() for name in (*RUN_FILES, RAW_PREDICTIONS))

    def clear(self) -> None:
        for name in (*RUN_FILES, RAW_PREDICTIONS):
            self.path(name).unlink(missing_ok=True)

    def recorded_hash(self) -> str | None:
        """The hash in ``config.json`` (None if there is none; :class:`DamagedFileError` if the file
        cannot be read)."""
        path = self.path("config.json")
        if not path.is_file():
            return None
        try:
            recorded = json.loads(path.read_text())["hash"]
            if not isinstance(recorded, str):
                raise TypeError(f"hash is {recorded!r}")
        except (ValueError, KeyError, TypeError) as err:
            raise DamagedFileError(
                path,
                " ".join(str(err).split()) or type(err).__name__,
                f"remove the run folder's files (rm -r {shlex.quote(str(self.dir))}) to start the run over, or choose "
                "another out_dir",
            ) from None
        return recorded

    #: Fields of the data description that may change between attempts (where the copy lives).
    DATA_LOCATION_FIELDS = ("source",)

    def data_change(self, description: dict[str, Any]) -> str | None:
        """How the data ``description`` (``DataSplits.describe()``) differs from the one config.json
        recorded (fields both hold, except where the copy lives), or None if it does not."""
        try:
            recorded = json.loads(self.path("config.json").read_text()).get("data") or {}
        except (OSError, ValueError, AttributeError):
            return None  # no record to compare (recorded_hash names a damaged file)
        differ = [
            f"{key}: recorded {recorded[key]!r}, now {description[key]!r}"
            for key in description
            if key in recorded
            and key not in self.DATA_LOCATION_FIELDS
            and recorded[key] != description[key]
        ]
        return "; ".join(differ) or None

    def record_data(self, description: dict[str, Any]) -> None:
        """Record a changed data set in config.json (its old description under ``data_before``)."""
        payload = json.loads(self.path("config.json").read_text())
        payload.setdefault("data_before", []).append(payload.get("data"))
        payload["data"] = description
        write_atomic(self.path("config.json"), json.dumps(payload, indent=2) + "\n")

    # ------------------------------------------------------------------ starting
    def start(
        self,
        config: RunConfig,
        data_description: dict[str, Any],
        model_description: dict[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        """Create the folder, write ``config.json`` (with the run's :func:`~.provenance.provenance`
        on ``device``), drop any log or predictions of an older attempt."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clear()
        payload = {
            "hash": config.hash,
            "config": config.to_dict(),
            "initmem_version": _version(),
            "data": data_description,
        }
        if model_description is not None:
            payload["model"] = model_description
        payload["provenance"] = provenance(config.to_dict(), device)
        payload["started_at"] = utc_now()  # the first start (a resume keeps config.json)
        write_atomic(self.path("config.json"), json.dumps(payload, indent=2) + "\n")
        self._set_records([])

    def reopen(
        self,
        last_epoch: int,
        n_test: int,
        evaluated: list[int] | None = None,
        logged_wall_time: float | None = None,
    ) -> list[dict[str, Any]]:
        """Resume: keep the log records (and prediction rows) up to ``last_epoch``; those after it
        belong to work lost in a kill. Returns the kept records.

        ``evaluated``: the epochs the checkpoint's run evaluated up to ``last_epoch``; a log that does
        not hold exactly those (cut short, overwritten, another run's), or raw predictions with
        fewer rows, raise :class:`DamagedFileError` (the resumed run would lose them) before
        anything is rewritten; so does a log whose last kept evaluation was not logged at
        ``logged_wall_time`` (the checkpoint's record of it: the log of another run)."""
        records = [r for r in read_log(self.dir) if r["epoch"] <= last_epoch]
        restart = f"remove the checkpoint (rm {shlex.quote(str(self.path('last.pt')))}) to train the run from the start"
        if evaluated is not None and [r["epoch"] for r in records] != list(evaluated):
            found = [r["epoch"] for r in records]
            raise DamagedFileError(
                self.path("log.jsonl"),
                f"holds the evaluations of epochs {found}; the checkpoint at epoch {last_epoch} "
                f"needs {list(evaluated)}",
                restart,
            )
        if (
            logged_wall_time is not None
            and records
            and records[-1].get("wall_time") != logged_wall_time
        ):
            raise DamagedFileError(
                self.path("log.jsonl"),
                f"its evaluation of epoch {last_epoch} is not the one the checkpoint logged "
                "(another run's log?)",
                restart,
            )
        raw = self.path(RAW_PREDICTIONS)
        keep = len(records) * n_test * 2
        if raw.is_file() and raw.stat().st_size < keep:
            raise DamagedFileError(
                raw,
                f"holds {raw.stat().st_size // (2 * n_test)} prediction rows; the log {len(records)}",
                restart,
            )
        self._set_records(records)
        write_atomic(self.path("log.jsonl"), "".join(_json_line(r) for r in self.records))
        if raw.is_file():
            with raw.open("r+b") as fh:
                fh.truncate(keep)
        return self.records

    # ------------------------------------------------------------------ during the run
    def append(self, record: dict[str, Any], test_pred: np.ndarray | None = None) -> None:
        """Append one evaluation to ``log.jsonl`` (and its test predictions to the raw file)."""
        self._add_to_tables(record)
        if test_pred is not None:
            with self.path(RAW_PREDICTIONS).open("ab") as fh:
                fh.write(np.ascontiguousarray(test_pred, dtype="<i2").tobytes())
        with self.path("log.jsonl").open("a") as fh:
            fh.write(_json_line(record))

    def write_tables(self) -> None:
        """Rewrite ``metrics.parquet`` and ``layers.parquet`` from the records so far."""
        _write_parquet(self._metric_columns, self.path("metrics.parquet"), self.run_hash)
        _write_parquet(self._layer_columns, self.path("layers.parquet"), self.run_hash)

    def _set_records(self, records: list[dict[str, Any]]) -> None:
        self.records, self._metric_columns, self._layer_columns = [], {}, {}
        for record in records:
            self._add_to_tables(record)

    def _add_to_tables(self, record: dict[str, Any]) -> None:
        """Keep the tables as growing columns, so rewriting them costs one table build."""
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
        raw = self.path(RAW_PREDICTIONS)
        rows = np.fromfile(raw, dtype="<i2") if raw.is_file() else np.zeros(0, dtype="<i2")
        test_pred = rows.reshape(-1, n_test)
        epochs = [r["epoch"] for r in self.records][: len(test_pred)]
        owner = {} if self.run_hash is None else {"run_hash": np.asarray(self.run_hash)}
        with atomic_file(self.path("predictions.npz")) as fh:
            np.savez(
                fh,
                **owner,
                epochs=np.asarray(epochs, dtype=np.int64),
                test_pred=test_pred.astype(np.int16),
                test_labels=np.asarray(test_labels).astype(np.int16),
                best_test_pred=np.asarray(best_test_pred).astype(np.int16),
            )

    def save_torch(self, name: str, obj: Any) -> None:
        """``torch.save`` through :func:`atomic_file`."""
        import torch  # the trainer has it loaded; readers of results never need it

        with atomic_file(self.path(name)) as fh:
            torch.save(obj, fh)

    def load_torch(self, name: str) -> Any:
        """``torch.load`` a checkpoint; :class:`DamagedFileError` (naming it and the fix) if it cannot
        be read."""
        # deferred: only this rarely used path needs it
        import pickle

        import torch  # the trainer has it loaded; readers of results never need it

        path = self.path(name)
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except (RuntimeError, EOFError, pickle.UnpicklingError, ValueError, KeyError) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            fix = (
                f"remove it (rm {shlex.quote(str(path))}) and rerun: the run restarts from the beginning, as it keeps "
                "no older checkpoint"
                if name == "last.pt"
                else f"remove it (rm {shlex.quote(str(path))}) and rerun"
            )
            raise DamagedFileError(path, first, fix) from None

    def write_result(self, result: RunResult) -> None:
        """Write ``result.json`` atomically: from now on the run counts as finished."""
        write_result(self.dir, result)


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


#: The key of a table's schema metadata that holds the hash of the run that wrote it.
TABLE_HASH_KEY = b"initmem.run_hash"


def _write_parquet(columns: dict[str, list], path: Path, run_hash: str | None = None) -> None:
    """Write named columns as a parquet table with pyarrow (no pandas round trip: faster per checkpoint);
    ``pandas.read_parquet`` reads it back as a frame with a RangeIndex. ``run_hash`` goes into the
    schema metadata (:data:`TABLE_HASH_KEY`)."""
    import pyarrow as pa  # heavy (about 0.2 s); only writers of tables need it
    import pyarrow.parquet as pq

    table = pa.table(columns)
    if run_hash is not None:
        table = table.replace_schema_metadata({TABLE_HASH_KEY: run_hash.encode()})
    with atomic_file(path) as fh:
        pq.write_table(table, fh)


def _version() -> str:
    """The installed initmem version (:func:`~.provenance.initmem_version`)."""
    return initmem_version()


# ====================================================================== reading the logs
#: What to do about a damaged file of a finished run other than result.json: its numbers are lost.
DAMAGED_RUN_FIX = (
    "its numbers cannot be trusted: remove the run folder (rm -r {run_dir}) and train the run again "
    "(`initmem sweep run` does)"
)


def _damaged(path: Path, problem: str) -> DamagedFileError:
    return DamagedFileError(
        path, problem, DAMAGED_RUN_FIX.format(run_dir=shlex.quote(str(path.parent)))
    )


def read_log(run_dir: str | Path, *, strict: bool = False) -> list[dict[str, Any]]:
    """The records of ``log.jsonl`` (NaN where a value is undefined); no log reads as no records.

    A line cut short by a killed run is skipped; ``strict`` (for a finished run, whose log was written
    whole) raises :class:`DamagedFileError` for any line that is not a JSON record with an ``epoch``,
    and for a file that is not UTF-8 text."""
    path = Path(run_dir) / "log.jsonl"
    if not path.is_file():
        return []
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        if strict:
            raise _damaged(path, f"not text: {err.reason} at byte {err.start}") from None
        text = path.read_bytes().decode(errors="replace")
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("epoch"), int):
                raise ValueError("not a record with an integer epoch")
        except ValueError as err:  # a line cut short by a killed run (or worse, when strict)
            if strict:
                raise _damaged(path, f"line {number} is {_short(err)}") from None
            continue
        records.append(record)
    return records


def read_metrics(run_dir: str | Path):
    """One row per evaluation (a pandas DataFrame): ``metrics.parquet``, or the scalar keys of
    ``log.jsonl`` where the table is absent (a run that wrote none); None when the run logged
    nothing. A table that cannot be read raises :class:`DamagedFileError` (tables are replaced
    atomically: an unreadable one is damage, never a table being rewritten)."""
    import pandas as pd  # heavy (about 0.4 s); sweep status and the trainer do without it

    frame = _read_parquet(Path(run_dir) / "metrics.parquet")
    if frame is None:
        scalars = [
            {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
            for r in read_log(run_dir)
        ]
        frame = pd.DataFrame(scalars) if scalars else None
    return frame


def read_layers(run_dir: str | Path):
    """One row per (evaluation, layer) (a pandas DataFrame: ``epoch``, ``step``, ``layer`` and the
    per-layer keys): ``layers.parquet``, or the ``layers`` dicts of ``log.jsonl`` where the table is
    absent; None when the run logged nothing; :class:`DamagedFileError` as :func:`read_metrics`."""
    import pandas as pd  # heavy (about 0.4 s); sweep status and the trainer do without it

    frame = _read_parquet(Path(run_dir) / "layers.parquet")
    if frame is None:
        rows = [
            {"epoch": record.get("epoch"), "step": record.get("step"), "layer": layer} | values
            for record in read_log(run_dir)
            for layer, values in (record.get("layers") or {}).items()
        ]
        frame = pd.DataFrame(rows) if rows else None
    return frame


def _read_parquet(path: Path, columns: list[str] | None = None):
    """The table at ``path`` as a DataFrame (None if absent); :class:`DamagedFileError` if unreadable."""
    return None if not path.is_file() else _parquet_table(path, columns).to_pandas()


def _parquet_table(path: Path, columns: list[str] | None = None):
    import pyarrow.parquet as pq  # heavy (about 0.2 s); readers of tables only

    try:
        return pq.read_table(path, columns=columns)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        what = _short(ValueError(str(err).replace(f"'{path}'", "").replace(str(path), "")))
        raise _damaged(path, f"not a readable parquet table: {what}") from None


def read_predictions(
    run_dir: str | Path, keys: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of ``predictions.npz``: ``epochs``, ``test_pred``, ``test_labels``,
    ``best_test_pred`` and ``run_hash`` (only those of ``keys`` that the file holds, if given: the
    others are not read). FileNotFoundError if the run saved no predictions; :class:`DamagedFileError`
    if the file cannot be read (never unpickled: ``allow_pickle=False``) or an array has the wrong
    type or shape."""
    path = Path(run_dir) / "predictions.npz"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the run saved no predictions")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:  # fh: closed if bad
            names = npz.files if keys is None else [k for k in keys if k in npz.files]
            arrays = {k: npz[k] for k in names}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as err:
        # np.load takes a file without a zip header for a pickle, which it refuses to read: say so
        what = "no zip header" if "pickled" in str(err) else _short(err)
        raise _damaged(path, f"not a readable .npz archive: {what}") from None
    problem = _predictions_problem(arrays)
    if problem is not None:
        raise _damaged(path, problem)
    return arrays


#: The dimensions of each array of predictions.npz (run_hash: a 0-d string).
PREDICTION_DIMS = {
    "epochs": 1,
    "test_pred": 2,
    "test_labels": 1,
    "best_test_pred": 1,
    "run_hash": 0,
}


def _predictions_problem(arrays: dict[str, np.ndarray]) -> str | None:
    for key, value in arrays.items():
        dims = PREDICTION_DIMS.get(key)
        kind = "U" if key == "run_hash" else "iu"
        if dims is not None and (value.ndim != dims or value.dtype.kind not in kind):
            return f"{key} is a {value.ndim}-d {value.dtype} array, not {dims}-d {kind!r}"
    pred, epochs = arrays.get("test_pred"), arrays.get("epochs")
    if pred is not None and epochs is not None and len(pred) != len(epochs):
        return f"test_pred has {len(pred)} rows for {len(epochs)} epochs"
    sizes = {len(arrays[k]) for k in ("test_labels", "best_test_pred") if k in arrays}
    if pred is not None and pred.size:
        sizes.add(pred.shape[1])
    if len(sizes) > 1:
        return f"the arrays hold predictions of test sets of sizes {sorted(sizes)}"
    return None


def _short(err: BaseException) -> str:
    """The first sentence of an error's message, on one line."""
    text = " ".join(str(err).split())
    return text.split(". ")[0][:160] or type(err).__name__


# ====================================================================== checking a finished run
class LoggedValueWarning(UserWarning):
    """A finished run's log holds non-finite values where a number was expected (used as logged)."""


#: Log keys that are NaN at epoch 0 by definition (no step trained yet).
NAN_AT_INIT = ("train_loss", "train_acc", "norm_sq_decay")


def run_damage(run_dir: str | Path, run_hash: str | None = None) -> str:
    """What is wrong with a run's files (empty if its numbers can be trusted or it has not finished).

    The one check every reader of a finished run relies on (docs/run-format.md, "Reading"):
    ``result.json`` (:func:`read_result`), ``config.json`` and every other file the analyses read
    must be readable, of the right shape, and belong to this run: the hash in config.json, result.json,
    the tables' metadata and predictions.npz equals ``run_hash`` (when given; else config.json's),
    the log's evaluations are the tables' and predictions' epochs (and, where both record it, the
    log's and metrics table's ``wall_time`` of each evaluation agree: no two runs share them).
    A log holding non-finite values where numbers belong is noted (:class:`LoggedValueWarning`),
    not damage. The message names the file, what is wrong and the fix."""
    run_dir = Path(run_dir)
    try:
        if not (run_dir / "result.json").is_file():
            return ""
        recorded = RunFiles(run_dir).recorded_hash()
        run_hash = run_hash or recorded
        if recorded is not None and recorded != run_hash:
            raise DamagedFileError(
                run_dir / "config.json",
                f"holds the config of run {recorded}, not of {run_hash}",
                DAMAGED_RUN_FIX.format(run_dir=shlex.quote(str(run_dir))),
            )
        if (edited := _config_not_its_hash(run_dir / "config.json")) is not None:
            raise DamagedFileError(
                run_dir / "config.json",
                edited,
                DAMAGED_RUN_FIX.format(run_dir=shlex.quote(str(run_dir))),
            )
        result = read_result(run_dir)
        if result is None:
            return ""
        if run_hash is not None and result.get("hash", run_hash) != run_hash:
            raise DamagedFileError(
                run_dir / "result.json",
                f"holds the result of run {result['hash']}, not of {run_hash}",
                DAMAGED_RESULT_FIX,
            )
        _check_logs(run_dir, result, run_hash)
    except DamagedFileError as err:
        return str(err)
    return ""


def _config_not_its_hash(path: Path) -> str | None:
    """Why a config.json's config does not give its own recorded hash (edited after the run
    started), or None: the hash of the recorded config, with the plug-in digests its provenance
    records (:func:`~.config.identity`). Not checked for a plug-in run that records no digest
    (written before provenance existed)."""
    try:
        payload = json.loads(path.read_text())
        values, recorded = payload["config"], payload["hash"]
        if not isinstance(values, dict):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: recorded_hash says so
    plugins = ((payload.get("provenance") or {}).get("plugins")) or {}
    sources = {f: e.get("sha256") for f, e in plugins.items() if isinstance(e, dict)}
    user_code = [
        v
        for f in ("model", "dataset")
        if is_plugin(v := values.get(f)) and not v.startswith("torchvision:")
    ]
    if user_code and not sources:
        return None
    computed = config_hash(values | {"plugin_sources": sources} if sources else values)
    if computed == recorded:
        return None
    return (
        f"its config gives hash {computed}, not the {recorded} it records (edited after the run "
        "started?)"
    )


def _check_logs(run_dir: Path, result: dict[str, Any], run_hash: str | None) -> None:
    log_path = run_dir / "log.jsonl"
    records = read_log(run_dir, strict=True)
    epochs = [r["epoch"] for r in records]
    if records:
        if epochs[0] != 0 or any(b <= a for a, b in itertools.pairwise(epochs)):
            raise _damaged(log_path, f"its epochs {epochs[:6]}... do not rise from 0")
        _note_non_finite(log_path, records)
    for name in ("metrics.parquet", "layers.parquet"):
        path = run_dir / name
        if not path.is_file():
            continue
        table = _parquet_table(path)
        owner = (table.schema.metadata or {}).get(TABLE_HASH_KEY)
        if run_hash is not None and owner is not None and owner.decode() != run_hash:
            raise _damaged(path, f"written by run {owner.decode()}, not {run_hash}")
        if "epoch" not in table.column_names:
            raise _damaged(path, "has no epoch column")
        table_epochs = table.column("epoch").to_pylist()
        logged = records or log_path.is_file()
        if name == "metrics.parquet" and "wall_time" in table.column_names:
            # the evaluations' clock readings: equal only in the log and table of one run
            mine = [(r["epoch"], r.get("wall_time")) for r in records]
            theirs = list(zip(table_epochs, table.column("wall_time").to_pylist(), strict=True))
            if logged and theirs != mine:
                blame = (
                    log_path if owner is not None else path
                )  # a table that is ours: the log is not
                raise _damaged(
                    blame,
                    f"log.jsonl holds {len(mine)} evaluations, metrics.parquet {len(theirs)}, and "
                    "they are not the same evaluations (cut short, or another run's)",
                )
        elif logged and sorted(set(table_epochs)) != epochs:
            raise _damaged(path, "its epochs are not the evaluations of log.jsonl")
    try:
        arrays = read_predictions(run_dir)
    except FileNotFoundError:
        return
    path = run_dir / "predictions.npz"
    missing = [k for k in PREDICTION_DIMS if k != "run_hash" and k not in arrays]
    if missing:
        raise _damaged(path, f"has no {', '.join(missing)}")
    owner = str(arrays["run_hash"]) if "run_hash" in arrays else None
    if run_hash is not None and owner is not None and owner != run_hash:
        raise _damaged(path, f"written by run {owner}, not {run_hash}")
    if records and arrays["epochs"].tolist() != epochs[: len(arrays["epochs"])]:
        raise _damaged(path, "its epochs are not the evaluations of log.jsonl")


def _note_non_finite(path: Path, records: list[dict[str, Any]]) -> None:
    found = []
    for record in records:
        for key, value in record.items():
            if key == "layers" or not isinstance(value, float) or np.isfinite(value):
                continue
            if record["epoch"] == 0 and key in NAN_AT_INIT and value != value:
                continue
            found.append(f"{key}={value} at epoch {record['epoch']}")
    if found:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        warnings.warn(
            f"{path} logs non-finite values: {', '.join(found[:3])}{more} (used as logged)",
            LoggedValueWarning,
            stacklevel=3,
        )


def read_data_record(run_dir: str | Path) -> dict[str, Any] | None:
    """The data set a run was trained on, as config.json records it (``DataSplits.describe()``), or
    None if there is no readable record."""
    try:
        recorded = json.loads((Path(run_dir) / "config.json").read_text())["data"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether the run has a ``last.pt`` to resume from."""
    return (Path(run_dir) / "last.pt").is_file()


def read_start_step(run_dir: str | Path) -> int | None:
    """Where training the run would start: None (finished), the step saved in ``last.pt``, or 0."""
    files = RunFiles(run_dir)
    if files.path("result.json").is_file():
        return None
    if files.path("last.pt").is_file():
        return int(files.load_torch("last.pt")["trainer"]["step"])
    return 0


# ====================================================================== failures
def write_failure(run_dir: str | Path, text: str) -> str:
    """Record a failed attempt (exception, dead worker, cluster error) in ``error.txt``; returns its
    message (the text's last line)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / ERROR_FILE, text.rstrip() + "\n")
    return text.strip().splitlines()[-1] if text.strip() else ""


def clear_failure(run_dir: str | Path) -> None:
    """Forget a failed attempt (before retrying the run)."""
    (Path(run_dir) / ERROR_FILE).unlink(missing_ok=True)


def failure_message(run_dir: str | Path) -> str:
    """The last line of ``error.txt`` (a traceback's exception); empty if there is none."""
    path = Path(run_dir) / ERROR_FILE
    lines = path.read_text().strip().splitlines() if path.is_file() else []
    return lines[-1] if lines else ""


# ====================================================================== the lock and the state
#: (thread, run folder) pairs whose lock this process holds, with how many blocks hold it (run_lock
#: is re-entrant within a thread; two threads of one process exclude each other as two processes do).
_HELD: dict[tuple[int, str], int] = {}


@contextlib.contextmanager
def run_lock(run_dir: str | Path, *, wait_s: float = 1.0) -> Iterator[bool]:
    """Hold the run's lock (``run_dir/.lock``) for the block; yields False if another process holds it.

    ``fcntl.flock`` is released by the kernel when the holder exits, however it dies. A short
    ``wait_s`` rides over a status probe that holds the lock for a moment. Whoever acquires the lock
    rewrites the file (host, pid, time): its modification time is when the run was last taken up.
    Re-entrant: inside a block of this thread that holds the lock, it yields True at once; another
    thread of the process contends for it as another process would.
    """
    path = Path(run_dir) / LOCK_FILE
    key = (threading.get_ident(), os.path.realpath(path))
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield True
        finally:
            _HELD[key] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        acquired = False
        deadline = time.monotonic() + wait_s
        while not acquired:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                acquired = True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        if acquired:
            os.ftruncate(fd, 0)
            os.write(
                fd, f"{socket.gethostname()} pid {os.getpid()} since {time.ctime()}\n".encode()
            )
            _HELD[key] = 1
        try:
            yield acquired
        finally:
            if acquired:
                del _HELD[key]
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def hold_run(run_dir: str | Path) -> Iterator[None]:
    """Own the run folder for the block (:func:`run_lock`, re-entrant); :class:`RunBusyError` naming
    the holder if another process has it."""
    with run_lock(run_dir, wait_s=0.2) as acquired:
        if not acquired:
            raise RunBusyError(run_dir, lock_holder(run_dir) or "holder unknown")
        yield


def lock_holder(run_dir: str | Path) -> str | None:
    """Who took the run's lock last: ``host pid N since TIME`` as its holder wrote it (None if never)."""
    try:
        return (Path(run_dir) / LOCK_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def lock_is_held(run_dir: str | Path) -> bool:
    """True if some process holds the run's lock (a brief non-blocking probe; opens the lock file
    read-only, so a read-only sweep folder can be inspected and reported)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def lock_taken_at(run_dir: str | Path) -> float | None:
    """When the run's lock was last acquired (``time.time()`` clock, file-system resolution), or None
    if it never was."""
    try:
        return (Path(run_dir) / LOCK_FILE).stat().st_mtime
    except FileNotFoundError:
        return None


def run_state(run_dir: str | Path) -> str:
    """One of :data:`RUN_STATES`: finished (completed/diverged: a trusted result.json), running
    (locked), damaged (a result.json that cannot be trusted), failed (error.txt), pending."""
    try:
        result = read_result(run_dir)
    except DamagedFileError:
        return "running" if lock_is_held(run_dir) else "damaged"
    if result is not None:
        return str(result["status"])
    if lock_is_held(run_dir):
        return "running"
    if (Path(run_dir) / ERROR_FILE).is_file():
        return "failed"
    return "pending"


def damage(run_dir: str | Path) -> str:
    """What is wrong with a damaged run's result.json (empty if it can be trusted or is absent)."""
    try:
        read_result(run_dir)
    except DamagedFileError as err:
        return str(err)
    return ""


__all__ = [
    "DAMAGED_RESULT_FIX",
    "DamagedFileError",
    "DamagedRunWarning",
    "LoggedValueWarning",
    "TABLE_HASH_KEY",
    "ERROR_FILE",
    "FINISHED_STATES",
    "LOCK_FILE",
    "RAW_PREDICTIONS",
    "RUN_FILES",
    "RESULT_TYPES",
    "RUN_STATES",
    "RunBusyError",
    "RunFiles",
    "RunResult",
    "atomic_file",
    "clear_failure",
    "damage",
    "hold_run",
    "lock_holder",
    "result_problem",
    "failure_message",
    "has_checkpoint",
    "load_result",
    "lock_is_held",
    "lock_taken_at",
    "read_layers",
    "read_data_record",
    "read_log",
    "read_metrics",
    "read_predictions",
    "read_result",
    "read_start_step",
    "run_damage",
    "run_lock",
    "run_state",
    "write_atomic",
    "write_failure",
    "write_result",
]
