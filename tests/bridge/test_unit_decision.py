"""The study's statistics on synthetic data with planted answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from initmem.bridge import fits, unit_decision
from initmem.empirical import memory


def test_spread_null_matches_brute_force_enumeration():
    acc = np.array([[80.0, 74.0], [79.0, 75.0], [83.0, 76.0]])
    result = memory.spread_null(acc)
    null = []
    for flips in itertools.product([False, True], repeat=3):
        shuffled = np.array([row[::-1] if f else row for row, f in zip(acc, flips, strict=True)])
        null.append(np.ptp(shuffled.mean(axis=0)))
    observed = np.ptp(acc.mean(axis=0))
    assert result["spread"] == pytest.approx(observed)
    assert result["p_value"] == pytest.approx(np.mean(np.array(null) >= observed - 1e-12))
    assert result["null_mean"] == pytest.approx(np.mean(null))
    assert result["exact"] and result["n_permutations"] == 8


def test_spread_null_planted_effect_and_planted_null():
    rng = np.random.default_rng(0)
    effect = np.column_stack([80 + rng.normal(0, 0.5, 6), 70 + rng.normal(0, 0.5, 6)])
    result = memory.spread_null(effect)
    assert result["p_value"] == pytest.approx(2 / 64) == result["p_min"]  # the smallest possible
    same = np.column_stack([np.full(5, 80.0), np.full(5, 80.0)])
    assert memory.spread_null(same)["p_value"] == 1.0
    assert np.isnan(memory.spread_null(effect[:1])["p_value"])  # one seed: no null


def _predictions(alpha_flip: float, n_seeds: int = 6, n: int = 4000, seed: int = 0):
    """Seeds differ from a shared truth on 10% of points; alpha 4 changes the prediction on a fixed
    fraction alpha_flip of the points (the same points for every seed: a systematic effect)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 10, n)
    changed = rng.random(n) < alpha_flip
    out = {1.0: {}, 4.0: {}}
    for s in range(n_seeds):
        base = np.where(rng.random(n) < 0.1, rng.integers(0, 10, n), truth)
        out[1.0][s] = base
        out[4.0][s] = np.where(changed, (base + 1) % 10, base)
    return out


def test_disagreement_excess_planted_effect_and_null():
    effect = memory.disagreement_excess(_predictions(0.3), n_boot=300)
    # alpha pairs: the 30% changed; seed pairs: about 2 * 0.1 * 0.9 = 0.18 at either alpha
    assert effect["alpha_dis"] == pytest.approx(0.3, abs=0.02)
    assert effect["seed_dis"] == pytest.approx(0.17, abs=0.02)
    assert effect["excess"] == pytest.approx(effect["alpha_dis"] - effect["seed_dis"])
    assert effect["excess_lo"] > 0
    null = memory.disagreement_excess(_predictions(0.0), n_boot=300)
    assert null["alpha_dis"] == 0.0
    assert null["excess_hi"] < 0  # identical alphas disagree less than seeds do
    # alphas as different as two seeds: the interval covers 0
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 10, 4000)
    noisy = {
        a: {s: np.where(rng.random(4000) < 0.1, rng.integers(0, 10, 4000), truth) for s in range(6)}
        for a in (1.0, 4.0)
    }
    result = memory.disagreement_excess(noisy, n_boot=300)
    assert result["excess_lo"] < 0 < result["excess_hi"]


@pytest.mark.parametrize("n_seeds", [2, 3])
def test_disagreement_excess_interval_needs_three_seeds(n_seeds):
    """With 2 seeds every resample keeping two distinct seeds is the sample: no interval (NaN),
    the estimate still reported; with 3 the percentile interval has width and holds the estimate."""
    result = memory.disagreement_excess(_predictions(0.3, n_seeds=n_seeds), n_boot=300)
    assert result["excess"] == pytest.approx(result["alpha_dis"] - result["seed_dis"])
    assert result["excess"] == pytest.approx(0.3 - 0.17, abs=0.03)
    if n_seeds < memory.MIN_SEEDS_INTERVAL:
        assert np.isnan(result["excess_lo"]) and np.isnan(result["excess_hi"])
    else:
        assert result["excess_lo"] < result["excess_hi"]
        assert result["excess_lo"] <= result["excess"] <= result["excess_hi"]


