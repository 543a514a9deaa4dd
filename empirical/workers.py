"""What a sweep worker does with one task: train its run (or its pack of runs) under the run's lock.

A task is plain data (picklable, the same for every backend): a run task ``{"hash", "variant",
"run_dir", "config"}`` from ``SweepRun.task``, or a packed task ``{"hash", "variant", "pack": [run
tasks]}`` from ``sweep.pack_tasks``. Every backend calls :func:`execute_task` on its workers and
passes on the outcomes it returns, one per run: ``hash``, ``variant``, ``status`` (completed,
diverged, failed, or ``locked`` when another process holds the run), ``message`` and ``wall_s``.

The run folder is the record (:mod:`initmem.empirical.runfolder`): a finished run (``result.json``)
is skipped, an unfinished one resumes from its ``last.pt``, an exception is written to ``error.txt``
(status ``failed``) instead of being raised, and a retry clears it first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import RunConfig
from .loggers import write_events
from .runfolder import (
    clear_failure,
    failure_message,
    read_result,
    run_lock,
    write_failure,
    write_result,
)

Outcome = dict[str, Any]

#: The trainer a sweep calls on each run unless told otherwise (``module:function``).
DEFAULT_TRAINER = "initmem.empirical.trainer:train"
#: Trainer strings that name a function now found elsewhere: used when the string itself no longer
#: resolves (sweep files and scripts written before the training loop's module was renamed).
TRAINER_ALIASES = {"initmem.empirical.train:train": "initmem.empirical.trainer:train"}


def resolve_trainer(trainer: str | Callable[[RunConfig], Any]) -> Callable[[RunConfig], Any]:
    """A trainer given as ``module:function`` (or a callable) -> the callable.

    ``module`` is imported; where no module has that dotted name, its last part is taken as an
    attribute of the part before it (``pkg.obj:method``). A string that does not resolve is tried
    again as its :data:`TRAINER_ALIASES` entry. Raises ValueError (malformed), ImportError or
    AttributeError (not found).
    """
    if callable(trainer):
        return trainer
    module_name, sep, attr = str(trainer).partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"trainer must look like module:function (got {trainer!r})")
    try:
        return getattr(_import_dotted(module_name), attr)
    except (ImportError, AttributeError):
        if trainer in TRAINER_ALIASES:
            return resolve_trainer(TRAINER_ALIASES[trainer])
        raise


def _import_dotted(name: str) -> Any:
    """The module called ``name``, or else the attribute ``name``'s last part of the object named by
    the rest (recursively): ``pkg.obj`` is ``getattr(pkg, "obj")`` when no module ``pkg.obj`` exists."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        parent, dot, last = name.rpartition(".")
        if err.name != name or not dot:  # a missing dependency, or nothing left to fall back on
            raise
        try:
            return getattr(_import_dotted(parent), last)
        except AttributeError:
            raise err from None


# ====================================================================== one task
def execute_task(task: dict[str, Any], trainer: str | Callable = DEFAULT_TRAINER) -> list[Outcome]:
    """What every backend calls on its workers: :func:`execute_pack` for a packed task, else
    :func:`execute_run`; a list of outcomes, one per run."""
    if "pack" in task:
        return execute_pack(task)
    return [execute_run(task, trainer)]


def execute_run(task: dict[str, Any], trainer: str | Callable = DEFAULT_TRAINER) -> Outcome:
    """Train one run of a sweep under its lock.

    Skips a finished run, resumes an unfinished one (the trainer reads ``last.pt``; a run whose
    result.json cannot be trusted is unfinished: the file is removed), records an
    exception in ``error.txt`` (status ``failed``) instead of raising. A trainer that returns without
    writing ``result.json`` gets one written from what it returned (a dataclass or a dict).
    """
    start = time.monotonic()
    run_dir = Path(task["run_dir"])
    with run_lock(run_dir) as acquired:
        if not acquired:
            return _locked_outcome(task)
        result = read_result(run_dir, discard_damaged=True)  # a damaged result: train it again
        if result is not None:  # finished meanwhile (another driver): not trained by this call
            return _finished_outcome(task, result, start) | {"already_finished": True}
        if result is None:
            clear_failure(run_dir)  # a retry of a failed run
            try:
                config = RunConfig.from_dict(task["config"])
                if config.hash != task["hash"]:  # the config is the same: a plug-in's source is not
                    raise ValueError(
                        f"the source of a plug-in of run {task['hash']} changed since its sweep "
                        f"listed it (its hash is {config.hash} now); rerun `initmem sweep run` "
                        "(with --update to train the edited plug-in's runs)"
                    )
                returned = resolve_trainer(trainer)(config)
                result = read_result(run_dir)
                if result is None:  # a trainer that does not write result.json itself
                    result = _result_dict(returned, task)
                    write_result(run_dir, result)
            except Exception:
                record_failure(task, traceback.format_exc())
                return _failed_outcome(task, start)
        return _finished_outcome(task, result, start)


