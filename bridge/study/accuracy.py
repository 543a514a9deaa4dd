"""Accuracy levels: do the pipelines that forget alpha reach a higher test accuracy than those that keep it?

Setting
-------
The paper closes on a claim about levels, not memories: the regularizers that erase the memory of
the init are those that improve generalization. A sweep holds, per pipeline, alpha and seed, the
test accuracy of the validation-selected checkpoint; the function-memory verdict of each pipeline
(kept / gone / cannot tell) is :mod:`initmem.bridge.study.equivalence`'s.

Definitions (derived here)
--------------------------
(L1) **Level** (:func:`accuracy_levels`): per (pipeline, alpha), the seed mean of the test accuracy
     (pp) over the pipeline's finished runs, with its 95% Student-t interval over seeds
     (:func:`initmem.empirical.memory.mean_interval`; NaN bounds with one seed).
(L2) **Within-family comparison** (:func:`accuracy_comparison`). A *family* is the optimizer
     (``sgd``, ``adam``, ...; decay and schedule vary within it). In a family with a set G of
     pipelines whose function memory is ``gone`` and a set K whose memory is ``kept``, per seed s
     that every one of them used (M1): ``a_p(s)`` = the mean over p's alphas of its test accuracy,
     and ``d_s = mean_{g in G} a_g(s) - mean_{k in K} a_k(s)`` (pp; paired by seed: one data order).
     ``D`` = mean over seeds with its 95% t-interval: "the pipelines that forget reach a higher
     accuracy" when the interval lies above 0, "lower" when below, else "cannot tell" (it includes 0,
     or fewer than 2 shared seeds). A family without a pipeline in G or in K has no comparison, and
     says which is missing. Assumption: the ``d_s`` are independent across seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from initmem.empirical import memory, tables

#: Columns of :func:`accuracy_levels`.
LEVEL_COLUMNS = ["pipeline", "label", "alpha", "n_seeds", "acc_pct", "acc_lo", "acc_hi"]
#: Columns of :func:`accuracy_comparison`.
COMPARISON_COLUMNS = [
    "family",
    "forget",
    "keep",
    "n_seeds",
    "diff_pp",
    "diff_lo",
    "diff_hi",
    "verdict",
]


def accuracy_levels(runs: pd.DataFrame) -> pd.DataFrame:
    """L1: one row per (pipeline, alpha) of the finished ``runs`` (with ``pipeline``, ``label``), in
    sweep order and increasing alpha (:data:`LEVEL_COLUMNS`)."""
    rows = []
    for (pipeline, alpha), group in runs.groupby(["pipeline", "alpha"], sort=False):
        mean, lo, hi = memory.mean_interval(100.0 * group["test_acc"].to_numpy(dtype=float))
        rows.append(
            {
                "pipeline": pipeline,
                "label": group["label"].iloc[0],
                "alpha": float(alpha),
                "n_seeds": int(group["seed"].nunique()),
                "acc_pct": mean,
                "acc_lo": lo,
                "acc_hi": hi,
            }
        )
    table = pd.DataFrame(rows, columns=LEVEL_COLUMNS)
    if table.empty:
        return table
    order = {p: i for i, p in enumerate(runs["pipeline"].unique())}
    table = table.assign(_order=table["pipeline"].map(order))
    return table.sort_values(["_order", "alpha"]).drop(columns="_order").reset_index(drop=True)


def _seed_levels(runs: pd.DataFrame) -> pd.Series:
    """``a_p(s)`` of L2 for one pipeline: per seed used (M1), the mean over alphas (pp)."""
    seeds = tables.interpolating_seeds(runs)
    used = runs[runs["seed"].isin(seeds)]
    return 100.0 * used.groupby("seed")["test_acc"].mean()


def comparison_verdict(lo: float, hi: float) -> str:
    """L2's verdict from the interval of ``D``."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "cannot tell (fewer than 2 shared seeds)"
    if lo > 0:
        return "the pipelines that forget reach a higher accuracy"
    if hi < 0:
        return "the pipelines that forget reach a lower accuracy"
    return "cannot tell (the interval includes 0)"


def accuracy_comparison(runs: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """L2: one row per optimizer family (:data:`COMPARISON_COLUMNS`). ``runs``: the study's finished
    runs (``pipeline``, ``label``, ``optimizer``); ``verdicts``: the function-memory verdicts
    (:func:`initmem.bridge.study.equivalence.verdict_table`)."""
    if verdicts.empty or "optimizer" not in runs:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    state = verdicts.set_index("pipeline")["verdict"]
    labels = verdicts.set_index("pipeline")["label"]
    families = runs.drop_duplicates("pipeline").set_index("pipeline")["optimizer"]
    rows = []
    for family in dict.fromkeys(families[families.index.isin(state.index)]):
        members = [p for p in state.index if families.get(p) == family]
        forget = [p for p in members if state[p] == "gone"]
        keep = [p for p in members if state[p] == "kept"]
        row = {
            "family": family,
            "forget": ", ".join(map(str, labels[forget])),
            "keep": ", ".join(map(str, labels[keep])),
        }
        if not forget or not keep:
            missing = "no pipeline whose function memory is gone" if not forget else ""
            missing = missing or "no pipeline whose function memory is kept"
            rows.append(
                row
                | {"n_seeds": 0, "diff_pp": math.nan, "diff_lo": math.nan, "diff_hi": math.nan}
                | {"verdict": f"no comparison ({missing})"}
            )
            continue
        levels = {p: _seed_levels(runs[runs["pipeline"] == p]) for p in forget + keep}
        shared = sorted(set.intersection(*(set(v.index) for v in levels.values())))
        d = np.array(
            [
                np.mean([levels[p][s] for p in forget]) - np.mean([levels[p][s] for p in keep])
                for s in shared
            ]
        )
        mean, lo, hi = memory.mean_interval(d) if d.size else (math.nan,) * 3
        rows.append(
            row
            | {"n_seeds": len(shared), "diff_pp": mean, "diff_lo": lo, "diff_hi": hi}
            | {"verdict": comparison_verdict(lo, hi)}
        )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def comparison_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per family of :func:`accuracy_comparison`, every number from it."""
    lines = []
    for _, r in table.iterrows():
        if r["verdict"].startswith("no comparison"):
            lines.append(f"{r['family']}: {r['verdict']}.")
            continue
        numbers = f"{r['diff_pp']:+.2f} pp"
        if np.isfinite(r["diff_lo"]):
            numbers += f" [95% {r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}]"
        lines.append(
            f"{r['family']}: {r['verdict']} ({r['forget']} against {r['keep']}: {numbers} over "
            f"{int(r['n_seeds'])} shared seeds)."
        )
    return lines


__all__ = [
    "COMPARISON_COLUMNS",
    "LEVEL_COLUMNS",
    "accuracy_comparison",
    "accuracy_levels",
    "comparison_sentences",
    "comparison_verdict",
]
