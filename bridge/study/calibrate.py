"""How often would the study's verdicts be wrong? Calibration on synthetic sweeps with a known answer.

Setting
-------
:mod:`initmem.bridge.study.synthetic` draws replicas of a sweep's design under a stated truth (forgetting in
accumulated regularization, in epochs, in explicit decay only, in epochs for the pipelines with
decay only, in neither; a spread that first rises, a norm memory that ends below 0; seed noise
around it). Every verdict the study
prints is computed on each replica with the study's own functions and scored against the truth:

* **unit decision** per memory (norm, spread): the rank decision
  (:func:`initmem.bridge.unit_decision.rank_bootstrap`, the study's rule) and, with ``rules`` including
  ``"loo"``, the leave-one-pipeline-out R^2 rule it replaced (:func:`~initmem.bridge.unit_decision.unit_bootstrap`)
  and its collapse sentence; with ``"rivals"``, the candidate against its rivals
  (:func:`~initmem.bridge.unit_decision.rival_bootstrap`, :func:`~initmem.bridge.unit_decision.rival_verdict`
  over :data:`SYNTHETIC_RIVALS`), scored under the rival truths too
  (:data:`~initmem.bridge.study.synthetic.RIVAL_TRUTHS`). Naming a unit other than the truth's is wrong (under ``neither`` any
  named unit is wrong, and so under every truth whose unit is not a deciding one for every pipeline,
  :attr:`~initmem.bridge.study.synthetic.Truth.right`); "cannot tell" is never wrong, only
  powerless. The verdict's error on a design is its **worst** over the truths
  (:func:`worst_errors`), never a per-truth best.
* **spread above its null** per pipeline (:func:`~initmem.empirical.memory.spread_null`, p < 0.05):
  wrong where the true spread at the end is below :data:`NULL_SPREAD_PP`.
* **function memory** per pipeline (:mod:`~initmem.bridge.study.equivalence`, on the differences of
  the largest and the smallest alpha at the last evaluation): "gone" is wrong where the true
  difference is at least the margin; "kept" is never wrong here (every truth keeps a difference
  above 0), so only its power is read (the rate it is said).
* **norm memory at the end** per pipeline (M4): "converged" is wrong where the true memory's
  ``|n|`` is above ``1/e``, "stayed apart" where it is at or below, "reversed" where it is at or
  above 0, "overshoot" where it is at or below 1.
* **coverage** of the 95% intervals the study prints that have a true value: the spread's bootstrap
  interval (:func:`~initmem.empirical.memory.bootstrap_spread`) and the norm memory's t-interval. The
  R^2 intervals describe a fit and have no true value in the generator: not scored.

Conventions
-----------
A rate is a fraction of replicas (of pipeline-replicas for the per-pipeline verdicts) with its 95%
Wilson interval (:func:`wilson_interval`). A verdict is **calibrated** on a design when, under every
truth where it is wrong, it is said in at most :data:`MAX_ERROR` of the replicas
(:func:`allowed_verdicts`); the study says "cannot tell" instead of an uncalibrated one and names the
design of :func:`power_table` that would tell (:func:`design_that_tells`).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from initmem.bridge import unit_decision
from initmem.bridge.fits import COLLAPSE_R2
from initmem.bridge.study.equivalence import EQUIVALENCE_MARGIN_PP, decide_differences
from initmem.bridge.study.synthetic import (
    NAMED_TRUTHS,
    RIVAL_TRUTHS,
    TRUTHS,
    Design,
    Truth,
    draw,
    named_truths,
    replica_cubes,
    right_verdict,
)
from initmem.empirical import memory
from initmem.theory.criterion import interval_state

#: A named verdict is allowed on a design only where its calibrated error rate is at most this.
MAX_ERROR = 0.05
#: A true spread below this (pp) counts as no function memory (the null of the permutation test).
NULL_SPREAD_PP = 0.01
#: The rivals a synthetic replica carries: every one of
#: :data:`~initmem.bridge.unit_decision.RIVAL_UNITS` but ``theory`` (the generator has no law).
SYNTHETIC_RIVALS = tuple(u for u in unit_decision.RIVAL_UNITS if u != "theory")
#: Multipliers of seeds and pipelines in :func:`power_table`.
MULTIPLIERS = (1, 2, 4)


# ----------------------------------------------------------------------------------- intervals
def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``successes / n`` (Wilson 1927); NaN for n = 0.

    ``(p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, z the normal quantile of
    ``(1 + level) / 2``.
    """
    if n <= 0:
        return (math.nan, math.nan)
    # deferred: scipy loads only when an interval is computed
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


