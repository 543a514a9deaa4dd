"""How the spread's decision narrows with seeds, and how many seeds or pipelines it would need.

Setting
-------
A pipeline p of a sweep has seeds used ``S(p)`` (M1 of :mod:`initmem.empirical.memory`, sorted by
seed id) and a spread of test accuracy across alpha (M2) with its within-seed permutation null.
The study decides per pipeline "above its null" when the permutation p-value is below
:data:`~initmem.empirical.memory.ALPHA_LEVEL`, else "cannot tell at this size".

Conventions
-----------
Spreads and differences in percentage points (``*_pp``); intervals 95% unless ``level`` says
otherwise; ``k_seeds``: the number of seeds a row is computed on (the first k of ``S(p)``).

Derivation
----------
(S1) **By seed count** (:func:`spread_by_seeds`). For k = 2, ..., |S(p)| the spread, its bootstrap
     interval, its null and p-value are recomputed on the first k seeds of ``S(p)``
     (:func:`initmem.empirical.memory.spread_memory`); the pooled row of k takes the pipelines with
     at least k seeds used, their excess ``spread - null_mean`` on those k seeds, and the mean
     excess with a Student-t interval over pipelines: "above its null on average" when the
     interval lies above 0, "below" when under it, else "cannot tell at this size".
(S1') **Unit decision by seed count** (:func:`unit_decision_by_seeds`). The pre-registered unit
     decision on the spread (:func:`initmem.bridge.unit_decision.decide`: the rank difference of
     accumulated regularization against epochs with its bootstrap interval) recomputed on the first
     k seeds of each pipeline's spread cube (its seeds used, sorted), the pipelines with at least k
     of them; the text is the uncalibrated guard's (:func:`~initmem.bridge.study.calibrate.apply_calibration`
     without a calibration: a verdict for epochs says "cannot tell"), the calibration being of the
     full design only.
(S2) **Size that would tell** (:func:`size_needed`), derived here. Assumption: the n new units
     (seeds of one pipeline, or pipelines) give values drawn independently from a normal with the
     observed mean ``m`` and standard deviation ``sd``, and the interval is the Student-t one,
     ``mean +- t_{n-1}((1 + level)/2) sd / sqrt(n)``. The smallest n >= 2 whose half-width is below
     ``|m|`` is the size at which an interval of the observed sd just excludes 0. The chance that a
     fresh sample of that size excludes 0 is the power of the two-sided t test,
     ``P(|T| > t_{n-1}) `` with ``T`` noncentral t of n - 1 degrees of freedom and noncentrality
     ``|m| sqrt(n) / sd`` (about one half; :func:`exclusion_power`).
(S3) **Power note** (:func:`power_note`). Per pipeline: the per-seed paired difference of test
     accuracy between the alphas with the highest and the lowest seed-mean accuracy (its mean is
     the spread with two alphas); the seeds it would need by (S2). Pooled: the excess over its null
     of each pipeline's spread (all its seeds used); the pipelines it would need by (S2). The best
     and worst alphas are picked on the same seeds, so ``|m|`` is biased upward and the sizes are
     optimistic (a lower bound on what a new sweep needs).
(S4) **Seeds the permutation test needs** (:func:`seeds_for_permutation`). With A alphas the
     smallest attainable p-value of the within-seed permutation null on k seeds is
     ``A! / A!^k = 1 / A!^(k-1)`` (:func:`initmem.empirical.memory.spread_null`); the decision of a
     pipeline can say "above its null" only from the smallest k where it is below
     :data:`~initmem.empirical.memory.ALPHA_LEVEL` (6 seeds for 2 alphas), whatever the effect.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from initmem.bridge import unit_decision
from initmem.bridge.study.calibrate import apply_calibration
from initmem.bridge.study.equivalence import MAX_SIZE
from initmem.empirical import memory, tables

#: Columns of :func:`spread_by_seeds` (S1).
BY_SEEDS_COLUMNS = [
    "k_seeds",
    "pipeline",
    "label",
    "n_pipelines",
    "estimate_pp",
    "lo_pp",
    "hi_pp",
    "null_mean_pp",
    "p_value",
    "p_min",
    "decision",
]
#: The label of the pooled rows of :func:`spread_by_seeds` and :func:`power_note`.
POOLED = "pooled"


def first_seeds(runs: pd.DataFrame, k: int) -> pd.DataFrame:
    """One pipeline's runs on the first ``k`` of its seeds used (M1; sorted by seed id)."""
    if k < 2:
        raise ValueError(f"k must be an integer >= 2 (got {k})")
    seeds = tables.interpolating_seeds(runs)[:k]
    return runs[runs["seed"].isin(seeds)]


