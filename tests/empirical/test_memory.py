"""Memory metrics against numbers computed by hand from a synthetic sweep folder.

``make_sweep`` writes a sweep folder whose run folders hold chosen results, predictions and logs (the
files of docs/run-format.md), so every metric has an independent expected value.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from initmem.empirical.memory import (
    accuracy_table,
    bootstrap_spread,
    disagreement_table,
    seed_disagreement,
    spread_null,
    spread_table,
)
from initmem.empirical.runfolder import RunResult, run_lock, write_result
from initmem.empirical.sweep import SweepSpec, prepare_sweep
from initmem.empirical.tables import (
    INTERPOLATION_THRESHOLD,
    interpolating_seeds,
    load_epochs,
    load_layers,
    load_sweep,
    pipeline_columns,
)

N_TEST = 200
LABELS = np.arange(N_TEST) % 10

SPEC = """
name = "synthetic"
[base]
dataset = "cifar10-fixture"
width = 0.125  # the per-group predictions build this model and its NTK: small keeps them cheap
batch_size = 4
epochs = 4
[grid]
alpha = [0.5, 1.0, 2.0]
seed = [0, 1]
[[variants]]
name = "sgd"
optimizer = "sgd"
[[variants]]
name = "adam"
optimizer = "adam"
"""

#: test accuracy per (variant, alpha) over seeds 0, 1
ACC = {
    ("sgd", 0.5): (0.80, 0.82),
    ("sgd", 1.0): (0.90, 0.88),
    ("sgd", 2.0): (0.70, 0.74),
    ("adam", 0.5): (0.88, 0.90),
    ("adam", 1.0): (0.89, 0.89),
    ("adam", 2.0): (0.91, 0.87),
}
#: final train accuracy: one sgd run does not interpolate
TRAIN = {("sgd", 2.0, 1): 0.99}


def wrong_points(variant: str, alpha: float, seed: int) -> set[int]:
    """Test points a run gets wrong (it predicts label + 1 there)."""
    start = {0.5: 0, 1.0: 20, 2.0: 50}[alpha] + 5 * seed
    width = 30 if variant == "sgd" else 10
    return set(range(start, start + width)) if variant == "sgd" or alpha != 1.0 else set()


def predictions(variant: str, alpha: float, seed: int) -> np.ndarray:
    pred = LABELS.copy()
    for i in wrong_points(variant, alpha, seed):
        pred[i] = (LABELS[i] + 1) % 10
    return pred


def make_sweep(root: Path, *, jsonl_only: tuple[str, ...] = (), train: dict | None = None) -> Path:
    """A finished synthetic sweep; runs of the variants in ``jsonl_only`` have no parquet tables;
    ``train``: final train accuracy per (variant, alpha, seed), 1.0 elsewhere (default :data:`TRAIN`)."""
    train = TRAIN if train is None else train
    runs = prepare_sweep(SweepSpec.from_toml(SPEC), root)
    for run in runs:
        key = (run.variant, run.config.alpha)
        seed = run.config.seed
        run_dir = run.run_dir(root)
        run_dir.mkdir(parents=True, exist_ok=True)
        test_acc = ACC[key][seed]
        result = RunResult.completed(
            run_dir,
            run.hash,
            test_acc=test_acc,
            epochs_run=4,
            steps_run=16,
            best_val_acc=test_acc - 0.01,
            best_epoch=3,
            final_train_acc=train.get((*key, seed), 1.0),
            final_test_acc=test_acc - 0.02,
            wall_time=1.5,
        )
        records = []
        for epoch in range(5):
            norm = run.config.alpha * (1 + 0.1 * epoch)
            layers = {
                name: {
                    "numel": 100,
                    "scale_invariant": name != "head",
                    "weight_norm": k * norm,
                    "eff_lr": run.config.lr / (k * norm) ** 2,
                }
                for k, name in enumerate(["conv1", "conv2", "head"], start=1)
            }
            records.append(
                {
                    "epoch": epoch,
                    "step": 4 * epoch,
                    "lr": run.config.lr,
                    "train_eval_acc": min(1.0, 0.2 + 0.2 * epoch),
                    "val_acc": test_acc * epoch / 4,
                    "test_acc": test_acc * epoch / 4,
                    "layers": layers,
                }
            )
        (run_dir / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        if run.variant not in jsonl_only:
            scalars = [{k: v for k, v in r.items() if k != "layers"} for r in records]
            pd.DataFrame(scalars).to_parquet(run_dir / "metrics.parquet")
            rows = [
                {"epoch": r["epoch"], "step": r["step"], "layer": n, **v}
                for r in records
                for n, v in r["layers"].items()
            ]
            pd.DataFrame(rows).to_parquet(run_dir / "layers.parquet")
        np.savez(
            run_dir / "predictions.npz",
            epochs=np.arange(5),
            test_pred=np.tile(predictions(run.variant, run.config.alpha, seed), (5, 1)).astype(
                np.int16
            ),
            test_labels=LABELS.astype(np.int16),
            best_test_pred=predictions(run.variant, run.config.alpha, seed).astype(np.int16),
        )
        write_result(run_dir, result)
    return root


@pytest.fixture
def sweep(tmp_path) -> Path:
    return make_sweep(tmp_path / "sweep")


def test_load_sweep_has_one_row_per_run_with_config_and_results(sweep):
    runs = load_sweep(sweep)
    assert len(runs) == 12
    assert set(pipeline_columns()) <= set(runs.columns)
    for column in ("hash", "variant", "status", "best_val_acc", "test_acc", "best_epoch"):
        assert column in runs
    assert (runs["status"] == "completed").all()
    assert runs["alpha_groups"].iloc[0] == ("all",)
    row = runs[(runs["variant"] == "sgd") & (runs["alpha"] == 2.0) & (runs["seed"] == 1)].iloc[0]
    assert row["test_acc"] == pytest.approx(0.74) and row["final_train_acc"] == pytest.approx(0.99)
    assert runs.groupby("variant")["pipeline"].nunique().to_dict() == {"adam": 1, "sgd": 1}
    assert set(runs["label"]) == {"sgd", "adam"}


def test_load_sweep_states_of_unfinished_runs(sweep):
    runs = load_sweep(sweep)
    pending, failed, running = (Path(p) for p in runs["run_dir"].iloc[:3])
    for run_dir in (pending, failed, running):
        (run_dir / "result.json").unlink()
    (failed / "error.txt").write_text("Traceback\nValueError: boom\n")
    with run_lock(running):
        states = load_sweep(sweep)["status"].iloc[:4].tolist()
    assert states == ["pending", "failed", "running", "completed"]
    assert np.isnan(load_sweep(sweep)["test_acc"].iloc[0])


def test_spread_is_max_minus_min_of_seed_means_in_points(tmp_path):
    spread = spread_table(load_sweep(make_sweep(tmp_path / "s", train={})), n_boot=500)
    spread = spread.set_index("label")
    sgd_means = {a: np.mean(ACC[("sgd", a)]) for a in (0.5, 1.0, 2.0)}
    assert spread.loc["sgd", "spread_pp"] == pytest.approx(
        100 * (max(sgd_means.values()) - min(sgd_means.values()))
    )
    assert spread.loc["sgd", "spread_pp"] == pytest.approx(17.0)
    assert spread.loc["adam", "spread_pp"] == pytest.approx(0.0, abs=1e-9)
    assert spread.loc["sgd", "best_alpha"] == 1.0 and spread.loc["sgd", "worst_alpha"] == 2.0
    sgd_std = np.mean([100 * np.std(ACC[("sgd", a)], ddof=1) for a in (0.5, 1.0, 2.0)])
    assert spread.loc["sgd", "seed_std_pp"] == pytest.approx(sgd_std)
    assert spread.loc["sgd", "n_alphas"] == 3 and spread.loc["sgd", "n_seeds"] == 2
    low, high = spread.loc["sgd", ["ci_low_pp", "ci_high_pp"]]
    assert low <= 17.0 <= high
    assert spread.loc["sgd", "n_seeds_used"] == 2


def test_spread_uses_the_seeds_that_interpolate_at_every_alpha_and_has_its_null(sweep):
    """M1: seed 1 of sgd misses interpolation at alpha 2, so sgd keeps one seed (no spread); adam
    keeps both, and its null is the brute-force enumeration of within-seed relabellings."""
    runs = load_sweep(sweep)
    spread = spread_table(runs, n_boot=50).set_index("label")
    sgd_runs = runs[runs["variant"] == "sgd"]
    assert interpolating_seeds(sgd_runs).tolist() == [0]
    assert spread.loc["sgd", "n_seeds_used"] == 1 and np.isnan(spread.loc["sgd", "spread_pp"])
    assert spread.loc["adam", "n_seeds_used"] == 2
    acc = 100 * np.array([[ACC[("adam", a)][s] for a in (0.5, 1.0, 2.0)] for s in (0, 1)])
    spreads = [
        np.ptp(np.mean([acc[0, list(p)], acc[1, list(q)]], axis=0))
        for p in itertools.permutations(range(3))
        for q in itertools.permutations(range(3))
    ]
    observed = np.ptp(acc.mean(axis=0))
    assert spread.loc["adam", "spread_pp"] == pytest.approx(observed)
    assert spread.loc["adam", "null_mean_pp"] == pytest.approx(np.mean(spreads))
    assert spread.loc["adam", "p_value"] == pytest.approx(
        np.mean(np.array(spreads) >= observed - 1e-9)
    )
    assert spread.loc["adam", "p_value"] == pytest.approx(spread_null(acc)["p_value"])


def test_interpolation_flag_uses_the_99_5_percent_threshold(sweep):
    spread = spread_table(load_sweep(sweep), n_boot=10).set_index("label")
    assert INTERPOLATION_THRESHOLD == 0.995
    assert not spread.loc["sgd", "interpolated"]  # one run at 99.0%
    assert spread.loc["adam", "interpolated"]
    assert spread.loc["sgd", "min_train_acc_pct"] == pytest.approx(99.0)


def test_accuracy_table_gives_seed_mean_and_std_per_alpha(sweep):
    table = accuracy_table(load_sweep(sweep))
    row = table[(table["label"] == "sgd") & (table["alpha"] == 2.0)].iloc[0]
    assert row["test_acc_pct"] == pytest.approx(72.0)
    assert row["test_acc_std_pct"] == pytest.approx(100 * np.std([0.70, 0.74], ddof=1))
    assert row["n_seeds"] == 2


def test_disagreement_counts_test_points_where_predictions_differ(sweep):
    runs = load_sweep(sweep)
    table = disagreement_table(runs)
    assert len(table) == 2 * 3  # 3 alpha pairs per pipeline
    for _, row in table.iterrows():
        variant = runs.loc[runs["pipeline"] == row["pipeline"], "variant"].iloc[0]
        expected = np.mean(
            [
                len(
                    wrong_points(variant, row["alpha_a"], s)
                    ^ wrong_points(variant, row["alpha_b"], s)
                )
                / N_TEST
                for s in (0, 1)
            ]
        )
        assert row["disagreement"] == pytest.approx(expected)
    seeds = seed_disagreement(runs)
    for pipeline, value in seeds.items():
        variant = runs.loc[runs["pipeline"] == pipeline, "variant"].iloc[0]
        expected = np.mean(
            [
                len(wrong_points(variant, a, 0) ^ wrong_points(variant, a, 1)) / N_TEST
                for a in (0.5, 1.0, 2.0)
            ]
        )
        assert value == pytest.approx(expected)
    spread = spread_table(runs, n_boot=10).set_index("pipeline")
    adam = runs.loc[runs["variant"] == "adam", "pipeline"].iloc[0]  # both seeds used (M1)
    pairs = table[table["pipeline"] == adam]["disagreement"]
    assert spread.loc[adam, "disagreement"] == pytest.approx(pairs.mean())
    assert spread.loc[adam, "seed_disagreement"] == pytest.approx(seeds[adam])
    assert spread.loc[adam, "excess"] == pytest.approx(pairs.mean() - seeds[adam])


@pytest.mark.parametrize(("std_a", "std_b"), [(0.02, 0.03), (0.05, 0.01)])
def test_bootstrap_interval_matches_the_normal_approximation(std_a, std_b):
    """Two well separated alphas: the spread's bootstrap distribution is nearly normal with standard
    deviation sqrt(s_a^2/n + s_b^2/n) (s the sample std), so the 95% interval is mean +- 1.96 sd."""
    rng = np.random.default_rng(1)
    n = 400
    a = rng.normal(0.8, std_a, n)
    b = rng.normal(0.7, std_b, n)
    low, high = bootstrap_spread([a, b], n_boot=4000, seed=3)
    sd = np.sqrt(a.var(ddof=0) / n + b.var(ddof=0) / n)
    center = a.mean() - b.mean()
    assert (low + high) / 2 == pytest.approx(center, abs=0.15 * sd)
    assert (high - low) / 2 == pytest.approx(1.96 * sd, rel=0.08)


def test_bootstrap_needs_two_seeds_and_valid_arguments():
    assert np.isnan(bootstrap_spread([np.array([0.5]), np.array([0.6, 0.7])])).all()
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_spread([np.ones(3), np.ones(3)], confidence=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_spread([np.ones(3), np.ones(3)], n_boot=0)


def test_epoch_and_layer_logs_read_parquet_or_fall_back_to_jsonl(tmp_path):
    both = load_sweep(make_sweep(tmp_path / "a"))
    jsonl = load_sweep(make_sweep(tmp_path / "b", jsonl_only=("sgd", "adam")))
    epochs_a, epochs_b = load_epochs(both), load_epochs(jsonl)
    assert len(epochs_a) == 12 * 5 and list(epochs_a.columns[:2]) == ["hash", "epoch"]
    pd.testing.assert_frame_equal(epochs_a, epochs_b, check_dtype=False)
    layers_a, layers_b = load_layers(both), load_layers(jsonl)
    assert len(layers_a) == 12 * 5 * 3
    pd.testing.assert_frame_equal(layers_a, layers_b, check_dtype=False)
    row = layers_a[(layers_a["layer"] == "conv2") & (layers_a["epoch"] == 0)].iloc[0]
    alpha = both.set_index("hash").loc[row["hash"], "alpha"]
    assert row["eff_lr"] == pytest.approx(1e-3 / (2 * alpha) ** 2)


def test_a_cut_log_line_from_a_killed_run_is_skipped(tmp_path):
    runs = load_sweep(make_sweep(tmp_path / "s", jsonl_only=("sgd", "adam")))
    log = Path(runs["run_dir"].iloc[0]) / "log.jsonl"
    log.write_text(log.read_text() + '{"epoch": 5, "ste')
    epochs = load_epochs(runs.iloc[:1])
    assert epochs["epoch"].tolist() == [0, 1, 2, 3, 4]
