"""Execution backends of a sweep: a local process pool, SLURM job arrays (submitit), Ray.

Each backend (:data:`BACKENDS`) is a generator ``backend(tasks, *, trainer, workers, runs_per_gpu,
sweep_dir, name, options)`` that runs :func:`initmem.empirical.workers.execute_task` on every task (a
plain dict from ``SweepRun.task``, or a packed task of several runs from ``sweep.pack_tasks``) and
yields one outcome dict per run as its task finishes. The run folder is the record: the backends only
schedule; locks, resume and failure records live in :mod:`initmem.empirical.workers`.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import multiprocessing
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from .runfolder import lock_taken_at
from .workers import Outcome, execute_task, fail_task, task_runs

#: The package each optional backend needs (installed with the pip extra of the same name).
OPTIONAL_PACKAGES = {"submitit": "submitit", "ray": "ray"}


def missing_package(name: str) -> str | None:
    """Why backend ``name`` cannot run here (its package is not installed), or None if it can."""
    package = OPTIONAL_PACKAGES.get(name)
    if package is None or importlib.util.find_spec(package) is not None:
        return None
    return f"the {name} backend needs {package}: pip install 'initmem[{package}]'"


# ====================================================================== GPUs
def visible_gpus() -> list[str]:
    """GPU ids this process may use, without importing torch: CUDA_VISIBLE_DEVICES, else the driver's list."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    proc = Path("/proc/driver/nvidia/gpus")
    return [str(i) for i in range(len(list(proc.iterdir())))] if proc.is_dir() else []


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a SLURM allocation, a container), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# ====================================================================== local: a process pool
def run_local(
    tasks: list[dict[str, Any]],
    *,
    trainer: Any,
    workers: int | None = None,
    runs_per_gpu: int = 1,
    cpus: int | None = None,
    options: dict[str, Any] | None = None,
    **_: Any,
) -> Iterator[Outcome]:
    """Run tasks in a pool of ``workers`` spawned processes on this machine.

    On a GPU machine each worker is pinned to one GPU (``CUDA_VISIBLE_DEVICES``), ``runs_per_gpu``
    workers per GPU; the default is one worker per run slot (GPUs x runs_per_gpu), else one. Each
    worker gets ``cpus // workers`` threads, ``workers`` as asked even when fewer tasks are left (the
    runs of a resumed sweep get the threads of an uninterrupted one; a run's own ``threads`` field,
    or the count it started on, wins: ``trainer.pin_threads``); ``cpus`` (or ``options["cpus"]``, as
    ``run_sweep``'s ``backend_options`` arrive) defaults to this process's CPUs. Each worker has its next run queued
    while it trains (``PREFETCH_PER_WORKER``), so it starts it without waiting on the driver. Workers
    die with the driver (``PR_SET_PDEATHSIG``), so a killed sweep leaves no orphan holding a lock. A
    worker that dies (killed, out of memory) fails the runs it had started (``error.txt``); runs still
    queued behind them, and the rest, go to a fresh pool.
    """
    if not tasks:
        return
    gpus = visible_gpus()
    workers = workers or (len(gpus) * runs_per_gpu if gpus else 1)
    cpus = cpus or (options or {}).get("cpus") or available_cpus()
    threads = max(1, cpus // workers)  # of the workers asked: the last task gets what the first got
    workers = min(workers, len(tasks))
    queue = deque(tasks)
    context = multiprocessing.get_context("spawn")
    pools_without_start = 0  # pools in a row that broke before any worker took a run
    while queue:
        slots = context.Queue()
        for slot in range(workers):
            slots.put(slot)
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(slots, gpus, runs_per_gpu, threads, os.getpid()),
        )
        in_flight: dict[Any, tuple[dict[str, Any], float]] = {}
        broken = False
        opened, anything_done = time.time(), False
        try:
            while (queue or in_flight) and not broken:
                while queue and len(in_flight) < workers * (1 + PREFETCH_PER_WORKER):
                    task = queue.popleft()
                    in_flight[pool.submit(execute_task, task, trainer)] = (task, time.time())
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    task, submitted = in_flight.pop(future)
                    try:
                        outcomes = future.result()
                        anything_done = True
                        yield from outcomes
                    except BrokenProcessPool:
                        broken = True
                        in_flight[future] = (task, submitted)  # sorted out below
                    except Exception as err:  # noqa: BLE001 - recorded, the sweep goes on
                        yield from fail_task(task, f"{type(err).__name__}: {err}")
            # A broken pool ends every run in flight: the ones a worker had started fail, the ones
            # still queued go back to the front of the queue for the next pool, in their order.
            unstarted = []
            started_any = anything_done or any(
                _started_since(task, opened) for task, _ in in_flight.values()
            )
            pools_without_start = 0 if started_any or not broken else pools_without_start + 1
            if pools_without_start >= WORKER_START_ATTEMPTS:
                raise WorkerStartError(
                    f"the sweep's worker processes died {pools_without_start} times before taking "
                    "any run: a worker re-imports the script that started the sweep, so a script "
                    'that calls run_sweep must do it under `if __name__ == "__main__":` (see '
                    'README, "Sweeps from a script"); else a worker fails on import (run one run with `initmem '
                    "train` to see why)"
                )
            for future, (task, submitted) in in_flight.items():
                future.cancel()
                if _started_since(task, submitted):
                    yield from fail_task(
                        task, "worker process died abruptly (killed, or out of memory)"
                    )
                else:
                    unstarted.append(task)
            queue.extendleft(reversed(unstarted))
            in_flight.clear()
        finally:
            pool.shutdown(wait=not broken, cancel_futures=True)
            slots.close()


