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
(A1) **Spread** (M2): spread of the validation-selected test accuracy across alpha on the seeds that
     interpolate at every alpha, with its bootstrap interval and its within-seed permutation null
     (:func:`initmem.empirical.memory.spread_memory`), reported as they are. With two alphas the
     permutation p-value cannot go below ``2 / 2^seeds`` (0.125 for 4 seeds), so the *state* is
     decided by the seed-paired difference ``d_s = acc(alpha_max, s) - acc(alpha_min, s)`` (pp) and
     its Student-t interval over seeds (:func:`initmem.empirical.memory.mean_interval`; the seed-to-seed
     noise floor): ``gone`` when the interval lies within ``+-`` :data:`SPREAD_MARGIN_PP` (a practical
     zero fixed in advance), ``kept`` when it excludes 0 (and is not gone), else ``cannot tell``.
(A2) **Norm memory** (M4) of the scale-invariant weights at the end, with its t-interval over seeds
     (:func:`initmem.empirical.memory.norm_memory_end`), decided by the one rule of
     :mod:`initmem.theory.criterion` (:func:`~initmem.theory.criterion.interval_state`):
     ``converged`` (forgotten) / ``apart`` (kept) / ``reversed`` (below 0, the interval excluding 0:
     not forgotten) / ``overshoot`` (above 1, the interval excluding 1: kept) / ``cannot tell``; *not defined* for a model whose layer logs mark no weight
     scale-invariant. Its measured forgetting time: the one decision
     (:func:`initmem.bridge.measure.decide_seeds`: the first logged step where the seed-mean
     ``|norm memory|`` is at most 1/e); *censored* (``> T``) when it never is, or when it ends reversed.
(A3) **Prediction**: the *deciding group* is ``scale_invariant`` for a model that has such weights
     (the normalized-weight laws, P1 of :mod:`~initmem.bridge.preregister`) and ``other`` otherwise
     (the lazy NTK memory term and its decay, P2); the head's logit-scale row (P3) is reported beside
     it, not used. Predicted state: ``forgets within the run`` when the deciding group's time is at
     most ``T``, ``keeps alpha past the run`` when it is longer (or never), ``no prediction`` when the
     row has no closed form.
(A4) **Agreement** of a cell: ``agrees`` when the spread is ``gone`` and the prediction forgets, or
     ``kept`` and it keeps; ``disagrees`` when they are opposite, or when the norm memory
     ``converged`` while the spread was ``kept`` (the memory of alpha persists without the mechanism);
     else ``cannot tell``.
(A5) **Verdict** per architecture: "the thesis does not hold here" when any of its cells disagrees;
     "the data agree with the thesis here" when every cell agrees; else "cannot tell at this size".

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
from initmem.bridge.study.architecture_document import document
from initmem.bridge.study.equivalence import EQUIVALENCE_MARGIN_PP, paired_differences
from initmem.empirical import memory, tables
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, MemoryDataError, norm_memory_curves
from initmem.empirical.sweep import read_manifest
from initmem.theory.criterion import FORGETTING, interval_state

#: A paired difference whose 95% interval lies within +- this (pp) counts as gone (A1): the one
#: margin of function memory (:data:`initmem.bridge.study.equivalence.EQUIVALENCE_MARGIN_PP`).
SPREAD_MARGIN_PP = EQUIVALENCE_MARGIN_PP
#: Prediction groups that decide a cell (A3): the first one the model has.
DECIDING_GROUPS = ("scale_invariant", "other")


@dataclass
class ArchitectureStudy:
    """The cells (one row per architecture x pipeline, :func:`cell_table`), the predictions used
    (one row per pipeline and group, with ``source``), and the analysis's notes."""

    sweep_dir: Path
    cells: pd.DataFrame
    predictions: pd.DataFrame
    runs: pd.DataFrame
    notes: list[str] = field(default_factory=list)
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
def paired_difference(runs: pd.DataFrame) -> dict:
    """A1's statistic for one pipeline's finished runs: the mean over the seeds used (M1) of
    ``acc(alpha_max, s) - acc(alpha_min, s)`` in pp (E1 of :mod:`~initmem.bridge.study.equivalence`),
    with its 95% t-interval (``diff_pp``, ``diff_lo``, ``diff_hi``; NaN with fewer than 2 alphas or
    2 seeds used)."""
    d = paired_differences(runs)[3]
    if d.size < 2:
        return {"diff_pp": np.nan, "diff_lo": np.nan, "diff_hi": np.nan}
    mean, lo, hi = memory.mean_interval(d)
    return {"diff_pp": mean, "diff_lo": lo, "diff_hi": hi}


