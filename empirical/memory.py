"""Initialization memory of a sweep: how much of alpha is left at the end, each measure with its noise floor.

Setting
-------
A sweep trains, for each *pipeline* p (every hashed config field except ``alpha`` and ``seed``;
:func:`initmem.empirical.tables.pipeline_id`), runs at init scales ``alpha_1 < ... < alpha_A`` and
seeds ``s``. A seed fixes the data order and the init draw up to its scale, so under "alpha changes
nothing" the alpha labels of one seed's runs are exchangeable. Each run keeps its validation-selected
checkpoint: its test accuracy ``acc(alpha, s)`` (a fraction in the run folder) and its predicted
classes ``pred(alpha, s)`` over the test set.

Conventions
-----------
Accuracies in percent here (``*_pct``), spreads in percentage points (``*_pp``), disagreements as
fractions in [0, 1]. Intervals are 95% unless a ``confidence`` / ``level`` says otherwise; a memory
whose p-value against its null is below :data:`ALPHA_LEVEL` counts as above its noise floor. Every
function here states the definition it implements; ``initmem report`` and ``initmem study`` print
these numbers, so the two documents agree.

Definitions
-----------
(M1) **Seeds used**. ``S(p)``: the seeds that have a run at every alpha of p and whose runs all
     interpolate (final train accuracy >= :data:`~initmem.empirical.tables.INTERPOLATION_THRESHOLD`;
     fitting the training set is not forgetting the init). ``n_seeds_used = |S(p)|``; every memory
     below is measured on ``S(p)`` and is undefined (NaN) when ``|S(p)| < 2`` (no noise floor).
     :func:`initmem.empirical.tables.interpolating_seeds`.
(M2) **Spread**. ``spread(p) = max_a mean_{s in S} acc(a, s) - min_a mean_{s in S} acc(a, s)`` (pp),
     with a percentile bootstrap interval (seeds resampled within each alpha,
     :func:`bootstrap_spread`) and its noise floor: the spread under alpha labels permuted within
     each seed (null mean, null quantile, p-value and the smallest attainable p-value,
     :func:`spread_null`). :func:`spread_memory`.
(M3) **Disagreement excess**. ``alpha_dis``: mean over seeds in S and alpha pairs of the fraction of
     test points where ``pred(a, s) != pred(b, s)``; ``seed_dis``: mean over alphas and seed pairs of
     the same between two seeds at one alpha (the floor); ``excess = alpha_dis - seed_dis`` with a
     bootstrap interval over seeds, NaN below 3 seeds (:func:`disagreement_excess`).
     :func:`disagreement_memory`.
(M4) **Norm memory**. For a layer scaled by alpha and a seed,
     ``m(t) = ln(|w|_hi(t) / |w|_lo(t)) / ln(|w|_hi(0) / |w|_lo(0))`` between the runs of the largest
     and the smallest alpha: 1 while the alphas' effective learning rates ``lr / |w|^2`` are as far
     apart as at init, 0 when equal (:func:`initmem.empirical.curves.norm_memory_curves`; layer mean
     over the scaled BN-followed convs). *At the end*: the last evaluation's value, mean over seeds
     with a Student-t interval (:func:`norm_memory_end`); forgotten when the interval lies below
     :data:`FORGOTTEN_LEVEL` = 1/e (the memory shrank by e, the definition of a forgetting time),
     kept when above, else "cannot tell at this size" (:func:`norm_sentences`).

The same memories over training time are :mod:`initmem.empirical.curves`; how fast they go and why
is :mod:`initmem.bridge`'s. Example::

    runs = load_sweep("runs/demo")
    spread_table(runs)[["label", "n_seeds_used", "spread_pp", "ci_low_pp", "ci_high_pp", "p_value"]]
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from initmem.theory.criterion import FORGETTING, interval_state

from . import tables
from .curves import SCALE_INVARIANT_MEAN

#: A memory whose permutation p-value is below this counts as above its noise floor (M2).
ALPHA_LEVEL = 0.05
#: Seeds a bootstrap interval over seeds needs (M3): with 2, a resample that keeps two distinct seeds
#: is the sample itself, and the interval has zero width.
MIN_SEEDS_INTERVAL = 3
#: Norm memory below this at the end of the run: the alphas' effective learning rates converged
#: (the memory shrank by e, the definition of a forgetting time; M4).
FORGOTTEN_LEVEL = FORGETTING.level
#: Keys of :func:`spread_memory` and :func:`disagreement_memory` (one pipeline's M1 to M3).
FUNCTION_COLUMNS = [
    "alphas",
    "n_seeds_used",
    "spread_pp",
    "spread_lo",
    "spread_hi",
    "null_mean_pp",
    "null_hi_pp",
    "p_value",
    "p_min",
    "n_permutations",
    "best_alpha",
    "acc_by_alpha",
    "alpha_dis",
    "seed_dis",
    "excess",
    "excess_lo",
    "excess_hi",
]


# ====================================================================== noise floors
def bootstrap_spread(
    accuracies: list[np.ndarray],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the spread ``max_a mean(acc_a) - min_a mean(acc_a)`` (M2).

    ``accuracies`` holds one array of per-seed accuracies per alpha. Each replicate resamples the seeds
    of every alpha with replacement (alphas independent), recomputes the seed means and their range.
    Returns (low, high) in the units of the input; NaN when any alpha has fewer than two seeds (one
    seed carries no resampling information). Note that the range of noisy means is biased upward: with
    no true effect its expectation is about ``d_k * std / sqrt(n_seeds)`` (``d_k`` the expected range of
    k standard normals), which the interval does not remove (the null of :func:`spread_null` does).

    Small-sample expansion (derived here): the percentile bootstrap of a mean of n values has
    normal tails where the mean of n has Student-t tails of n - 1 degrees of freedom. Both ends are
    moved away from the observed spread ``s`` by ``c = t_{n-1}((1 + confidence)/2) /
    z((1 + confidence)/2)`` (n the fewest seeds of an alpha), the low end kept >= 0:
    ``[max(0, s - c (s - low)), s + c (high - s)]``; ``c`` is 6.5 for 2 seeds, 1.42 for 5, 1.003 for
    400. On synthetic sweeps with a known spread (:mod:`initmem.bridge.study.calibrate`) the plain
    percentile interval covered it in about 80% of replicas with 2 seeds; the expanded one in 97-99.7%
    with 2 or 5 seeds (``docs/unit-of-forgetting-v2.md``).
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
    observed = float(np.ptp([np.mean(a) for a in accuracies]))
    c = _small_sample_factor(min(len(a) for a in accuracies), confidence)
    return (max(0.0, observed - c * (observed - low)), observed + c * (high - observed))


@functools.lru_cache(maxsize=256)
def _small_sample_factor(n: int, confidence: float) -> float:
    """``t_{n-1}((1 + confidence)/2) / z((1 + confidence)/2)`` (see :func:`bootstrap_spread`)."""
    # deferred: scipy loads only when an interval is computed
    from scipy import stats

    q = 0.5 + confidence / 2
    return float(stats.t.ppf(q, n - 1) / stats.norm.ppf(q))


def spread_null(
    accuracies, *, max_permutations: int = 4096, level: float = 0.95, seed: int = 0
) -> dict:
    """Spread of seed-mean accuracy across alphas, against its within-seed permutation null (M2).

    ``accuracies``: (n_seeds, n_alphas), one row per seed with every alpha (any unit; the spread is
    in that unit). Permuting the alpha labels within each seed draws from the null distribution (the
    labels are exchangeable under "alpha changes nothing"); the p-value is the fraction of
    permutations (all when at most ``max_permutations``, else a random sample plus the identity) whose
    spread is at least the observed one. Returns ``spread``, ``null_mean`` (the noise floor: the mean
    spread under permuted labels), ``null_hi`` (its ``level`` quantile), ``excess``
    (``spread - null_mean``), ``p_value``, ``p_min`` (the smallest attainable p-value: relabelling
    every seed the same way leaves the spread unchanged, so it is ``1 / n_alphas!^(n_seeds - 1)``:
    1/16 for 2 alphas and 5 seeds), ``n_permutations``, ``exact`` (all permutations enumerated) and
    ``n_seeds``. NaN for fewer than 2 seeds or 2 alphas. Derived here.
    """
    acc = np.asarray(accuracies, dtype=np.float64)
    out = dict.fromkeys(["spread", "null_mean", "null_hi", "excess", "p_value", "p_min"], np.nan)
    out.update(n_permutations=0, exact=False, n_seeds=int(acc.shape[0]) if acc.ndim == 2 else 0)
    if acc.ndim != 2 or acc.shape[0] < 2 or acc.shape[1] < 2 or not np.isfinite(acc).all():
        return out
    n_seeds, n_alphas = acc.shape
    observed = float(np.ptp(acc.mean(axis=0)))
    per_seed = list(itertools.permutations(range(n_alphas)))
    total = len(per_seed) ** n_seeds
    if total <= max_permutations:
        orders = np.array(list(itertools.product(range(len(per_seed)), repeat=n_seeds)))
        exact = True
    else:
        rng = np.random.default_rng(seed)
        orders = rng.integers(0, len(per_seed), size=(max_permutations - 1, n_seeds))
        orders = np.vstack([np.zeros((1, n_seeds), dtype=int), orders])  # the identity
        exact = False
    perms = np.asarray(per_seed)[orders]  # (n_perm, n_seeds, n_alphas)
    shuffled = np.take_along_axis(acc[None, :, :], perms, axis=2)
    null = np.ptp(shuffled.mean(axis=1), axis=1)
    p = float(np.mean(null >= observed - 1e-12))
    # relabelling every seed at once leaves the spread unchanged: n_alphas! permutations tie
    p_min = len(per_seed) / total if exact else 1.0 / len(null)
    out.update(
        p_min=float(p_min),
        spread=observed,
        null_mean=float(null.mean()),
        null_hi=float(np.quantile(null, level)),
        excess=observed - float(null.mean()),
        p_value=p,
        n_permutations=int(len(null)),
        exact=exact,
    )
    return out


def disagreement_excess(
    predictions: dict, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict:
    """Disagreement between alphas minus disagreement between seeds, with a bootstrap interval (M3).

    ``predictions``: ``{alpha: {seed: predicted classes (1-d int array over the test set)}}``; only
    seeds present at every alpha are used. ``alpha_dis``: mean over seeds and alpha pairs of the
    fraction of test points where two alphas of one seed disagree; ``seed_dis``: mean over alphas and
    seed pairs of the same between two seeds of one alpha; ``excess = alpha_dis - seed_dis``.
    The interval resamples seeds with replacement (a pair of a seed with its own copy is left out of
    ``seed_dis``). NaN with fewer than 2 alphas or 2 seeds; the interval is NaN with fewer than
    :data:`MIN_SEEDS_INTERVAL` (3) seeds: with 2, every resample that keeps a pair of distinct seeds is
    the sample itself, so the bootstrap would give a zero-width interval. Derived here.
    """
    alphas = sorted(predictions)
    seeds = sorted(set.intersection(*(set(predictions[a]) for a in alphas))) if alphas else []
    out = dict.fromkeys(["alpha_dis", "seed_dis", "excess", "excess_lo", "excess_hi"], np.nan)
    out["n_seeds"] = len(seeds)
    if len(alphas) < 2 or len(seeds) < 2:
        return out
    stack = np.stack([[np.asarray(predictions[a][s]) for s in seeds] for a in alphas])
    n_alpha, n_seed = stack.shape[:2]
    # per-seed alpha disagreement (n_seed,), and the seed-pair matrix per alpha (n_alpha, S, S)
    alpha_pairs = list(itertools.combinations(range(n_alpha), 2))
    per_seed = np.mean(
        [np.mean(stack[i] != stack[j], axis=1) for i, j in alpha_pairs], axis=0
    )  # (n_seed,)
    pair = np.mean(stack[:, :, None, :] != stack[:, None, :, :], axis=3)  # (A, S, S)
    pair = pair.mean(axis=0)  # mean over alphas: (S, S)
    upper = np.triu_indices(n_seed, 1)

    def statistic(index: np.ndarray) -> float:
        a = per_seed[index].mean()
        i, j = np.meshgrid(index, index, indexing="ij")
        distinct = i != j
        mask = np.triu(np.ones((len(index), len(index)), dtype=bool), 1) & distinct
        if not mask.any():
            return np.nan
        return float(a - pair[i[mask], j[mask]].mean())

    alpha_dis = float(per_seed.mean())
    seed_dis = float(pair[upper].mean())
    out.update(alpha_dis=alpha_dis, seed_dis=seed_dis, excess=alpha_dis - seed_dis)
    if n_seed < MIN_SEEDS_INTERVAL:
        return out
    rng = np.random.default_rng(seed)
    boots = np.array([statistic(rng.integers(0, n_seed, n_seed)) for _ in range(n_boot)])
    boots = boots[np.isfinite(boots)]
    tail = (1 - level) / 2
    lo, hi = np.quantile(boots, [tail, 1 - tail]) if boots.size else (np.nan, np.nan)
    out.update(excess_lo=float(lo), excess_hi=float(hi))
    return out


def mean_interval(values, *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` with a Student-t interval (NaN bounds for fewer than 2 finite values; M4)."""
    from scipy import stats  # deferred: scipy loads only when an interval is computed

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (np.nan, np.nan, np.nan)
    mean = float(v.mean())
    if v.size < 2:
        return (mean, np.nan, np.nan)
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return (mean, mean - half, mean + half)