def _cubes(planted: bool | str, seed: int = 0):
    """12 pipelines: memory exp(-accumulated) (planted True), exp(-epochs / 12) (planted
    "epochs") or flat noise (False); epochs and the accumulated rate vary independently, 5 seeds
    each."""
    rng = np.random.default_rng(seed)
    cubes = []
    for p in range(12):
        epochs = np.linspace(0, 12 if p % 2 else 48, 9)
        accumulated = 10 ** rng.uniform(-2, 0.5) * epochs
        if planted == "epochs":
            memory = np.exp(-epochs / 12)
        else:
            memory = np.exp(-accumulated) if planted else np.full(epochs.size, 0.5)
        values = memory[None, :] + 0.05 * rng.normal(size=(5, epochs.size))
        units = {"epochs": epochs, "accumulated": accumulated}
        cubes.append(unit_decision.PipelineCube(str(p), values, units))
    return {"norm": cubes}


def test_unit_bootstrap_planted_unit_wins():
    intervals, decision = unit_decision.unit_bootstrap(
        _cubes(True), n_boot=60, with_parametric=False
    )
    row = decision.iloc[0]
    assert row["winner"] == "accumulated"
    assert row["diff_lo"] > 0
    assert "accumulated regularization is a better unit" in row["text"]
    table = intervals.set_index("unit")
    assert table.loc["accumulated", "r2_cv_lo"] > 0.9


def test_unit_bootstrap_planted_epochs_win():
    """The decision is not tilted towards accumulated regularization: planted epochs win."""
    _, decision = unit_decision.unit_bootstrap(_cubes("epochs"), n_boot=60, with_parametric=False)
    row = decision.iloc[0]
    assert row["winner"] == "epochs"
    assert row["diff_hi"] < 0
    assert "epochs are a better unit of forgetting than accumulated" in row["text"]


def test_unit_bootstrap_planted_null_cannot_tell():
    _, decision = unit_decision.unit_bootstrap(_cubes(False), n_boot=60, with_parametric=False)
    row = decision.iloc[0]
    assert row["diff_lo"] < 0 < row["diff_hi"]
    assert row["winner"] == "cannot tell"
    assert "cannot tell at this size" in row["text"]


def test_spread_cube_and_lopo_r2():
    values = np.array([[[0.8, 0.8], [0.7, 0.75]], [[0.82, 0.8], [0.72, 0.8]]])  # seed, alpha, eval
    cube = unit_decision.PipelineCube("p", values, {"epochs": np.array([1.0, 2.0])}, scale=100.0)
    assert cube.memory() == pytest.approx([10.0, 2.5])
    # two groups on one decreasing curve: each is predicted by the other's fit
    u = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    y = np.array([3.0, 2.0, 1.0, 3.0, 2.0, 1.0])
    assert fits.lopo_r2(u, y, [0, 0, 0, 1, 1, 1]) == pytest.approx(1.0)


def test_loglog_r2_interval_on_an_exact_power_law():
    predicted = np.geomspace(10, 1e4, 8)
    result = fits.loglog_r2_interval(3 * predicted**0.8, predicted, n_boot=200)
    assert result["r2_lo"] == pytest.approx(1.0)
    assert result["slope_boot_lo"] == pytest.approx(0.8)
    assert result["slope_boot_hi"] == pytest.approx(0.8)


def test_unit_decision_cannot_tell_on_two_pipelines_even_with_a_planted_unit():
    """Two pipelines: leave-one-pipeline-out fits one curve to predict the other; the planted unit
    would win on twelve (test above), on two the verdict is "cannot tell" with the reason."""
    cubes = {"norm": _cubes(True)["norm"][:2]}
    _, decision = unit_decision.unit_bootstrap(cubes, n_boot=40, with_parametric=False)
    row = decision.iloc[0]
    assert row["winner"] == "cannot tell"
    assert row["reason"] == "2 pipelines: the decision needs 3 or more (leave-one-pipeline-out R^2)"
    assert "cannot tell at this size" in row["text"] and row["reason"] in row["text"]


