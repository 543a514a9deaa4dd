"""``initmem bridge DIR``: forgetting measured from a sweep's logs, predicted by the theory, fitted."""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bridge",
        help=SUBCOMMANDS["bridge"],
        description="Measures how fast each pipeline forgets alpha (norm memory, accuracy spread, "
        "prediction disagreement; bootstrap over seeds), computes the theory's prediction for the "
        "same runs (accumulated regularization, normalized-weight laws, the exact SGD identity), fits "
        "one against the other and tests which unit of forgetting collapses the pipelines. Writes "
        "fit.csv, units.csv, the other tables, report.md and PNG figures.",
    )
    parser.add_argument("dir", metavar="DIR", help="sweep folder (initmem sweep run ... --out DIR)")
    parser.add_argument(
        "--out", metavar="DIR", default=None, help="output folder (default: DIR/bridge)"
    )
    parser.add_argument(
        "--n-boot", type=int, default=200, metavar="N", help="bootstrap resamples (default 200)"
    )
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from initmem.bridge import BridgeDataError, fit
    from initmem.empirical.sweep import SweepError as SweepFolderError
    from initmem.empirical.tables import load_sweep

    if args.n_boot < 0:
        return fail(f"--n-boot must be >= 0 (got {args.n_boot})")
    try:
        report = fit(load_sweep(args.dir), n_boot=args.n_boot)
    except (BridgeDataError, SweepFolderError) as err:
        return fail(str(err))
    out = Path(args.out) if args.out else Path(args.dir) / "bridge"
    written = report.save(out, figures=not args.no_figures)
    print(report.summary())
    print(f"bridge: {len(written)} files in {out} (fit.csv, units.csv, report.md, ...)")
    return 0
