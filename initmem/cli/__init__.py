"""The ``initmem`` command: one entry point, one module per subcommand.

Each module in :data:`SUBCOMMANDS` defines ``register(subparsers)``, which adds its parser and sets
``func`` to its ``run(args) -> int``. Only the module of the subcommand being run is imported (the
others appear in ``--help`` by their one-line summary), and each imports what it needs when it runs,
so ``initmem --help`` and ``initmem sweep status`` never load torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from initmem import __version__

#: Subcommand modules under ``initmem.cli`` and their summaries, in the order ``--help`` lists them.
SUBCOMMANDS = {
    "theory": "predicted forgetting time of the init scale for a training config",
    "train": "train one network and write its run folder",
    "sweep": "run a grid of training runs (resumable), show its status, list presets",
    "report": "write DIR/report.md and DIR/figures/*.png for a sweep folder",
    "bridge": "measured vs predicted forgetting of a sweep folder: tables (CSV, Markdown) and figures",
    "demo": "run the CPU-sized demo sweep and write its report",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full parser of subcommand ``command`` (its module imported) and a
    placeholder for each of the others."""
    parser = argparse.ArgumentParser(
        prog="initmem",
        description="Initialization memory: how much of a network's random init survives training.",
    )
    parser.add_argument("--version", action="version", version=f"initmem {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in SUBCOMMANDS.items():
        if name == command:
            importlib.import_module(f"initmem.cli.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad arguments or configs)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
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
