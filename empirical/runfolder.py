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

Reading is tolerant of a run that is being written or was killed: a log line cut short is skipped, a
table being replaced reads as absent. A result is trusted only when it is complete: ``result.json``
must pass :func:`result_problem` (a JSON object, a known status, a test accuracy, every RunResult
field it holds of the right type). The state of a run (:func:`run_state`, docs/run-format.md has the
table of what each command does in each): finished (``completed`` or ``diverged``: a trusted
``result.json``), ``running`` while a process holds its lock, ``damaged`` (a ``result.json`` that
cannot be trusted), ``failed`` when ``error.txt`` exists, ``pending`` otherwise.

Ownership. One process at a time trains a run folder: it holds the folder's lock (:func:`run_lock`,
``fcntl.flock`` on ``.lock``, released by the kernel however the holder dies). A sweep worker takes it
for each run; :func:`hold_run` takes it for a single run and raises :class:`RunBusyError` (naming the
holder) when another process has it. The lock is re-entrant within a process: a trainer called by a
worker that holds the lock holds it too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

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
        problem = result_problem(values, complete=complete)
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

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
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
                "remove the run folder's files to start the run over, or choose another out_dir",
            ) from None
        return recorded

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
        write_atomic(self.path("config.json"), json.dumps(payload, indent=2) + "\n")
        self._set_records([])

    def reopen(self, last_epoch: int, n_test: int) -> list[dict[str, Any]]:
        """Resume: keep the log records (and prediction rows) up to ``last_epoch``; those after it
        belong to work lost in a kill. Returns the kept records."""
        self._set_records([r for r in read_log(self.dir) if r["epoch"] <= last_epoch])
        write_atomic(self.path("log.jsonl"), "".join(_json_line(r) for r in self.records))
        raw = self.path(RAW_PREDICTIONS)
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
            with self.path(RAW_PREDICTIONS).open("ab") as fh:
                fh.write(np.ascontiguousarray(test_pred, dtype="<i2").tobytes())
        with self.path("log.jsonl").open("a") as fh:
            fh.write(_json_line(record))

    def write_tables(self) -> None:
        """Rewrite ``metrics.parquet`` and ``layers.parquet`` from the records so far."""
        _write_parquet(self._metric_columns, self.path("metrics.parquet"))
        _write_parquet(self._layer_columns, self.path("layers.parquet"))

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
        with atomic_file(self.path("predictions.npz")) as fh:
            np.savez(
                fh,
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
        import pickle

        import torch  # the trainer has it loaded; readers of results never need it

        path = self.path(name)
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except (RuntimeError, EOFError, pickle.UnpicklingError, ValueError, KeyError) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            fix = (
                f"remove it (rm {path}) and rerun: the run restarts from the beginning, as it keeps "
                "no older checkpoint"
                if name == "last.pt"
                else f"remove it (rm {path}) and rerun"
            )
            raise DamagedFileError(path, first, fix) from None

    def write_result(self, result: RunResult) -> None:
        """Write ``result.json`` atomically: from now on the run counts as finished."""
        write_result(self.dir, result)


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


def _write_parquet(columns: dict[str, list], path: Path) -> None:
    """Write named columns as a parquet table with pyarrow (no pandas round trip: faster per checkpoint);
    ``pandas.read_parquet`` reads it back as a frame with a RangeIndex."""
    import pyarrow as pa  # heavy (about 0.2 s); only writers of tables need it
    import pyarrow.parquet as pq

    with atomic_file(path) as fh:
        pq.write_table(pa.table(columns), fh)


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """The installed initmem version (looked up once per process: the lookup scans the metadata)."""
    try:
        from importlib.metadata import version

        return version("initmem")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


# ====================================================================== reading the logs
def read_log(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``log.jsonl`` (NaN where a value is undefined); a line cut short by a killed run
    is skipped; no log reads as no records."""
    path = Path(run_dir) / "log.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a killed run
            continue
    return records


def read_metrics(run_dir: str | Path):
    """One row per evaluation (a pandas DataFrame): ``metrics.parquet``, or the scalar keys of
    ``log.jsonl`` where the table is absent or being rewritten; None when the run logged nothing."""
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
    absent or being rewritten; None when the run logged nothing."""
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


def _read_parquet(path: Path):
    import pandas as pd  # heavy (about 0.4 s); sweep status and the trainer do without it

    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError):  # being rewritten by a running trainer
        return None


def read_predictions(
    run_dir: str | Path, keys: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of ``predictions.npz``: ``epochs``, ``test_pred``, ``test_labels``,
    ``best_test_pred`` (only those of ``keys`` that the file holds, if given: the others are not
    read). FileNotFoundError if the run saved no predictions."""
    with np.load(Path(run_dir) / "predictions.npz") as npz:
        names = npz.files if keys is None else [k for k in keys if k in npz.files]
        return {k: npz[k] for k in names}


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
    "read_log",
    "read_metrics",
    "read_predictions",
    "read_result",
    "read_start_step",
    "run_lock",
    "run_state",
    "write_atomic",
    "write_failure",
    "write_result",
]
