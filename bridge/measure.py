"""Measured forgetting: how fast each pipeline of a sweep forgets alpha, read from its runs' logs.

Three memories, each a curve over training time (optimizer steps; epochs alongside):

* **norm memory** (per layer): ``m(t) = log(|w|_hi(t) / |w|_lo(t)) / log(|w|_hi(0) / |w|_lo(0))``, the
  log-ratio of the weight norms of the runs with the largest and the smallest alpha (same seed), divided
  by its value at init (``log(alpha_hi / alpha_lo)`` for a scaled layer). For a scale-invariant layer
  this is also ``-1/2`` times the log-ratio of effective learning rates ``lr / |w|^2``. ``m = 1``: alpha
  fully remembered; ``m = 0``: forgotten. Layers that alpha does not scale are left out.
* **accuracy spread**: max minus min over alphas of the seed-mean test accuracy at each evaluation (pp).
* **prediction disagreement**: fraction of test images on which two runs of different alphas (same seed)
  predict different classes, averaged over alpha pairs and seeds.

A forgetting time is an e-fold time from a least-squares fit of the whole (normalized) curve by
``exp(-t / tau)`` (:func:`fit_decay_time`), not from one crossing point. A curve that has not shrunk by
e within the run is a result too: it is reported with ``forgotten = False`` and ``tau`` set to the
time the run lasted, a lower bound. Intervals come from a bootstrap over seeds (:func:`bootstrap_decay`).

Function memories rise while the networks learn before they can decay, so their fit window starts at
the curve's maximum after the pipeline has learned (seed-mean validation accuracy at 90% of its best).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.empirical import runfolder

#: Name of the layer-averaged norm memory of every scaled scale-invariant layer of a pipeline.
SCALE_INVARIANT_MEAN = "all scale-invariant"
#: A layer counts as scaled by alpha when its init log-ratio is at least this fraction of log(a_hi/a_lo).
SCALED_FRACTION = 0.5
#: Function memory is fitted once the seed-mean validation accuracy reaches this fraction of its best.
LEARNED_FRACTION = 0.9


class BridgeDataError(ValueError):
    """The sweep's runs lack what a measure needs (e.g. a second alpha); the message says what to add.

    Not :class:`initmem.empirical.sweep.BridgeDataError` (a sweep file or folder that cannot be read or run):
    this one is raised on readable runs that cannot be measured.
    """


# ----------------------------------------------------------------------------------- sweep layout
def prepare_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished runs of a ``load_sweep`` table, with its ``pipeline`` and ``label`` columns.

    Pipelines are :func:`initmem.empirical.memory.pipeline_id` (every hashed config field except
    alpha and seed); a table without them gets them here. Raises :class:`BridgeDataError` when no run has
    finished.
    """
    from initmem.empirical import memory

    if runs.empty:
        raise BridgeDataError("the sweep has no runs")
    for column in ("alpha", "seed", "hash", "run_dir"):
        if column not in runs.columns:
            raise BridgeDataError(
                f"runs lack the column '{column}' (load them with load_sweep(DIR))"
            )
    runs = runs.copy()
    if "pipeline" not in runs.columns:
        fields = [c for c in memory.pipeline_columns() if c in runs.columns]
        runs["pipeline"] = [
            memory.pipeline_id(dict(zip(fields, row, strict=True)))
            for row in runs[fields].itertuples(index=False)
        ]
    if "label" not in runs.columns:
        if "variant" not in runs.columns:
            runs["variant"] = "sweep"
        runs["label"] = memory.pipeline_labels(runs)
    if "status" in runs.columns and "test_acc" in runs.columns:
        runs = memory.finished_runs(runs)
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
    from initmem.empirical.memory import load_epochs, load_layers

    epochs, layers = load_epochs(runs), load_layers(runs)
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


