"""``initmem study DIR --doc PATH``: the unit-of-forgetting study of a sweep folder, as a document.

    initmem sweep run units --out runs/units
    initmem study runs/units --doc docs/unit-of-forgetting.md

Writes the Markdown document and its figures (``PATH`` without ``.md``, as a folder of PNGs; a
``PATH`` without a suffix gets ``.md``) and the study's tables as CSV under ``--out`` (default
``DIR/study``; the sweep folder is only read otherwise); prints the verdict. The outputs are checked
before any work. A sweep that is not finished (runs pending, running, failed or damaged), runs
skipped as damaged and runs trained on different data sets are named in the document's notes.
Figure links are URL-encoded and the printed commands shell-quoted. The document states how long
the sweep took and at what load from the folder's own records (``sessions.jsonl``, written by each
``initmem sweep run``), so the same folder gives the same document; the analysis time is printed.
``--n-boot`` and ``--calibrate`` default to the sweep file's ``[study]`` table (the analysis fixed
with the sweep), then to 200 and 0.

A sweep whose runs train more than one model (the ``architectures`` preset) gets the architectures
study instead (:mod:`initmem.bridge.study.architectures`: per architecture and pipeline the spread with its
null, the norm memory where defined, the pre-registered predictions against what was measured, and a
verdict per architecture), written the same way (``--doc docs/architectures.md``; its tables
``cells.csv`` and ``predictions.csv`` under ``--out``); ``--kind`` chooses explicitly.
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
        help="write the document here (figures in PATH without .md/; .md added to a PATH without "
        "a suffix); default OUT/study.md",
    )
    parser.add_argument(
        "--out",
        metavar="OUT",
        default=None,
        help="write the tables here (default: DIR/study; the sweep folder is only read)",
    )
    parser.add_argument(
        "--kind",
        choices=("auto", "units", "architectures"),
        default="auto",
        help="which study: units (the unit of forgetting), architectures (several models), or "
        "auto: architectures when the runs train more than one model (default)",
    )
    parser.add_argument(
        "--n-boot",
        type=int,
        default=None,
        metavar="N",
        help="bootstrap resamples (default: the sweep file's [study] n_boot, else 200)",
    )
    parser.add_argument(
        "--calibrate",
        type=int,
        default=None,
        metavar="N",
        help="calibrate the verdicts on N synthetic replicas of this design per truth (units: "
        "initmem.bridge.study.calibrate, about 0.1 s each for 12 pipelines, without it a verdict "
        "for epochs says cannot tell; architectures: "
        "initmem.bridge.study.architecture_calibration); default: the sweep file's [study] "
        "calibrate, else 0: off",
    )
    parser.add_argument(
        "--wall-time",
        metavar="TEXT",
        default="",
        help="a sentence added to the document's reproduce section after the sweep's own record of "
        "its wall time and load (e.g. conditions the record cannot know)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os
    import time
    from pathlib import Path
    from urllib.parse import quote

    from initmem.bridge import BridgeDataError
    from initmem.bridge.study import unit_study
    from initmem.bridge.study.architectures import is_architecture_sweep
    from initmem.bridge.study.figures import save_study_figures
    from initmem.bridge.study.framing import reproduce_command, study_settings
    from initmem.empirical.backends import available_cpus
    from initmem.empirical.sweep import SweepError as SweepFolderError
    from initmem.empirical.sweep import sweep_status

    fixed = study_settings(args.dir)  # the analysis fixed with the sweep, unless the line says
    args.n_boot = fixed["n_boot"] if args.n_boot is None else args.n_boot
    args.calibrate = fixed["calibrate"] if args.calibrate is None else args.calibrate
    if args.n_boot < 1:
        return fail(f"--n-boot must be >= 1 (got {args.n_boot})")
    if args.calibrate < 0:
        return fail(f"--calibrate must be >= 0 (got {args.calibrate})")
    start = time.monotonic()
    sweep_dir = Path(args.dir)
    tables = Path(args.out) if args.out else sweep_dir / "study"
    doc = Path(args.doc) if args.doc else tables / "study.md"
    if not doc.suffix:
        doc = doc.with_name(doc.name + ".md")
    problem = output_problem(tables, doc)
    if problem is not None:
        return fail(problem)
    try:
        status = sweep_status(sweep_dir)
        if args.kind == "architectures" or (
            args.kind == "auto" and is_architecture_sweep(sweep_dir)
        ):
            return architectures(args, sweep_dir, tables, doc, status, start)
        study = unit_study(
            sweep_dir, n_boot=args.n_boot, calibrate=args.calibrate, workers=available_cpus()
        )
    except (BridgeDataError, SweepFolderError) as err:
        return fail(str(err))
    study.notes += folder_notes(sweep_dir, status)
    tables.mkdir(parents=True, exist_ok=True)
    for name in (
        "design",
        "function",
        "function_verdicts",
        "accuracy_levels",
        "accuracy_comparison",
        "norm_end",
        "groups",
        "measured_vs_predicted",
        "spread_by_seeds",
        "spread_power",
        "unit_by_seeds",
        "alpha_grid",
        "rivals",
        "mechanisms",
        "length_pairs",
    ):
        getattr(study, name).to_csv(tables / f"{name}.csv", index=False)
    study.bridge.units.to_csv(tables / "units.csv", index=False)
    study.bridge.decision.to_csv(tables / "decision.csv", index=False)
    if study.calibration is not None:
        study.calibration.calibration.rates().to_csv(tables / "calibration.csv", index=False)
        study.calibration.calibration.errors().to_csv(
            tables / "calibration_errors.csv", index=False
        )
        if not study.calibration.power.empty:
            study.calibration.power.to_csv(tables / "power.csv", index=False)
    figures = save_study_figures(study, doc.with_suffix(""))
    relative = {k: quote(os.path.relpath(v, doc.parent)) for k, v in figures.items()}
    command = reproduce_command(
        args.dir, doc, n_boot=args.n_boot, wall_time=args.wall_time, calibrate=args.calibrate
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(study.markdown(relative, command=command, wall=measured(args, sweep_dir)))
    if args.calibrate > 0 and study.no_decision:
        print(
            f"--calibrate {args.calibrate}: nothing to calibrate, this design has no unit decision "
            f"({study.no_decision})"
        )
    for line in study.verdict():
        print(line)
    for line in study.group_sentences():
        print(line)
    print(f"study: {doc} (+ {len(figures)} figures), tables in {tables}")
    if study.calibration is not None:  # printed, not written: the document stays reproducible
        print(f"calibration took {study.calibration.seconds:.0f} s")
    print(f"analysis took {time.monotonic() - start:.0f} s")
    return 0


def architectures(args, sweep_dir, tables, doc, status, start) -> int:
    """The architectures study of the folder (:mod:`initmem.bridge.study.architectures`), its document
    and tables; prints the verdict per architecture."""
    import time

    from initmem.bridge.study.architecture_calibration import calibrate_study
    from initmem.bridge.study.architectures import architecture_study
    from initmem.bridge.study.framing import reproduce_command

    study = architecture_study(sweep_dir)
    if args.calibrate:
        calibrate_study(study, args.calibrate)
    study.notes += folder_notes(sweep_dir, status)
    tables.mkdir(parents=True, exist_ok=True)
    study.cells.to_csv(tables / "cells.csv", index=False)
    if not study.calibration.empty:
        study.calibration.to_csv(tables / "calibration.csv", index=False)
    study.predictions.to_csv(tables / "predictions.csv", index=False)
    command = reproduce_command(
        args.dir, doc, n_boot=args.n_boot, wall_time=args.wall_time, calibrate=args.calibrate
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(study.markdown(command=command, wall=measured(args, sweep_dir)))
    for line in study.verdict():
        print(line)
    print(f"study: {doc}, tables in {tables}")
    print(f"analysis took {time.monotonic() - start:.0f} s")
    return 0


def measured(args, sweep_dir) -> str:
    """The document's sentence on time: the sweep's own records (``sessions.jsonl``,
    :func:`initmem.empirical.sessions.sessions_sentence`) and the ``--wall-time`` text. The
    analysis's own time is printed, not written: the same folder gives the same document."""
    from initmem.empirical.sessions import read_sessions, sessions_sentence

    return " ".join(t for t in (sessions_sentence(read_sessions(sweep_dir)), args.wall_time) if t)


