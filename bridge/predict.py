"""Predicted forgetting: what the theory says about the same runs, from their schedules and their logs.

Three kinds of prediction, all in optimizer steps:

* **Accumulated regularization** (:func:`initmem.bridge.units.evaluation_units`): for each run and evaluation, the running
  sums of :func:`initmem.theory.units.unit_increments` (the one definition) over the run's own per-step
  schedule (:func:`initmem.theory.schedule.lr_multipliers`, as the trainer applies it), in the
  candidate units of forgetting of :data:`UNITS`.
* **Normalized-weight laws** (:func:`predicted_memory_curves`): the norm memory that
  :mod:`initmem.theory.normalized` predicts for every scaled BN-followed conv, with the gradient scale
  ``G`` (the squared loss gradient at unit weight norm, ``|g|^2 |w|^2``) taken per evaluation interval
  from the pipeline's own logged ``grad_sq_sum`` (mean over its runs: the laws assume ``G`` does not
  depend on alpha). The predicted forgetting time is fitted from that curve on the logged steps exactly
  as the measured one is (:func:`initmem.bridge.fits.fit_decay_time`), so the two are the same
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

import numpy as np
import pandas as pd

from initmem.bridge.fits import fit_decay_time
from initmem.bridge.units import init_norms, run_config, step_lrs
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from initmem.theory import normalized

#: Largest relative error of the one-step identity that counts as reproduced.
IDENTITY_TOLERANCE = 0.01


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

    For every (pipeline, layer) of ``norm_curves`` (:func:`~initmem.empirical.curves.norm_memory_curves`)
    with a scale-invariant layer: the law's ``|w_t|^2`` at ``alpha_hi`` and ``alpha_lo`` from the
    alpha = 1 init norm (seed mean), and memory ``ln(|w(a_hi)|^2 / |w(a_lo)|^2) / (2 ln(a_hi / a_lo))``
    at the logged steps. SGD (any momentum): :func:`~initmem.theory.normalized.sgd_norm_law` with the
    run's per-step lr and the logged ``G`` per interval. Adam, AdamW, RMSprop:
    :class:`~initmem.theory.normalized.AdaptiveMeanField` (``d`` = the layer's size). Adds the layer
    :data:`~initmem.empirical.curves.SCALE_INVARIANT_MEAN` (mean over layers). Columns: ``pipeline``,
    ``layer``, ``step``, ``memory``.
    """
    grads = gradient_scale(runs, layers)
    invariant = norm_curves[
        norm_curves["scale_invariant"].astype(bool) & (norm_curves["layer"] != SCALE_INVARIANT_MEAN)
    ]
    first_runs = runs.drop_duplicates("pipeline").set_index("pipeline")
    init_rows = init_norms(runs, layers)
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
    "gradient_scale",
    "identity_check",
    "predicted_memory_curves",
    "predicted_times",
]
