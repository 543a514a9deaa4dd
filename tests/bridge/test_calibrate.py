"""Synthetic sweeps with a known answer, and the study's verdicts calibrated on them."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from initmem.bridge import unit_decision
from initmem.bridge.study import calibrate, synthetic
from initmem.bridge.units import run_unit_increments
from initmem.empirical.config import RunConfig


def _design(n_pipelines: int = 4, n_seeds: int = 2) -> synthetic.Design:
    """SGD pipelines at two run lengths and a range of weight decay (accumulated regularization
    over two decades, |r(ln epochs, ln accumulated)| small), alpha 1 vs 4."""
    configs, variants = [], []
    settings = [(0.1, 1e-4, 8), (0.1, 3e-3, 4), (0.1, 1e-3, 8), (0.1, 1e-2, 4), (0.1, 3e-4, 4)]
    for i, (lr, wd, epochs) in enumerate(settings[:n_pipelines]):
        for alpha in (1.0, 4.0):
            for seed in range(n_seeds):
                configs.append(
                    RunConfig(
                        dataset="synthetic",
                        train_size=256,
                        val_size=64,
                        test_size=64,
                        width=0.125,
                        optimizer="sgd",
                        lr=lr,
                        weight_decay=wd,
                        batch_size=32,
                        epochs=epochs,
                        eval_every=2,
                        alpha=alpha,
                        seed=seed,
                    )
                )
                variants.append(f"p{i}")
    return synthetic.design_of(configs, variants)


def test_design_units_are_the_bridges():
    design = _design()
    assert len(design.pipelines) == 4 and design.n_seeds == 2 and design.alphas == (1.0, 4.0)
    p = design.pipelines[1]
    assert list(p.steps) == [0, 16, 32]  # 4 epochs of 8 steps, evaluations every 2 epochs
    total = run_unit_increments(p.config)["accumulated"].sum()
    assert p.units["accumulated"][-1] == pytest.approx(total)
    assert p.units["epochs"][-1] == pytest.approx(4.0)
    bigger = design.scaled(seeds=2, pipelines=2)
    assert bigger.n_seeds == 4 and len(bigger.pipelines) == 8
    ratio = (
        bigger.pipelines[1].units["accumulated"][-1] / bigger.pipelines[0].units["accumulated"][-1]
    )
    assert ratio == pytest.approx(10**0.5)  # half a decade between the two copies


def test_truth_curve_and_replica_shapes():
    design = _design()
    truth = synthetic.Truth("accumulated", scale=0.5, sigma_norm=0.0, sigma_acc=0.0, sigma_seed=0.0)
    replica = synthetic.draw(design, truth, np.random.default_rng(0))
    for p, norm, acc in zip(design.pipelines, replica.norm, replica.accuracy, strict=True):
        expected = np.exp(-p.units["accumulated"] / 0.5)
        assert norm == pytest.approx(np.broadcast_to(expected, norm.shape))
        spread = 100 * (acc[:, 1, -1] - acc[:, 0, -1])  # alpha 4 minus alpha 1, no noise
        assert spread == pytest.approx(100 * truth.gap * expected[-1])
    assert synthetic.true_spread_end(design, truth) == pytest.approx(
        [100 * truth.gap * np.exp(-p.units["accumulated"][-1] / 0.5) for p in design.pipelines]
    )


def test_folder_and_cube_paths_agree(tmp_path):
    """The replica written as a folder and read by the real loader gives the cubes the calibration
    scores (same values, same units), so the decision on both is the same."""
    from initmem.bridge import measure
    from initmem.bridge.units import evaluation_units
    from initmem.empirical import curves
    from initmem.empirical.tables import load_sweep

    design = _design(n_pipelines=3)
    replica = synthetic.draw(design, synthetic.Truth("epochs"), np.random.default_rng(3))
    root = synthetic.write_folder(tmp_path / "sweep", replica)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no run of the folder may read as damaged
        runs = measure.prepare_runs(load_sweep(root))
    epochs, layers = measure.load_logs(runs)
    norm_curves = curves.norm_memory_curves(runs, layers)
    accumulated = evaluation_units(runs, epochs, layers)
    read = unit_decision.memory_cubes(runs, epochs, norm_curves, accumulated)
    labels = dict(zip(runs["pipeline"], runs["label"], strict=False))
    drawn = synthetic.replica_cubes(replica)
    for memory in ("norm", "spread"):
        by_label = {c.pipeline: c for c in drawn[memory]}
        ordered = []
        for cube in read[memory]:
            mine = by_label[labels[cube.pipeline]]
            assert cube.values == pytest.approx(mine.values, abs=1e-9)
            for unit in unit_decision.DECIDING_UNITS:
                assert cube.units[unit] == pytest.approx(mine.units[unit])
            ordered.append(mine)
        drawn[memory] = ordered
    assert unit_decision.rank_bootstrap(read, n_boot=50).equals(
        unit_decision.rank_bootstrap(drawn, n_boot=50)
    )


def _rank_by_hand(cubes) -> float:
    """R1 of rank_bootstrap by a double loop over every pair of points of the seed-mean memory."""
    points = []
    for cube in cubes:
        y = cube.memory()
        for t in range(y.size):
            points.append((cube.units["accumulated"][t], cube.units["epochs"][t], y[t]))
    top = weight = 0.0
    for a1, e1, y1 in points:
        for a2, e2, y2 in points:
            k = np.sign(a1 - a2) - np.sign(e1 - e2)
            top += k * np.sign(y2 - y1)
            weight += abs(k)
    return top / weight


def test_rank_statistic_against_a_double_loop():
    """R1: +1 under a noiseless accumulated truth (every pair the units order differently follows
    accumulated regularization), negative under epochs; equal to the double loop in every case."""
    design = _design()
    quiet = dict(sigma_norm=0.0, sigma_acc=0.0, sigma_seed=0.0)
    for unit in ("accumulated", "epochs"):
        for sigma in (0.0, 0.05):
            truth = synthetic.Truth(unit, **(quiet | {"sigma_norm": sigma}))
            replica = synthetic.draw(design, truth, np.random.default_rng(0))
            cubes = synthetic.replica_cubes(replica)
            table = unit_decision.rank_bootstrap(cubes, n_boot=20).set_index("memory")
            value = table.loc["norm", "rank_diff"]
            assert value == pytest.approx(_rank_by_hand(cubes["norm"]))
            if sigma == 0 and unit == "accumulated":
                assert value == pytest.approx(1.0)
            if sigma == 0 and unit == "epochs":
                assert value < -0.5


def test_wilson_interval_against_the_formula():
    z2 = 1.959964**2
    lo, hi = calibrate.wilson_interval(0, 200)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(z2 / (200 + z2))
    lo, hi = calibrate.wilson_interval(10, 100)
    assert (lo, hi) == pytest.approx((0.0552, 0.1744), abs=2e-4)


def _numbers() -> dict:
    """The numeric columns a decision row prints (values irrelevant to the guard)."""
    keys = ["r2_cv_accumulated", "r2_cv_epochs", "diff", "diff_lo", "diff_hi", "rank_diff"]
    return dict.fromkeys([*keys, "rank_lo", "rank_hi"], 0.0) | {"n_pipelines": 4}


def test_calibration_on_a_tiny_design_meets_the_rates():
    """The done-when of the calibration, on a tiny design (4 pipelines x 2 seeds): under truth
    accumulated and epochs no verdict is wrong in more than 5% of the replicas, a named unit survives
    the study's guard only where its worst error is at most 5%,
    the norm and spread intervals cover the truth in 90-99% (within their Wilson intervals), and the
    decision names accumulated regularization, where true, in most replicas."""
    design = _design()
    result = calibrate.calibrate(design, 40, n_boot=60)
    errors = result.errors()
    deciding = errors["truth"].map(synthetic.right_verdict).isin(unit_decision.DECIDING_UNITS)
    wrong = errors[~errors["verdict"].str.contains("covers") & deciding]
    assert (wrong["error"] <= calibrate.MAX_ERROR).all(), wrong
    # under neither, a 4-pipeline design names a unit by chance more often than 5%: the study's
    # guard (allowed_verdicts) turns such a verdict into "cannot tell" on this design
    allowed = calibrate.allowed_verdicts(result.scores)
    neither = result.scores[
        (result.scores["truth"] == "neither") & (result.scores["verdict"] == "unit decision (rank)")
    ]
    for memory, worst in allowed.items():
        mine = neither[neither["subject"] == memory]
        for unit, rate in worst.items():
            assert rate >= (mine["said"] == unit).mean()  # the worst case covers neither
    decision = pd.DataFrame(
        [
            {"memory": m, "winner": u, "reason": "", "level": 0.95}
            for m, w in allowed.items()
            for u in w
        ]
    )
    fake = calibrate.StudyCalibration(result, allowed, {}, pd.DataFrame(), 0.0)
    guarded = calibrate.apply_calibration(decision.assign(**_numbers()), fake)
    for _, row in guarded.iterrows():
        rate = allowed[row["memory"]][row["winner"]] if row["winner"] != "cannot tell" else 0
        assert rate <= calibrate.MAX_ERROR
    covers = errors[errors["verdict"].str.contains("covers")]
    assert ((1 - covers["error"]) >= 0.90).all() and ((1 - covers["hi"]) <= 0.99).all(), covers
    rates = result.rates()
    decision = rates[rates["verdict"] == "unit decision (rank)"].set_index(["truth", "said"])
    assert decision.loc[("accumulated", "accumulated"), "rate"] >= 0.5
    # two run lengths only, 3 or 5 evaluations: epochs are named rarely here, never wrongly
    assert decision.loc[("epochs", "epochs"), "rate"] > 0
    assert ("epochs", "accumulated") not in decision.index
    assert result.n_replicas == 40 and set(errors["truth"]) == set(synthetic.TRUTHS)
    row = errors.iloc[0]
    assert (row["lo"], row["hi"]) == pytest.approx(
        calibrate.wilson_interval(row["wrong"], row["n"])
    )


def test_power_table_is_tidy_and_grows_with_seeds():
    design = _design(n_pipelines=3)
    power = calibrate.power_table(design, 12, multipliers=(1, 4), n_boot=40)
    assert set(power["seeds"]) == {1, 4} and set(power["pipelines"]) == {1, 4}
    assert set(power["n_pipelines"]) == {3, 12} and set(power["n_seeds"]) == {2, 8}
    named = power["truth"].map(synthetic.right_verdict).isin(unit_decision.DECIDING_UNITS)
    mean = power[named].groupby("seeds")["power"].mean()
    assert mean[4] >= mean[1]
    assert power["power"].between(0, 1).all() and (power["n"] == 12).all()


def test_uncalibrated_epochs_verdict_says_cannot_tell():
    decision = pd.DataFrame(
        [
            {
                "memory": "norm",
                "winner": "epochs",
                "reason": "",
                "r2_cv_accumulated": 0.1,
                "r2_cv_epochs": 0.9,
                "diff": -0.8,
                "diff_lo": -0.9,
                "diff_hi": -0.7,
                "level": 0.95,
                "n_pipelines": 6,
                "rank_diff": -0.9,
                "rank_lo": -0.95,
                "rank_hi": -0.8,
            }
        ]
    )
    out = calibrate.apply_calibration(decision, None, command="initmem study d --calibrate 200")
    assert out["winner"].iloc[0] == "cannot tell"
    assert "needs its error rate calibrated" in out["text"].iloc[0]
    assert "--calibrate 200" in out["text"].iloc[0]


def test_study_document_reports_its_own_calibration(tmp_path):
    """``initmem study DIR --calibrate N`` on a synthetic folder: the section's cells are the
    written calibration table's, and the verdict names a unit only where the table allows it."""
    from initmem.cli import main

    design = _design(n_pipelines=4)
    replica = synthetic.draw(design, synthetic.Truth("accumulated"), np.random.default_rng(5))
    root = synthetic.write_folder(tmp_path / "sweep", replica)
    doc = tmp_path / "study.md"
    args = ["study", str(root), "--doc", str(doc), "--n-boot", "30", "--calibrate", "12"]
    assert main([*args, "--out", str(tmp_path / "tables")]) == 0
    text = doc.read_text()
    section = text[
        text.index("## How often would this verdict be wrong?") : text.index("## Design")
    ]
    errors = pd.read_csv(tmp_path / "tables" / "calibration_errors.csv")
    row = errors[(errors["verdict"] == "unit decision (rank)") & (errors["truth"] == "neither")]
    cell = f"{100 * row['error'].iloc[0]:.1f}% [{100 * row['lo'].iloc[0]:.1f}, "
    assert cell in section
    assert "--calibrate 12" in text[text.index("## Reproduce") :]
    decision = pd.read_csv(tmp_path / "tables" / "decision.csv")
    scores = errors[errors["verdict"] == "unit decision (rank)"]
    for _, r in decision.iterrows():
        if r["winner"] in unit_decision.DECIDING_UNITS:
            assert f"calibrated: {r['winner']} named wrongly in at most" in r["text"]
            assert scores["error"].max() <= calibrate.MAX_ERROR


