"""Initialization memory of a sweep: spread across alpha, disagreement, interpolation; tidy tables.

A *pipeline* is everything but the init scale and the seed: every hashed config field except ``alpha``
and ``seed`` (:func:`pipeline_columns`). For each pipeline the memory of the init scale shows as

- the **spread**: max over alpha minus min over alpha of the seed-mean test accuracy of the
  validation-selected checkpoint, in percentage points, with a bootstrap interval (seeds resampled
  within each alpha);
- the **disagreement**: the fraction of test points where the validation-selected predictors of two
  alphas (same seed) predict different classes, averaged over seeds; beside it the same fraction
  between seeds at one alpha (the seed-to-seed baseline);
- **interpolated**: whether every run reached ``final_train_acc >= 0.995`` (the paper's ">= 99.5% train
  accuracy": fitting the training set is not forgetting the init).

Units: accuracies in result files are fractions; the tables here give percent (``*_pct``) and
percentage points (``*_pp``). Example::

    runs = load_sweep("runs/demo")
    spread_table(runs)[["label", "spread_pp", "ci_low_pp", "ci_high_pp", "interpolated"]]
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import runfolder
from .config import NON_HASHED_FIELDS, RunConfig, config_hash
from .sweep import read_manifest

#: The RunResult numbers copied into :func:`load_sweep`'s rows (NaN / None until a run finishes).
RESULT_COLUMNS = (
    "best_val_acc",
    "test_acc",
    "best_epoch",
    "final_train_acc",
    "final_test_acc",
    "epochs_run",
    "steps_run",
    "diverged_step",
    "reason",
    "wall_time",
)
#: Training accuracy (fraction, un-augmented, eval mode) at or above which a run counts as interpolating.
INTERPOLATION_THRESHOLD = 0.995
#: Run states whose numbers enter the metrics (the validation-selected checkpoint of a diverged run
#: exists and is a legitimate predictor; such runs are counted in ``n_diverged``).
FINISHED = runfolder.FINISHED_STATES


def interpolates(runs: pd.DataFrame) -> pd.Series:
    """Per run: did its final train accuracy reach :data:`INTERPOLATION_THRESHOLD`? (NaN: no.)"""
    return runs["final_train_acc"].astype(float) >= INTERPOLATION_THRESHOLD


def pipeline_columns() -> list[str]:
    """Config fields that identify a pipeline: every hashed field except ``alpha`` and ``seed``."""
    return [f for f in RunConfig.field_names() if f not in (*NON_HASHED_FIELDS, "alpha", "seed")]


def pipeline_id(config: dict[str, Any]) -> str:
    """8-hex-digit key of a config's pipeline (the config hash with alpha and seed left out)."""
    return config_hash({k: config[k] for k in pipeline_columns() if k in config})[:8]


# ====================================================================== loading
def load_sweep(sweep_dir: str | Path) -> pd.DataFrame:
    """One tidy row per run of a sweep folder, in manifest order.

    Columns: ``hash``, ``variant``, ``pipeline`` (see :func:`pipeline_id`), ``label`` (a readable
    pipeline name), ``run_dir``, ``status`` (completed / diverged / damaged / running / failed /
    pending), every RunConfig field (list fields as tuples), and :data:`RESULT_COLUMNS` (accuracies as
    fractions; NaN for unfinished runs and for damaged ones, which also get a
    :class:`~initmem.empirical.runfolder.DamagedRunWarning` each: a finished run is damaged when any
    file the analyses read fails :func:`~initmem.empirical.runfolder.run_damage`).
    """
    rows = []
    for run in read_manifest(sweep_dir):
        config = run.config.to_dict()
        run_dir = run.run_dir(sweep_dir)
        row: dict[str, Any] = {
            "hash": run.hash,
            "variant": run.variant,
            "pipeline": pipeline_id(config),
            "run_dir": str(run_dir),
            "status": runfolder.run_state(run_dir),
        }
        row.update({k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})
        result = {}
        checked = row["status"] in (*FINISHED, "damaged")
        damage = runfolder.run_damage(run_dir, run.hash) if checked else ""
        if damage:  # its numbers cannot be trusted: left out, said once
            row["status"] = "damaged"
            warnings.warn(
                f"skipping damaged run {run.hash} ({run.variant}): {damage}",
                runfolder.DamagedRunWarning,
                stacklevel=2,
            )
        elif row["status"] in FINISHED:
            result = runfolder.read_result(run_dir) or {}
        row.update({k: result.get(k) for k in RESULT_COLUMNS})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:  # no runs: the columns all the same, so callers can select and filter
        columns = ["hash", "variant", "pipeline", "label", "run_dir", "status"]
        return pd.DataFrame(columns=[*columns, *RunConfig.field_names(), *RESULT_COLUMNS])
    for column in RESULT_COLUMNS:
        if column != "reason":
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame.insert(3, "label", pipeline_labels(frame))
    return frame


