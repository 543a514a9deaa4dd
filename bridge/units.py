"""Units of forgetting of a sweep's runs: per step, up to each evaluation, and over the design.

The one definition of every unit is :mod:`initmem.theory.units`; this module feeds it with a run's
own per-step schedule (:func:`run_unit_increments`), accumulates it up to each logged evaluation
(:func:`evaluation_units`), finds when a unit reaches a level (:func:`steps_to_unit`), draws its
level over a grid of settings (:func:`phase_boundary`) and gives a sweep's design before training
(:func:`design_table`, :func:`design_correlation`, :func:`design_counts`, :func:`format_design`;
what ``initmem sweep run --dry-run`` prints), with each pipeline's predicted norm memory and
forgetting time by the accumulated unit's norm law (:func:`predicted_forgetting`, law (U1)-(U2) of
:mod:`initmem.theory.units`): which pipelines the design expects to forget within the run.
``d / |w_0|^2`` (the ``adam`` unit) comes from the logged init norms (:func:`init_scale`), from a
drawn model (:func:`init_inv_norm_sq`, torch) or in expectation from the ResNets' shapes
(:func:`initmem.empirical.shapes.expected_inv_init_sq_per_coord`, no torch).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from initmem.empirical import tables
from initmem.empirical.config import RunConfig
from initmem.empirical.shapes import RESNETS, expected_inv_init_sq_per_coord
from initmem.theory import units as theory_units
from initmem.theory.criterion import FORGETTING, decide

#: Candidate units of forgetting (the one definition: :mod:`initmem.theory.units`).
UNITS = theory_units.UNITS
UNIT_DEFINITIONS = theory_units.UNIT_DEFINITIONS


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


def run_unit_increments(config: RunConfig, inv_init_sq_per_coord: float = np.nan) -> pd.DataFrame:
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
    init = init_norms(runs, layers)
    per_layer = (init["numel"] / init["norm_sq_at_1"]).groupby([init["pipeline"], init["layer"]])
    return per_layer.mean().groupby(level="pipeline").mean().rename("inv_init_sq_per_coord")


def init_norms(runs: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
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


def evaluation_units(
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
            increments = run_unit_increments(config, float(scale.get(run["pipeline"], np.nan)))
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
    increments = run_unit_increments(config, inv_init_sq)[unit].to_numpy()
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
    also sets the steps per epoch) is summed afresh by :func:`run_unit_increments`.
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
        sums = run_unit_increments(base, inv_init_sq).sum()
        mask = values["batch_size"] == batch
        lr = values["lr"][mask]
        out[mask] = lr * values["decay"][mask] * sums["explicit"] + lr**2 * sums[noise]
    return out


# ----------------------------------------------------------------------------------- the design
def init_inv_norm_sq(config) -> float:
    """Mean over the BN-followed convs of ``d / |w_0|^2`` of ``config``'s model at alpha = 1."""
    from initmem.empirical.models import build_model, scale_invariant_parameters  # deferred: torch

    model = build_model(config.replace(alpha=1.0))
    params = dict(model.named_parameters())
    names = scale_invariant_parameters(model)
    numels = [params[n].numel() for n in names]
    norms = [float(params[n].detach().double().pow(2).sum()) for n in names]
    return theory_units.inv_init_sq_per_coord(numels, norms)


def config_units(config, inv_init_sq_per_coord: float) -> dict[str, float]:
    """Every unit accumulated over the whole run of ``config`` (RunConfig): the totals of
    :func:`run_unit_increments` (which feeds the theory's one definition); NaN where a unit is
    undefined (``adam`` without ``inv_init_sq_per_coord``), never a silent 0."""
    increments = run_unit_increments(config, inv_init_sq_per_coord)
    return {k: float(v) for k, v in increments.sum(skipna=False).items()}


#: The design's state of a pipeline whose model has no scale-invariant weight (no norm memory).
NO_NORM_MEMORY = "no scale-invariant weights"


def predicted_forgetting(config: RunConfig, alphas, inv_init_sq_per_coord: float) -> dict:
    """The design's prediction for one pipeline, by the accumulated unit's norm law
    (:func:`initmem.theory.units.accumulated_norm_memory`) fed with the run's per-step increments:
    ``memory_end`` (norm memory of the largest against the smallest of ``alphas`` at the end of the
    run), ``state`` and ``forgetting_steps`` / ``forgetting_epochs`` by the one decision
    (:func:`initmem.theory.criterion.decide` on the law's curve, one point per step: ``inf`` when not
    forgotten within the run). NaN (and no state) for fewer than two alphas; NaN with the state
    :data:`NO_NORM_MEMORY` for a model without scale-invariant weights (``inv_init_sq_per_coord``
    NaN: no norm memory, so no law for it)."""
    keys = ("memory_end", "forgetting_steps", "forgetting_epochs")
    alphas = sorted(set(float(a) for a in alphas))
    if len(alphas) < 2:
        return dict.fromkeys(keys, math.nan) | {"state": ""}
    if not np.isfinite(inv_init_sq_per_coord):
        return dict.fromkeys(keys, math.nan) | {"state": NO_NORM_MEMORY}
    increments = run_unit_increments(config, inv_init_sq_per_coord)
    noise = increments[theory_units.noise_unit(config.optimizer)].to_numpy()
    memory = theory_units.accumulated_norm_memory(
        increments["explicit"].to_numpy(), noise, alpha=alphas[-1], reference=alphas[0]
    )
    if memory.size == 0:
        return dict.fromkeys(keys[1:], math.inf) | {"memory_end": 1.0, "state": "not forgotten"}
    return law_decision(np.arange(1, memory.size + 1), memory, config.steps_per_epoch)