# ----------------------------------------------------------------------------------- one replica
def score_replica(
    replica, *, rules=("rank",), n_boot: int = 200, seed: int = 0, per_pipeline: bool = True
) -> list[dict]:
    """Every verdict of the study on one replica, scored against its truth (the per-pipeline ones
    only with ``per_pipeline``).

    Rows: ``verdict`` (what kind), ``subject`` (memory or pipeline), ``said``, ``wrong`` (bool) and,
    for intervals, ``verdict = "... interval covers the truth"`` with ``said`` "covers" / "misses".
    """
    cubes = replica_cubes(replica)
    rows = []
    right_unit = replica.truth.right
    if "rank" in rules:
        table = unit_decision.rank_bootstrap(cubes, n_boot=n_boot, seed=seed)
        for _, r in table.iterrows():
            guard = unit_decision.decision_guard(
                cubes[r["memory"]], unit_decision.DECIDING_UNITS, 0, 0
            )
            said = "cannot tell" if guard else r["rank_winner"]
            wrong = said != "cannot tell" and said != right_unit
            rows.append(_row("unit decision (rank)", r["memory"], said, wrong))
    if "rivals" in rules:
        table = unit_decision.rival_bootstrap(
            cubes, rivals=SYNTHETIC_RIVALS, n_boot=n_boot, seed=seed
        )
        for _, r in unit_decision.rival_verdict(table, SYNTHETIC_RIVALS).iterrows():
            said = r["best"]
            rows.append(
                _row(
                    "unit against its rivals",
                    r["memory"],
                    said,
                    said not in ("cannot tell", right_unit),
                )
            )
    if "loo" in rules:
        intervals, decision = unit_decision.unit_bootstrap(
            cubes,
            list(unit_decision.DECIDING_UNITS),
            n_boot=n_boot,
            seed=seed,
            with_parametric=False,
        )
        for _, r in decision.iterrows():
            said = r["winner"]
            rows.append(
                _row(
                    "unit decision (LOO R^2)",
                    r["memory"],
                    said,
                    said not in ("cannot tell", right_unit),
                )
            )
        for _, r in intervals[intervals["unit"] == "accumulated"].iterrows():
            said = _loo_collapse(r)
            wrong = (said == "do not collapse" and right_unit == "accumulated") or (
                said == "collapse" and right_unit != "accumulated"
            )
            rows.append(_row("collapse (LOO R^2)", r["memory"], said, wrong))
    if per_pipeline:
        rows += _pipeline_rows(replica, seed=seed)
    return rows


def _row(verdict, subject, said, wrong) -> dict:
    return {"verdict": verdict, "subject": str(subject), "said": said, "wrong": bool(wrong)}


def _loo_collapse(row) -> str:
    """The collapse sentence of the leave-one-pipeline-out rule (before calibration)."""
    if row["r2_cv_lo"] > COLLAPSE_R2:
        return "collapse"
    if row["r2_cv_hi"] < COLLAPSE_R2:
        return "do not collapse"
    return "cannot tell"


