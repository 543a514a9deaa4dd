"""Measured forgetting: how fast each pipeline of a sweep forgets alpha, read from its runs' logs.

The memories themselves, as curves over training time, are :mod:`initmem.empirical.curves`
(definitions M2 to M4 of :mod:`initmem.empirical.memory`: norm memory, accuracy spread, prediction
disagreement); this module says how fast they went.

The norm memory's forgetting is the one decision of :mod:`initmem.theory.criterion`
(:func:`~initmem.theory.criterion.decide`): the first evaluation where the seed-mean ``|memory|`` of
the combined layers is at most 1/e, with its 95% t-interval over seeds (:func:`decide_seeds`); a
reversed end (interval below 0) is not forgotten; a curve that is not forgotten within the run is
reported with ``forgotten = False`` and ``tau`` set to the time the run lasted, a lower bound, and the
least-squares fit ``exp(-t / tau)`` (:func:`initmem.bridge.fits.fit_decay_time`) only as an **extrapolation**
(``tau_fit_steps``, labelled so). Function memories (spread, disagreement) are e-fold times of a
fit of their normalized curves, with a bootstrap over seeds (:func:`bootstrap_decay`).

Function memories rise while the networks learn before they can decay, so their fit window starts at
the curve's maximum after the pipeline has learned (seed-mean validation accuracy at 90% of its best).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from initmem.bridge import fits
from initmem.bridge.fits import bootstrap_decay
from initmem.empirical import memory, runfolder, tables
from initmem.empirical.curves import (
    MemoryDataError,
    accuracy_curves,
)
from initmem.theory.criterion import Decision, decide

#: Function memory is fitted once the seed-mean validation accuracy reaches this fraction of its best.
LEARNED_FRACTION = 0.9
#: The sweep's runs lack what a measure needs (e.g. a second alpha); the message says what to add.
#: One class with :class:`initmem.empirical.curves.MemoryDataError` (the curves raise it).
BridgeDataError = MemoryDataError


# ----------------------------------------------------------------------------------- sweep layout
def prepare_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished runs of a ``load_sweep`` table, with its ``pipeline`` and ``label`` columns.

    Pipelines are :func:`initmem.empirical.tables.pipeline_id` (every hashed config field except
    alpha and seed); a table without them gets them here. Raises :class:`BridgeDataError` when no run has
    finished.
    """
    if runs.empty:
        raise BridgeDataError("the sweep has no runs")
    for column in ("alpha", "seed", "hash", "run_dir"):
        if column not in runs.columns:
            raise BridgeDataError(
                f"runs lack the column '{column}' (load them with load_sweep(DIR))"
            )
    runs = runs.copy()
    if "pipeline" not in runs.columns:
        fields = [c for c in tables.pipeline_columns() if c in runs.columns]
        runs["pipeline"] = [
            tables.pipeline_id(dict(zip(fields, row, strict=True)))
            for row in runs[fields].itertuples(index=False)
        ]
    if "label" not in runs.columns:
        if "variant" not in runs.columns:
            runs["variant"] = "sweep"
        runs["label"] = tables.pipeline_labels(runs)
    if "status" in runs.columns and "test_acc" in runs.columns:
        runs = tables.finished_runs(runs)
    if runs.empty:
        raise BridgeDataError(
            "no run of the sweep has finished yet (run `initmem sweep run` first)"
        )
    return runs.reset_index(drop=True)


def require_alphas(
    runs: pd.DataFrame, needed: int = 2, planned: pd.DataFrame | None = None
) -> None:
    """Raise :class:`BridgeDataError` unless some pipeline has finished runs at ``needed`` or more alphas.

    ``planned``: every run of the sweep (``load_sweep``'s table, finished or not); where its grid has
    the alphas and only unfinished runs lack them, the message says to finish the sweep instead."""
    per_pipeline = runs.groupby("pipeline")["alpha"].nunique()
    if per_pipeline.empty or per_pipeline.max() < needed:
        if planned is not None and "pipeline" in planned and "status" in planned:
            if planned.groupby("pipeline")["alpha"].nunique().max() >= needed:
                waiting = (
                    planned["status"]
                    .value_counts()
                    .drop(list(runfolder.FINISHED_STATES), errors="ignore")
                )
                states = ", ".join(f"{n} {state}" for state, n in waiting.items())
                raise BridgeDataError(
                    f"only {len(runs)} of the sweep's {len(planned)} runs have finished ({states}): "
                    "the grid has the alphas to compare; finish the sweep (`initmem sweep run`) first"
                )
        alphas = ", ".join(_short(a) for a in sorted(runs["alpha"].unique()))
        raise BridgeDataError(
            f"the sweep has only one alpha per pipeline ({alphas}): forgetting is measured between "
            "runs that differ only in the init scale; add a second alpha to the sweep's grid"
        )