def law_decision(steps, memory, steps_per_epoch: int) -> dict:
    """A law's noise-free memory curve decided by the one rule (:func:`initmem.theory.criterion.decide`):
    ``memory_end``, ``forgetting_steps`` (``inf``: not within the run), ``forgetting_epochs`` and
    ``state``."""
    decision = decide(steps, memory)
    step = decision.step if decision.forgotten else math.inf
    return {
        "memory_end": decision.memory_end,
        "forgetting_steps": step,
        "forgetting_epochs": step / steps_per_epoch,
        "state": decision.state,
    }


def design_inv_init_sq(config: RunConfig, init: str = "expected") -> float:
    """``d / |w_0|^2`` at alpha = 1 as a design states it before training: in expectation from the
    ResNets' shapes (``init="expected"``, no torch), else, and for other models, of the drawn init
    (:func:`init_inv_norm_sq`). The dry run and ``initmem theory`` both call it."""
    if init == "expected" and config.model in RESNETS:
        return expected_inv_init_sq_per_coord(config.model, config.width)
    return init_inv_norm_sq(config)  # drawn (other models: no shape table)


def design_table(configs, variants=None, *, init: str = "drawn") -> pd.DataFrame:
    """One row per pipeline of the given run configs (alpha and seed ignored), in first-seen order.

    ``configs``: RunConfigs, any iterable (e.g. ``(r.config for r in spec.iter_runs())``: read once,
    one entry kept per pipeline, so a streamed grid stays in bounded memory); ``variants`` their
    variant names (an iterable of the same length). Columns: ``variant``, ``pipeline``, ``optimizer``, ``lr``, ``momentum``, ``l2``,
    ``weight_decay``, ``schedule``, ``batch_size``, ``alpha_groups``, ``alphas``, ``n_seeds``,
    ``inv_init_sq_per_coord``, every unit of :data:`initmem.theory.units.UNITS` (totals) and the
    prediction of :func:`predicted_forgetting` (``predicted_memory_end``,
    ``predicted_forgetting_steps``, ``predicted_forgetting_epochs``; ``inf``: censored).
    ``init``: ``d / |w_0|^2`` of the drawn model at alpha = 1 (``"drawn"``, :func:`init_inv_norm_sq`,
    builds it with torch) or its expectation from the ResNet's shapes (``"expected"``, no torch; other
    models are drawn).
    """
    pairs = (
        zip(configs, variants, strict=True) if variants is not None else ((c, "") for c in configs)
    )
    groups: dict[str, dict] = {}
    for config, variant in pairs:
        key = tables.pipeline_id(config.to_dict())
        entry = groups.setdefault(key, {"config": config, "variant": variant, "alphas": set()})
        entry["alphas"].add(config.alpha)
        entry.setdefault("seeds", set()).add(config.seed)
    if init not in ("drawn", "expected"):
        raise ValueError(f"init must be 'drawn' or 'expected' (got {init!r})")
    cache: dict[tuple, float] = {}
    rows = []
    for key, entry in groups.items():
        config = entry["config"]
        init_key = (config.model, config.width, config.seed)
        if init_key not in cache:
            cache[init_key] = design_inv_init_sq(config, init)
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
                **{
                    f"predicted_{key}": value
                    for key, value in predicted_forgetting(config, entry["alphas"], inv).items()
                },
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


def design_counts(table: pd.DataFrame, band=(1.0, 30.0)) -> dict:
    """How a design covers accumulated regularization, over its pipelines with two or more alphas.

    Returns ``n`` (those pipelines), ``per_decade`` (``{k: pipelines with accumulated in [10^k,
    10^(k+1))}`` for every decade from the smallest to the largest value, empty ones included),
    ``in_band`` (pipelines with ``band[0] <= accumulated <= band[1]``), ``forget`` (predicted to
    forget by e within the run: a finite ``predicted_forgetting_steps``) and ``censored`` (predicted
    not to: ``inf``).
    """
    compared = table[table["alphas"].str.count(",") >= 1] if "alphas" in table else table
    accumulated = compared["accumulated"].to_numpy(dtype=np.float64)
    usable = accumulated[np.isfinite(accumulated) & (accumulated > 0)]
    per_decade: dict[int, int] = {}
    if usable.size:
        decades = np.floor(np.log10(usable)).astype(int)
        per_decade = {
            int(k): int(np.sum(decades == k)) for k in range(decades.min(), decades.max() + 1)
        }
    steps = compared["predicted_forgetting_steps"].to_numpy(dtype=np.float64)
    return {
        "n": int(len(compared)),
        "per_decade": per_decade,
        "in_band": int(np.sum((accumulated >= band[0]) & (accumulated <= band[1]))),
        "band": tuple(band),
        "forget": int(np.sum(np.isfinite(steps))),
        "censored": int(np.sum(np.isinf(steps))),
    }


