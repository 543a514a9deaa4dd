"""What made a run: the code and the machine, recorded in its ``config.json`` (docs/run-format.md).

:func:`provenance` is the record: initmem's version and, run from a git checkout, its commit (and
whether the checkout had uncommitted changes); the Python, torch and numpy versions; the device;
and for each plug-in (:mod:`.plugins`) the SHA-256 of its module's source file. Versions and the
device are not part of a run's identity (the same numbers come from another torch on the same
machine as often as not, and a rerun after an upgrade should find its finished runs); the plug-ins'
source digests are (:func:`plugin_sources`, folded into :attr:`.config.RunConfig.hash`): an edited
plug-in is another run.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.util
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from .plugins import is_plugin

#: Config fields that may name a plug-in.
PLUGIN_FIELDS = ("model", "dataset")
#: The digest of a plug-in whose source file cannot be found (the run then fails where it imports it).
UNAVAILABLE = "unavailable"


def plugin_sources(values: dict[str, Any]) -> dict[str, str]:
    """``{"model": sha256, "dataset": sha256}`` of the plug-ins a config (dict) names, by field; empty
    for built-in models and data sets (``torchvision:NAME`` is not user code: left out)."""
    return {
        field: source_digest(values[field].split(":")[0])
        for field in PLUGIN_FIELDS
        if is_plugin(values.get(field)) and not values[field].startswith("torchvision:")
    }


def source_file(module_name: str) -> Path | None:
    """The source file of module ``module_name`` (None if it cannot be found; finding it may import
    the packages above it, not the module itself)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # noqa: BLE001 - a parent package that fails to import: the run will say why
        return None
    origin = getattr(spec, "origin", None)
    if origin is None or origin in ("built-in", "frozen"):
        return None
    path = Path(origin)
    return path if path.is_file() else None


def source_digest(module_name: str) -> str:
    """SHA-256 (hex) of the source file of ``module_name``, or :data:`UNAVAILABLE`."""
    path = source_file(module_name)
    if path is None:
        return UNAVAILABLE
    try:
        stat = path.stat()
    except OSError:
        return UNAVAILABLE
    return _file_digest(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    """SHA-256 of a file, cached by its path, modification time and size (a sweep hashes many
    configs naming the same plug-in)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def provenance(values: dict[str, Any], device: str) -> dict[str, Any]:
    """The record of what made a run of config ``values`` on ``device`` (see the module docstring)."""
    import numpy
    import torch

    record: dict[str, Any] = {
        "initmem_version": initmem_version(),
        "git_commit": None,
        "git_dirty": None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "device": device,
        "platform": sys.platform,
    }
    record["git_commit"], record["git_dirty"] = git_state()
    record["plugins"] = {
        field: {
            "name": values[field],
            "file": str(source_file(values[field].split(":")[0])),
            "sha256": digest,
        }
        for field, digest in plugin_sources(values).items()
    }
    return record


def utc_now() -> str:
    """The time now, UTC, ISO 8601 to the second (``2026-12-07T04:01:02Z``): a run's
    ``started_at``, a prediction's ``written_at``."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=1)
def initmem_version() -> str:
    """The installed initmem version ("unknown" when not installed)."""
    try:
        from importlib.metadata import version

        return version("initmem")
    except Exception:  # noqa: BLE001 - not installed (a bare checkout)
        return "unknown"


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout initmem runs from; (None, None) when it is not one or git
    is missing."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None, None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def plugin_change(recorded: dict[str, Any], values: dict[str, Any]) -> str | None:
    """How the plug-in sources recorded in a ``config.json`` (``recorded``: its whole payload) differ
    from those of config ``values`` now, as one phrase; None if they do not (or none was recorded)."""
    before = {
        field: entry.get("sha256")
        for field, entry in ((recorded.get("provenance") or {}).get("plugins") or {}).items()
        if isinstance(entry, dict)
    }
    now = plugin_sources(values)
    changed = [f for f in now if f in before and before[f] != now[f]]
    if not changed:
        return None
    return "; ".join(
        f"{field} {values[field]!r}: its source changed (sha256 {before[field][:12]} when the run "
        f"started, {now[field][:12]} now)"
        for field in changed
    )


def recorded_provenance(run_dir: str | Path) -> dict[str, Any] | None:
    """The ``provenance`` a run's config.json records (None: none, or unreadable)."""
    import json

    try:
        payload = json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    record = payload.get("provenance") if isinstance(payload, dict) else None
    return record if isinstance(record, dict) else None


def provenance_sentence(run_dirs: list[str | Path]) -> str:
    """One sentence of what made the runs in ``run_dirs`` (their config.json's provenance): each
    field's values, several where the runs differ; empty when none records it."""
    records = [r for d in run_dirs if (r := recorded_provenance(d)) is not None]
    if not records:
        return ""

    def values(key: str) -> str:
        found = sorted({str(r.get(key)) for r in records if r.get(key) is not None})
        return " / ".join(found) if found else "unknown"

    commits = sorted(
        {
            f"{r['git_commit'][:10]}{' (uncommitted changes)' if r.get('git_dirty') else ''}"
            for r in records
            if r.get("git_commit")
        }
    )
    plugins = sorted(
        {
            f"{entry.get('name')} (sha256 {str(entry.get('sha256'))[:12]})"
            for r in records
            for entry in (r.get("plugins") or {}).values()
            if isinstance(entry, dict)
        }
    )
    sentence = (
        f"Made by initmem {values('initmem_version')}"
        + (f", git commit {' / '.join(commits)}" if commits else "")
        + f"; Python {values('python')}, torch {values('torch')}, numpy {values('numpy')}; "
        f"device {values('device')}"
    )
    if plugins:
        sentence += f"; plug-ins {', '.join(plugins)}"
    missing = len(run_dirs) - len(records)
    if missing:
        sentence += f" ({missing} of the {len(run_dirs)} runs record no provenance)"
    return sentence + f" (config.json of {len(records)} runs)."


__all__ = [
    "PLUGIN_FIELDS",
    "git_state",
    "initmem_version",
    "plugin_change",
    "plugin_sources",
    "provenance",
    "provenance_sentence",
    "recorded_provenance",
    "source_digest",
    "source_file",
    "utc_now",
]
