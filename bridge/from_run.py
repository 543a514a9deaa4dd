"""One run's forgetting predicted from its own logs, against a reference run of its pipeline.

The normalized-weight law needs the gradient scale ``G`` (the squared loss gradient at unit weight
norm), and ``G`` is not alpha-free: with ``alpha_groups = ["all"]`` alpha scales the BatchNorm gains
and the head too, so the alpha = 8 run's ``G`` is ~8^4 times the alpha = 1 run's early on. So each
of the two runs gets its own law (:func:`initmem.bridge.predict.run_law`: its own init norm, lr(t),
decay and the statistics it logged per layer and step), and the norm memory between them is computed
from the two laws' ``|w|^2`` exactly as the measured one is from the logged ``|w|^2``
(:func:`initmem.empirical.curves.norm_memory_curves`, mean over the scaled scale-invariant layers).
The prediction never reads the logged norms it is compared with (only the init norm at step 0).

The reference (:func:`reference_run`) is the run given, or, for a run inside a sweep folder
(``DIR/runs/<hash>``), the finished run of the same pipeline and seed whose alpha is farthest from
the run's in log scale; a run on its own needs one given. Forgetting is
:data:`initmem.theory.criterion.FORGETTING`: the first logged step where the memory is at or below its
level (None when not reached within the logs); the bridge's e-fold fit of the predicted curve
(:func:`~initmem.bridge.predict.predicted_times`) is given beside it, labelled as the fit.
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
    """The law's norm memory of one run against its reference run, beside the measured one.

    ``curve``: ``step``, ``predicted`` and ``measured`` norm memory (mean over the scaled
    scale-invariant layers); ``layers``: per layer ``layer``, ``predicted_memory_end``,
    ``measured_memory_end``, ``law_rel_error`` (largest relative gap of the law's ``|w|^2`` to the
    logged one over both runs: the identity's closure); ``*_forgetting_step``: the first logged step
    with memory <= the criterion's level (None: not reached); ``tau_fit_steps``: the e-fold fit of
    the predicted curve (extrapolated); ``g_source``: which run logged what; ``finished``: both runs
    finished (else the logs so far); ``form``: the law's form (:data:`~initmem.bridge.predict.
    LAW_FORMS`).
    """

    run_dir: Path
    config: RunConfig
    reference_dir: Path
    reference_alpha: float
    layers: pd.DataFrame
    curve: pd.DataFrame
    predicted_forgetting_step: float | None
    measured_forgetting_step: float | None
    tau_fit_steps: float
    g_source: str
    form: str
    finished: bool
    unfinished: tuple[str, ...] = ()
    forgetting: str = FORGETTING.name

    @property
    def predicted_memory_end(self) -> float:
        return float(self.curve["predicted"].iloc[-1])

    @property
    def measured_memory_end(self) -> float:
        return float(self.curve["measured"].iloc[-1])


def run_config(run_dir: str | Path) -> RunConfig:
    """The config a run folder recorded in ``config.json`` (BridgeDataError without one)."""
    files = runfolder.RunFiles(run_dir)
    if files.recorded_hash() is None:  # raises DamagedFileError for an unreadable file
        raise BridgeDataError(f"{run_dir} holds no run (no config.json): train it first")
    values = json.loads(files.path("config.json").read_text())["config"]
    return RunConfig.from_dict(values, validate=False)


def _row(run_dir: Path, config: RunConfig) -> dict:
    """A ``load_sweep``-like row for one run folder (kept by ``prepare_runs`` as it is)."""
    row = {k: tuple(v) if isinstance(v, list) else v for k, v in config.to_dict().items()}
    row.update(hash=config.hash, run_dir=str(run_dir), variant="run", status="completed")
    row["test_acc"] = 0.0  # prepare_runs keeps finished runs; the logs so far are taken as they are
    return row


def reference_run(run_dir: Path, config: RunConfig) -> Path:
    """The reference of a run without one given: in its sweep, the finished run of its pipeline and
    seed with the alpha farthest from its own (log scale). BridgeDataError when there is none."""
    sweep_dir = run_dir.parent.parent
    if run_dir.parent.name == "runs" and (sweep_dir / "manifest.json").is_file():
        runs = tables.finished_runs(tables.load_sweep(sweep_dir))
        runs = runs[
            (runs["pipeline"] == tables.pipeline_id(config.to_dict()))
            & (runs["seed"] == config.seed)
            & (runs["alpha"] != config.alpha)
        ]
        if not runs.empty:
            far = runs.loc[(np.log(runs["alpha"] / config.alpha)).abs().idxmax()]
            return Path(far["run_dir"])
        raise BridgeDataError(
            f"{sweep_dir} holds no finished run of this run's pipeline and seed at another alpha: "
            "give one with --reference RUN_DIR"
        )
    raise BridgeDataError(
        f"{run_dir} is not inside a sweep folder: give a run of the same pipeline at another alpha "
        "with --reference RUN_DIR"
    )


def _check_pair(config: RunConfig, ref: RunConfig, reference_dir: Path) -> None:
    """Same pipeline (every hashed field but alpha and seed), another alpha."""
    if tables.pipeline_id(ref.to_dict()) != tables.pipeline_id(config.to_dict()):
        fields = [
            name
            for name in tables.pipeline_columns()
            if config.to_dict().get(name) != ref.to_dict().get(name)
        ]
        raise BridgeDataError(
            f"reference {reference_dir} is not of the run's pipeline (differs in {fields})"
        )
    if ref.alpha == config.alpha:
        raise BridgeDataError(
            f"reference {reference_dir} has the run's own alpha {config.alpha:g}: give a run at "
            "another alpha"
        )


def _no_law_reason(config: RunConfig, layers: pd.DataFrame) -> str:
    """Why the logs support no law: no scale-invariant weight, or no statistics logged."""
    if not layers["scale_invariant"].astype(bool).any():
        return (
            f"model {config.model} has no scale-invariant (BatchNorm-followed) weight: the "
            "normalized-weight law does not apply"
        )
    if not config.track_grad_norms:
        return "the run was trained with track_grad_norms = false: it logged no gradient scale"
    return "the run logged no per-layer statistics for its scale-invariant weights yet"


def _first_forgotten(curve: pd.DataFrame, column: str) -> float | None:
    hit = curve.loc[curve[column] <= FORGETTING.level, "step"]
    return float(hit.iloc[0]) if not hit.empty else None


def run_prediction(run_dir: str | Path, reference: str | Path | None = None) -> RunPrediction:
    """The law for one run against ``reference`` (a run folder; None: :func:`reference_run`)."""
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    reference_dir = Path(reference) if reference is not None else reference_run(run_dir, config)
    ref = run_config(reference_dir)
    _check_pair(config, ref, reference_dir)
    rows = [_row(run_dir, config), _row(reference_dir, ref)]
    rows[1]["seed"] = config.seed  # the pair is the two runs given, whatever their seeds
    runs = measure.prepare_runs(pd.DataFrame(rows))
    layers = tables.load_layers(runs)
    if layers.empty or not layers["scale_invariant"].astype(bool).any():
        raise BridgeDataError(_no_law_reason(config, layers))
    law = predict.predicted_layers(runs, layers)
    if law.empty or law["hash"].nunique() < 2 or law["weight_norm"].isna().all():
        for _, row in runs.iterrows():  # the reason, from the run whose log supports no law
            mine = layers[layers["hash"] == row["hash"]]
            try:
                predict.law_form(predict.run_config(row), mine)
            except BridgeDataError as err:
                raise BridgeDataError(f"{row['run_dir']}: {err}") from None
        raise BridgeDataError(_no_law_reason(config, layers))
    measured = norm_memory_curves(runs, layers)
    predicted = norm_memory_curves(runs, law)
    curve = _curve(predicted, measured)
    if len(curve) < 2:
        raise BridgeDataError(f"{run_dir}: the law needs two or more evaluations with layer logs")
    pipeline = runs["pipeline"].iloc[0]
    mean = curve.rename(columns={"predicted": "memory"}).assign(
        pipeline=pipeline, layer=SCALE_INVARIANT_MEAN
    )
    fit = predict.predicted_times(mean, pd.Series({pipeline: float(config.steps_per_epoch)}))
    unfinished = tuple(
        str(d) for d in (run_dir, reference_dir) if runfolder.run_state(d) not in ("completed",)
    )
    return RunPrediction(
        run_dir=run_dir,
        config=config,
        reference_dir=reference_dir,
        reference_alpha=float(ref.alpha),
        layers=_layer_table(predicted, measured, law, layers),
        curve=curve,
        predicted_forgetting_step=_first_forgotten(curve, "predicted"),
        measured_forgetting_step=_first_forgotten(curve, "measured"),
        tau_fit_steps=float(fit["pred_tau_fit_steps"].iloc[0]),
        g_source=predict.g_source(
            str(law["law_form"].iloc[0]),
            [f"{h} (alpha {a:g})" for h, a in zip(runs["hash"], runs["alpha"], strict=True)],
        ),
        form=str(law["law_form"].iloc[0]),
        finished=not unfinished,
        unfinished=unfinished,
    )


def _curve(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The layer-mean memory, predicted and measured, at the steps both hold."""
    keep = ["step", "memory"]
    law = predicted[predicted["layer"] == SCALE_INVARIANT_MEAN][keep]
    logged = measured[measured["layer"] == SCALE_INVARIANT_MEAN][keep]
    curve = law.rename(columns={"memory": "predicted"}).merge(
        logged.rename(columns={"memory": "measured"}), on="step"
    )
    return curve.sort_values("step").reset_index(drop=True)


def _layer_table(predicted, measured, law, layers) -> pd.DataFrame:
    """Per layer: memory at the end, predicted and measured, and the law's closure on |w|^2."""
    end = predicted["step"].max()
    pick = ["layer", "memory"]
    table = (
        predicted[(predicted["step"] == end) & (predicted["layer"] != SCALE_INVARIANT_MEAN)][pick]
        .rename(columns={"memory": "predicted_memory_end"})
        .merge(
            measured[measured["step"] == end][pick].rename(
                columns={"memory": "measured_memory_end"}
            ),
            on="layer",
        )
    )
    logged = layers.set_index(["hash", "layer", "step"])["weight_norm"]
    ratio = law.set_index(["hash", "layer", "step"])["weight_norm"] / logged.reindex(
        law.set_index(["hash", "layer", "step"]).index
    )
    error = (ratio**2 - 1.0).abs().groupby(level="layer").max()
    table["law_rel_error"] = table["layer"].map(error)
    return table.reset_index(drop=True)


def measured_grad_sq_unit(run_dir: str | Path) -> pd.DataFrame:
    """The gradient scale ``G`` one run logged, per scale-invariant layer: ``layer``, ``numel``,
    ``grad_sq_unit`` (mean ``|g_t|^2 |w_t|^2`` per step over the run), ``grad_sq_unit_first`` and
    ``grad_sq_unit_last`` (its first and last interval's mean): the run's own, at its own alpha."""
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    runs = measure.prepare_runs(pd.DataFrame([_row(run_dir, config)]))
    layers = tables.load_layers(runs)
    mine = layers[layers["scale_invariant"].astype(bool)].sort_values(["layer", "step"])
    if mine.empty or "grad_sq_unit_sum" not in mine or mine["grad_sq_unit_sum"].isna().all():
        raise BridgeDataError(_no_law_reason(config, layers))
    rows = []
    for layer, group in mine.groupby("layer", sort=False):
        span = group["step"].diff()
        per_step = (group["grad_sq_unit_sum"] / span).dropna()
        total = group["grad_sq_unit_sum"].sum() / (group["step"].max() - group["step"].min())
        rows.append(
            {
                "layer": layer,
                "numel": int(group["numel"].iloc[0]),
                "grad_sq_unit": float(total),
                "grad_sq_unit_first": float(per_step.iloc[0]),
                "grad_sq_unit_last": float(per_step.iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def prediction_dict(prediction: RunPrediction) -> dict:
    """JSON-ready: the fields the CLI prints (non-finite numbers as None / "inf")."""

    def clean(value):
        if value is None:
            return None
        value = float(value)
        return None if math.isnan(value) else ("inf" if math.isinf(value) else value)

    return {
        "run_dir": str(prediction.run_dir),
        "reference_dir": str(prediction.reference_dir),
        "alpha": prediction.config.alpha,
        "reference_alpha": prediction.reference_alpha,
        "forgetting": prediction.forgetting,
        "predicted_memory_end": clean(prediction.predicted_memory_end),
        "measured_memory_end": clean(prediction.measured_memory_end),
        "predicted_forgetting_step": clean(prediction.predicted_forgetting_step),
        "measured_forgetting_step": clean(prediction.measured_forgetting_step),
        "tau_fit_steps_extrapolated": clean(prediction.tau_fit_steps),
        "g_source": prediction.g_source,
        "law_form": prediction.form,
        "finished": prediction.finished,
        "unfinished": list(prediction.unfinished),
        "layers": [
            {k: (v if isinstance(v, str) else clean(v)) for k, v in row.items()}
            for row in prediction.layers.to_dict("records")
        ],
        "curve": [{k: clean(v) for k, v in r.items()} for r in prediction.curve.to_dict("records")],
    }


__all__ = [
    "RunPrediction",
    "measured_grad_sq_unit",
    "prediction_dict",
    "reference_run",
    "run_config",
    "run_prediction",
]
