"""The architectures study: does the memory of alpha go where the theory's mechanism says, model by model?

Setting
-------
A sweep folder whose runs train more than one model (``config.model``: the ``architectures``
preset's ResNet-9, ViT-tiny, MLP-Mixer, NF-ResNet and MLP, or plug-ins), each under several
pipelines (low-lr SGD, SGD + L2, Adam, AdamW), at two or more alphas and several seeds. Before the
runs trained, ``initmem sweep run`` wrote the theory's predictions per pipeline
(:mod:`initmem.bridge.preregister`, ``DIR/predictions/``); where a pipeline has none they are computed
here from its config (the document says which).

Conventions
-----------
An *architecture* is a value of ``config.model``; a *cell* is one (architecture, pipeline). Spreads in
percentage points, times in optimizer steps; ``T``: the pipeline's run length in steps. Intervals 95%.

Definitions (each computed per cell from the folder; the measures are :mod:`initmem.empirical.memory`'s)
---------------------------------------------------------------------------------------------------------
(A1) **Function memory** of a cell: the rules of :mod:`~initmem.bridge.study.equivalence` (E1 to
     E6) on the validation-selected test accuracy of the seeds that interpolate at every alpha (M1):
     the seed-paired difference ``d_s = acc(alpha_max, s) - acc(alpha_min, s)`` (pp), ``kept`` when
     its 95% t-interval excludes 0, ``gone`` when the two one-sided tests put it within +-
     :data:`SPREAD_MARGIN_PP` (a practical zero fixed in advance), else ``cannot tell``. Its noise
     floor is the seed sd of ``d_s``; the spread M2 (:func:`initmem.empirical.memory.spread_memory`)
     is reported beside it, the permutation test only where its smallest p can reach 0.05.
(A2) **Norm memory** (M4) at the end, with its t-interval over seeds, of the deciding group's norm
     (A3): the layer mean of the scale-invariant weights, or the joint norm of a pre-LN model's
     ``residual_stream`` group (the layer-log entry
     :data:`~initmem.empirical.config.RESIDUAL_STREAM_LAYER`); decided by the one rule of
     :mod:`initmem.theory.criterion` (:func:`~initmem.theory.criterion.interval_state`):
     ``converged`` (forgotten) / ``apart`` (kept) / ``reversed`` (below 0, the interval excluding 0:
     not forgotten) / ``overshoot`` (above 1, the interval excluding 1: kept) / ``cannot tell``;
     *not defined* for a model with neither. Its measured forgetting time: the one decision
     (:func:`initmem.bridge.measure.decide_seeds`: the first logged step where the seed-mean
     ``|norm memory|`` is at most 1/e); *censored* (``> T``) when it never is, or when it ends reversed.
(A3) **Prediction**: the *deciding group* is the first of :data:`DECIDING_GROUPS` the pipeline's
     predictions give tensors: ``scale_invariant`` (the normalized-weight laws per layer, P1 of
     :mod:`~initmem.bridge.preregister`), ``residual_stream`` (the same laws on the joint norm of a
     pre-LN model), else ``other`` (the lazy NTK memory term and its decay, P2); the head's
     logit-scale row (P3) is reported beside it, not used. Predicted state: ``forgets within the
     run`` when the deciding group's time is at most ``T``, ``keeps alpha past the run`` when it is
     longer (or never), ``no prediction`` when the row has no closed form.
(A4) **Agreement** of a cell: ``agrees`` when the function memory is ``gone`` and the prediction
     forgets, or ``kept`` and it keeps; ``disagrees`` when they are opposite, or when the norm memory
     ``converged`` while the function memory was ``kept`` (the memory of alpha persists without the
     mechanism); else ``cannot tell``.
(A5) **Verdict** per architecture: "the thesis does not hold here" when a cell disagrees (a decided
     disagreement); "the thesis holds here" when none disagrees and at least one cell predicted to
     keep and one predicted to forget agree (both directions decided); else "cannot tell at this
     size", naming per undecided cell the seeds that would decide it at its measured seed noise
     (:func:`seeds_to_decide`).
(A6) **Calibration** (:mod:`initmem.bridge.study.architecture_calibration`): A1 to A5 run on
     planted-answer replicas of the same design (cells, seeds used, each cell's measured seed noise)
     under truths where the thesis holds and where it fails in each direction; per architecture the
     rate at which the verdict names the wrong answer (its worst over the truths) and the rate at
     which it decides at all (the design's power).

:func:`architecture_study` computes the cells; :mod:`initmem.bridge.study.architecture_document` writes
``docs/architectures.md`` from them (``initmem study DIR --doc docs/architectures.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge import preregister
from initmem.bridge.measure import decide_seeds
from initmem.bridge.study import equivalence
from initmem.bridge.study.architecture_document import document
from initmem.bridge.study.equivalence import EQUIVALENCE_MARGIN_PP
from initmem.empirical import memory, tables
from initmem.empirical.config import RESIDUAL_STREAM_LAYER
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, MemoryDataError, norm_memory_curves
from initmem.empirical.sweep import read_manifest
from initmem.theory.criterion import FORGETTING, interval_state

#: A paired difference the two one-sided tests put within +- this (pp) is gone (A1, its 90%
#: interval inside): the one margin of function memory
#: (:data:`initmem.bridge.study.equivalence.EQUIVALENCE_MARGIN_PP`).
SPREAD_MARGIN_PP = EQUIVALENCE_MARGIN_PP
#: Prediction groups that decide a cell (A3): the first one the pipeline's predictions give tensors.
DECIDING_GROUPS = ("scale_invariant", "residual_stream", "other")
#: The norm-memory curve (layer of :func:`~initmem.empirical.curves.norm_memory_curves`) that
#: measures each deciding group (A2); ``other`` has none.
NORM_LAYERS = {"scale_invariant": SCALE_INVARIANT_MEAN, "residual_stream": RESIDUAL_STREAM_LAYER}
#: Power at which :func:`seeds_to_decide` counts the seeds a cell needs (E5's).
DECIDE_POWER = equivalence.GONE_POWER


@dataclass
class ArchitectureStudy:
    """The cells (one row per architecture x pipeline, :func:`cell_table`), the predictions used
    (one row per pipeline and group, with ``source``), and the analysis's notes."""

    sweep_dir: Path
    cells: pd.DataFrame
    predictions: pd.DataFrame
    runs: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    #: A6 (:func:`~initmem.bridge.study.architecture_calibration.calibrate_study` sets it; empty
    #: when not asked for).
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The rules of A1 and A3, as the document states them.
    spread_margin_pp: float = SPREAD_MARGIN_PP
    deciding_groups: tuple[str, ...] = DECIDING_GROUPS

    def architectures(self) -> list[str]:
        """The models of the sweep, in sweep order."""
        return list(dict.fromkeys(self.cells["model"])) if not self.cells.empty else []

    def verdict(self) -> list[str]:
        """One sentence per architecture (A5)."""
        return [verdict_sentence(model, self.cells_of(model)) for model in self.architectures()]

    def cells_of(self, model: str) -> pd.DataFrame:
        return self.cells[self.cells["model"] == model]

    def law_sentences(self) -> list[str]:
        """Per architecture with scale-invariant weights: how often the law's predicted forgetting
        of the norm memory matches the measured one (A2 against A3)."""
        return [
            s for model in self.architectures() if (s := law_sentence(model, self.cells_of(model)))
        ]

    def markdown(self, *, command: str = "", wall: str = "") -> str:
        """The published document (:func:`initmem.bridge.study.architecture_document.document`)."""
        return document(self, command=command, wall=wall)