def pipeline_labels(runs: pd.DataFrame) -> pd.Series:
    """A readable name per row: the variant, plus ``field=value`` for fields that split a variant."""
    firsts = runs.drop_duplicates("pipeline")
    labels = {}
    for variant, group in firsts.groupby("variant", sort=False):
        varying = [
            c
            for c in pipeline_columns()
            if c in group and group[c].astype(str).nunique(dropna=False) > 1
        ]
        for _, row in group.iterrows():
            extra = ", ".join(f"{c}={row[c]}" for c in varying)
            labels[row["pipeline"]] = f"{variant} ({extra})" if extra else str(variant)
    return runs["pipeline"].map(labels)


def load_epochs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-evaluation scalar logs of the given runs, one row per (run, evaluation), keyed by ``hash``.

    Reads each run's ``metrics.parquet``, falling back to ``log.jsonl`` (scalar keys only).
    """
    frames = []
    for hash_, run_dir in zip(runs["hash"], runs["run_dir"], strict=True):
        frame = runfolder.read_metrics(run_dir)
        if frame is not None and not frame.empty:
            frames.append(frame.assign(hash=hash_))
    if not frames:
        return pd.DataFrame(columns=["hash", "epoch"])
    return _hash_first(pd.concat(frames, ignore_index=True))


def load_layers(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-layer logs of the given runs, one row per (run, evaluation, layer), keyed by ``hash``.

    Reads each run's ``layers.parquet``, falling back to the ``layers`` dicts of ``log.jsonl``.
    """
    frames = []
    for hash_, run_dir in zip(runs["hash"], runs["run_dir"], strict=True):
        frame = runfolder.read_layers(run_dir)
        if frame is not None and not frame.empty:
            frames.append(frame.assign(hash=hash_))
    if not frames:
        return pd.DataFrame(columns=["hash", "epoch", "layer"])
    return _hash_first(pd.concat(frames, ignore_index=True))


def _hash_first(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["hash", *[c for c in frame.columns if c != "hash"]]]


