"""``initmem calibrate SOURCE``: how often would the study's verdicts be wrong on this design?

    initmem calibrate units --replicas 200 --out runs/units-calibration
    initmem calibrate runs/mine --replicas 200 --power

``SOURCE``: a sweep folder (its design, and the seed noise measured in it), a sweep file or a preset
name (its design, the stated default noise). Draws ``--replicas`` synthetic sweeps of the design under
each truth (accumulated regularization, epochs, neither; :mod:`initmem.bridge.study.synthetic`), scores every
verdict of the study (:mod:`initmem.bridge.study.calibrate`) and prints and writes (``--out``, CSV) the tidy
tables: ``rates.csv`` (truth x verdict x said -> rate, Wilson interval), ``errors.csv`` (truth x
verdict -> rate wrong) and, with ``--power``, ``power.csv`` (seeds x pipelines multipliers 1, 2, 4).
"""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help=SUBCOMMANDS["calibrate"],
        description="Calibrate the unit-of-forgetting study's verdicts on synthetic sweeps of a "
        "design with a known answer: error rate of every verdict, coverage of every interval with "
        "a true value, and (--power) power against seeds and pipelines.",
    )
    parser.add_argument("source", metavar="SOURCE", help="sweep folder, sweep file or preset name")
    parser.add_argument(
        "--replicas", type=int, default=200, metavar="N", help="replicas per truth (default 200)"
    )
    parser.add_argument(
        "--n-boot", type=int, default=200, metavar="N", help="bootstrap resamples (default 200)"
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="S",
        help="seeds of the design (default: its own)",
    )
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="K",
        help="keep every K-th pipeline of the design (default 1: all)",
    )
    parser.add_argument(
        "--rules",
        default="rank",
        help="decision rules to score, comma-separated: rank (the study's), loo (the "
        "leave-one-pipeline-out R^2 rule it replaced; slow) (default rank)",
    )
    parser.add_argument(
        "--power", action="store_true", help="also the power table (seeds, pipelines x1, x2, x4)"
    )
    parser.add_argument(
        "--power-replicas", type=int, default=100, metavar="N", help="replicas per power cell"
    )
    for flag, what in (
        (
            "--scale",
            "u0 of the truths in accumulated regularization (default: the median over the "
            "design's pipelines)",
        ),
        ("--epochs-scale", "u0 of the truths in epochs (default: the median)"),
        ("--sigma-norm", "seed noise of the norm memory (default 0.03, or measured in a folder)"),
        ("--sigma-acc", "seed noise of a run's test accuracy, fraction (default 0.01)"),
        ("--gap", "accuracy gap of the extreme alphas at full memory, fraction (default 0.08)"),
    ):
        parser.add_argument(flag, type=float, default=None, metavar="X", help=what)
    parser.add_argument("--out", metavar="DIR", default=None, help="write the CSV tables here")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--workers", type=int, default=1, metavar="W", help="processes (default 1; same tables)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    import pandas as pd

    from initmem.bridge.study import calibrate, synthetic

    for name in ("replicas", "n_boot", "every", "power_replicas", "workers"):
        if getattr(args, name) < 1:
            return fail(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(args, name)})")
    if args.seeds is not None and args.seeds < 2:
        return fail(f"--seeds must be >= 2 (got {args.seeds})")
    rules = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    if not rules or any(r not in ("rank", "loo") for r in rules):
        return fail(f"--rules must be rank, loo or both (got {args.rules!r})")
    start = time.monotonic()
    design = synthetic.design_from(args.source)
    design = synthetic.Design(
        design.pipelines[:: args.every], design.alphas, args.seeds or design.n_seeds
    )
    truths = None
    if Path(args.source).is_dir():
        from initmem.bridge.fitting import fit  # deferred: only a folder has noise to measure
        from initmem.empirical.tables import load_sweep

        truths = calibrate.truths_from(fit(load_sweep(args.source), n_boot=0))
    truths = _with_flags(truths, args)
    result = calibrate.calibrate(
        design,
        args.replicas,
        truths=truths,
        rules=rules,
        n_boot=args.n_boot,
        seed=args.seed,
        workers=args.workers,
    )
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(f"calibration of {design.name}: {args.replicas} replicas per truth")
        print(result.errors().to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    tables = {"rates": result.rates(), "errors": result.errors()}
    if args.power:
        power = calibrate.power_table(
            design,
            args.power_replicas,
            truths=truths,
            n_boot=min(args.n_boot, 100),
            seed=args.seed,
            workers=args.workers,
        )
        tables["power"] = power
        with pd.option_context("display.width", 160, "display.max_rows", 500):
            print(power.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            table.to_csv(out / f"{name}.csv", index=False)
        print(f"tables in {out}")
    print(f"calibration took {time.monotonic() - start:.1f} s")
    return 0


def _with_flags(truths, args):
    """The truths with the noise and scale flags applied (None: all defaults and no flag)."""
    import dataclasses

    from initmem.bridge.study import synthetic

    values = {
        "sigma_norm": args.sigma_norm,
        "sigma_acc": args.sigma_acc,
        "gap": args.gap,
    }
    values = {k: v for k, v in values.items() if v is not None}
    if values.get("sigma_acc") is not None:
        values["sigma_seed"] = 0.0
    scales = {"accumulated": args.scale, "epochs": args.epochs_scale}
    if truths is None and not values and all(v is None for v in scales.values()):
        return None
    truths = truths or synthetic.named_truths()
    out = {}
    for name, truth in truths.items():
        changes = dict(values)
        if scales.get(truth.unit) is not None:
            changes["scale"] = scales[truth.unit]
        out[name] = dataclasses.replace(truth, **changes)
    return out