# ====================================================================== states
#: A2's names for the states of :func:`initmem.theory.criterion.interval_state`.
NORM_STATES = {
    "forgotten": "converged",
    "kept": "apart",
    "reversed": "reversed",
    "overshoot": "overshoot",
    "cannot tell": "cannot tell",
    "undefined": "cannot tell",
}


def norm_state(memory_end: float, lo: float, hi: float) -> str:
    """A2: ``converged`` (the interval within 1/e of 0), ``apart`` (above 1/e), ``overshoot`` (above
    1), ``reversed`` (below 0) or ``cannot tell``: :func:`initmem.theory.criterion.interval_state`,
    named for the study."""
    return NORM_STATES[interval_state(memory_end, lo, hi)]


def predicted_state(steps: float, total_steps: float) -> str:
    """A3: the deciding group's predicted time against the run length."""
    if steps is None or (isinstance(steps, float) and math.isnan(steps)):
        return "no prediction"
    return "forgets within the run" if steps <= total_steps else "keeps alpha past the run"


def agreement(
    function: str, predicted: str, norm: str, n_seeds_used: int = 2, diverged: str = ""
) -> tuple[str, str]:
    """A4: the cell's agreement and why (``function``: A1's verdict; ``n_seeds_used``: M1's seeds,
    and ``diverged``: which alphas' runs diverged, to say why a function memory is undefined)."""
    if norm == "converged" and function == "kept":
        return (
            "disagrees",
            "the effective learning rates converged but the accuracy gap between the alphas stayed (its interval excludes 0)",
        )
    if function == "cannot tell" and n_seeds_used < 2 and diverged:
        return "cannot tell", f"runs diverged ({diverged}): no memory to measure at that alpha"
    if function == "cannot tell" and n_seeds_used < 2:
        return "cannot tell", (
            f"{n_seeds_used} seed(s) interpolate at every alpha: no function memory (2 needed)"
        )
    if function == "cannot tell":
        return "cannot tell", "the function memory is not decided at this size"
    if predicted == "no prediction":
        return "cannot tell", "the theory has no closed form for the deciding group"
    forgets = predicted == "forgets within the run"
    if (function == "gone") == forgets:
        return "agrees", f"function memory {function}, as predicted"
    if function == "kept":
        return "disagrees", "the memory of alpha persists past the predicted forgetting time"
    return "disagrees", "the memory of alpha is gone although the theory predicts it kept"


