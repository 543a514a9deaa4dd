"""``initmem sweep run|status|presets`` and ``initmem report`` through ``initmem.cli.main``."""

from __future__ import annotations

import json
import textwrap

import pytest

from initmem.cli import main
from initmem.empirical.sweep import read_manifest
from tests.empirical.fake_trainer import FAKE

SWEEP = """
name = "cli"
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 2
[grid]
alpha = [0.5, 1.0, 2.0]
lr = [0.1, 0.5]
"""


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(SWEEP))
    return path


def test_run_then_status_counts_runs(tmp_path, sweep_file, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "sweep",
            "run",
            str(sweep_file),
            "--out",
            str(out),
            "--trainer",
            FAKE,
            "--quiet",
            "--no-predictions",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 1  # the lr = 0.5 runs fail (the fake trainer raises)
    assert "3/6 done" in printed and "3 failed" in printed
    assert "RuntimeError: fake failure for lr = 0.5" in printed

    assert main(["sweep", "status", str(out), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert {k: counts[k] for k in ("total", "done", "completed", "failed", "pending")} == {
        "total": 6,
        "done": 3,
        "completed": 3,
        "failed": 3,
        "pending": 0,
    }
    assert main(["sweep", "status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "done      3" in text and "failed    3" in text


def test_set_overrides_every_run_and_dry_run_writes_nothing(tmp_path, sweep_file, capsys):
    out = tmp_path / "out"
    args = ["sweep", "run", str(sweep_file), "--out", str(out), "--set", "lr=0.2", "--dry-run"]
    assert main(args) == 0
    assert "3 runs (valid)" in capsys.readouterr().out
    assert not out.exists()
    assert main([*args[:-1], "--trainer", FAKE, "--quiet", "--no-predictions"]) == 0
    assert {r.config.lr for r in read_manifest(out)} == {0.2}
    assert "lr = 0.2" in (out / "sweep.toml").read_text()


def test_a_dry_run_needs_no_folder_and_a_run_does(tmp_path, sweep_file, capsys):
    assert main(["sweep", "run", str(sweep_file), "--dry-run"]) == 0
    assert "DIR/predictions/<variant>/predictions.csv" in capsys.readouterr().out
    assert main(["sweep", "run", str(sweep_file), "--trainer", FAKE, "--quiet"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err


def test_bad_sweeps_exit_2_with_one_line(tmp_path, sweep_file, capsys):
    out = tmp_path / "out"
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid]\nalpha = [1.0, -2.0]\n")
    assert main(["sweep", "run", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: run 1 of sweep 'bad' (variant 'v0', alpha=-2.0): alpha must be > 0"
    )
    assert main(["sweep", "run", "no-such-preset", "--out", str(out)]) == 2
    assert "nor a preset" in capsys.readouterr().err
    assert main(["sweep", "run", str(sweep_file), "--out", str(out), "--trainer", "nope"]) == 2
    assert "module:function" in capsys.readouterr().err
    assert main(["sweep", "status", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    assert not out.exists()


def test_presets_are_listed_and_runnable_by_name(tmp_path, capsys):
    assert main(["sweep", "presets"]) == 0
    listed = capsys.readouterr().out
    assert "demo" in listed and "paper-resnet9" in listed
    assert main(["sweep", "run", "paper-resnet9", "--out", str(tmp_path), "--dry-run"]) == 0
    assert "91 runs" in capsys.readouterr().out


def test_report_command_writes_report_and_prints_spread(tmp_path, capsys):
    from tests.empirical.test_memory import make_sweep

    sweep = make_sweep(tmp_path / "sweep", train={})  # every run interpolates: both seeds used
    assert main(["report", str(sweep), "--n-boot", "100", "--no-groups"]) == 0
    printed = capsys.readouterr().out
    assert f"report: {sweep / 'report.md'}" in printed
    sgd = next(line for line in printed.splitlines() if line.startswith("sgd "))
    assert sgd.split()[1] == "17.0"
    make_sweep(tmp_path / "one_fails")  # seed 1 of sgd does not interpolate at alpha 2 (M1)
    assert main(["report", str(tmp_path / "one_fails"), "--n-boot", "10", "--no-groups"]) == 0
    sgd = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("sgd "))
    assert "(1 seed(s) interpolate at every alpha)" in sgd
    assert (sweep / "figures" / "spread.png").is_file()