def _pipeline_rows(replica, *, seed: int) -> list[dict]:
    """Per pipeline: spread against its null, its interval, norm memory at the end and its interval.

    The norm memory's state is the one rule's (:func:`~initmem.theory.criterion.interval_state`):
    "converged" is wrong where the true end memory has ``|n| > 1/e``, "stayed apart" where
    ``|n| <= 1/e``, "reversed" where ``n >= 0``, "overshoot" where ``n <= 1``."""
    rows = []
    for p, acc, norm, n_true, f_true in zip(
        replica.design.pipelines,
        replica.accuracy,
        replica.norm,
        replica.true_norm,
        replica.true_fraction,
        strict=True,
    ):
        end = 100.0 * acc[:, :, -1]  # (seeds, alphas) pp: the validation-selected checkpoint
        true_spread = 100.0 * replica.truth.gap * f_true[-1]
        null = memory.spread_null(end, seed=seed)
        said = "above its null" if null["p_value"] < memory.ALPHA_LEVEL else "not above"
        rows.append(
            _row(
                "spread above its null",
                p.label,
                said,
                said == "above its null" and true_spread < NULL_SPREAD_PP,
            )
        )
        said = decide_differences(end[:, -1] - end[:, 0])["verdict"]
        rows.append(
            _row("function memory (kept / gone)", p.label, said, _function_wrong(said, true_spread))
        )
        lo, hi = memory.bootstrap_spread([end[:, a] for a in range(end.shape[1])], seed=seed)
        covers = bool(lo <= true_spread <= hi)
        rows.append(
            _row(
                "spread interval covers the truth",
                p.label,
                "covers" if covers else "misses",
                not covers,
            )
        )
        value, nlo, nhi = memory.mean_interval(norm[:, -1])
        state = interval_state(value, nlo, nhi)  # the one rule of theory.criterion
        said = {"forgotten": "converged", "kept": "stayed apart"}.get(state, state)
        rows.append(_row("norm memory at the end", p.label, said, _norm_wrong(said, n_true[-1])))
        covers = bool(nlo <= n_true[-1] <= nhi)
        rows.append(
            _row(
                "norm interval covers the truth",
                p.label,
                "covers" if covers else "misses",
                not covers,
            )
        )
    return rows


def _function_wrong(said: str, true_difference: float) -> bool:
    """ "gone" is wrong where the true difference is at least the margin; "kept" where it is 0 (no
    truth of the generator has exactly 0 but ``neither``'s limit: "kept" is scored, never wrong)."""
    if said == "gone":
        return abs(true_difference) >= EQUIVALENCE_MARGIN_PP
    return said == "kept" and true_difference == 0


def _norm_wrong(said: str, truth: float) -> bool:
    """Whether a norm-memory state ``said`` is wrong for the true end memory ``truth``."""
    level = memory.FORGOTTEN_LEVEL
    return {
        "converged": abs(truth) > level,
        "stayed apart": abs(truth) <= level,
        "reversed": truth >= 0,
        "overshoot": truth <= 1,
    }.get(said, False)


# ----------------------------------------------------------------------------------- many replicas
@dataclass
class Calibration:
    """Scored replicas of one design: ``scores`` (one row per replica and verdict, with ``truth`` and
    ``replica``), ``design``, ``truths`` (the :class:`~initmem.bridge.study.synthetic.Truth` per unit),
    ``n_replicas``, ``seconds`` (wall time)."""

    scores: pd.DataFrame
    design: Design
    truths: dict
    n_replicas: int
    seconds: float

    def rates(self) -> pd.DataFrame:
        """Tidy: truth x verdict x said -> ``n``, ``count``, ``rate``, ``lo``, ``hi`` (Wilson 95%),
        ``wrong`` (saying it under this truth is wrong)."""
        return rate_table(self.scores)

    def errors(self) -> pd.DataFrame:
        """Tidy: truth x verdict -> the rate of a wrong verdict with its Wilson interval."""
        return error_table(self.scores)


class WorkersCappedWarning(UserWarning):
    """More worker processes were asked for than the machine has CPUs: capped at the CPU count."""


def capped_workers(workers: int) -> int:
    """``workers``, at most the CPUs this process may use (a warning says so when it caps): more
    processes than CPUs only slow every one down (and a typo such as 99999 would fork that many)."""
    from initmem.empirical.backends import available_cpus  # no torch: the affinity mask only

    cpus = available_cpus()
    if workers > cpus:
        warnings.warn(
            f"workers = {workers} capped at {cpus}, the CPUs this process may use",
            WorkersCappedWarning,
            stacklevel=3,
        )
        return cpus
    return workers


