"""A plain (non-editable) install maps the top-level folders onto the initmem package."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("initmem-*.whl")
    return path


def test_wheel_maps_subpackages(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in [
        "initmem/__init__.py",
        "initmem/cli/__init__.py",
        "initmem/theory/__init__.py",
        "initmem/empirical/__init__.py",
        "initmem/empirical/config.py",
        "initmem/bridge/__init__.py",
    ]:
        assert expected in names
    assert any(n.startswith("initmem/empirical/presets/") and n.endswith(".toml") for n in names)
    assert not any(n.startswith(("theory/", "empirical/", "bridge/", "tests/")) for n in names)


def test_plain_install_imports(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import initmem, initmem.theory, initmem.empirical, initmem.bridge, initmem.cli;"
        "print(initmem.__file__); print(initmem.empirical.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    assert all(line.startswith(str(target)) for line in out)