def seeds_to_decide(row) -> float:
    """A5: the seeds (interpolating at every alpha) at which the cell's function memory would be
    decided in the predicted direction with probability :data:`DECIDE_POWER` at its measured seed
    noise and measured difference: E5 (``gone``) for a cell predicted to forget, E5' (``kept``)
    for one predicted to keep. NaN when the noise is not measured (fewer than 2 seeds), the
    difference lies beyond the margin (gone) or at 0 (kept), or no number up to
    :data:`~initmem.bridge.study.equivalence.MAX_SIZE` would do."""
    sd, diff = float(row["sd_pp"]), float(row["diff_pp"])
    if row["predicted_state"] == "forgets within the run":
        return equivalence.seeds_for_gone(sd, row["margin_pp"], power=DECIDE_POWER, diff=diff)
    return equivalence.seeds_for_kept(diff, sd, power=DECIDE_POWER)


def _decide_text(row) -> str:
    """What would decide an undecided cell, as the verdict names it."""
    if row["n_seeds_used"] < 2:
        return str(row["reason"])
    need = seeds_to_decide(row)
    what = "gone" if row["predicted_state"] == "forgets within the run" else "kept"
    if not np.isfinite(need):
        return (
            f"{row['reason']}; no number of seeds would show it {what} at its measured "
            f"difference {row['diff_pp']:+.2f} pp and seed noise (sd {row['sd_pp']:.2f} pp)"
        )
    return (
        f"{row['reason']}; {int(need)} seeds would show it {what} with probability "
        f"{DECIDE_POWER:.1f} at its measured difference {row['diff_pp']:+.2f} pp and seed noise "
        f"(sd {row['sd_pp']:.2f} pp; {int(row['n_seeds_used'])} used)"
    )


def architecture_verdict(cells: pd.DataFrame) -> str:
    """A5's answer for one architecture's cells: ``holds``, ``does not hold`` or ``cannot tell``."""
    if (cells["agreement"] == "disagrees").any():
        return "does not hold"
    agree = cells[cells["agreement"] == "agrees"]
    directions = set(agree["predicted_state"])
    if {"forgets within the run", "keeps alpha past the run"} <= directions:
        return "holds"
    return "cannot tell"


def verdict_sentence(model: str, cells: pd.DataFrame) -> str:
    """A5, with the cells that decide it named."""
    n = len(cells)
    answer = architecture_verdict(cells)
    agree = cells[cells["agreement"] == "agrees"]
    if answer == "does not hold":
        against = cells[cells["agreement"] == "disagrees"]
        reasons = "; ".join(f"{r.pipeline_label}: {r.reason}" for r in against.itertuples())
        return (
            f"{model}: the thesis does not hold here ({len(against)} of {n} pipelines: {reasons})."
        )
    kept = int((agree["spread_state"] == "kept").sum())
    decided = (
        f"{len(agree)} of {n} pipelines agree with the prediction (the memory of alpha kept in "
        f"{kept}, gone in {len(agree) - kept}, each as predicted)"
    )
    if answer == "holds":
        return f"{model}: the thesis holds here ({decided}; none disagrees)."
    undecided = cells[cells["agreement"] == "cannot tell"]
    missing = sorted(
        {"forgets within the run", "keeps alpha past the run"} - set(agree["predicted_state"])
    )
    reasons = "; ".join(
        f"{r['pipeline_label']}: {_decide_text(r)}" for _, r in undecided.iterrows()
    )
    return (
        f"{model}: cannot tell at this size ({decided}; none disagrees; no decided pipeline "
        f"predicted to {' or '.join(_direction(m) for m in missing)}; undecided: {reasons})."
    )