def calibrate(
    design: Design,
    n_replicas: int = 200,
    *,
    truths: dict | None = None,
    rules=("rank",),
    n_boot: int = 200,
    seed: int = 0,
    per_pipeline: bool = True,
    workers: int = 1,
) -> Calibration:
    """``n_replicas`` replicas of ``design`` under each truth of :data:`TRUTHS`, every verdict scored.

    ``truths``: ``{name: Truth}``, names of :data:`~initmem.bridge.study.synthetic.TRUTHS` (default:
    :func:`~initmem.bridge.study.synthetic.named_truths`, each with its default noise). Replica i under a truth draws from ``(seed, i, truth)`` alone, so reruns agree
    and ``workers`` processes (each scoring a share of the replicas) give the same table as one.
    """
    if n_replicas < 1:
        raise ValueError(f"n_replicas must be >= 1 (got {n_replicas})")
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    workers = capped_workers(workers)
    truths = truths or named_truths()
    start = time.monotonic()
    options = dict(rules=tuple(rules), n_boot=n_boot, seed=seed, per_pipeline=per_pipeline)
    jobs = [(design, unit, truth, list(range(n_replicas))) for unit, truth in truths.items()]
    if workers > 1:
        # deferred: a process pool only when more than one worker is asked for
        from concurrent.futures import ProcessPoolExecutor

        shares = [
            (d, unit, truth, indices[k::workers])
            for d, unit, truth, indices in jobs
            for k in range(workers)
        ]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(_score_share, shares, [options] * len(shares)))
    else:
        frames = [_score_share(job, options) for job in jobs]
    order = list(truths)  # the truths' own order (the named truths first, then any rivals)
    scores = pd.concat(frames, ignore_index=True).sort_values(
        ["truth", "replica"],
        kind="stable",
        key=lambda c: c.map(order.index) if c.name == "truth" else c,
    )
    scores = scores.reset_index(drop=True)
    return Calibration(scores, design, truths, n_replicas, time.monotonic() - start)


def _score_share(job, options) -> pd.DataFrame:
    """The scored replicas ``indices`` of one truth (one worker's share of :func:`calibrate`)."""
    design, unit, truth, indices = job
    frames = []
    for i in indices:
        rng = np.random.default_rng([options["seed"], i, (*TRUTHS, *RIVAL_TRUTHS).index(unit)])
        rows = score_replica(
            draw(design, truth, rng),
            rules=options["rules"],
            n_boot=options["n_boot"],
            seed=options["seed"] + i,
            per_pipeline=options["per_pipeline"],
        )
        frames.append(pd.DataFrame(rows).assign(truth=unit, replica=i))
    if not frames:
        return pd.DataFrame(columns=["verdict", "subject", "said", "wrong", "truth", "replica"])
    return pd.concat(frames, ignore_index=True)


def rate_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Truth x verdict x said -> count, rate and its Wilson interval (see :meth:`Calibration.rates`)."""
    rows = []
    for (truth, verdict), group in scores.groupby(["truth", "verdict"], sort=False):
        n = len(group)
        for said, part in group.groupby("said", sort=False):
            lo, hi = wilson_interval(len(part), n)
            rows.append(
                {
                    "truth": truth,
                    "verdict": verdict,
                    "said": said,
                    "n": n,
                    "count": len(part),
                    "rate": len(part) / n,
                    "lo": lo,
                    "hi": hi,
                    "wrong": bool(part["wrong"].iloc[0]),
                }
            )
    return pd.DataFrame(rows)


def error_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Truth x verdict -> ``n``, ``wrong`` (count), ``error`` (rate), ``lo``, ``hi`` (Wilson 95%),
    and ``cannot_tell``, the rate of replicas whose verdict named nothing (a low error with a high
    ``cannot_tell`` is a verdict that never decides, not a good one)."""
    rows = []
    for (truth, verdict), group in scores.groupby(["truth", "verdict"], sort=False):
        n, k = len(group), int(group["wrong"].sum())
        lo, hi = wilson_interval(k, n)
        rows.append(
            {
                "truth": truth,
                "verdict": verdict,
                "n": n,
                "wrong": k,
                "error": k / n,
                "lo": lo,
                "hi": hi,
                "cannot_tell": float((group["said"].astype(str) == "cannot tell").mean()),
            }
        )
    return pd.DataFrame(rows)


