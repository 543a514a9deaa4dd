"""``initmem sweep``: run a sweep file (or a preset) into a folder, show its status, list presets.

    initmem sweep run FILE|PRESET --out DIR [--backend local|submitit|ray] [--workers N] [--pack K]
    initmem sweep status DIR [--json]
    initmem sweep presets

Rerunning ``sweep run`` with the same file and folder skips finished runs and resumes the others.
"""

from __future__ import annotations

import argparse
import json
import sys

from initmem.cli import SUBCOMMANDS, fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=SUBCOMMANDS["sweep"],
        description="Sweeps: one TOML file -> one folder of runs keyed by config hash.",
    )
    commands = parser.add_subparsers(dest="sweep_command", metavar="ACTION")

    run = commands.add_parser(
        "run",
        help="run every unfinished run of a sweep file or preset",
        description="Run a sweep. Finished runs are skipped, unfinished ones resume from last.pt; "
        "failed runs are retried. Options left out take the file's [sweep] table.",
    )
    run.add_argument(
        "file", metavar="FILE", help="sweep TOML file, or a preset name (sweep presets)"
    )
    run.add_argument(
        "--out",
        metavar="DIR",
        help="sweep folder (required, but with --dry-run: nothing is written)",
    )
    run.add_argument("--backend", choices=("local", "submitit", "ray"), help="default: local")
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local: processes; submitit: array tasks at once; ray: CPUs of a local cluster",
    )
    run.add_argument(
        "--runs-per-gpu", type=int, metavar="K", help="runs sharing one GPU (default 1)"
    )
    run.add_argument(
        "--pack",
        type=int,
        metavar="K",
        help="train up to K runs that differ only in alpha/seed as one packed computation "
        "(grouped convolutions; default 1: none). Pays on a GPU or a multi-thread CPU worker",
    )
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config field in every run (repeatable), e.g. --set epochs=1",
    )
    run.add_argument(
        "--submitit",
        dest="submitit_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="submitit executor parameter (repeatable): cluster=local, timeout_min=600, "
        "slurm_partition=gpu, gpus_per_node=1, cpus_per_task=8, mem_gb=32, ...",
    )
    run.add_argument("--ray-address", metavar="ADDR", help="Ray cluster to join (default: local)")
    run.add_argument(
        "--trainer",
        default=None,
        metavar="MODULE:FUNC",
        help="training function taking a RunConfig (default: initmem.empirical.trainer:train)",
    )
    run.add_argument(
        "--update",
        action="store_true",
        help="the folder holds an older version of this sweep: replace its manifest, keep finished runs",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="validate and list the runs; train nothing"
    )
    run.add_argument(
        "--no-predictions",
        action="store_true",
        help="do not write the pre-registered predictions per pipeline (DIR/predictions/; "
        "each builds the model and its NTK on 16 images: seconds for small models, about a "
        "minute for a full-width ResNet on 2 cores)",
    )
    run.add_argument(
        "--no-probe",
        action="store_true",
        help="--dry-run without the gradient-scale probe (no torch): only the G-free proxy of "
        "theory.units, labelled so (the probe: 8 minibatches at init per model, data, batch and "
        "alpha; seconds)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=run_command)

    status = commands.add_parser("status", help="counts of done / running / failed / pending runs")
    status.add_argument("dir", metavar="DIR", help="sweep folder")
    status.add_argument("--json", action="store_true", help="print the counts as JSON")
    status.set_defaults(func=status_command)

    presets = commands.add_parser("presets", help="list the sweep presets shipped with initmem")
    presets.set_defaults(func=presets_command)

    parser.set_defaults(func=lambda args: _help(parser))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run(args: argparse.Namespace) -> int:
    return args.func(args)


def load_spec(file: str, overrides: list[str]):
    """The sweep file or preset, with ``--set`` overrides applied to every run."""
    from initmem.empirical.config import parse_overrides
    from initmem.empirical.sweep import SweepSpec

    spec = SweepSpec.from_file(file)
    values = parse_overrides(overrides)
    return spec.with_overrides(values) if values else spec


def run_command(args: argparse.Namespace) -> int:
    from initmem.empirical.config import ConfigError, parse_overrides
    from initmem.empirical.sweep import DEFAULT_TRAINER, SweepError, run_sweep

    try:
        spec = load_spec(args.file, args.overrides)
        if args.dry_run:
            _print_plan(spec, progress=not args.quiet, probe=not args.no_probe)
            folder = args.out or "DIR"
            print(
                f"pre-registered predictions: {folder}/predictions/<variant>/predictions.csv "
                "(index predictions/index.csv), written before the first run trains"
            )
            return 0
        if not args.out:
            return fail("--out DIR is required to run a sweep (only --dry-run goes without it)")
        if args.no_predictions:
            print("pre-registered predictions: not written (--no-predictions)")
        backend = args.backend or spec.options.get("backend", "local")
        options = {}
        if backend == "submitit":
            options = parse_overrides(args.submitit_options)
        if backend == "ray" and args.ray_address:
            options["address"] = args.ray_address
        status = run_sweep(
            spec,
            args.out,
            backend=backend,
            workers=args.workers,
            runs_per_gpu=args.runs_per_gpu,
            pack=args.pack,
            trainer=args.trainer or DEFAULT_TRAINER,
            progress=not args.quiet,
            update=args.update,
            backend_options=options,
            before_training=None if args.no_predictions else preregister(args.out),
        )
    except (SweepError, ConfigError) as err:
        return fail(str(err))
    print(f"sweep {spec.name} in {args.out}: {status.summary()}")
    for hash_, variant, error in status.failures:
        print(f"  failed {hash_} ({variant}): {error}  [{args.out}/runs/{hash_}/error.txt]")
    if status.done:
        print(f"report: initmem report {args.out}")
    return 1 if status.failed else 0


def preregister(sweep_dir):
    """The sweep's ``before_training`` step: the theory's predictions per pipeline written into the
    folder (:func:`initmem.bridge.preregister.preregister_sweep`), its lines printed."""

    def write(runs) -> None:
        from initmem.bridge.preregister import preregister_sweep  # torch and the models: only here

        for line in preregister_sweep(runs, sweep_dir):
            print(line, flush=True)

    return write


def _print_plan(spec, *, progress: bool, probe: bool = True) -> None:
    """Validate every run (streamed: bounded memory on any grid), count them per variant and print the
    design in units of forgetting (one entry per pipeline); with ``probe``, beside it the
    normalized-weight laws' prediction with G probed at each alpha
    (:func:`initmem.bridge.probe.sweep_law_forgetting`, a second pass over the runs; torch)."""
    import itertools
    from collections import Counter

    from initmem.bridge.units import design_table, format_design

    per_variant: Counter[str] = Counter()
    models: set[str] = set()

    def counted():
        for run in spec.iter_runs(progress=None if progress else False):
            per_variant[run.variant] += 1
            models.add(run.config.model)
            yield run

    runs, names = itertools.tee(counted())  # zip reads them in step: one run buffered
    # the expected init from the ResNets' shapes: the proxy loads no torch (the probe below does)
    design = design_table((r.config for r in runs), (r.variant for r in names), init="expected")
    print(f"sweep {spec.name}: {per_variant.total()} runs (valid)")
    for variant, count in per_variant.items():
        print(f"  {variant}: {count} runs")
    if probe:
        from initmem.bridge.probe import sweep_law_forgetting  # torch: the probe trains nothing

        law = sweep_law_forgetting(r.config for r in spec.iter_runs(progress=False))
        law = law.assign(law_forgetting_epochs=law["law_forgetting_epochs"].astype(float))
        design = design.merge(law, on="pipeline", how="left")
    print(format_design(design))
    if probe and len(models) > 1:
        _print_architecture_predictions(spec)


def _print_architecture_predictions(spec) -> None:
    """For a sweep of several models: each pipeline's deciding group and its predicted forgetting
    time (:func:`initmem.bridge.study.architectures.design_predictions`; torch, one NTK a pipeline)."""
    from initmem.bridge.study.architectures import design_predictions

    table = design_predictions(list(spec.iter_runs(progress=False)))
    print(
        "predicted per pipeline (the deciding group of initmem.bridge.study.architectures A3, at "
        "the largest alpha; the predictions sweep run pre-registers):"
    )
    for r in table.itertuples():
        steps = "never" if r.predicted_steps == float("inf") else f"{r.predicted_steps:.0f}"
        print(
            f"  {r.variant:<22} {r.model:<10} alpha {r.alpha:g}  {r.deciding_group:<16} "
            f"{steps:>6} of {r.total_steps:.0f} steps: {r.predicted_state}"
        )


def status_command(args: argparse.Namespace) -> int:
    from initmem.empirical.sweep import SweepError, sweep_status

    try:
        status = sweep_status(args.dir)
    except SweepError as err:
        return fail(str(err))
    if args.json:
        json.dump(status.to_dict(), sys.stdout, indent=1)
        print()
        return 0
    print(f"{args.dir}: {status.total} runs")
    for key in ("completed", "diverged", "damaged", "running", "failed", "pending"):
        extra = (
            f" ({status.resumable} with a checkpoint)"
            if key == "pending" and status.resumable
            else ""
        )
        print(f"  {'done' if key == 'completed' else key:<9} {getattr(status, key)}{extra}")
    for hash_, variant, epoch, epochs in status.progress:
        print(f"  running {hash_} ({variant}): epoch {epoch} / {epochs}")
    for hash_, variant, error in status.failures:
        print(f"  failed {hash_} ({variant}): {error}")
    for hash_, variant, damage in status.damages:
        print(f"  damaged {hash_} ({variant}): {damage}")
    return 0


def presets_command(args: argparse.Namespace) -> int:
    from initmem.empirical.sweep import list_presets

    for name, description in list_presets().items():
        print(f"{name:<16} {description}")
    return 0
