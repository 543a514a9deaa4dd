"""Benchmark 7: the command line's start-up, ``initmem --help`` and ``initmem sweep status DIR``.

Both commands answer from a few small files, so their time is the interpreter's start plus the imports
they pay for: before the imports were made lazy, ``initmem.empirical`` loaded torch and the whole
training stack (about 2.4 s on this machine) for any sweep command. ``DIR`` is a sweep folder shaped
like the demo's (``empirical/presets/demo.toml``: 24 runs, all finished), written here without
training: the manifest by ``prepare_sweep``, every run's ``result.json`` and, for the first runs, a
full run folder (config, log, tables, predictions) through :class:`~initmem.empirical.runfolder.RunFiles`.

Each command runs as a fresh process, interleaved with ``python -c pass`` (the interpreter's own
start-up, for scale); the figures are medians of wall-clock seconds. Target: each command under 1 s
(``ratio`` is the median in seconds, ``better`` = lower).

    .venv/bin/python benchmarks/cli_startup.py                               # this checkout's initmem
    .venv/bin/python benchmarks/cli_startup.py --initmem /path/to/.venv/bin/initmem   # another install
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import BenchResult, interleaved, median, spread, timed

from initmem.empirical.runfolder import RunFiles, RunResult
from initmem.empirical.sweep import SweepSpec, prepare_sweep, preset_text

#: Target: seconds per command.
TARGET_S = 1.0


@dataclass(frozen=True)
class Sizes:
    repeats: int = 9
    full_runs: int = 2  # runs written with every file of a run folder (the others: result.json)


QUICK = Sizes(repeats=1, full_runs=1)


def write_demo_folder(folder: Path, full_runs: int) -> int:
    """A finished sweep folder of the demo preset, written without training; returns its run count."""
    runs = prepare_sweep(SweepSpec.from_toml(preset_text("demo"), name="demo"), folder)
    rng = np.random.default_rng(0)
    for index, run in enumerate(runs):
        files = RunFiles(run.run_dir(folder))
        config = run.config
        files.start(config, {"source": "benchmark (no data)"})
        if index < full_runs:
            n_test = config.test_size
            labels = rng.integers(0, 10, n_test)
            for epoch in range(0, config.epochs + 1, config.eval_every):
                pred = np.where(rng.random(n_test) < 0.8, labels, (labels + 1) % 10)
                layers = {
                    f"layer{k}.conv.weight": {"weight_norm": 1.0 + k, "eff_lr": config.lr / (1 + k)}
                    for k in range(8)
                }
                record = {
                    "epoch": epoch,
                    "step": 31 * epoch,
                    "test_acc": float(np.mean(pred == labels)),
                }
                files.append(record | {"layers": layers}, pred)
            files.write_tables()
            files.write_predictions(labels, pred)
        files.write_result(
            RunResult(
                status="completed",
                best_val_acc=0.8,
                test_acc=0.8,
                best_epoch=config.epochs,
                final_train_acc=1.0,
                final_test_acc=0.8,
                epochs_run=config.epochs,
                steps_run=31 * config.epochs,
                diverged_step=None,
                reason=None,
                wall_time=25.0,
                hash=run.hash,
                run_dir=str(files.dir),
            )
        )
    return len(runs)


def bench_cli_startup(sizes: Sizes, initmem: str | None = None) -> list[BenchResult]:
    """Median wall-clock seconds of ``initmem --help`` and ``initmem sweep status DIR`` (fresh
    processes), beside ``python -c pass``; ``initmem`` defaults to the one beside this interpreter."""
    initmem = initmem or str(Path(sys.executable).with_name("initmem"))
    python = str(Path(initmem).with_name("python"))
    with tempfile.TemporaryDirectory(prefix="initmem-cli-") as tmp:
        folder = Path(tmp) / "demo"
        n_runs = write_demo_folder(folder, sizes.full_runs)
        commands = {
            "python": [python, "-c", "pass"],
            "help": [initmem, "--help"],
            "status": [initmem, "sweep", "status", str(folder)],
        }
        for command in commands.values():  # fail loudly, not with a fast error message timed
            subprocess.run(command, check=True, capture_output=True)
        seconds = interleaved(
            {
                name: (
                    lambda c=command: timed(
                        lambda: subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
                    )
                )
                for name, command in commands.items()
            },
            sizes.repeats,
        )
    base = {
        "python_start_s": median(seconds["python"]),
        "runs_in_folder": n_runs,
        "repeats": sizes.repeats,
        "initmem": initmem,
    }
    results = []
    for name, label in (("help", "initmem --help"), ("status", "initmem sweep status DIR")):
        figures = base | {
            f"{name}_s": median(seconds[name]),
            f"{name}_spread_s": spread(seconds[name]),
        }
        results.append(
            BenchResult(
                name=f"cli_startup_{name}",
                description=f"`{label}` in a fresh process (DIR: a finished demo-shaped sweep "
                f"folder); ratio = median seconds (not a ratio), target under {TARGET_S:g} s",
                figures=figures,
                ratio=figures[f"{name}_s"],
                target=TARGET_S,
                better="lower",
            )
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--initmem", default=None, help="the initmem executable to time")
    parser.add_argument("--repeats", type=int, default=Sizes.repeats)
    args = parser.parse_args(argv)
    for result in bench_cli_startup(Sizes(repeats=args.repeats), args.initmem):
        print(f"{result.name}: {result.figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
