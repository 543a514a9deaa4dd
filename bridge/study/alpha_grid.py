"""Memory against ln(alpha): the pipelines of a sweep trained at three or more alphas.

Setting
-------
A pipeline trained at alphas ``a_0 < a_1 < ... < a_K`` (``K >= 2``) with the same seeds. Every
alpha ``a_k`` (``k >= 1``) is compared with the smallest, ``a_0``, exactly as the study compares
the extreme pair (its runs alone, its seeds, its layers):

(G1) **norm memory** ``m(a_k)``: M4 of :mod:`initmem.empirical.memory` on the pair ``(a_0, a_k)``
     at the last evaluation, ``ln(|w|_{a_k} / |w|_{a_0})`` over its value at init, layer mean over
     the scaled BN-followed convs, mean over seeds with a 95% t-interval
     (:func:`~initmem.empirical.memory.norm_memory_end`);
(G2) **the law's** ``m(a_k)``: the same memory computed from the normalized-weight law's norms of
     the same runs (:func:`initmem.bridge.predict.predicted_memory_curves`: each run's own init norm,
     learning rate, decay and logged gradient scale), seed mean;
(G2') **the pre-registered prediction**, where the sweep wrote one before training (``DIR/predictions/``,
     :func:`initmem.bridge.preregister.read_sweep_predictions`): the same law with the gradient
     scale probed at init, for the pair of alphas it was written for (the largest against the
     smallest). (G2) reads the gradient scale from the runs' own logs, so it reconstructs the
     measured norms through the one-step identity; (G2') is the prediction.
(G3) **function memory**: the seed-paired difference of the validation-selected test accuracy,
     ``a_k`` minus ``a_0``, with its kept / gone / cannot tell verdict
     (:func:`initmem.bridge.study.equivalence.pipeline_verdict`, E1-E4), on the seeds whose runs are
     fitted at both alphas.

Why ln(alpha) (derived here from the normalized-weight identity of :mod:`initmem.theory.normalized`,
``|w|^4`` grows by ``2 eta^2 G`` per SGD step with ``G = |g|^2 |w|^2`` independent of the norm):
with growth by gradient noise alone and the same ``G`` at every alpha, the growth ``c`` (in units of
the ``a_0`` init's ``|w_0|^4``) is shared, and ``m(a) = ln((r^4 + c) / (1 + c)) / (4 ln r)`` with
``r = a / a_0``: at a fixed ``c`` it rises towards 1 with ``ln r`` (a larger alpha is forgotten more
slowly in M4, which is a ratio of logs); under explicit decay alone it stays 1 at every alpha. Where
alpha scales the BN gains and the head too, ``G`` itself depends on alpha and the law's (G2), which
reads it from each run's log, is the prediction to compare with.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from initmem.bridge.predict import predicted_memory_curves
from initmem.bridge.study.equivalence import pipeline_verdict
from initmem.empirical import memory
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, MemoryDataError, norm_memory_curves

#: A pipeline enters the table from this many alphas on (two give the study's extreme pair only).
MIN_ALPHAS = 3
#: Columns of :func:`alpha_grid_table`.
COLUMNS = [
    "pipeline",
    "label",
    "alpha_low",
    "alpha",
    "ln_ratio",
    "n_seeds",
    "norm_end",
    "norm_lo",
    "norm_hi",
    "law_end",
    "preregistered_end",
    "n_seeds_used",
    "diff_pp",
    "diff_lo",
    "diff_hi",
    "verdict",
]


def common_alphas(runs: pd.DataFrame) -> tuple:
    """The alphas most pipelines of ``runs`` ran (the set shared by the most pipelines; ties: the
    first in sweep order), () without runs."""
    sets = [
        tuple(np.sort(group["alpha"].unique())) for _, group in runs.groupby("pipeline", sort=False)
    ]
    return max(sets, key=sets.count) if sets else ()


def at_common_alphas(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``runs`` with each pipeline that ran more alphas than :func:`common_alphas` (and all of
    them) cut to those, so that every pipeline is compared at the same alphas; and one note per
    pipeline cut. A pipeline without all of them keeps its own."""
    common = common_alphas(runs)
    keep = pd.Series(True, index=runs.index)
    notes = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        alphas = set(group["alpha"].unique())
        if len(alphas) <= len(common) or not set(common) <= alphas:
            continue
        keep[group.index] = group["alpha"].isin(common)
        label = group["label"].iloc[0] if "label" in group else pipeline
        notes.append(
            f"{label} ran alphas {', '.join(f'{a:g}' for a in sorted(alphas))}: every section but "
            f"'Memory against ln(alpha)' compares it at alphas "
            f"{', '.join(f'{a:g}' for a in common)}, the alphas most pipelines ran"
        )
    return runs[keep], notes


def preregistered_ends(predictions: pd.DataFrame | None) -> dict:
    """(G2'): ``{(pipeline, alpha): memory_end}`` of the scale-invariant group's pre-registered
    predictions (:func:`initmem.bridge.preregister.read_sweep_predictions`), ``alpha`` the largest of
    the pair each was written for; {} without any."""
    if predictions is None or predictions.empty or "memory_end" not in predictions:
        return {}
    rows = predictions[predictions["group"] == "scale_invariant"]
    return {(str(r.pipeline), float(r.alpha)): float(r.memory_end) for r in rows.itertuples()}


