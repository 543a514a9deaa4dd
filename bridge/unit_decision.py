"""The unit decision: which unit of forgetting the pipelines' memories collapse onto, with intervals.

The noise floors of the memories themselves (the spread's permutation null, the disagreement's
seed floor) are :mod:`initmem.empirical.memory` (definitions M2, M3); here is what the verdict on
the unit of forgetting rests on:

* **The unit decision** (:func:`decide`): for each memory, the rank difference of the two units
  (R1 of :func:`rank_bootstrap`: over the pairs of evaluations the two units order differently, the
  fraction ordered as accumulated regularization says minus the fraction ordered as epochs say),
  with a percentile bootstrap interval that resamples pipelines and, within each, seeds. A winner is
  named only when the interval excludes zero (:func:`unit_decision_text`) and, in the study, only
  where its error rate calibrated on the design is at most ``MAX_ERROR`` (:mod:`initmem.bridge.study.calibrate`).
  Beside it, reported: the paired difference ``r2_cv(accumulated) - r2_cv(epochs)`` of the
  leave-one-pipeline-out R^2 of a decreasing (isotonic) fit of the memory against the unit
  (:func:`unit_bootstrap`, :func:`lopo_r2`; the rule before issue 23, replaced because on the same
  synthetic sweeps the rank rule named the true unit more often at no larger error rate, and costs
  milliseconds where the R^2 bootstrap costs seconds, so that it can be calibrated); other units
  (``r2``, ``r2_cv`` and their intervals), never used to pick a winner.
* **The candidate against its rivals** (:func:`rival_bootstrap`, :func:`rival_verdict`): R1 between
  accumulated regularization and each of :data:`RIVAL_UNITS` (epochs, steps, explicit decay alone,
  explicit decay plus SGD noise, explicit decay plus the Adam term, the theory's predicted
  forgetting), each with its interval; accumulated regularization is named only where it beats
  every rival.
Everything here takes arrays or small tables; the bridge builds them from a sweep's logs
(:func:`memory_cubes`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from initmem.bridge import measure
from initmem.bridge.fits import lopo_r2, stretched_exponential_fit
from initmem.empirical import curves, tables

#: The comparison that decides (pre-registered): this unit against that one, on ``r2_cv``.
DECIDING_UNITS = ("accumulated", "epochs")
#: The rivals the candidate unit (``DECIDING_UNITS[0]``) must beat, each by the rank rule R1
#: (:func:`rival_bootstrap`): run length in epochs and in steps, explicit decay alone, explicit
#: decay plus either noise term for every pipeline, and the theory's predicted forgetting
#: (``theory``: ``-ln`` of the law's predicted norm memory).
RIVAL_UNITS = ("epochs", "steps", "explicit", "explicit_sgd_noise", "explicit_adam", "theory")
#: Rival units built as sums of the units of :data:`initmem.theory.units.UNITS` (:func:`unit_values`).
DERIVED_UNITS = {
    "explicit_sgd_noise": ("explicit", "sgd_noise"),
    "explicit_adam": ("explicit", "adam"),
}


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
    if "rank_diff" in row and np.isfinite(row.get("rank_diff", np.nan)):
        numbers = (
            f"rank difference {row['rank_diff']:+.2f} [{100 * row['level']:.0f}% bootstrap "
            f"{row['rank_lo']:+.2f}, {row['rank_hi']:+.2f}] (+1: every pair of evaluations the two "
            f"units order differently is ordered as accumulated regularization says; -1: as epochs "
            f"say); {numbers}"
        )
    if row.get("calibration"):
        numbers += f"; {row['calibration']}"
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
    why = row.get("why_not") or "the interval covers 0"
    return (
        f"{memory}: cannot tell at this size whether accumulated regularization or epochs is the "
        f"unit of forgetting ({why}: {numbers})."
    )


def decide(
    cubes: dict, units=None, *, n_boot: int = 200, level: float = 0.95, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The study's unit decision: :func:`unit_bootstrap` (every unit's R^2 intervals, the
    leave-one-pipeline-out difference, reported) with the winner of :func:`rank_bootstrap`.

    The rank rule decides: on the same synthetic sweeps (:mod:`initmem.bridge.study.calibrate`,
    ``docs/unit-of-forgetting.md``) it names the true unit more often than the leave-one-pipeline-out
    R^2 difference at no larger error rate. The guards of :func:`decision_guard` still apply. Extra
    columns: ``rank_diff``, ``rank_lo``, ``rank_hi``, ``loo_winner`` (what the R^2 rule would say),
    ``rule`` ("rank").
    """
    intervals, decision = unit_bootstrap(cubes, units, n_boot=n_boot, level=level, seed=seed)
    if decision.empty:
        return intervals, decision
    rank = rank_bootstrap(cubes, n_boot=n_boot, level=level, seed=seed)
    decision = decision.merge(rank.drop(columns="n_pipelines"), on="memory", how="left")
    decision["loo_winner"] = decision["winner"]
    decision["winner"] = [
        "cannot tell" if reason or not isinstance(w, str) else w
        for w, reason in zip(decision["rank_winner"], decision["reason"], strict=True)
    ]
    decision = decision.drop(columns="rank_winner").assign(rule="rank")
    decision["text"] = [unit_decision_text(r) for _, r in decision.iterrows()]
    return intervals, decision


