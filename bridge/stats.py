"""Statistics a reviewer accepts: every memory against its noise floor, and the unit decision.

* **Spread against a permutation null** (:func:`spread_null`): under "alpha changes nothing", the
  alpha labels of one seed's runs are exchangeable (same data order, same init draw up to the scale),
  so permuting them within each seed draws from the null distribution of the spread. The p-value is
  the fraction of permutations (all of them when there are at most ``max_permutations``, else a
  random sample plus the identity) whose spread is at least the observed one.
* **Disagreement against the seed floor** (:func:`disagreement_excess`): the fraction of test points
  on which two alphas (same seed) disagree, minus the fraction on which two seeds (same alpha)
  disagree, with a percentile bootstrap interval over seeds (pairs of a seed with its own copy are
  left out of the seed floor).
* **The unit decision** (:func:`unit_bootstrap`), fixed in advance: for each memory, the paired
  difference ``r2_cv(accumulated) - r2_cv(epochs)`` of the leave-one-pipeline-out R^2 of a
  decreasing (isotonic) fit of the memory against the unit (:func:`lopo_r2`), with a percentile
  bootstrap interval that resamples pipelines and, within each, seeds. A winner is named only when
  the interval excludes zero (:func:`unit_decision_text`); other units are reported beside it
  (``r2``, ``r2_cv`` and their intervals), never used to pick a winner.
* **Fit intervals** (:func:`loglog_r2_interval`): a bootstrap over pipelines of the R^2 (and slope) of
  ``ln measured ~ ln predicted`` forgetting times.

Everything here takes arrays or small tables; the bridge builds them from a sweep's logs
(:func:`memory_cubes`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: The comparison that decides (pre-registered): this unit against that one, on ``r2_cv``.
DECIDING_UNITS = ("accumulated", "epochs")


# ----------------------------------------------------------------------------------- spread null
def spread_null(
    accuracies, *, max_permutations: int = 4096, level: float = 0.95, seed: int = 0
) -> dict:
    """Spread of seed-mean accuracy across alphas, against its within-seed permutation null.

    ``accuracies``: (n_seeds, n_alphas), one row per seed with every alpha (any unit; the spread is
    in that unit). Returns ``spread`` (max minus min over alphas of the seed means), ``null_mean``
    (the noise floor: the mean spread under permuted labels), ``null_hi`` (its ``level`` quantile),
    ``excess`` (``spread - null_mean``), ``p_value``, ``p_min`` (the smallest attainable p-value:
    relabelling every seed the same way leaves the spread unchanged, so it is
    ``1 / n_alphas!^(n_seeds - 1)``: 1/16 for 2 alphas and 5 seeds, 1/32 for 6), ``n_permutations``,
    ``exact`` (all permutations enumerated) and ``n_seeds``. NaN for fewer than 2 seeds or 2 alphas.
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


