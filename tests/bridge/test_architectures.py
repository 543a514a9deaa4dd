"""The architectures study (bridge/study/architectures.py, bridge/study/architecture_document.py) on synthetic
sweeps with a planted answer: the verdict sentences follow the planted truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from initmem.bridge.study.architectures import (
    architecture_study,
    is_architecture_sweep,
    spread_state,
)
from initmem.cli import main
from initmem.empirical import memory
from tests.bridge.architecture_synthetic import STEPS_PER_EPOCH, Cell, write_architecture_sweep

T = 30 * STEPS_PER_EPOCH  # 1200 steps per run
INF = math.inf

#: The planted truth, per model:
#: resnet9  (scale-invariant): L2 erases the norm memory (tau 100) and the spread (gap 0) as
#:          predicted (150 steps); low-lr SGD keeps both (tau 1e7, gap 10 pp), predicted never.
#: mlp      (no invariance): gap 10 pp kept, predicted never; gap 0 with decay predicted 200: agrees.
#: vit-tiny (no invariance): gap 10 pp persistent although forgetting is predicted at 100 steps.
#: resnet18 (scale-invariant): the norm memory converges (tau 100) but the spread stays (12 pp).
#: mlp-mixer: a 3 pp gap under 3 pp seed noise (2 seeds in its own sweep): cannot tell.
CELLS = [
    Cell("resnet9", "resnet9-sgd-l2", 0.1, 0.01, True, 0.0, 0.3, 100.0, 150.0),
    Cell("resnet9", "resnet9-sgd", 0.01, 0.0, True, 10.0, 0.3, 1e7, INF),
    Cell("mlp", "mlp-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF),
    Cell("mlp", "mlp-adamw", 0.05, 0.05, False, 0.0, 0.3, 1.0, 200.0),
    Cell("vit-tiny", "vit-sgd-l2", 0.1, 0.01, False, 10.0, 0.3, 1.0, 100.0),
    Cell("resnet18", "resnet18-sgd-l2", 0.1, 0.01, True, 12.0, 0.3, 100.0, 150.0),
]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = write_architecture_sweep(tmp_path_factory.mktemp("arch"), CELLS)
    return architecture_study(root, compute_missing=False)


def verdict_of(study, model):
    return next(line for line in study.verdict() if line.startswith(f"{model}:"))


def test_the_verdicts_follow_the_planted_truth(study):
    assert "the data agree with the thesis here" in verdict_of(study, "resnet9")
    assert "the data agree with the thesis here" in verdict_of(study, "mlp")
    vit = verdict_of(study, "vit-tiny")
    assert "the thesis does not hold here" in vit
    assert "persists past the predicted forgetting time" in vit
    r18 = verdict_of(study, "resnet18")
    assert "the thesis does not hold here" in r18 and "effective learning rates converged" in r18
    assert "cannot tell" not in " ".join(study.verdict())


def test_each_cell_measures_the_planted_memory(study):
    cells = study.cells.set_index("pipeline_label")
    # the paired difference is the planted gap (largest alpha below the smallest) to the noise
    for cell in CELLS:
        row = cells.loc[cell.variant]
        assert row["diff_pp"] == pytest.approx(-cell.gap_pp, abs=1.0)
        assert row["diff_lo"] < row["diff_pp"] < row["diff_hi"]
        assert row["n_seeds_used"] == 4
        assert row["spread_state"] == ("kept" if cell.gap_pp else "gone")
        assert row["has_scale_invariant"] == cell.invariant
        assert row["predicted_steps"] == cell.predicted_steps
        assert row["prediction_source"] == "pre-registered before training"
    # norm memory: exp(-T / tau) exactly (every seed the same), its forgetting time the first
    # logged step with exp(-t / tau) <= 1/e, i.e. the first evaluation at or after tau
    fast = cells.loc["resnet9-sgd-l2"]
    assert fast["norm_end"] == pytest.approx(math.exp(-T / 100.0), abs=1e-9)
    assert fast["norm_state"] == "converged" and fast["norm_time_steps"] == 120.0
    slow = cells.loc["resnet9-sgd"]
    assert slow["norm_end"] == pytest.approx(math.exp(-T / 1e7), rel=1e-6)
    assert slow["norm_state"] == "apart" and slow["norm_time_censored"]
    assert cells.loc["mlp-sgd"]["norm_state"] == "not defined: no scale-invariant weights"


def test_the_spread_matches_the_memory_module(study):
    """The reported spread and null are empirical.memory's, on the same runs."""
    runs = study.runs
    for label in ("mlp-sgd", "vit-sgd-l2"):
        group = runs[runs["label"] == label]
        expected = memory.spread_memory(group)
        row = study.cells.set_index("pipeline_label").loc[label]
        assert row["spread_pp"] == pytest.approx(expected["spread_pp"], rel=1e-12)
        assert row["p_value"] == pytest.approx(expected["p_value"])
        assert row["p_min"] == pytest.approx(2 / 2**4)  # two alphas, 4 seeds