def _direction(predicted: str) -> str:
    """A predicted state as the verb the verdict uses."""
    return "forget" if predicted == "forgets within the run" else "keep"


def law_sentence(model: str, cells: pd.DataFrame) -> str:
    """A2 against A3 for the norm memory of one architecture ('' without a measured norm group)."""
    defined = cells[cells["has_norm_memory"]]
    if defined.empty:
        return ""
    decided = defined[defined["norm_state"].isin(["converged", "apart", "reversed", "overshoot"])]
    decided = decided[decided["predicted_state"] != "no prediction"]
    match = decided[
        (decided["norm_state"] == "converged")
        == (decided["predicted_state"] == "forgets within the run")
    ]
    reached = int((~defined["norm_time_censored"]).sum())
    groups = ", ".join(f"`{g}`" for g in dict.fromkeys(defined["deciding_group"]))
    return (
        f"{model}: the measured norm memory ({groups}) was forgotten ({FORGETTING.name}) within "
        f"the run in {reached} of {len(defined)} pipelines (censored in the others); the "
        f"normalized-weight laws' predicted forgetting matches the measured end state in "
        f"{len(match)} of the {len(decided)} pipelines whose end state is decided."
    )


# ====================================================================== the cells
def is_architecture_sweep(sweep_dir: str | Path) -> bool:
    """Whether the folder's runs train more than one model (the study this module writes)."""
    return len({run.config.model for run in read_manifest(sweep_dir)}) > 1


def sweep_predictions(sweep_dir: Path, manifest, *, compute_missing: bool = True):
    """The predictions per pipeline and group with their ``source``: the pre-registered files
    (:func:`~initmem.bridge.preregister.read_sweep_predictions`), else, with ``compute_missing``,
    :func:`~initmem.bridge.preregister.predict_groups` on the pipeline's config now. Returns the
    table and notes for pipelines without any."""
    found = preregister.read_sweep_predictions(sweep_dir)
    if not found.empty:
        found = found.assign(source=found["provenance"])  # "computed after N runs had started"
    have = set(found["pipeline"]) if not found.empty else set()
    frames, notes = [found] if not found.empty else [], []
    for p in preregister.sweep_pipelines(manifest):
        if p.pipeline in have:
            continue
        if not compute_missing:
            notes.append(f"{p.variant}: no pre-registered predictions (not computed)")
            continue
        try:
            table = preregister.predict_groups(p.config.replace(alpha=p.alpha)).table
        except Exception as err:  # any failure of the model, data or laws: a note, not a stop
            notes.append(
                f"{p.variant}: predictions could not be computed ({type(err).__name__}: {err})"
            )
            continue
        frames.append(
            table.assign(
                pipeline=p.pipeline,
                variant=p.variant,
                alpha=p.alpha,
                source="computed after the runs (no pre-registered file)",
            )
        )
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), notes


def norm_times(curves: pd.DataFrame, layer: str = SCALE_INVARIANT_MEAN) -> pd.Series:
    """A2: per pipeline, the step where the norm memory of ``layer`` (the layer mean of the
    scale-invariant weights, or the joint residual-stream norm) is forgotten by the one decision
    (:func:`initmem.bridge.measure.decide_seeds`; NaN: not within the logged steps, censored)."""
    mean = curves[curves["layer"] == layer]
    out = {}
    for pipeline, group in mean.groupby("pipeline"):
        table = group.pivot_table(index="seed", columns="step", values="memory", dropna=False)
        decision = decide_seeds(table.columns.to_numpy(dtype=float), table.to_numpy())
        out[pipeline] = decision.step if decision.forgotten else np.nan
    return pd.Series(out, dtype=float)


def diverged_text(runs: pd.DataFrame) -> str:
    """Which alphas' runs of one pipeline diverged, as ``alpha 8: 4 of 4`` ('' for none)."""
    parts = []
    for alpha, group in runs.groupby("alpha"):
        n = int((group["status"] == "diverged").sum())
        if n:
            parts.append(f"alpha {alpha:g}: {n} of {len(group)}")
    return ", ".join(parts)


def _settings(config) -> str:
    """A pipeline as text: optimizer, lr and the decays that are not zero."""
    text = f"{config.optimizer} lr {config.lr:g}"
    if config.momentum:
        text += f", mu {config.momentum:g}"
    if config.l2:
        text += f", L2 {config.l2:g}"
    if config.weight_decay:
        text += f", wd {config.weight_decay:g}"
    return text


