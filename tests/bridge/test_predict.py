"""Predictions against independent computations: theory.schedule's sums, the exact SGD recursion, and
the logged norms of real runs (the one-step identity to 1%)."""

import math

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.measure import load_logs, norm_forgetting_times, prepare_runs
from initmem.bridge.predict import (
    IDENTITY_TOLERANCE,
    identity_check,
    predicted_memory_curves,
    predicted_times,
)
from initmem.bridge.units import (
    UNITS,
    evaluation_units,
    init_scale,
    phase_boundary,
    run_unit_increments,
    step_lrs,
    steps_to_unit,
)
from initmem.empirical.config import RunConfig
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, norm_memory_curves
from initmem.empirical.tables import load_sweep

BASE = dict(dataset="synthetic", train_size=1280, val_size=1000, batch_size=32, epochs=10)


@pytest.mark.parametrize(
    "changes",
    [
        dict(optimizer="sgd", lr=0.1, weight_decay=5e-4),
        dict(optimizer="sgd", lr=0.1, momentum=0.9, l2=5e-4, schedule="cosine", warmup_epochs=1),
        dict(optimizer="sgd", lr=0.1, l2=1e-3, schedule="step", milestone_epochs=(3, 6)),
        dict(optimizer="adam", lr=1e-3, weight_decay=1e-2),
        dict(optimizer="rmsprop", lr=1e-3, momentum=0.5, l2=1e-4),
    ],
)
def test_unit_sums_match_theory_schedule(changes):
    config = RunConfig(**BASE, **changes)
    mu = config.momentum if config.optimizer in ("sgd", "rmsprop") else 0.0
    lrs = step_lrs(config)
    assert len(lrs) == config.total_steps == 400
    eff = lrs / (1 - mu)  # heavy ball: an effective step lr / (1 - mu); L2 rides it, decay does not
    theory = {
        "explicit": float(np.sum(eff * (config.l2 + config.weight_decay * (1 - mu)))),
        "sgd_noise": float(np.sum(eff**2)) / config.batch_size,
        "adam": float(np.sum(eff**2)),
    }
    sums = run_unit_increments(config, inv_init_sq_per_coord=7.0).sum()
    assert sums["explicit"] == pytest.approx(theory["explicit"], rel=1e-12)
    assert sums["sgd_noise"] == pytest.approx(theory["sgd_noise"], rel=1e-12)
    assert sums["adam"] == pytest.approx(7.0 * theory["adam"], rel=1e-12)
    assert sums["steps"] == 400 and sums["epochs"] == pytest.approx(10)
    noise = "adam" if config.optimizer != "sgd" else "sgd_noise"
    assert sums["accumulated"] == pytest.approx(sums["explicit"] + sums[noise], rel=1e-12)


def test_steps_to_unit_closed_form():
    config = RunConfig(**BASE, optimizer="sgd", lr=0.1, weight_decay=0.05)  # 0.005 per step
    assert steps_to_unit(config, "explicit") == 200  # ceil(1 / 0.005)
    # beyond the 400 steps of the run: extrapolated at the last rate
    assert steps_to_unit(config, "explicit", level=3.0) == pytest.approx(600)
    assert steps_to_unit(config, "sgd_noise") == pytest.approx(3200)  # 0.01 / 32 per step
    assert math.isinf(steps_to_unit(config.replace(weight_decay=0.0), "explicit"))
    with pytest.raises(ValueError, match="unit must be one of"):
        steps_to_unit(config, "fortnights")


def test_evaluation_units_at_logged_steps(synthetic_sweep):
    runs = prepare_runs(load_sweep(synthetic_sweep))
    epochs, layers = load_logs(runs)
    table = evaluation_units(runs, epochs, layers)
    assert list(table.columns[-len(UNITS) :]) == list(UNITS)
    row = runs.iloc[0]
    mine = table[table["hash"] == row["hash"]].set_index("epoch")
    assert mine.loc[0, "explicit"] == 0.0
    np.testing.assert_allclose(
        mine["explicit"], mine["step"] * row["lr"] * row["weight_decay"], rtol=1e-12
    )
    # d / |w_0|^2 at alpha = 1, from the logged init norms of the scaled BN-followed convs
    scale = init_scale(runs, layers)
    assert scale.notna().all() and (scale > 0).all()