def _unit_text(row: pd.Series, unit: str) -> str:
    """A unit's total as the design prints it; blank for the noise unit the optimizer does not add
    (``theory.units.noise_unit``: ``adam`` for Adam-family, ``sgd_noise`` otherwise)."""
    noise = ("sgd_noise", "adam")
    if unit in noise and "optimizer" in row and unit != theory_units.noise_unit(row["optimizer"]):
        return ""
    return f"{row[unit]:.3g}"


def format_design(table: pd.DataFrame) -> str:
    """The design as text: one line per pipeline (its units and the predicted norm memory at the end
    and forgetting time, :func:`predicted_forgetting`), then r of ln(epochs) and ln(accumulated) and
    the counts of :func:`design_counts`."""
    law = "law_memory_end" in table
    lines = [
        "design in units of forgetting (totals over each run; theory.units); m_end: the norm memory "
        "at the end by the accumulated unit's norm law (theory.units (U1)-(U2); g_source: none, a "
        "G-free proxy),",
        f"forgotten: the epoch that law reaches {FORGETTING.name}; censored: not within the run"
        + (
            "; law_m_end / law_forgot: the normalized-weight laws with the gradient scale G probed "
            "at each alpha (bridge.probe), the one decision of theory.criterion:"
            if law
            else ":"
        ),
        f"  {'variant':<22} {'alphas':<8} {'epochs':>6} {'steps':>6} {'accumulated':>11} "
        f"{'explicit':>9} {'sgd_noise':>9} {'adam':>9} {'m_end':>6} {'forgotten':>9}"
        + (f" {'law_m_end':>9} {'law_forgot':>10}" if law else ""),
    ]
    for _, row in table.iterrows():
        lines.append(
            f"  {str(row['variant'] or row['pipeline']):<22} {row['alphas']:<8} "
            f"{row['epochs']:>6.0f} {row['steps']:>6.0f} {row['accumulated']:>11.3g} "
            f"{_unit_text(row, 'explicit'):>9} {_unit_text(row, 'sgd_noise'):>9} "
            f"{_unit_text(row, 'adam'):>9} "
            f"{_memory_text(row['predicted_memory_end']):>6} "
            f"{_time_text(row['predicted_forgetting_epochs'], row.get('predicted_state', '')):>9}"
            + (
                f" {_memory_text(row['law_memory_end']):>9} "
                f"{_time_text(row['law_forgetting_epochs'], row['law_state']):>10}"
                if law
                else ""
            )
        )
    corr = design_correlation(table)
    lines.append(
        f"pipelines with two or more alphas: {corr['n']}; accumulated regularization from "
        f"{corr['y_min']:.3g} to {corr['y_max']:.3g} ({corr['decades']:.1f} decades); Pearson r of "
        f"ln(epochs) and ln(accumulated) = {corr['r']:.2f}"
    )
    counts = design_counts(table)
    decades = ", ".join(
        f"[{_power_text(k)}, {_power_text(k + 1)}): {n}" for k, n in counts["per_decade"].items()
    )
    low, high = counts["band"]
    lines += [
        f"pipelines per decade of accumulated regularization: {decades or 'none'}",
        f"pipelines with accumulated regularization from {low:g} to {high:g}: {counts['in_band']}",
        f"predicted to forget by e within the run: {counts['forget']} of {counts['n']} "
        f"(predicted censored: {counts['censored']})",
    ]
    if law:
        sources = ", ".join(dict.fromkeys(str(v) for v in table["law_g_source"]))
        lines.append(f"law g_source: {sources}")
    if "predicted_state" in table and (table["predicted_state"] == NO_NORM_MEMORY).any():
        models = (table["predicted_state"] == NO_NORM_MEMORY).sum()
        lines.append(
            f"m_end '-': {models} pipelines train a model with {NO_NORM_MEMORY} (no per-layer norm "
            "law in this table: their pre-registered predictions are per parameter group, the "
            "joint residual_stream norm of a pre-LN model among them)"
        )
    return "\n".join(lines)


def _memory_text(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.2f}"


def _time_text(epochs: float, state: str = "") -> str:
    if state == "reversed":
        return "reversed"
    if np.isnan(epochs):
        return "-"
    return "censored" if np.isinf(epochs) else f"{epochs:.1f}"


def _power_text(k: int) -> str:
    return f"{10.0**k:g}"


__all__ = [
    "design_inv_init_sq",
    "UNITS",
    "UNIT_DEFINITIONS",
    "config_units",
    "design_correlation",
    "design_counts",
    "design_table",
    "evaluation_units",
    "format_design",
    "init_inv_norm_sq",
    "init_norms",
    "init_scale",
    "law_decision",
    "phase_boundary",
    "predicted_forgetting",
    "NO_NORM_MEMORY",
    "run_config",
    "run_unit_increments",
    "step_lrs",
    "steps_to_unit",
]