# ----------------------------------------------------------------------------------- disagreement
def disagreement_excess(
    predictions: dict, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict:
    """Disagreement between alphas minus disagreement between seeds, with a bootstrap interval.

    ``predictions``: ``{alpha: {seed: predicted classes (1-d int array over the test set)}}``; only
    seeds present at every alpha are used. ``alpha_dis``: mean over seeds and alpha pairs of the
    fraction of test points where two alphas of one seed disagree; ``seed_dis``: mean over alphas and
    seed pairs of the same between two seeds of one alpha; ``excess = alpha_dis - seed_dis``.
    The interval resamples seeds with replacement (a pair of a seed with its own copy is left out of
    ``seed_dis``). NaN with fewer than 2 alphas or 2 seeds.
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
    rng = np.random.default_rng(seed)
    boots = np.array([statistic(rng.integers(0, n_seed, n_seed)) for _ in range(n_boot)])
    boots = boots[np.isfinite(boots)]
    tail = (1 - level) / 2
    lo, hi = np.quantile(boots, [tail, 1 - tail]) if boots.size else (np.nan, np.nan)
    out.update(
        alpha_dis=alpha_dis,
        seed_dis=seed_dis,
        excess=alpha_dis - seed_dis,
        excess_lo=float(lo),
        excess_hi=float(hi),
    )
    return out


# ----------------------------------------------------------------------------------- unit decision
@dataclass(frozen=True)
class PipelineCube:
    """One pipeline's memory at each evaluation, per seed, beside every unit's value there.

    ``values``: (n_seeds, n_evals) for a memory averaged over seeds (the norm memory), or
    (n_seeds, n_alphas, n_evals) for the spread (max minus min over alphas of the seed means, in the
    unit of ``values`` times ``scale``). ``units``: ``{unit: (n_evals,)}``.
    """

    pipeline: str
    values: np.ndarray
    units: dict
    scale: float = 1.0

    def memory(self, seeds: np.ndarray | None = None) -> np.ndarray:
        """The memory at each evaluation from the given seed indices (all seeds: None)."""
        values = self.values if seeds is None else self.values[seeds]
        if values.ndim == 2:
            return np.nanmean(values, axis=0)
        return self.scale * np.ptp(np.nanmean(values, axis=0), axis=0)


def lopo_r2(u, y, groups) -> float:
    """Leave-one-pipeline-out R^2 of a decreasing isotonic fit of ``y`` on ``u``.

    Each group (pipeline) is predicted by the fit to all other groups
    (:func:`initmem.bridge.fitting.isotonic_fit`, interpolated in ``ln u``); R^2 = 1 - SSE / SST over
    every point. NaN with fewer than two groups or no variance.
    """
    from initmem.bridge.fitting import isotonic_fit

    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    groups = np.asarray(groups)
    total = float(np.sum((y - y.mean()) ** 2))
    labels = np.unique(groups)
    if labels.size < 2 or total == 0:
        return np.nan
    pred = np.empty_like(y)
    for label in labels:
        held = groups == label
        pred[held] = isotonic_fit(u[~held], y[~held], u[held])
    return 1.0 - float(np.sum((y - pred) ** 2)) / total


def _stack(cubes, picks, unit):
    """Points (u, y, group) of the chosen (cube index, seed indices) picks, finite and u >= 0."""
    us, ys, gs = [], [], []
    for index, seeds in picks:
        cube = cubes[index]
        u = np.asarray(cube.units[unit], dtype=np.float64)
        y = cube.memory(seeds)
        keep = np.isfinite(u) & np.isfinite(y) & (u >= 0)
        us.append(u[keep])
        ys.append(y[keep])
        gs.append(np.full(int(keep.sum()), index))
    if not us:
        return np.array([]), np.array([]), np.array([])
    return np.concatenate(us), np.concatenate(ys), np.concatenate(gs)


def unit_bootstrap(
    cubes: dict,
    units=None,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    with_parametric: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Bootstrap intervals of every unit's R^2, and the pre-registered decision, per memory.

    ``cubes``: ``{memory: [PipelineCube, ...]}``. Each replicate draws pipelines with replacement and,
    within each drawn pipeline, its seeds with replacement; a drawn copy keeps its pipeline's identity
    in the leave-one-pipeline-out fit (all copies are held out together). Returns

    * ``intervals``: one row per (memory, unit): ``r2_lo``, ``r2_hi`` (stretched exponential R^2 of
      :func:`initmem.bridge.fitting.stretched_exponential_fit`, each replicate refined from the
      full-data fit; NaN when ``with_parametric`` is False),
      ``r2_cv_lo``, ``r2_cv_hi`` (:func:`lopo_r2`), ``n_boot``;
    * ``decision``: one row per memory: ``diff`` = ``r2_cv(accumulated) - r2_cv(epochs)`` on the
      data, ``diff_lo``, ``diff_hi`` (``level`` percentile interval), ``n_pipelines``, ``winner``
      ("accumulated", "epochs" or "cannot tell"), ``reason`` (why the design cannot support a
      verdict, :func:`decision_guard`; empty otherwise), ``n_boot_asked`` and ``text``
      (:func:`unit_decision_text`).
    """
    from initmem.bridge.fitting import stretched_exponential_fit

    rng = np.random.default_rng(seed)
    tail = (1 - level) / 2
    rows, decisions = [], []
    for memory, members in cubes.items():
        members = [c for c in members if c.values.shape[0] >= 1]
        if len(members) < 2:
            continue
        shared = set.intersection(*(set(c.units) for c in members))
        names = [u for u in (units or sorted(shared)) if u in shared]
        full = [(i, None) for i in range(len(members))]
        starts = {}
        for unit in names:  # the full-data fit starts each replicate's refinement
            u, y, _ = _stack(members, full, unit)
            fitted = stretched_exponential_fit(u, y) if with_parametric and y.size >= 4 else None
            if fitted is not None and np.isfinite(fitted["scale"]):
                starts[unit] = (fitted["amplitude"], fitted["scale"], fitted["shape"])
        boot = {u: {"r2": [], "r2_cv": []} for u in names}
        for _ in range(n_boot):
            picks = []
            for index in rng.integers(0, len(members), len(members)):
                n_seeds = members[index].values.shape[0]
                picks.append((index, rng.integers(0, n_seeds, n_seeds)))
            for unit in names:
                u, y, g = _stack(members, picks, unit)
                boot[unit]["r2_cv"].append(lopo_r2(u, y, g))
                if unit in starts and y.size >= 4:
                    boot[unit]["r2"].append(stretched_exponential_fit(u, y, starts[unit])["r2"])
        point = {}
        for unit in names:
            u, y, g = _stack(members, full, unit)
            point[unit] = lopo_r2(u, y, g)
            cv = np.asarray(boot[unit]["r2_cv"], dtype=float)
            r2 = np.asarray(boot[unit]["r2"], dtype=float)
            cv, r2 = cv[np.isfinite(cv)], r2[np.isfinite(r2)]
            rows.append(
                {
                    "memory": memory,
                    "unit": unit,
                    "r2_lo": float(np.quantile(r2, tail)) if r2.size else np.nan,
                    "r2_hi": float(np.quantile(r2, 1 - tail)) if r2.size else np.nan,
                    "r2_cv_lo": float(np.quantile(cv, tail)) if cv.size else np.nan,
                    "r2_cv_hi": float(np.quantile(cv, 1 - tail)) if cv.size else np.nan,
                    "n_boot": int(cv.size),
                }
            )
        first, second = DECIDING_UNITS
        if first in names and second in names:
            diffs = np.asarray(boot[first]["r2_cv"]) - np.asarray(boot[second]["r2_cv"])
            diffs = diffs[np.isfinite(diffs)]
            lo, hi = np.quantile(diffs, [tail, 1 - tail]) if diffs.size else (np.nan, np.nan)
            diff = point[first] - point[second]
            winner = first if lo > 0 else second if hi < 0 else "cannot tell"
            reason = decision_guard(members, (first, second), n_boot, int(diffs.size))
            if reason is not None:
                winner = "cannot tell"
            row = {
                "memory": memory,
                "r2_cv_accumulated": point[first],
                "r2_cv_epochs": point[second],
                "diff": diff,
                "diff_lo": float(lo),
                "diff_hi": float(hi),
                "level": level,
                "n_pipelines": len(members),
                "n_boot": int(diffs.size),
                "n_boot_asked": n_boot,
                "winner": winner,
                "reason": reason or "",
            }
            row["text"] = unit_decision_text(row)
            decisions.append(row)
    return pd.DataFrame(rows), pd.DataFrame(decisions)


#: The decision needs at least this many pipelines: leave-one-pipeline-out R^2 holds one out and
#: fits the others, and two pipelines leave one curve to fit each time.
MIN_DECISION_PIPELINES = 3
#: At least this fraction of the bootstrap resamples must give a finite R^2 difference: an interval
#: from the resamples that happened to be fittable describes a different population.
MIN_BOOT_FRACTION = 0.9


def decision_guard(members, units, n_boot: int, n_fitted: int) -> str | None:
    """Why the design cannot support a verdict on ``units`` (None when it can).

    ``members``: the memory's :class:`PipelineCube` s; ``units``: the two deciding units; ``n_boot``
    resamples asked, ``n_fitted`` of them with a finite difference. Guards, in order: fewer than
    :data:`MIN_DECISION_PIPELINES` pipelines; a unit whose total over the run is the same for every
    pipeline (then it cannot order the pipelines and the R^2 comparison measures nothing); fewer than
    :data:`MIN_BOOT_FRACTION` of the resamples fitted.
    """
    if len(members) < MIN_DECISION_PIPELINES:
        return (
            f"{len(members)} pipelines: the decision needs {MIN_DECISION_PIPELINES} or more "
            "(leave-one-pipeline-out R^2)"
        )
    for unit in units:
        totals = np.array([np.nanmax(np.asarray(c.units[unit], dtype=float)) for c in members])
        totals = totals[np.isfinite(totals) & (totals > 0)]
        if totals.size < 2 or np.ptp(np.log(totals)) < 1e-9:
            return f"{unit} is the same for every pipeline ({totals[0] if totals.size else 0:.3g})"
    if n_boot > 0 and n_fitted < MIN_BOOT_FRACTION * n_boot:
        return f"only {n_fitted} of {n_boot} bootstrap resamples could be fitted"
    return None


def unit_decision_text(row) -> str:
    """The pre-registered verdict as a sentence, from one row of :func:`unit_bootstrap`'s decision."""
    numbers = (
        f"leave-one-pipeline-out R^2 {row['r2_cv_accumulated']:.2f} (accumulated regularization) "
        f"vs {row['r2_cv_epochs']:.2f} (epochs), difference {row['diff']:+.2f} "
        f"[{100 * row['level']:.0f}% bootstrap {row['diff_lo']:+.2f}, {row['diff_hi']:+.2f}] over "
        f"{row['n_pipelines']} pipelines"
    )
    memory = row["memory"]
    if row.get("reason"):
        return (
            f"{memory}: cannot tell at this size whether accumulated regularization or epochs is "
            f"the unit of forgetting: {row['reason']} ({numbers})."
        )
    if row["winner"] == "accumulated":
        return (
            f"{memory}: accumulated regularization is a better unit of forgetting than epochs "
            f"({numbers})."
        )
    if row["winner"] == "epochs":
        return (
            f"{memory}: epochs are a better unit of forgetting than accumulated regularization "
            f"({numbers})."
        )
    return (
        f"{memory}: cannot tell at this size whether accumulated regularization or epochs is the "
        f"unit of forgetting (the interval covers 0: {numbers})."
    )


def memory_cubes(
    runs: pd.DataFrame,
    epochs: pd.DataFrame,
    norm_curves: pd.DataFrame,
    accumulated: pd.DataFrame,
    predicted_curves: pd.DataFrame | None = None,
    notes: list | None = None,
) -> dict:
    """The per-seed memories of a sweep, beside every unit, as :class:`PipelineCube` per memory.

    ``norm``: the layer-mean norm memory of the scaled BN-followed convs
    (:data:`~initmem.bridge.measure.SCALE_INVARIANT_MEAN` of ``norm_curves``), every evaluation.
    ``spread``: the test-accuracy spread across alphas (pp), at the evaluations after the pipeline has
    learned (:func:`~initmem.bridge.measure.learned_step`), from the seeds whose runs interpolate
    (final train accuracy >= :data:`~initmem.empirical.memory.INTERPOLATION_THRESHOLD`) at every
    alpha; a pipeline with fewer than 2 such seeds is left out (and named in ``notes``). Units at
    each evaluation are the pipeline's mean over its runs of ``accumulated``
    (:func:`~initmem.bridge.predict.accumulated_units`), plus ``theory`` (``-ln`` of the law's
    predicted norm memory) where ``predicted_curves`` has it.
    """
    from initmem.bridge import measure
    from initmem.empirical.memory import interpolates

    notes = notes if notes is not None else []
    unit_cols = [c for c in accumulated.columns if c not in ("hash", "pipeline", "epoch", "step")]
    per_step = accumulated.groupby(["pipeline", "step"])[unit_cols].mean()
    law = {}
    if predicted_curves is not None and not predicted_curves.empty:
        mean = predicted_curves[predicted_curves["layer"] == measure.SCALE_INVARIANT_MEAN]
        for pipeline, group in mean.groupby("pipeline"):
            memory = np.clip(group["memory"].to_numpy(dtype=float), 1e-12, None)
            law[pipeline] = pd.Series(-np.log(memory), index=group["step"].to_numpy())

    def units_at(pipeline, steps) -> dict:
        table = per_step.loc[pipeline].reindex(steps)
        out = {c: table[c].to_numpy(dtype=float) for c in unit_cols}
        if pipeline in law:
            out["theory"] = law[pipeline].reindex(steps).to_numpy(dtype=float)
        return out

    cubes: dict = {"norm": [], "spread": []}
    if not norm_curves.empty:
        norm = norm_curves[norm_curves["layer"] == measure.SCALE_INVARIANT_MEAN]
        for pipeline, group in norm.groupby("pipeline", sort=False):
            if pipeline not in per_step.index.get_level_values(0):
                continue
            table = group.pivot_table(index="seed", columns="step", values="memory")
            steps = table.columns.to_numpy()
            cubes["norm"].append(
                PipelineCube(pipeline, table.to_numpy(dtype=float), units_at(pipeline, steps))
            )
    acc = measure.accuracy_curves(runs, epochs)
    metric = "val_acc" if "val_acc" in epochs else "test_acc"
    learned_from = measure.accuracy_curves(runs, epochs, metric)
    interpolating = runs.assign(_fits=interpolates(runs).to_numpy())
    for pipeline, group in acc.groupby("pipeline", sort=False):
        alphas = np.sort(group["alpha"].unique())
        if alphas.size < 2 or pipeline not in per_step.index.get_level_values(0):
            continue
        mine = interpolating[interpolating["pipeline"] == pipeline]
        ok = mine.groupby("seed")["_fits"].all() & (
            mine.groupby("seed")["alpha"].nunique() == alphas.size
        )
        seeds = ok.index[ok].to_numpy()
        if seeds.size < 2:
            label = mine["label"].iloc[0] if "label" in mine else pipeline
            notes.append(
                f"{label}: {seeds.size} seed(s) interpolate at every alpha (< 2): left out of the "
                "function-memory statistics"
            )
            continue
        learned = measure.learned_step(learned_from[learned_from["pipeline"] == pipeline])
        group = group[group["seed"].isin(seeds) & (group["step"] >= learned)]
        cube = group.pivot_table(index=["seed", "alpha"], columns="step", values="test_acc")
        full = pd.MultiIndex.from_product([seeds, alphas], names=["seed", "alpha"])
        steps = cube.columns.to_numpy()
        values = cube.reindex(full).to_numpy(dtype=float).reshape(seeds.size, alphas.size, -1)
        cubes["spread"].append(
            PipelineCube(pipeline, values, units_at(pipeline, steps), scale=100.0)
        )
    return {k: v for k, v in cubes.items() if v}


def cube_points(cubes: dict) -> pd.DataFrame:
    """The seed-mean memory of every cube at every evaluation, one row per point, with its units
    (the ``points`` of :func:`initmem.bridge.fitting.unit_comparison`)."""
    frames = []
    for memory, members in cubes.items():
        for cube in members:
            frame = pd.DataFrame(cube.units).assign(
                memory=memory, pipeline=cube.pipeline, value=cube.memory()
            )
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["memory", "pipeline", "value"])
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------- fit intervals
def loglog_r2_interval(
    measured, predicted, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict:
    """Percentile bootstrap (over pipelines) of the slope and R^2 of ``ln measured ~ ln predicted``.

    Pairs with a non-finite or non-positive time are dropped first. Returns ``slope_boot_lo``,
    ``slope_boot_hi``, ``r2_lo``, ``r2_hi`` (NaN with fewer than 3 pairs).
    """
    x = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(measured, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = np.log(x[keep]), np.log(y[keep])
    out = dict.fromkeys(["slope_boot_lo", "slope_boot_hi", "r2_lo", "r2_hi"], np.nan)
    if x.size < 3:
        return out
    rng = np.random.default_rng(seed)
    slopes, r2s = [], []
    for _ in range(n_boot):
        i = rng.integers(0, x.size, x.size)
        xi, yi = x[i], y[i]
        if np.ptp(xi) == 0:
            continue
        slope, intercept = np.polyfit(xi, yi, 1)
        total = float(np.sum((yi - yi.mean()) ** 2))
        slopes.append(slope)
        r2s.append(
            1.0 - float(np.sum((yi - intercept - slope * xi) ** 2)) / total if total else 1.0
        )
    tail = (1 - level) / 2
    if slopes:
        out.update(
            slope_boot_lo=float(np.quantile(slopes, tail)),
            slope_boot_hi=float(np.quantile(slopes, 1 - tail)),
            r2_lo=float(np.quantile(r2s, tail)),
            r2_hi=float(np.quantile(r2s, 1 - tail)),
        )
    return out


def mean_interval(values, *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` with a Student-t interval (NaN bounds for fewer than 2 finite values)."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (np.nan, np.nan, np.nan)
    mean = float(v.mean())
    if v.size < 2:
        return (mean, np.nan, np.nan)
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return (mean, mean - half, mean + half)


__all__ = [
    "DECIDING_UNITS",
    "MIN_BOOT_FRACTION",
    "MIN_DECISION_PIPELINES",
    "PipelineCube",
    "cube_points",
    "decision_guard",
    "disagreement_excess",
    "loglog_r2_interval",
    "lopo_r2",
    "mean_interval",
    "memory_cubes",
    "spread_null",
    "unit_bootstrap",
    "unit_decision_text",
]
