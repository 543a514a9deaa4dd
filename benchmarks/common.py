"""What every benchmark shares: the result entry, interleaved timing, medians, the machine's description.

A benchmark compares two ways of doing one job on the same machine in the same process. Both sides are
measured interleaved, A B then B A then A B ..., so that a change in the machine's load (it is shared)
hits both sides alike; each figure is the median over the repetitions, and the number of repetitions is
recorded next to it.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: Keys of one entry of results.json (the smoke test checks them).
RESULT_KEYS = (
    "name",
    "description",
    "figures",
    "ratio",
    "target",
    "met",
    "better",
    "measured",
    "note",
    "context",
)


@dataclass
class BenchResult:
    """One line of the results table.

    ``figures``: the measured numbers (units in the key names: ``_img_per_s``, ``_s``, ``_mib``,
    ``_flop_per_s``), medians unless the name says otherwise, plus ``repeats``. ``ratio``: the figure the
    target is about (ours over theirs unless the description says otherwise). ``target``: the ratio's
    bound we aim for (None: informational, no target set by the issue). ``better``: "higher" (the
    target is a lower bound: met when ratio >= target) or "lower" (an upper bound: met when
    ratio <= target). ``met``: None when there is no target or nothing was measured. ``measured``: False when the benchmark
    could not run here (e.g. the GPU benchmark on a CPU machine). ``context``: the machine, the
    library versions and the load average around the measurement (filled in by the runner).
    """

    name: str
    description: str
    figures: dict[str, Any] = field(default_factory=dict)
    ratio: float | None = None
    target: float | None = None
    better: str = "higher"
    measured: bool = True
    note: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    met: bool | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.better not in ("higher", "lower"):
            raise ValueError(f"better must be 'higher' or 'lower' (got {self.better!r})")
        ok = self.measured and self.ratio is not None and math.isfinite(self.ratio)
        if not ok or self.target is None:
            self.met = None
        elif self.better == "higher":
            self.met = bool(self.ratio >= self.target)
        else:
            self.met = bool(self.ratio <= self.target)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        return {key: values[key] for key in RESULT_KEYS}


def interleaved(
    sides: dict[str, Callable[[], float]], repeats: int, *, warmup: int = 1
) -> dict[str, list[float]]:
    """Call each side ``warmup`` times (discarded), then ``repeats`` rounds alternating the order
    (A B, B A, A B, ...). Each call returns one measurement; returns ``{side: [measurements]}``."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    names = list(sides)
    for _ in range(warmup):
        for name in names:
            sides[name]()
    measured: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            measured[name].append(sides[name]())
    return measured


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float]) -> list[float]:
    """[min, max] of the repetitions, to show the noise next to a median."""
    return [float(min(values)), float(max(values))]


def timed(fn: Callable[[], Any]) -> float:
    """Seconds that ``fn()`` takes (wall clock)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (the machine is shared: timings depend on them)."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_description() -> dict[str, Any]:
    """Machine, library versions and thread count, recorded with every results file."""
    import torch

    info = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:  # pragma: no cover
        info["torchvision"] = None
    return info


def format_table(results: list[BenchResult]) -> str:
    """A fixed-width text table: name, ratio, target, met."""
    rows = [("benchmark", "ratio", "target", "met")]
    for r in results:
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.3g}"
        if not r.measured:
            ratio = "not measured"
        bound = ">=" if r.better == "higher" else "<="
        target = "-" if r.target is None else f"{bound} {r.target:g}"
        met = {True: "yes", False: "NO", None: "-"}[r.met]
        rows.append((r.name, ratio, target, met))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
