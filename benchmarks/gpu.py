"""Benchmark 6: the GPU, as one prepared script (at most 10 minutes of GPU time).

    .venv/bin/python benchmarks/gpu.py --out benchmarks/gpu_results.json     # on a GPU machine
    .venv/bin/python benchmarks/gpu.py --smoke --out /tmp/gpu_smoke.json      # tiny sizes, CPU

What it measures, in this order (each part is skipped, and reported as not measured, once the time
budget ``--budget-s`` is spent):

1. ResNet-9 width 1 on CIFAR-shaped synthetic data, batch 128 and 512, bf16 autocast + channels_last,
   without and with ``torch.compile``: images per second of one timed epoch of 40,000 images after a
   warm-up epoch (``gpu_train_check.time_epochs``: the real training loop, gradient norms and
   divergence checks included). Target: at least 50,000 images/s at batch 512 (H200-class GPU).
2. Benchmark 1 on the GPU: our trainer against the textbook pipeline (PIL + DataLoader with
   ``min(8, cores)`` workers + eager fp32) at widths 1/8 and 1/4, batch 128. Target: at least 5x.
3. Benchmark 3 on the GPU: 8 runs of width-1/8 ResNet-9 packed (grouped / vmap) against one after
   another. Target: packing faster.

Results use the schema of ``run.py`` (a list of entries); ``run.py`` calls :func:`bench_gpu`, which on
a machine without CUDA runs this script's code at tiny sizes on the CPU and reports it as not
measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from common import BenchResult, format_table, machine_description  # noqa: E402

#: Target of part 1: images per second at batch 512, width 1, on an H200-class GPU.
GPU_IMAGES_PER_S_TARGET = 50_000


@dataclass(frozen=True)
class GpuSizes:
    device: str = "cuda"
    images: int = 40_000
    width: float = 1.0
    batch_sizes: tuple[int, ...] = (128, 512)
    compiles: tuple[bool, ...] = (False, True)
    precision: str = "bf16"
    bench1_train_size: int = 10_240
    bench1_repeats: int = 3
    pack_train_size: int = 2048
    pack_repeats: int = 3


SMOKE = GpuSizes(
    device="cpu",
    images=64,
    width=0.0625,
    batch_sizes=(16, 32),
    compiles=(False,),
    precision="fp32",
    bench1_train_size=64,
    bench1_repeats=1,
    pack_train_size=16,
    pack_repeats=1,
)


def part1_width1(sizes: GpuSizes, deadline: float) -> list[BenchResult]:
    """ResNet-9 at ``sizes.width`` through the real trainer: one entry per (batch, compile); the
    configurations left when ``deadline`` (a ``time.perf_counter()`` value) passes are skipped."""
    from gpu_train_check import synthetic_config, time_epochs

    from initmem.empirical.data import load_splits

    base = synthetic_config(
        sizes.images,
        sizes.width,
        min(sizes.batch_sizes),
        sizes.device,
        sizes.precision,
        out_dir="runs/gpu_bench",
    )
    data = load_splits(base, sizes.device)
    results = []
    for compile_model in sizes.compiles:
        for batch_size in sizes.batch_sizes:
            name = f"gpu_resnet9_w{sizes.width:g}_b{batch_size}_" + (
                "compiled" if compile_model else "eager"
            )
            big = batch_size == max(sizes.batch_sizes)
            if time.perf_counter() > deadline:
                results.append(_skipped(name, "the time budget was spent"))
                continue
            row = time_epochs(base.replace(batch_size=batch_size, compile=compile_model), data)
            results.append(
                BenchResult(
                    name=name,
                    description=(
                        f"ResNet-9 width {sizes.width:g}, batch {batch_size}, {sizes.precision} + "
                        f"channels_last, torch.compile {'on' if compile_model else 'off'}, "
                        f"{row['device']}: images/s of one epoch of {row['images']:,} images after "
                        f"a warm-up epoch; ratio images/s / {GPU_IMAGES_PER_S_TARGET:,}"
                    ),
                    figures={**row, "repeats": 1},
                    ratio=row["images_per_s"] / GPU_IMAGES_PER_S_TARGET,
                    target=1.0 if big else None,
                )
            )
            print(
                f"  batch {batch_size} compile {compile_model}: {row['images_per_s']:,.0f} images/s "
                f"(warm-up {row['warmup_s']:.1f} s)",
                flush=True,
            )
    return results


def part2_textbook(sizes: GpuSizes, deadline: float) -> list[BenchResult]:
    import throughput

    bench = throughput.Sizes(
        widths=(0.125, 0.25) if sizes.device != "cpu" else (0.0625,),
        batch_size=128 if sizes.device != "cpu" else 16,
        train_size=sizes.bench1_train_size,
        repeats=sizes.bench1_repeats,
        device=sizes.device,
        textbook_workers=min(8, os.cpu_count() or 1) if sizes.device != "cpu" else 2,
    )
    return throughput.bench_train_throughput(bench)


def part3_packing(sizes: GpuSizes, deadline: float) -> list[BenchResult]:
    import packed_runs

    bench = packed_runs.Sizes(
        k=8 if sizes.device != "cpu" else 2,
        width=0.125 if sizes.device != "cpu" else 0.0625,
        batch_size=32 if sizes.device != "cpu" else 8,
        train_size=sizes.pack_train_size,
        repeats=sizes.pack_repeats,
        device=sizes.device,
    )
    results = packed_runs.bench_packing(bench)
    for r in results:
        r.name = f"gpu_{r.name}" if sizes.device != "cpu" else r.name
    return results


PARTS = (("width1", part1_width1), ("textbook", part2_textbook), ("packing", part3_packing))


def _skipped(name: str, why: str) -> BenchResult:
    return BenchResult(
        name=name, description="a part of benchmarks/gpu.py", measured=False, note=f"skipped: {why}"
    )


def run_parts(sizes: GpuSizes, budget_s: float) -> list[BenchResult]:
    """Every part while the budget lasts; parts left over are recorded as not measured. On a GPU,
    cudnn autotuning is on for every part (as ``train()`` turns it on for a run by default)."""
    started = time.perf_counter()
    deadline = started + budget_s
    if sizes.device.startswith("cuda"):
        torch.backends.cudnn.benchmark = True
    results: list[BenchResult] = []
    for name, part in PARTS:
        spent = time.perf_counter() - started
        if spent > budget_s:
            results.append(
                _skipped(f"gpu_{name}", f"the time budget of {budget_s:.0f} s was spent")
            )
            continue
        print(f"[gpu] part {name} ...", flush=True)
        results += part(sizes, deadline)
    return results


def bench_gpu(quick: bool = False) -> list[BenchResult]:
    """For run.py: the full script on a CUDA machine (unless ``quick``), else the tiny CPU smoke run,
    reported as not measured."""
    if torch.cuda.is_available() and not quick:
        return run_parts(GpuSizes(), budget_s=540)
    why = "no CUDA device here" if not torch.cuda.is_available() else "--quick"
    return _as_smoke(run_parts(SMOKE, budget_s=600), why)


def _as_smoke(results: list[BenchResult], why: str) -> list[BenchResult]:
    """Mark the tiny CPU run's entries as not measured (they only show that the script works)."""
    for r in results:
        r.name = f"gpu_smoke_{r.name}"
        r.measured = False
        r.met = None
        r.note = (
            f"not measured ({why}): benchmarks/gpu.py ran at tiny sizes on the CPU to check that "
            "it works; its figures are not GPU measurements"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "gpu_results.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument(
        "--budget-s", type=float, default=540.0, help="stop starting parts after this"
    )
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        parser.error("no CUDA device: use --smoke for a CPU check of the script")
    sizes = SMOKE if args.smoke else GpuSizes()
    machine = machine_description()
    print(f"[gpu] {machine['cuda'] or machine['cpu']}, torch {machine['torch']}", flush=True)
    started = time.perf_counter()
    results = run_parts(sizes, args.budget_s)
    if args.smoke:
        results = _as_smoke(results, "--smoke")
    for r in results:
        r.context = {
            "machine": machine,
            "smoke": args.smoke,
            "wall_s": time.perf_counter() - started,
        }
    Path(args.out).write_text(json.dumps([r.to_dict() for r in results], indent=1) + "\n")
    print(format_table(results))
    print(f"\n{time.perf_counter() - started:.0f} s; written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