def pipeline_decision(row: dict) -> str:
    """The study's spread decision of one pipeline (M2): above its null when p < ALPHA_LEVEL."""
    p, p_min = row.get("p_value", np.nan), row.get("p_min", np.nan)
    if not np.isfinite(p):
        return "cannot tell (fewer than 2 seeds used)"
    if p < memory.ALPHA_LEVEL:
        return f"above its null (p = {p:.3f} < {memory.ALPHA_LEVEL})"
    if np.isfinite(p_min) and p_min >= memory.ALPHA_LEVEL:
        return f"cannot tell at this size (p = {p:.3f}; smallest attainable p {p_min:.3f})"
    return f"cannot tell at this size (p = {p:.3f})"


def pooled_decision(mean: float, lo: float, hi: float, n: int) -> str:
    """The pooled excess decision (S1): its t-interval over ``n`` pipelines against 0."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"cannot tell ({n} pipeline{'s' if n != 1 else ''}: no interval)"
    if lo > 0:
        return f"spreads above their null on average over {n} pipelines"
    if hi < 0:
        return f"spreads below their null on average over {n} pipelines"
    return f"cannot tell at this size ({n} pipelines; the interval includes 0)"


def spread_by_seeds(runs: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The spread decision at each seed count, per pipeline and pooled (S1; :data:`BY_SEEDS_COLUMNS`).

    ``runs``: finished runs with ``pipeline`` and ``label`` (the study's); pipelines with fewer than
    2 alphas are left out. Pipeline rows: ``estimate_pp`` the spread, ``lo_pp`` / ``hi_pp`` its
    bootstrap interval, ``null_mean_pp`` and ``p_value`` its permutation null; pooled rows
    (``pipeline`` = :data:`POOLED`): the mean excess over the null with its t-interval.
    """
    rows = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        if group["alpha"].nunique() < 2:
            continue
        for k in range(2, tables.interpolating_seeds(group).size + 1):
            m = memory.spread_memory(first_seeds(group, k), n_boot=n_boot, seed=seed)
            rows.append(
                {
                    "k_seeds": k,
                    "pipeline": pipeline,
                    "label": group["label"].iloc[0],
                    "n_pipelines": 1,
                    "estimate_pp": m["spread_pp"],
                    "lo_pp": m["spread_lo"],
                    "hi_pp": m["spread_hi"],
                    "null_mean_pp": m["null_mean_pp"],
                    "p_value": m["p_value"],
                    "p_min": m["p_min"],
                    "decision": pipeline_decision(m),
                }
            )
    frame = pd.DataFrame(rows, columns=BY_SEEDS_COLUMNS)
    pooled = []
    for k, at_k in frame.groupby("k_seeds", sort=True):
        excess = (at_k["estimate_pp"] - at_k["null_mean_pp"]).to_numpy(dtype=float)
        mean, lo, hi = memory.mean_interval(excess)
        pooled.append(
            {
                "k_seeds": k,
                "pipeline": POOLED,
                "label": POOLED,
                "n_pipelines": int(np.isfinite(excess).sum()),
                "estimate_pp": mean,
                "lo_pp": lo,
                "hi_pp": hi,
                "null_mean_pp": 0.0,
                "p_value": np.nan,
                "p_min": np.nan,
                "decision": pooled_decision(mean, lo, hi, int(np.isfinite(excess).sum())),
            }
        )
    if not pooled:
        return frame
    out = pd.concat([frame, pd.DataFrame(pooled, columns=BY_SEEDS_COLUMNS)], ignore_index=True)
    return out.sort_values(["k_seeds"], kind="stable").reset_index(drop=True)


