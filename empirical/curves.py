"""The memories of :mod:`initmem.empirical.memory` over training time: one curve per evaluation.

* **norm memory** M4 (:func:`norm_memory_curves`), per layer and as the layer mean
  :data:`SCALE_INVARIANT_MEAN` of the scaled BN-followed convs;
* **accuracy spread** M2 (:func:`spread_curves`), percentage points;
* **prediction disagreement** between alphas M3 (:func:`disagreement_curves`), a fraction.

Times are optimizer steps (``step``) with the epoch alongside. How fast these curves decay, and what
the theory predicts for them, is :mod:`initmem.bridge`'s (it fits them); this module only measures.
Run files are read through :mod:`initmem.empirical.tables`.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from initmem.theory.criterion import combine_layers

from . import tables

#: Name of the layer-averaged norm memory of every scaled scale-invariant layer of a pipeline.
SCALE_INVARIANT_MEAN = "all scale-invariant"
#: A layer counts as scaled by alpha when its init log-ratio is at least this fraction of log(a_hi/a_lo).
SCALED_FRACTION = 0.5


class MemoryDataError(ValueError):
    """The sweep's runs lack what a memory needs (e.g. a second alpha); the message says what to add.

    Raised on readable runs that cannot be measured (``initmem.bridge.BridgeDataError`` is this class).
    Not :class:`initmem.empirical.sweep.SweepError` (a sweep file or folder that cannot be read or run).
    """


# ----------------------------------------------------------------------------------- norm memory
def _layer_mean(memory: pd.Series) -> float:
    """The layers' memories combined by the one rule (:data:`initmem.theory.criterion.LAYER_RULE`:
    the mean; NaN when any layer is NaN, never skipped)."""
    return float(combine_layers(memory.to_numpy(dtype=np.float64)))


def norm_memory_curves(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Norm memory of every scaled layer, per pipeline, seed and evaluation (tidy).

    Definition M4 of :mod:`initmem.empirical.memory`. ``runs``: finished runs with ``pipeline``
    (:func:`~initmem.empirical.tables.finished_runs`); ``layers``:
    :func:`~initmem.empirical.tables.load_layers` of them. Pairs the largest and smallest alpha of each
    pipeline that share a seed.
    Columns: ``pipeline``, ``seed``, ``layer``, ``scale_invariant``, ``epoch``, ``step``, ``alpha_lo``,
    ``alpha_hi``, ``log_ratio`` (``log |w|_hi / |w|_lo``), ``memory`` (log_ratio over its init value).
    Adds, per pipeline and seed, the layer :data:`SCALE_INVARIANT_MEAN`: the mean memory of the scaled
    scale-invariant layers (:data:`initmem.theory.criterion.LAYER_RULE`; NaN where one is NaN).
    """
    needed = {"hash", "epoch", "layer", "weight_norm"}
    if layers.empty or not needed <= set(layers.columns):
        raise MemoryDataError(f"the layer logs lack {sorted(needed - set(layers.columns))}")
    step_of = layers.groupby(["hash", "epoch"])["step"].first() if "step" in layers else None
    out = []
    for (pipeline, seed), group in runs.groupby(["pipeline", "seed"]):
        if group["alpha"].nunique() < 2:
            continue
        lo_run = group.loc[group["alpha"].idxmin()]
        hi_run = group.loc[group["alpha"].idxmax()]
        lo = layers[layers["hash"] == lo_run["hash"]].set_index(["layer", "epoch"])
        hi = layers[layers["hash"] == hi_run["hash"]].set_index(["layer", "epoch"])
        joined = (
            lo[["weight_norm"]]
            .add_suffix("_lo")
            .join(hi[["weight_norm"]].add_suffix("_hi"), how="inner")
        )
        if joined.empty:
            continue
        frame = joined.reset_index()
        frame["log_ratio"] = np.log(frame["weight_norm_hi"] / frame["weight_norm_lo"])
        invariant = lo["scale_invariant"] if "scale_invariant" in lo else None
        frame["scale_invariant"] = (
            invariant.groupby(level="layer").first().reindex(frame["layer"]).to_numpy(dtype=bool)
            if invariant is not None
            else False
        )
        init = frame[frame["epoch"] == frame["epoch"].min()].set_index("layer")["log_ratio"]
        full = np.log(hi_run["alpha"] / lo_run["alpha"])
        scaled = init[init.abs() >= SCALED_FRACTION * full].index
        frame = frame[frame["layer"].isin(scaled)].copy()
        frame["memory"] = frame["log_ratio"] / frame["layer"].map(init)
        frame["step"] = (
            step_of.reindex(
                list(zip([lo_run["hash"]] * len(frame), frame["epoch"], strict=True))
            ).to_numpy()
            if step_of is not None
            else np.nan
        )
        frame = frame.assign(
            pipeline=pipeline, seed=seed, alpha_lo=lo_run["alpha"], alpha_hi=hi_run["alpha"]
        )
        out.append(frame)
        invariant_rows = frame[frame["scale_invariant"]]
        if not invariant_rows.empty:
            mean = (
                invariant_rows.groupby("epoch")
                .agg(
                    step=("step", "first"),
                    log_ratio=("log_ratio", "mean"),
                    memory=("memory", _layer_mean),
                )
                .reset_index()
            )
            out.append(
                mean.assign(
                    layer=SCALE_INVARIANT_MEAN,
                    scale_invariant=True,
                    pipeline=pipeline,
                    seed=seed,
                    alpha_lo=lo_run["alpha"],
                    alpha_hi=hi_run["alpha"],
                )
            )
    if not out:
        raise MemoryDataError(
            "no pipeline has two alphas with layer logs for the same seed: the norm memory compares "
            "runs that differ only in alpha"
        )
    columns = ["pipeline", "seed", "layer", "scale_invariant", "epoch", "step", "alpha_lo"]
    columns += ["alpha_hi", "log_ratio", "memory"]
    curves = pd.concat(out, ignore_index=True)[columns]
    return curves.sort_values(["pipeline", "layer", "seed", "epoch"], ignore_index=True)


