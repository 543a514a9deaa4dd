"""Sweeps: one TOML file -> a manifest of runs keyed by content hash -> a backend runs the missing ones.

A sweep file has a ``[base]`` table (any :class:`~initmem.empirical.config.RunConfig` field), a ``[grid]``
table (field = list of values; the sweep takes their product) and optional ``[[variants]]`` tables (a
``name`` and a set of overrides, e.g. one training pipeline; a variant may carry its own ``grid`` table
that replaces or adds axes for its runs). The sweep is variants x grid::

    name = "small"
    [base]
    dataset = "fashion-mnist"
    epochs = 20
    [grid]
    alpha = [0.25, 1.0, 4.0]
    seed = [0, 1]
    [[variants]]
    name = "sgd"
    optimizer = "sgd"
    [[variants]]
    name = "adam"
    optimizer = "adam"
    grid = { seed = [0] }        # this pipeline: one seed only

An optional ``[sweep]`` table sets sweep-level defaults that the command line overrides: ``backend``
(local, submitit, ray), ``workers``, ``runs_per_gpu``, ``pack`` (runs trained together as one packed
computation, see :func:`run_sweep`), ``ray_address``, and a ``[sweep.submitit]``
table of executor parameters (``timeout_min``, ``gpus_per_node``, ``cpus_per_task``,
``slurm_partition``, ``cluster``...).

Every expanded config is validated before any run starts. Each run is keyed by ``RunConfig.hash`` and
lives in ``DIR/runs/<hash>/`` (see docs/run-format.md). A run is done when its ``result.json`` exists;
a per-run lock (``fcntl.flock`` on ``runs/<hash>/.lock``, freed by the kernel when its holder dies, even
by ``kill -9``) keeps two workers off the same run, so rerunning the same command skips finished runs,
resumes unfinished ones from their ``last.pt`` and never trains a run twice at once.

Locks and shared file systems: ``flock`` works across processes of one machine. On NFSv4 and Lustre
(mounted with ``flock``) Linux maps it to byte-range locks that also work across nodes; on file systems
without lock support, do not point two independent sweep drivers at one folder. The submitit backend
gives each array task its own runs, so there the lock is a second safety net.

Who does what: this module parses the sweep file, writes and reads the sweep folder's manifest and
drives a sweep (:func:`run_sweep`); :mod:`~initmem.empirical.backends` schedules its tasks,
:mod:`~initmem.empirical.workers` runs each one on a worker, and :mod:`~initmem.empirical.runfolder`
owns each run's folder (its lock, state, result and failure record).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.resources
import itertools
import json
import math
import multiprocessing
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import backends, loggers, runfolder
from .config import ConfigError, RunConfig, unknown_field_message
from .provenance import plugin_sources
from .sessions import SessionClock
from .workers import DEFAULT_TRAINER, resolve_trainer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Keys allowed at the top of a sweep file.
SWEEP_FILE_KEYS = ("name", "description", "base", "grid", "variants", "sweep", "study")
#: Keys of the optional ``[sweep]`` table (sweep-level options; the command line overrides them).
SWEEP_OPTIONS = ("backend", "workers", "runs_per_gpu", "pack", "ray_address", "submitit", "logger")
#: Keys of the optional ``[study]`` table: the analysis fixed with the sweep (``initmem study DIR``
#: reads them from the folder's sweep.toml; its command line overrides them), with their least value.
STUDY_OPTIONS = {"n_boot": 1, "calibrate": 0}
BACKENDS = tuple(backends.BACKENDS)
#: Sweeps of this many runs or more show a progress bar while they are expanded and validated.
PROGRESS_MIN_RUNS = 100_000


class SweepError(ValueError):
    """A sweep file or sweep folder is invalid; the message names the variant and field."""


# ====================================================================== the sweep file
@dataclass(frozen=True)
class Variant:
    """One pipeline of a sweep: config overrides and grid axes of its own (replacing the sweep's)."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file. ``options`` holds the ``[sweep]`` table, ``study`` the ``[study]`` table
    (the analysis's settings, :data:`STUDY_OPTIONS`; no run depends on them); ``source`` the text as
    given."""

    name: str
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    variants: tuple[Variant, ...] = (Variant("v0"),)
    options: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    source: str = ""
    study: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_dict(
        cls, values: dict[str, Any], *, name: str = "sweep", source: str = ""
    ) -> SweepSpec:
        """Build from parsed TOML; raises SweepError on an unknown key or a malformed table."""
        unknown = sorted(set(values) - set(SWEEP_FILE_KEYS))
        if unknown:
            raise SweepError(
                f"unknown top-level key(s) {unknown} in sweep file; allowed: {list(SWEEP_FILE_KEYS)}"
            )
        base = _table(values, "base")
        _check_fields("base", base)
        grid = _grid_table("grid", _table(values, "grid"))
        options = _table(values, "sweep")
        bad_options = sorted(set(options) - set(SWEEP_OPTIONS))
        if bad_options:
            raise SweepError(
                f"unknown [sweep] option(s) {bad_options}; allowed: {list(SWEEP_OPTIONS)}"
            )
        study = _study_table(_table(values, "study"))
        if not set(values) & {"base", "grid", "variants"}:
            raise SweepError(
                f"sweep file '{name}' defines no runs (no [base], [grid] or [[variants]]); "
                "see a preset for the format: initmem sweep presets"
            )
        raw_variants = values.get("variants", [{}])
        if not isinstance(raw_variants, list) or not raw_variants:
            raise SweepError("variants must be a non-empty array of tables ([[variants]])")
        variants = []
        for index, raw in enumerate(raw_variants):
            if not isinstance(raw, dict):
                raise SweepError(f"variants[{index}] must be a table")
            raw = dict(raw)
            vname = str(raw.pop("name", f"v{index}"))
            vgrid = _grid_table(f"variant '{vname}' grid", raw.pop("grid", {}))
            _check_fields(f"variant '{vname}'", raw)
            clash = sorted(set(raw) & (set(grid) - set(vgrid)))
            if clash:
                raise SweepError(
                    f"variant '{vname}' sets {clash}, which the sweep grid also sets; put the values "
                    f"in the variant's own grid table instead (grid = {{{clash[0]} = [...]}})"
                )
            variants.append(Variant(vname, raw, vgrid))
        names = [v.name for v in variants]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SweepError(f"variant names must be unique (repeated: {duplicates})")
        return cls(
            name=str(values.get("name", name)),
            base=base,
            grid=grid,
            variants=tuple(variants),
            options=options,
            description=str(values.get("description", "")),
            source=source,
            study=study,
        )

    @classmethod
    def from_toml(cls, text: str, *, name: str = "sweep") -> SweepSpec:
        try:
            values = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise SweepError(f"invalid TOML in sweep file '{name}': {err}") from None
        return cls.from_dict(values, name=name, source=text)

    @classmethod
    def from_file(cls, path_or_preset: str | Path) -> SweepSpec:
        """Load a sweep file, or a shipped preset by name (see :func:`list_presets`)."""
        path = Path(path_or_preset)
        if path.is_file():
            return cls.from_toml(path.read_text(), name=path.stem)
        if str(path_or_preset) in list_presets():
            return cls.from_toml(preset_text(str(path_or_preset)), name=str(path_or_preset))
        raise SweepError(
            f"sweep file not found: {path_or_preset} (nor a preset; presets: {sorted(list_presets())})"
        )

    # ------------------------------------------------------------ changes
    def with_overrides(self, values: dict[str, Any]) -> SweepSpec:
        """Set fields in every run: they go to ``base`` and leave every variant and grid axis."""
        _check_fields("overrides", values)
        base = {**self.base, **values}
        base = {k: v for k, v in base.items() if v is not None}  # None = the field's default
        grid = {k: v for k, v in self.grid.items() if k not in values}
        variants = tuple(
            Variant(
                v.name,
                {k: x for k, x in v.overrides.items() if k not in values},
                {k: x for k, x in v.grid.items() if k not in values},
            )
            for v in self.variants
        )
        return dataclasses.replace(self, base=base, grid=grid, variants=variants, source="")

    def with_grid(self, axes: dict[str, list[Any]]) -> SweepSpec:
        """Replace grid axes for every variant (drops them from ``base``, variants and their grids)."""
        axes = _grid_table("grid", axes)
        base = {k: v for k, v in self.base.items() if k not in axes}
        variants = tuple(
            Variant(
                v.name,
                {k: x for k, x in v.overrides.items() if k not in axes},
                {k: x for k, x in v.grid.items() if k not in axes},
            )
            for v in self.variants
        )
        grid = {**self.grid, **axes}
        return dataclasses.replace(self, base=base, grid=grid, variants=variants, source="")

    def with_options(self, **options: Any) -> SweepSpec:
        """Set ``[sweep]`` options (None values are left as they were)."""
        merged = {**self.options, **{k: v for k, v in options.items() if v is not None}}
        bad = sorted(set(merged) - set(SWEEP_OPTIONS))
        if bad:
            raise SweepError(f"unknown sweep option(s) {bad}; allowed: {list(SWEEP_OPTIONS)}")
        return dataclasses.replace(self, options=merged, source="")

    # ------------------------------------------------------------ expansion
    def count(self) -> int:
        """The number of runs (variants x grid), computed without expanding the sweep."""
        return sum(
            math.prod(len(values) for values in {**self.grid, **variant.grid}.values())
            for variant in self.variants
        )

    def iter_runs(self, *, progress: bool | None = None) -> Iterator[SweepRun]:
        """Every run of the sweep, validated, one at a time; raises SweepError at the first bad one.

        Lazy: a grid point is built and checked when the caller asks for it, so memory stays bounded
        (one config at a time, plus about 100 bytes per run for the duplicate check). ``progress``
        shows a bar on stderr: None (default) for sweeps of :data:`PROGRESS_MIN_RUNS` runs or more
        when stderr is a terminal, True always, False never. Order: variants in file order; within a
        variant the grid product with the first axis slowest.
        """
        # deferred: tqdm loads only to draw a progress bar
        from tqdm.auto import tqdm

        total = self.count()
        show = total >= PROGRESS_MIN_RUNS if progress is None else progress
        bar = tqdm(
            total=total,
            desc=f"expanding sweep {self.name}",
            unit="run",
            disable=(None if progress is None else False) if show else True,
            miniters=max(1, total // 1000),
            dynamic_ncols=True,
        )
        seen: dict[int, int] = {}  # hash (as a 64-bit int) -> index of the variant that made it
        index = 0
        with bar:
            for v, variant in enumerate(self.variants):
                grid = {**self.grid, **variant.grid}
                keys = list(grid)
                for point in itertools.product(*(grid[k] for k in keys)):
                    values = {
                        **self.base,
                        **variant.overrides,
                        **dict(zip(keys, point, strict=True)),
                    }
                    try:
                        config = RunConfig.from_dict(values)
                    except ConfigError as err:
                        where = _where(keys, point)
                        raise SweepError(
                            f"run {index} of sweep '{self.name}' (variant '{variant.name}'"
                            f"{', ' + where if where else ''}): {err}"
                        ) from None
                    run = SweepRun(config.hash, variant.name, config)
                    key = int(run.hash, 16)
                    if key in seen:
                        raise SweepError(
                            f"variant '{variant.name}' ({_where(keys, point)}) repeats a run of "
                            f"variant '{self.variants[seen[key]].name}' with the same config "
                            f"(hash {run.hash})"
                        )
                    seen[key] = v
                    index += 1
                    bar.update(1)
                    yield run

    def expand(self) -> list[SweepRun]:
        """Every run of the sweep (variants x grid), validated, as a list (see :meth:`iter_runs`, which
        yields them one at a time with bounded memory); raises SweepError on the first bad one."""
        return list(self.iter_runs())

    def to_toml(self) -> str:
        """The sweep as a TOML file (used when the spec was changed after loading)."""
        lines = [f"name = {_toml_value(self.name)}"]
        if self.description:
            lines.append(f"description = {_toml_value(self.description)}")
        for title, table in (("base", self.base), ("grid", self.grid)):
            if table:
                lines += ["", f"[{title}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
        flat_options = {k: v for k, v in self.options.items() if not isinstance(v, dict)}
        if flat_options:
            lines += ["", "[sweep]", *(f"{k} = {_toml_value(v)}" for k, v in flat_options.items())]
        for key, sub in self.options.items():
            if isinstance(sub, dict):
                lines += [
                    "",
                    f"[sweep.{key}]",
                    *(f"{k} = {_toml_value(v)}" for k, v in sub.items()),
                ]
        if self.study:
            lines += ["", "[study]", *(f"{k} = {_toml_value(v)}" for k, v in self.study.items())]
        for variant in self.variants:
            lines += ["", "[[variants]]", f"name = {_toml_value(variant.name)}"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in variant.overrides.items()]
            if variant.grid:
                inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in variant.grid.items())
                lines.append(f"grid = {{ {inner} }}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its content hash, the variant that produced it, its validated config."""

    hash: str
    variant: str
    config: RunConfig

    def run_dir(self, sweep_dir: str | Path) -> Path:
        return Path(sweep_dir) / "runs" / self.hash

    def task(self, sweep_dir: str | Path) -> dict[str, Any]:
        """What a worker needs (plain data, picklable): hash, variant, run_dir and the config dict."""
        run_dir = self.run_dir(sweep_dir).resolve()
        config = self.config.to_dict() | {"out_dir": str(run_dir), "quiet": True}
        return {
            "hash": self.hash,
            "variant": self.variant,
            "run_dir": str(run_dir),
            "config": config,
        }


def _where(keys: list[str], point: tuple) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in zip(keys, point, strict=True))


def _table(values: dict[str, Any], key: str) -> dict[str, Any]:
    table = values.get(key, {})
    if not isinstance(table, dict):
        raise SweepError(f"[{key}] must be a table")
    return dict(table)


def _study_table(study: dict[str, Any]) -> dict[str, Any]:
    """The ``[study]`` table, checked: known keys, integers at or above their least value."""
    unknown = sorted(set(study) - set(STUDY_OPTIONS))
    if unknown:
        raise SweepError(f"unknown [study] option(s) {unknown}; allowed: {list(STUDY_OPTIONS)}")
    for key, value in study.items():
        least = STUDY_OPTIONS[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise SweepError(f"[study] {key} must be an integer >= {least} (got {value!r})")
    return study


def _check_fields(where: str, values: dict[str, Any]) -> None:
    known = RunConfig.field_names()
    for key in values:
        if key not in known:
            raise SweepError(unknown_field_message(key, where))


def _grid_table(where: str, grid: Any) -> dict[str, list[Any]]:
    if not isinstance(grid, dict):
        raise SweepError(f"{where} must be a table of field = [values]")
    _check_fields(where, grid)
    for key, values in grid.items():
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise SweepError(f"{where}.{key} must be a non-empty list of values (got {values!r})")
    return {k: list(v) for k, v in grid.items()}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise SweepError(f"cannot write a non-finite number to TOML ({value})")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise SweepError(f"cannot write {value!r} to TOML")


# ====================================================================== presets
def list_presets() -> dict[str, str]:
    """Shipped sweep presets: ``{name: description}`` (files ``initmem/empirical/presets/*.toml``)."""
    presets = {}
    for entry in importlib.resources.files("initmem.empirical.presets").iterdir():
        if entry.name.endswith(".toml"):
            values = tomllib.loads(entry.read_text())
            presets[entry.name[: -len(".toml")]] = str(values.get("description", ""))
    return dict(sorted(presets.items()))


def preset_text(name: str) -> str:
    """The TOML text of a shipped preset."""
    resource = importlib.resources.files("initmem.empirical.presets") / f"{name}.toml"
    if not resource.is_file():
        raise SweepError(f"unknown preset '{name}' (presets: {sorted(list_presets())})")
    return resource.read_text()


# ====================================================================== the sweep folder
def prepare_sweep(
    spec: SweepSpec, sweep_dir: str | Path, *, update: bool = False
) -> list[SweepRun]:
    """Validate every run, then write ``sweep.toml`` and ``manifest.json`` (atomically).

    A folder that already holds a different sweep is refused unless ``update`` (then its manifest is
    replaced; finished runs whose config hash is still in the sweep are kept and not rerun).
    """
    runs = spec.expand()
    sweep_dir = Path(sweep_dir)
    if (sweep_dir / "manifest.json").exists() and not update:
        old = [{"hash": r.hash, "variant": r.variant} for r in read_manifest(sweep_dir)]
        if [(e["hash"], e["variant"]) for e in old] != [(r.hash, r.variant) for r in runs]:
            common = len({e["hash"] for e in old} & {r.hash for r in runs})
            if (changed := _plugins_changed(sweep_dir, runs)) is not None:
                raise SweepError(
                    f"{sweep_dir}: {changed} since its runs were listed, so every run of it is "
                    "another run now; pass --update (update=True) to train them beside the old ones "
                    "(report and study then read the new), or restore the plug-in"
                )
            raise SweepError(
                f"{sweep_dir} holds a different sweep ({len(old)} runs, {common} in common with this "
                f"one of {len(runs)}); pass update=True (--update) to replace its manifest, keeping "
                "finished runs, or choose another output folder"
            )
    write_sweep_folder(sweep_dir, spec.source or spec.to_toml(), runs)
    return runs


def _plugins_changed(sweep_dir: Path, runs: list[SweepRun]) -> str | None:
    """When the folder's manifest lists the same configs as ``runs`` but under other hashes because
    a plug-in's source changed: which plug-in (one phrase); else None."""
    try:
        listed = json.loads((sweep_dir / "manifest.json").read_text())
        before = [{k: v for k, v in e["config"].items() if k != "out_dir"} for e in listed]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    now = [{k: v for k, v in r.config.to_dict().items() if k != "out_dir"} for r in runs]
    if before != now or not runs:
        return None
    names = sorted(
        {r.config.to_dict()[f] for r in runs for f in plugin_sources(r.config.to_dict())}
    )
    return f"the source of plug-in {', '.join(names)} changed" if names else None


def write_sweep_folder(sweep_dir: str | Path, source: str, runs: list[SweepRun]) -> None:
    """Write a sweep folder's ``sweep.toml`` (``source``) and ``manifest.json`` (``runs`` in order,
    each config's ``out_dir`` its run folder), atomically, and create ``runs/``: the one writer of
    both files (:func:`prepare_sweep`, the synthetic sweeps of ``initmem.bridge.study.synthetic``)."""
    sweep_dir = Path(sweep_dir)
    manifest = [
        {
            "hash": r.hash,
            "variant": r.variant,
            "config": r.config.to_dict() | {"out_dir": str(r.run_dir(sweep_dir).resolve())},
        }
        for r in runs
    ]
    (sweep_dir / "runs").mkdir(parents=True, exist_ok=True)
    runfolder.write_atomic(sweep_dir / "sweep.toml", source)
    runfolder.write_atomic(sweep_dir / "manifest.json", json.dumps(manifest, indent=1) + "\n")


def read_manifest(sweep_dir: str | Path) -> list[SweepRun]:
    """The runs of a sweep folder, in expansion order. A manifest that cannot be read raises
    :class:`~initmem.empirical.runfolder.DamagedFileError` naming the fix (``--update``)."""
    path = Path(sweep_dir) / "manifest.json"
    if not path.is_file():
        raise SweepError(f"{sweep_dir} is not a sweep folder (no manifest.json)")
    try:
        runs = []
        for entry in json.loads(path.read_text()):
            config = RunConfig.from_dict(entry["config"], validate=False)
            runs.append(SweepRun(str(entry["hash"]), str(entry["variant"]), config))
    except (ValueError, KeyError, TypeError) as err:  # cut short, overwritten, edited by hand
        problem = " ".join(str(err).split()) or type(err).__name__
        if isinstance(err, KeyError):
            problem = f"an entry has no {err}"
        raise runfolder.DamagedFileError(path, problem, _manifest_fix(sweep_dir)) from None
    foreign = _foreign_manifest(Path(sweep_dir), runs)
    if foreign is not None:
        raise runfolder.DamagedFileError(path, foreign, _manifest_fix(sweep_dir))
    return runs


def _update_command(sweep_dir: str | Path) -> str:
    """The command that rewrites a sweep folder's manifest from its sweep.toml (shell-quoted)."""
    toml = str(Path(sweep_dir) / "sweep.toml")
    return shlex.join(["initmem", "sweep", "run", toml, "--out", str(sweep_dir), "--update"])


def _manifest_fix(sweep_dir: str | Path) -> str:
    return f"rewrite it with `{_update_command(sweep_dir)}` (finished runs are kept)"


#: The largest sweep whose manifest is checked against its sweep.toml's expansion on every read.
MANIFEST_CHECK_LIMIT = 20_000


def _foreign_manifest(sweep_dir: Path, runs: list[SweepRun]) -> str | None:
    """Why the manifest is not one of the folder's ``sweep.toml`` (it lists runs that the file does
    not expand to; a manifest may list fewer, e.g. a subset kept by hand), or None. Not checked
    without a readable sweep.toml or above :data:`MANIFEST_CHECK_LIMIT` runs."""
    toml = sweep_dir / "sweep.toml"
    if not toml.is_file():
        return None
    try:
        spec = SweepSpec.from_file(toml)
        if spec.count() > MANIFEST_CHECK_LIMIT:
            return None
        expanded = {run.hash for run in spec.iter_runs(progress=False)}
    except (ValueError, OSError):  # a sweep.toml that cannot be read: the manifest stands alone
        return None
    # each run's hash taken now, as the expansion's: a plug-in edited since the sweep was prepared
    # changes both alike (the manifest keeps the hashes its runs were trained under)
    stray = [run.hash for run in runs if run.config.hash not in expanded]
    if not stray:
        return None
    return (
        f"lists {len(stray)} of its {len(runs)} runs that sweep.toml does not expand to (first "
        f"{stray[0]}): another sweep's manifest?"
    )


@dataclass(frozen=True)
class SweepStatus:
    """Counts of run states in a sweep folder; ``resumable`` pending runs have a ``last.pt``."""

    total: int
    completed: int
    diverged: int
    running: int
    failed: int
    pending: int
    resumable: int
    failures: tuple[tuple[str, str, str], ...] = ()  # (hash, variant, first line of error.txt)
    damaged: int = 0  # runs whose result.json cannot be trusted (a sweep run trains them again)
    damages: tuple[tuple[str, str, str], ...] = ()  # (hash, variant, what is wrong and the fix)
    #: per running run: (hash, variant, epochs logged so far, epochs of the run)
    progress: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def done(self) -> int:
        """Finished runs (completed or diverged)."""
        return self.completed + self.diverged

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self) | {"done": self.done}
        values["failures"] = [{"hash": h, "variant": v, "error": e} for h, v, e in self.failures]
        values["damages"] = [{"hash": h, "variant": v, "damage": d} for h, v, d in self.damages]
        values["progress"] = [
            {"hash": h, "variant": v, "epoch": e, "epochs": t} for h, v, e, t in self.progress
        ]
        return values

    def summary(self) -> str:
        return (
            f"{self.done}/{self.total} done ({self.completed} completed, {self.diverged} diverged), "
            + (f"{self.damaged} damaged, " if self.damaged else "")
            + f"{self.running} running, {self.failed} failed, {self.pending} pending"
            + (f" ({self.resumable} with a checkpoint)" if self.resumable else "")
        )


def sweep_status(sweep_dir: str | Path, runs: list[SweepRun] | None = None) -> SweepStatus:
    """Count the run states of a sweep folder (reads result.json files and probes the locks): of the
    manifest's runs, or of ``runs`` (a driver's own, whatever another driver wrote there since), with
    each running run's progress (the last epoch in its log.jsonl, of the run's epochs)."""
    counts = dict.fromkeys(runfolder.RUN_STATES, 0)
    resumable = 0
    failures, damages, progress = [], [], []
    for run in read_manifest(sweep_dir) if runs is None else runs:
        run_dir = run.run_dir(sweep_dir)
        state = runfolder.run_state(run_dir)
        counts[state if state in counts else "completed"] += 1
        if state == "pending" and runfolder.has_checkpoint(run_dir):
            resumable += 1
        if state == "failed":
            failures.append((run.hash, run.variant, runfolder.failure_message(run_dir)))
        if state == "damaged":
            damages.append((run.hash, run.variant, runfolder.damage(run_dir)))
        if state == "running":
            log = runfolder.read_log(run_dir)
            epoch = int(log[-1]["epoch"]) if log else 0
            progress.append((run.hash, run.variant, epoch, run.config.total_epochs))
    return SweepStatus(
        progress=tuple(progress),
        total=sum(counts.values()),
        resumable=resumable,
        failures=tuple(failures),
        damages=tuple(damages),
        **counts,
    )


def pack_tasks(tasks: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Group run tasks into packed tasks of up to ``size`` runs for :func:`~.workers.execute_pack`.

    Runs are packed when they share their variant and every config field but those that packed runs
    may differ in (``alpha``, ``seed``, ``out_dir``: ``packing.PACKABLE_FIELDS``), in the order of
    their first appearance; a group of one stays a plain task. A packed task is
    ``{"hash", "variant", "pack": [run tasks]}`` (its hash joins the runs' hash prefixes).
    """
    if size <= 1:
        return list(tasks)
    from .packing import PACKABLE_FIELDS  # the training stack (torch): only packed sweeps need it

    groups: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        shared = {k: v for k, v in task["config"].items() if k not in PACKABLE_FIELDS}
        key = json.dumps([task["variant"], shared], sort_keys=True, default=str)
        groups.setdefault(key, []).append(task)
    packed = []
    for group in groups.values():
        for i in range(0, len(group), size):
            chunk = group[i : i + size]
            if len(chunk) == 1:
                packed.append(chunk[0])
            else:
                packed.append(
                    {
                        "hash": "+".join(t["hash"][:8] for t in chunk),
                        "variant": chunk[0]["variant"],
                        "pack": chunk,
                    }
                )
    return packed


# ====================================================================== the driver
#: Why run_sweep refuses to run inside a worker that is starting (the script has no main guard).
MAIN_GUARD_MESSAGE = (
    "run_sweep was called while a sweep worker process was starting: the worker re-imports the "
    "script that started the sweep, which calls run_sweep again; put the call under "
    '`if __name__ == "__main__":` (README, "Sweeps from a script")'
)


def run_sweep(
    spec: SweepSpec | str | Path,
    sweep_dir: str | Path,
    *,
    backend: str | None = None,
    workers: int | None = None,
    runs_per_gpu: int | None = None,
    pack: int | None = None,
    trainer: str | Callable[[RunConfig], Any] = DEFAULT_TRAINER,
    progress: bool = True,
    update: bool = False,
    backend_options: dict[str, Any] | None = None,
    before_training: Callable[[list[SweepRun]], Any] | None = None,
) -> SweepStatus:
    """Run every unfinished run of a sweep; return the folder's status at the end.

    ``backend`` is ``local`` (a process pool of ``workers``; the default), ``submitit`` (SLURM job
    arrays, ``workers`` = the cap on parallel array tasks) or ``ray``. Arguments left as None take the
    sweep file's ``[sweep]`` options, then the defaults. ``runs_per_gpu`` runs share one GPU.
    ``pack`` > 1 trains up to that many runs that differ only in alpha and seed as one packed
    computation (:func:`pack_tasks`, :func:`~.workers.execute_pack`; default 1: no packing): worth it where one
    run leaves the device idle (a GPU, or a CPU worker with several threads; BENCHMARKS.md, 3).
    ``trainer`` is ``module:function`` (or a picklable callable) taking a RunConfig and writing the
    run folder. Failed and diverged runs are recorded and the sweep goes on; failed runs are retried
    by the next call. Invalid sweeps raise SweepError before anything runs, and so do a backend whose
    package is not installed and a trainer that cannot be loaded. ``before_training`` is called with
    the sweep's runs once the folder is prepared and every check has passed, before any run trains
    (``initmem sweep run`` writes the pre-registered predictions there).
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SweepError(MAIN_GUARD_MESSAGE)
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_file(spec)
    options = spec.options
    backend = backend or options.get("backend", "local")
    if backend not in BACKENDS:
        raise SweepError(f"backend must be one of {list(BACKENDS)} (got {backend!r})")
    if (missing := backends.missing_package(backend)) is not None:
        raise SweepError(missing)
    workers = workers if workers is not None else options.get("workers")
    runs_per_gpu = runs_per_gpu if runs_per_gpu is not None else options.get("runs_per_gpu", 1)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise SweepError(f"workers must be a positive integer (got {workers!r})")
    if not isinstance(runs_per_gpu, int) or runs_per_gpu < 1:
        raise SweepError(f"runs_per_gpu must be a positive integer (got {runs_per_gpu!r})")
    pack = pack if pack is not None else options.get("pack", 1)
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
        raise SweepError(f"pack must be a positive integer (got {pack!r})")
    logger = options.get("logger")
    if (problem := loggers.check_logger(logger)) is not None:
        raise SweepError(problem)
    try:
        trainer_function = resolve_trainer(trainer)  # fail now, not on every worker
    except (ValueError, ImportError, AttributeError) as err:
        raise SweepError(f"cannot load trainer {trainer!r}: {err}") from None
    if pack > 1 and trainer_function is not resolve_trainer(DEFAULT_TRAINER):
        raise SweepError(f"pack > 1 trains with initmem's own trainer; got trainer {trainer!r}")
    clock = SessionClock().start()  # the wall time counts preparing and the predictions too
    runs = prepare_sweep(spec, sweep_dir, update=update)
    unfinished = [
        r.task(sweep_dir)
        for r in runs
        if runfolder.run_state(r.run_dir(sweep_dir)) not in runfolder.FINISHED_STATES
    ]
    clock.runs_before = len(runs) - len(unfinished)
    ended_by = "interrupted"
    try:
        status = _run_prepared(
            spec,
            sweep_dir,
            runs,
            unfinished,
            clock,
            backend=backend,
            workers=workers,
            runs_per_gpu=runs_per_gpu,
            pack=pack,
            trainer=trainer,
            progress=progress,
            logger=logger,
            backend_options=backend_options,
            before_training=before_training,
        )
        ended_by = "finished"
        return status
    except backends.WorkerStartError as err:
        raise SweepError(str(err)) from None
    finally:  # a call that finds every run finished trains nothing and records nothing
        if unfinished or ended_by != "finished":
            clock.stop(sweep_dir, ended_by=ended_by)


def _run_prepared(
    spec: SweepSpec,
    sweep_dir: str | Path,
    runs: list[SweepRun],
    unfinished: list[dict[str, Any]],
    clock: SessionClock,
    *,
    backend: str,
    workers: int | None,
    runs_per_gpu: int,
    pack: int,
    trainer: str | Callable[[RunConfig], Any],
    progress: bool,
    logger: str | None,
    backend_options: dict[str, Any] | None,
    before_training: Callable[[list[SweepRun]], Any] | None,
) -> SweepStatus:
    """:func:`run_sweep` once the folder is prepared and its ``unfinished`` run tasks listed:
    predictions, training, the status."""
    if before_training is not None:
        before_training(runs)
    if logger is not None:  # each worker writes its run's event file when the run has finished
        unfinished = [task | {"logger": logger} for task in unfinished]
    todo = pack_tasks(unfinished, pack)
    extra = dict(backend_options or {})
    if backend == "ray":
        extra.setdefault("address", spec.options.get("ray_address"))
    if backend == "submitit":
        extra = {**spec.options.get("submitit", {}), **extra}

    from tqdm.auto import tqdm  # about 0.1 s; parsing a sweep and its status show no bar

    counts = {"diverged": 0, "failed": 0, "locked": 0}
    logger_errors: list[tuple[str, str]] = []  # (hash, message) of runs whose worker could not log
    by_hash = {r.hash: r for r in runs}
    axes = list(dict.fromkeys([*spec.grid, *(k for v in spec.variants for k in v.grid)]))
    bar = tqdm(
        total=len(runs),
        initial=len(runs) - len(unfinished),
        desc=f"sweep {spec.name}",
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    try:
        for outcome in backends.get_backend(backend)(
            todo,
            trainer=trainer,
            workers=workers,
            runs_per_gpu=runs_per_gpu,
            sweep_dir=Path(sweep_dir),
            name=spec.name,
            options=extra,
        ):
            if outcome["status"] in counts:
                counts[outcome["status"]] += 1
            if outcome.get("logger_error"):
                logger_errors.append((outcome["hash"], outcome["logger_error"]))
            if outcome["status"] != "locked":
                bar.update(1)
                if not outcome.get("already_finished"):  # another driver's run is not ours
                    clock.trained()
                if progress:
                    bar.write(_outcome_line(outcome, by_hash[outcome["hash"]], axes, sweep_dir))
            postfix = {"diverged": counts["diverged"], "failed": counts["failed"]}
            if counts["locked"]:
                postfix["running elsewhere"] = counts["locked"]
            bar.set_postfix(postfix)
    finally:
        bar.close()
    if logger is not None:
        _log_finished_runs(runs, sweep_dir, logger, logger_errors)
    try:
        listed = {run.hash for run in read_manifest(sweep_dir)}
    except (runfolder.DamagedFileError, SweepError):
        listed = set()
    if stray := [r for r in runs if r.hash not in listed]:
        warnings.warn(
            f"{Path(sweep_dir) / 'manifest.json'} was replaced while this sweep ran (another "
            f"driver's --update?): {len(stray)} of its {len(runs)} runs are not listed there, so "
            "report and status leave them out; list them again by running this sweep's file with "
            f"--update (`initmem sweep run FILE --out {shlex.quote(str(sweep_dir))} --update`)",
            stacklevel=2,
        )
    return sweep_status(sweep_dir, runs)


class LoggerWarning(UserWarning):
    """A sweep's logger could not write some runs' event files."""


def _log_finished_runs(
    runs: list[SweepRun], sweep_dir: str | Path, logger: str, worker_errors: list[tuple[str, str]]
) -> None:
    """The logger's files of every finished run that lacks them, written here by the driver (a run
    finished before the logger was asked for, or whose worker could not log); one
    :class:`LoggerWarning` names the workers' failures, another the driver's own."""
    if worker_errors:
        first_hash, first = worker_errors[0]
        warnings.warn(
            f"logger {logger} failed in the workers of {len(worker_errors)} runs (first "
            f"{first_hash}: {first}); the driver writes their files instead",
            LoggerWarning,
            stacklevel=3,
        )
    failed = []
    for run in runs:
        run_dir = run.run_dir(sweep_dir)
        if runfolder.run_state(run_dir) not in runfolder.FINISHED_STATES:
            continue
        if loggers.event_files(run_dir):
            continue
        try:
            loggers.write_events(run_dir, logger)
        except Exception as err:  # noqa: BLE001 - the runs are finished; the failure is said once
            failed.append((run.hash, f"{type(err).__name__}: {' '.join(str(err).split())}"))
    if failed:
        warnings.warn(
            f"logger {logger} could not write the event files of {len(failed)} finished runs "
            f"(first {failed[0][0]}: {failed[0][1]}); rerun `initmem sweep run` once it works to "
            "write them",
            LoggerWarning,
            stacklevel=3,
        )


def _outcome_line(
    outcome: dict[str, Any], run: SweepRun, axes: list[str], sweep_dir: str | Path
) -> str:
    """One line per finished run: status, variant, grid point, test / train accuracy of the result."""
    point = " ".join(f"{k}={getattr(run.config, k)}" for k in axes)
    line = f"{outcome['status']:<9} {run.variant} {point}"
    if outcome["status"] == "failed":
        return f"{line}: {outcome.get('message', '')}"
    result = runfolder.read_result(run.run_dir(sweep_dir)) or {}
    test, train = result.get("test_acc"), result.get("final_train_acc")
    if isinstance(test, (int, float)) and isinstance(train, (int, float)):
        line += f": test {100 * test:.1f}%, train {100 * train:.1f}%"
    wall = outcome.get("wall_s")
    return line + (f" ({wall:.0f} s)" if isinstance(wall, (int, float)) else "")


__all__ = [
    "BACKENDS",
    "DEFAULT_TRAINER",
    "SweepError",
    "SweepRun",
    "STUDY_OPTIONS",
    "SweepSpec",
    "SweepStatus",
    "Variant",
    "list_presets",
    "pack_tasks",
    "preset_text",
    "prepare_sweep",
    "write_sweep_folder",
    "read_manifest",
    "run_sweep",
    "sweep_status",
]