def cell_table(runs, configs, predictions, layers, curves) -> pd.DataFrame:
    """One row per (architecture, pipeline): A1 to A4 (see the module docstring). ``configs``:
    pipeline -> its first RunConfig; ``layers`` / ``curves``: the layer logs and their norm memory
    curves (empty when none)."""
    done = tables.finished_runs(runs)
    norm_end, times = {}, {}
    if not curves.empty:
        for group, layer in NORM_LAYERS.items():
            end = memory.norm_memory_end(curves, done, layer=layer)
            norm_end[group] = end.set_index("pipeline") if not end.empty else end
            times[group] = norm_times(curves, layer)
    rows = []
    for pipeline in runs["pipeline"].unique():
        group = done[done["pipeline"] == pipeline]
        config = configs[pipeline]
        row = {
            "model": config.model,
            "pipeline": pipeline,
            "pipeline_label": str(runs.loc[runs["pipeline"] == pipeline, "label"].iloc[0]),
            "settings": _settings(config),
            "total_steps": float(config.total_steps),
        }
        spread = memory.spread_memory(group) if len(group) else {"n_seeds_used": 0}
        row |= {k: spread.get(k, np.nan) for k in ("n_seeds_used", "acc_by_alpha", "alphas")}
        row |= {
            k: spread.get(k, np.nan)
            for k in ("spread_pp", "spread_lo", "spread_hi", "null_mean_pp", "null_hi_pp")
        }
        function = equivalence.pipeline_verdict(group) if len(group) else _no_function()
        row |= {k: function[k] for k in _FUNCTION_KEYS}
        row["spread_state"] = function["verdict"]
        row |= _predicted(predictions, pipeline)
        row |= _norm(row["deciding_group"], pipeline, norm_end, times)
        row["predicted_state"] = predicted_state(row["predicted_steps"], row["total_steps"])
        row["diverged"] = diverged_text(group)
        row["agreement"], row["reason"] = agreement(
            row["spread_state"],
            row["predicted_state"],
            row["norm_state"],
            row["n_seeds_used"],
            row["diverged"],
        )
        if row["spread_state"] == "gone" and (row["diff_lo"] > 0 or row["diff_hi"] < 0):
            row["reason"] += (
                f"; gone within the +-{row['margin_pp']:g} pp margin fixed in advance, though not "
                f"0: {row['diff_pp']:+.2f} pp [95% {row['diff_lo']:+.2f}, {row['diff_hi']:+.2f}]"
            )
        rows.append(row)
    return pd.DataFrame(rows)


#: A1's columns of a cell, from :func:`initmem.bridge.study.equivalence.pipeline_verdict`.
_FUNCTION_KEYS = (
    "diff_pp",
    "diff_lo",
    "diff_hi",
    "sd_pp",
    "tost_lo",
    "tost_hi",
    "p_tost",
    "margin_pp",
    "perm_p",
    "perm_p_min",
)


def _no_function() -> dict:
    """A1 for a pipeline without finished runs."""
    return {k: np.nan for k in _FUNCTION_KEYS} | {
        "margin_pp": SPREAD_MARGIN_PP,
        "verdict": "cannot tell",
    }


def _norm(group: str, pipeline: str, norm_end: dict, times: dict) -> dict:
    """A2's columns for one pipeline: the norm memory of its deciding group (A3) at the end, its
    state and its forgetting time; *not defined* for a group without a norm (``other``)."""
    if group not in NORM_LAYERS:
        return {
            "has_norm_memory": False,
            "norm_end": np.nan,
            "norm_lo": np.nan,
            "norm_hi": np.nan,
            "norm_n_seeds": 0,
            "norm_state": "not defined: no normalized weights",
            "norm_time_steps": np.nan,
            "norm_time_censored": False,
        }
    end = norm_end.get(group)
    row = {"has_norm_memory": True}
    if end is not None and pipeline in end.index:
        n = end.loc[pipeline]
        row |= {"norm_end": n["memory_end"], "norm_lo": n["lo"], "norm_hi": n["hi"]}
        row |= {"norm_n_seeds": int(n["n_seeds"])}
        row["norm_state"] = norm_state(n["memory_end"], n["lo"], n["hi"])
    else:
        row |= {"norm_end": np.nan, "norm_lo": np.nan, "norm_hi": np.nan, "norm_n_seeds": 0}
        row["norm_state"] = "cannot tell"
    time = times.get(group, pd.Series(dtype=float)).get(pipeline, np.nan)
    return row | {"norm_time_steps": time, "norm_time_censored": not np.isfinite(time)}


