"""The unit decision: which unit of forgetting the pipelines' memories collapse onto, with intervals.

The noise floors of the memories themselves (the spread's permutation null, the disagreement's
seed floor) are :mod:`initmem.empirical.memory` (definitions M2, M3); here is what the verdict on
the unit of forgetting rests on:

* **The unit decision** (:func:`unit_bootstrap`), fixed in advance: for each memory, the paired
  difference ``r2_cv(accumulated) - r2_cv(epochs)`` of the leave-one-pipeline-out R^2 of a
  decreasing (isotonic) fit of the memory against the unit (:func:`lopo_r2`), with a percentile
  bootstrap interval that resamples pipelines and, within each, seeds. A winner is named only when
  the interval excludes zero (:func:`unit_decision_text`); other units are reported beside it
  (``r2``, ``r2_cv`` and their intervals), never used to pick a winner.
Everything here takes arrays or small tables; the bridge builds them from a sweep's logs
(:func:`memory_cubes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from initmem.bridge import measure
from initmem.bridge.deprecated import DEPRECATED
from initmem.bridge.fits import lopo_r2, stretched_exponential_fit
from initmem.deprecation import moved
from initmem.empirical import curves, tables

#: The comparison that decides (pre-registered): this unit against that one, on ``r2_cv``.
DECIDING_UNITS = ("accumulated", "epochs")


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
      :func:`initmem.bridge.fits.stretched_exponential_fit`, each replicate refined from the
      full-data fit; NaN when ``with_parametric`` is False),
      ``r2_cv_lo``, ``r2_cv_hi`` (:func:`lopo_r2`), ``n_boot``;
    * ``decision``: one row per memory: ``diff`` = ``r2_cv(accumulated) - r2_cv(epochs)`` on the
      data, ``diff_lo``, ``diff_hi`` (``level`` percentile interval), ``n_pipelines``, ``winner``
      ("accumulated", "epochs" or "cannot tell"), ``reason`` (why the design cannot support a
      verdict, :func:`decision_guard`; empty otherwise), ``n_boot_asked`` and ``text``
      (:func:`unit_decision_text`).
    """
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
    accuracy: tuple | None = None,
) -> dict:
    """The per-seed memories of a sweep, beside every unit, as :class:`PipelineCube` per memory.

    ``norm``: the layer-mean norm memory of the scaled BN-followed convs
    (:data:`~initmem.empirical.curves.SCALE_INVARIANT_MEAN` of ``norm_curves``), every evaluation.
    ``spread``: the test-accuracy spread across alphas (pp), at the evaluations after the pipeline has
    learned (:func:`~initmem.bridge.measure.learned_step`), from the seeds whose runs interpolate at
    every alpha (:func:`~initmem.empirical.tables.interpolating_seeds`, M1 of
    :mod:`initmem.empirical.memory`); a pipeline with fewer than 2 such seeds is left out (and named in ``notes``). Units at
    each evaluation are the pipeline's mean over its runs of ``accumulated``
    (:func:`~initmem.bridge.units.evaluation_units`), plus ``theory`` (``-ln`` of the law's
    predicted norm memory) where ``predicted_curves`` has it. ``accuracy``:
    :func:`~initmem.bridge.measure.accuracy_pair` of the runs, when already built.
    """
    notes = notes if notes is not None else []
    unit_cols = [c for c in accumulated.columns if c not in ("hash", "pipeline", "epoch", "step")]
    per_step = accumulated.groupby(["pipeline", "step"])[unit_cols].mean()
    law = {}
    if predicted_curves is not None and not predicted_curves.empty:
        mean = predicted_curves[predicted_curves["layer"] == curves.SCALE_INVARIANT_MEAN]
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
        norm = norm_curves[norm_curves["layer"] == curves.SCALE_INVARIANT_MEAN]
        for pipeline, group in norm.groupby("pipeline", sort=False):
            if pipeline not in per_step.index.get_level_values(0):
                continue
            table = group.pivot_table(index="seed", columns="step", values="memory")
            steps = table.columns.to_numpy()
            cubes["norm"].append(
                PipelineCube(pipeline, table.to_numpy(dtype=float), units_at(pipeline, steps))
            )
    acc, val = accuracy or measure.accuracy_pair(runs, epochs)
    learned_from = acc if val is None else val
    for pipeline, group in acc.groupby("pipeline", sort=False):
        alphas = np.sort(group["alpha"].unique())
        if alphas.size < 2 or pipeline not in per_step.index.get_level_values(0):
            continue
        mine = runs[runs["pipeline"] == pipeline]
        seeds = tables.interpolating_seeds(mine)
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


def __getattr__(name: str):
    """Deprecated names of this module (``initmem.bridge.deprecated``; PEP 562)."""
    return moved(__name__, name, DEPRECATED)


__all__ = [
    "DECIDING_UNITS",
    "MIN_BOOT_FRACTION",
    "MIN_DECISION_PIPELINES",
    "PipelineCube",
    "cube_points",
    "decision_guard",
    "memory_cubes",
    "unit_bootstrap",
    "unit_decision_text",
]
