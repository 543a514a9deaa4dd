"""Every command's failures: one line ``error: ...`` and status 2, a traceback only with ``--debug``,
Ctrl-C -> ``interrupted; resume with: ...`` and status 130."""

from __future__ import annotations

import importlib
import json

import pytest

from initmem.cli import EXIT_INTERRUPTED, describe_error, main
from tests.empirical.fake_trainer import FAKE
from tests.empirical.test_sweep import write_sweep

SWEEP = """
name = "errors"
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 1
[grid]
alpha = [0.5, 1.0]
"""


@pytest.fixture
def sweep_file(tmp_path):
    return write_sweep(tmp_path, SWEEP)


def _one_error_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_out_that_is_a_file_is_one_line(tmp_path, sweep_file, capsys, monkeypatch):
    monkeypatch.delenv("INITMEM_DEBUG", raising=False)
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder\n")
    argv = ["sweep", "run", str(sweep_file), "--out", str(blocker), "--trainer", FAKE, "--quiet"]
    assert main(argv) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f"{blocker}/runs: a part of this path is a file, not a folder" in err

    argv[4] = str(blocker / "inside")  # a path through a file
    assert main(argv) == 2
    assert "is a file, not a folder" in _one_error_line(capsys.readouterr().err)


def test_debug_prints_the_traceback(tmp_path, sweep_file, capsys, monkeypatch):
    monkeypatch.delenv("INITMEM_DEBUG", raising=False)
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["sweep", "run", str(sweep_file), "--out", str(blocker), "--trainer", FAKE, "--quiet"]
    for command in (["--debug", *argv], [*argv, "--debug"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err and "NotADirectoryError" in err
        assert err.rstrip().splitlines()[-1].startswith("error: ")
    monkeypatch.setenv("INITMEM_DEBUG", "1")
    assert main(argv) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (PermissionError(13, "Permission denied", "/srv/runs"), "/srv/runs: permission denied"),
        (FileExistsError(17, "File exists", "out.txt"), "out.txt exists and is not a folder"),
        (NotADirectoryError(20, "Not a directory", "f/x"), "f/x: a part of this path is a file"),
        (OSError(28, "No space left on device", "/d"), "/d: No space left on device"),
        (ValueError("two\n   lines"), "two lines"),
    ],
)
def test_describe_error_names_the_path(error, text):
    assert describe_error(error).startswith(text)


def test_interrupt_prints_how_to_resume(tmp_path, capsys, monkeypatch):
    def interrupted(config, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module("initmem.empirical.trainer"), "train", interrupted)
    monkeypatch.delenv("INITMEM_DEBUG", raising=False)
    out = tmp_path / "run"
    code = main(
        ["train", "--set", "dataset=cifar10-fixture", "--set", "batch_size=4", "--out", str(out)]
    )
    assert code == EXIT_INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("interrupted; resume with: initmem train --set dataset=cifar10-fixture")
    assert err.rstrip().endswith(f"--out {out} --resume")


def test_empty_out_is_an_error_not_the_default_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--out", "", "--set", "epochs=1"]) == 2
    assert "out_dir must name a folder" in _one_error_line(capsys.readouterr().err)
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert main(["train", "--config", str(empty)]) == 2
    assert "sets no field" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "runs").exists()  # nothing started in the default runs/run


def test_report_out_and_a_one_alpha_sweep(tmp_path, capsys):
    from tests.empirical.test_memory import make_sweep

    sweep = make_sweep(tmp_path / "sweep")
    manifest = sweep / "manifest.json"
    entries = json.loads(manifest.read_text())
    manifest.write_text(json.dumps([e for e in entries if e["config"]["alpha"] == 1.0]))
    out = tmp_path / "report"
    assert main(["report", str(sweep), "--out", str(out), "--n-boot", "10"]) == 0
    printed = capsys.readouterr().out
    assert (out / "report.md").is_file() and not (sweep / "report.md").exists()
    sgd = next(line for line in printed.splitlines() if line.startswith("sgd "))
    assert sgd.split()[1:4] == ["-", "(one", "alpha)"]
