"""``initmem train``: one training run from a TOML config plus overrides.

    initmem train --config FILE [--set key=value ...] [--out DIR] [--resume] [--quiet]

The config is validated before any work; a bad field, a missing data set or an occupied run folder is
one line ``error: ...`` on stderr and exit status 2. A diverged run is a result, not an error (exit 0).
"""

from __future__ import annotations

import argparse

from initmem.cli import SUBCOMMANDS, add_config_arguments, fail


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
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train the configured run; print its result. Returns 0 (completed or diverged) or 2 (bad input)."""
    from initmem.empirical.config import ConfigError, RunConfig
    from initmem.empirical.data import DataNotFoundError
    from initmem.empirical.trainer import RunFolderError, train

    overrides = list(args.overrides)
    if args.out:
        overrides.append(f"out_dir={_toml_string(args.out)}")
    if args.quiet:
        overrides.append("quiet=true")
    try:
        config = RunConfig.from_file(args.config, overrides)
        result = train(config, resume=True if args.resume else False)
    except (ConfigError, DataNotFoundError, RunFolderError) as err:
        return fail(" ".join(str(err).split()))
    print(result.summary())
    return 0


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string, so a path survives the override parser unchanged."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
