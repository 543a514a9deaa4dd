"""The design of a sweep in units of forgetting, before anything is trained.

:func:`design_table` gives, per pipeline of a sweep file, its settings and every unit of forgetting
accumulated over the whole run (:func:`initmem.theory.units.accumulated_units`, the one definition),
with the model-at-init number ``d / |w_0|^2`` taken from the model built at alpha = 1 (seed of the
pipeline's first run). :func:`design_correlation` is the number a unit-of-forgetting design must keep
small: the Pearson correlation across pipelines of ``ln(epochs)`` and ``ln(accumulated)``; when it is
near +-1 the two units cannot be told apart by any fit. ``initmem sweep run FILE --dry-run`` prints
both (:func:`format_design`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from initmem.theory import units as theory_units


def init_inv_norm_sq(config) -> float:
    """Mean over the BN-followed convs of ``d / |w_0|^2`` of ``config``'s model at alpha = 1."""
    from initmem.empirical.models import build_model, scale_invariant_parameters

    model = build_model(config.replace(alpha=1.0))
    params = dict(model.named_parameters())
    names = scale_invariant_parameters(model)
    numels = [params[n].numel() for n in names]
    norms = [float(params[n].detach().double().pow(2).sum()) for n in names]
    return theory_units.inv_init_sq_per_coord(numels, norms)


def config_units(config, inv_init_sq_per_coord: float) -> dict[str, float]:
    """Every unit accumulated over the whole run of ``config`` (RunConfig): the totals of
    :func:`initmem.bridge.predict.unit_increments` (which feeds the theory's one definition)."""
    from initmem.bridge.predict import unit_increments

    return {k: float(v) for k, v in unit_increments(config, inv_init_sq_per_coord).sum().items()}


def design_table(configs, variants=None) -> pd.DataFrame:
    """One row per pipeline of the given run configs (alpha and seed ignored), in first-seen order.

    ``configs``: RunConfigs, any iterable (e.g. ``(r.config for r in spec.iter_runs())``: read once,
    one entry kept per pipeline, so a streamed grid stays in bounded memory); ``variants`` their
    variant names (an iterable of the same length). Columns: ``variant``, ``pipeline``, ``optimizer``, ``lr``, ``momentum``, ``l2``,
    ``weight_decay``, ``schedule``, ``batch_size``, ``alpha_groups``, ``alphas``, ``n_seeds``,
    ``inv_init_sq_per_coord`` and every unit of :data:`initmem.theory.units.UNITS` (totals).
    """
    from initmem.empirical.memory import pipeline_id

    pairs = (
        zip(configs, variants, strict=True) if variants is not None else ((c, "") for c in configs)
    )
    groups: dict[str, dict] = {}
    for config, variant in pairs:
        key = pipeline_id(config.to_dict())
        entry = groups.setdefault(key, {"config": config, "variant": variant, "alphas": set()})
        entry["alphas"].add(config.alpha)
        entry.setdefault("seeds", set()).add(config.seed)
    cache: dict[tuple, float] = {}
    rows = []
    for key, entry in groups.items():
        config = entry["config"]
        init_key = (config.model, config.width, config.seed)
        if init_key not in cache:
            cache[init_key] = init_inv_norm_sq(config)
        inv = cache[init_key]
        rows.append(
            {
                "variant": entry["variant"],
                "pipeline": key,
                "optimizer": config.optimizer,
                "lr": config.lr,
                "momentum": config.momentum,
                "l2": config.l2,
                "weight_decay": config.weight_decay,
                "schedule": config.schedule,
                "batch_size": config.batch_size,
                "alpha_groups": ",".join(config.alpha_groups),
                "alphas": ",".join(f"{a:g}" for a in sorted(entry["alphas"])),
                "n_seeds": len(entry["seeds"]),
                "inv_init_sq_per_coord": inv,
                **config_units(config, inv),
            }
        )
    return pd.DataFrame(rows)


def design_correlation(table: pd.DataFrame, x: str = "epochs", y: str = "accumulated") -> dict:
    """Pearson r of ``ln x`` and ``ln y`` over the pipelines with two or more alphas.

    Returns ``r``, ``n`` (pipelines used), ``decades`` (``log10`` of max over min of ``y``) and the
    range ``y_min``, ``y_max``. NaN ``r`` with fewer than 3 usable pipelines or a constant column.
    """
    compared = table[table["alphas"].str.count(",") >= 1] if "alphas" in table else table
    values = compared[[x, y]].to_numpy(dtype=np.float64)
    values = values[np.all(np.isfinite(values) & (values > 0), axis=1)]
    out = {"r": math.nan, "n": int(len(values)), "decades": math.nan}
    out.update(y_min=math.nan, y_max=math.nan)
    if len(values) == 0:
        return out
    logs = np.log(values)
    out.update(
        y_min=float(values[:, 1].min()),
        y_max=float(values[:, 1].max()),
        decades=float(np.log10(values[:, 1].max() / values[:, 1].min())),
    )
    if len(values) >= 3 and np.ptp(logs[:, 0]) > 0 and np.ptp(logs[:, 1]) > 0:
        out["r"] = float(np.corrcoef(logs[:, 0], logs[:, 1])[0, 1])
    return out


def format_design(table: pd.DataFrame) -> str:
    """The design as text: one line per pipeline, then r of ln(epochs) and ln(accumulated)."""
    lines = [
        "design in units of forgetting (totals over each run; theory.units):",
        f"  {'variant':<22} {'alphas':<8} {'epochs':>6} {'steps':>6} {'accumulated':>11} "
        f"{'explicit':>9} {'sgd_noise':>9} {'adam':>9}",
    ]
    for _, row in table.iterrows():
        lines.append(
            f"  {str(row['variant'] or row['pipeline']):<22} {row['alphas']:<8} "
            f"{row['epochs']:>6.0f} {row['steps']:>6.0f} {row['accumulated']:>11.3g} "
            f"{row['explicit']:>9.3g} {row['sgd_noise']:>9.3g} {row['adam']:>9.3g}"
        )
    corr = design_correlation(table)
    lines.append(
        f"pipelines with two or more alphas: {corr['n']}; accumulated regularization from "
        f"{corr['y_min']:.3g} to {corr['y_max']:.3g} ({corr['decades']:.1f} decades); Pearson r of "
        f"ln(epochs) and ln(accumulated) = {corr['r']:.2f}"
    )
    return "\n".join(lines)


__all__ = [
    "config_units",
    "design_correlation",
    "design_table",
    "format_design",
    "init_inv_norm_sq",
]