def test_workers_give_the_same_table():
    design = _design(n_pipelines=3)
    one = calibrate.calibrate(design, 4, n_boot=20).scores
    two = calibrate.calibrate(design, 4, n_boot=20, workers=2).scores
    pd.testing.assert_frame_equal(one, two)


def test_workers_beyond_the_cpus_are_capped_with_a_warning(monkeypatch):
    """Issue 37, 9: ``--workers 99999`` forked that many processes; now capped at the CPU count,
    said once, and the table is the one of a single worker."""
    from initmem.empirical import backends

    monkeypatch.setattr(backends, "available_cpus", lambda: 2)
    design = _design(n_pipelines=3)
    with pytest.warns(
        calibrate.WorkersCappedWarning, match="workers = 99999 capped at 2"
    ) as caught:
        many = calibrate.calibrate(design, 4, n_boot=20, workers=99999).scores
    assert len(caught) == 1
    pd.testing.assert_frame_equal(many, calibrate.calibrate(design, 4, n_boot=20).scores)


def test_the_error_table_says_how_often_a_verdict_named_nothing():
    """Issue 37, Low: an "error 0.000" of a decision that said "cannot tell" in every replica read
    as a perfect verdict; ``cannot_tell`` is that rate, equal to the rates table's own count."""
    design = _design(n_pipelines=3)
    result = calibrate.calibrate(design, 4, n_boot=20)
    errors = result.errors().set_index(["truth", "verdict"])
    rates = result.rates().set_index(["truth", "verdict", "said"])["rate"]
    for (truth, verdict), row in errors.iterrows():
        key = (truth, verdict, "cannot tell")
        assert row["cannot_tell"] == pytest.approx(rates.get(key, 0.0), abs=1e-12)
    assert (errors["cannot_tell"] > 0).any()