def test_identity_exact_on_simulated_sgd(law_sweep):
    runs = prepare_runs(load_sweep(law_sweep))
    epochs, layers = load_logs(runs)
    check = identity_check(runs, epochs, layers)
    assert len(check) == len(runs) * 2  # two BN-followed convs per run
    assert check["max_rel_error"].max() < 1e-10
    assert check["decay_rel_error"].max() < 1e-10  # schedule rebuilt = logged product


def test_law_predicts_simulated_sgd_memory(law_sweep):
    runs = prepare_runs(load_sweep(law_sweep))
    epochs, layers = load_logs(runs)
    measured = norm_memory_curves(runs, layers)
    predicted = predicted_memory_curves(runs, layers, measured)
    assert set(predicted["layer"]) == {"conv1.weight", "conv2.weight", SCALE_INVARIANT_MEAN}
    both = measured.groupby(["pipeline", "layer", "step"])["memory"].mean().reset_index()
    both = both.merge(predicted, on=["pipeline", "layer", "step"], suffixes=("", "_law"))
    # each run's law from its own logged G (constant here) is the exact recursion that wrote it
    assert np.max(np.abs(both["memory"] - both["memory_law"])) < 1e-9
    assert predicted["g_source"].str.startswith("gradient form").all()
    times = norm_forgetting_times(measured).merge(
        predicted_times(predicted, pd.Series(40.0, index=runs["pipeline"].unique())),
        on=["pipeline", "layer"],
    )
    # resolved by the logs (tau longer than the 40 steps between evaluations): within 2%; faster
    # forgetting is seen by one or two points, and G's interval average matters more: within 15%
    resolved = times["tau_fit_steps"] >= 40
    assert resolved.sum() >= 6
    np.testing.assert_allclose(
        times.loc[resolved, "pred_tau_fit_steps"], times.loc[resolved, "tau_fit_steps"], rtol=0.02
    )
    np.testing.assert_allclose(times["pred_tau_fit_steps"], times["tau_fit_steps"], rtol=0.15)


def test_identity_within_one_percent_on_real_runs(tiny_sweep):
    runs = prepare_runs(load_sweep(tiny_sweep))
    epochs, layers = load_logs(runs)
    check = identity_check(runs, epochs, layers)
    sgd_plain = runs[(runs["optimizer"] == "sgd") & (runs["momentum"] == 0)]
    assert set(check["hash"]) == set(sgd_plain["hash"])  # Adam runs are left out
    assert check["layer"].nunique() == 8  # every BN-followed conv of ResNet-9
    assert check["n_intervals"].min() == 5
    assert check["max_rel_error"].max() < IDENTITY_TOLERANCE
    assert check["decay_rel_error"].max() < 1e-9


def test_phase_boundary_closed_form():
    config = RunConfig(
        dataset="synthetic",
        train_size=1280,
        val_size=1000,
        batch_size=32,
        epochs=10,
        optimizer="sgd",
        lr=0.1,
        weight_decay=1e-3,
    )
    lrs, decays = np.array([0.01, 0.1]), np.array([1e-4, 1e-2])
    grid = phase_boundary(config, "lr", "decay", lrs, decays)
    expected = decays[:, None] * lrs[None, :] * 400 + lrs[None, :] ** 2 * 400 / 32
    np.testing.assert_allclose(grid, expected, rtol=1e-12)
    batches = np.array([16.0, 64.0])
    grid = phase_boundary(config, "lr", "batch_size", lrs, batches)
    steps = 1280 // batches  # per epoch, times 10 epochs
    expected = 10 * steps[:, None] * (lrs[None, :] * 1e-3 + lrs[None, :] ** 2 / batches[:, None])
    np.testing.assert_allclose(grid, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="x and y"):
        phase_boundary(config, "lr", "momentum", lrs, lrs)
