"""One run's forgetting prediction from its own logs: the gradient scale it logged, and the law.

The theory's SGD times need ``G``, the squared loss gradient at unit weight norm, which only a
trained run can supply (without it ``initmem theory`` uses a placeholder of 1 per example / b).
:func:`measured_grad_sq_unit` reads it from a run folder: per scale-invariant layer, the logged
``grad_sq_sum`` times the mean ``|w|^2`` over each evaluation interval, per step
(:func:`initmem.bridge.predict.gradient_scale`, the bridge's own reading), with the layer's
shape. :func:`run_prediction` feeds it to the bridge's law (:func:`~initmem.bridge.predict.
predicted_memory_curves`) for the run's alpha against a reference, and fits the time as the bridge
does (:func:`~initmem.bridge.predict.predicted_times`), so the time equals the bridge's predicted time
for the same pipeline. A run inside a sweep folder (``DIR/runs/<hash>``) uses its pipeline's finished
runs, as the bridge does (the laws take ``G`` as alpha-free: the mean over the pipeline's runs); a run
on its own uses itself. Forgetting is :data:`initmem.theory.criterion.FORGETTING`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.empirical import runfolder, tables
from initmem.empirical.config import RunConfig
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, norm_memory_curves
from initmem.theory.criterion import FORGETTING

from . import measure, predict
from .measure import BridgeDataError


@dataclass(frozen=True)
class RunPrediction:
    """The law's forgetting of one run's alpha against ``reference_alpha``, from logged ``G``.

    ``config``: the run's; ``layers``: one row per scale-invariant layer (``layer``, ``fan_in``,
    ``out_channels``, ``grad_sq_unit`` the whole tensor's mean ``|g|^2 |w|^2`` per step,
    ``grad_sq_unit_per_filter`` = that / out_channels^2, the theory's per-filter ``G``); ``curve``:
    ``step``, ``predicted`` norm memory (mean over the layers) and ``measured`` (against the
    reference run of the same seed in the sweep; NaN without one); ``tau_steps`` the predicted
    forgetting time (the lower bound ``t_span`` when ``forgotten`` is False), ``tau_fit_steps``;
    ``source``: which runs the ``G`` came from; ``forgetting``: the criterion's name.
    """

    run_dir: Path
    config: RunConfig
    reference_alpha: float
    layers: pd.DataFrame
    curve: pd.DataFrame
    tau_steps: float
    tau_fit_steps: float
    forgotten: bool
    source: str
    forgetting: str = FORGETTING.name

    @property
    def tau_epochs(self) -> float:
        return self.tau_steps / self.config.steps_per_epoch


def run_config(run_dir: str | Path) -> RunConfig:
    """The config a run folder recorded in ``config.json`` (BridgeDataError without one)."""
    files = runfolder.RunFiles(run_dir)
    if files.recorded_hash() is None:  # raises DamagedFileError for an unreadable file
        raise BridgeDataError(f"{run_dir} holds no run (no config.json): train it first")
    values = json.loads(files.path("config.json").read_text())["config"]
    return RunConfig.from_dict(values, validate=False)


def _pipeline_runs(run_dir: Path, config: RunConfig) -> tuple[pd.DataFrame, str]:
    """The finished runs whose logs give ``G``: the run's pipeline in its sweep, or the run alone."""
    sweep_dir = run_dir.parent.parent
    if run_dir.parent.name == "runs" and (sweep_dir / "manifest.json").is_file():
        runs = tables.finished_runs(tables.load_sweep(sweep_dir))
        runs = runs[runs["pipeline"] == tables.pipeline_id(config.to_dict())]
        if config.hash in set(runs["hash"]):
            return runs, f"the {len(runs)} finished runs of its pipeline in {sweep_dir}"
    row = {k: tuple(v) if isinstance(v, list) else v for k, v in config.to_dict().items()}
    row.update(hash=config.hash, run_dir=str(run_dir), variant="run", status="completed")
    row["test_acc"] = 0.0  # prepare_runs keeps finished runs; a lone run is taken as it is
    return pd.DataFrame([row]), "this run alone"


