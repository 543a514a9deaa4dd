"""``initmem train``: one training run from a TOML config plus overrides.

    initmem train --config FILE [--set key=value ...] [--out DIR] [--resume] [--quiet]

The config is validated before any work; a bad field, a missing data set, a damaged file or a folder
holding an unfinished run (without ``--resume``) is one line ``error: ...`` on stderr and exit status 2;
a folder that another process is training is exit status 3 (the message names the process). A
finished run is reported, not trained again. A diverged run is a result, not an error (exit 0).
Ctrl-C, SIGTERM and SIGUSR2 (how SLURM and submitit preempt a job) stop the run, checkpointing what an
epoch boundary allows, release the folder and print the command that resumes it (exit 130, 143, 140).
"""

from __future__ import annotations

import argparse
import signal

from initmem.cli import SUBCOMMANDS, add_config_arguments, interrupt_on


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help=SUBCOMMANDS["train"],
        description="Train one run (docs/run-format.md). Fields not in the file or --set keep "
        "their defaults (see initmem.empirical.RunConfig).",
    )
    add_config_arguments(parser)
    parser.add_argument("--out", metavar="DIR", help="run folder (overrides out_dir)")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in the folder from its last.pt"
    )
    parser.add_argument(
        "--allow-other-data",
        action="store_true",
        help="resume even if the data set differs from the one the run started on",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run, resume_hint=resume_hint)


def run(args: argparse.Namespace) -> int:
    """Train the configured run; print its result. Returns 0 (completed or diverged) or 2 (bad input)."""
    from initmem.empirical.config import RunConfig
    from initmem.empirical.trainer import train

    overrides = list(args.overrides)
    if args.out is not None:
        overrides.append(f"out_dir={_toml_string(args.out)}")
    if args.quiet:
        overrides.append("quiet=true")
    config = RunConfig.from_file(args.config, overrides)
    with interrupt_on(signal.SIGTERM, signal.SIGUSR2):  # preemption (SLURM, submitit) as Ctrl-C
        result = train(
            config, resume=True if args.resume else False, allow_other_data=args.allow_other_data
        )
    print(result.summary())
    return 0


def resume_hint(args: argparse.Namespace, argv: list[str]) -> list[str]:
    """The command line that resumes an interrupted run: the same one, with ``--resume``."""
    return argv if args.resume else [*argv, "--resume"]


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string, so a path survives the override parser unchanged."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