# ====================================================================== one pipeline
def accuracy_by_seed(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.DataFrame | None]:
    """What every function memory of one pipeline is computed on: its alphas (sorted), its seeds
    used (M1, :func:`~initmem.empirical.tables.interpolating_seeds`) and the validation-selected
    test accuracy in pp, one row per seed used and one column per alpha; the table is None with
    fewer than 2 alphas or 2 seeds used."""
    alphas = np.sort(runs["alpha"].unique())
    seeds = tables.interpolating_seeds(runs)
    if alphas.size < 2 or seeds.size < 2:
        return alphas, seeds, None
    used = runs[runs["seed"].isin(seeds)]
    return alphas, seeds, used.pivot_table(index="seed", columns="alpha", values="test_acc") * 100.0


def spread_memory(
    runs: pd.DataFrame, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0
) -> dict:
    """One pipeline's spread (M2) on its seeds used (M1), with its interval and its null.

    ``runs``: the finished runs of one pipeline (any alphas). Returns ``alphas`` (joined),
    ``n_seeds_used``, ``spread_pp``, ``spread_lo`` / ``spread_hi`` (:func:`bootstrap_spread` at
    ``confidence``), ``null_mean_pp``, ``null_hi_pp``, ``p_value``, ``p_min``, ``n_permutations``
    (:func:`spread_null`), ``best_alpha`` / ``worst_alpha``, ``seed_std_pp`` (sample std over the
    seeds used, mean over alphas) and ``acc_by_alpha`` (seed means, text); only ``alphas``,
    ``n_seeds_used`` and a NaN ``spread_pp`` / ``p_value`` with fewer than 2 alphas or 2 seeds used.
    """
    alphas, seeds, table = accuracy_by_seed(runs)
    row: dict[str, Any] = {
        "alphas": ",".join(f"{a:g}" for a in alphas),
        "n_seeds_used": int(seeds.size),
    }
    if table is None:
        return row | {"spread_pp": np.nan, "p_value": np.nan}
    null = spread_null(table.to_numpy())
    low, high = bootstrap_spread(
        [table[a].to_numpy() for a in table.columns],
        n_boot=n_boot,
        confidence=confidence,
        seed=seed,
    )
    means = table.mean()
    return row | {
        "spread_pp": null["spread"],
        "spread_lo": low,
        "spread_hi": high,
        "null_mean_pp": null["null_mean"],
        "null_hi_pp": null["null_hi"],
        "p_value": null["p_value"],
        "p_min": null["p_min"],
        "n_permutations": null["n_permutations"],
        "best_alpha": float(means.idxmax()),
        "worst_alpha": float(means.idxmin()),
        "seed_std_pp": float(table.std(ddof=1).mean()),
        "acc_by_alpha": ", ".join(f"{a:g}: {means[a]:.1f}" for a in table.columns),
    }