def _shapes(config: RunConfig) -> dict[str, tuple[int, ...]]:
    """Parameter shapes of the config's model, built on torch's meta device (no memory)."""
    import torch  # the model's shapes: torch, loaded only here

    from initmem.empirical.models import MODEL_BUILDERS

    with torch.device("meta"):
        model = MODEL_BUILDERS[config.model](config.width)
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def _layer_scales(runs: pd.DataFrame, layers: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """Per scale-invariant layer: mean logged ``G`` over the intervals, shape, per-filter ``G``."""
    grads = predict.gradient_scale(runs, layers)
    if grads.empty or not np.isfinite(grads["grad_sq_unit"]).any():
        raise BridgeDataError(
            "the run logged no gradient sums (track_grad_norms = false): G cannot be measured"
        )
    shapes = _shapes(config)
    table = grads.groupby("layer", sort=False)["grad_sq_unit"].mean().reset_index()
    table["out_channels"] = [shapes[name][0] for name in table["layer"]]
    table["fan_in"] = [math.prod(shapes[name][1:]) for name in table["layer"]]
    table["grad_sq_unit_per_filter"] = table["grad_sq_unit"] / table["out_channels"] ** 2
    return table[["layer", "fan_in", "out_channels", "grad_sq_unit", "grad_sq_unit_per_filter"]]


def measured_grad_sq_unit(run_dir: str | Path) -> pd.DataFrame:
    """The logged gradient scale ``G`` of a run, per scale-invariant layer (:class:`RunPrediction`'s
    ``layers``); ``grad_sq_unit_per_filter`` is what :func:`initmem.theory.predict_forgetting`
    takes as ``grad_sq_unit`` (one per entry of ``fan_ins``)."""
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    runs, _ = _pipeline_runs(run_dir, config)
    runs = measure.prepare_runs(runs)
    return _layer_scales(runs, tables.load_layers(runs), config)


def run_prediction(run_dir: str | Path, reference_alpha: float | None = None) -> RunPrediction:
    """The bridge's law for one run: its alpha against ``reference_alpha`` (module docstring).

    ``reference_alpha`` None: in a sweep, the pipeline's alpha farthest from the run's (the
    bridge's pair: its smallest and largest alpha); else 1, the theory's reference.
    """
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    runs, source = _pipeline_runs(run_dir, config)
    if reference_alpha is None:
        others = [a for a in runs["alpha"].unique() if a != config.alpha]
        reference_alpha = (
            max(others, key=lambda a: abs(math.log(a / config.alpha))) if others else 1.0
        )
    if not (reference_alpha > 0 and reference_alpha != config.alpha):
        raise BridgeDataError(
            f"reference_alpha must be > 0 and differ from the run's alpha {config.alpha:g} "
            f"(got {reference_alpha:g})"
        )
    runs = measure.prepare_runs(runs)
    layers = tables.load_layers(runs)
    scales = _layer_scales(runs, layers, config)
    own = layers[layers["hash"] == config.hash]
    lo, hi = sorted((float(reference_alpha), float(config.alpha)))
    scaled = own[own["layer"].isin(scales["layer"])]
    pipeline = runs.loc[runs["hash"] == config.hash, "pipeline"].iloc[0]
    pairs = scaled[["layer", "epoch", "step"]].assign(
        pipeline=pipeline, scale_invariant=True, alpha_lo=lo, alpha_hi=hi
    )
    curves = predict.predicted_memory_curves(runs, layers, pairs)
    if curves.empty:
        raise BridgeDataError(f"{run_dir}: the law needs two or more evaluations with layer logs")
    mean = curves[curves["layer"] == SCALE_INVARIANT_MEAN]
    per_epoch = pd.Series({pipeline: float(config.steps_per_epoch)})
    time = predict.predicted_times(mean, per_epoch).iloc[0]
    curve = mean[["step", "memory"]].rename(columns={"memory": "predicted"})
    curve = curve.merge(_measured(runs, layers, config, lo, hi), on="step", how="left")
    return RunPrediction(
        run_dir=run_dir,
        config=config,
        reference_alpha=float(reference_alpha),
        layers=scales,
        curve=curve.reset_index(drop=True),
        tau_steps=float(time["pred_tau_steps"]),
        tau_fit_steps=float(time["pred_tau_fit_steps"]),
        forgotten=bool(time["pred_forgotten"]),
        source=source,
    )


def _measured(runs, layers, config, lo, hi) -> pd.DataFrame:
    """The measured norm memory of the run's seed between alphas ``lo`` and ``hi`` (step, measured);
    empty when the sweep holds no run of the other alpha."""
    pair = runs[(runs["seed"] == config.seed) & runs["alpha"].isin([lo, hi])]
    if pair["alpha"].nunique() < 2:
        return pd.DataFrame({"step": pd.Series(dtype=float), "measured": pd.Series(dtype=float)})
    curves = norm_memory_curves(pair, layers[layers["hash"].isin(pair["hash"])])
    mean = curves[curves["layer"] == SCALE_INVARIANT_MEAN]
    return mean[["step", "memory"]].rename(columns={"memory": "measured"})


__all__ = ["RunPrediction", "measured_grad_sq_unit", "run_config", "run_prediction"]