def test_the_comparison_against_the_rivals_is_calibrated_under_the_rival_truths():
    """rules with "rivals": on an SGD-only design explicit + SGD noise is accumulated
    regularization itself (the same clock in every pipeline), so no design of it can beat that
    rival: the candidate is never named, under any truth; the rival truths' memories run on their
    own clock (S1)."""
    design = _design(n_pipelines=5, n_seeds=3)
    p = design.pipelines[2]
    steps = synthetic.Truth(unit="steps", sigma_norm=0.0)
    memory = synthetic.true_memory(design, steps)[2]
    scale = np.median([q.units["steps"][-1] for q in design.pipelines])
    np.testing.assert_allclose(memory, np.exp(-p.units["steps"] / scale))
    summed = unit_decision.unit_values(p.units, "explicit_sgd_noise", p.steps.size)
    np.testing.assert_allclose(summed, p.units["accumulated"], rtol=1e-12)  # SGD: the same sum
    truths = {
        k: v
        for k, v in synthetic.named_truths(rivals=True).items()
        if k in ("accumulated", "steps", "explicit + SGD noise", "explicit + Adam term")
    }
    result = calibrate.calibrate(design, 12, truths=truths, rules=("rivals",), per_pipeline=False)
    scores = result.scores
    assert set(scores["verdict"]) == {"unit against its rivals"}
    assert set(scores["truth"]) == set(truths)
    assert (scores["said"] == "cannot tell").all() and not scores["wrong"].any()
    assert synthetic.right_verdict("steps") == "cannot tell"