def spread_state(diff_lo: float, diff_hi: float, margin_pp: float = SPREAD_MARGIN_PP) -> str:
    """A1: ``gone``, ``kept`` or ``cannot tell`` from the paired difference's interval."""
    if not (np.isfinite(diff_lo) and np.isfinite(diff_hi)):
        return "cannot tell"
    if -margin_pp < diff_lo and diff_hi < margin_pp:
        return "gone"
    if diff_lo > 0 or diff_hi < 0:
        return "kept"
    return "cannot tell"


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
    spread: str, predicted: str, norm: str, n_seeds_used: int = 2, diverged: str = ""
) -> tuple[str, str]:
    """A4: the cell's agreement and why (``n_seeds_used``: M1's seeds, and ``diverged``: which
    alphas' runs diverged, to say why a spread is undefined)."""
    if norm == "converged" and spread == "kept":
        return (
            "disagrees",
            "the effective learning rates converged but the accuracy gap between the alphas stayed (its interval excludes 0)",
        )
    if spread == "cannot tell" and n_seeds_used < 2 and diverged:
        return "cannot tell", f"runs diverged ({diverged}): no memory to measure at that alpha"
    if spread == "cannot tell" and n_seeds_used < 2:
        return "cannot tell", (
            f"{n_seeds_used} seed(s) interpolate at every alpha: no spread (2 needed)"
        )
    if spread == "cannot tell":
        return "cannot tell", "the spread is not decided at this size"
    if predicted == "no prediction":
        return "cannot tell", "the theory has no closed form for the deciding group"
    forgets = predicted == "forgets within the run"
    if (spread == "gone") == forgets:
        return "agrees", f"spread {spread}, as predicted"
    if spread == "kept":
        return "disagrees", "the memory of alpha persists past the predicted forgetting time"
    return "disagrees", "the memory of alpha is gone although the theory predicts it kept"


def verdict_sentence(model: str, cells: pd.DataFrame) -> str:
    """A5, with the cells that decide it named."""
    n = len(cells)
    against = cells[cells["agreement"] == "disagrees"]
    agree = cells[cells["agreement"] == "agrees"]
    undecided = cells[cells["agreement"] == "cannot tell"]
    if len(against):
        reasons = "; ".join(f"{r.pipeline_label}: {r.reason}" for r in against.itertuples())
        return (
            f"{model}: the thesis does not hold here ({len(against)} of {n} pipelines: {reasons})."
        )
    if len(agree) == n and n:
        kept = int((agree["spread_state"] == "kept").sum())
        return (
            f"{model}: the data agree with the thesis here (all {n} pipelines: the memory of alpha "
            f"is kept in {kept} and gone in {n - kept}, each as predicted)."
        )
    reasons = "; ".join(f"{r.pipeline_label}: {r.reason}" for r in undecided.itertuples())
    return (
        f"{model}: cannot tell at this size ({len(agree)} of {n} pipelines agree with the "
        f"prediction, none disagrees; undecided: {reasons})."
    )


