"""The ``initmem`` command: one entry point, one module per subcommand.

Each module in :data:`SUBCOMMANDS` defines ``register(subparsers)``, which adds its parser and sets
``func`` to its ``run(args) -> int``. Modules are imported lazily so that ``initmem theory`` never pays
for torch models and ``initmem --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from initmem import __version__

#: Subcommand modules under ``initmem.cli``, in the order ``--help`` lists them.
SUBCOMMANDS = ("theory", "train", "sweep", "report", "bridge", "study", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="initmem",
        description="Initialization memory: how much of a network's random init survives training.",
    )
    parser.add_argument("--version", action="version", version=f"initmem {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"initmem.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"initmem.cli.{name}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad arguments or configs)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


def add_config_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """The shared ``--config FILE`` and repeatable ``--set key=value`` options."""
    parser.add_argument("--config", metavar="FILE", required=required, help="TOML config file")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config field (repeatable), e.g. --set alpha=0.5",
    )


def fail(message: str) -> int:
    """Print a one-line error to stderr and return the exit status for bad input."""
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
