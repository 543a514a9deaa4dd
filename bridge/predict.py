"""Predicted forgetting: what the theory says about the same runs, from their schedules and their logs.

Three kinds of prediction, all in optimizer steps:

* **Accumulated regularization** (:func:`accumulated_units`): for each run and evaluation, the running
  sums of :func:`initmem.theory.units.unit_increments` (the one definition) over the run's own per-step
  schedule (:func:`initmem.theory.schedule.lr_multipliers`, as the trainer applies it), in the
  candidate units of forgetting of :data:`UNITS`.
* **Normalized-weight laws** (:func:`predicted_memory_curves`): the norm memory that
  :mod:`initmem.theory.normalized` predicts for every scaled BN-followed conv, with the gradient scale
  ``G`` (the squared loss gradient at unit weight norm, ``|g|^2 |w|^2``) taken per evaluation interval
  from the pipeline's own logged ``grad_sq_sum`` (mean over its runs: the laws assume ``G`` does not
  depend on alpha). The predicted forgetting time is fitted from that curve on the logged steps exactly
  as the measured one is (:func:`initmem.bridge.measure.fit_decay_time`), so the two are the same
  statistic.
* **The exact one-step identity** (:func:`identity_check`): for SGD without momentum and a
  scale-invariant weight, ``|w'|^2 = (1 - lr (l2 + wd))^2 |w|^2 + lr^2 |g|^2`` every step
  (:func:`initmem.theory.normalized.sgd_norm_sq_after_step`), so between two evaluations
  ``|w_end|^2 = (prod_t c_t^2) |w_start|^2 + d`` with ``d`` the logged ``norm_sq_drift``; the product is
  rebuilt here from the schedule. BatchNorm's eps breaks invariance slightly: 1% is the bar.

The candidate units of forgetting (:data:`UNITS`: epochs, steps, explicit, sgd_noise, adam and
``accumulated``, *accumulated regularization*, the unit the paper proposes) have one definition,
:mod:`initmem.theory.units`, which the sweep's dry run uses too; here it is fed with each run's
schedule and with ``d / |w_0|^2`` read from the logged init norms (mean over the scale-invariant
layers and the pipeline's runs). The phase diagrams draw its level 1.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from initmem.bridge.measure import SCALE_INVARIANT_MEAN, fit_decay_time
from initmem.empirical.config import RunConfig
from initmem.theory import normalized
from initmem.theory import units as theory_units

#: Candidate units of forgetting (the one definition: :mod:`initmem.theory.units`).
UNITS = theory_units.UNITS
UNIT_DEFINITIONS = theory_units.UNIT_DEFINITIONS
#: Largest relative error of the one-step identity that counts as reproduced.
IDENTITY_TOLERANCE = 0.01


# ----------------------------------------------------------------------------------- schedules
def run_config(row: pd.Series | dict) -> RunConfig:
    """The :class:`RunConfig` of a row of ``load_sweep``'s table (not re-validated)."""
    values = {}
    for name in RunConfig.field_names():
        if name not in row:
            continue
        value = row[name]
        if isinstance(value, (tuple, list, np.ndarray)):
            value = [v.item() if isinstance(v, np.generic) else v for v in value]
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and math.isnan(value):
            value = None  # an optional field left empty (pandas turns None into NaN)
        values[name] = value
    return RunConfig.from_dict(values, validate=False)


def step_lrs(config: RunConfig) -> np.ndarray:
    """The learning rate of each optimizer step of a run (length ``total_steps``), as trained."""
    return config.lr * config.lr_multipliers()


def unit_increments(config: RunConfig, inv_init_sq_per_coord: float = np.nan) -> pd.DataFrame:
    """Per-step increments of every unit of :data:`UNITS` for one config (one row per step).

    :func:`initmem.theory.units.unit_increments` (the one definition) fed with the run's per-step
    learning rates (:func:`step_lrs`) and settings, and ``inv_init_sq_per_coord`` (``d / |w_0|^2``
    at alpha = 1; NaN leaves ``adam`` undefined).
    """
    return pd.DataFrame(
        theory_units.unit_increments(
            step_lrs(config),
            optimizer=config.optimizer,
            batch_size=config.batch_size,
            steps_per_epoch=config.steps_per_epoch,
            momentum=config.momentum,
            l2=config.l2,
            weight_decay=config.weight_decay,
            inv_init_sq_per_coord=inv_init_sq_per_coord,
        )
    )[list(UNITS)]


