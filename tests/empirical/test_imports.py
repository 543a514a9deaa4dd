"""Imports as cheap as the work: reading configs and sweep folders does not load the training stack,
and every public name of ``initmem.empirical`` (README's API table) still resolves, on first use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LIGHT = """
import sys
import initmem.empirical.config
import initmem.empirical.sweep
from initmem.empirical import RunConfig, SweepSpec, sweep_status
from initmem.empirical.sweep import prepare_sweep, preset_text

RunConfig.from_dict({"alpha": 2.0}).hash
runs = prepare_sweep(SweepSpec.from_toml(preset_text("demo")), sys.argv[1])
status = sweep_status(sys.argv[1])
assert status.total == len(runs) == 24 and status.pending == 24, status
print(sorted(m for m in ("torch", "pandas", "matplotlib", "initmem.empirical.trainer") if m in sys.modules))
"""

#: Resolves every dotted path of the command line (``initmem.room.X[.Y]`` as the README writes them)
#: as a user would: attribute first, else the submodule; prints "ok N".
RESOLVE = """
import importlib, sys
for path in sys.argv[1:]:
    parts = path.split(".")
    obj = importlib.import_module(".".join(parts[:2]))
    for i, part in enumerate(parts[2:], start=2):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
print("ok", len(sys.argv) - 1)
"""

PUBLIC = (
    """
import inspect
import initmem.empirical as empirical

assert inspect.isfunction(empirical.train) and empirical.train.__name__ == "train"
assert set(empirical.__all__) <= set(dir(empirical))
for name in empirical.__all__:
    getattr(empirical, name)
"""
    + RESOLVE
)


def run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_configs_and_sweep_folders_import_without_torch_or_pandas(tmp_path):
    assert run(LIGHT, str(tmp_path / "demo")) == "[]"


def test_every_public_empirical_name_of_the_readme_resolves():
    readme = (ROOT / "README.md").read_text()
    paths = sorted(set(re.findall(r"`(initmem\.empirical\.[A-Za-z_][\w.]*)", readme)))
    assert "initmem.empirical.train" in paths and len(paths) >= 8
    assert run(PUBLIC, *paths) == f"ok {len(paths)}"
