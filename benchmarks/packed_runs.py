"""Benchmark 3: K small runs trained together (``initmem.empirical.packing``) against one after another.

K = 8 runs of a width-reduced ResNet-9 that differ only in alpha (the sweep's typical group: one
pipeline, the alpha grid), each a :class:`Trainer` on the same data. One measurement is one training
epoch of all K runs: one after another (``sequential``), or as one :class:`Pack` (``grouped``:
grouped convolutions; ``vmap``: ``torch.func.vmap`` over stacked parameters). The three are
interleaved. Ratio: sequential time over the faster packed mode's time (> 1: packing pays).
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
from common import BenchResult, interleaved, median, spread, timed
from throughput import bench_config

from initmem.empirical.config import RunConfig
from initmem.empirical.data import DataSplits, load_splits
from initmem.empirical.packing import PACK_MODES, Pack
from initmem.empirical.trainer import Trainer

#: Packing must beat running the same runs one after another to be worth using.
TARGET = 1.0


@dataclass(frozen=True)
class Sizes:
    k: int = 8
    width: float = 0.125  # the demo's width
    batch_size: int = 32  # the demo's batch size
    train_size: int = 1024  # images per run per timed epoch
    repeats: int = 3
    device: str = "cpu"


QUICK = Sizes(k=2, width=0.0625, batch_size=8, train_size=16, repeats=1)


def pack_configs(sizes: Sizes) -> list[RunConfig]:
    """K configs on synthetic data differing only in alpha (log-spaced from 1/4 to 4)."""
    alphas = np.geomspace(0.25, 4.0, sizes.k) if sizes.k > 1 else np.array([1.0])
    base = bench_config(sizes.width, sizes, sizes.train_size, alpha_groups=["conv"])
    return [
        base.replace(alpha=float(a), out_dir=f"{base.out_dir}/pack{i}")
        for i, a in enumerate(alphas)
    ]


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_packing(sizes: Sizes, data: DataSplits | None = None) -> dict[str, list[float]]:
    """Seconds per epoch of all K runs: ``{"sequential": [...], "grouped": [...], "vmap": [...]}``."""
    configs = pack_configs(sizes)
    data = data if data is not None else load_splits(configs[0], sizes.device)
    sequential = [Trainer(c, data) for c in configs]
    packs = {mode: Pack([Trainer(c, data) for c in configs], mode) for mode in PACK_MODES}

    def run_sequential() -> None:
        for trainer in sequential:
            trainer.train_epoch()
        _synchronize(sizes.device)

    def run_pack(pack: Pack):
        def run() -> None:
            pack.train_epoch()
            _synchronize(sizes.device)

        return run

    sides = {"sequential": lambda: timed(run_sequential)}
    sides.update({mode: (lambda p=pack: timed(run_pack(p))) for mode, pack in packs.items()})
    return interleaved(sides, sizes.repeats)


def bench_packing(sizes: Sizes) -> list[BenchResult]:
    seconds = measure_packing(sizes)
    seq = median(seconds["sequential"])
    packed = {mode: median(seconds[mode]) for mode in PACK_MODES}
    best = min(packed, key=packed.get)
    images = sizes.k * (sizes.train_size // sizes.batch_size) * sizes.batch_size
    figures = {
        "k": sizes.k,
        "sequential_img_per_s": images / seq,
        **{f"{mode}_img_per_s": images / packed[mode] for mode in PACK_MODES},
        "sequential_img_per_s_per_run": images / seq / sizes.k,
        **{f"{mode}_img_per_s_per_run": images / packed[mode] / sizes.k for mode in PACK_MODES},
        **{f"{mode}_speedup": seq / packed[mode] for mode in PACK_MODES},
        "sequential_range_s": spread(seconds["sequential"]),
        **{f"{mode}_range_s": spread(seconds[mode]) for mode in PACK_MODES},
        "faster_mode": best,
        "repeats": sizes.repeats,
    }
    return [
        BenchResult(
            name="packed_runs",
            description=(
                f"{sizes.k} runs of ResNet-9 width {sizes.width:g}, batch {sizes.batch_size}, "
                f"{sizes.device.upper()}: packed ({'/'.join(PACK_MODES)}) vs one after another; "
                "images/s summed over runs; ratio sequential time / faster packed time"
            ),
            figures=figures,
            ratio=seq / packed[best],
            target=TARGET,
        )
    ]


# ==================================================================================== in a sweep
@dataclass(frozen=True)
class SweepSizes:
    k: int = 8  # runs per sweep, all packed together
    epochs: int = 3
    repeats: int = 2  # sweeps per side


SWEEP_QUICK = SweepSizes(k=2, epochs=1, repeats=1)


def bench_sweep_packing(sizes: SweepSizes, quick: bool = False) -> list[BenchResult]:
    """The demo preset's base (one pipeline: low-lr SGD) over ``k`` alphas through ``run_sweep`` on
    the local backend with one worker (the process's torch threads): ``pack = k`` against ``pack = 1``,
    sweeps interleaved, wall time per sweep (worker start-up included, the same on both sides)."""
    import shutil
    from pathlib import Path

    from initmem.empirical.sweep import SweepSpec, preset_text, run_sweep

    spec = SweepSpec.from_toml(preset_text("demo"), name="demo")
    base = {
        **spec.base,
        **spec.variants[0].overrides,
        "epochs": sizes.epochs,
        "quiet": True,
        **({"train_size": 32, "val_size": 16, "test_size": 16} if quick else {}),
    }
    alphas = [float(a) for a in np.geomspace(1.0, 8.0, sizes.k)]
    sweep = SweepSpec.from_dict(
        {"name": "pack", "base": base, "grid": {"alpha": alphas}}, name="pack"
    )
    threads = torch.get_num_threads()
    root = Path(tempfile.mkdtemp(prefix="initmem-pack-sweep-"))
    numbers = itertools.count(1)

    def side(pack: int):
        def run() -> None:
            folder = root / f"sweep{next(numbers)}"
            status = run_sweep(
                sweep,
                folder,
                workers=1,
                pack=pack,
                progress=False,
                backend_options={"cpus": threads},
            )
            if status.completed != sizes.k:
                raise RuntimeError(f"sweep benchmark: {status.summary()}")

        return lambda: timed(run)

    try:
        seconds = interleaved({"alone": side(1), "packed": side(sizes.k)}, sizes.repeats, warmup=0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    alone, packed = median(seconds["alone"]), median(seconds["packed"])
    return [
        BenchResult(
            name="sweep_packing",
            description=(
                f"a sweep of {sizes.k} demo-size runs ({sizes.epochs} epochs, low-lr SGD, alpha 1-8), "
                f"local backend, 1 worker, {threads} thread(s): pack = {sizes.k} vs pack = 1; ratio "
                "unpacked sweep time / packed sweep time"
            ),
            figures={
                "k": sizes.k,
                "unpacked_s": alone,
                "packed_s": packed,
                "unpacked_range_s": spread(seconds["alone"]),
                "packed_range_s": spread(seconds["packed"]),
                "threads": threads,
                "repeats": sizes.repeats,
            },
            ratio=alone / packed,
            target=TARGET,
        )
    ]
