"""Benchmark 5: the fixed cost per run of the sweep machinery, as a fraction of a demo-size run.

Sweeps of one-epoch runs at the demo's size (``empirical/presets/demo.toml``'s base: width-1/8
ResNet-9, 1,000 Fashion-MNIST training images, batch 32, 1,000 validation and 2,000 test images) go
through ``initmem.empirical.sweep.run_sweep`` with the local backend and one worker: worker start-up,
config expansion and hashing, locks, data loading, model building, the run folder (logs, tables,
predictions, checkpoints) and result files.

The sweep's trainer is :func:`timed_train`: ``train()`` with a :class:`Trainer` that clocks its own
work (the evaluations and the training epoch), so each run's compute is measured in the worker, in the
run itself. Two sweep sizes, ``small`` and ``large`` runs, separate what each run costs from what a
sweep costs once (starting the worker process, importing torch)::

    per run     = (T(large) - T(small)) / (large - small)       every run's share of the sweep's time
    compute     = mean over the runs of the clocked work
    ratio       = (per run - compute) / compute                (target: under 5%)
    start-up    = T(small) - small * per run                   once per sweep and worker

``in_train_fixed_s`` is the part of the fixed cost inside ``train()`` (each run's ``train()`` wall time
minus its compute, averaged; the first run of a worker reads and decodes the data set).

Threads: the worker runs on this process's torch thread count (``run.py --threads``). The local backend
gives a worker ``available_cpus() // workers`` threads and ``run_sweep`` does not pass
``backend_options`` on to it as a CPU count, so the benchmark makes ``backends.available_cpus`` answer
that number while the sweep starts its worker.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch
from common import BenchResult, interleaved, median, spread, timed

from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec, preset_text, run_sweep
from initmem.empirical.train import Trainer, train

#: Target: the machinery's fixed cost per run under 5% of the run.
TARGET = 0.05
#: Workers of the local backend (each gets available_cpus() // workers threads).
WORKERS = 1
#: What timed_train leaves in each run folder.
TIMING_FILE = "bench_timing.json"


@dataclass(frozen=True)
class Sizes:
    small: int = 1
    large: int = 7
    repeats: int = 3
    preset: str = "demo"
    changes: tuple[tuple[str, object], ...] = (("epochs", 1), ("eval_every", 1))


QUICK = Sizes(
    small=1,
    large=2,
    repeats=1,
    changes=(
        ("epochs", 1),
        ("eval_every", 1),
        ("train_size", 64),
        ("val_size", 32),
        ("test_size", 32),
    ),
)


class ClockedTrainer(Trainer):
    """A Trainer that adds up the seconds of its own work: evaluations and training epochs."""

    compute_s = 0.0

    def train_epoch(self):
        start = time.perf_counter()
        try:
            return super().train_epoch()
        finally:
            self.compute_s += time.perf_counter() - start

    def evaluate(self, wall_time: float):
        start = time.perf_counter()
        try:
            return super().evaluate(wall_time)
        finally:
            self.compute_s += time.perf_counter() - start


def timed_train(config: RunConfig):
    """The benchmark's sweep trainer: ``train(config)`` (data loading and model building included),
    leaving ``{"train_s", "compute_s"}`` in the run folder."""
    start = time.perf_counter()
    trainer = ClockedTrainer(config)
    result = train(config, trainer=trainer)
    seconds = time.perf_counter() - start
    timing = {"train_s": seconds, "compute_s": trainer.compute_s}
    (Path(config.out_dir) / TIMING_FILE).write_text(json.dumps(timing))
    return result


def demo_base(sizes: Sizes) -> dict:
    """The preset's ``[base]`` table with ``sizes.changes`` applied (quiet, no progress bars)."""
    spec = SweepSpec.from_toml(preset_text(sizes.preset), name=sizes.preset)
    return {**spec.base, **dict(sizes.changes), "quiet": True}


def bench_sweep_overhead(sizes: Sizes) -> list[BenchResult]:
    base = demo_base(sizes)
    threads = torch.get_num_threads()
    root = Path(tempfile.mkdtemp(prefix="initmem-sweep-bench-"))
    timings: list[dict] = []
    counter = iter(range(10**6))

    def sweep_seconds(n_runs: int):
        def measure() -> float:
            spec = SweepSpec.from_dict(
                {
                    "name": "overhead",
                    "base": base,
                    "grid": {"alpha": [0.25 * 2**i for i in range(n_runs)]},
                },
                name="overhead",
            )
            folder = root / f"sweep{next(counter)}"
            cpus = threads * WORKERS
            with mock.patch("initmem.empirical.backends.available_cpus", return_value=cpus):
                seconds = timed(
                    lambda: run_sweep(
                        spec,
                        folder,
                        backend="local",
                        workers=WORKERS,
                        trainer=timed_train,
                        progress=False,
                    )
                )
            found = sorted((folder / "runs").glob(f"*/{TIMING_FILE}"))
            if len(found) != n_runs:
                raise RuntimeError(f"sweep benchmark: {len(found)} of {n_runs} runs finished")
            if n_runs == sizes.large:
                timings.extend(json.loads(p.read_text()) for p in found)
            shutil.rmtree(folder, ignore_errors=True)
            return seconds

        return measure

    try:
        measured = interleaved(
            {"small": sweep_seconds(sizes.small), "large": sweep_seconds(sizes.large)},
            sizes.repeats,
            warmup=0,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    t_small, t_large = median(measured["small"]), median(measured["large"])
    per_run = (t_large - t_small) / (sizes.large - sizes.small)
    compute = statistics.mean(t["compute_s"] for t in timings)
    in_train = statistics.mean(t["train_s"] - t["compute_s"] for t in timings)
    fixed = per_run - compute
    return [
        BenchResult(
            name="sweep_overhead",
            description=(
                f"fixed cost per run of a local sweep (one-epoch runs at the '{sizes.preset}' "
                f"preset's size, {WORKERS} worker, {threads} thread(s)) over the run's own compute; "
                "lower is better"
            ),
            figures={
                "per_run_s": per_run,
                "compute_s": compute,
                "fixed_cost_s": fixed,
                "in_train_fixed_s": in_train,
                "in_train_fixed_max_s": max(t["train_s"] - t["compute_s"] for t in timings),
                "startup_s": t_small - sizes.small * per_run,
                f"sweep_of_{sizes.small}_s": t_small,
                f"sweep_of_{sizes.large}_s": t_large,
                f"sweep_of_{sizes.small}_range_s": spread(measured["small"]),
                f"sweep_of_{sizes.large}_range_s": spread(measured["large"]),
                "compute_range_s": spread([t["compute_s"] for t in timings]),
                "runs_timed": len(timings),
                "threads": threads,
                "repeats": sizes.repeats,
            },
            ratio=fixed / compute,
            target=TARGET,
            better="lower",
        )
    ]
