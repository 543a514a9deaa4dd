"""Accuracy levels and the within-family comparison of forgetting and keeping pipelines
(initmem.bridge.study.accuracy), on planted accuracies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from initmem.bridge.study import accuracy
from initmem.bridge.study.equivalence import verdict_table

#: name: (optimizer, accuracy at alpha 1, accuracy at alpha 8)
PLANTED = {
    "sgd-wd": ("sgd", 0.88, 0.88),  # no gap: gone
    "sgd-plain": ("sgd", 0.80, 0.70),  # 10 pp gap: kept; level 13 pp below sgd-wd
    "adam-wd": ("adam", 0.85, 0.85),  # gone
    "adam-plain": ("adam", 0.90, 0.80),  # kept, level equal to adam-wd: cannot tell
    "rms-wd": ("rmsprop", 0.85, 0.85),  # gone, and no kept pipeline in its family
}


def _runs(n_seeds: int = 8, noise: float = 0.001) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for name, (optimizer, low, high) in PLANTED.items():
        for s in range(n_seeds):
            for alpha, level in ((1.0, low), (8.0, high)):
                rows.append(
                    dict(pipeline=name, label=name, optimizer=optimizer, alpha=alpha, seed=s,
                         test_acc=level + noise * rng.standard_normal(), final_train_acc=1.0)
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_levels_are_seed_means_with_t_intervals():
    runs = _runs()
    levels = accuracy.accuracy_levels(runs)
    assert len(levels) == 2 * len(PLANTED)
    row = levels[(levels["label"] == "sgd-plain") & (levels["alpha"] == 8.0)].iloc[0]
    values = 100 * runs[(runs["pipeline"] == "sgd-plain") & (runs["alpha"] == 8.0)]["test_acc"]
    lo, hi = sps.t.interval(0.95, values.size - 1, loc=values.mean(), scale=sps.sem(values))
    assert (row["acc_pct"], row["acc_lo"], row["acc_hi"]) == pytest.approx((values.mean(), lo, hi))
    assert row["n_seeds"] == 8 and row["acc_pct"] == pytest.approx(70.0, abs=0.2)


def test_within_family_comparison_of_forgetting_and_keeping_pipelines():
    runs = _runs()
    verdicts = verdict_table(runs)
    assert dict(zip(verdicts["label"], verdicts["verdict"], strict=True)) == {
        "sgd-wd": "gone",
        "sgd-plain": "kept",
        "adam-wd": "gone",
        "adam-plain": "kept",
        "rms-wd": "gone",
    }
    table = accuracy.accuracy_comparison(runs, verdicts).set_index("family")
    # sgd: by hand, per seed the mean over alphas of sgd-wd minus that of sgd-plain
    wide = runs.pivot_table(index="seed", columns="pipeline", values="test_acc", aggfunc="mean")
    d = 100 * (wide["sgd-wd"] - wide["sgd-plain"])
    lo, hi = sps.t.interval(0.95, d.size - 1, loc=d.mean(), scale=sps.sem(d))
    sgd = table.loc["sgd"]
    assert (sgd["diff_pp"], sgd["diff_lo"], sgd["diff_hi"]) == pytest.approx((d.mean(), lo, hi))
    assert sgd["diff_pp"] == pytest.approx(13.0, abs=0.2) and sgd["n_seeds"] == 8
    assert sgd["verdict"] == "the pipelines that forget reach a higher accuracy"
    # adam: equal levels, the interval includes 0
    adam = table.loc["adam"]
    assert adam["diff_lo"] <= 0 <= adam["diff_hi"]
    assert adam["verdict"] == "cannot tell (the interval includes 0)"
    assert table.loc["rmsprop", "verdict"] == (
        "no comparison (no pipeline whose function memory is kept)"
    )
    lines = accuracy.comparison_sentences(table.reset_index())
    assert lines[0].startswith("sgd: the pipelines that forget reach a higher accuracy (sgd-wd ")
    assert (
        f"{sgd['diff_pp']:+.2f} pp [95% {sgd['diff_lo']:+.2f}, {sgd['diff_hi']:+.2f}]" in lines[0]
    )
    assert lines[2] == "rmsprop: no comparison (no pipeline whose function memory is kept)."