# ----------------------------------------------------------------------------------- decay fits
@dataclass(frozen=True)
class DecayFit:
    """One fitted forgetting time.

    ``tau``: the e-fold time of the best fit ``exp(-t / tau)`` (unit of ``t``; ``inf`` when the curve
    does not decay at all); ``t_span``: how long the curve was observed; ``forgotten``: ``tau <= t_span``
    (the fitted curve shrank by e within the run); ``r2``: goodness of the fit.
    """

    tau: float
    t_span: float
    forgotten: bool
    r2: float

    @property
    def reported(self) -> float:
        """``tau`` when forgotten, else the lower bound ``t_span`` (not forgotten within the run)."""
        return self.tau if self.forgotten else self.t_span


def fit_decay_time(t: np.ndarray, memory: np.ndarray) -> DecayFit:
    """Fit ``memory(t) ~ exp(-t / tau)`` by least squares over the whole curve; ``memory(0) = 1``.

    ``t`` >= 0 (any time unit, e.g. steps since the curve's start), ``memory`` the curve divided by its
    value at ``t = 0``. The sum of squared residuals is minimized over ``log tau`` (a log-spaced grid,
    then a bounded Brent refinement); a best fit beyond 1e6 times the observed span is reported as
    ``tau = inf`` (no decay visible). NaN points are ignored.
    """
    from scipy.optimize import minimize_scalar

    t = np.asarray(t, dtype=np.float64)
    memory = np.asarray(memory, dtype=np.float64)
    if t.shape != memory.shape or t.ndim != 1:
        raise ValueError(f"t and memory must be 1-d of one shape (got {t.shape}, {memory.shape})")
    keep = np.isfinite(t) & np.isfinite(memory)
    t, memory = t[keep], memory[keep]
    if np.any(t < 0):
        raise ValueError("t must be >= 0 (time since the start of the curve)")
    positive = t[t > 0]
    if positive.size == 0:
        raise ValueError("t must hold at least one time > 0 to fit a decay")
    t_span = float(positive.max())

    def sse(log_tau):
        tau = np.exp(np.atleast_1d(log_tau))[:, None]
        return np.sum((memory[None, :] - np.exp(-t[None, :] / tau)) ** 2, axis=1)

    lo, hi = np.log(positive.min() / 100.0), np.log(t_span * 1e6)
    grid = np.linspace(lo, hi, 241)
    values = sse(grid)
    best = int(np.argmin(values))
    log_tau = grid[best]
    if 0 < best < len(grid) - 1:
        res = minimize_scalar(
            lambda x: float(sse(x)[0]), bounds=(grid[best - 1], grid[best + 1]), method="bounded"
        )
        log_tau = res.x if res.fun <= values[best] else log_tau
    tau = np.inf if log_tau >= hi - 1e-9 else float(np.exp(log_tau))
    residual = float(sse(log_tau)[0])
    total = float(np.sum((memory - memory.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else np.nan
    return DecayFit(tau=tau, t_span=t_span, forgotten=bool(tau <= t_span), r2=r2)


def bootstrap_decay(
    t: np.ndarray,
    curves: np.ndarray,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    reduce=None,
) -> dict:
    """Forgetting time of the seed-mean curve and its bootstrap interval over seeds.

    ``curves`` (n_seeds, n_times, ...) holds one curve per seed on the common times ``t``; ``reduce``
    maps a resampled stack to the normalized 1-d memory (default: the NaN-mean over seeds). The point
    estimate fits the reduction of all seeds; the interval is the ``level`` percentile range of the fits
    of ``n_boot`` resamples of seeds with replacement (NaN with one seed; ``inf`` ends allowed).
    Returns ``tau``, ``tau_lo``, ``tau_hi``, ``t_span``, ``forgotten``, ``r2``, ``n_seeds``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1) (got {level})")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0 (got {n_boot})")
    curves = np.asarray(curves, dtype=np.float64)
    reduce = reduce or (lambda stack: np.nanmean(stack, axis=0))
    point = fit_decay_time(t, reduce(curves))
    n_seeds = curves.shape[0]
    lo = hi = np.nan
    if n_seeds > 1 and n_boot > 0:
        rng = np.random.default_rng(seed)
        taus = np.full(n_boot, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns of a resample
            for i in range(n_boot):
                pick = rng.integers(0, n_seeds, n_seeds)
                try:
                    taus[i] = fit_decay_time(t, reduce(curves[pick])).tau
                except ValueError:  # a resample with no finite point left
                    continue
        q = (1 - level) / 2
        if np.isfinite(taus).any() or np.isinf(taus).any():
            lo, hi = np.nanquantile(taus, [q, 1 - q], method="lower")
    return {
        "tau": point.reported,
        "tau_fit": point.tau,
        "tau_lo": float(lo),
        "tau_hi": float(hi),
        "t_span": point.t_span,
        "forgotten": point.forgotten,
        "r2": point.r2,
        "n_seeds": n_seeds,
    }


# ----------------------------------------------------------------------------------- norm memory
def norm_memory_curves(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Norm memory of every scaled layer, per pipeline, seed and evaluation (tidy).

    ``runs`` from :func:`prepare_runs`; ``layers`` from :func:`load_logs`. Pairs the largest and smallest alpha of each pipeline that share a seed.
    Columns: ``pipeline``, ``seed``, ``layer``, ``scale_invariant``, ``epoch``, ``step``, ``alpha_lo``,
    ``alpha_hi``, ``log_ratio`` (``log |w|_hi / |w|_lo``), ``memory`` (log_ratio over its init value).
    Adds, per pipeline and seed, the layer :data:`SCALE_INVARIANT_MEAN`: the mean memory of the scaled
    scale-invariant layers.
    """
    needed = {"hash", "epoch", "layer", "weight_norm"}
    if layers.empty or not needed <= set(layers.columns):
        raise BridgeDataError(f"the layer logs lack {sorted(needed - set(layers.columns))}")
    step_of = layers.groupby(["hash", "epoch"])["step"].first() if "step" in layers else None
    out = []
    for (pipeline, seed), group in runs.groupby(["pipeline", "seed"]):
        if group["alpha"].nunique() < 2:
            continue
        lo_run = group.loc[group["alpha"].idxmin()]
        hi_run = group.loc[group["alpha"].idxmax()]
        lo = layers[layers["hash"] == lo_run["hash"]].set_index(["layer", "epoch"])
        hi = layers[layers["hash"] == hi_run["hash"]].set_index(["layer", "epoch"])
        joined = (
            lo[["weight_norm"]]
            .add_suffix("_lo")
            .join(hi[["weight_norm"]].add_suffix("_hi"), how="inner")
        )
        if joined.empty:
            continue
        frame = joined.reset_index()
        frame["log_ratio"] = np.log(frame["weight_norm_hi"] / frame["weight_norm_lo"])
        invariant = lo["scale_invariant"] if "scale_invariant" in lo else None
        frame["scale_invariant"] = (
            invariant.groupby(level="layer").first().reindex(frame["layer"]).to_numpy(dtype=bool)
            if invariant is not None
            else False
        )
        init = frame[frame["epoch"] == frame["epoch"].min()].set_index("layer")["log_ratio"]
        full = np.log(hi_run["alpha"] / lo_run["alpha"])
        scaled = init[init.abs() >= SCALED_FRACTION * full].index
        frame = frame[frame["layer"].isin(scaled)].copy()
        frame["memory"] = frame["log_ratio"] / frame["layer"].map(init)
        frame["step"] = (
            step_of.reindex(
                list(zip([lo_run["hash"]] * len(frame), frame["epoch"], strict=True))
            ).to_numpy()
            if step_of is not None
            else np.nan
        )
        frame = frame.assign(
            pipeline=pipeline, seed=seed, alpha_lo=lo_run["alpha"], alpha_hi=hi_run["alpha"]
        )
        out.append(frame)
        invariant_rows = frame[frame["scale_invariant"]]
        if not invariant_rows.empty:
            mean = (
                invariant_rows.groupby("epoch")
                .agg(
                    step=("step", "first"),
                    log_ratio=("log_ratio", "mean"),
                    memory=("memory", "mean"),
                )
                .reset_index()
            )
            out.append(
                mean.assign(
                    layer=SCALE_INVARIANT_MEAN,
                    scale_invariant=True,
                    pipeline=pipeline,
                    seed=seed,
                    alpha_lo=lo_run["alpha"],
                    alpha_hi=hi_run["alpha"],
                )
            )
    if not out:
        raise BridgeDataError(
            "no pipeline has two alphas with layer logs for the same seed: the norm memory compares "
            "runs that differ only in alpha"
        )
    columns = ["pipeline", "seed", "layer", "scale_invariant", "epoch", "step", "alpha_lo"]
    columns += ["alpha_hi", "log_ratio", "memory"]
    curves = pd.concat(out, ignore_index=True)[columns]
    return curves.sort_values(["pipeline", "layer", "seed", "epoch"], ignore_index=True)


def norm_forgetting_times(
    curves: pd.DataFrame, *, n_boot: int = 200, level: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Forgetting time of the norm memory, per pipeline and layer, with a bootstrap over seeds.

    Times are in optimizer steps (``tau_steps``, ``tau_lo_steps``, ``tau_hi_steps``, ``t_span_steps``)
    and epochs (``tau_epochs``). ``forgotten`` False: the memory did not shrink by e within the run and
    ``tau_steps`` is the lower bound ``t_span_steps``; ``tau_fit_steps`` is the extrapolated fit.
    ``memory_end`` is the seed-mean memory at the last evaluation.
    """
    per_epoch = steps_per_epoch(curves)
    rows = []
    for (pipeline, layer), group in curves.groupby(["pipeline", "layer"], sort=False):
        table = group.pivot_table(index="seed", columns="step", values="memory")
        steps = table.columns.to_numpy(dtype=np.float64)
        result = bootstrap_decay(
            steps - steps.min(), table.to_numpy(), n_boot=n_boot, level=level, seed=seed
        )
        rows.append(
            {
                "pipeline": pipeline,
                "layer": layer,
                "scale_invariant": bool(group["scale_invariant"].iloc[0]),
                "alpha_lo": group["alpha_lo"].iloc[0],
                "alpha_hi": group["alpha_hi"].iloc[0],
                **_in_steps(result),
                "tau_epochs": result["tau"] / per_epoch[pipeline],
                "memory_end": float(np.nanmean(table.to_numpy()[:, -1])),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------- function memory
def accuracy_curves(
    runs: pd.DataFrame, epochs: pd.DataFrame, metric: str = "test_acc"
) -> pd.DataFrame:
    """Per-evaluation accuracy of every run with its pipeline, alpha and seed (tidy)."""
    if metric not in epochs.columns:
        raise BridgeDataError(f"the epoch logs lack '{metric}'")
    keys = runs[["hash", "pipeline", "alpha", "seed"]]
    table = epochs[["hash", "epoch", "step", metric]].merge(keys, on="hash")
    return table.sort_values(["pipeline", "alpha", "seed", "epoch"], ignore_index=True)


def spread_curves(runs: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """Test-accuracy spread across alphas at every evaluation, per pipeline (percentage points).

    The spread is max minus min over alphas of the seed-mean test accuracy. Columns: ``pipeline``,
    ``epoch``, ``step``, ``spread_pp``, ``n_alphas``.
    """
    acc = accuracy_curves(runs, epochs)
    mean = acc.groupby(["pipeline", "epoch", "step", "alpha"])["test_acc"].mean().reset_index()
    grouped = mean.groupby(["pipeline", "epoch", "step"])["test_acc"]
    out = grouped.agg(lambda a: 100.0 * (a.max() - a.min())).rename("spread_pp").to_frame()
    out["n_alphas"] = grouped.size()
    return out.reset_index()


def disagreement_curves(runs: pd.DataFrame) -> pd.DataFrame:
    """Prediction disagreement between alphas at every evaluation, per pipeline and seed.

    Reads ``predictions.npz`` (``epochs``, ``test_pred``) of each run; for each seed, the fraction of
    test images on which two runs of different alphas predict different classes, averaged over all
    alpha pairs. Columns: ``pipeline``, ``seed``, ``epoch``, ``disagreement`` (fraction in [0, 1]).
    """
    rows = []
    for (pipeline, seed), group in runs.groupby(["pipeline", "seed"]):
        preds = {}
        for alpha, run_dir in zip(group["alpha"], group["run_dir"], strict=True):
            if (Path(run_dir) / "predictions.npz").is_file():
                data = runfolder.read_predictions(run_dir, keys=("epochs", "test_pred"))
                preds[alpha] = dict(zip(data["epochs"].tolist(), data["test_pred"], strict=True))
        if len(preds) < 2:
            continue
        shared = set.intersection(*(set(p) for p in preds.values()))
        for epoch in sorted(shared):
            pairs = [np.mean(preds[a][epoch] != preds[b][epoch]) for a, b in combinations(preds, 2)]
            rows.append(
                {
                    "pipeline": pipeline,
                    "seed": seed,
                    "epoch": epoch,
                    "disagreement": float(np.mean(pairs)),
                }
            )
    return pd.DataFrame(rows, columns=["pipeline", "seed", "epoch", "disagreement"])


def function_forgetting_times(
    runs: pd.DataFrame,
    epochs: pd.DataFrame,
    disagreement: pd.DataFrame | None = None,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Decay time of the accuracy spread and of the prediction disagreement, per pipeline.

    The fit window starts at the curve's maximum over the evaluations after the pipeline has learned
    (seed-mean validation accuracy >= :data:`LEARNED_FRACTION` of its best); the curve is divided by its
    value there and fitted by :func:`fit_decay_time`, with a bootstrap over seeds (resampled jointly
    across alphas). Columns: ``pipeline``, ``memory`` ("spread" | "disagreement"), ``start_step``,
    ``value_start``, ``value_end`` (pp for the spread, fraction for the disagreement) and the time
    columns of :func:`norm_forgetting_times` (measured from ``start_step``).
    """
    acc = accuracy_curves(runs, epochs)
    val = accuracy_curves(runs, epochs, "val_acc") if "val_acc" in epochs else None
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


def _spread_of(sample: np.ndarray) -> np.ndarray:
    """Spread (pp) over alphas of the seed-mean accuracy: (seed, step, alpha) -> (step,)."""
    return 100.0 * np.ptp(np.nanmean(sample, axis=0), axis=1)


def _mean_of(sample: np.ndarray) -> np.ndarray:
    """Seed mean of a one-column stack: (seed, step, 1) -> (step,)."""
    return np.nanmean(sample[:, :, 0], axis=0)


def _function_decay(pipeline, memory, steps, stack, curve_of, learned, per_epoch, options):
    """One row of :func:`function_forgetting_times`, or None when the window is too short."""
    curve = curve_of(stack)
    window = _window(steps, curve, learned)
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


def _window(steps: np.ndarray, curve: np.ndarray, learned: float) -> tuple[int, int] | None:
    """Indices (start, end) of the decay window: from the curve's max after ``learned`` to the end."""
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


_RENAMED = {"SweepError": "BridgeDataError", "accuracy_table": "accuracy_curves"}


def __getattr__(name: str):
    """Deprecated names of this module (PEP 562): ``SweepError``, ``accuracy_table``."""
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(
            f"initmem.bridge.measure.{name} is deprecated: use {new}", DeprecationWarning, 2
        )
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BridgeDataError",
    "DecayFit",
    "SCALE_INVARIANT_MEAN",
    "accuracy_curves",
    "bootstrap_decay",
    "disagreement_curves",
    "fit_decay_time",
    "function_forgetting_times",
    "learned_step",
    "load_logs",
    "norm_forgetting_times",
    "norm_memory_curves",
    "prepare_runs",
    "require_alphas",
    "spread_curves",
    "steps_per_epoch",
]