# ----------------------------------------------------------------------------------- rank decision
def unit_values(units: dict, unit: str, n_evals: int) -> np.ndarray:
    """One unit at each of ``n_evals`` evaluations from a ``{unit: (n_evals,)}`` mapping (a cube's
    or a design pipeline's): its own, or the sum of :data:`DERIVED_UNITS`' parts (NaN where a part
    is missing)."""
    if unit in DERIVED_UNITS:
        first, second = (unit_values(units, u, n_evals) for u in DERIVED_UNITS[unit])
        return first + second
    if unit not in units:
        return np.full(n_evals, np.nan)
    return np.asarray(units[unit], dtype=float)


def _padded(members, pair=DECIDING_UNITS):
    """Cubes as padded arrays: values (P, S, [A,] T) NaN-padded (seeds, alphas and evaluations),
    units (P, T) per unit of ``pair``."""
    n_seeds = max(c.values.shape[0] for c in members)
    n_evals = max(c.values.shape[-1] for c in members)
    inner = tuple(np.max([c.values.shape[1:-1] for c in members], axis=0).astype(int))
    values = np.full((len(members), n_seeds, *inner, n_evals), np.nan)
    seeds = np.zeros(len(members), dtype=int)
    units = {u: np.full((len(members), n_evals), np.nan) for u in pair}
    for i, cube in enumerate(members):
        s, t = cube.values.shape[0], cube.values.shape[-1]
        middle = tuple(slice(0, n) for n in cube.values.shape[1:-1])  # alphas: NaN-padded too
        values[(i, slice(0, s), *middle, slice(0, t))] = cube.values
        seeds[i] = s
        for u in pair:
            units[u][i, :t] = unit_values(cube.units, u, t)
    return values, seeds, units


def _pair_weights(units: dict, pair=DECIDING_UNITS) -> np.ndarray:
    """``K[i, j] = sign(A_i - A_j) - sign(E_i - E_j)`` over the flattened points (pipeline, evaluation)
    of (P, T) unit arrays, A and E the units of ``pair`` (identity R1 of :func:`rank_bootstrap`); 0
    where a point is padding or either unit is undefined."""
    first, second = (units[u].ravel() for u in pair)
    k = np.sign(first[:, None] - first[None, :]) - np.sign(second[:, None] - second[None, :])
    bad = ~(np.isfinite(first) & np.isfinite(second))
    k[bad, :] = 0.0
    k[:, bad] = 0.0
    return np.nan_to_num(k)


def _rank_statistic(y: np.ndarray, k: np.ndarray) -> float:
    """R1 of :func:`rank_bootstrap` for flattened memories ``y`` (NaN: not a point) and weights ``k``."""
    ok = np.isfinite(y)
    y, k = y[ok], k[np.ix_(ok, ok)]
    weight = float(np.abs(k).sum())
    if weight == 0:
        return np.nan
    return float(np.sum(k * np.sign(y[None, :] - y[:, None]))) / weight