def alpha_grid_table(
    runs: pd.DataFrame, layers: pd.DataFrame, predictions: pd.DataFrame | None = None
) -> pd.DataFrame:
    """(G1)-(G3) for every alpha above the smallest of each pipeline with :data:`MIN_ALPHAS` or more.

    ``runs``: the study's finished runs (``pipeline``, ``label``, ``alpha``, ``seed``, ``hash``, the
    accuracy columns); ``layers``: their per-layer logs (:func:`~initmem.empirical.tables.load_layers`);
    ``predictions``: the sweep's pre-registered predictions (G2'), or None.
    One row per (pipeline, alpha): :data:`COLUMNS` (``ln_ratio`` is ``ln(alpha / alpha_low)``; NaN
    where a memory cannot be computed, e.g. no layer logs, or nothing was pre-registered)."""
    registered = preregistered_ends(predictions)
    rows = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        alphas = np.sort(group["alpha"].unique())
        if alphas.size < MIN_ALPHAS:
            continue
        low = float(alphas[0])
        for alpha in alphas[1:]:
            pair = group[np.isclose(group["alpha"], low) | np.isclose(group["alpha"], alpha)]
            norm, law = _norm_pair(pair, layers)
            decided = pipeline_verdict(pair)
            rows.append(
                {
                    "pipeline": pipeline,
                    "label": group["label"].iloc[0],
                    "alpha_low": low,
                    "alpha": float(alpha),
                    "ln_ratio": float(np.log(alpha / low)),
                    **norm,
                    "law_end": law,
                    "preregistered_end": registered.get((str(pipeline), float(alpha)), np.nan),
                    "n_seeds_used": decided["n_seeds_used"],
                    "diff_pp": decided["diff_pp"],
                    "diff_lo": decided["diff_lo"],
                    "diff_hi": decided["diff_hi"],
                    "verdict": decided["verdict"],
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _norm_pair(pair: pd.DataFrame, layers: pd.DataFrame) -> tuple[dict, float]:
    """(G1) and (G2) of one pair of alphas: ``({n_seeds, norm_end, norm_lo, norm_hi}, law_end)``."""
    empty = {"n_seeds": 0, "norm_end": np.nan, "norm_lo": np.nan, "norm_hi": np.nan}
    mine = layers[layers["hash"].isin(pair["hash"])] if "hash" in layers else layers.iloc[:0]
    try:
        curves = norm_memory_curves(pair, mine)
    except MemoryDataError:
        return empty, np.nan
    end = memory.norm_memory_end(curves, pair)
    if end.empty:
        return empty, np.nan
    row = end.iloc[0]
    norm = {
        "n_seeds": int(row["n_seeds"]),
        "norm_end": float(row["memory_end"]),
        "norm_lo": float(row["lo"]),
        "norm_hi": float(row["hi"]),
    }
    law = np.nan
    if "grad_sq_sum" in mine and mine["grad_sq_sum"].notna().any():
        predicted = predicted_memory_curves(pair, mine, curves)
        mean = predicted[predicted["layer"] == SCALE_INVARIANT_MEAN]
        if not mean.empty:
            law = float(mean.loc[mean["step"].idxmax(), "memory"])
    return norm, law


def alpha_grid_sentences(table: pd.DataFrame) -> list[str]:
    """Per pipeline of :func:`alpha_grid_table`: how the measured norm memory at the end moves with
    ln(alpha) (rises / falls when every step of the seed means goes one way, else "not monotone"),
    at how many alphas the law's lies inside the measured interval, and the function memory's
    verdict at each alpha."""
    lines = []
    for _, group in table.groupby("pipeline", sort=False):
        group = group.sort_values("alpha")
        label = group["label"].iloc[0]
        low = group["alpha_low"].iloc[0]
        values = group["norm_end"].to_numpy(dtype=float)
        at = ", ".join(
            f"{v:.2f} (alpha {a:g})" for v, a in zip(values, group["alpha"], strict=True)
        )
        if not np.isfinite(values).all():
            lines.append(f"{label}: the norm memory could not be measured at every alpha ({at}).")
            continue
        steps = np.diff(values)
        shape = (
            "rises with ln(alpha)"
            if (steps > 0).all()
            else "falls with ln(alpha)"
            if (steps < 0).all()
            else "is not monotone in ln(alpha)"
        )
        text = f"{label}: the norm memory at the end against alpha {low:g} {shape}: {at}"
        law = group["law_end"].to_numpy(dtype=float)
        if np.isfinite(law).any():
            inside = int(
                np.sum(
                    (law >= group["norm_lo"].to_numpy(dtype=float))
                    & (law <= group["norm_hi"].to_numpy(dtype=float))
                )
            )
            shown = ", ".join(f"{v:.2f}" for v in law)
            text += (
                f"; the law with the runs' logged gradient scale gives {shown}, inside the "
                f"measured 95% interval at {inside} of {len(group)} alphas"
            )
        registered = group[np.isfinite(group["preregistered_end"].to_numpy(dtype=float))]
        for r in registered.itertuples():
            inside = r.norm_lo <= r.preregistered_end <= r.norm_hi
            text += (
                f"; pre-registered before the runs (gradient scale probed at init) at alpha "
                f"{r.alpha:g}: {r.preregistered_end:.2f}, "
                + ("inside" if inside else "outside")
                + f" the measured [{r.norm_lo:.2f}, {r.norm_hi:.2f}]"
            )
        verdicts = ", ".join(
            f"{v} at alpha {a:g}" for v, a in zip(group["verdict"], group["alpha"], strict=True)
        )
        lines.append(f"{text}. Function memory: {verdicts}.")
    return lines


__all__ = [
    "COLUMNS",
    "MIN_ALPHAS",
    "alpha_grid_sentences",
    "alpha_grid_table",
    "at_common_alphas",
    "common_alphas",
    "preregistered_ends",
]
