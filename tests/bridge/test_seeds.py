"""The spread decision at each seed count and the size that would tell (initmem.bridge.study.seeds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from initmem.bridge.study import seeds, synthetic
from initmem.empirical import memory
from tests.bridge.synthetic import sgd_design


def _runs(effects: dict[str, float], n_seeds: int = 5, noise: float = 0.01, seed: int = 0):
    """Runs of pipelines at alpha 1 and 4: test accuracy 0.8 (+ effect at alpha 4) + seed noise;
    every run interpolates except, in pipeline ``p0``, seed 1 at alpha 4 (left out by M1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, effect in effects.items():
        for s in range(n_seeds):
            base = 0.8 + noise * rng.standard_normal()
            for alpha in (1.0, 4.0):
                acc = base + (effect if alpha == 4.0 else 0.0) + noise * rng.standard_normal()
                train = 0.9 if (name == "p0" and s == 1 and alpha == 4.0) else 1.0
                rows.append(
                    dict(pipeline=name, label=name, alpha=alpha, seed=s, test_acc=acc,
                         final_train_acc=train)
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_by_seed_rows_are_the_spread_on_the_first_seeds():
    runs = _runs({"p0": 0.02, "p1": 0.0, "p2": 0.005})
    frame = seeds.spread_by_seeds(runs, n_boot=200)
    # p0 loses seed 1 (does not interpolate at alpha 4): seeds used 0, 2, 3, 4 -> k = 2..4
    assert sorted(frame.loc[frame["pipeline"] == "p0", "k_seeds"]) == [2, 3, 4]
    assert sorted(frame.loc[frame["pipeline"] == "p1", "k_seeds"]) == [2, 3, 4, 5]
    # the spread at k = 3 of p0, by hand: seeds 0, 2, 3
    p0 = runs[(runs["pipeline"] == "p0") & runs["seed"].isin([0, 2, 3])]
    by_alpha = p0.groupby("alpha")["test_acc"].mean() * 100
    row = frame[(frame["pipeline"] == "p0") & (frame["k_seeds"] == 3)].iloc[0]
    assert row["estimate_pp"] == pytest.approx(abs(by_alpha[4.0] - by_alpha[1.0]))
    assert row["lo_pp"] <= row["estimate_pp"] <= row["hi_pp"]
    # 2 alphas, 3 seeds: smallest attainable p is 2 / 2^3 = 0.25 -> cannot tell, says so
    assert row["p_min"] == pytest.approx(0.25)
    assert row["decision"].startswith("cannot tell at this size")
    # pooled at k = 5: only p1 and p2 have 5 seeds used; the mean excess with a t-interval
    pooled = frame[(frame["pipeline"] == seeds.POOLED) & (frame["k_seeds"] == 5)].iloc[0]
    assert pooled["n_pipelines"] == 2
    at5 = frame[(frame["pipeline"] != seeds.POOLED) & (frame["k_seeds"] == 5)]
    excess = (at5["estimate_pp"] - at5["null_mean_pp"]).to_numpy()
    half = sps.t.ppf(0.975, 1) * excess.std(ddof=1) / np.sqrt(2)
    assert pooled["estimate_pp"] == pytest.approx(excess.mean())
    assert pooled["hi_pp"] - pooled["estimate_pp"] == pytest.approx(half)
    includes = pooled["lo_pp"] <= 0 <= pooled["hi_pp"]
    assert pooled["decision"].startswith("cannot tell at this size") == includes


def test_a_large_effect_is_above_its_null_once_the_seeds_allow():
    """Two alphas: the smallest attainable p is 2 / 2^k, below 0.05 from k = 6 on."""
    runs = _runs({"p1": 0.05}, n_seeds=6, noise=0.002)
    frame = seeds.spread_by_seeds(runs, n_boot=200)
    pooled = frame[frame["pipeline"] == seeds.POOLED]
    assert pooled["decision"].str.contains("no interval").all()  # one pipeline: no t-interval
    frame = frame[frame["pipeline"] == "p1"].set_index("k_seeds")
    assert frame.loc[5, "p_value"] == pytest.approx(2 / 2**5)
    assert "smallest attainable p 0.062" in frame.loc[5, "decision"]
    assert frame.loc[6, "p_value"] == pytest.approx(2 / 2**6)
    assert frame.loc[6, "decision"].startswith("above its null")


def test_size_needed_is_the_first_size_whose_half_width_is_below_the_mean():
    mean, sd = 0.4, 1.0
    n = int(seeds.size_needed(mean, sd))
    assert sps.t.ppf(0.975, n - 1) * sd / np.sqrt(n) < mean
    assert sps.t.ppf(0.975, n - 2) * sd / np.sqrt(n - 1) >= mean
    assert seeds.size_needed(0.0, 1.0) != seeds.size_needed(0.0, 1.0)  # NaN: no effect
    with pytest.raises(ValueError, match="k must be"):
        seeds.first_seeds(_runs({"p0": 0.0}), 1)


@pytest.mark.parametrize(("mean", "sd"), [(0.5, 1.0), (1.2, 2.0)])
def test_predicted_size_excludes_zero_as_often_as_stated(mean, sd):
    """Draw sweeps of the predicted size from a normal with the observed mean and sd: the
    fraction whose t-interval excludes 0 is the stated power (binomial 4-sigma band)."""
    n = int(seeds.size_needed(mean, sd))
    power = seeds.exclusion_power(mean, sd, n)
    rng = np.random.default_rng(7)
    draws = rng.normal(mean, sd, size=(20000, n))
    m, s = draws.mean(1), draws.std(1, ddof=1)
    half = sps.t.ppf(0.975, n - 1) * s / np.sqrt(n)
    rate = np.mean((m - half > 0) | (m + half < 0))
    assert abs(rate - power) < 4 * np.sqrt(power * (1 - power) / 20000)
    assert 0.4 < power < 0.7  # just excluding 0 at the observed sd: about one half


def test_power_note_rows_and_sentences_follow_the_numbers():
    runs = _runs({"p0": 0.03, "p1": 0.001, "p2": 0.004}, noise=0.004)
    note = seeds.power_note(runs)
    assert list(note["unit"]) == ["seeds", "seeds", "seeds", "pipelines"]
    # two alphas: the paired difference's mean is the spread's size (p0 on seeds 0, 2, 3, 4)
    p0 = runs[(runs["pipeline"] == "p0") & (runs["seed"] != 1)]
    acc = p0.pivot_table(index="seed", columns="alpha", values="test_acc") * 100
    diff = (acc[4.0] - acc[1.0]).to_numpy()
    row = note.iloc[0]
    assert row["mean_pp"] == pytest.approx(diff.mean())
    assert row["sd_pp"] == pytest.approx(diff.std(ddof=1))
    assert row["n_now"] == 4
    lines = seeds.power_sentences(note)
    assert lines[0].startswith("p0:") and lines[0].endswith("the interval already excludes 0.")
    assert "cannot reach p < 0.05 before 6 seeds" in lines[0]  # 2 alphas, 4 seeds used
    for line, (_, r) in zip(lines, note.iterrows(), strict=True):
        assert f"{r['mean_pp']:+.2f} pp" in line
        if not r["excludes_0"] and np.isfinite(r["n_needed"]):
            assert "cannot tell at this size" in line
            assert f"at {int(r['n_needed'])} {r['unit']}" in line
    pooled = note.iloc[-1]
    excess = [
        memory.spread_null(
            g[g["seed"].isin(seeds.first_seeds(g, 5)["seed"])]
            .pivot_table(index="seed", columns="alpha", values="test_acc")
            .to_numpy()
            * 100
        )["excess"]
        for _, g in runs.groupby("pipeline")
    ]
    assert pooled["mean_pp"] == pytest.approx(np.mean(excess))
    assert pooled["n_now"] == 3


def test_study_writes_the_table_and_the_section(tmp_path):
    """``initmem study`` on a synthetic folder of 4 seeds: the by-seed-count CSV, and the section
    whose rows and sentences are its numbers."""
    from initmem.cli import main

    design = sgd_design([(1e-4, 8), (3e-3, 4), (1e-3, 8), (1e-2, 4)], (1.0, 8.0), n_seeds=4)
    replica = synthetic.draw(design, synthetic.Truth("accumulated"), np.random.default_rng(3))
    root = synthetic.write_folder(tmp_path / "sweep", replica)
    doc = tmp_path / "study.md"
    out = tmp_path / "tables"
    assert main(["study", str(root), "--doc", str(doc), "--n-boot", "30", "--out", str(out)]) == 0
    frame = pd.read_csv(out / "spread_by_seeds.csv")
    assert sorted(frame["k_seeds"].unique()) == [2, 3, 4]
    assert (frame["pipeline"] == seeds.POOLED).sum() == 3
    power = pd.read_csv(out / "spread_power.csv")
    assert len(power) == 5
    text = doc.read_text()
    section = text[text.index("## The spread at each seed count") :]
    section = section[: section.index("\n## ")]
    for _, r in frame.iterrows():
        assert r["decision"] in section
    for line in seeds.power_sentences(power):
        assert line in section
    # the unit decision at the full seed count is the study's own rank difference
    unit = pd.read_csv(out / "unit_by_seeds.csv")
    assert list(unit["k_seeds"]) == [2, 3, 4]
    decision = pd.read_csv(out / "decision.csv").set_index("memory")
    assert unit["rank_diff"].iloc[-1] == pytest.approx(decision.loc["spread", "rank_diff"])
    for _, r in unit.iterrows():
        cell = f"{r['rank_diff']:.2f} [{r['rank_lo']:.2f}, {r['rank_hi']:.2f}]"
        assert f"| {r['k_seeds']} | {r['n_pipelines']} | {cell} |" in section
        if r["rank_lo"] <= 0 <= r["rank_hi"]:
            assert r["winner"] == "cannot tell"


@pytest.mark.parametrize("n_alphas", [2, 3])
def test_seeds_for_permutation_is_where_the_nulls_smallest_p_drops_below_the_level(n_alphas):
    rng = np.random.default_rng(0)
    p_min = {
        k: memory.spread_null(rng.random((k, n_alphas)), max_permutations=10**6)["p_min"]
        for k in range(2, 8)
    }
    first = min(k for k, p in p_min.items() if p < memory.ALPHA_LEVEL)
    assert seeds.seeds_for_permutation(n_alphas) == first
    with pytest.raises(ValueError, match="n_alphas must be"):
        seeds.seeds_for_permutation(1)
