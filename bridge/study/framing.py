"""What a study document says about its own sweep: its title, its question and how to reproduce it,
computed from the sweep folder (``sweep.toml``, ``manifest.json``) rather than fixed text.

:func:`sweep_axes` lists what the sweep varies (every pipeline field with more than one value across
its runs, then alpha and the seeds); :func:`title` and :func:`question` state the study's question
for those axes, and say when the design cannot separate epochs from accumulated regularization
(every pipeline of one length). :func:`reproduce_command` rebuilds the commands from the folder's own
copy of the sweep file, which holds every ``--set`` override the sweep was run with, checked against
the manifest's runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from initmem.empirical.runfolder import DamagedFileError
from initmem.empirical.sweep import SweepError, SweepSpec, read_manifest
from initmem.empirical.tables import pipeline_columns, pipeline_id

#: Values of an axis listed in full up to this many; beyond, its range.
LISTED_VALUES = 5


def sweep_axes(sweep_dir: str | Path) -> dict[str, list]:
    """``{field: sorted distinct values}`` of every field that varies across the sweep's runs:
    the pipeline fields (:func:`~initmem.empirical.memory.pipeline_columns`), then ``epochs``,
    ``alpha`` and ``seed``."""
    configs = [run.config.to_dict() for run in read_manifest(sweep_dir)]
    fields = [*pipeline_columns(), "alpha", "seed"]
    axes = {}
    for name in fields:
        values = {str(c[name]): c[name] for c in configs}
        if len(values) > 1:
            axes[name] = sorted(values.values(), key=lambda v: (str(type(v)), v))
    return axes


def _values(values: list) -> str:
    def show(v):
        return (
            ",".join(map(str, v))
            if isinstance(v, list)
            else f"{v:g}"
            if isinstance(v, float)
            else str(v)
        )

    if len(values) <= LISTED_VALUES:
        return " / ".join(show(v) for v in values)
    return f"{len(values)} values from {show(values[0])} to {show(values[-1])}"


def _pipelines(sweep_dir) -> int:
    return len({pipeline_id(r.config.to_dict()) for r in read_manifest(sweep_dir)})


def title(sweep_dir: str | Path) -> str:
    """The document's title: the question, for this sweep's name and pipelines."""
    try:
        name = SweepSpec.from_file(Path(sweep_dir) / "sweep.toml").name
    except (OSError, SweepError):  # sweep.toml is optional (or not a sweep file): the folder's name
        name = Path(sweep_dir).name
    axes = [a for a in sweep_axes(sweep_dir) if a not in ("alpha", "seed")]
    varied = f", varying {', '.join(axes)}" if axes else ""
    return (
        f"The unit of forgetting in `{name}` ({_pipelines(sweep_dir)} pipelines{varied}): "
        "epochs or accumulated regularization?"
    )


def question(sweep_dir: str | Path) -> str:
    """What this sweep varies, as a sentence, and whether it can separate the two units."""
    axes = sweep_axes(sweep_dir)
    runs = read_manifest(sweep_dir)
    pipeline_axes = {k: v for k, v in axes.items() if k not in ("alpha", "seed")}
    parts = [f"{k} {_values(v)}" for k, v in pipeline_axes.items()]
    alphas = sorted({r.config.alpha for r in runs})
    seeds = sorted({r.config.seed for r in runs})
    text = (
        f"This sweep ({len(runs)} runs, {_pipelines(sweep_dir)} pipelines) varies "
        + (", ".join(parts) if parts else "no pipeline field")
        + f" across its pipelines, with alpha {_values(alphas)} and {len(seeds)} seed(s)."
    )
    lengths = sorted({r.config.total_epochs for r in runs})
    if len(lengths) == 1:
        text += (
            f" Every run trains {lengths[0]} epochs: epochs cannot order the pipelines, so this "
            "design cannot separate the two units (the decision says cannot tell)."
        )
    return text


#: The study's settings where neither the command line nor the sweep file's ``[study]`` sets them.
STUDY_DEFAULTS = {"n_boot": 200, "calibrate": 0}


def study_settings(sweep_dir: str | Path) -> dict[str, int]:
    """The analysis's settings fixed with the sweep: the folder's ``sweep.toml`` ``[study]`` table
    over :data:`STUDY_DEFAULTS` (the defaults alone when the file is missing or not a sweep file)."""
    try:
        study = SweepSpec.from_file(Path(sweep_dir) / "sweep.toml").study
    except (OSError, SweepError):
        study = {}
    return {**STUDY_DEFAULTS, **study}


def reproduce_command(
    sweep_dir: str | Path,
    doc: str | Path,
    *,
    n_boot: int | None = None,
    wall_time: str = "",
    calibrate: int | None = None,
) -> str:
    """The commands that rebuild the sweep from the folder's own ``sweep.toml`` (``--set``
    overrides included) and the document, naming only the settings that differ from the file's own
    (:func:`study_settings`; None: the file's); a comment line when the file no longer expands to
    the manifest's runs (a folder edited by hand or ``--update``)."""
    sweep_dir = Path(sweep_dir)
    fixed = study_settings(sweep_dir)
    n_boot = fixed["n_boot"] if n_boot is None else n_boot
    calibrate = fixed["calibrate"] if calibrate is None else calibrate
    copy = sweep_dir / "sweep.toml"
    try:
        hashes = [r.hash for r in SweepSpec.from_file(copy).expand()]
    except (OSError, SweepError):  # no usable copy of the file: the commands cannot rebuild it
        hashes = None
    lines = []
    try:
        listed = [r.hash for r in read_manifest(sweep_dir)]
    except DamagedFileError:  # a manifest the file does not expand to reads as damaged
        listed = None
    if hashes is None:
        lines.append(f"# note: {copy} is missing or not a sweep file: the sweep cannot be rebuilt")
    elif hashes != listed:
        lines.append(f"# note: {copy} no longer expands to the manifest's runs")
    lines.append(f"initmem sweep run {shlex.quote(str(copy))} --out {shlex.quote(str(sweep_dir))}")
    study = f"initmem study {shlex.quote(str(sweep_dir))} --doc {shlex.quote(str(doc))}"
    if n_boot != fixed["n_boot"]:
        study += f" --n-boot {n_boot}"
    if calibrate != fixed["calibrate"]:
        study += f" --calibrate {calibrate}"
    if wall_time:
        study += f" --wall-time {shlex.quote(wall_time)}"
    lines.append(study)
    return "\n".join(lines)


__all__ = [
    "LISTED_VALUES",
    "STUDY_DEFAULTS",
    "question",
    "reproduce_command",
    "study_settings",
    "sweep_axes",
    "title",
]