def _predicted(predictions: pd.DataFrame, pipeline: str) -> dict:
    """A3's columns for one pipeline: the deciding group, its steps and mechanism, the head's steps,
    the NTK memory fraction and where the numbers come from."""
    empty = {
        "deciding_group": DECIDING_GROUPS[-1],
        "predicted_steps": np.nan,
        "predicted_mechanism": "no predictions for this pipeline",
        "head_steps": np.nan,
        "memory_fraction": np.nan,
        "prediction_source": "none",
    }
    if predictions.empty or pipeline not in set(predictions["pipeline"]):
        return empty
    table = predictions[predictions["pipeline"] == pipeline].set_index("group")
    present = [g for g in DECIDING_GROUPS if g in table.index and table.loc[g, "tensors"] > 0]
    if not present:
        return empty
    group = present[0]
    steps = float(table.loc[group, "steps"])
    return {
        "deciding_group": group,
        "predicted_steps": steps,
        "predicted_mechanism": str(table.loc[group, "mechanism"]),
        "head_steps": float(table.loc["head", "steps"]) if "head" in table.index else np.nan,
        "memory_fraction": float(table.loc["other", "memory_fraction"])
        if "other" in table.index
        else np.nan,
        "prediction_source": str(table["source"].iloc[0]),
    }


def design_predictions(runs) -> pd.DataFrame:
    """A3 before any run trains: per pipeline of ``runs`` (a sweep's expanded runs), the deciding
    group's prediction at the pipeline's largest alpha
    (:func:`~initmem.bridge.preregister.predict_groups`, what ``sweep run`` pre-registers) and the
    predicted state against the run length. Columns: ``variant``, ``model``, ``alpha``,
    ``deciding_group``, ``predicted_steps``, ``total_steps``, ``predicted_state``."""
    rows = []
    for p in preregister.sweep_pipelines(runs):
        config = p.config.replace(alpha=p.alpha)
        table = preregister.predict_groups(config).table.assign(source="", pipeline=p.pipeline)
        found = _predicted(table, p.pipeline)
        total = float(config.total_steps)
        rows.append(
            {
                "variant": p.variant,
                "model": config.model,
                "alpha": p.alpha,
                "deciding_group": found["deciding_group"],
                "predicted_steps": found["predicted_steps"],
                "total_steps": total,
                "predicted_state": predicted_state(found["predicted_steps"], total),
            }
        )
    return pd.DataFrame(rows)


def architecture_study(sweep_dir: str | Path, *, compute_missing: bool = True) -> ArchitectureStudy:
    """Read a sweep folder and compute the cells of every architecture (A1-A5 of the module
    docstring); A6 is :func:`~initmem.bridge.study.architecture_calibration.calibrate_study`'s."""
    sweep_dir = Path(sweep_dir)
    manifest = read_manifest(sweep_dir)
    runs = tables.load_sweep(sweep_dir, manifest)
    if runs.empty:
        raise MemoryDataError(f"{sweep_dir} lists no runs")
    runs["label"] = tables.pipeline_labels(runs)
    configs = {}
    for run in manifest:
        configs.setdefault(tables.pipeline_id(run.config.to_dict()), run.config)
    predictions, notes = sweep_predictions(sweep_dir, manifest, compute_missing=compute_missing)
    done = tables.finished_runs(runs)
    layers, curves = pd.DataFrame(), pd.DataFrame()
    if len(done):
        layers = tables.load_layers(done)
        try:
            curves = norm_memory_curves(done, layers)
        except MemoryDataError as err:
            notes.append(f"no norm memory: {err}")
    cells = cell_table(runs, configs, predictions, layers, curves)
    return ArchitectureStudy(sweep_dir, cells, predictions, runs, notes)


__all__ = [
    "DECIDE_POWER",
    "DECIDING_GROUPS",
    "NORM_LAYERS",
    "SPREAD_MARGIN_PP",
    "ArchitectureStudy",
    "agreement",
    "architecture_study",
    "architecture_verdict",
    "cell_table",
    "design_predictions",
    "diverged_text",
    "is_architecture_sweep",
    "law_sentence",
    "norm_state",
    "norm_times",
    "predicted_state",
    "seeds_to_decide",
    "sweep_predictions",
    "verdict_sentence",
]