def test_unit_decision_cannot_tell_when_epochs_are_the_same_for_every_pipeline():
    """Equal-length pipelines (the design's r of ln epochs and ln accumulated is NaN): epochs cannot
    order them, so the comparison decides nothing, planted unit or not."""
    cubes = _cubes(True)["norm"]
    same = [
        unit_decision.PipelineCube(
            c.pipeline, c.values, {**c.units, "epochs": np.linspace(0, 12, 9)}
        )
        for c in cubes
    ]
    _, decision = unit_decision.unit_bootstrap({"norm": same}, n_boot=40, with_parametric=False)
    row = decision.iloc[0]
    assert row["winner"] == "cannot tell"
    assert row["reason"] == "epochs is the same for every pipeline (12)"


@pytest.mark.parametrize("fitted,expected", [(200, None), (180, None), (179, "only 179 of 200")])
def test_decision_guard_counts_the_bootstrap_resamples_that_fitted(fitted, expected):
    cubes = _cubes(True)["norm"]
    reason = unit_decision.decision_guard(cubes, ("accumulated", "epochs"), 200, fitted)
    assert (reason is None) if expected is None else reason.startswith(expected)


# ----------------------------------------------------------------------------------- rivals
def _rival_cubes(truth: str, seed: int = 0, noise: float = 0.02):
    """12 pipelines whose units vary independently (epochs, steps per epoch, explicit decay,
    SGD-noise and Adam terms, and a 'theory' clock); accumulated = explicit + sgd_noise for the
    even (SGD) pipelines and explicit + adam for the odd (Adam) ones, as theory.units sums them.
    The memory decays as exp(-u / u_med) in the planted unit ``truth`` (u_med: its median final
    value over the pipelines, so that every truth spans the same range of memory), 5 seeds."""
    rng = np.random.default_rng(seed)
    all_units = []
    for p in range(12):
        epochs = np.linspace(0, rng.choice([12.0, 24.0, 48.0]), 7)
        rates = 10 ** rng.uniform(-2, 0.3, 4)
        units = {
            "epochs": epochs,
            "steps": epochs * rng.choice([8, 16, 32]),
            "explicit": rates[0] * epochs,
            "sgd_noise": rates[1] * epochs,
            "adam": rates[2] * epochs,
            "theory": rates[3] * epochs,
        }
        units["accumulated"] = units["explicit"] + units["sgd_noise" if p % 2 == 0 else "adam"]
        all_units.append(units)
    clocks = [unit_decision.unit_values(u, truth, u["epochs"].size) for u in all_units]
    scale = np.median([c[-1] for c in clocks])
    cubes = []
    for p, (units, clock) in enumerate(zip(all_units, clocks, strict=True)):
        values = np.exp(-clock / scale)[None, :] + noise * rng.normal(size=(5, clock.size))
        cubes.append(unit_decision.PipelineCube(str(p), values, units))
    return {"norm": cubes}


def _r1_double_loop(cubes, pair):
    """R1 by its definition: every pair of points (pipeline, evaluation), seed-mean memories."""
    points = [
        (
            unit_decision.unit_values(c.units, pair[0], m.size)[t],
            unit_decision.unit_values(c.units, pair[1], m.size)[t],
            m[t],
        )
        for c in cubes
        for m in [c.values.mean(axis=0)]
        for t in range(c.values.shape[-1])
    ]
    total = weight = 0.0
    for (a1, e1, y1), (a2, e2, y2) in itertools.product(points, repeat=2):
        k = np.sign(a1 - a2) - np.sign(e1 - e2)
        total += k * np.sign(y2 - y1)
        weight += abs(k)
    return total / weight


@pytest.mark.parametrize("rival", ["steps", "explicit_sgd_noise", "theory"])
def test_r1_against_any_rival_is_its_double_loop(rival):
    cubes = _rival_cubes("accumulated", seed=3)
    table = unit_decision.rank_bootstrap(cubes, n_boot=20, pair=("accumulated", rival))
    expected = _r1_double_loop(cubes["norm"], ("accumulated", rival))
    assert table["rank_diff"].iloc[0] == pytest.approx(expected, rel=1e-12)


