"""``initmem report DIR``: the Markdown report (with PNG figures) of a sweep folder."""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, add_runs_arguments, fail, interpolation_problem


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help=SUBCOMMANDS["report"],
        description="Spread of test accuracy across alpha per pipeline, disagreement, interpolation, "
        "accuracy against alpha, training curves and per-layer effective learning rates.",
    )
    add_runs_arguments(parser)
    parser.add_argument(
        "--n-boot", type=int, default=2000, metavar="N", help="bootstrap replicates (default 2000)"
    )
    parser.add_argument(
        "--out",
        metavar="OUT",
        default=None,
        help="write report.md, figures/ and tables/ here (default: DIR for one sweep folder, which is only read "
        "otherwise; ./initmem-report for run folders)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from initmem.empirical.memory import spread_table
    from initmem.empirical.report import write_report
    from initmem.empirical.runfolder import DamagedFileError
    from initmem.empirical.sweep import SweepError
    from initmem.empirical.tables import load_runs

    if (problem := interpolation_problem(args.interpolation)) is not None:
        return fail(problem)
    try:
        path = write_report(
            args.dirs, n_boot=args.n_boot, out=args.out, interpolation=args.interpolation
        )
    except (SweepError, DamagedFileError) as err:
        return fail(str(err))
    runs = load_runs(args.dirs, interpolation=args.interpolation)
    spread = spread_table(runs, n_boot=args.n_boot, with_disagreement=False)
    print(format_spread(spread))
    if not args.no_groups:
        from initmem.bridge.groups import try_group_section

        print(try_group_section(runs, path.parent, path))
    print(f"report: {path}")
    return 0


def format_spread(spread) -> str:
    """The spread table as aligned text for the terminal."""
    if spread.empty or not spread["n_runs"].any():
        return "no finished runs yet"
    width = max(len("pipeline"), *(len(str(label)) for label in spread["label"]))
    lines = [f"{'pipeline':<{width}}  spread (pp)  95% CI (pp)    interpolated  min train acc (%)"]
    for _, row in spread.iterrows():
        if not row.get("n_runs", 0):
            lines.append(f"{row['label']:<{width}}  {'-':>11}  (no finished runs)")
            continue
        if row["n_alphas"] != 1 and not row["spread_pp"] == row["spread_pp"]:  # NaN: M1 < 2 seeds
            used = int(row.get("n_seeds_used", 0))
            lines.append(
                f"{row['label']:<{width}}  {'-':>11}  ({used} seed(s) interpolate at every alpha)"
            )
            continue
        if row["n_alphas"] == 1:  # a spread over one alpha is 0 by definition: no finding
            shown, ci = "-", "(one alpha)"
        else:
            shown = f"{row['spread_pp']:.1f}"
            ci = (
                f"[{row['ci_low_pp']:.1f}, {row['ci_high_pp']:.1f}]"
                if row["ci_low_pp"] == row["ci_low_pp"]
                else "(one seed)"
                if row["n_seeds"] == 1
                else "-"
            )
        lines.append(
            f"{row['label']:<{width}}  {shown:>11}  {ci:<13}  "
            f"{'yes' if row['interpolated'] else 'no':<12}  {row['min_train_acc_pct']:>17.1f}"
        )
    return "\n".join(lines)
