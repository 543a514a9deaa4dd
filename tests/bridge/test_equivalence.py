"""Function memory kept, gone or cannot tell (initmem.bridge.study.equivalence), on planted answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from initmem.bridge.study import equivalence as eq


def _runs(effects: dict[str, tuple[float, float]], n_seeds: int = 8, seed: int = 0):
    """Pipelines at alpha 1, 2 and 8: test accuracy 0.8 + a seed effect shared by the seed's alphas,
    plus ``effect`` at alpha 8 (a fraction) and per-run noise ``noise``; ``effects``:
    ``{name: (effect, noise)}``; every run interpolates."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, (effect, noise) in effects.items():
        for s in range(n_seeds):
            base = 0.8 + 0.02 * rng.standard_normal()
            for alpha in (1.0, 2.0, 8.0):
                acc = base + (effect if alpha == 8.0 else 0.0) + noise * rng.standard_normal()
                rows.append(
                    dict(pipeline=name, label=name, alpha=alpha, seed=s, test_acc=acc,
                         final_train_acc=1.0)
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_planted_answers_kept_gone_and_cannot_tell():
    """A planted difference of 0 with small noise is gone, 10 pp kept, 0 with large noise cannot
    tell; the shared seed effect cancels in the pairing (the sd is the per-run noise's sqrt(2))."""
    runs = _runs({"zero": (0.0, 0.002), "ten": (0.10, 0.002), "noisy": (0.0, 0.05)})
    table = eq.verdict_table(runs).set_index("label")
    assert table.loc["zero", "verdict"] == "gone"
    assert table.loc["ten", "verdict"] == "kept"
    assert table.loc["noisy", "verdict"] == "cannot tell"
    assert (table["alpha_low"] == 1.0).all() and (table["alpha_high"] == 8.0).all()
    assert table.loc["ten", "diff_pp"] == pytest.approx(10.0, abs=0.5)
    assert table.loc["zero", "sd_pp"] == pytest.approx(100 * 0.002 * np.sqrt(2), rel=0.6)
    # the noisy pipeline: the seeds "gone" would need at its noise are more than it has
    assert table.loc["noisy", "seeds_for_gone"] > table.loc["noisy", "n_seeds_used"]
    # and with them, a fresh sweep whose truth is 0 says gone about as often as promised
    need = int(table.loc["noisy", "seeds_for_gone"])
    rng = np.random.default_rng(1)
    sd = table.loc["noisy", "sd_pp"]
    hits = np.mean([eq.tost(rng.normal(0.0, sd, need))["equivalent"] for _ in range(2000)])
    assert hits == pytest.approx(eq.GONE_POWER, abs=0.04)


def test_paired_difference_by_hand_and_tost_against_two_t_tests():
    runs = _runs({"p": (0.01, 0.01)}, n_seeds=6)
    low, high, seeds, d = eq.paired_differences(runs)
    pivot = runs.pivot_table(index="seed", columns="alpha", values="test_acc") * 100
    assert (low, high) == (1.0, 8.0) and list(seeds) == list(range(6))
    assert d == pytest.approx((pivot[8.0] - pivot[1.0]).to_numpy())
    margin = 2.0
    test = eq.tost(d, margin)
    p_low = sps.ttest_1samp(d, -margin, alternative="greater").pvalue
    p_high = sps.ttest_1samp(d, margin, alternative="less").pvalue
    assert test["p"] == pytest.approx(max(p_low, p_high))
    # p < 0.05 exactly when the 90% interval lies within the margin
    lo, hi = sps.t.interval(0.90, d.size - 1, loc=d.mean(), scale=sps.sem(d))
    assert (test["lo"], test["hi"]) == pytest.approx((lo, hi))
    assert test["equivalent"] == (-margin < lo and hi < margin)
    for shift in np.linspace(-4, 4, 17):
        t = eq.tost(d + shift, margin)
        assert t["equivalent"] == (-margin < t["lo"] and t["hi"] < margin)


@pytest.mark.parametrize(("diff", "sd", "n"), [(0.0, 2.0, 5), (1.0, 1.0, 8), (0.0, 3.0, 20)])
def test_tost_power_against_simulation(diff, sd, n):
    rng = np.random.default_rng(2)
    draws = rng.normal(diff, sd, (4000, n))
    simulated = np.mean([eq.tost(row)["equivalent"] for row in draws])
    # binomial sd of 4000 draws is at most 0.008: 4 of them
    assert eq.tost_power(diff, sd, n) == pytest.approx(simulated, abs=0.032)


def test_seeds_for_gone_is_the_first_size_with_enough_power():
    for sd in (0.5, 2.0, 4.0):
        n = int(eq.seeds_for_gone(sd))
        assert eq.tost_power(0.0, sd, n) >= eq.GONE_POWER
        if n > 2:
            assert eq.tost_power(0.0, sd, n - 1) < eq.GONE_POWER
    assert np.isnan(eq.seeds_for_gone(np.nan))
    # at a measured difference inside the margin (the seeds that would call that pipeline gone)
    n = int(eq.seeds_for_gone(2.0, diff=1.0))
    assert eq.tost_power(1.0, 2.0, n) >= eq.GONE_POWER > eq.tost_power(1.0, 2.0, n - 1)
    assert n > eq.seeds_for_gone(2.0)
    assert np.isnan(eq.seeds_for_gone(2.0, diff=2.5))  # beyond the margin: never gone


@pytest.mark.parametrize(("diff", "sd", "n"), [(-2.0, 2.0, 6), (1.0, 1.5, 12), (0.0, 2.0, 8)])
def test_kept_power_against_simulation(diff, sd, n):
    """E5': the noncentral-t power of E2 against the frequency with which E2's 95% t-interval
    excludes 0 on draws (the interval by hand on 40,000 rows, checked against decide_differences
    on the first 200)."""
    rng = np.random.default_rng(5)
    draws = rng.normal(diff, sd, (40_000, n))
    half = sps.t.ppf(0.975, n - 1) * draws.std(axis=1, ddof=1) / np.sqrt(n)
    excludes = np.abs(draws.mean(axis=1)) > half
    for row, said in zip(draws[:200], excludes[:200], strict=True):
        decided = eq.decide_differences(row)
        assert said == (decided["diff_lo"] > 0 or decided["diff_hi"] < 0)
    # binomial sd of 40,000 draws is at most 0.0025: 4 of them
    assert eq.kept_power(diff, sd, n) == pytest.approx(excludes.mean(), abs=0.01)


def test_seeds_for_kept_is_the_first_size_with_enough_power():
    for diff, sd in ((-2.0, 1.5), (3.0, 4.0), (-18.0, 3.0)):
        n = int(eq.seeds_for_kept(diff, sd))
        assert eq.kept_power(diff, sd, n) >= eq.GONE_POWER
        if n > 2:
            assert eq.kept_power(diff, sd, n - 1) < eq.GONE_POWER
    assert np.isnan(eq.seeds_for_kept(0.0, 1.0)) and np.isnan(eq.seeds_for_kept(np.nan, 1.0))


@pytest.mark.parametrize("n_seeds", [3, 5, 6, 7])
def test_permutation_is_printed_only_where_it_can_reach_the_level(n_seeds):
    """With 2 alphas the sign-flip test's smallest p is 1 / 2^(n-1) (computed, not assumed): 1/16
    at 5 seeds is not printed, 1/32 at 6 is."""
    runs = _runs({"p": (0.10, 0.002)}, n_seeds=n_seeds)
    row = eq.verdict_table(runs).iloc[0]
    assert row["perm_p_min"] == pytest.approx(1 / 2 ** (n_seeds - 1))
    text = eq.permutation_text(row)
    if 1 / 2 ** (n_seeds - 1) < 0.05:
        assert text == f"{row['perm_p']:.3f}" and row["perm_p"] == pytest.approx(row["perm_p_min"])
    else:
        assert text.startswith("– (smallest attainable p")


def test_sentences_count_the_verdicts_and_say_what_gone_needs():
    effects = {"zero": (0.0, 0.002), "ten": (0.10, 0.002), "noisy": (0.0, 0.05)}
    runs = _runs(effects | {"one": (0.01, 0.001)})
    table = eq.verdict_table(runs)
    first, one, noisy = eq.verdict_sentences(table)
    assert "of 4 pipelines: kept in 1: ten; gone in 2: zero, one; cannot tell in 1: noisy." in first
    # a planted 1 pp with tiny noise: within the margin (gone), its 95% interval excludes 0
    row = table.set_index("label").loc["one"]
    assert row["verdict"] == "gone" and row["diff_lo"] > 0
    assert one.startswith("one: gone within the margin, though not 0: difference ")
    assert f"{row['diff_pp']:+.2f} pp [95% {row['diff_lo']:+.2f}, {row['diff_hi']:+.2f}]" in one
    assert row["diff_pp"] == pytest.approx(1.0, abs=0.1)
    row = table.set_index("label").loc["noisy"]
    assert f"from {int(row['seeds_for_gone'])} seeds" in noisy
    assert f"sd {row['sd_pp']:.2f} pp" in noisy
    one_seed = runs[runs["seed"] == 0]
    assert eq.verdict_table(one_seed)["verdict"].eq("cannot tell").all()
