"""``initmem study DIR --doc PATH``: the unit-of-forgetting study of a sweep folder, as a document.

    initmem sweep run units --out runs/units
    initmem study runs/units --doc docs/unit-of-forgetting.md

Writes the Markdown document and its figures (``PATH`` without ``.md``, as a folder of PNGs) and the
study's tables as CSV under ``DIR/study``; prints the verdict.
"""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "study",
        help=SUBCOMMANDS["study"],
        description="Analyse a finished sweep (e.g. the 'units' preset): the design in units of "
        "forgetting, the pre-registered comparison of accumulated regularization against epochs, "
        "function memory against its permutation null, measured vs predicted forgetting times and "
        "where the memory lives; every finding computed from the folder.",
    )
    parser.add_argument("dir", metavar="DIR", help="sweep folder")
    parser.add_argument(
        "--doc",
        metavar="PATH",
        default=None,
        help="write the document here (figures in PATH without .md/); default DIR/study/study.md",
    )
    parser.add_argument(
        "--n-boot", type=int, default=200, metavar="N", help="bootstrap resamples (default 200)"
    )
    parser.add_argument(
        "--wall-time",
        metavar="TEXT",
        default="",
        help="how long the sweep took, as measured (a sentence for the document's reproduce section)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os
    import time
    from pathlib import Path

    from initmem.bridge import BridgeDataError
    from initmem.bridge.framing import reproduce_command
    from initmem.bridge.study import unit_study
    from initmem.bridge.study_plots import save_study_figures
    from initmem.empirical.sweep import SweepError as SweepFolderError

    if args.n_boot < 1:
        return fail(f"--n-boot must be >= 1 (got {args.n_boot})")
    start = time.monotonic()
    try:
        study = unit_study(args.dir, n_boot=args.n_boot)
    except (BridgeDataError, SweepFolderError) as err:
        return fail(str(err))
    tables = Path(args.dir) / "study"
    tables.mkdir(parents=True, exist_ok=True)
    for name in ("design", "function", "norm_end", "groups", "measured_vs_predicted"):
        getattr(study, name).to_csv(tables / f"{name}.csv", index=False)
    study.bridge.units.to_csv(tables / "units.csv", index=False)
    study.bridge.decision.to_csv(tables / "decision.csv", index=False)
    doc = Path(args.doc) if args.doc else tables / "study.md"
    figures = save_study_figures(study, doc.with_suffix(""))
    relative = {k: os.path.relpath(v, doc.parent) for k, v in figures.items()}
    command = reproduce_command(args.dir, doc, n_boot=args.n_boot, wall_time=args.wall_time)
    doc.parent.mkdir(parents=True, exist_ok=True)
    wall = f"{args.wall_time} ".lstrip() + (
        f"The analysis (`initmem study`, {args.n_boot} bootstrap resamples) took "
        f"{time.monotonic() - start:.0f} s."
    )
    doc.write_text(study.markdown(relative, command=command, wall=wall))
    for line in study.verdict():
        print(line)
    for line in study.group_sentences():
        print(line)
    print(f"study: {doc} (+ {len(figures)} figures), tables in {tables}")
    return 0