def execute_pack(task: dict[str, Any]) -> list[Outcome]:
    """Train the runs of a packed task together with
    :func:`~initmem.empirical.packing.train_packed` (grouped convolutions), each under its lock.

    Runs held by another process are reported ``locked``, finished runs are skipped, the others are
    trained (or resumed) as one pack. A run left without ``result.json`` (an exception in the pack)
    gets ``error.txt``. Returns one outcome per run, in the pack's order (see :func:`execute_run`).
    """
    from .packing import train_packed  # the training stack (torch): loaded by workers only

    start = time.monotonic()
    members = task["pack"]
    outcomes: dict[str, Outcome] = {}
    with contextlib.ExitStack() as locks:
        todo = []
        for member in members:
            run_dir = Path(member["run_dir"])
            if not locks.enter_context(run_lock(run_dir)):
                outcomes[member["hash"]] = _locked_outcome(member)
            elif (result := read_result(run_dir, discard_damaged=True)) is not None:
                outcomes[member["hash"]] = _finished_outcome(member, result, start)
            else:
                clear_failure(run_dir)  # a retry of a failed run
                todo.append(member)
        error = ""
        if todo:
            try:
                train_packed([RunConfig.from_dict(m["config"]) for m in todo], mode="auto")
            except Exception:
                error = traceback.format_exc()
        for member in todo:
            result = read_result(member["run_dir"])
            if result is None:
                record_failure(member, error or "the packed run ended without a result")
                outcomes[member["hash"]] = _failed_outcome(member, start)
            else:
                outcomes[member["hash"]] = _finished_outcome(member, result, start)
    return [outcomes[m["hash"]] for m in members]


def task_runs(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The run tasks of a task: the members of a packed task, else the task itself."""
    return list(task.get("pack", [task]))


# ====================================================================== failures and outcomes
def record_failure(task: dict[str, Any], text: str) -> Outcome:
    """Write ``error.txt`` for a run that failed (exception, dead worker, cluster error)."""
    message = write_failure(task["run_dir"], text)
    return {
        "hash": task["hash"],
        "variant": task["variant"],
        "status": "failed",
        "message": message,
    }


def fail_task(task: dict[str, Any], text: str) -> list[Outcome]:
    """:func:`record_failure` for every run of a task (a dead worker, a cluster error)."""
    return [record_failure(run, text) for run in task_runs(task)]


def _locked_outcome(task: dict[str, Any]) -> Outcome:
    return {
        "hash": task["hash"],
        "variant": task["variant"],
        "status": "locked",
        "message": "another process holds the run",
    }


def _failed_outcome(task: dict[str, Any], start: float) -> Outcome:
    return {
        "hash": task["hash"],
        "variant": task["variant"],
        "status": "failed",
        "message": failure_message(task["run_dir"]),
        "wall_s": time.monotonic() - start,
    }


def _finished_outcome(task: dict[str, Any], result: dict[str, Any], start: float) -> Outcome:
    message = str(result.get("reason") or "")
    logger_error = None
    if task.get("logger"):  # the sweep's logging hook: from the finished run's log
        try:
            write_events(task["run_dir"], task["logger"])
        except Exception as err:  # noqa: BLE001 - the run is finished; the logger's failure is said
            logger_error = f"logger {task['logger']} failed: {type(err).__name__}: {err}"
            message = (f"{message}; " if message else "") + logger_error
    outcome = {
        "hash": task["hash"],
        "variant": task["variant"],
        "status": str(result.get("status", "completed")),
        "message": message,
        "wall_s": time.monotonic() - start,
    }
    if logger_error is not None:  # the driver warns (run_sweep) and writes the file itself
        outcome["logger_error"] = " ".join(logger_error.split())
    return outcome


def _result_dict(returned: Any, task: dict[str, Any]) -> dict[str, Any]:
    if dataclasses.is_dataclass(returned) and not isinstance(returned, type):
        values = dataclasses.asdict(returned)
    elif isinstance(returned, dict):
        values = dict(returned)
    else:
        values = {}
    values.setdefault("status", "completed")
    values.setdefault("hash", task["hash"])
    values.setdefault("run_dir", task["run_dir"])
    return values


__all__ = [
    "DEFAULT_TRAINER",
    "TRAINER_ALIASES",
    "Outcome",
    "execute_pack",
    "execute_run",
    "execute_task",
    "fail_task",
    "record_failure",
    "resolve_trainer",
    "task_runs",
]