def allowed_verdicts(scores: pd.DataFrame, verdict: str = "unit decision (rank)") -> dict:
    """Per subject (memory) of ``verdict``: ``{said: worst error rate}`` for each named outcome, the
    largest over the truths where saying it is wrong (:func:`~initmem.bridge.study.synthetic.right_verdict`
    differs) of the fraction of replicas that said it."""
    part = scores[scores["verdict"] == verdict]
    out: dict = {}
    for subject, group in part.groupby("subject", sort=False):
        worst = {}
        for said in unit_decision.DECIDING_UNITS:
            rates = [
                float((g["said"] == said).mean())
                for truth, g in group.groupby("truth", sort=False)
                if right_verdict(truth) != said
            ]
            worst[said] = max(rates) if rates else math.nan
        out[subject] = worst
    return out


def worst_errors(scores: pd.DataFrame, verdict: str = "unit decision (rank)") -> dict:
    """Per subject (memory) of ``verdict``: ``(error, truth, n_truths)``, the largest over the
    truths of the fraction of replicas whose verdict was wrong, the truth where it is, and how many
    truths were drawn (the verdict's error on this design, stated as its worst)."""
    out = {}
    for subject, group in scores[scores["verdict"] == verdict].groupby("subject", sort=False):
        rates = group.groupby("truth", sort=False)["wrong"].mean()
        out[subject] = (float(rates.max()), str(rates.idxmax()), int(rates.size))
    return out


# ----------------------------------------------------------------------------------- power
def power_table(
    design: Design,
    n_replicas: int = 100,
    *,
    multipliers=MULTIPLIERS,
    truths: dict | None = None,
    n_boot: int = 100,
    seed: int = 0,
    cells=None,
    workers: int = 1,
) -> pd.DataFrame:
    """Power and error of the unit decision (rank rule) as seeds and pipelines grow.

    One row per (seeds multiplier, pipelines multiplier, truth, memory): ``seeds``, ``pipelines``
    (the multipliers), ``n_seeds``, ``n_pipelines`` (the design's), ``power`` (rate of the right
    verdict: the truth's unit; "cannot tell" under ``neither``), ``error`` (rate of a wrong named
    unit) with Wilson intervals ``power_lo``, ``power_hi``, ``error_lo``, ``error_hi``, ``n``, and
    ``said_accumulated``, ``said_epochs`` (how often each unit is named).
    :meth:`Design.scaled` says how pipelines are added; ``cells``: the (seeds, pipelines) pairs to
    compute instead of every pair of ``multipliers``.
    """
    rows = []
    workers = capped_workers(workers)  # said once here, not once per cell
    cells = cells or [(s, p) for s in multipliers for p in multipliers]
    for s, p in cells:
        scaled = design.scaled(seeds=s, pipelines=p)
        result = calibrate(
            scaled,
            n_replicas,
            truths=truths,
            n_boot=n_boot,
            seed=seed,
            per_pipeline=False,
            workers=workers,
        )
        part = result.scores[result.scores["verdict"] == "unit decision (rank)"]
        for (truth, subject), group in part.groupby(["truth", "subject"], sort=False):
            right = right_verdict(truth)
            n = len(group)
            good, bad = int((group["said"] == right).sum()), int(group["wrong"].sum())
            power_lo, power_hi = wilson_interval(good, n)
            error_lo, error_hi = wilson_interval(bad, n)
            rows.append(
                {
                    "seeds": s,
                    "pipelines": p,
                    "n_seeds": scaled.n_seeds,
                    "n_pipelines": len(scaled.pipelines),
                    "truth": truth,
                    "memory": subject,
                    "n": n,
                    "power": good / n,
                    "power_lo": power_lo,
                    "power_hi": power_hi,
                    "error": bad / n,
                    "error_lo": error_lo,
                    "error_hi": error_hi,
                    **{
                        f"said_{u}": float((group["said"] == u).mean())
                        for u in unit_decision.DECIDING_UNITS
                    },
                }
            )
    return pd.DataFrame(rows)


