"""A trained run's own prediction (``initmem theory --from-run``) against the bridge, and one
meaning of "forgotten" named by theory, report, bridge and study."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
def test_from_run_memory_is_the_bridges_predicted_memory(tiny_sweep, fitted, capsys, variant):
    """In a sweep the reference is found (the pipeline's other alpha, same seed), and the predicted
    and measured memories are the bridge's (one seed: its seed mean)."""
    runs, report = fitted
    run = runs[(runs["variant"] == variant) & (runs["alpha"] == 2.0)].iloc[0]
    other = runs[(runs["variant"] == variant) & (runs["alpha"] == 0.5)].iloc[0]
    assert main(["theory", "--from-run", run["run_dir"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reference_alpha"] == 0.5 and out["reference_dir"] == other["run_dir"]
    law = report.predicted.set_index(["pipeline", "layer"]).loc[
        (run["pipeline"], SCALE_INVARIANT_MEAN)
    ]
    assert out["predicted_memory_end"] == pytest.approx(law["pred_memory_end"], rel=1e-12)
    assert out["forgetting"] == FORGETTING.name
    assert run["hash"] in out["g_source"] and other["hash"] in out["g_source"]
    measured = report.norm_curves
    measured = measured[
        (measured["pipeline"] == run["pipeline"]) & (measured["layer"] == SCALE_INVARIANT_MEAN)
    ]
    got = {row["step"]: row["measured"] for row in out["curve"]}
    for step, value in zip(measured["step"], measured["memory"], strict=True):
        assert got[step] == pytest.approx(value, rel=1e-12)
    assert out["measured_memory_end"] == pytest.approx(measured["memory"].iloc[-1], rel=1e-12)
    first = [r["step"] for r in out["curve"] if r["measured"] <= FORGETTING.level]
    assert out["measured_forgetting_step"] == (first[0] if first else None)


def test_measured_grad_sq_unit_is_the_logged_gradient_scale(tiny_sweep):
    """G per layer = the run's own logged sum of |g_t|^2 |w_t|^2 over its steps, recomputed here
    from the raw per-layer logs; the other alpha's run has its own."""
    runs = load_sweep(tiny_sweep)
    pair = runs[runs["variant"] == "sgd-wd"]
    layers = load_layers(pair)
    values = {}
    for _, run in pair.iterrows():
        table = measured_grad_sq_unit(run["run_dir"]).set_index("layer")
        layer = table.index[1]
        rows = layers[(layers["hash"] == run["hash"]) & (layers["layer"] == layer)]
        rows = rows.sort_values("step")
        expected = rows["grad_sq_unit_sum"].sum() / (rows["step"].max() - rows["step"].min())
        assert table.loc[layer, "grad_sq_unit"] == pytest.approx(expected, rel=1e-12)
        values[run["alpha"]] = table.loc[layer, "grad_sq_unit"]
    assert values[0.5] != values[2.0]


def test_a_run_on_its_own_needs_a_reference(tiny_sweep, tmp_path, capsys):
    """Outside a sweep: one error line asking for --reference; with it, the prediction; a reference
    of another pipeline or the same alpha: one error line naming why."""
    runs = load_sweep(tiny_sweep)
    sgd = runs[runs["variant"] == "sgd-wd"].sort_values("alpha")
    lone = tmp_path / "lone"
    shutil.copytree(sgd.iloc[0]["run_dir"], lone)
    assert main(["theory", "--from-run", str(lone)]) == 2
    assert "--reference" in capsys.readouterr().err
    assert main(["theory", "--from-run", str(lone), "--reference", sgd.iloc[1]["run_dir"]]) == 0
    assert "norm memory at the end: predicted" in capsys.readouterr().out
    adam = runs[(runs["variant"] == "adam")].iloc[0]["run_dir"]
    assert main(["theory", "--from-run", str(lone), "--reference", adam]) == 2
    assert "not of the run's pipeline" in capsys.readouterr().err
    assert main(["theory", "--from-run", str(lone), "--reference", str(lone)]) == 2
    assert "own alpha" in capsys.readouterr().err


def test_an_unfinished_run_is_said_to_be_unfinished(tiny_sweep, tmp_path, capsys):
    copy = tmp_path / "sweep"
    shutil.copytree(tiny_sweep, copy)
    runs = load_sweep(copy)
    run = runs[(runs["variant"] == "sgd-l2") & (runs["alpha"] == 2.0)].iloc[0]
    (Path(run["run_dir"]) / "result.json").unlink()
    assert main(["theory", "--from-run", run["run_dir"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finished"] is False and out["unfinished"] == [run["run_dir"]]
    assert main(["theory", "--from-run", run["run_dir"]]) == 0
    assert "unfinished: " in capsys.readouterr().out


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