def test_the_study_calibrates_its_rival_comparison_under_every_truth(tmp_path):
    """calibrate_study with ``rivals``: the named and the rival truths are drawn, the comparison's
    error per memory is its worst over them (against the scores), and it may name the candidate
    only where that worst error is at most 5%; without ``rivals`` nothing is named."""
    from initmem.bridge.fitting import fit
    from initmem.empirical.tables import load_sweep

    design = _design(n_pipelines=4)
    replica = synthetic.draw(design, synthetic.Truth("accumulated"), np.random.default_rng(5))
    root = synthetic.write_folder(tmp_path / "sweep", replica)
    report = fit(load_sweep(root), n_boot=20)
    result = calibrate.calibrate_study(
        report, design, 6, n_boot=20, search=False, rivals=True, workers=1
    )
    scores = result.calibration.scores
    truths = {*synthetic.TRUTHS, *synthetic.RIVAL_TRUTHS}
    assert set(scores["truth"]) == truths
    part = scores[scores["verdict"] == "unit against its rivals"]
    assert set(part["subject"]) == set(result.rivals) and result.rivals
    for memory, group in part.groupby("subject"):
        rates = group.groupby("truth")["wrong"].mean()
        error, truth, n_truths = result.rivals[memory]
        assert error == pytest.approx(rates.max()) and rates[truth] == pytest.approx(error)
        assert n_truths == len(truths)
        allowed, clause = result.rival_named(memory)
        assert allowed == (error <= calibrate.MAX_ERROR)
        assert f"{100 * error:.1f}%" in clause and f"over {len(truths)} truths" in clause
    plain = calibrate.calibrate_study(report, design, 2, n_boot=20, search=False)
    assert plain.rivals == {} and plain.rival_named("norm")[0] is False
