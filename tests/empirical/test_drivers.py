"""A second sweep driver that rewrites the manifest (``--update``) while the first one trains: the
first driver's summary counts its own runs and it says, in one warning, which runs the new manifest
leaves out. And a report on runs that all diverged before their first step claims nothing about
where the effective learning rates went."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec, prepare_sweep, read_manifest, run_sweep
from tests.empirical.fake_trainer import fake_train
from tests.empirical.test_sweep import importable, write_sweep  # noqa: F401

EIGHT = """
name = "eight"
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 2
[grid]
alpha = [0.25, 0.5, 2.0, 4.0]
seed = [0, 1]
"""
FOUR = EIGHT.replace('"eight"', '"four"').replace("[0.25, 0.5, 2.0, 4.0]", "[0.25, 2.0]")


def second_driver_meanwhile(config: RunConfig) -> dict:
    """fake_train, but the first run of the sweep first lets a second driver rewrite the manifest
    for a sweep of four (what ``initmem sweep run FOUR --out DIR --update`` does first)."""
    sweep_dir = Path(config.out_dir).parents[1]
    marker = sweep_dir / "second-driver-done"
    if not marker.exists():
        marker.write_text("")
        prepare_sweep(SweepSpec.from_toml(FOUR), sweep_dir, update=True)
    return fake_train(config)


@pytest.mark.usefixtures("importable")
def test_an_update_by_a_second_driver_leaves_the_first_drivers_summary_whole(tmp_path):
    sweep = write_sweep(tmp_path, EIGHT)
    out = tmp_path / "out"
    trainer = "tests.empirical.test_drivers:second_driver_meanwhile"
    with pytest.warns(UserWarning, match="was replaced while this sweep ran") as caught:
        status = run_sweep(sweep, out, trainer=trainer, workers=1, progress=False)
    assert (status.total, status.done) == (8, 8)  # not "4/4 done"
    assert len(read_manifest(out)) == 4
    (warning,) = [w for w in caught if "was replaced" in str(w.message)]
    assert "4 of its 8 runs are not listed there" in str(warning.message)
    assert "--update" in str(warning.message)


def test_a_report_on_runs_that_all_diverged_before_a_step_claims_no_end_state(tmp_path):
    from initmem.empirical.curves import norm_memory_curves
    from initmem.empirical.memory import norm_memory_end, norm_sentences
    from initmem.empirical.tables import load_layers, load_sweep
    from tests.bridge.synthetic import known_pipelines, write_synthetic_sweep

    root = write_synthetic_sweep(tmp_path / "s", known_pipelines()[:2], seeds=(0, 1), norms="sgd")
    for path in root.glob("runs/*/result.json"):
        result = json.loads(path.read_text()) | {"status": "diverged", "reason": "loss is nan"}
        path.write_text(json.dumps(result))
    for path in root.glob("runs/*/*.parquet"):
        table = pd.read_parquet(path)
        table[table["epoch"] == 0].to_parquet(path)
    for path in [*root.glob("runs/*/log.jsonl"), *root.glob("runs/*/predictions.npz")]:
        path.unlink()
    runs = load_sweep(root)
    assert (runs["status"] == "diverged").all()
    curves = norm_memory_curves(runs, load_layers(runs))
    assert not curves.empty and (curves["step"] == 0).all()  # the init is all there is
    table = norm_memory_end(curves, runs)
    assert table.empty and norm_sentences(table) == []

    from initmem.empirical.report import write_report

    text = write_report(root, n_boot=20).read_text()
    assert "stayed apart" not in text
    assert (
        "- no run logged an evaluation after a step (all stopped at init): nothing to tell." in text
    )


def test_an_interrupted_sweep_is_told_to_finish_not_to_add_an_alpha(tmp_path, capsys):
    """One run of eight done: the grid has the second alpha, so the bridge says to finish the sweep."""
    from initmem.cli import main

    out = tmp_path / "out"
    runs = prepare_sweep(SweepSpec.from_toml(EIGHT), out)
    first = runs[0].task(out)
    Path(first["run_dir"]).mkdir(parents=True)
    fake_train(RunConfig.from_dict(first["config"]))
    assert main(["bridge", str(out), "--n-boot", "0", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: only 1 of the sweep's 8 runs have finished (7 pending): the grid has the alphas to "
        "compare; finish the sweep (`initmem sweep run`) first\n"
    )
