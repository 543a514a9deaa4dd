"""Benchmark 5: the fixed cost per run of the sweep machinery, as a fraction of a demo-size run.

A sweep of ``n_runs`` one-epoch runs at the demo's size (``empirical/presets/demo.toml``'s base:
width-1/8 ResNet-9, 1,000 Fashion-MNIST training images, batch 32, 1,000 validation and 2,000 test
images) goes through ``initmem.empirical.sweep.run_sweep`` with the local backend and one worker:
worker start-up, config expansion and hashing, locks, data loading, the run folder (logs, tables,
predictions, checkpoints) and result files. Against it, the same run's unavoidable work measured in
this process with the data already loaded: the two evaluations (at init and after the epoch) and the
training epoch, through the same :class:`Trainer`.

    overhead per run = sweep wall time / n_runs - compute per run
    ratio            = overhead per run / compute per run            (target: under 5%)

The in-process ``train()`` of the same config (data loaded by it, folder written) is measured too,
to split the overhead into the trainer's part (data, files) and the sweep's part (spawn, locks).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import BenchResult, interleaved, median, spread, timed
from initmem.empirical.config import RunConfig
from initmem.empirical.data import load_splits
from initmem.empirical.sweep import SweepSpec, preset_text, run_sweep
from initmem.empirical.train import Trainer, train

#: Target: the machinery's fixed cost per run under 5% of the run.
TARGET = 0.05


@dataclass(frozen=True)
class Sizes:
    n_runs: int = 4
    repeats: int = 3
    preset: str = "demo"
    changes: tuple[tuple[str, object], ...] = (("epochs", 1), ("eval_every", 1))


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


def demo_base(sizes: Sizes) -> dict:
    """The preset's ``[base]`` table with ``sizes.changes`` applied (quiet, no progress bars)."""
    spec = SweepSpec.from_toml(preset_text(sizes.preset), name=sizes.preset)
    return {**spec.base, **dict(sizes.changes), "quiet": True}


def compute_seconds(config: RunConfig, data) -> float:
    """The run's own work with the data in memory: evaluate, one epoch, evaluate."""
    trainer = Trainer(config, data)

    def work() -> None:
        trainer.evaluate(0.0)
        trainer.train_epoch()
        trainer.evaluate(0.0)

    return timed(work)


def bench_sweep_overhead(sizes: Sizes) -> list[BenchResult]:
    base = demo_base(sizes)
    alphas = [0.25 * 2**i for i in range(sizes.n_runs)]
    root = Path(tempfile.mkdtemp(prefix="initmem-sweep-bench-"))
    config = RunConfig.from_dict({**base, "out_dir": str(root / "single")})
    data = load_splits(config)
    counter = {"sweep": 0, "train": 0}

    def sweep_once() -> float:
        counter["sweep"] += 1
        spec = SweepSpec.from_dict(
            {"name": "overhead", "base": base, "grid": {"alpha": alphas}}, name="overhead"
        )
        folder = root / f"sweep{counter['sweep']}"
        seconds = timed(lambda: run_sweep(spec, folder, backend="local", workers=1, progress=False))
        shutil.rmtree(folder, ignore_errors=True)
        return seconds / sizes.n_runs

    def train_once() -> float:
        counter["train"] += 1
        folder = root / f"train{counter['train']}"
        seconds = timed(lambda: train(config.replace(out_dir=str(folder))))
        shutil.rmtree(folder, ignore_errors=True)
        return seconds

    try:
        measured = interleaved(
            {
                "sweep_per_run": sweep_once,
                "train_call": train_once,
                "compute": lambda: compute_seconds(config, data),
            },
            sizes.repeats,
            warmup=0,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_run, train_call, compute = (
        median(measured[k]) for k in ("sweep_per_run", "train_call", "compute")
    )
    overhead = per_run - compute
    return [
        BenchResult(
            name="sweep_overhead",
            description=(
                f"fixed cost per run of a local sweep ({sizes.n_runs} one-epoch runs at the "
                f"'{sizes.preset}' preset's size, 1 worker) over the run's own compute; lower is better"
            ),
            figures={
                "sweep_s_per_run": per_run,
                "train_call_s": train_call,
                "compute_s": compute,
                "overhead_s_per_run": overhead,
                "trainer_overhead_s": train_call - compute,
                "sweep_machinery_overhead_s": per_run - train_call,
                "sweep_s_per_run_range": spread(measured["sweep_per_run"]),
                "compute_range_s": spread(measured["compute"]),
                "n_runs": sizes.n_runs,
                "steps_per_run": config.steps_per_epoch,
                "repeats": sizes.repeats,
            },
            ratio=overhead / compute,
            target=TARGET,
            better="lower",
        )
    ]
