"""The ``initmem`` command: one entry point, one module per subcommand.

Each module in :data:`SUBCOMMANDS` defines ``register(subparsers)``, which adds its parser and sets
``func`` to its ``run(args) -> int``. Only the module of the subcommand being run is imported (the
others appear in ``--help`` by their one-line summary), and each imports what it needs when it runs,
so ``initmem --help`` and ``initmem sweep status`` never load torch.

Failures: :func:`main` runs every command under one wrapper. An expected failure (a bad config or sweep
file, a damaged or missing file, an I/O or permission error) prints ``error: ...`` on one line to stderr
and exits with status 2 (3 when another process is training the run folder); Ctrl-C (SIGINT) prints
``interrupted; resume with: ...`` and exits with 130 (``initmem train`` treats SIGTERM and SIGUSR2
alike: 143, 140). Warnings print as one line ``warning: ...`` each.
The traceback is printed only with ``--debug`` (anywhere on the command line) or with the environment
variable ``INITMEM_DEBUG=1``. An unexpected exception (a bug) keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pickle
import shlex
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator

from initmem import __version__

#: Subcommand modules under ``initmem.cli`` and their summaries, in the order ``--help`` lists them.
SUBCOMMANDS = {
    "theory": "predicted forgetting time of the init scale for a training config",
    "train": "train one network and write its run folder",
    "sweep": "run a grid of training runs (resumable), show its status, list presets",
    "report": "write DIR/report.md and DIR/figures/*.png for a sweep folder",
    "bridge": "measured vs predicted forgetting of a sweep folder: tables (CSV, Markdown) and figures",
    "study": "the unit-of-forgetting study of a sweep folder: verdict, tables, a Markdown document",
    "calibrate": "how often the study's verdicts would be wrong on a design: synthetic sweeps with a known answer",
    "demo": "run the CPU-sized demo sweep and write its report",
}
#: Exit status of a bad input (arguments, config, sweep file, damaged or missing file, I/O error).
EXIT_ERROR = 2
#: Exit status when the run folder is being trained by another process (``RunBusyError``).
EXIT_BUSY = 3
#: Exit status after Ctrl-C (SIGINT): 128 + 2, as a shell reports a process killed by SIGINT; a stop
#: signal that a command turns into an interruption (``interrupt_on``) exits with 128 + its number:
#: 143 for SIGTERM, 140 for SIGUSR2.
EXIT_INTERRUPTED = 130
#: Environment variable that turns on ``--debug`` (print the traceback of an error).
DEBUG_ENV = "INITMEM_DEBUG"
#: Exceptions a command reports as one line ``error: ...`` (everything else is a bug: traceback).
#: ``ValueError`` covers ConfigError, SweepError, RunFolderError, JSON and Unicode decode errors;
#: ``OSError`` covers missing files and data sets, permissions, a file where a folder should be.
EXPECTED_ERRORS = (OSError, ValueError, EOFError, pickle.UnpicklingError)


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
    _add_debug_option(parser, default=False)
    return parser


def _add_debug_option(parser: argparse.ArgumentParser, *, default) -> None:
    """``--debug`` on the parser and on every (nested) subcommand parser."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help=f"print the traceback of an error (or set {DEBUG_ENV}=1)",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _add_debug_option(sub, default=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 done, 1 some runs failed, 2 bad input or a
    damaged file, 130 interrupted; a command may document more)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_ERROR
    debug = args.debug or os.environ.get(DEBUG_ENV, "").lower() not in ("", "0", "false", "no")
    try:
        with contextlib.nullcontext() if debug else _one_line_warnings():
            return int(args.func(args) or 0)
    except KeyboardInterrupt as err:
        if debug:
            traceback.print_exc()
        hint = getattr(args, "resume_hint", None)
        command = hint(args, argv) if hint is not None else argv
        signum = getattr(err, "signum", signal.SIGINT)
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"interrupted{by}; resume with: {shlex.join(['initmem', *command])}", file=sys.stderr)
        return 128 + int(signum)
    except EXPECTED_ERRORS as err:
        if debug:
            traceback.print_exc()
        return fail(describe_error(err), status=getattr(err, "exit_status", EXIT_ERROR))


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGUSR2) delivered as a KeyboardInterrupt; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def interrupt_on(*signums: int) -> Iterator[None]:
    """Within the block, these signals stop the command as Ctrl-C does (raise :class:`Interrupted`):
    how SLURM (SIGTERM) and submitit (SIGUSR2) preempt a job. The previous handlers come back after."""

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Warnings (e.g. a damaged run skipped) as ``warning: ...`` on one line of stderr, each once."""
    seen: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        if text not in seen:
            seen.add(text)
            print(f"warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def describe_error(err: BaseException) -> str:
    """One line for an expected failure: the message, or for an OS error the path and what went wrong."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        path = os.fsdecode(err.filename)
        if isinstance(err, FileExistsError):
            text = f"{path} exists and is not a folder (remove it or choose another path)"
        elif isinstance(err, NotADirectoryError):
            text = f"{path}: a part of this path is a file, not a folder"
        elif isinstance(err, PermissionError):
            text = f"{path}: permission denied"
        else:
            text = f"{path}: {err.strerror}"
        if err.filename2 is not None:
            text += f" (to {os.fsdecode(err.filename2)})"
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())


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


def add_runs_arguments(parser: argparse.ArgumentParser) -> None:
    """The run folders an analysis reads (``DIR ...``), ``--interpolation`` and ``--no-groups``:
    the arguments ``initmem report`` and ``initmem bridge`` share."""
    parser.add_argument(
        "dirs",
        metavar="DIR",
        nargs="+",
        help="a sweep folder (initmem sweep run ... --out DIR), or run folders (initmem train, "
        "train(); sweep runs too): the pipelines are inferred from the configs",
    )
    parser.add_argument(
        "--interpolation",
        type=float,
        default=None,
        metavar="FRACTION",
        help="final train accuracy at or above which a run counts as interpolating; memories are "
        "measured on such runs (default: the sweep file's [study] interpolation, else 0.995)",
    )
    parser.add_argument(
        "--no-groups",
        action="store_true",
        help="leave out the per-group table (each parameter group's predicted and measured memory; "
        "it builds each pipeline's model and reads a few images of its data)",
    )


def interpolation_problem(value: float | None) -> str | None:
    """Why ``--interpolation`` is out of its range (0, 1], or None."""
    if value is None or 0 < value <= 1:
        return None
    return f"--interpolation must satisfy 0 < FRACTION <= 1 (got {value})"


def fail(message: str, *, status: int = EXIT_ERROR) -> int:
    """Print a one-line error to stderr and return ``status`` (default: the status for bad input)."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
