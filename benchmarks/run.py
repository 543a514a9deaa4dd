"""Run the benchmarks, print a table of ratios and write results.json (``make bench``).

    .venv/bin/python benchmarks/run.py --out benchmarks/results.json          # everything, ~10 min on 2 cores
    .venv/bin/python benchmarks/run.py --quick --out /tmp/results.json        # tiny sizes (the smoke test)
    .venv/bin/python benchmarks/run.py --only throughput,packing              # some benchmarks

results.json is a list with one entry per benchmark: ``name``, ``description``, ``figures`` (the
measured numbers, medians over ``figures["repeats"]`` repetitions), ``ratio``, ``target``, ``met``,
``measured``, ``note`` and ``context`` (machine, versions, load average before and after, wall time,
quick or not); see :class:`common.BenchResult`.
Speed is never asserted in the test suite; the numbers and how they were obtained go in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: Benchmark groups in the order they run.
GROUPS = (
    "throughput",
    "flops",
    "packing",
    "ntk",
    "sweep",
    "expansion",
    "cli",
    "calibration",
    "gpu",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results.json"), help="results file (JSON)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument(
        "--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)"
    )
    args = parser.parse_args(argv)
    args.only = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in args.only if g not in GROUPS]
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {unknown}; choose from {list(GROUPS)}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1 (got {args.threads})")
    return args


def run_group(group: str, quick: bool):
    """The BenchResults of one benchmark group."""
    if group == "throughput":
        import throughput

        return throughput.bench_train_throughput(throughput.QUICK if quick else throughput.Sizes())
    if group == "flops":
        import throughput

        return throughput.bench_flop_efficiency(throughput.QUICK if quick else throughput.Sizes())
    if group == "packing":
        import packed_runs

        return packed_runs.bench_packing(
            packed_runs.QUICK if quick else packed_runs.Sizes()
        ) + packed_runs.bench_sweep_packing(
            packed_runs.SWEEP_QUICK if quick else packed_runs.SweepSizes(), quick=quick
        )
    if group == "ntk":
        import ntk_bench

        return ntk_bench.bench_ntk(ntk_bench.QUICK if quick else ntk_bench.Sizes())
    if group == "sweep":
        import sweep_overhead

        return sweep_overhead.bench_sweep_overhead(
            sweep_overhead.QUICK if quick else sweep_overhead.Sizes()
        )
    if group == "expansion":
        import sweep_expansion

        return sweep_expansion.bench_sweep_expansion(
            sweep_expansion.QUICK if quick else sweep_expansion.Sizes()
        )
    if group == "cli":
        import cli_startup

        return cli_startup.bench_cli_startup(cli_startup.QUICK if quick else cli_startup.Sizes())
    if group == "calibration":
        import calibration

        return calibration.bench_calibration(calibration.QUICK if quick else calibration.Sizes())
    if group == "gpu":
        import gpu

        return gpu.bench_gpu(quick=quick)
    raise ValueError(f"unknown benchmark group {group!r}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from common import format_table, load_average, machine_description

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    machine = machine_description()
    load_start = load_average()
    results = []
    for group in args.only:
        t0, load_before = time.perf_counter(), load_average()
        print(f"[{group}] running ...", file=sys.stderr, flush=True)
        group_results = run_group(group, args.quick)
        wall_s = time.perf_counter() - t0
        for r in group_results:
            r.context = {
                "group": group,
                "quick": args.quick,
                "load_average_before": load_before,
                "load_average_after": load_average(),
                "group_wall_s": round(wall_s, 1),
                "machine": machine,
            }
        results += group_results
        print(f"[{group}] done in {wall_s:.1f} s", file=sys.stderr, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.to_dict() for r in results], indent=1) + "\n")
    print(format_table(results))
    print(
        f"\n{machine['cpu']}, {machine['cpu_count']} cores, torch {machine['torch']} "
        f"({machine['torch_threads']} threads); load average {load_start} -> {load_average()}; "
        f"{time.perf_counter() - started:.0f} s; written {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
