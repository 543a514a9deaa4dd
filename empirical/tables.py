"""A sweep folder as tidy tables: one row per run, its logs, its predictions, and the pipelines.

A *pipeline* is everything but the init scale and the seed: every hashed config field except
``alpha`` and ``seed`` (:func:`pipeline_columns`). A run *interpolates* when its final (un-augmented)
train accuracy is at least :data:`INTERPOLATION_THRESHOLD` (the paper's ">= 99.5% train accuracy":
fitting the training set is not forgetting the init); :func:`interpolating_seeds` is the one statement
of which seeds of a pipeline every memory of :mod:`initmem.empirical.memory` is measured on.

Every run file is read through :mod:`initmem.empirical.runfolder`. Units: accuracies are fractions
here (the memory tables give percent). Example::

    runs = load_sweep("runs/demo")
    epochs = load_epochs(finished_runs(runs))
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
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


# ====================================================================== pipelines
def pipeline_columns() -> list[str]:
    """Config fields that identify a pipeline: every hashed field except ``alpha`` and ``seed``."""
    return [f for f in RunConfig.field_names() if f not in (*NON_HASHED_FIELDS, "alpha", "seed")]


def pipeline_id(config: dict[str, Any]) -> str:
    """8-hex-digit key of a config's pipeline (the config hash with alpha and seed left out)."""
    return config_hash({k: config[k] for k in pipeline_columns() if k in config})[:8]


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


# ====================================================================== runs
def load_sweep(sweep_dir: str | Path, manifest: list | None = None) -> pd.DataFrame:
    """One tidy row per run of a sweep folder, in manifest order.

    Columns: ``hash``, ``variant``, ``pipeline`` (see :func:`pipeline_id`), ``label`` (a readable
    pipeline name), ``run_dir``, ``status`` (completed / diverged / damaged / running / failed /
    pending), every RunConfig field (list fields as tuples), and :data:`RESULT_COLUMNS` (accuracies as
    fractions; NaN for unfinished runs and for damaged ones, which also get a
    :class:`~initmem.empirical.runfolder.DamagedRunWarning` each: a finished run is damaged when any
    file the analyses read fails :func:`~initmem.empirical.runfolder.run_damage`). ``manifest``: the folder's
    :func:`~initmem.empirical.sweep.read_manifest`, when the caller has read it already.
    """
    rows = []
    for run in read_manifest(sweep_dir) if manifest is None else manifest:
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
    warn_mixed_data(frame)
    return frame


class MixedDataWarning(UserWarning):
    """Runs of one pipeline trained on different data (their config.json's data fingerprints differ)."""


#: Fields of config.json's ``data`` that say where the copy lives, not what it holds.
DATA_LOCATION_FIELDS = ("source",)


def data_fingerprint(run_dir: str | Path) -> str | None:
    """The data a run trained on, as config.json records it (sizes, mean/std, digests of the split
    indices and labels; not where the copy lives), as one string; None if it records none."""
    try:
        payload = json.loads((Path(run_dir) / "config.json").read_text())
        data = payload.get("data")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(data, dict):
        return None
    kept = {k: v for k, v in data.items() if k not in DATA_LOCATION_FIELDS}
    return json.dumps(kept, sort_keys=True)


def warn_mixed_data(runs: pd.DataFrame) -> list[str]:
    """Name (one :class:`MixedDataWarning` each) the finished runs whose data fingerprint
    (:func:`data_fingerprint`) differs from the one most runs of their pipeline share: a plug-in
    whose data differs between calls, or one edited between two ``sweep run`` calls, mixes data sets
    inside a pipeline. Returns the hashes named."""
    named = []
    finished = runs[runs["status"].isin(FINISHED)]
    for _, group in finished.groupby("pipeline", sort=False):
        prints = {
            h: data_fingerprint(d) for h, d in zip(group["hash"], group["run_dir"], strict=True)
        }
        counts = pd.Series([p for p in prints.values() if p is not None]).value_counts()
        if len(counts) < 2:
            continue
        common = counts.index[0]
        for run_hash, fingerprint in prints.items():
            if fingerprint is not None and fingerprint != common:
                label = group.loc[group["hash"] == run_hash, "label"].iloc[0]
                warnings.warn(
                    f"run {run_hash} ({label}) trained on other data than the other "
                    f"{counts.iloc[0]} runs of its pipeline (config.json's data fingerprint "
                    "differs: a plug-in whose data changes between calls, or edited between "
                    "sweep calls?); its numbers are not comparable with theirs",
                    MixedDataWarning,
                    stacklevel=3,
                )
                named.append(run_hash)
    return named


