"""``initmem bridge DIR``: forgetting measured from a sweep's logs, predicted by the theory, fitted."""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, add_runs_arguments, fail, interpolation_problem

#: Where ``initmem bridge RUN ...`` writes when no --out is given (working folder).
RUNS_BRIDGE_DIR = "initmem-bridge"


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
    add_runs_arguments(parser)
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="output folder (default: DIR/bridge for one sweep folder, ./initmem-bridge for run "
        "folders)",
    )
    parser.add_argument(
        "--n-boot", type=int, default=200, metavar="N", help="bootstrap resamples (default 200)"
    )
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from initmem.bridge import BridgeDataError, fit
    from initmem.empirical.runfolder import DamagedFileError
    from initmem.empirical.sweep import SweepError as SweepFolderError
    from initmem.empirical.tables import load_runs

    if args.n_boot < 0:
        return fail(f"--n-boot must be >= 0 (got {args.n_boot})")
    if (problem := interpolation_problem(args.interpolation)) is not None:
        return fail(problem)
    try:
        runs = load_runs(args.dirs, interpolation=args.interpolation)
        report = fit(runs, n_boot=args.n_boot)
    except (BridgeDataError, SweepFolderError, DamagedFileError) as err:
        return fail(str(err))
    one_sweep = len(args.dirs) == 1 and (Path(args.dirs[0]) / "manifest.json").is_file()
    default = Path(args.dirs[0]) / "bridge" if one_sweep else Path(RUNS_BRIDGE_DIR)
    out = Path(args.out) if args.out else default
    written = report.save(out, figures=not args.no_figures)
    print(report.summary())
    if not args.no_groups:
        from initmem.bridge.groups import try_group_section

        print(try_group_section(runs, out, out / "report.md"))
    print(f"bridge: {len(written)} files in {out} (fit.csv, units.csv, report.md, ...)")
    return 0
