"""The architectures study (bridge/study/architectures.py, bridge/study/architecture_document.py) on synthetic
sweeps with a planted answer: the verdict sentences follow the planted truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.study import equivalence
from initmem.bridge.study.architecture_calibration import calibrate_architectures
from initmem.bridge.study.architectures import (
    architecture_study,
    architecture_verdict,
    is_architecture_sweep,
    seeds_to_decide,
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
#: mlp-mixer (pre-LN, the joint residual_stream norm): decay erases norm (tau 100) and spread as
#:          predicted (150 steps); Adam without decay keeps both (gap 10 pp), predicted never.
CELLS = [
    Cell("resnet9", "resnet9-sgd-l2", 0.1, 0.01, True, 0.0, 0.3, 100.0, 150.0),
    Cell("resnet9", "resnet9-sgd", 0.01, 0.0, True, 10.0, 0.3, 1e7, INF),
    Cell("mlp", "mlp-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF),
    Cell("mlp", "mlp-adamw", 0.05, 0.05, False, 0.0, 0.3, 1.0, 200.0),
    Cell("vit-tiny", "vit-sgd-l2", 0.1, 0.01, False, 10.0, 0.3, 1.0, 100.0),
    Cell("resnet18", "resnet18-sgd-l2", 0.1, 0.01, True, 12.0, 0.3, 100.0, 150.0),
    Cell("mlp-mixer", "mixer-adamw", 0.01, 0.5, False, 0.0, 0.3, 100.0, 150.0, stream=True),
    Cell("mlp-mixer", "mixer-adam", 0.001, 0.0, False, 10.0, 0.3, 1e7, INF, stream=True),
]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = write_architecture_sweep(tmp_path_factory.mktemp("arch"), CELLS)
    return architecture_study(root, compute_missing=False)


def verdict_of(study, model):
    return next(line for line in study.verdict() if line.startswith(f"{model}:"))


def test_the_verdicts_follow_the_planted_truth(study):
    assert "the thesis holds here" in verdict_of(study, "resnet9")
    assert "the thesis holds here" in verdict_of(study, "mlp")
    assert "the thesis holds here" in verdict_of(study, "mlp-mixer")
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
        assert row["has_norm_memory"] == (cell.invariant or cell.stream)
        assert row["deciding_group"] == (
            "scale_invariant" if cell.invariant else "residual_stream" if cell.stream else "other"
        )
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
    assert cells.loc["mlp-sgd"]["norm_state"] == "not defined: no normalized weights"
    # the pre-LN model's norm memory is its joint residual-stream entry's
    stream = cells.loc["mixer-adamw"]
    assert stream["norm_end"] == pytest.approx(math.exp(-T / 100.0), abs=1e-9)
    assert stream["norm_state"] == "converged" and stream["norm_time_steps"] == 120.0
    assert cells.loc["mixer-adam"]["norm_state"] == "apart"


def test_the_function_memory_matches_the_memory_and_equivalence_modules(study):
    """The reported spread is empirical.memory's and the function verdict equivalence's (E1-E6),
    on the same runs; the seed sd is the sample sd of the per-seed differences."""
    runs = tables_finished(study.runs)
    for label in ("mlp-sgd", "vit-sgd-l2", "mixer-adamw"):
        group = runs[runs["label"] == label]
        expected = memory.spread_memory(group)
        decided = equivalence.pipeline_verdict(group)
        row = study.cells.set_index("pipeline_label").loc[label]
        assert row["spread_pp"] == pytest.approx(expected["spread_pp"], rel=1e-12)
        assert row["spread_state"] == decided["verdict"]
        d = equivalence.paired_differences(group)[3]
        assert row["sd_pp"] == pytest.approx(float(np.std(d, ddof=1)), rel=1e-12)
        assert row["perm_p_min"] == pytest.approx(2 / 2**4)  # two alphas, 4 seeds


def tables_finished(runs):
    from initmem.empirical import tables

    return tables.finished_runs(runs)


def _cells(*rows):
    return pd.DataFrame(
        [
            {"predicted_state": p, "agreement": a, "model": "m", "pipeline_label": f"p{i}"}
            for i, (p, a) in enumerate(rows)
        ]
    )


FORGETS, KEEPS = "forgets within the run", "keeps alpha past the run"


@pytest.mark.parametrize(
    ("rows", "answer"),
    [
        (((KEEPS, "agrees"), (FORGETS, "agrees")), "holds"),
        (((KEEPS, "agrees"), (KEEPS, "agrees")), "cannot tell"),  # one direction only
        (((KEEPS, "agrees"), (FORGETS, "cannot tell")), "cannot tell"),
        (((KEEPS, "agrees"), (FORGETS, "agrees"), (FORGETS, "disagrees")), "does not hold"),
        (((KEEPS, "cannot tell"), (FORGETS, "disagrees")), "does not hold"),
    ],
)
def test_the_architecture_verdict_needs_both_directions_decided(rows, answer):
    assert architecture_verdict(_cells(*rows)) == answer


def test_an_open_cell_names_the_seeds_that_would_decide_it(tmp_path):
    """A5: a forgetting cell under 3 pp seed noise on 3 seeds cannot be called gone; the verdict
    names E5's seeds at its measured sd, and a keeping cell's E5' seeds at its difference."""
    cells = [
        Cell("mlp", "mlp-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF),
        Cell("mlp", "mlp-adamw", 0.05, 0.05, False, 0.0, 3.0, 1.0, 200.0),
    ]
    study = architecture_study(
        write_architecture_sweep(tmp_path, cells, seeds=(0, 1, 2)), compute_missing=False
    )
    row = study.cells.set_index("pipeline_label").loc["mlp-adamw"]
    assert row["agreement"] == "cannot tell"
    need = seeds_to_decide(row)  # at the measured difference and noise (E5)
    expected = equivalence.seeds_for_gone(row["sd_pp"], diff=row["diff_pp"])
    assert need == expected or (np.isnan(need) and np.isnan(expected))
    line = verdict_of(study, "mlp")
    assert "cannot tell at this size" in line and "predicted to forget" in line
    if np.isfinite(need):
        assert need > 3 and f"{int(need)} seeds would show it gone" in line
    else:
        assert "no number of seeds would show it gone" in line
    keep = study.cells.set_index("pipeline_label").loc["mlp-sgd"]
    assert seeds_to_decide(keep) == equivalence.seeds_for_kept(keep["diff_pp"], keep["sd_pp"])


def test_the_calibration_of_one_open_cell_is_its_tost_power():
    """A6 against a closed form: with one keeping cell far above its noise (always kept) and one
    forgetting cell of sd 2 pp on 6 seeds, the verdict under the truth "holds" is "holds" exactly
    when E3 calls the second gone: rate = tost_power(0, 2, 6) (E5), to 4 binomial standard errors
    of the replicas; under "memory stays" (the second cell at 2 margins) "holds" is wrong."""
    cells = pd.DataFrame(
        {
            "model": ["m", "m"],
            "predicted_state": [KEEPS, FORGETS],
            "diff_pp": [-20.0, 0.5],
            "sd_pp": [0.1, 2.0],
            "n_seeds_used": [6, 6],
        }
    )
    n = 1500
    table = calibrate_architectures(cells, seeds=6, replicas=n, seed=3).set_index("truth")
    expected = equivalence.tost_power(0.0, 2.0, 6)
    holds = table.loc["holds"]
    assert holds["right"] == pytest.approx(
        expected, abs=4 * math.sqrt(expected * (1 - expected) / n)
    )
    # wrong only when the forgetting cell's 95% interval excludes 0 by chance (E2 at level 0.05)
    assert holds["wrong"] == pytest.approx(0.05, abs=4 * math.sqrt(0.05 * 0.95 / n))
    stays = table.loc["memory stays"]
    assert stays["wrong"] < 0.01 and stays["decided"] > 0.5
    gone = table.loc["memory goes early"]  # both cells at 0: the keeping cell is called gone
    assert gone["right"] > 0.99


def test_a_noisy_gap_on_two_seeds_cannot_tell(tmp_path):
    cells = [
        Cell("mlp-mixer", "mixer-sgd", 0.01, 0.0, False, 3.0, 3.0, 1.0, INF),
        Cell("mlp", "mlp-sgd", 0.01, 0.0, False, 10.0, 0.3, 1.0, INF),
    ]
    study = architecture_study(
        write_architecture_sweep(tmp_path, cells, seeds=(0, 1)), compute_missing=False
    )
    assert "cannot tell at this size" in verdict_of(study, "mlp-mixer")
    assert "the function memory is not decided at this size" in verdict_of(study, "mlp-mixer")


def test_a_cell_without_interpolating_seeds_says_so(tmp_path):
    root = write_architecture_sweep(tmp_path, CELLS[2:4], seeds=(0, 1))
    result = root / "runs"
    for path in result.glob("*/result.json"):  # no run fits its training set
        path.write_text(
            path.read_text().replace('"final_train_acc": 1.0', '"final_train_acc": 0.5')
        )
    study = architecture_study(root, compute_missing=False)
    assert "0 seed(s) interpolate at every alpha: no function memory" in verdict_of(study, "mlp")
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
    assert "### vit-tiny" in text and "not defined: no normalized weights" in text
    assert "(`residual_stream`)" in text  # the pre-LN model's joint norm memory
    assert "> 1200 (censored)" in text  # resnet9 low-lr SGD: norm memory never reaches 1/e
    assert "pre-registered before training" in text and "took 3 s" in text
    assert f"Training: {len(study.runs)} runs" in text


def test_initmem_study_detects_an_architecture_sweep(tmp_path, capsys):
    root = write_architecture_sweep(tmp_path / "sweep", CELLS[:3], seeds=(0, 1, 2))
    assert is_architecture_sweep(root)
    doc = tmp_path / "docs" / "architectures.md"
    argv = ["study", str(root), "--doc", str(doc), "--wall-time", "1 min", "--calibrate", "40"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "resnet9: the thesis holds here" in printed
    text = doc.read_text()
    assert "Calibration (40 planted-answer replicas of this design per truth" in text
    calibration = pd.read_csv(tmp_path / "sweep" / "study" / "calibration.csv")
    assert set(calibration["truth"]) == {"holds", "memory stays", "memory goes early"}
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