def _rank_statistics(y: np.ndarray, k: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """R1 of every resample at once: ``y`` (B, P, T) memories of the resampled pipelines, ``picks``
    (B, P) which pipeline each slot is, ``k`` the (P T, P T) weights; the weights are gathered as
    (T, T) blocks per pair of slots, in chunks of about 4 million pairs."""
    n_boot, n_pipes, n_evals = y.shape
    blocks = k.astype(np.int8).reshape(n_pipes, n_evals, n_pipes, n_evals)  # values in {-2..2}
    out = np.empty(n_boot)
    chunk = max(1, 4_000_000 // max((n_pipes * n_evals) ** 2, 1))
    for start in range(0, n_boot, chunk):
        part = slice(start, start + chunk)
        pick = picks[part]
        kb = blocks[pick[:, :, None], :, pick[:, None, :], :]  # (b, p, q, t, t')
        yb = y[part]
        ok = np.isfinite(yb)
        if not ok.all():
            kb = kb * (ok[:, :, None, :, None] & ok[:, None, :, None, :]).astype(np.int8)
            yb = np.nan_to_num(yb)
        signs = np.sign(yb[:, None, :, None, :] - yb[:, :, None, :, None]).astype(np.int8)
        weight = np.abs(kb).sum(axis=(1, 2, 3, 4), dtype=np.int64)
        total = (kb * signs).sum(axis=(1, 2, 3, 4), dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[part] = np.where(weight > 0, total / np.maximum(weight, 1), np.nan)
    return out


def _memories(values: np.ndarray, scale: float) -> np.ndarray:
    """Memory per (..., pipeline, evaluation) from per-seed values: the seed mean (norm) or the
    spread over alphas of the seed means (``scale`` times; values with an alpha axis)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # padded (all-NaN) evaluations
        if scale == 1.0:
            return np.nanmean(values, axis=-2)
        mean = np.nanmean(values, axis=-3)
        return scale * (np.nanmax(mean, axis=-2) - np.nanmin(mean, axis=-2))


def rank_bootstrap(
    cubes: dict,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    pair: tuple[str, str] = DECIDING_UNITS,
) -> pd.DataFrame:
    """The rank decision between two units (``pair``: the deciding units by default, A then E
    below), per memory, with a bootstrap interval.

    (R1) Over every pair of points (pipeline p, evaluation t), (q, t') of the memory,
    ``d = sum K_{pt,qt'} sign(y_{qt'} - y_{pt}) / sum |K|`` with
    ``K = sign(A_pt - A_qt') - sign(E_pt - E_qt')`` (A accumulated regularization, E epochs): a pair
    counts only where the two units order it differently, and then for the unit under which the
    memory is lower at the larger value (forgetting). ``d = +1``: every such pair is ordered as
    accumulated regularization says; ``-1``: as epochs say. A pair one unit ties counts for the other
    unit only, and a pair of equal memories counts 0 (a noiseless epochs truth on pipelines that share
    their evaluation epochs gives ``d`` above -1: its pairs tied in epochs are tied in memory too).
    It is the difference of the two units' Kendall tau of memory against unit (decreasing), over the
    pairs where they differ. Pairs within one pipeline have both units growing together and count
    (almost) nothing: ``d`` compares pipelines. Derived here.

    The interval resamples pipelines and, within each, seeds, as :func:`unit_bootstrap` does. A winner
    is named when the ``level`` interval excludes 0. Returns one row per memory: ``memory``,
    ``rank_diff``, ``rank_lo``, ``rank_hi``, ``rank_winner``, ``n_pipelines``. Only the points and
    the sign comparisons: no fit, so a replica costs milliseconds (:mod:`initmem.bridge.study.calibrate`).
    """
    rng = np.random.default_rng(seed)
    tail = (1 - level) / 2
    rows = []
    for memory, members in cubes.items():
        members = [c for c in members if c.values.shape[0] >= 1]
        if len(members) < 2 or not all(_has_units(c, pair) for c in members):
            continue
        values, n_seeds, units = _padded(members, pair)
        scale = members[0].scale
        k = _pair_weights(units, pair)
        n_pipes, n_evals = units[pair[0]].shape
        point = _rank_statistic(_memories(values, scale).ravel(), k)
        picks = rng.integers(0, n_pipes, (n_boot, n_pipes))
        draws = np.floor(rng.random((n_boot, n_pipes, values.shape[1])) * n_seeds[picks][..., None])
        sampled = values[picks[..., None], draws.astype(int)]  # (B, P, S, [A,] T)
        y = _memories(sampled, scale)  # (B, P, T)
        boots = _rank_statistics(y, k, picks)
        boots = boots[np.isfinite(boots)]
        lo, hi = np.quantile(boots, [tail, 1 - tail]) if boots.size else (np.nan, np.nan)
        winner = pair[0] if lo > 0 else pair[1] if hi < 0 else "cannot tell"
        rows.append(
            {
                "memory": memory,
                "rank_diff": point,
                "rank_lo": float(lo),
                "rank_hi": float(hi),
                "rank_winner": winner,
                "n_pipelines": len(members),
            }
        )
    return pd.DataFrame(rows)


def _has_units(cube: PipelineCube, pair) -> bool:
    """Whether a cube carries (or can sum, :data:`DERIVED_UNITS`) both units of ``pair``."""
    have = set(cube.units)
    return all(u in have or set(DERIVED_UNITS.get(u, (u,))) <= have for u in pair)


def rival_bootstrap(
    cubes: dict,
    *,
    candidate: str = DECIDING_UNITS[0],
    rivals=RIVAL_UNITS,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """R1 of :func:`rank_bootstrap` between the ``candidate`` unit and each rival, per memory: one
    row per (memory, rival) with ``rank_diff``, ``rank_lo``, ``rank_hi`` (positive: the pairs the two
    units order differently are ordered as the candidate says), ``beats`` (the interval above 0),
    ``loses`` (below 0) and ``n_pipelines``. A rival no pipeline carries is left out (a missing row).
    Every comparison draws the same resamples (one ``seed``)."""
    frames = []
    for rival in rivals:
        table = rank_bootstrap(
            cubes, n_boot=n_boot, level=level, seed=seed, pair=(candidate, rival)
        )
        if table.empty:
            continue
        frames.append(
            table.drop(columns="rank_winner").assign(
                candidate=candidate,
                rival=rival,
                beats=table["rank_lo"] > 0,
                loses=table["rank_hi"] < 0,
            )
        )
    columns = ["memory", "candidate", "rival", "rank_diff", "rank_lo", "rank_hi", "beats"]
    columns += ["loses", "n_pipelines"]
    return (
        pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    )


def rival_verdict(table: pd.DataFrame, rivals=RIVAL_UNITS) -> pd.DataFrame:
    """Per memory of :func:`rival_bootstrap`'s table: the candidate is named the unit of
    forgetting (``best``) only when it beats every rival of ``rivals`` with its interval (a rival
    without a comparison counts as not beaten); else ``cannot tell``. Columns: ``memory``,
    ``best``, ``beaten`` / ``not_beaten`` / ``beats_candidate`` (rival names, comma-separated)."""
    rows = []
    for memory, group in table.groupby("memory", sort=False):
        by = group.set_index("rival")
        beaten = [r for r in rivals if r in by.index and bool(by.loc[r, "beats"])]
        against = [r for r in rivals if r in by.index and bool(by.loc[r, "loses"])]
        open_ = [r for r in rivals if r not in beaten]
        candidate = str(group["candidate"].iloc[0])
        rows.append(
            {
                "memory": memory,
                "best": candidate if not open_ else "cannot tell",
                "beaten": ", ".join(beaten),
                "not_beaten": ", ".join(open_),
                "beats_candidate": ", ".join(against),
            }
        )
    return pd.DataFrame(rows, columns=["memory", "best", "beaten", "not_beaten", "beats_candidate"])


def memory_cubes(
    runs: pd.DataFrame,
    epochs: pd.DataFrame,
    norm_curves: pd.DataFrame,
    accumulated: pd.DataFrame,
    predicted_curves: pd.DataFrame | None = None,
    notes: list | None = None,
    accuracy: tuple | None = None,
    course: list | None = None,
) -> dict:
    """The per-seed memories of a sweep, beside every unit, as :class:`PipelineCube` per memory.

    ``norm``: the layer-mean norm memory of the scaled BN-followed convs
    (:data:`~initmem.empirical.curves.SCALE_INVARIANT_MEAN` of ``norm_curves``), every evaluation.
    ``spread``: the test-accuracy spread across alphas (pp), at the evaluations from the peak of its
    seed-mean spread after the pipeline has learned (:func:`~initmem.bridge.measure.learned_step`,
    :func:`spread_start`: a spread that first rises is read from its peak on), from the seeds whose
    runs interpolate at
    every alpha (:func:`~initmem.empirical.tables.interpolating_seeds`, M1 of
    :mod:`initmem.empirical.memory`); a pipeline with fewer than 2 such seeds is left out (and named in ``notes``). Units at
    each evaluation are the pipeline's mean over its runs of ``accumulated``
    (:func:`~initmem.bridge.units.evaluation_units`), plus ``theory`` (``-ln`` of the law's
    predicted norm memory) where ``predicted_curves`` has it. ``accuracy``:
    :func:`~initmem.bridge.measure.accuracy_pair` of the runs, when already built. ``course``: a
    list that receives one :func:`spread_course` row per spread cube (its time course before the
    window is cut).
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
        start = spread_start(steps, values)
        if course is not None:
            course.append({"pipeline": pipeline, **spread_course(steps, values, start)})
        cubes["spread"].append(
            PipelineCube(
                pipeline,
                values[..., start:],
                {u: v[start:] for u, v in units_at(pipeline, steps).items()},
                scale=100.0,
            )
        )
    return {k: v for k, v in cubes.items() if v}


def spread_start(steps: np.ndarray, values: np.ndarray) -> int:
    """The first evaluation of a spread cube the decision reads (``values``: (seeds, alphas,
    evaluations) accuracies at ``steps``, from the pipeline's learned step): the peak of the
    seed-mean spread (:func:`initmem.bridge.measure.decay_window`, the rule of every function
    memory's fit), so that a spread that first rises is compared from its peak on; 0 without a
    window."""
    curve = _memories(values, 100.0)
    window = measure.decay_window(np.asarray(steps, dtype=float), curve, float(steps[0]))
    return window[0] if window is not None else 0


#: Seed resamples of :func:`spread_course`'s interval.
COURSE_BOOT = 200


def spread_course(steps: np.ndarray, values: np.ndarray, start: int, *, seed: int = 0) -> dict:
    """The time course of one pipeline's spread (pp) from its learned step: at the first
    evaluation (``first_*``), at the peak the decision reads from (``peak_*``, index ``start`` of
    :func:`spread_start`) and at the end (``end_*``), and the rise ``peak - first`` with a 95%
    percentile interval over :data:`COURSE_BOOT` resamples of the seeds at those two fixed
    evaluations (``rise_lo``, ``rise_hi``; NaN with fewer than 2 seeds). The peak is chosen on the
    data: the interval describes the rise, it does not test one (the calibration truth "spread
    rising first" does)."""
    steps = np.asarray(steps, dtype=float)
    curve = _memories(values, 100.0)
    rise = curve[start] - curve[0]
    lo = hi = np.nan
    n_seeds = values.shape[0]
    if n_seeds >= 2 and start > 0:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, n_seeds, (COURSE_BOOT, n_seeds))
        both = values[..., [0, start]][picks]  # (B, S, A, 2)
        spreads = _memories(both, 100.0)  # (B, 2)
        lo, hi = np.nanquantile(spreads[:, 1] - spreads[:, 0], [0.025, 0.975])
    elif start == 0:
        lo = hi = 0.0
    return {
        "first_step": steps[0],
        "first_pp": float(curve[0]),
        "peak_step": steps[start],
        "peak_pp": float(curve[start]),
        "end_step": steps[-1],
        "end_pp": float(curve[-1]),
        "rise_pp": float(rise),
        "rise_lo": float(lo),
        "rise_hi": float(hi),
        "rises": bool(start > 0 and lo > 0),
    }


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


__all__ = [
    "DECIDING_UNITS",
    "MIN_BOOT_FRACTION",
    "MIN_DECISION_PIPELINES",
    "PipelineCube",
    "cube_points",
    "decide",
    "decision_guard",
    "memory_cubes",
    "DERIVED_UNITS",
    "RIVAL_UNITS",
    "rank_bootstrap",
    "rival_bootstrap",
    "spread_course",
    "spread_start",
    "rival_verdict",
    "unit_bootstrap",
    "unit_values",
    "unit_decision_text",
]
