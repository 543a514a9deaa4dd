"""``load_runs``: any run folders (a sweep's or ``train()``'s) read as ``load_sweep`` reads a sweep."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from initmem.empirical.memory import spread_table
from initmem.empirical.runfolder import DamagedFileError
from initmem.empirical.sweep import SweepError, read_manifest
from initmem.empirical.tables import RUN_VARIANT, load_runs, load_sweep, missing_memory_sentences
from initmem.empirical.trainer import train
from tests.empirical.test_memory import make_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = make_sweep(tmp_path_factory.mktemp("tables") / "sweep")
    for run in read_manifest(root):  # the trainer's config.json (make_sweep writes the rest)
        record = {"hash": run.hash, "config": run.config.to_dict()}
        (run.run_dir(root) / "config.json").write_text(json.dumps(record))
    return root


def test_run_folders_of_a_sweep_read_as_the_sweep(sweep):
    whole = load_sweep(sweep)
    folders = load_runs(sorted((sweep / "runs").iterdir()))
    assert len(folders) == len(whole) == 12
    left, right = (f.set_index("hash").sort_index() for f in (whole, folders))
    # the variant is found in the sweep's manifest, so the labels are the sweep's too
    for column in ("variant", "pipeline", "label", "status", "alpha", "seed", "test_acc"):
        pd.testing.assert_series_equal(left[column], right[column], check_names=False)


def test_moved_run_folders_keep_their_pipelines_and_memories(sweep, tmp_path):
    """Runs copied out of the sweep: no manifest, the pipelines inferred from the configs alone."""
    for run_dir in (sweep / "runs").iterdir():
        shutil.copytree(run_dir, tmp_path / run_dir.name)
    moved = load_runs(list(tmp_path.iterdir()))
    assert set(moved["variant"]) == {RUN_VARIANT}
    whole = load_sweep(sweep)
    # the two variants differ in one field: each label names it
    varying = [c for c in ("optimizer", "lr", "momentum", "l2") if whole[c].nunique() > 1]
    assert varying and all(f"{varying[0]}=" in label for label in moved["label"])
    by_pipeline = {p: set(g["hash"]) for p, g in whole.groupby("pipeline")}
    assert {p: set(g["hash"]) for p, g in moved.groupby("pipeline")} == by_pipeline
    spreads = [
        spread_table(frame, n_boot=50).set_index("pipeline")["spread_pp"].sort_index()
        for frame in (whole, moved)
    ]
    np.testing.assert_allclose(spreads[0].to_numpy(), spreads[1].to_numpy(), equal_nan=True)


def test_a_run_listed_twice_and_a_sweep_folder_among_runs(sweep):
    first = sorted((sweep / "runs").iterdir())[0]
    runs = load_runs([first, sweep, first])
    assert len(runs) == 12 and runs["hash"].is_unique


def test_not_a_run_folder_and_a_damaged_config(tmp_path):
    with pytest.raises(SweepError, match="not a sweep folder .* nor a run folder"):
        load_runs([tmp_path])
    (tmp_path / "config.json").write_text('{"hash": "abc"')
    with pytest.raises(DamagedFileError, match="config.json"):
        load_runs(tmp_path)


def test_runs_trained_by_train_make_one_pipeline(tiny_config):
    """Two ``train()`` runs at two alphas, in folders of the user's naming: one pipeline, two alphas."""
    results = [train(tiny_config(alpha=alpha, epochs=1)) for alpha in (0.5, 2.0)]
    runs = load_runs([r.run_dir for r in results])
    assert runs["pipeline"].nunique() == 1 and sorted(runs["alpha"]) == [0.5, 2.0]
    assert list(runs["status"]) == ["completed", "completed"]
    assert runs["test_acc"].tolist() == [r.test_acc for r in results]


def test_the_interpolation_threshold_is_the_sweeps_and_every_missing_memory_is_said(tmp_path):
    """sgd at alpha=2 seed 1 ends at 99.0% train accuracy: below the default 99.5% its pipeline has
    one interpolating seed (no memory, said in a sentence naming that run); at ``[study]
    interpolation = 0.98`` both seeds count and the spread is the seed-mean max - min over alpha."""
    from tests.empirical.test_memory import ACC

    sweep = make_sweep(tmp_path / "sweep")
    runs = load_sweep(sweep)
    spread = spread_table(runs, n_boot=20).set_index("label")
    assert np.isnan(spread.loc["sgd", "spread_pp"])
    (sentence,) = missing_memory_sentences(runs)
    assert sentence.startswith("sgd has no memory: 1 of 2 seeds interpolate at every alpha")
    assert ">= 99.5%" in sentence and "alpha=2 seed 1 (99.0%)" in sentence
    assert "[study] interpolation" in sentence

    toml = sweep / "sweep.toml"
    toml.write_text(toml.read_text() + "\n[study]\ninterpolation = 0.98\n")
    runs = load_sweep(sweep)
    assert set(runs["interpolation"]) == {0.98} and missing_memory_sentences(runs) == []
    means = {alpha: 100 * np.mean(ACC[("sgd", alpha)]) for alpha in (0.5, 1.0, 2.0)}
    spread = spread_table(runs, n_boot=20).set_index("label")
    assert spread.loc["sgd", "spread_pp"] == pytest.approx(
        max(means.values()) - min(means.values()), abs=1e-9
    )
    # the caller's threshold wins over the file's; a bad one in the file names the field
    assert set(load_sweep(sweep, interpolation=0.999)["interpolation"]) == {0.999}
    toml.write_text(toml.read_text().replace("0.98", "1.5"))
    with pytest.raises(SweepError, match=r"\[study\] interpolation must be a fraction"):
        load_sweep(sweep)