def unit_decision_by_seeds(
    cubes: dict, units=None, *, memory_name: str = "spread", n_boot: int = 200, seed: int = 0
) -> pd.DataFrame:
    """The unit decision on ``memory_name`` at each seed count k >= 2 (S1').

    ``cubes``: the bridge's :func:`~initmem.bridge.unit_decision.memory_cubes`; ``units``: the units
    compared (the bridge's). Columns: ``k_seeds``, ``n_pipelines``, ``rank_diff``, ``rank_lo``,
    ``rank_hi``, ``winner``, ``text``; empty when the memory has no cubes or ``n_boot`` is 0.
    """
    columns = ["k_seeds", "n_pipelines", "rank_diff", "rank_lo", "rank_hi", "winner", "text"]
    members = cubes.get(memory_name, [])
    if not members or n_boot < 1:
        return pd.DataFrame(columns=columns)
    rows = []
    for k in range(2, max(c.values.shape[0] for c in members) + 1):
        sliced = [
            unit_decision.PipelineCube(c.pipeline, c.values[:k], c.units, c.scale)
            for c in members
            if c.values.shape[0] >= k
        ]
        _, decision = unit_decision.decide({memory_name: sliced}, units, n_boot=n_boot, seed=seed)
        if decision.empty:
            continue
        row = apply_calibration(decision, None).iloc[0]
        rows.append(
            {
                "k_seeds": k,
                "n_pipelines": len(sliced),
                "rank_diff": row.get("rank_diff", np.nan),
                "rank_lo": row.get("rank_lo", np.nan),
                "rank_hi": row.get("rank_hi", np.nan),
                "winner": row["winner"],
                "text": row["text"],
            }
        )
    return pd.DataFrame(rows, columns=columns)


def exclusion_power(mean: float, sd: float, n: int, *, level: float = 0.95) -> float:
    """Chance that the t-interval of n normal draws (mean, sd) excludes 0 (S2, noncentral t)."""
    from scipy import stats  # deferred: scipy loads only when a size is computed

    if n < 2 or not (np.isfinite(mean) and np.isfinite(sd)) or sd <= 0:
        return np.nan
    crit = float(stats.t.ppf(0.5 + level / 2, n - 1))
    ncp = abs(mean) * math.sqrt(n) / sd
    return float(stats.nct.sf(crit, n - 1, ncp) + stats.nct.cdf(-crit, n - 1, ncp))


def size_needed(mean: float, sd: float, *, level: float = 0.95) -> float:
    """Smallest n >= 2 with ``t_{n-1}((1 + level)/2) sd / sqrt(n) < |mean|`` (S2); NaN when none up
    to :data:`MAX_SIZE` or when mean or sd is undefined, 2 when sd is 0 and mean is not."""
    from scipy import stats  # deferred: scipy loads only when a size is computed

    if not (np.isfinite(mean) and np.isfinite(sd)) or mean == 0:
        return np.nan
    if sd == 0:
        return 2.0
    n = np.arange(2, MAX_SIZE + 1)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n)
    below = np.flatnonzero(half < abs(mean))
    return float(n[below[0]]) if below.size else np.nan


def seeds_for_permutation(n_alphas: int, *, level: float = memory.ALPHA_LEVEL) -> int:
    """Smallest k with ``1 / n_alphas!^(k-1) < level`` (S4): the fewest seeds at which the
    permutation p-value of the spread can fall below ``level``."""
    if n_alphas < 2:
        raise ValueError(f"n_alphas must be an integer >= 2 (got {n_alphas})")
    if not 0 < level < 1:
        raise ValueError(f"level must satisfy 0 < level < 1 (got {level})")
    orders = math.factorial(n_alphas)
    return 1 + math.floor(math.log(1 / level) / math.log(orders)) + 1


