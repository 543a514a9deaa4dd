"""Benchmark 9: calibrating the study on the ``units-v1`` preset's design (the first design; issue 23).

``initmem.bridge.study.calibrate.calibrate(design_from("units-v1"), 200)``: 200 synthetic sweeps of the design
(12 pipelines x 5 seeds x 2 alphas) under each of the three truths, every verdict of the study scored
(the rank unit decision with 200 bootstrap resamples, each pipeline's spread against its permutation
null and its interval, the norm memory at the end and its interval), in 2 worker processes. Target:
the 600 replicas in at most 120 s on this machine's 2 cores (``ratio`` is the median wall-clock seconds, ``better`` = lower).
No training, no torch: numpy only. ``--preset units-v2`` measures the second design (24 pipelines),
``--preset units`` the third (18 pipelines x 8 seeds), the one ``initmem study runs/units``
calibrates; the target is the units-v1 design's. The study's own
calibration draws every truth of ``initmem.bridge.study.synthetic.TRUTHS`` (7 since issue 39, about
7/3 of this time); the benchmark keeps the first three (:data:`BENCH_TRUTHS`) so that its target and
its history stay comparable.

    .venv/bin/python benchmarks/calibration.py
    .venv/bin/python benchmarks/calibration.py --preset units-v2
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from common import BenchResult, median, spread, timed

from initmem.bridge.study.calibrate import calibrate
from initmem.bridge.study.synthetic import design_from, named_truths

#: Target: seconds for the units-v1 preset's design, 200 replicas x 3 truths.
TARGET_S = 120.0
#: The truths the benchmark draws (the three of its target).
BENCH_TRUTHS = ("accumulated", "epochs", "neither")


@dataclass(frozen=True)
class Sizes:
    replicas: int = 200
    repeats: int = 1
    n_boot: int = 200
    workers: int = 2
    preset: str = "units-v1"


QUICK = Sizes(replicas=2, repeats=1, n_boot=20, workers=1)


def bench_calibration(sizes: Sizes) -> list[BenchResult]:
    """Median wall-clock seconds of a preset's calibration (module docstring; units-v1 unless
    ``sizes.preset`` says)."""
    design = design_from(sizes.preset)
    truths = {name: t for name, t in named_truths().items() if name in BENCH_TRUTHS}
    seconds, cpu = [], []
    for _ in range(sizes.repeats):
        before = _cpu_seconds()
        seconds.append(
            timed(
                lambda: calibrate(
                    design,
                    sizes.replicas,
                    truths=truths,
                    n_boot=sizes.n_boot,
                    workers=sizes.workers,
                )
            )
        )
        cpu.append(_cpu_seconds() - before)
    figures = {
        "calibration_s": median(seconds),
        "calibration_spread_s": spread(seconds),
        "replicas_per_truth": sizes.replicas,
        "truths": len(truths),
        "n_boot": sizes.n_boot,
        "design": design.name,
        "workers": sizes.workers,
        "cpu_s": median(cpu),
        "repeats": sizes.repeats,
    }
    return [
        BenchResult(
            name="calibration_units",
            description=f"calibrate the study on the {sizes.preset} preset's design ({design.name}), "
            f"{sizes.replicas} replicas x 3 truths; ratio = median seconds (not a ratio), target "
            f"under {TARGET_S:g} s",
            figures=figures,
            ratio=figures["calibration_s"],
            target=TARGET_S,
            better="lower",
        )
    ]


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children (the workers)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=Sizes.replicas)
    parser.add_argument("--repeats", type=int, default=Sizes.repeats)
    parser.add_argument(
        "--preset",
        default=Sizes.preset,
        help="the design calibrated (default units-v1, the target's; units-v2: the second design; "
        "units: the third)",
    )
    args = parser.parse_args(argv)
    sizes = Sizes(replicas=args.replicas, repeats=args.repeats, preset=args.preset)
    for result in bench_calibration(sizes):
        print(f"{result.name}: {result.figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