def design_that_tells(power: pd.DataFrame, memory_name: str, unit: str, target: float = 0.8) -> str:
    """The smallest design of ``power`` (fewest runs) whose rank decision on ``memory_name`` names
    ``unit`` in at least ``target`` of the replicas where it is true, and names it in at most
    :data:`MAX_ERROR` of the replicas of every truth where it is wrong (``said_<unit>``); a
    sentence ("5 seeds x 12 pipelines ..." or none found)."""
    part = power[power["memory"] == memory_name]
    candidates = []
    for (s, p), group in part.groupby(["seeds", "pipelines"]):
        mine = group[group["truth"] == unit]
        wrong = group["truth"].map(right_verdict) != unit
        others = group[wrong][f"said_{unit}"]
        if mine.empty or mine["power"].iloc[0] < target or (others > MAX_ERROR).any():
            continue
        candidates.append(
            (
                s * p,
                s,
                p,
                group["n_seeds"].iloc[0],
                group["n_pipelines"].iloc[0],
                mine["power"].iloc[0],
            )
        )
    if not candidates:
        largest = part[["n_seeds", "n_pipelines"]].max()
        return (
            f"no design up to {largest['n_seeds']} seeds x {largest['n_pipelines']} pipelines tells "
            f"(power >= {target:.0%}, {unit} named in <= {MAX_ERROR:.0%} under the truths where it "
            "is wrong)"
        )
    _, s, p, n_seeds, n_pipes, power_value = min(candidates)
    return (
        f"{n_seeds} seeds x {n_pipes} pipelines (x{s} seeds, x{p} pipelines) would tell: power "
        f"{power_value:.0%} with {unit} named in <= {MAX_ERROR:.0%} under the truths where it is "
        "wrong"
    )


__all__ = [
    "MAX_ERROR",
    "MULTIPLIERS",
    "NULL_SPREAD_PP",
    "SYNTHETIC_RIVALS",
    "Calibration",
    "StudyCalibration",
    "allowed_verdicts",
    "apply_calibration",
    "calibrate_study",
    "calibrate",
    "design_that_tells",
    "error_table",
    "power_table",
    "rate_table",
    "score_replica",
    "truths_from",
    "wilson_interval",
    "worst_errors",
]


# ----------------------------------------------------------------------------------- the study's own
def truths_from(report, *, rivals: bool = False) -> dict:
    """The named truths (S1, S1'; :data:`~initmem.bridge.study.synthetic.NAMED_TRUTHS`; with
    ``rivals`` also :data:`~initmem.bridge.study.synthetic.RIVAL_TRUTHS`) with the
    noise of a real sweep: ``report`` a
    :class:`~initmem.bridge.fitting.BridgeReport` (its ``cubes`` and ``units``).

    ``sigma_norm``: the pooled seed-to-seed standard deviation of the norm memory over the evaluations
    after init; ``sigma_acc``: that of the test accuracy per (pipeline, alpha, evaluation) (the seed
    effect shared by a seed's alphas is left in it, ``sigma_seed = 0``: the spread comes out noisier,
    the calibration conservative); ``gap``: the largest spread at a pipeline's first evaluation after
    init; ``scale`` and ``shape`` of each unit's truth: the stretched exponential fit of the norm memory
    against that unit (:func:`~initmem.bridge.fits.stretched_exponential_fit`, the ``units`` table),
    the default where missing. Derived here.
    """
    cubes = getattr(report, "cubes", {}) or {}
    defaults = Truth()
    sigma_norm = _pooled_sd([c.values[:, 1:] for c in cubes.get("norm", [])], axis=0)
    sigma_acc = _pooled_sd([c.values for c in cubes.get("spread", [])], axis=0)
    gaps = [c.memory()[0] / 100.0 for c in cubes.get("spread", []) if c.values.shape[-1]]
    common = {
        "sigma_norm": sigma_norm if np.isfinite(sigma_norm) else defaults.sigma_norm,
        "sigma_acc": sigma_acc if np.isfinite(sigma_acc) else defaults.sigma_acc,
        "sigma_seed": 0.0 if np.isfinite(sigma_acc) else defaults.sigma_seed,
        "gap": float(np.nanmax(gaps)) if gaps and np.isfinite(np.nanmax(gaps)) else defaults.gap,
    }
    units = getattr(report, "units", pd.DataFrame())
    out = {}
    for name in (*TRUTHS, *(RIVAL_TRUTHS if rivals else ())):
        settings = (NAMED_TRUTHS | RIVAL_TRUTHS)[name]
        unit, scale, shape = settings["unit"], None, 1.0
        fitted = unit != "neither" and not settings.get("decay_only", False)
        if fitted and not units.empty and "scale" in units:
            row = units[(units["memory"] == "norm") & (units["unit"] == unit)]
            if not row.empty and np.isfinite(row["scale"].iloc[0]) and row["scale"].iloc[0] > 0:
                scale, shape = float(row["scale"].iloc[0]), float(row["shape"].iloc[0])
        out[name] = Truth(**(settings | {"scale": scale, "shape": shape} | common))
    return out


