"""Which mechanism forgets (K1-K2) and the short / long pairs (K3) of initmem.bridge.study.mechanisms,
on a synthetic sweep folder whose memories are known (the replica written to disk)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.study import synthetic
from initmem.bridge.study.mechanisms import (
    length_sentences,
    mechanism,
    mechanism_sentences,
    mechanism_table,
)
from initmem.empirical.config import RunConfig


@pytest.mark.parametrize(
    "optimizer, momentum, l2, wd, kind",
    [
        ("sgd", 0.0, 0.0, 0.0, "SGD noise only"),
        ("sgd", 0.9, 0.0, 0.0, "SGD noise only"),
        ("adam", 0.0, 0.0, 0.0, "Adam term only"),
        ("adamw", 0.0, 0.0, 0.05, "explicit decay"),
        ("sgd", 0.9, 1e-2, 0.0, "explicit decay"),
        ("adam", 0.0, 5e-4, 0.0, "explicit decay"),
    ],
)
def test_mechanism_is_read_from_the_config(optimizer, momentum, l2, wd, kind):
    row = {"optimizer": optimizer, "momentum": momentum, "l2": l2, "weight_decay": wd}
    assert mechanism(row) == kind


def _config(variant_settings, epochs, alpha, seed):
    return RunConfig(
        dataset="synthetic", train_size=256, val_size=64, test_size=64, width=0.125,
        batch_size=32, epochs=epochs, eval_every=2, alpha=alpha, seed=seed, **variant_settings,
    )  # fmt: skip


#: name: (settings, epochs); sgd-short / sgd-long are identical but for their length
PIPELINES = {
    "sgd-short": ({"optimizer": "sgd", "lr": 0.1}, 8),
    "sgd-long": ({"optimizer": "sgd", "lr": 0.1}, 16),
    "adam": ({"optimizer": "adam", "lr": 1e-3}, 8),
    "adamw": ({"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.5}, 8),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    configs, variants = [], []
    for name, (settings, epochs) in PIPELINES.items():
        for alpha in (1.0, 4.0):
            for seed in range(4):
                configs.append(_config(settings, epochs, alpha, seed))
                variants.append(name)
    design = synthetic.design_of(configs, variants)
    truth = synthetic.Truth("epochs", scale=6.0, sigma_norm=0.05)
    replica = synthetic.draw(design, truth, np.random.default_rng(3))
    root = synthetic.write_folder(tmp_path_factory.mktemp("mechanisms") / "sweep", replica)
    from initmem.bridge.study import unit_study

    return replica, unit_study(root, n_boot=20)


def test_mechanisms_count_the_norm_memory_at_the_end(folder):
    """K2: each pipeline's mechanism and its seed-mean end memory, the replica's."""
    replica, study = folder
    table = study.mechanisms.set_index("label")
    for p, norm in zip(replica.design.pipelines, replica.norm, strict=True):
        assert table.loc[p.label, "memory_end"] == pytest.approx(norm[:, -1].mean(), abs=1e-6)
    assert table.loc["adam", "mechanism"] == "Adam term only"
    assert table.loc["adamw", "mechanism"] == "explicit decay"
    lines = mechanism_sentences(study.mechanisms)
    assert [line.split(":")[0] for line in lines] == [
        "SGD noise only",
        "Adam term only",
        "explicit decay",
    ]
    below = int((table.loc[["sgd-short", "sgd-long"], "memory_end"] <= np.exp(-1)).sum())
    assert lines[0].startswith(f"SGD noise only: {below} of 2 pipelines")


def test_short_long_pairs_are_the_seed_paired_change(folder):
    """K3 against the replica: norm memory and test-accuracy difference (largest minus smallest
    alpha, pp) at each run's end, the change long minus short per seed with its t-interval."""
    replica, study = folder
    pairs = study.length_pairs
    assert len(pairs) == 1
    row = pairs.iloc[0]
    assert (row["short"], row["long"]) == ("sgd-short", "sgd-long")
    assert (row["epochs_short"], row["epochs_long"]) == (8, 16)
    index = {p.label: i for i, p in enumerate(replica.design.pipelines)}
    short, long = index["sgd-short"], index["sgd-long"]
    change = replica.norm[long][:, -1] - replica.norm[short][:, -1]
    assert row["norm_change"] == pytest.approx(change.mean(), abs=1e-6)
    half = row["norm_hi"] - row["norm_change"]
    from scipy import stats

    expected = stats.t.ppf(0.975, change.size - 1) * change.std(ddof=1) / np.sqrt(change.size)
    assert half == pytest.approx(expected, rel=1e-4)

    def diff(i):
        acc = 100.0 * replica.accuracy[i][:, :, -1]
        return acc[:, -1] - acc[:, 0]

    assert row["diff_change"] == pytest.approx((diff(long) - diff(short)).mean(), abs=1e-3)
    # the truth forgets in epochs: the long run has forgotten more, and the interval says so
    assert row["norm_hi"] < 0
    (line,) = length_sentences(pairs)
    assert "more epochs forgot more" in line


def test_an_interval_including_zero_decides_no_change():
    pairs = pd.DataFrame(
        [
            {
                "short": "a", "long": "b", "epochs_short": 8, "epochs_long": 16,
                "norm_short": 0.5, "norm_long": 0.49, "norm_change": -0.01, "norm_lo": -0.05,
                "norm_hi": 0.03, "n_seeds_norm": 5, "diff_short": 2.0, "diff_long": 3.0,
                "diff_change": 1.0, "diff_lo": 0.2, "diff_hi": 1.8, "n_seeds_diff": 5,
            }
        ]
    )  # fmt: skip
    (line,) = length_sentences(pairs)
    assert "5 seeds: no change decided at this size" in line
    assert "the accuracy difference grew" in line


def test_mechanism_table_of_an_empty_end_table():
    runs = pd.DataFrame(
        {"pipeline": ["p"], "optimizer": ["sgd"], "l2": [0.0], "weight_decay": [0.0]}
    )
    empty = pd.DataFrame(columns=["pipeline", "label", "memory_end", "lo", "hi", "n_seeds"])
    assert (
        mechanism_table(runs, empty).empty
        and mechanism_sentences(mechanism_table(runs, empty)) == []
    )