def law_sentence(model: str, cells: pd.DataFrame) -> str:
    """A2 against A3 for the norm memory of one architecture ('' without scale-invariant weights)."""
    defined = cells[cells["has_scale_invariant"]]
    if defined.empty:
        return ""
    decided = defined[defined["norm_state"].isin(["converged", "apart", "reversed", "overshoot"])]
    decided = decided[decided["predicted_state"] != "no prediction"]
    match = decided[
        (decided["norm_state"] == "converged")
        == (decided["predicted_state"] == "forgets within the run")
    ]
    reached = int((~defined["norm_time_censored"]).sum())
    return (
        f"{model}: the measured norm memory was forgotten ({FORGETTING.name}) within the run in {reached} of "
        f"{len(defined)} pipelines (censored in the others); the normalized-weight laws' predicted "
        f"forgetting matches the measured end state in {len(match)} of the {len(decided)} "
        f"pipelines whose end state is decided."
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


def norm_times(curves: pd.DataFrame) -> pd.Series:
    """A2: per pipeline, the step where the norm memory of the scale-invariant weights is forgotten
    by the one decision (:func:`initmem.bridge.measure.decide_seeds`, on the layer mean of
    :data:`initmem.theory.criterion.LAYER_RULE`; NaN: not within the logged steps, censored)."""
    mean = curves[curves["layer"] == SCALE_INVARIANT_MEAN]
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
    norm_end = memory.norm_memory_end(curves, done) if not curves.empty else pd.DataFrame()
    norm_end = norm_end.set_index("pipeline") if not norm_end.empty else norm_end
    times = norm_times(curves) if not curves.empty else pd.Series(dtype=float)
    invariant_hashes = (
        set(layers.loc[layers["scale_invariant"].astype(bool), "hash"])
        if not layers.empty and "scale_invariant" in layers
        else set()
    )
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
        row |= {k: spread.get(k, np.nan) for k in ("p_value", "p_min")}
        row |= paired_difference(group) if len(group) else {"diff_lo": np.nan, "diff_hi": np.nan}
        row["spread_state"] = spread_state(row["diff_lo"], row["diff_hi"])
        has_invariant = bool(set(group["hash"]) & invariant_hashes)
        row["has_scale_invariant"] = has_invariant
        if has_invariant and pipeline in getattr(norm_end, "index", []):
            n = norm_end.loc[pipeline]
            row |= {"norm_end": n["memory_end"], "norm_lo": n["lo"], "norm_hi": n["hi"]}
            row["norm_n_seeds"] = int(n["n_seeds"])
            row["norm_state"] = norm_state(n["memory_end"], n["lo"], n["hi"])
        else:
            row |= {"norm_end": np.nan, "norm_lo": np.nan, "norm_hi": np.nan, "norm_n_seeds": 0}
            row["norm_state"] = (
                "cannot tell" if has_invariant else "not defined: no scale-invariant weights"
            )
        time = times.get(pipeline, np.nan) if has_invariant else np.nan
        row["norm_time_steps"] = time
        row["norm_time_censored"] = bool(has_invariant and not np.isfinite(time))
        row |= _predicted(predictions, pipeline, has_invariant)
        row["predicted_state"] = predicted_state(row["predicted_steps"], row["total_steps"])
        row["diverged"] = diverged_text(group)
        row["agreement"], row["reason"] = agreement(
            row["spread_state"],
            row["predicted_state"],
            row["norm_state"],
            row["n_seeds_used"],
            row["diverged"],
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _predicted(predictions: pd.DataFrame, pipeline: str, has_invariant: bool) -> dict:
    """A3's columns for one pipeline: the deciding group, its steps and mechanism, the head's steps,
    the NTK memory fraction and where the numbers come from."""
    empty = {
        "deciding_group": DECIDING_GROUPS[0 if has_invariant else 1],
        "predicted_steps": np.nan,
        "predicted_mechanism": "no predictions for this pipeline",
        "head_steps": np.nan,
        "memory_fraction": np.nan,
        "prediction_source": "none",
    }
    if predictions.empty or pipeline not in set(predictions["pipeline"]):
        return empty
    table = predictions[predictions["pipeline"] == pipeline].set_index("group")
    group = empty["deciding_group"]
    if group not in table.index:
        return empty
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


def architecture_study(sweep_dir: str | Path, *, compute_missing: bool = True) -> ArchitectureStudy:
    """Read a sweep folder and compute the cells of every architecture (module docstring)."""
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
    "DECIDING_GROUPS",
    "SPREAD_MARGIN_PP",
    "ArchitectureStudy",
    "agreement",
    "architecture_study",
    "cell_table",
    "diverged_text",
    "is_architecture_sweep",
    "law_sentence",
    "norm_state",
    "norm_times",
    "paired_difference",
    "predicted_state",
    "spread_state",
    "sweep_predictions",
    "verdict_sentence",
]