def _pooled_sd(arrays, axis: int) -> float:
    """sqrt of the mean over cells of the sample variance along ``axis`` (seeds), NaN with none."""
    variances = []
    for a in arrays:
        if a.shape[axis] >= 2 and a.size:
            variances.append(np.nanvar(a, axis=axis, ddof=1).ravel())
    if not variances:
        return math.nan
    values = np.concatenate(variances)
    values = values[np.isfinite(values)]
    return float(np.sqrt(values.mean())) if values.size else math.nan


@dataclass
class StudyCalibration:
    """The study's verdicts calibrated on its own design: ``calibration`` (:class:`Calibration`),
    ``allowed`` (:func:`allowed_verdicts` of the rank decision), ``tells`` (per memory whose verdict
    is "cannot tell": the design that would tell, :func:`design_that_tells`), ``power`` (the cells of
    :func:`power_table` computed for it), ``seconds``, and ``rivals`` (with the rival comparison
    calibrated: :func:`worst_errors` of "unit against its rivals" per memory, over the named and
    the rival truths; empty without)."""

    calibration: Calibration
    allowed: dict
    tells: dict
    power: pd.DataFrame
    seconds: float
    rivals: dict = field(default_factory=dict)

    def rival_named(self, memory_name: str) -> tuple[bool, str]:
        """May the rival comparison name its candidate for ``memory_name``? ``(allowed, clause)``:
        allowed where its worst calibrated error over the truths is at most :data:`MAX_ERROR`; the
        clause states that worst error, the truth where it is, and the truths and replicas."""
        worst = self.rivals.get(memory_name)
        if worst is None:
            return False, "the comparison against the rivals was not calibrated on this design"
        error, truth, n_truths = worst
        clause = (
            f"calibrated: naming it is wrong in at most {error:.1%} of "
            f"{self.calibration.n_replicas} synthetic replicas, its worst over {n_truths} truths "
            f"(under {truth!r}; the rival truths included)"
        )
        return error <= MAX_ERROR, clause


def calibrate_study(
    report,
    design: Design,
    n_replicas: int,
    *,
    n_boot: int = 200,
    seed: int = 0,
    search: bool = True,
    rivals: bool = False,
    workers: int = 1,
) -> StudyCalibration:
    """Calibrate the study's verdicts on ``design`` with the noise of ``report``
    (:func:`truths_from`); where its decision cannot name a calibrated unit, search the power table
    (fewest runs first, ``max(10, n_replicas // 4)`` replicas per cell, stopping at the first design
    that tells) for the design that would (``search``). With ``rivals`` the comparison of the
    candidate against its rivals is scored too, under the named and the rival truths
    (:attr:`StudyCalibration.rivals`). ``workers``: processes (:func:`calibrate`; the same table)."""
    start = time.monotonic()
    truths = truths_from(report, rivals=rivals)
    rules = ("rank", "rivals") if rivals else ("rank",)
    result = calibrate(
        design, n_replicas, truths=truths, rules=rules, n_boot=n_boot, seed=seed, workers=workers
    )
    allowed = allowed_verdicts(result.scores)
    rival_worst = worst_errors(result.scores, "unit against its rivals") if rivals else {}
    decision = report.decision
    tells, cells = {}, []
    if search and not decision.empty:
        for _, row in decision.iterrows():
            unit = row.get("winner")
            if (
                unit in unit_decision.DECIDING_UNITS
                and allowed.get(row["memory"], {}).get(unit, 1) <= MAX_ERROR
            ):
                continue
            if row.get("reason"):  # more of the same design cannot lift a guard of the design
                tells[row["memory"]] = (
                    f"more seeds or pipelines of this design cannot tell ({row['reason']})"
                )
                continue
            guess = (
                unit_decision.DECIDING_UNITS[0]
                if row.get("rank_diff", 0) >= 0
                else unit_decision.DECIDING_UNITS[1]
            )
            named = {name: truths[name] for name in TRUTHS}  # the rank rule's truths
            tells[row["memory"]], found = _search(
                design, named, row["memory"], guess, n_replicas, seed, workers
            )
            cells += found
    power = pd.concat(cells, ignore_index=True) if cells else pd.DataFrame()
    return StudyCalibration(
        result, allowed, tells, power, time.monotonic() - start, rivals=rival_worst
    )