def finished_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs whose numbers count: finished (completed or diverged) with a finite test accuracy."""
    return runs[runs["status"].isin(FINISHED) & np.isfinite(runs["test_acc"].astype(float))]


def interpolates(runs: pd.DataFrame) -> pd.Series:
    """Per run: did its final train accuracy reach :data:`INTERPOLATION_THRESHOLD`? (NaN: no.)"""
    return runs["final_train_acc"].astype(float) >= INTERPOLATION_THRESHOLD


def interpolating_seeds(runs: pd.DataFrame) -> np.ndarray:
    """The seeds of one pipeline's runs that interpolate at every alpha the runs have (sorted).

    A seed counts when it has a run at each alpha of ``runs`` and every one of them interpolates
    (:func:`interpolates`). The one rule of which seeds a memory is measured on
    (:mod:`initmem.empirical.memory`, definition M1).
    """
    n_alphas = runs["alpha"].nunique()
    fits = runs.assign(_fits=interpolates(runs).to_numpy())
    per_seed = fits.groupby("seed").agg(fits=("_fits", "all"), n=("alpha", "nunique"))
    return per_seed.index[per_seed["fits"] & (per_seed["n"] == n_alphas)].to_numpy()


# ====================================================================== logs
def load_epochs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-evaluation scalar logs of the given runs, one row per (run, evaluation), keyed by ``hash``.

    Reads each run's ``metrics.parquet``, falling back to ``log.jsonl`` (scalar keys only).
    """
    return _per_run(runs, runfolder.read_metrics, ["hash", "epoch"])


def load_layers(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-layer logs of the given runs, one row per (run, evaluation, layer), keyed by ``hash``.

    Reads each run's ``layers.parquet``, falling back to the ``layers`` dicts of ``log.jsonl``.
    """
    return _per_run(runs, runfolder.read_layers, ["hash", "epoch", "layer"])


def _per_run(runs: pd.DataFrame, read, empty_columns: list[str]) -> pd.DataFrame:
    """The frames ``read(run_dir)`` of every run, concatenated with ``hash`` first."""
    frames = []
    for hash_, run_dir in zip(runs["hash"], runs["run_dir"], strict=True):
        frame = read(run_dir)
        if frame is not None and not frame.empty:
            frames.append(frame.assign(hash=hash_))
    if not frames:
        return pd.DataFrame(columns=empty_columns)
    frame = pd.concat(frames, ignore_index=True)
    return frame[["hash", *[c for c in frame.columns if c != "hash"]]]


def load_predictions(runs: pd.DataFrame, keys: Iterable[str] = ("best_test_pred",)) -> pd.DataFrame:
    """The saved predictions of the given runs, one row per run that has ``keys[0]``.

    Columns: ``hash``, ``pipeline``, ``label``, ``alpha``, ``seed`` and one column per key of
    ``predictions.npz`` that the run saved (``best_test_pred``: the validation-selected model's
    classes over the test set; ``test_pred``: (n_evals, n_test) per evaluation; ``epochs``;
    ``test_labels``). Runs without the file (``save_predictions = false``) are left out. Raises
    ValueError when the runs of one pipeline have test sets of different sizes.
    """
    keys = tuple(keys)
    rows = []
    for _, run in runs.iterrows():
        try:
            data = runfolder.read_predictions(run["run_dir"], keys=keys)
        except FileNotFoundError:  # the run saved no predictions
            continue
        if keys[0] not in data:
            continue
        rows.append(
            {c: run.get(c) for c in ("hash", "pipeline", "label", "alpha", "seed")}
            | {k: data.get(k) for k in keys}
        )
    frame = pd.DataFrame(rows, columns=["hash", "pipeline", "label", "alpha", "seed", *keys])
    for pipeline, group in frame.groupby("pipeline"):
        sizes = {np.shape(p)[-1] for p in group[keys[0]]}
        if len(sizes) > 1:
            raise ValueError(
                f"runs of pipeline {pipeline} have test sets of different sizes {sorted(sizes)}"
            )
    return frame


__all__ = [
    "FINISHED",
    "INTERPOLATION_THRESHOLD",
    "RESULT_COLUMNS",
    "finished_runs",
    "interpolates",
    "interpolating_seeds",
    "load_epochs",
    "load_layers",
    "load_predictions",
    "load_sweep",
    "pipeline_columns",
    "pipeline_id",
    "pipeline_labels",
]