def output_problem(tables, doc) -> str | None:
    """Why the study cannot write its tables folder, its document or the document's figure folder
    (checked before any work), or None."""
    import os

    figures = doc.with_suffix("")
    for path, kind in ((tables, "folder"), (figures, "folder"), (doc, "file")):
        if path.exists() and (path.is_dir() != (kind == "folder")):
            what = "a folder" if path.is_dir() else "a file"
            return f"{path} is {what}; the study writes a {kind} there (choose another path)"
        existing = next(p for p in (path, *path.parents) if p.exists())
        if existing == path and kind == "file":  # a document written before: overwritten
            if not os.access(path, os.W_OK):
                return f"{path}: cannot write there (the file is not writable)"
            continue
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            return f"{path}: cannot write there ({existing} is not a writable folder)"
    return None


def folder_notes(sweep_dir, status) -> list[str]:
    """The document's notes on the folder itself: a sweep not finished (named as such, with its
    counts), runs skipped as damaged, runs trained on different data sets."""
    import json

    from initmem.empirical import runfolder
    from initmem.empirical.sweep import read_manifest

    notes = []
    if status.done < status.total:
        notes.append(
            f"This sweep is not finished ({status.summary()}): every finding here is of the "
            f"{status.done} runs done so far and may change as the others finish."
        )
    runs = read_manifest(sweep_dir)
    damaged = [
        (run, damage)
        for run in runs
        if (damage := runfolder.run_damage(run.run_dir(sweep_dir), run.hash))
    ]
    if damaged:
        notes.append(
            f"Skipped as damaged ({len(damaged)}): "
            + "; ".join(f"{run.hash} ({run.variant}): {damage}" for run, damage in damaged)
        )
    contents: dict[str, set[str]] = {}  # per split (data set, sizes, indices): what it held
    for run in runs:
        record = runfolder.read_data_record(run.run_dir(sweep_dir))
        if record is not None:
            held = ("source", "mean", "std")
            split = {k: v for k, v in record.items() if "labels" not in k and k not in held}
            content = {k: record.get(k) for k in record if "labels" in k}
            content |= {"mean": record.get("mean"), "std": record.get("std")}
            key = json.dumps(split, sort_keys=True)
            contents.setdefault(key, set()).add(json.dumps(content, sort_keys=True))
    if any(len(held) > 1 for held in contents.values()):
        notes.append(
            "Runs of the same data split were trained on different copies of the data (their "
            "config.json records other labels or pixel statistics): comparisons across them mix "
            "data sets."
        )
    return notes