def test_spread_state_rules():
    assert spread_state(-1.0, 1.5) == "gone"
    assert spread_state(-11.0, -9.0) == "kept"
    assert spread_state(-5.0, 1.0) == "cannot tell"
    assert spread_state(np.nan, np.nan) == "cannot tell"


def test_a_noisy_gap_on_two_seeds_cannot_tell(tmp_path):
    cells = [
        Cell("mlp-mixer", "mixer-sgd", 0.01, 0.0, False, 3.0, 3.0, 1.0, INF),
        Cell("mlp", "mlp-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF),
    ]
    study = architecture_study(
        write_architecture_sweep(tmp_path, cells, seeds=(0, 1)), compute_missing=False
    )
    assert "cannot tell at this size" in verdict_of(study, "mlp-mixer")
    assert "the spread is not decided at this size" in verdict_of(study, "mlp-mixer")


def test_a_cell_without_interpolating_seeds_says_so(tmp_path):
    root = write_architecture_sweep(tmp_path, CELLS[2:4], seeds=(0, 1))
    result = root / "runs"
    for path in result.glob("*/result.json"):  # no run fits its training set
        path.write_text(
            path.read_text().replace('"final_train_acc": 1.0', '"final_train_acc": 0.5')
        )
    study = architecture_study(root, compute_missing=False)
    assert "0 seed(s) interpolate at every alpha: no spread" in verdict_of(study, "mlp")
    for path in result.glob("*/result.json"):  # now the alpha-8 runs diverge
        alpha = json.loads((path.parent / "config.json").read_text())["config"]["alpha"]
        if alpha == 8.0:
            path.write_text(path.read_text().replace('"completed"', '"diverged"'))
    study = architecture_study(root, compute_missing=False)
    cells = study.cells.set_index("pipeline_label")
    assert cells.loc["mlp-sgd", "diverged"] == "alpha 8: 2 of 2"
    assert "runs diverged (alpha 8: 2 of 2)" in verdict_of(study, "mlp")


def test_the_document_states_every_section_from_the_folder(study, tmp_path):
    text = study.markdown(command="initmem study DIR --doc docs/architectures.md", wall="took 3 s")
    for heading in ("## Verdict", "## Per architecture", "## The predictions", "## Reproduce"):
        assert heading in text
    for line in study.verdict():
        assert line in text
    assert "### vit-tiny" in text and "not defined: no scale-invariant weights" in text
    assert "> 1200 (censored)" in text  # resnet9 low-lr SGD: norm memory never reaches 1/e
    assert "pre-registered before training" in text and "took 3 s" in text
    assert f"Training: {len(study.runs)} runs" in text


def test_initmem_study_detects_an_architecture_sweep(tmp_path, capsys):
    root = write_architecture_sweep(tmp_path / "sweep", CELLS[:3], seeds=(0, 1, 2))
    assert is_architecture_sweep(root)
    doc = tmp_path / "docs" / "architectures.md"
    assert main(["study", str(root), "--doc", str(doc), "--wall-time", "1 min"]) == 0
    printed = capsys.readouterr().out
    assert "resnet9: the data agree with the thesis here" in printed
    text = doc.read_text()
    assert "# Beyond BatchNorm ResNets" in text and "1 min" in text
    assert (tmp_path / "sweep" / "study" / "cells.csv").is_file()
    assert f"initmem study {root} --doc {doc}" in text


def test_the_document_is_rewritten_in_place(tmp_path, capsys):
    root = write_architecture_sweep(tmp_path / "sweep", CELLS[:3], seeds=(0, 1, 2))
    doc = tmp_path / "architectures.md"
    doc.write_text("an older version\n")
    assert main(["study", str(root), "--doc", str(doc), "--kind", "architectures"]) == 0
    assert doc.read_text().startswith("# Beyond BatchNorm ResNets")
    capsys.readouterr()


@pytest.mark.slow  # two NTKs of a Mixer: about 25 s on 2 shared cores
def test_predictions_missing_from_the_folder_are_computed_and_labelled(tmp_path):
    """Without pre-registered files the study computes predict_groups on each pipeline's config at
    its largest alpha, and says so."""
    from initmem.bridge.preregister import predict_groups
    from initmem.empirical.sweep import read_manifest

    cells = [Cell("mlp-mixer", "mixer-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF)]
    root = write_architecture_sweep(tmp_path, cells, seeds=(0, 1), predictions=False)
    study = architecture_study(root)
    by_label = study.cells.set_index("pipeline_label")
    for run in read_manifest(root):
        if run.config.alpha != 8.0 or run.config.seed != 0:
            continue
        expected = predict_groups(run.config).table.set_index("group")
        row = by_label.loc[run.variant]
        assert row["prediction_source"] == "computed after the runs (no pre-registered file)"
        assert row["deciding_group"] == "other"  # the Mixer has no scale-invariant weight
        assert row["predicted_steps"] == expected.loc["other", "steps"]
        assert row["memory_fraction"] == pytest.approx(expected.loc["other", "memory_fraction"])
