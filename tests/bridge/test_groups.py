"""The per-group table: each parameter group's predicted and measured memory, for any run folders."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.groups import group_sentences, group_table
from initmem.bridge.preregister import predict_groups
from initmem.cli import main
from initmem.empirical import curves, memory, tables
from initmem.empirical.config import RunConfig
from initmem.empirical.data import write_cifar10_fixture
from initmem.empirical.trainer import train


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    """Four tiny ResNet-9 runs trained by ``train()`` (alpha 0.5 and 2, seeds 0 and 1)."""
    root = tmp_path_factory.mktemp("groups")
    write_cifar10_fixture(root / "data" / "cifar10-fixture")
    dirs = []
    for alpha in (0.5, 2.0):
        for seed in (0, 1):
            config = RunConfig(
                dataset="cifar10-fixture",
                data_dir=str(root / "data"),
                width=1 / 16,
                batch_size=4,
                epochs=2,
                lr=0.05,
                momentum=0.9,
                weight_decay=0.05,
                eval_batch_size=8,
                alpha=alpha,
                seed=seed,
                out_dir=str(root / f"alpha{alpha}-seed{seed}"),
                quiet=True,
            )
            dirs.append(str(train(config).run_dir))
    return dirs


def test_group_table_joins_the_predictions_and_the_measured_memories(run_dirs):
    runs = tables.load_runs(run_dirs)
    table = group_table(runs).set_index("group")
    assert list(table.index) == ["scale_invariant", "residual_stream", "head", "other"]
    config = RunConfig.from_dict(
        {k: v for k, v in _first_config(run_dirs).items() if k != "threads"}
    )
    predicted = predict_groups(config).table.set_index("group")
    for group, row in table.iterrows():
        steps = predicted.loc[group, "steps"]
        assert row["predicted_step"] == pytest.approx(steps, rel=1e-12, nan_ok=True)
        # the law's own memory at the end (P1, P2); P3 gives a time only
        assert row["predicted_memory_end"] == pytest.approx(
            predicted.loc[group, "memory_end"], rel=1e-12, nan_ok=True
        )
        assert row["parameters"] == predicted.loc[group, "parameters"]
    # the scale-invariant group's measured memory is M4 as the report computes it
    done = tables.finished_runs(runs)
    layers = tables.load_layers(done)
    m4 = memory.norm_memory_end(curves.norm_memory_curves(done, layers), done)
    assert table.loc["scale_invariant", "measured_memory_end"] == pytest.approx(
        m4["memory_end"].item(), rel=1e-9
    )
    assert np.isnan(table.loc["head", "predicted_memory_end"])
    assert np.isfinite(table.loc[["scale_invariant", "other"], "predicted_memory_end"]).all()
    assert table.loc["residual_stream", "agreement"] == "cannot tell"  # a ResNet has none
    for group, row in table.drop(index="residual_stream").iterrows():  # both on one side of 1/e
        forgets = (
            row["predicted_memory_end"] <= 1 / math.e
            if np.isfinite(row["predicted_memory_end"])
            else row["predicted_step"] <= config.total_steps
        )
        same = forgets == (row["measured_memory_end"] <= 1 / math.e)
        assert row["agreement"] == ("agrees" if same else "disagrees"), group
    sentences = group_sentences(table.reset_index())
    assert len(sentences) == 3
    measured = table.loc["scale_invariant", "measured_memory_end"]
    assert f"{measured:.2f} was measured" in sentences[0]


def _first_config(run_dirs):
    import json
    from pathlib import Path

    return json.loads((Path(run_dirs[0]) / "config.json").read_text())["config"]


def test_report_and_bridge_of_run_folders_hold_the_group_table(run_dirs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", *run_dirs, "--out", str(out), "--n-boot", "20"]) == 0
    assert "per-group table: 4 rows" in capsys.readouterr().out
    text = (out / "report.md").read_text()
    assert "## Memory per parameter group: predicted and measured" in text
    assert "P1: normalized-weight laws" in text  # the legend spells the codes out
    saved = pd.read_csv(out / "groups.csv")
    assert list(saved["group"]) == ["scale_invariant", "residual_stream", "head", "other"]
    assert np.isfinite(saved["predicted_memory_end"]).sum() == 2  # P3 (the head) gives a time only
    bridge = tmp_path / "bridge"
    argv = ["bridge", *run_dirs, "--out", str(bridge), "--n-boot", "0", "--no-figures"]
    assert main(argv) == 0
    assert "## Memory per parameter group" in (bridge / "report.md").read_text()
    assert (bridge / "groups.csv").is_file()


def test_the_bridge_says_the_laws_memory_at_the_end_beside_the_measured_one(run_dirs):
    """BridgeReport.agreement_sentences: the numbers are the curves' own at the last evaluation."""
    from initmem.bridge import fit
    from initmem.empirical.curves import SCALE_INVARIANT_MEAN

    report = fit(tables.load_runs(run_dirs), n_boot=0)
    (sentence,) = report.agreement_sentences()
    mean = report.norm_curves[report.norm_curves["layer"] == SCALE_INVARIANT_MEAN]
    end = mean["step"].max()
    measured = mean[mean["step"] == end]["memory"].mean()
    law = report.predicted_curves[report.predicted_curves["layer"] == SCALE_INVARIANT_MEAN]
    predicted = law[law["step"] == end]["memory"].mean()
    assert f"the law predicted norm memory {predicted:.2f}" in sentence
    assert f"at the end (step {end}); {measured:.2f} was measured" in sentence
    assert sentence in report.summary()