class WorkerStartError(RuntimeError):
    """The local backend's workers die before any of them takes a run, pool after pool."""


#: Fresh pools in a row whose workers die before taking any run, after which the local backend
#: stops (:class:`WorkerStartError`) instead of starting another: without it a script lacking the
#: ``if __name__ == "__main__":`` guard restarts its workers forever.
WORKER_START_ATTEMPTS = 3

#: Runs queued per worker of the local backend beyond the one it trains: the worker picks the next
#: one up as soon as it finishes, instead of after a round trip through the driver (BENCHMARKS.md,
#: benchmark 5).
PREFETCH_PER_WORKER = 1


def _started_since(task: dict[str, Any], submitted: float) -> bool:
    """Whether a worker took a run lock of ``task`` after ``submitted`` (``time.time()``): the lock file
    is rewritten by whoever acquires it (``runfolder.run_lock``), so older files mean the task never
    started in this pool."""
    for run in task_runs(task):
        taken = lock_taken_at(run["run_dir"])
        if taken is not None and taken >= submitted - 0.05:  # file time stamps use a coarse clock
            return True
    return False


def gpu_for_slot(slot: int, gpus: list[str], runs_per_gpu: int) -> str:
    """The GPU of worker ``slot``: slots 0..k-1 on the first GPU, k..2k-1 on the second (k = runs_per_gpu)."""
    return gpus[(slot // runs_per_gpu) % len(gpus)]


def _init_worker(slots: Any, gpus: list[str], runs_per_gpu: int, threads: int, parent: int) -> None:
    """Pin the worker to a GPU and a thread count before torch is imported; die with the driver."""
    slot = slots.get()
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_for_slot(slot, gpus, runs_per_gpu)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    # torch reads the variables above when first imported (by the trainer, with the worker's first
    # task); where it is loaded already, its thread pool ignores them: set it directly. Two busy
    # threads per worker on a core each collapse throughput 10-20x (BENCHMARKS.md). A trainer that
    # needs no torch (the tests' fake trainers) does not pay its import (3 s of CPU).
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed when the driver dies
    if os.getppid() != parent:  # the driver died before prctl took effect
        os._exit(1)


# ====================================================================== submitit: SLURM job arrays
class RunGroup:
    """A submitit task: train a group of runs (``runs_per_gpu`` of them share the task's GPU).

    Checkpointable: on a SLURM timeout or preemption submitit calls :meth:`checkpoint` and requeues the
    same call; the runs resume from their ``last.pt``.
    """

    def __init__(self, trainer: Any, cpus: int | None = None) -> None:
        self.trainer = trainer
        self.cpus = cpus

    def __call__(self, tasks: list[dict[str, Any]]) -> list[Outcome]:
        if len(tasks) == 1:
            return execute_task(tasks[0], self.trainer)
        return list(
            run_local(
                tasks,
                trainer=self.trainer,
                workers=len(tasks),
                runs_per_gpu=len(tasks),
                cpus=self.cpus,
            )
        )

    def checkpoint(self, tasks: list[dict[str, Any]]) -> Any:
        import submitit  # optional: this class runs inside a submitit job

        return submitit.helpers.DelayedSubmission(self, tasks)


def run_submitit(
    tasks: list[dict[str, Any]],
    *,
    trainer: Any,
    workers: int | None = None,
    runs_per_gpu: int = 1,
    sweep_dir: Path,
    name: str = "initmem",
    options: dict[str, Any] | None = None,
    poll_s: float = 2.0,
    **_: Any,
) -> Iterator[Outcome]:
    """Submit tasks as one SLURM job array (``submitit.AutoExecutor``) and yield outcomes as they land.

    ``workers`` caps the array tasks running at once (``slurm_array_parallelism``). ``options`` go to
    ``executor.update_parameters`` (``timeout_min``, ``gpus_per_node``, ``cpus_per_task``,
    ``slurm_partition``, ``mem_gb``...); ``cluster`` picks the executor (``slurm``, ``local``,
    ``debug``; default: detected). With ``runs_per_gpu`` > 1 each task trains that many runs at once.
    """
    import submitit  # optional (pip install 'initmem[submitit]')

    if not tasks:
        return
    options = dict(options or {})
    cluster = options.pop("cluster", None)
    executor = submitit.AutoExecutor(folder=Path(sweep_dir) / "submitit", cluster=cluster)
    params: dict[str, Any] = {"name": name, "timeout_min": 24 * 60}
    if workers is not None:
        params["slurm_array_parallelism"] = workers
    params.update(options)
    executor.update_parameters(**params)
    groups = [tasks[i : i + runs_per_gpu] for i in range(0, len(tasks), runs_per_gpu)]
    jobs = executor.map_array(RunGroup(trainer, options.get("cpus_per_task")), groups)
    remaining = dict(zip(jobs, groups, strict=True))
    while remaining:
        for job in [j for j in remaining if j.done()]:
            group = remaining.pop(job)
            try:
                yield from job.result()
            except Exception as err:  # noqa: BLE001 - a cluster-side failure, recorded per run
                for task in group:
                    yield from fail_task(task, f"submitit job {job.job_id} failed: {err}")
        if remaining:
            time.sleep(poll_s)


# ====================================================================== ray
def run_ray(
    tasks: list[dict[str, Any]],
    *,
    trainer: Any,
    workers: int | None = None,
    runs_per_gpu: int = 1,
    options: dict[str, Any] | None = None,
    **_: Any,
) -> Iterator[Outcome]:
    """Run tasks as Ray tasks: on the cluster at ``options['address']`` (or ``RAY_ADDRESS``), else on
    a local Ray started here with ``workers`` CPUs (and shut down at the end).

    Each run asks for ``cpus_per_run`` CPUs (option, default 1) and, where the cluster has GPUs,
    ``1 / runs_per_gpu`` of a GPU.
    """
    import ray  # optional (pip install 'initmem[ray]')

    if not tasks:
        return
    options = dict(options or {})
    address = options.pop("address", None) or os.environ.get("RAY_ADDRESS")
    cpus_per_run = float(options.pop("cpus_per_run", 1))
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(
                num_cpus=workers or os.cpu_count() or 1,
                include_dashboard=False,
                object_store_memory=options.pop("object_store_memory", 2 * 1024**3),
                log_to_driver=False,
                **options,
            )
    try:
        gpu = 1.0 / runs_per_gpu if ray.cluster_resources().get("GPU", 0) > 0 else 0
        remote = ray.remote(execute_task).options(
            num_cpus=cpus_per_run, num_gpus=gpu, max_retries=1
        )
        pending = {remote.remote(task, trainer): task for task in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    yield from ray.get(ref)
                except Exception as err:  # noqa: BLE001 - a worker crash, recorded per run
                    yield from fail_task(task, f"ray task failed: {type(err).__name__}: {err}")
    finally:
        if started:
            ray.shutdown()


#: The backends by name.
BACKENDS: dict[str, Callable[..., Iterator[Outcome]]] = {
    "local": run_local,
    "submitit": run_submitit,
    "ray": run_ray,
}


def get_backend(name: str) -> Callable[..., Iterator[Outcome]]:
    """The backend generator called ``name`` (ValueError naming the choices if there is none)."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)} (got {name!r})")
    return BACKENDS[name]


__all__ = [
    "BACKENDS",
    "OPTIONAL_PACKAGES",
    "available_cpus",
    "get_backend",
    "gpu_for_slot",
    "missing_package",
    "run_local",
    "run_ray",
    "run_submitit",
    "visible_gpus",
]