def init_scale(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.Series:
    """Per pipeline: mean over its scale-invariant layers of ``d / |w_0|^2`` at alpha = 1.

    ``|w_0(1)|^2 = |w_0(alpha)|^2 / alpha^2`` for the layers alpha scales (read at the first
    evaluation, epoch 0); a layer counts as scaled when ``ln |w_0|^2`` grows with ``ln alpha`` at a
    slope above 1 (2 if scaled, 0 if ``alpha_groups`` leaves it alone).
    """
    init = _init_norms(runs, layers)
    per_layer = (init["numel"] / init["norm_sq_at_1"]).groupby([init["pipeline"], init["layer"]])
    return per_layer.mean().groupby(level="pipeline").mean().rename("inv_init_sq_per_coord")


def _init_norms(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Epoch-0 rows of the scale-invariant layers with ``scaled`` and ``norm_sq_at_1`` (|w_0|^2 at
    alpha = 1)."""
    first = layers[layers["epoch"] == layers.groupby("hash")["epoch"].transform("min")]
    first = first[first["scale_invariant"].astype(bool) & (first["weight_norm"] > 0)]
    first = first.merge(runs[["hash", "pipeline", "alpha"]], on="hash")
    first = first.assign(
        scale_invariant=True,
        log_norm_sq=2.0 * np.log(first["weight_norm"]),
        log_alpha=np.log(first["alpha"]),
    )
    slopes = {}
    for key, group in first.groupby(["pipeline", "layer"]):
        spread = group["log_alpha"].max() - group["log_alpha"].min()
        slopes[key] = (
            np.polyfit(group["log_alpha"], group["log_norm_sq"], 1)[0] if spread > 0 else 2.0
        )
    scaled = np.array(
        [slopes[k] > 1.0 for k in zip(first["pipeline"], first["layer"], strict=True)]
    )
    return first.assign(
        scaled=scaled,
        norm_sq_at_1=np.exp(first["log_norm_sq"] - np.where(scaled, 2.0 * first["log_alpha"], 0.0)),
    )


def accumulated_units(
    runs: pd.DataFrame, epochs: pd.DataFrame, layers: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every unit of :data:`UNITS`, accumulated up to each evaluation of each run (tidy).

    Columns: ``hash``, ``pipeline``, ``epoch``, ``step`` and one column per unit (its running sum over
    the steps done). ``adam`` needs the layer logs for ``d / |w_0|^2`` (NaN without them).
    """
    scale = init_scale(runs, layers) if layers is not None and not layers.empty else pd.Series()
    cache: dict[str, pd.DataFrame] = {}
    frames = []
    for _, run in runs.iterrows():
        config = run_config(run)
        key = f"{run['pipeline']}"
        if key not in cache:
            increments = unit_increments(config, float(scale.get(run["pipeline"], np.nan)))
            cumulative = increments.cumsum()
            zero = pd.DataFrame([dict.fromkeys(cumulative.columns, 0.0)])
            cache[key] = pd.concat([zero, cumulative], ignore_index=True)
        sums = cache[key]
        logged = epochs[epochs["hash"] == run["hash"]][["epoch", "step"]].copy()
        index = np.clip(logged["step"].to_numpy(dtype=int), 0, len(sums) - 1)
        values = sums.iloc[index].reset_index(drop=True)
        logged = logged.reset_index(drop=True)
        frames.append(pd.concat([logged, values], axis=1).assign(hash=run["hash"], pipeline=key))
    if not frames:
        return pd.DataFrame(columns=["hash", "pipeline", "epoch", "step", *UNITS])
    out = pd.concat(frames, ignore_index=True)
    return out[["hash", "pipeline", "epoch", "step", *UNITS]]


def steps_to_unit(config: RunConfig, unit: str, level: float = 1.0, inv_init_sq=np.nan) -> float:
    """Steps until ``unit`` accumulates ``level``: inside the run by the schedule, beyond its end at
    the final per-step rate (``inf`` when the unit does not grow). The unit's predicted forgetting time.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {list(UNITS)} (got {unit!r})")
    increments = unit_increments(config, inv_init_sq)[unit].to_numpy()
    running = np.cumsum(increments)
    hit = np.flatnonzero(running >= level)
    if hit.size:
        return float(hit[0] + 1)
    rate = increments[-1] if increments.size else 0.0
    if not rate > 0:
        return math.inf
    return float(len(increments) + (level - running[-1]) / rate)


def phase_boundary(config, x: str, y: str, x_values, y_values, inv_init_sq=np.nan) -> np.ndarray:
    """Accumulated regularization at the end of a run of ``config`` over the grid ``x`` x ``y``.

    ``x``, ``y`` among ``lr``, ``decay`` (set on ``l2`` if the config uses coupled L2, else on
    ``weight_decay``) and ``batch_size``; every other setting is ``config``'s. At a fixed schedule
    explicit decay scales as ``lr * decay`` and the noise terms as ``lr^2``; each batch size (which
    also sets the steps per epoch) is summed afresh by :func:`~initmem.bridge.unit_increments`.
    Returns an array of shape (len(y_values), len(x_values)).
    """
    for name in (x, y):
        if name not in ("lr", "decay", "batch_size"):
            raise ValueError(f"x and y must be among lr, decay, batch_size (got {name!r})")
    xs, ys = np.meshgrid(np.asarray(x_values, dtype=float), np.asarray(y_values, dtype=float))
    values = {
        "lr": np.full(xs.shape, config.lr),
        "decay": np.full(xs.shape, config.l2 + config.weight_decay),
        "batch_size": np.full(xs.shape, float(config.batch_size)),
    }
    values[x], values[y] = xs, ys
    on_l2 = config.l2 > 0
    noise = theory_units.noise_unit(config.optimizer)
    out = np.empty(xs.shape)
    for batch in np.unique(values["batch_size"]):
        if batch > config.resolved_train_size:
            out[values["batch_size"] == batch] = np.nan
            continue
        base = dataclasses.replace(
            config, lr=1.0, l2=float(on_l2), weight_decay=float(not on_l2), batch_size=int(batch)
        )
        sums = unit_increments(base, inv_init_sq).sum()
        mask = values["batch_size"] == batch
        lr = values["lr"][mask]
        out[mask] = lr * values["decay"][mask] * sums["explicit"] + lr**2 * sums[noise]
    return out


# ----------------------------------------------------------------------------------- the identity
def identity_check(runs: pd.DataFrame, epochs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """The exact SGD one-step norm identity against the logged norms of every BN-followed conv.

    For each SGD run without momentum, each scale-invariant layer and each evaluation interval:
    ``predicted = (prod_t c_t^2) |w_start|^2 + norm_sq_drift``, ``c_t = 1 - lr_t (l2 + weight_decay)``
    over the interval's steps (rebuilt from the schedule), against the logged ``|w_end|^2``. Returns
    one row per (run, layer): ``max_rel_error`` over intervals, ``n_intervals``, ``decay_rel_error``
    (largest relative gap between the rebuilt product and the logged ``norm_sq_decay``, where logged)
    and ``max_eff_lr`` (largest ``lr / |w|^2`` logged: BatchNorm's eps breaks scale invariance most
    where the norm is small, i.e. where the effective learning rate is large).
    Runs of other optimizers, and runs without gradient tracking, are left out.
    """
    columns = ["hash", "pipeline", "alpha", "seed", "layer", "n_intervals", "max_rel_error"]
    columns += ["decay_rel_error", "max_eff_lr"]
    eligible = runs[(runs["optimizer"] == "sgd") & (runs["momentum"] == 0)]
    rows = []
    for _, run in eligible.iterrows():
        config = run_config(run)
        lrs = step_lrs(config)
        log_c2 = np.concatenate(
            [[0.0], np.cumsum(2.0 * np.log1p(-lrs * (config.l2 + config.weight_decay)))]
        )
        logged = epochs[epochs["hash"] == run["hash"]].sort_values("step")
        steps = logged["step"].to_numpy(dtype=int)
        decay = np.exp(log_c2[steps[1:]] - log_c2[steps[:-1]])
        decay_error = np.nan
        if "norm_sq_decay" in logged:
            logged_decay = logged["norm_sq_decay"].to_numpy(dtype=float)[1:]
            decay_error = float(np.nanmax(np.abs(logged_decay / decay - 1.0), initial=np.nan))
        mine = layers[(layers["hash"] == run["hash"]) & layers["scale_invariant"].astype(bool)]
        for layer, group in mine.groupby("layer"):
            group = group.set_index("step").reindex(steps)
            norm_sq = group["weight_norm"].to_numpy(dtype=float) ** 2
            drift = group["norm_sq_drift"].to_numpy(dtype=float)[1:]
            predicted = decay * norm_sq[:-1] + drift
            error = np.abs(predicted / norm_sq[1:] - 1.0)
            error = error[np.isfinite(error)]
            if error.size == 0:
                continue
            rows.append(
                {
                    "hash": run["hash"],
                    "pipeline": run["pipeline"],
                    "alpha": run["alpha"],
                    "seed": run["seed"],
                    "layer": layer,
                    "n_intervals": int(error.size),
                    "max_rel_error": float(error.max()),
                    "decay_rel_error": decay_error,
                    "max_eff_lr": float(group["eff_lr"].max()) if "eff_lr" in group else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------------- the laws
def gradient_scale(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline, layer and evaluation interval: ``G``, the mean ``|g_t|^2 |w_t|^2`` per step.

    From each run's logged ``grad_sq_sum`` over the interval times the mean of ``|w|^2`` at its two
    ends, divided by the interval's steps; averaged over the pipeline's runs (all alphas and seeds).
    Columns: ``pipeline``, ``layer``, ``step_start``, ``step``, ``grad_sq_unit``.
    """
    rows = layers[layers["scale_invariant"].astype(bool)].merge(
        runs[["hash", "pipeline"]], on="hash"
    )
    rows = rows.sort_values(["hash", "layer", "step"])
    norm_sq = rows["weight_norm"] ** 2
    previous = rows.groupby(["hash", "layer"])
    rows = rows.assign(
        step_start=previous["step"].shift(1),
        mean_norm_sq=0.5 * (norm_sq + previous["weight_norm"].shift(1) ** 2),
    ).dropna(subset=["step_start"])
    span = rows["step"] - rows["step_start"]
    rows = rows.assign(grad_sq_unit=rows["grad_sq_sum"] * rows["mean_norm_sq"] / span)
    rows = rows[span > 0]
    table = rows.groupby(["pipeline", "layer", "step_start", "step"])["grad_sq_unit"].mean()
    return table.reset_index()


def predicted_memory_curves(
    runs: pd.DataFrame, layers: pd.DataFrame, norm_curves: pd.DataFrame
) -> pd.DataFrame:
    """Norm memory of each scaled BN-followed conv predicted by :mod:`initmem.theory.normalized`.

    For every (pipeline, layer) of ``norm_curves`` (:func:`~initmem.bridge.measure.norm_memory_curves`)
    with a scale-invariant layer: the law's ``|w_t|^2`` at ``alpha_hi`` and ``alpha_lo`` from the
    alpha = 1 init norm (seed mean), and memory ``ln(|w(a_hi)|^2 / |w(a_lo)|^2) / (2 ln(a_hi / a_lo))``
    at the logged steps. SGD (any momentum): :func:`~initmem.theory.normalized.sgd_norm_law` with the
    run's per-step lr and the logged ``G`` per interval. Adam, AdamW, RMSprop:
    :class:`~initmem.theory.normalized.AdaptiveMeanField` (``d`` = the layer's size). Adds the layer
    :data:`~initmem.bridge.measure.SCALE_INVARIANT_MEAN` (mean over layers). Columns: ``pipeline``,
    ``layer``, ``step``, ``memory``.
    """
    grads = gradient_scale(runs, layers)
    invariant = norm_curves[
        norm_curves["scale_invariant"].astype(bool) & (norm_curves["layer"] != SCALE_INVARIANT_MEAN)
    ]
    first_runs = runs.drop_duplicates("pipeline").set_index("pipeline")
    init_rows = _init_norms(runs, layers)
    init = init_rows.groupby(["pipeline", "layer"])["norm_sq_at_1"].mean().to_dict()
    numels = init_rows.groupby(["pipeline", "layer"])["numel"].first().to_dict()
    out = []
    for (pipeline, layer), group in invariant.groupby(["pipeline", "layer"]):
        config = run_config(first_runs.loc[pipeline])
        steps = np.sort(group["step"].dropna().unique()).astype(int)
        a_lo, a_hi = float(group["alpha_lo"].iloc[0]), float(group["alpha_hi"].iloc[0])
        x0 = init.get((pipeline, layer), np.nan)
        numel = int(numels.get((pipeline, layer), 0))
        g = grads[(grads["pipeline"] == pipeline) & (grads["layer"] == layer)]
        if not np.isfinite(x0) or steps.size < 2:
            continue
        per_step_g = _per_step_gradient_scale(g, config.total_steps)
        if per_step_g is None:
            continue
        norm_sq = _law_norm_sq(config, numel, per_step_g, steps, [a_hi**2 * x0, a_lo**2 * x0])
        memory = np.log(norm_sq[0] / norm_sq[1]) / (2.0 * np.log(a_hi / a_lo))
        out.append(
            pd.DataFrame({"pipeline": pipeline, "layer": layer, "step": steps, "memory": memory})
        )
    if not out:
        return pd.DataFrame(columns=["pipeline", "layer", "step", "memory"])
    curves = pd.concat(out, ignore_index=True)
    mean = curves.groupby(["pipeline", "step"])["memory"].mean().reset_index()
    curves = pd.concat([curves, mean.assign(layer=SCALE_INVARIANT_MEAN)], ignore_index=True)
    return curves[["pipeline", "layer", "step", "memory"]]


def predicted_times(predicted_curves: pd.DataFrame, steps_per_epoch: pd.Series) -> pd.DataFrame:
    """Forgetting time of each predicted memory curve, fitted as the measured ones are (steps).

    Columns: ``pipeline``, ``layer``, ``pred_tau_steps`` (the lower bound ``t_span`` when not
    forgotten within the run), ``pred_tau_fit_steps`` (the fit, extrapolated), ``pred_forgotten``,
    ``pred_tau_epochs``, ``pred_memory_end``.
    """
    rows = []
    for (pipeline, layer), group in predicted_curves.groupby(["pipeline", "layer"]):
        steps = group["step"].to_numpy(dtype=float)
        fit = fit_decay_time(steps - steps.min(), group["memory"].to_numpy())
        rows.append(
            {
                "pipeline": pipeline,
                "layer": layer,
                "pred_tau_steps": fit.reported,
                "pred_tau_fit_steps": fit.tau,
                "pred_forgotten": fit.forgotten,
                "pred_tau_epochs": fit.reported / float(steps_per_epoch.get(pipeline, np.nan)),
                "pred_memory_end": float(group["memory"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def _per_step_gradient_scale(g: pd.DataFrame, total_steps: int) -> np.ndarray | None:
    """Expand the per-interval ``G`` to one value per step (the last interval's beyond the logs)."""
    if g.empty or not np.isfinite(g["grad_sq_unit"]).any():
        return None
    g = g.dropna(subset=["grad_sq_unit"]).sort_values("step")
    per_step = np.full(total_steps, float(g["grad_sq_unit"].iloc[-1]))
    for start, stop, value in zip(g["step_start"], g["step"], g["grad_sq_unit"], strict=True):
        per_step[int(start) : int(stop)] = value
    return per_step


def _law_norm_sq(config, numel, grad_sq_unit, steps, init_norm_sq) -> np.ndarray:
    """``|w|^2`` of the law at ``steps`` for each initial squared norm: (n_init, n_steps)."""
    lrs = step_lrs(config)
    if config.optimizer == "sgd":
        law = normalized.sgd_norm_law(
            lrs,
            grad_sq_unit,
            momentum=config.momentum,
            l2=config.l2,
            weight_decay=config.weight_decay,
        )
        return np.stack([law.norm_sq(steps, x0) for x0 in init_norm_sq])
    field = normalized.AdaptiveMeanField(
        config.optimizer,
        config.lr,
        numel,
        beta2=config.betas[1],
        momentum=config.momentum if config.optimizer == "rmsprop" else 0.0,
        l2=config.l2,
        weight_decay=config.weight_decay,
        grad_sq_unit=float(np.mean(grad_sq_unit)),
        lr_multipliers=lrs / config.lr,
    )
    return field.norm_sq(steps, init_norm_sq)


__all__ = [
    "IDENTITY_TOLERANCE",
    "UNITS",
    "UNIT_DEFINITIONS",
    "accumulated_units",
    "gradient_scale",
    "identity_check",
    "init_scale",
    "phase_boundary",
    "predicted_memory_curves",
    "predicted_times",
    "run_config",
    "step_lrs",
    "steps_to_unit",
    "unit_increments",
]