def test_planted_accumulated_beats_every_rival():
    table = unit_decision.rival_bootstrap(_rival_cubes("accumulated"), n_boot=100)
    assert set(table["rival"]) == set(unit_decision.RIVAL_UNITS)
    assert table["beats"].all(), table
    verdict = unit_decision.rival_verdict(table).iloc[0]
    assert verdict["best"] == "accumulated" and verdict["not_beaten"] == ""


@pytest.mark.parametrize("truth", ["steps", "explicit", "explicit_adam", "theory"])
def test_a_planted_rival_beats_accumulated_and_no_unit_is_named(truth):
    """Not tilted towards the candidate: where the memory runs on a rival's clock, that rival
    beats accumulated regularization (its interval below 0) and the verdict names no unit."""
    table = unit_decision.rival_bootstrap(_rival_cubes(truth), n_boot=100).set_index("rival")
    assert table.loc[truth, "loses"] and table.loc[truth, "rank_hi"] < 0
    verdict = unit_decision.rival_verdict(table.reset_index()).iloc[0]
    assert verdict["best"] == "cannot tell" and truth in verdict["beats_candidate"].split(", ")


def test_a_rival_no_pipeline_carries_is_not_beaten():
    cubes = _rival_cubes("accumulated")
    for cube in cubes["norm"]:
        del cube.units["theory"]
    table = unit_decision.rival_bootstrap(cubes, n_boot=50)
    assert "theory" not in set(table["rival"])
    verdict = unit_decision.rival_verdict(table).iloc[0]
    assert verdict["best"] == "cannot tell" and verdict["not_beaten"] == "theory"


# ----------------------------------------------------------------------------------- time course
def _spread_values(curve_pp: np.ndarray, n_seeds: int = 6, noise: float = 0.0, seed: int = 0):
    """Accuracies (seeds, 2 alphas, evaluations) whose seed-mean spread is ``curve_pp``."""
    rng = np.random.default_rng(seed)
    low = 0.8 + np.zeros((n_seeds, curve_pp.size))
    high = low - curve_pp[None, :] / 100 + noise * rng.normal(size=(n_seeds, curve_pp.size))
    return np.stack([low, high], axis=1)


def test_a_rising_spread_is_read_from_its_peak():
    steps = np.arange(6) * 100.0
    rising = np.array([4.0, 9.0, 12.0, 8.0, 5.0, 3.0])
    values = _spread_values(rising)
    start = unit_decision.spread_start(steps, values)
    assert start == 2
    course = unit_decision.spread_course(steps, values, start)
    assert course["peak_step"] == 200.0 and course["first_pp"] == pytest.approx(4.0)
    assert course["rise_pp"] == pytest.approx(8.0) and course["end_pp"] == pytest.approx(3.0)
    assert course["rise_lo"] == pytest.approx(8.0) and course["rises"]  # no seed noise
    falling = np.array([12.0, 9.0, 7.0, 5.0, 4.0, 3.0])
    values = _spread_values(falling)
    assert unit_decision.spread_start(steps, values) == 0
    flat = unit_decision.spread_course(steps, values, 0)
    assert flat["rise_pp"] == 0.0 and not flat["rises"]
    peak_last = _spread_values(np.array([1.0, 2.0, 3.0, 4.0]))
    assert unit_decision.spread_start(steps[:4], peak_last) == 2  # two evaluations kept


def test_the_rise_interval_resamples_seeds_at_the_two_evaluations():
    """Noisy seeds: the interval brackets the rise, is the percentile interval of the spread
    difference over seed resamples (by hand), and a rise within the noise is not called one."""
    steps = np.arange(5) * 50.0
    values = _spread_values(np.array([5.0, 5.5, 5.2, 4.0, 3.0]), n_seeds=4, noise=0.03, seed=2)
    start = unit_decision.spread_start(steps, values)
    course = unit_decision.spread_course(steps, values, start, seed=7)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, 4, (unit_decision.COURSE_BOOT, 4))
    diffs = []
    for pick in picks:
        mean = values[pick].mean(axis=0)  # (alphas, evaluations)
        spread = 100 * (mean.max(axis=0) - mean.min(axis=0))
        diffs.append(spread[start] - spread[0])
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    assert (course["rise_lo"], course["rise_hi"]) == pytest.approx((lo, hi))
    assert start > 0 and course["rise_lo"] < 0 and not course["rises"]  # within the seed noise
