"""A trained run's own prediction (``initmem theory --from-run``) against the bridge, and one
meaning of "forgotten" named by theory, report, bridge and study."""

from __future__ import annotations

import json

import numpy as np
import pytest

from initmem.bridge.fitting import fit
from initmem.bridge.from_run import measured_grad_sq_unit
from initmem.cli import main
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from initmem.empirical.tables import load_layers, load_sweep
from initmem.theory.criterion import FORGETTING


@pytest.fixture(scope="module")
def fitted(tiny_sweep):
    runs = load_sweep(tiny_sweep)
    return runs, fit(runs, n_boot=0)


@pytest.mark.parametrize("variant", ["sgd-wd", "sgd-l2", "adam"])
def test_from_run_time_is_the_bridges_predicted_time(tiny_sweep, fitted, capsys, variant):
    runs, report = fitted
    run = runs[(runs["variant"] == variant) & (runs["alpha"] == 2.0)].iloc[0]
    assert main(["theory", "--from-run", run["run_dir"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    law = report.predicted.set_index(["pipeline", "layer"]).loc[
        (run["pipeline"], SCALE_INVARIANT_MEAN)
    ]
    assert out["from_run"]["tau_steps"] == pytest.approx(law["pred_tau_steps"], rel=1e-12)
    assert out["from_run"]["forgotten"] == bool(law["pred_forgotten"])
    assert out["from_run"]["reference_alpha"] == 0.5  # the bridge's pair: smallest vs largest
    assert out["from_run"]["forgetting"] == FORGETTING.name
    assert out["assumptions"]["forgetting"] == FORGETTING.name
    assert out["warnings"] == []  # a run given: no placeholder gradient scale
    # the measured curve beside the prediction is the bridge's measured norm memory
    measured = report.norm_curves
    measured = measured[
        (measured["pipeline"] == run["pipeline"]) & (measured["layer"] == SCALE_INVARIANT_MEAN)
    ]
    got = {row["step"]: row["measured"] for row in out["from_run"]["curve"]}
    for step, value in zip(measured["step"], measured["memory"], strict=True):
        assert got[step] == pytest.approx(value, rel=1e-12)


def test_measured_grad_sq_unit_is_the_logged_gradient_scale(tiny_sweep):
    """G per layer = grad_sq_sum * mean |w|^2 / steps over each interval, averaged over intervals
    and the pipeline's two runs, recomputed here from the raw per-layer logs."""
    runs = load_sweep(tiny_sweep)
    pair = runs[runs["variant"] == "sgd-wd"]
    table = measured_grad_sq_unit(pair.iloc[0]["run_dir"]).set_index("layer")
    layers = load_layers(pair)
    layer = table.index[1]
    values = []
    for hash_ in pair["hash"]:
        rows = layers[(layers["hash"] == hash_) & (layers["layer"] == layer)].sort_values("step")
        norm_sq = rows["weight_norm"].to_numpy() ** 2
        steps = rows["step"].to_numpy()
        grad = rows["grad_sq_sum"].to_numpy()
        values.append(grad[1:] * (norm_sq[1:] + norm_sq[:-1]) / 2 / np.diff(steps))
    expected = np.mean(np.stack(values), axis=0).mean()
    assert table.loc[layer, "grad_sq_unit"] == pytest.approx(expected, rel=1e-12)
    shape_out = table.loc[layer, "out_channels"]
    assert table.loc[layer, "grad_sq_unit_per_filter"] == pytest.approx(expected / shape_out**2)


def test_one_statistic_is_named_by_theory_report_bridge_and_study(tiny_sweep, fitted, capsys):
    runs, report = fitted
    run = runs[runs["variant"] == "sgd-wd"].iloc[0]
    assert main(["theory", "--from-run", run["run_dir"]]) == 0
    theory_text = capsys.readouterr().out
    assert main(["report", str(tiny_sweep)]) == 0
    report_text = (tiny_sweep / "report.md").read_text()
    capsys.readouterr()
    from initmem.bridge.study import unit_study

    study_text = unit_study(tiny_sweep, n_boot=0).markdown()
    for text in (theory_text, report_text, report.summary(), study_text):
        assert FORGETTING.name in text


def test_the_placeholder_warning_comes_first_without_a_run(tmp_path, capsys):
    (tmp_path / "run.toml").write_text('dataset = "cifar10-fixture"\nbatch_size = 4\n')
    assert main(["theory", "--config", str(tmp_path / "run.toml")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("warning: no run given") and "--from-run" in first