# ====================================================================== metrics
def finished_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs whose numbers count: finished (completed or diverged) with a finite test accuracy."""
    return runs[runs["status"].isin(FINISHED) & np.isfinite(runs["test_acc"].astype(float))]


def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Seed statistics per (pipeline, alpha): test accuracy of the validation-selected checkpoint.

    Columns: ``pipeline``, ``label``, ``variant``, ``alpha``, ``n_seeds``, ``test_acc_pct`` (seed mean),
    ``test_acc_std_pct`` (sample std over seeds, NaN for one seed), ``best_val_acc_pct``,
    ``min_train_acc_pct`` (lowest final train accuracy over seeds), ``n_diverged``.
    """
    done = finished_runs(runs)
    rows = []
    for (pipeline, alpha), group in done.groupby(["pipeline", "alpha"], sort=False):
        rows.append(
            {
                "pipeline": pipeline,
                "label": group["label"].iloc[0],
                "variant": group["variant"].iloc[0],
                "alpha": alpha,
                "n_seeds": len(group),
                "test_acc_pct": 100 * group["test_acc"].mean(),
                "test_acc_std_pct": 100 * group["test_acc"].std(ddof=1)
                if len(group) > 1
                else np.nan,
                "best_val_acc_pct": 100 * group["best_val_acc"].mean(),
                "min_train_acc_pct": 100 * group["final_train_acc"].min(),
                "n_diverged": int((group["status"] == "diverged").sum()),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    order = {p: i for i, p in enumerate(runs["pipeline"].unique())}  # pipelines in sweep order
    table = table.assign(_order=table["pipeline"].map(order))
    return table.sort_values(["_order", "alpha"]).drop(columns="_order").reset_index(drop=True)


def bootstrap_spread(
    accuracies: list[np.ndarray],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the spread ``max_a mean(acc_a) - min_a mean(acc_a)``.

    ``accuracies`` holds one array of per-seed accuracies per alpha. Each replicate resamples the seeds
    of every alpha with replacement (alphas independent), recomputes the seed means and their range.
    Returns (low, high) in the units of the input; NaN when any alpha has fewer than two seeds (one
    seed carries no resampling information). Note that the range of noisy means is biased upward: with
    no true effect its expectation is about ``d_k * std / sqrt(n_seeds)`` (``d_k`` the expected range of
    k standard normals), which the interval does not remove.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must satisfy 0 < confidence < 1 (got {confidence})")
    if n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer (got {n_boot})")
    if len(accuracies) < 2 or any(len(a) < 2 for a in accuracies):
        return (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    means = np.stack(
        [
            np.asarray(a, dtype=np.float64)[rng.integers(0, len(a), size=(n_boot, len(a)))].mean(1)
            for a in accuracies
        ],
        axis=1,
    )  # (n_boot, n_alphas)
    spreads = means.max(axis=1) - means.min(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(spreads, [tail, 100 - tail])
    return (float(low), float(high))


def disagreement_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairwise disagreement of validation-selected predictors on the test set, per pipeline.

    For every pair of alphas (``alpha_a`` < ``alpha_b``) in a pipeline: the fraction of test points
    whose predicted classes differ between the runs with the same seed, averaged over the seeds both
    alphas have (``n_seeds``). Reads ``best_test_pred`` from each run's ``predictions.npz``; runs
    without one are left out. Columns: ``pipeline``, ``label``, ``alpha_a``, ``alpha_b``, ``n_seeds``,
    ``disagreement`` (fraction).
    """
    predictions = _best_predictions(finished_runs(runs))
    rows = []
    for pipeline, group in predictions.groupby("pipeline", sort=False):
        by_alpha = {
            a: dict(zip(g["seed"], g["pred"], strict=True)) for a, g in group.groupby("alpha")
        }
        for alpha_a, alpha_b in itertools.combinations(sorted(by_alpha), 2):
            seeds = sorted(set(by_alpha[alpha_a]) & set(by_alpha[alpha_b]))
            if not seeds:
                continue
            values = [np.mean(by_alpha[alpha_a][s] != by_alpha[alpha_b][s]) for s in seeds]
            rows.append(
                {
                    "pipeline": pipeline,
                    "label": group["label"].iloc[0],
                    "alpha_a": alpha_a,
                    "alpha_b": alpha_b,
                    "n_seeds": len(seeds),
                    "disagreement": float(np.mean(values)),
                }
            )
    return pd.DataFrame(
        rows, columns=["pipeline", "label", "alpha_a", "alpha_b", "n_seeds", "disagreement"]
    )


def seed_disagreement(runs: pd.DataFrame) -> pd.Series:
    """Per pipeline: the disagreement between seeds at one alpha (mean over alphas and seed pairs).

    The baseline for :func:`disagreement_table`: what two runs differing only in their random draw
    disagree on. NaN for pipelines with one seed per alpha.
    """
    predictions = _best_predictions(finished_runs(runs))
    values = {}
    for pipeline, group in predictions.groupby("pipeline", sort=False):
        pairs = [
            np.mean(p != q)
            for _, g in group.groupby("alpha")
            for p, q in itertools.combinations(list(g["pred"]), 2)
        ]
        values[pipeline] = float(np.mean(pairs)) if pairs else np.nan
    return pd.Series(values, name="seed_disagreement", dtype=float)


def _best_predictions(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, run in runs.iterrows():
        try:
            data = runfolder.read_predictions(
                run["run_dir"], keys=("best_test_pred", "test_labels")
            )
        except FileNotFoundError:  # the run saved no predictions
            continue
        if "best_test_pred" not in data:
            continue
        pred, labels = data["best_test_pred"], data.get("test_labels")
        rows.append(
            {
                "pipeline": run["pipeline"],
                "label": run["label"],
                "alpha": run["alpha"],
                "seed": run["seed"],
                "pred": pred,
                "labels": labels,
            }
        )
    frame = pd.DataFrame(rows, columns=["pipeline", "label", "alpha", "seed", "pred", "labels"])
    for pipeline, group in frame.groupby("pipeline"):
        sizes = {len(p) for p in group["pred"]}
        if len(sizes) > 1:
            raise ValueError(
                f"runs of pipeline {pipeline} have test sets of different sizes {sorted(sizes)}"
            )
    return frame


def spread_table(
    runs: pd.DataFrame,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    with_disagreement: bool = True,
) -> pd.DataFrame:
    """The memory summary, one row per pipeline (in sweep order).

    Columns: ``pipeline``, ``label``, ``variant``, ``n_alphas``, ``n_seeds`` (fewest seeds at any alpha),
    ``spread_pp`` (max minus min over alpha of the seed-mean test accuracy, percentage points),
    ``ci_low_pp`` / ``ci_high_pp`` (bootstrap interval, see :func:`bootstrap_spread`), ``seed_std_pp``
    (seed standard deviation of test accuracy, averaged over alphas), ``best_alpha`` / ``worst_alpha``,
    ``interpolated`` (every run's final train accuracy >= 99.5%), ``min_train_acc_pct``,
    ``disagreement`` / ``max_disagreement`` (mean and largest pairwise alpha disagreement, fractions),
    ``seed_disagreement`` (the seed-to-seed baseline), ``n_runs`` (finished), ``n_diverged``,
    ``n_unfinished`` (runs of the pipeline not finished: pending, running or failed).
    """
    if runs.empty:
        return pd.DataFrame()
    done = finished_runs(runs)
    accuracy = accuracy_table(runs)
    disagreement = disagreement_table(runs) if with_disagreement else pd.DataFrame()
    seed_dis = seed_disagreement(runs) if with_disagreement else pd.Series(dtype=float)
    rows = []
    for pipeline in runs["pipeline"].unique():
        everything = runs[runs["pipeline"] == pipeline]
        group = done[done["pipeline"] == pipeline]
        per_alpha = accuracy[accuracy["pipeline"] == pipeline] if not accuracy.empty else accuracy
        row: dict[str, Any] = {
            "pipeline": pipeline,
            "label": everything["label"].iloc[0],
            "variant": everything["variant"].iloc[0],
            "n_alphas": len(per_alpha),
            "n_seeds": int(per_alpha["n_seeds"].min()) if len(per_alpha) else 0,
            "n_runs": len(group),
            "n_diverged": int((group["status"] == "diverged").sum()),
            "n_unfinished": int((~everything["status"].isin(FINISHED)).sum()),
        }
        if len(per_alpha):
            means = per_alpha.set_index("alpha")["test_acc_pct"]
            samples = [100 * g["test_acc"].to_numpy() for _, g in group.groupby("alpha")]
            low, high = bootstrap_spread(samples, n_boot=n_boot, confidence=confidence, seed=seed)
            row |= {
                "spread_pp": float(means.max() - means.min()),
                "ci_low_pp": low,
                "ci_high_pp": high,
                "seed_std_pp": float(per_alpha["test_acc_std_pct"].mean()),
                "best_alpha": float(means.idxmax()),
                "worst_alpha": float(means.idxmin()),
                "interpolated": bool(interpolates(group).all() and row["n_unfinished"] == 0),
                "min_train_acc_pct": float(100 * group["final_train_acc"].min()),
            }
        if with_disagreement:
            pairs = disagreement[disagreement["pipeline"] == pipeline]["disagreement"]
            row |= {
                "disagreement": float(pairs.mean()) if len(pairs) else np.nan,
                "max_disagreement": float(pairs.max()) if len(pairs) else np.nan,
                "seed_disagreement": float(seed_dis.get(pipeline, np.nan)),
            }
        rows.append(row)
    columns = [
        "pipeline",
        "label",
        "variant",
        "n_alphas",
        "n_seeds",
        "spread_pp",
        "ci_low_pp",
        "ci_high_pp",
        "seed_std_pp",
        "best_alpha",
        "worst_alpha",
        "interpolated",
        "min_train_acc_pct",
        "disagreement",
        "max_disagreement",
        "seed_disagreement",
        "n_runs",
        "n_diverged",
        "n_unfinished",
    ]
    table = pd.DataFrame(rows)
    return table[[c for c in columns if c in table.columns]]


__all__ = [
    "INTERPOLATION_THRESHOLD",
    "interpolates",
    "RESULT_COLUMNS",
    "accuracy_table",
    "bootstrap_spread",
    "disagreement_table",
    "finished_runs",
    "load_epochs",
    "load_layers",
    "load_sweep",
    "pipeline_columns",
    "pipeline_id",
    "pipeline_labels",
    "seed_disagreement",
    "spread_table",
]
