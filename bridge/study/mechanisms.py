"""Which mechanism forgets, and do more epochs change anything: the pipelines by what can shrink
their memory, and the pairs that differ only in length.

Setting
-------
A pipeline's config says which terms of accumulated regularization (:mod:`initmem.theory.units`)
it has; the study's tables say what it measured. Both are read here, nothing else.

(K1) **Mechanism** of a pipeline, from its config alone (:func:`mechanism`): ``SGD noise only``
     (SGD, coupled L2 and decoupled decay both 0), ``Adam term only`` (an adaptive optimizer,
     both 0), ``explicit decay`` (either > 0; its noise term rides beside it).
(K2) Per mechanism, the pipelines whose norm memory at the end (M4, seed mean) is at or below
     ``1/e``, and of those the ones whose 95% interval lies below it (the one rule,
     :func:`initmem.theory.criterion.interval_state`), each beside the end memory the sweep
     pre-registered before training (the normalized-weight law with the gradient scale probed at
     init, ``DIR/predictions/``; only where it was written for the pair of alphas compared)
     (:func:`mechanism_table`).
(K3) **Short / long pairs**: pipelines identical but for their length (``epochs``, and the
     evaluation and checkpoint cadence that follows it). Per pair, the seed-paired change from the
     short run's end to the long run's end of the norm memory and of the function memory's
     test-accuracy difference (largest minus smallest alpha, pp, on the seeds fitted at both
     alphas of both runs), each with its 95% t-interval (:func:`length_pairs`). A change is said
     only where its interval excludes 0, "no change decided at this size" otherwise: the paper's
     "more epochs change nothing" is a claim of no change, which an interval that includes 0 does
     not establish.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from initmem.bridge.study.alpha_grid import preregistered_ends
from initmem.bridge.study.equivalence import paired_differences
from initmem.empirical import memory, tables
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from initmem.theory.units import ADAPTIVE

#: The mechanisms of (K1), in the order the document lists them.
MECHANISMS = ("SGD noise only", "Adam term only", "explicit decay")
#: Config fields a short / long pair may differ in (K3): the length and the cadences tied to it.
LENGTH_FIELDS = ("epochs", "eval_every", "checkpoint_every")


def mechanism(row) -> str:
    """(K1) for a config row (``optimizer``, ``l2``, ``weight_decay``)."""
    if float(row["l2"]) > 0 or float(row["weight_decay"]) > 0:
        return MECHANISMS[2]
    return MECHANISMS[1] if row["optimizer"] in ADAPTIVE else MECHANISMS[0]


def mechanism_table(
    runs: pd.DataFrame, norm_end: pd.DataFrame, predictions: pd.DataFrame | None = None
) -> pd.DataFrame:
    """(K2): ``norm_end`` (the study's, with ``state``) with ``mechanism``, ``below`` (seed mean at
    or below 1/e) and ``preregistered_end`` (the scale-invariant group's pre-registered end memory
    from ``predictions``, :func:`initmem.bridge.preregister.read_sweep_predictions`, where it was
    written for the largest alpha of the pipeline's ``runs``; else NaN), in sweep order."""
    firsts = runs.drop_duplicates("pipeline").set_index("pipeline")
    if norm_end.empty:
        return norm_end.assign(
            mechanism=pd.Series(dtype=str),
            below=pd.Series(dtype=bool),
            preregistered_end=pd.Series(dtype=float),
        )
    largest = runs.groupby("pipeline")["alpha"].max()
    ends = preregistered_ends(predictions)
    registered = {p: ends[(p, float(a))] for p, a in largest.items() if (p, float(a)) in ends}
    kinds = norm_end["pipeline"].map(lambda p: mechanism(firsts.loc[p]))
    return norm_end.assign(
        mechanism=kinds,
        below=norm_end["memory_end"] <= memory.FORGOTTEN_LEVEL,
        preregistered_end=norm_end["pipeline"].map(registered).astype(float),
    )


def mechanism_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per mechanism of :func:`mechanism_table`."""
    lines = []
    for kind in MECHANISMS:
        part = table[table["mechanism"] == kind]
        if part.empty:
            continue
        below = part[part["below"]]
        decided = below[below["state"] == "forgotten"]

        def show(r):
            said = r.get("preregistered_end", np.nan)
            return f"{r['label']} {r['memory_end']:.2f}" + (
                f" (pre-registered {said:.2f})" if np.isfinite(said) else ""
            )

        text = (
            f"{kind}: {len(below)} of {len(part)} pipelines end with the norm memory at or below "
            f"1/e, {len(decided)} of them with the 95% interval below it"
        )
        if not below.empty:
            text += ": " + ", ".join(show(r) for _, r in below.iterrows())
        rest = part[~part["below"]]
        if not rest.empty:
            text += "; above: " + ", ".join(show(r) for _, r in rest.iterrows())
        lines.append(text + ".")
    return lines


def length_pairs(runs: pd.DataFrame, norm_curves: pd.DataFrame) -> pd.DataFrame:
    """(K3), one row per pair: ``short`` / ``long`` (labels), ``epochs_short`` / ``epochs_long``,
    ``norm_short`` / ``norm_long`` (seed means at the end), ``norm_change`` with ``norm_lo`` /
    ``norm_hi`` (long minus short, seed-paired), ``diff_short`` / ``diff_long`` (pp) and
    ``diff_change`` with ``diff_lo`` / ``diff_hi``, ``n_seeds_norm`` / ``n_seeds_diff``."""
    fields = [c for c in tables.pipeline_columns() if c not in LENGTH_FIELDS and c in runs.columns]
    firsts = runs.drop_duplicates("pipeline")
    keys = firsts.apply(
        lambda r: tables.pipeline_id(
            {f: list(r[f]) if isinstance(r[f], tuple) else r[f] for f in fields}
        ),
        axis=1,
    )
    rows = []
    for _, members in firsts.groupby(keys.to_numpy(), sort=False):
        if len(members) != 2 or members["epochs"].nunique() != 2:
            continue
        short, long = members.sort_values("epochs").itertuples(index=False)
        norm = [_norm_by_seed(norm_curves, p.pipeline) for p in (short, long)]
        diff = [_diff_by_seed(runs[runs["pipeline"] == p.pipeline]) for p in (short, long)]
        rows.append(
            {
                "short": short.label,
                "long": long.label,
                "epochs_short": int(short.epochs),
                "epochs_long": int(long.epochs),
                **_change("norm", *norm),
                **_change("diff", *diff),
            }
        )
    return pd.DataFrame(rows)


def _norm_by_seed(norm_curves: pd.DataFrame, pipeline: str) -> pd.Series:
    """The layer-mean norm memory at the last evaluation, per seed."""
    if norm_curves.empty:
        return pd.Series(dtype=float)
    mine = norm_curves[
        (norm_curves["pipeline"] == pipeline) & (norm_curves["layer"] == SCALE_INVARIANT_MEAN)
    ]
    last = mine[mine["step"] == mine["step"].max()]
    return last.set_index("seed")["memory"].astype(float)


def _diff_by_seed(runs: pd.DataFrame) -> pd.Series:
    """Largest minus smallest alpha of the validation-selected test accuracy (pp), per seed used
    (E1, :func:`~initmem.bridge.study.equivalence.paired_differences`)."""
    _, _, seeds, d = paired_differences(runs)
    return pd.Series(d, index=seeds[: d.size], dtype=float)


def _change(name: str, short: pd.Series, long: pd.Series) -> dict:
    """Seed means of both ends and the seed-paired change long minus short with its t-interval."""
    both = short.index.intersection(long.index)
    change = (long[both] - short[both]).to_numpy(dtype=float)
    value, lo, hi = memory.mean_interval(change)
    return {
        f"{name}_short": float(short.mean()) if short.size else np.nan,
        f"{name}_long": float(long.mean()) if long.size else np.nan,
        f"{name}_change": value,
        f"{name}_lo": lo,
        f"{name}_hi": hi,
        f"n_seeds_{name}": int(both.size),
    }


def _said(lo: float, hi: float, more: str, less: str) -> str:
    if lo > 0:
        return more
    if hi < 0:
        return less
    return "no change decided at this size"


def length_sentences(pairs: pd.DataFrame) -> list[str]:
    """One sentence per pair of :func:`length_pairs`."""
    lines = []
    for _, r in pairs.iterrows():
        norm = _said(r["norm_lo"], r["norm_hi"], "the norm memory rose", "more epochs forgot more")
        text = (
            f"{r['short']} ({r['epochs_short']} epochs) -> {r['long']} ({r['epochs_long']}): "
            f"norm memory {r['norm_short']:.2f} -> {r['norm_long']:.2f}, change "
            f"{r['norm_change']:+.2f} [95% {r['norm_lo']:+.2f}, {r['norm_hi']:+.2f}], "
            f"{r['n_seeds_norm']} seeds: {norm}"
        )
        if r["n_seeds_diff"] >= 2:
            diff = _said(
                r["diff_lo"],
                r["diff_hi"],
                "the accuracy difference grew",
                "the accuracy difference shrank",
            )
            text += (
                f"; test-accuracy difference {r['diff_short']:+.1f} -> {r['diff_long']:+.1f} pp, "
                f"change {r['diff_change']:+.1f} [95% {r['diff_lo']:+.1f}, {r['diff_hi']:+.1f}], "
                f"{r['n_seeds_diff']} seeds: {diff}"
            )
        lines.append(text + ".")
    return lines


__all__ = [
    "LENGTH_FIELDS",
    "MECHANISMS",
    "length_pairs",
    "length_sentences",
    "mechanism",
    "mechanism_sentences",
    "mechanism_table",
]
