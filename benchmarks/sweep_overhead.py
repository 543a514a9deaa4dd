"""Benchmark 5: the fixed cost per run of the sweep machinery, as a fraction of a demo-size run.

Sweeps of ``n_runs`` one-epoch runs at the demo's size (``empirical/presets/demo.toml``'s base:
width-1/8 ResNet-9, 500 Fashion-MNIST training images, batch 16, 500 validation and 1,000 test
images, evaluated at init and after the epoch) go through ``initmem.empirical.sweep.run_sweep`` with
the local backend and one worker: worker start-up, config expansion and hashing, locks, data loading,
model building, the run folder (logs, tables, predictions, checkpoints) and result files.

The sweep's trainer is :func:`timed_train`: ``train()`` with the :class:`Trainer`'s own work (the
evaluations and the training epoch) clocked, writing when the run started and ended and how long
its work took. Every figure is then measured inside one run, or between two consecutive runs of the
same worker, so a burst of load on the (shared) machine spoils one run, not the comparison::

    in train()   = train() wall time - its compute                  data, model, files
    between runs = next run's start - this run's end                 result, lock, config, IPC
    fixed cost   = median(in train()) + median(between runs)         over all runs but each worker's first
    ratio        = fixed cost / median(compute)                     (target: under 5%)

Reported apart, as costs of a sweep rather than of a run: ``startup_s`` (from calling run_sweep to
the first run's start: spawning the worker, importing torch) and ``first_run_extra_s`` (the first
run of a worker reads, decodes and counts the data set; later runs find it in memory).
``Sizes(cold_data=True)`` empties the worker's data cache before every run: the behaviour before the
cache existed (every run read, decoded and counted its data set), for the before/after comparison.

Threads: the worker runs on this process's torch thread count (``run.py --threads``), passed to the
local backend as ``backend_options={"cpus": threads}``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from common import BenchResult, median, spread, timed

from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec, preset_text, run_sweep
from initmem.empirical.trainer import Trainer, train

#: Target: the machinery's fixed cost per run under 5% of the run.
TARGET = 0.05
#: Workers of the local backend (each gets available_cpus() // workers threads).
WORKERS = 1
#: What timed_train leaves in each run folder.
TIMING_FILE = "bench_timing.json"


@dataclass(frozen=True)
class Sizes:
    n_runs: int = 7
    repeats: int = 3  # sweeps
    preset: str = "demo"
    changes: tuple[tuple[str, object], ...] = (("epochs", 1), ("eval_every", 1))
    cold_data: bool = False


QUICK = Sizes(
    n_runs=2,
    repeats=1,
    changes=(
        ("epochs", 1),
        ("eval_every", 1),
        ("train_size", 64),
        ("val_size", 32),
        ("test_size", 32),
    ),
)


@contextlib.contextmanager
def clocked(cls: type, names: tuple[str, ...]) -> Iterator[list[float]]:
    """While inside, the methods ``names`` of ``cls`` add the seconds they take to the yielded
    one-element list (the benchmark's worker trains one run at a time)."""
    seconds = [0.0]
    originals = {name: getattr(cls, name) for name in names}

    def timed(method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                seconds[0] += time.perf_counter() - start

        return wrapper

    for name, method in originals.items():
        setattr(cls, name, timed(method))
    try:
        yield seconds
    finally:
        for name, method in originals.items():
            setattr(cls, name, method)


def timed_train(config: RunConfig):
    """The benchmark's sweep trainer: ``train(config)`` (data loading and model building included),
    leaving ``{"start", "end", "train_s", "compute_s"}`` in the run folder (wall-clock seconds);
    compute: the trainer's own work, its training epochs and evaluations."""
    start, clock = time.time(), time.perf_counter()
    with clocked(Trainer, ("train_epoch", "evaluate")) as compute:
        result = train(config)
    timing = {
        "start": start,
        "end": time.time(),
        "train_s": time.perf_counter() - clock,
        "compute_s": compute[0],
    }
    (Path(config.out_dir) / TIMING_FILE).write_text(json.dumps(timing))
    return result


def timed_train_cold(config: RunConfig):
    """:func:`timed_train` after emptying this process's data caches (decoded data sets and splits)."""
    from initmem.empirical.data import clear_data_cache

    clear_data_cache()
    return timed_train(config)


def demo_base(sizes: Sizes) -> dict:
    """The preset's ``[base]`` table with ``sizes.changes`` applied (quiet, no progress bars)."""
    spec = SweepSpec.from_toml(preset_text(sizes.preset), name=sizes.preset)
    return {**spec.base, **dict(sizes.changes), "quiet": True}


def run_timed_sweep(base: dict, n_runs: int, folder: Path, threads: int, cold: bool) -> dict:
    """One sweep of ``n_runs`` runs; its wall time and its runs' timings in the order they ran."""
    spec = SweepSpec.from_dict(
        {"name": "overhead", "base": base, "grid": {"alpha": [0.25 * 2**i for i in range(n_runs)]}},
        name="overhead",
    )
    started = time.time()
    seconds = timed(
        lambda: run_sweep(
            spec,
            folder,
            backend="local",
            workers=WORKERS,
            trainer=timed_train_cold if cold else timed_train,
            progress=False,
            backend_options={"cpus": threads * WORKERS},
        )
    )
    runs = [json.loads(p.read_text()) for p in (folder / "runs").glob(f"*/{TIMING_FILE}")]
    if len(runs) != n_runs:
        raise RuntimeError(f"sweep benchmark: {len(runs)} of {n_runs} runs finished")
    return {"seconds": seconds, "started": started, "runs": sorted(runs, key=lambda r: r["start"])}


def bench_sweep_overhead(sizes: Sizes) -> list[BenchResult]:
    base = demo_base(sizes)
    threads = torch.get_num_threads()
    root = Path(tempfile.mkdtemp(prefix="initmem-sweep-bench-"))
    try:
        sweeps = [
            run_timed_sweep(base, sizes.n_runs, root / f"sweep{i}", threads, sizes.cold_data)
            for i in range(sizes.repeats)
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    later = [r for sweep in sweeps for r in sweep["runs"][1:]]
    first = [sweep["runs"][0] for sweep in sweeps]
    in_train = [r["train_s"] - r["compute_s"] for r in later]
    between = [
        b["start"] - a["end"]
        for sweep in sweeps
        for a, b in zip(sweep["runs"][:-1], sweep["runs"][1:], strict=True)
    ]
    compute = median([r["compute_s"] for r in later])
    fixed = median(in_train) + median(between)
    startup = [sweep["runs"][0]["start"] - sweep["started"] for sweep in sweeps]
    first_extra = [r["train_s"] - r["compute_s"] - median(in_train) for r in first]
    return [
        BenchResult(
            name="sweep_overhead",
            description=(
                f"fixed cost per run of a local sweep (one-epoch runs at the '{sizes.preset}' "
                f"preset's size, {WORKERS} worker, {threads} thread(s)"
                + (", data cache emptied before each run" if sizes.cold_data else "")
                + ") over the run's own compute; lower is better"
            ),
            figures={
                "fixed_cost_s": fixed,
                "compute_s": compute,
                "in_train_fixed_s": median(in_train),
                "between_runs_s": median(between),
                "in_train_fixed_range_s": spread(in_train),
                "between_runs_range_s": spread(between),
                "compute_range_s": spread([r["compute_s"] for r in later]),
                "startup_s": median(startup),
                "first_run_extra_s": median(first_extra),
                "sweep_wall_s": median([sweep["seconds"] for sweep in sweeps]),
                "n_runs": sizes.n_runs,
                "runs_timed": len(later),
                "threads": threads,
                "repeats": sizes.repeats,
            },
            ratio=fixed / compute,
            target=TARGET,
            better="lower",
        )
    ]