def disagreement_memory(runs: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """One pipeline's disagreement excess (M3) on its seeds used (M1): ``alpha_dis``, ``seed_dis``,
    ``excess``, ``excess_lo``, ``excess_hi`` (:func:`disagreement_excess`); empty when no run of
    those seeds saved predictions."""
    seeds = tables.interpolating_seeds(runs)
    saved = tables.load_predictions(runs[runs["seed"].isin(seeds)])
    if saved.empty:
        return {}
    predictions: dict = {}
    for alpha, run_seed, pred in zip(
        saved["alpha"], saved["seed"], saved["best_test_pred"], strict=True
    ):
        predictions.setdefault(alpha, {})[run_seed] = pred
    dis = disagreement_excess(predictions, n_boot=n_boot, seed=seed)
    return {k: dis[k] for k in ("alpha_dis", "seed_dis", "excess", "excess_lo", "excess_hi")}


def function_memory(runs: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per pipeline with two or more alphas: M1 to M3 (:data:`FUNCTION_COLUMNS`).

    ``runs``: finished runs (:func:`~initmem.empirical.tables.finished_runs`) with ``pipeline`` and
    ``label``. The spread's interval takes 2000 resamples; ``n_boot`` is the disagreement's (the
    study's table).
    """
    rows = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        if group["alpha"].nunique() < 2:
            continue
        row = {"pipeline": pipeline, "label": group["label"].iloc[0]} | spread_memory(
            group, seed=seed
        )
        if "spread_lo" in row:  # two or more seeds used
            row |= disagreement_memory(group, n_boot=n_boot, seed=seed)
        rows.append(row)
    return pd.DataFrame(rows, columns=["pipeline", "label", *FUNCTION_COLUMNS])


# ====================================================================== norm memory at the end
def norm_memory_end(
    norm_curves: pd.DataFrame, runs: pd.DataFrame, *, layer: str = SCALE_INVARIANT_MEAN
) -> pd.DataFrame:
    """Per pipeline: the norm memory (M4) of ``layer`` at the last evaluation (by default the layer
    mean of the scaled BN-followed convs; the joint ``residual_stream`` entry of a pre-LN model is
    another), mean over seeds with a 95% t-interval (``memory_end``, ``lo``, ``hi``, ``n_seeds``).

    ``norm_curves``: :func:`initmem.empirical.curves.norm_memory_curves`; ``runs`` give the labels
    and the sweep order.
    """
    if norm_curves.empty:
        return pd.DataFrame(columns=["pipeline", "label", "memory_end", "lo", "hi", "n_seeds"])
    mean = norm_curves[norm_curves["layer"] == layer]
    labels = runs.drop_duplicates("pipeline").set_index("pipeline")["label"]
    rows = []
    order = list(dict.fromkeys(runs["pipeline"]))  # sweep order
    for pipeline in [p for p in order if p in set(mean["pipeline"])]:
        group = mean[mean["pipeline"] == pipeline]
        if group["step"].max() == 0:  # no step trained (all diverged at once): no end to tell of
            continue
        last = group[group["step"] == group["step"].max()]
        value, lo, hi = mean_interval(last["memory"])
        rows.append(
            {
                "pipeline": pipeline,
                "label": labels.get(pipeline, pipeline),
                "memory_end": value,
                "lo": lo,
                "hi": hi,
                "n_seeds": int(last["memory"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)


#: What each state of :func:`initmem.theory.criterion.interval_state` says of the norm memory.
NORM_STATE_SENTENCES = {
    "forgotten": "the effective learning rates of the alphas converged",
    "kept": "the effective learning rates of the alphas stayed apart",
    "reversed": "the effective learning rates of the alphas crossed: their order is reversed (not "
    "forgotten)",
    "overshoot": "the effective learning rates of the alphas moved further apart than at init "
    "(overshoot: the memory is above 1, not forgotten)",
    "cannot tell": "cannot tell at this size whether the effective learning rates converged",
    "undefined": "the norm memory is undefined (NaN)",
}


def norm_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per pipeline of :func:`norm_memory_end` (M4): converged, stayed apart, reversed,
    overshoot or cannot tell, by the one rule (:func:`initmem.theory.criterion.interval_state`: the
    interval against :data:`FORGOTTEN_LEVEL`, 0 and 1). With a ``law_memory_end`` column (the law's
    predicted memory at the end), a memory outside [0, 1] is said explained where the law's lies
    on the same side, else unexplained."""
    lines = []
    for _, row in table.iterrows():
        numbers = f"norm memory at the end {row['memory_end']:.2f}"
        if np.isfinite(row["lo"]):
            numbers += f" [95% {row['lo']:.2f}, {row['hi']:.2f}], {row['n_seeds']} seeds"
        state = interval_state(row["memory_end"], row["lo"], row["hi"])
        why = _outside_explained(state, row.get("law_memory_end", np.nan))
        lines.append(
            f"{row['label']}: {NORM_STATE_SENTENCES[state]} ({numbers}; converged means "
            f"{FORGETTING.name}){why}."
        )
    return lines


def _outside_explained(state: str, law_end) -> str:
    """For a memory outside [0, 1] (``reversed`` or ``overshoot``): whether the law's predicted
    memory at the end (``law_end``, NaN: none) lies on the same side, as a clause."""
    if state not in ("reversed", "overshoot"):
        return ""
    law_end = float(law_end) if law_end is not None else np.nan
    if not np.isfinite(law_end):
        return "; unexplained: no law prediction for this pipeline"
    same = law_end < 0 if state == "reversed" else law_end > 1
    if same:
        return f"; the law, fed with this pipeline's logged gradients, predicts {law_end:.2f}: explained"
    return (
        f"; unexplained: the law, fed with this pipeline's logged gradients, predicts {law_end:.2f}"
    )


# ====================================================================== a sweep
def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Seed statistics per (pipeline, alpha) over every finished run (descriptive, not a memory).

    Columns: ``pipeline``, ``label``, ``variant``, ``alpha``, ``n_seeds``, ``test_acc_pct`` (seed mean),
    ``test_acc_std_pct`` (sample std over seeds, NaN for one seed), ``best_val_acc_pct``,
    ``min_train_acc_pct`` (lowest final train accuracy over seeds), ``n_diverged``.
    """
    done = tables.finished_runs(runs)
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


def disagreement_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairwise disagreement of validation-selected predictors per alpha pair (M3's ``alpha_dis``
    broken down by pair), per pipeline, over every finished run (descriptive).

    For every pair of alphas (``alpha_a`` < ``alpha_b``): the fraction of test points whose predicted
    classes differ between the runs with the same seed, averaged over the seeds both alphas have
    (``n_seeds``). Columns: ``pipeline``, ``label``, ``alpha_a``, ``alpha_b``, ``n_seeds``,
    ``disagreement`` (fraction).
    """
    predictions = tables.load_predictions(tables.finished_runs(runs))
    rows = []
    for pipeline, group in predictions.groupby("pipeline", sort=False):
        by_alpha = {
            a: dict(zip(g["seed"], g["best_test_pred"], strict=True))
            for a, g in group.groupby("alpha")
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
    """Per pipeline: the disagreement between seeds at one alpha (M3's ``seed_dis``) over every
    finished run (mean over alphas and seed pairs; descriptive). NaN for one seed per alpha."""
    predictions = tables.load_predictions(tables.finished_runs(runs))
    values = {}
    for pipeline, group in predictions.groupby("pipeline", sort=False):
        pairs = [
            np.mean(p != q)
            for _, g in group.groupby("alpha")
            for p, q in itertools.combinations(list(g["best_test_pred"]), 2)
        ]
        values[pipeline] = float(np.mean(pairs)) if pairs else np.nan
    return pd.Series(values, name="seed_disagreement", dtype=float)


#: Columns of :func:`spread_table`, in order.
SPREAD_COLUMNS = [
    "pipeline",
    "label",
    "variant",
    "n_alphas",
    "n_seeds",
    "n_seeds_used",
    "spread_pp",
    "ci_low_pp",
    "ci_high_pp",
    "null_mean_pp",
    "p_value",
    "p_min",
    "seed_std_pp",
    "best_alpha",
    "worst_alpha",
    "interpolated",
    "min_train_acc_pct",
    "disagreement",
    "seed_disagreement",
    "excess",
    "excess_lo",
    "excess_hi",
    "n_runs",
    "n_diverged",
    "n_unfinished",
]


def spread_table(
    runs: pd.DataFrame,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    with_disagreement: bool = True,
) -> pd.DataFrame:
    """The memory summary, one row per pipeline (in sweep order): M1 to M3 and the run counts.

    Columns (:data:`SPREAD_COLUMNS`): ``pipeline``, ``label``, ``variant``, ``n_alphas``, ``n_seeds``
    (fewest finished seeds at any alpha), ``n_seeds_used`` (M1), ``spread_pp`` (M2, NaN with fewer
    than 2 seeds used), ``ci_low_pp`` / ``ci_high_pp`` (its bootstrap interval at ``confidence``),
    ``null_mean_pp``, ``p_value``, ``p_min`` (its permutation null), ``seed_std_pp``, ``best_alpha`` /
    ``worst_alpha`` (of :func:`spread_memory`), ``interpolated`` (every run of the pipeline finished
    and interpolates), ``min_train_acc_pct``, ``disagreement`` / ``seed_disagreement`` / ``excess``
    [``excess_lo``, ``excess_hi``] (M3, ``n_boot`` resamples; with ``with_disagreement``),
    ``n_runs`` (finished), ``n_diverged``, ``n_unfinished`` (pending, running or failed).
    """
    if runs.empty:
        return pd.DataFrame()
    done = tables.finished_runs(runs)
    rows = []
    for pipeline in runs["pipeline"].unique():
        everything = runs[runs["pipeline"] == pipeline]
        group = done[done["pipeline"] == pipeline]
        row: dict[str, Any] = {
            "pipeline": pipeline,
            "label": everything["label"].iloc[0],
            "variant": everything["variant"].iloc[0],
            "n_alphas": int(group["alpha"].nunique()),
            "n_seeds": int(group.groupby("alpha")["seed"].nunique().min()) if len(group) else 0,
            "n_runs": len(group),
            "n_diverged": int((group["status"] == "diverged").sum()),
            "n_unfinished": int((~everything["status"].isin(tables.FINISHED)).sum()),
        }
        if len(group):
            spread = spread_memory(group, n_boot=n_boot, confidence=confidence, seed=seed)
            spread["ci_low_pp"] = spread.pop("spread_lo", np.nan)
            spread["ci_high_pp"] = spread.pop("spread_hi", np.nan)
            row |= spread | {
                "interpolated": bool(tables.interpolates(group).all() and row["n_unfinished"] == 0),
                "min_train_acc_pct": float(100 * group["final_train_acc"].min()),
            }
            if with_disagreement and "null_mean_pp" in row:  # two or more seeds used
                dis = disagreement_memory(group, n_boot=n_boot, seed=seed)
                dis["disagreement"] = dis.pop("alpha_dis", np.nan)
                dis["seed_disagreement"] = dis.pop("seed_dis", np.nan)
                row |= dis
        rows.append(row)
    dis = ("disagreement", "seed_disagreement", "excess", "excess_lo", "excess_hi")
    columns = [c for c in SPREAD_COLUMNS if with_disagreement or c not in dis]
    return pd.DataFrame(rows).reindex(columns=columns)  # every column, NaN where undefined


__all__ = [
    "ALPHA_LEVEL",
    "FORGOTTEN_LEVEL",
    "FUNCTION_COLUMNS",
    "SPREAD_COLUMNS",
    "accuracy_by_seed",
    "accuracy_table",
    "bootstrap_spread",
    "disagreement_excess",
    "disagreement_memory",
    "disagreement_table",
    "function_memory",
    "mean_interval",
    "norm_memory_end",
    "norm_sentences",
    "seed_disagreement",
    "spread_memory",
    "spread_null",
    "spread_table",
]