# ----------------------------------------------------------------------------------- function memory
def accuracy_curves(
    runs: pd.DataFrame, epochs: pd.DataFrame, metric: str = "test_acc"
) -> pd.DataFrame:
    """Per-evaluation accuracy of every run with its pipeline, alpha and seed (tidy).

    ``epochs``: :func:`~initmem.empirical.tables.load_epochs` of ``runs``; ``metric`` one of its
    columns (``test_acc``, ``val_acc``); raises :class:`MemoryDataError` when the logs lack it.
    """
    if metric not in epochs.columns:
        raise MemoryDataError(f"the epoch logs lack '{metric}'")
    keys = runs[["hash", "pipeline", "alpha", "seed"]]
    table = epochs[["hash", "epoch", "step", metric]].merge(keys, on="hash")
    return table.sort_values(["pipeline", "alpha", "seed", "epoch"], ignore_index=True)


def spread_curves(
    runs: pd.DataFrame, epochs: pd.DataFrame, acc: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Test-accuracy spread across alphas at every evaluation, per pipeline (percentage points).

    Definition M2 of :mod:`initmem.empirical.memory` at each evaluation, over every finished run
    (the unit decision takes M1's seeds: :func:`initmem.bridge.unit_decision.memory_cubes`).

    The spread is max minus min over alphas of the seed-mean test accuracy. Columns: ``pipeline``,
    ``epoch``, ``step``, ``spread_pp``, ``n_alphas``. ``acc``: :func:`accuracy_curves` of the runs,
    when already built.
    """
    acc = accuracy_curves(runs, epochs) if acc is None else acc
    mean = acc.groupby(["pipeline", "epoch", "step", "alpha"])["test_acc"].mean().reset_index()
    grouped = mean.groupby(["pipeline", "epoch", "step"])["test_acc"]
    out = grouped.agg(lambda a: 100.0 * (a.max() - a.min())).rename("spread_pp").to_frame()
    out["n_alphas"] = grouped.size()
    return out.reset_index()


def disagreement_curves(runs: pd.DataFrame) -> pd.DataFrame:
    """Prediction disagreement between alphas at every evaluation, per pipeline and seed.

    Definition M3 of :mod:`initmem.empirical.memory` over time, without its seed floor. Reads
    ``epochs`` and ``test_pred`` of each run (:func:`~initmem.empirical.tables.load_predictions`); for each seed, the fraction of
    test images on which two runs of different alphas predict different classes, averaged over all
    alpha pairs. Columns: ``pipeline``, ``seed``, ``epoch``, ``disagreement`` (fraction in [0, 1]).
    """
    saved = tables.load_predictions(runs, keys=("test_pred", "epochs"))
    rows = []
    for (pipeline, seed), group in saved.groupby(["pipeline", "seed"]):
        preds = {
            alpha: dict(zip(np.asarray(epochs).tolist(), pred, strict=True))
            for alpha, pred, epochs in zip(
                group["alpha"], group["test_pred"], group["epochs"], strict=True
            )
        }
        if len(preds) < 2:
            continue
        shared = set.intersection(*(set(p) for p in preds.values()))
        for epoch in sorted(shared):
            pairs = [np.mean(preds[a][epoch] != preds[b][epoch]) for a, b in combinations(preds, 2)]
            rows.append(
                {
                    "pipeline": pipeline,
                    "seed": seed,
                    "epoch": epoch,
                    "disagreement": float(np.mean(pairs)),
                }
            )
    return pd.DataFrame(rows, columns=["pipeline", "seed", "epoch", "disagreement"])


__all__ = [
    "MemoryDataError",
    "SCALED_FRACTION",
    "SCALE_INVARIANT_MEAN",
    "accuracy_curves",
    "disagreement_curves",
    "norm_memory_curves",
    "spread_curves",
]
