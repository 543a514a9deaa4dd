"""Benchmark 8: expanding and validating a sweep of 10^6 runs, streamed vs as a list.

``SweepSpec.iter_runs`` yields one validated run at a time (what ``initmem sweep run --dry-run``
consumes, counting runs per variant); ``SweepSpec.expand`` keeps them all in a list. Each side runs in
a fresh Python process (so its peak memory is its own): the grid is ``alpha x seed`` on the demo base,
``n_runs`` runs for the stream and ``list_runs`` for the list (10^6 as a list needs gigabytes). Figures
per side: wall seconds, microseconds per run, the peak resident memory during the expansion above the
resident memory before it (sampled every 20 ms from /proc/self/statm; MiB) and that per run (bytes). ``ratio`` = list bytes per run / stream bytes per
run (higher is better for the stream; target: >= 10). The stream's memory per run is its duplicate
check (one 64-bit hash per run); the list's is a RunConfig and its SweepRun per run.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common import BenchResult, median

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Sizes:
    n_runs: int = 10**6
    list_runs: int = 10**5
    repeats: int = 1


QUICK = Sizes(n_runs=4000, list_runs=4000, repeats=1)

CHILD = r"""
import json, math, os, sys, threading, time
from initmem.empirical.sweep import SweepSpec

n, mode = int(sys.argv[1]), sys.argv[2]
side = math.isqrt(n)
assert side * side == n, "n_runs must be a square"
spec = SweepSpec.from_dict({
    "base": {"dataset": "fashion-mnist", "width": 0.125, "train_size": 500, "batch_size": 16},
    "grid": {"alpha": [0.25 + 0.001 * i for i in range(side)], "seed": list(range(side))},
})
page = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * page

peak, running = [rss()], [True]

def sample():  # the resident memory's peak during the expansion (every 20 ms)
    while running[0]:
        peak[0] = max(peak[0], rss())
        time.sleep(0.02)

before = peak[0]
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter()
if mode == "stream":
    count = sum(1 for _ in spec.iter_runs(progress=False))
else:
    count = len(spec.expand())
seconds = time.perf_counter() - start
running[0] = False
sampler.join()
peak[0] = max(peak[0], rss())
print(json.dumps({"count": count, "seconds": seconds, "extra_kib": (peak[0] - before) / 1024}))
"""


def measure(n: int, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    values = json.loads(done.stdout.strip().splitlines()[-1])
    assert values["count"] == n, values
    return values


def bench_sweep_expansion(sizes: Sizes = Sizes()) -> list[BenchResult]:
    figures: dict = {"repeats": sizes.repeats}
    per_run = {}
    for mode, n in (("stream", sizes.n_runs), ("list", sizes.list_runs)):
        n = math.isqrt(n) ** 2
        runs = [measure(n, mode) for _ in range(sizes.repeats)]
        seconds = median([r["seconds"] for r in runs])
        extra_mib = median([r["extra_kib"] for r in runs]) / 1024
        per_run[mode] = max(extra_mib * 2**20 / n, 1.0)
        figures |= {
            f"{mode}_runs": n,
            f"{mode}_s": round(seconds, 2),
            f"{mode}_us_per_run": round(1e6 * seconds / n, 1),
            f"{mode}_peak_extra_mib": round(extra_mib, 1),
            f"{mode}_bytes_per_run": round(per_run[mode], 1),
        }
    return [
        BenchResult(
            name="sweep_expansion",
            description=f"expand + validate {figures['stream_runs']:,} runs streamed "
            f"(iter_runs) vs {figures['list_runs']:,} as a list (expand): memory per run",
            figures=figures,
            ratio=per_run["list"] / per_run["stream"],
            target=10.0,
            better="higher",
        )
    ]