def _search(design, truths, memory_name, unit, n_replicas, seed, workers=1):
    """The first design of (seeds, pipelines) multipliers, fewest runs first, that tells ``unit``."""
    order = sorted(
        ((s, p) for s in MULTIPLIERS for p in MULTIPLIERS if (s, p) != (1, 1)),
        key=lambda c: (c[0] * c[1], c[1]),
    )
    cells = []
    for s, p in order:
        cell = power_table(
            design,
            max(10, n_replicas // 4),
            multipliers=None,
            cells=[(s, p)],
            truths=truths,
            n_boot=100,
            seed=seed,
            workers=workers,
        )
        cells.append(cell)
        sentence = design_that_tells(cell, memory_name, unit)
        if not sentence.startswith("no design"):
            return sentence, cells
    return design_that_tells(pd.concat(cells, ignore_index=True), memory_name, unit), cells


def apply_calibration(
    decision: pd.DataFrame, calibrated: StudyCalibration | None, command: str = ""
) -> pd.DataFrame:
    """The decision with only calibrated winners: a named unit stays where its calibrated error rate
    is at most :data:`MAX_ERROR`, else "cannot tell" with the rate and the design that would tell.
    Without a calibration (None) a winner "epochs" (the negative verdict on accumulated
    regularization) becomes "cannot tell"; ``command`` says how to calibrate."""
    if decision.empty:
        return decision
    decision = decision.copy()
    texts, winners, notes, whys = [], [], [], []
    for _, row in decision.iterrows():
        winner, why, note = row["winner"], "", ""
        if calibrated is None:
            note = (
                f"not calibrated on this design ({command or 'initmem study DIR --calibrate 200'})"
            )
            if winner == unit_decision.DECIDING_UNITS[1]:
                winner, why = "cannot tell", "a verdict for epochs needs its error rate calibrated"
        else:
            n = calibrated.calibration.n_replicas
            worst = calibrated.allowed.get(row["memory"], {})
            if winner in unit_decision.DECIDING_UNITS:
                rate = worst.get(winner, math.nan)
                note = (
                    f"calibrated: {winner} named wrongly in at most {rate:.1%} of {n} synthetic "
                    "replicas per truth"
                )
                error = worst_errors(calibrated.calibration.scores).get(row["memory"])
                if error is not None:
                    note += (
                        f"; the decision is wrong in {error[0]:.1%} of replicas under the truth "
                        f"{error[1]!r}, its worst over the {error[2]} truths"
                    )
                if not rate <= MAX_ERROR:
                    why = (
                        f"naming {winner} here would be wrong in {rate:.1%} of {n} synthetic "
                        f"replicas (> {MAX_ERROR:.0%})"
                    )
                    winner = "cannot tell"
            if winner == "cannot tell" and row["memory"] in calibrated.tells:
                note = calibrated.tells[row["memory"]]
        winners.append(winner)
        whys.append(why)
        notes.append(note)
    decision["winner"] = winners
    decision["why_not"] = whys
    decision["calibration"] = notes
    for _, row in decision.iterrows():
        texts.append(unit_decision.unit_decision_text(row))
    decision["text"] = texts
    return decision