def load_logs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-evaluation logs (``load_epochs``) and per-layer logs (``load_layers``) of the runs."""
    epochs, layers = tables.load_epochs(runs), tables.load_layers(runs)
    if epochs.empty or "step" not in epochs.columns:
        raise BridgeDataError("the runs have no per-evaluation logs (log.jsonl / metrics.parquet)")
    if not (epochs["step"] > 0).any():
        diverged = int((runs["status"] == "diverged").sum()) if "status" in runs else 0
        raise BridgeDataError(
            f"no run has an evaluation after init ({len(runs)} finished runs, {diverged} diverged "
            "before their first epoch ended): there is no forgetting to measure; rerun the sweep "
            "with settings that train (each run's reason is in its runs/<hash>/result.json)"
        )
    return epochs, layers


def steps_per_epoch(table: pd.DataFrame) -> pd.Series:
    """Optimizer steps per epoch of each pipeline, read from its logged evaluations.

    ``table`` has columns ``pipeline``, ``epoch`` and ``step`` (one row per evaluation, any number of
    runs). The value is the largest ``step / epoch`` after epoch 0: a full epoch, the config's
    ``steps_per_epoch`` (a final partial epoch of a run whose length is given in steps has a smaller
    ratio). NaN for a pipeline that logged epoch 0 only. Indexed by pipeline, in order of appearance.
    """
    rows = table[(table["epoch"] > 0) & table["step"].notna()]
    ratio = (rows["step"] / rows["epoch"]).groupby(rows["pipeline"]).max()
    return ratio.reindex(table["pipeline"].unique()).astype(float)


# ----------------------------------------------------------------------------------- norm memory
def decide_seeds(steps, curves, *, level: float = 0.95) -> Decision:
    """The one decision of "forgotten" (:func:`initmem.theory.criterion.decide`) on a memory
    measured over seeds: ``curves`` (n_seeds, n_steps) on the evaluations ``steps``; at each, the
    seed mean with its Student-t ``level`` interval (:func:`initmem.empirical.memory.mean_interval`).
    Where the mean is not forgotten within the run, the e-fold time of ``exp(-t / tau)`` fitted to it
    (from the first step) is kept as the labelled extrapolation. One curve (a law's, or one seed)
    is its own interval."""
    steps = np.asarray(steps, dtype=np.float64)
    curves = np.atleast_2d(np.asarray(curves, dtype=np.float64))
    rows = [memory.mean_interval(curves[:, j], level=level) for j in range(curves.shape[1])]
    mean, lo, hi = (np.array(column, dtype=np.float64) for column in zip(*rows, strict=True))
    lo, hi = np.where(np.isnan(lo), mean, lo), np.where(np.isnan(hi), mean, hi)  # one seed
    decision = decide(steps, mean, lo, hi)
    if decision.state != "not forgotten" or steps.size < 2:
        return decision
    try:
        tau = fits.fit_decay_time(steps - steps.min(), mean).tau
    except ValueError:  # fewer than one finite point after the start
        return decision
    return decide(steps, mean, lo, hi, extrapolated=tau)


def decision_columns(decision: Decision) -> dict:
    """The time columns of :func:`norm_forgetting_times` from one :class:`Decision` (steps)."""
    return {
        "state": decision.state,
        "tau_steps": decision.reported_step,
        "tau_lo_steps": decision.step_lo,
        "tau_hi_steps": decision.step_hi,
        "tau_fit_steps": decision.step if decision.forgotten else decision.extrapolated,
        "t_span_steps": decision.t_end,
        "forgotten": decision.forgotten,
        "memory_end": decision.memory_end,
        "memory_end_lo": decision.memory_end_lo,
        "memory_end_hi": decision.memory_end_hi,
        "decision": decision.text(),
    }


def norm_forgetting_times(curves: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Forgetting of the norm memory, per pipeline and layer, by the one decision (:func:`decide_seeds`).

    Times are in optimizer steps since the first evaluation: ``tau_steps`` the first evaluation with
    the seed-mean ``|memory|`` at most 1/e (the lower bound ``t_span_steps`` when not forgotten,
    NaN when undefined), [``tau_lo_steps``, ``tau_hi_steps``] its interval (``inf``: not reached),
    ``tau_fit_steps`` the same step when forgotten, else the **extrapolated** e-fold time of the
    fit (never a decision), ``tau_epochs``; ``state`` (forgotten, not forgotten, reversed,
    undefined), ``forgotten``, ``memory_end`` [``memory_end_lo``, ``memory_end_hi``] at the last
    evaluation, ``decision`` (the phrase), ``n_seeds``. The pipeline's decision is the layer
    :data:`~initmem.empirical.curves.SCALE_INVARIANT_MEAN` (:data:`initmem.theory.criterion.LAYER_RULE`).
    ``level``: the interval's level.
    """
    per_epoch = steps_per_epoch(curves)
    rows = []
    skipped = {}  # pipeline -> its label: no evaluation after init on both alphas
    for (pipeline, layer), group in curves.groupby(["pipeline", "layer"], sort=False):
        table = group.pivot_table(index="seed", columns="step", values="memory", dropna=False)
        steps = table.columns.to_numpy(dtype=np.float64)
        if not (steps > steps.min()).any():  # both alphas logged the init alone: no decay to fit
            skipped[pipeline] = (
                f"{group['label'].iloc[0]} ({pipeline})" if "label" in group else pipeline
            )
            continue
        decision = decide_seeds(steps - steps.min(), table.to_numpy(), level=level)
        columns = decision_columns(decision)
        rows.append(
            {
                "pipeline": pipeline,
                "layer": layer,
                "scale_invariant": bool(group["scale_invariant"].iloc[0]),
                "alpha_lo": group["alpha_lo"].iloc[0],
                "alpha_hi": group["alpha_hi"].iloc[0],
                **columns,
                "tau_epochs": columns["tau_steps"] / per_epoch[pipeline],
                "n_seeds": int(table.shape[0]),
            }
        )
    for label in skipped.values():
        warnings.warn(
            f"pipeline {label}: its norm memory has no evaluation after init on both "
            "alphas (the runs of one alpha diverged before their first evaluation: see their "
            "result.json); left out of the forgetting times",
            NoDecayWarning,
            stacklevel=2,
        )
    return pd.DataFrame(rows)


class NoDecayWarning(UserWarning):
    """A pipeline left out of the forgetting times: its memory curve has no time after init."""


# ----------------------------------------------------------------------------------- function memory
def function_forgetting_times(
    runs: pd.DataFrame,
    epochs: pd.DataFrame,
    disagreement: pd.DataFrame | None = None,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    accuracy: tuple | None = None,
) -> pd.DataFrame:
    """Decay time of the accuracy spread and of the prediction disagreement, per pipeline.

    The fit window starts at the curve's maximum over the evaluations after the pipeline has learned
    (seed-mean validation accuracy >= :data:`LEARNED_FRACTION` of its best); the curve is divided by its
    value there and fitted by :func:`fit_decay_time`, with a bootstrap over seeds (resampled jointly
    across alphas). Columns: ``pipeline``, ``memory`` ("spread" | "disagreement"), ``start_step``,
    ``value_start``, ``value_end`` (pp for the spread, fraction for the disagreement) and the time
    columns of :func:`norm_forgetting_times` (measured from ``start_step``). ``accuracy``:
    :func:`accuracy_pair` of the runs, when already built.
    """
    acc, val = accuracy or accuracy_pair(runs, epochs)
    epoch_steps = steps_per_epoch(acc)
    options = dict(n_boot=n_boot, level=level, seed=seed)
    rows = []
    for pipeline, group in acc.groupby("pipeline"):
        if group["alpha"].nunique() < 2:
            continue
        learned = learned_step(val[val["pipeline"] == pipeline] if val is not None else group)
        per_epoch = epoch_steps[pipeline]
        cube = group.pivot_table(index=["seed", "alpha"], columns="step", values="test_acc")
        seeds = cube.index.get_level_values("seed").unique()
        alphas = cube.index.get_level_values("alpha").unique()
        full = pd.MultiIndex.from_product([seeds, alphas], names=["seed", "alpha"])
        stack = cube.reindex(full).to_numpy().reshape(len(seeds), len(alphas), cube.shape[1])
        steps = cube.columns.to_numpy(dtype=np.float64)
        rows.append(
            _function_decay(
                pipeline,
                "spread",
                steps,
                np.moveaxis(stack, 2, 1),
                _spread_of,
                learned,
                per_epoch,
                options,
            )
        )
        if disagreement is None or disagreement.empty:
            continue
        dis = disagreement[disagreement["pipeline"] == pipeline]
        if dis.empty:
            continue
        table = dis.pivot_table(index="seed", columns="epoch", values="disagreement")
        dis_steps = group.groupby("epoch")["step"].first().reindex(table.columns).to_numpy(float)
        rows.append(
            _function_decay(
                pipeline,
                "disagreement",
                dis_steps,
                table.to_numpy()[:, :, None],
                _mean_of,
                learned,
                per_epoch,
                options,
            )
        )
    return pd.DataFrame([row for row in rows if row is not None])


def accuracy_pair(runs: pd.DataFrame, epochs: pd.DataFrame) -> tuple:
    """``(test, validation)`` accuracy curves of the runs (:func:`accuracy_curves`; validation None
    when the logs lack it): built once and handed to every function memory of :func:`fit`."""
    val = accuracy_curves(runs, epochs, "val_acc") if "val_acc" in epochs else None
    return accuracy_curves(runs, epochs), val


def _spread_of(sample: np.ndarray) -> np.ndarray:
    """Spread (pp) over alphas of the seed-mean accuracy: (seed, step, alpha) -> (step,)."""
    return 100.0 * np.ptp(np.nanmean(sample, axis=0), axis=1)


def _mean_of(sample: np.ndarray) -> np.ndarray:
    """Seed mean of a one-column stack: (seed, step, 1) -> (step,)."""
    return np.nanmean(sample[:, :, 0], axis=0)


def _function_decay(pipeline, memory, steps, stack, curve_of, learned, per_epoch, options):
    """One row of :func:`function_forgetting_times`, or None when the window is too short."""
    curve = curve_of(stack)
    window = decay_window(steps, curve, learned)
    if window is None:
        return None
    start = window[0]
    t = steps[start:] - steps[start]
    if curve[start] > 0:

        def reduce(sample):
            part = curve_of(sample)[start:]
            return part / part[0] if part[0] > 0 else part * np.nan

        result = bootstrap_decay(t, stack, reduce=reduce, **options)
    else:  # no memory left at the start of the window: forgotten by then
        result = dict(tau=0.0, tau_fit=0.0, tau_lo=np.nan, tau_hi=np.nan, t_span=float(t.max()))
        result.update(forgotten=True, r2=np.nan, n_seeds=stack.shape[0])
    return {
        "pipeline": pipeline,
        "memory": memory,
        "start_step": float(steps[start]),
        "value_start": float(curve[start]),
        "value_end": float(curve[-1]),
        **_in_steps(result),
        "tau_epochs": result["tau"] / per_epoch,
    }


def learned_step(acc: pd.DataFrame) -> float:
    """First step at which the pipeline's seed-mean validation (or test) accuracy reaches 90% of best."""
    metric = "val_acc" if "val_acc" in acc.columns else "test_acc"
    mean = acc.groupby("step")[metric].mean()
    if mean.dropna().empty:
        return float(mean.index.min())
    reached = mean.index[mean >= LEARNED_FRACTION * mean.max()]
    return float(reached.min())


def decay_window(steps: np.ndarray, curve: np.ndarray, learned: float) -> tuple[int, int] | None:
    """Indices (start, end) of the decay window of a function memory: from the curve's maximum at
    or after ``learned`` (the first index of the latest evaluations when the maximum is the last)
    to the end; None with fewer than 2 finite evaluations there. The rule fixed for every fit and
    decision on a function memory: a spread that first rises is read from its peak on."""
    after = np.flatnonzero((steps >= learned) & np.isfinite(curve))
    if after.size < 2:
        return None
    start = int(after[np.argmax(curve[after])])
    if start >= len(steps) - 1:
        start = int(after[-2])
    return start, len(steps) - 1


def _in_steps(result: dict) -> dict:
    return {
        "tau_steps": result["tau"],
        "tau_lo_steps": result["tau_lo"],
        "tau_hi_steps": result["tau_hi"],
        "tau_fit_steps": result["tau_fit"],
        "t_span_steps": result["t_span"],
        "forgotten": result["forgotten"],
        "fit_r2": result["r2"],
        "n_seeds": result["n_seeds"],
    }


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_short(v) for v in value)
    return str(value)


__all__ = [
    "BridgeDataError",
    "accuracy_pair",
    "decay_window",
    "decide_seeds",
    "decision_columns",
    "function_forgetting_times",
    "learned_step",
    "load_logs",
    "norm_forgetting_times",
    "prepare_runs",
    "require_alphas",
    "steps_per_epoch",
]