def _power_row(name: str, label: str, unit: str, values: np.ndarray, level: float) -> dict:
    """One row of :func:`power_note`: mean, t-interval, sd and the size that would tell (S2)."""
    values = values[np.isfinite(values)]
    mean, lo, hi = memory.mean_interval(values, level=level)
    sd = float(values.std(ddof=1)) if values.size >= 2 else np.nan
    needed = size_needed(mean, sd, level=level)
    return {
        "pipeline": name,
        "label": label,
        "unit": unit,
        "n_now": int(values.size),
        "mean_pp": mean,
        "lo_pp": lo,
        "hi_pp": hi,
        "sd_pp": sd,
        "excludes_0": bool(np.isfinite(lo) and (lo > 0 or hi < 0)),
        "n_needed": needed,
        "power_at_needed": exclusion_power(mean, sd, int(needed), level=level)
        if np.isfinite(needed)
        else np.nan,
    }


def power_note(runs: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Per pipeline the seeds, pooled the pipelines, the observed effect would need (S3).

    Columns: ``pipeline``, ``label``, ``unit`` (``seeds`` or ``pipelines``), ``n_now``, ``mean_pp``
    with its t-interval ``lo_pp`` / ``hi_pp``, ``sd_pp`` (seed-to-seed or pipeline-to-pipeline),
    ``excludes_0``, ``n_needed`` (:func:`size_needed`) and ``power_at_needed``
    (:func:`exclusion_power`); per pipeline ``seeds_for_permutation`` (:func:`seeds_for_permutation`).
    """
    rows, excess = [], []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        if group["alpha"].nunique() < 2 or tables.interpolating_seeds(group).size < 2:
            continue
        used = group[group["seed"].isin(tables.interpolating_seeds(group))]
        acc = used.pivot_table(index="seed", columns="alpha", values="test_acc") * 100.0
        means = acc.mean()
        paired = (acc[means.idxmax()] - acc[means.idxmin()]).to_numpy(dtype=float)
        label = group["label"].iloc[0]
        rows.append(
            _power_row(pipeline, label, "seeds", paired, level)
            | {"seeds_for_permutation": seeds_for_permutation(acc.shape[1])}
        )
        null = memory.spread_null(acc.to_numpy())
        excess.append(null["excess"])
    if len(excess) >= 2:
        rows.append(_power_row(POOLED, POOLED, "pipelines", np.asarray(excess, float), level))
    columns = ["pipeline", "label", "unit", "n_now", "mean_pp", "lo_pp", "hi_pp", "sd_pp"]
    columns += ["excludes_0", "n_needed", "power_at_needed", "seeds_for_permutation"]
    return pd.DataFrame(rows, columns=columns)


def power_sentences(power: pd.DataFrame) -> list[str]:
    """One sentence per row of :func:`power_note`, every number from it."""
    lines = []
    for _, r in power.iterrows():
        what = (
            "the mean excess of the spreads over their null"
            if r["unit"] == "pipelines"
            else "the paired difference between its best and worst alpha"
        )
        head = (
            f"{r['label']}: {what} is {r['mean_pp']:+.2f} pp "
            f"[95% {r['lo_pp']:+.2f}, {r['hi_pp']:+.2f}] over {r['n_now']} {r['unit']} "
            f"(sd {r['sd_pp']:.2f} pp)"
        )
        if r["unit"] == "seeds" and r["n_now"] < r["seeds_for_permutation"]:
            head += (
                f"; its permutation test cannot reach p < {memory.ALPHA_LEVEL} before "
                f"{int(r['seeds_for_permutation'])} seeds"
            )
        if r["excludes_0"]:
            lines.append(f"{head}: the interval already excludes 0.")
        elif np.isfinite(r["n_needed"]):
            lines.append(
                f"{head}: cannot tell at this size; with this mean and sd the interval would "
                f"exclude 0 at {int(r['n_needed'])} {r['unit']} (a new sweep of that size would "
                f"exclude it with probability {r['power_at_needed']:.2f})."
            )
        else:
            lines.append(
                f"{head}: cannot tell at this size, and no size up to {MAX_SIZE} {r['unit']} "
                "would exclude 0 with this mean and sd."
            )
    return lines


__all__ = [
    "BY_SEEDS_COLUMNS",
    "MAX_SIZE",
    "POOLED",
    "exclusion_power",
    "first_seeds",
    "pipeline_decision",
    "pooled_decision",
    "power_note",
    "power_sentences",
    "seeds_for_permutation",
    "size_needed",
    "spread_by_seeds",
    "unit_decision_by_seeds",
]
