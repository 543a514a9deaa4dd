"""Measured against predicted: the fits, the unit-of-forgetting test and the phase diagrams.

``fit(load_sweep(DIR))`` runs the whole bridge on a sweep and returns a :class:`BridgeReport`:

1. **Times** (:mod:`initmem.bridge.measure`, :mod:`initmem.bridge.predict`): measured forgetting times of
   the norm memory (per layer, and of the layer mean of the scaled BN-followed convs), of the accuracy
   spread and of the prediction disagreement; predicted times from the normalized-weight laws and from
   accumulated regularization (steps until it reaches 1).
2. **Fits** (:func:`loglog_fit`): ``ln(measured) = intercept + slope * ln(predicted)`` across pipelines,
   with t-intervals on slope and intercept and R^2; once over the pipelines that forgot within their
   run, once over every finite fitted time (extrapolated for the ones that did not).
3. **Units of forgetting** (:func:`unit_comparison`): the memory at every evaluation of every pipeline,
   fitted as one monotone function ``A exp(-(u / u0)^k)`` of each candidate unit ``u`` (the same three
   parameters for every unit, so the R^2 values compare fairly), plus an isotonic (decreasing) fit and
   its leave-one-pipeline-out R^2 (``r2_cv``), each with a bootstrap interval over pipelines and seeds
   (:func:`initmem.bridge.unit_decision.unit_bootstrap`). The spread enters from the seeds whose runs
   interpolate at every alpha (:func:`initmem.bridge.unit_decision.memory_cubes`). The decision
   (:func:`initmem.bridge.unit_decision.decide`): the rank difference of the two units (R1 of
   :func:`~initmem.bridge.unit_decision.rank_bootstrap`) with its interval, a winner only when the interval
   excludes 0, the paired ``r2_cv(accumulated) - r2_cv(epochs)`` reported beside it (``decision``;
   :attr:`BridgeReport.verdict`); the rank rule replaced the R^2 rule after calibration
   (:mod:`initmem.bridge.study.calibrate`).
4. **Phase diagrams** (:func:`phase_table`): the spread over (lr x decay) and (lr x batch size); the
   boundary where accumulated regularization reaches 1 is
   :func:`initmem.bridge.units.phase_boundary`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge import measure, predict, unit_decision
from initmem.bridge.fits import (
    COLLAPSE_R2,
    isotonic_fit,
    loglog_fit,
    loglog_r2_interval,
    lopo_r2,
    stretched_exponential_fit,
)
from initmem.bridge.measure import BridgeDataError
from initmem.bridge.units import (
    UNIT_DEFINITIONS,
    evaluation_units,
    init_scale,
    run_config,
    run_unit_increments,
    steps_to_unit,
)
from initmem.empirical import curves, markdown, tables
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from initmem.empirical.legend import invariant_name, legend_line
from initmem.empirical.memory import spread_table
from initmem.theory.criterion import FORGETTING, LAYER_RULE

#: Relations fitted in :func:`fit`: (measured time, predicted time).
MEMORIES = ("norm", "norm per layer", "spread", "disagreement")
PREDICTORS = ("law", "accumulated")
#: Memories compared across units in :func:`unit_comparison`.
UNIT_MEMORIES = ("norm", "spread")


def unit_comparison(points: pd.DataFrame, units=None) -> pd.DataFrame:
    """Fit each memory as one monotone function of each candidate unit, across all pipelines.

    ``points``: one row per (memory, pipeline, evaluation) with columns ``memory``, ``pipeline``,
    ``value`` and one column per unit. Returns one row per (memory, unit): ``r2`` (stretched
    exponential, :func:`stretched_exponential_fit`), ``r2_isotonic`` (in sample), ``r2_cv``
    (isotonic, leave one pipeline out: how well the other pipelines' curve predicts it), ``scale``,
    ``shape``, ``n_points``, ``n_pipelines``, ``definition`` and ``best`` (the highest ``r2`` of the
    memory).
    """
    units = list(units or [u for u in UNIT_DEFINITIONS if u in points.columns])
    rows = []
    for memory, group in points.groupby("memory", sort=False):
        for unit in units:
            data = group[["pipeline", "value", unit]].dropna()
            data = data[np.isfinite(data[unit]) & (data[unit] >= 0)]
            if len(data) < 4:
                continue
            u, y = data[unit].to_numpy(), data["value"].to_numpy()
            total = float(np.sum((y - y.mean()) ** 2))
            parametric = stretched_exponential_fit(u, y)
            iso = isotonic_fit(u, y)
            pipelines = data["pipeline"].to_numpy()
            rows.append(
                {
                    "memory": memory,
                    "unit": unit,
                    "r2": parametric["r2"],
                    "r2_isotonic": 1.0 - float(np.sum((y - iso) ** 2)) / total if total else np.nan,
                    "r2_cv": lopo_r2(u, y, pipelines),
                    "scale": parametric["scale"],
                    "shape": parametric["shape"],
                    "n_points": len(data),
                    "n_pipelines": int(np.unique(pipelines).size),
                    "definition": UNIT_DEFINITIONS.get(unit, unit),
                }
            )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["best"] = table["r2"] == table.groupby("memory")["r2"].transform("max")
    return table


def unit_verdict(units: pd.DataFrame, good: float = COLLAPSE_R2) -> list[str]:
    """One sentence per memory: which unit collapses the pipelines, against epochs.

    A unit "collapses" the pipelines when its R^2 is at least ``good``; below that for every unit the
    sentence says that none does (the memory is then mostly noise, or no single unit describes it).
    """
    lines = []
    for memory, group in units.groupby("memory", sort=False):
        group = group.set_index("unit")
        if group["n_pipelines"].max() < 2:
            lines.append(
                f"{memory}: one pipeline only, so every unit fits alike: no collapse test."
            )
            continue
        if group["n_pipelines"].max() < unit_decision.MIN_DECISION_PIPELINES:
            lines.append(
                f"{memory}: cannot tell at this size which unit collapses the pipelines: "
                f"{group['n_pipelines'].max()} pipelines, the comparison needs "
                f"{unit_decision.MIN_DECISION_PIPELINES} or more."
            )
            continue
        best = group["r2"].idxmax()
        acc = group["r2"].get("accumulated", np.nan)
        epochs = group["r2"].get("epochs", np.nan)
        scores = (
            f"accumulated regularization R^2 = {acc:.3f}, epochs R^2 = {epochs:.3f}; best "
            f"'{best}' R^2 = {group['r2'][best]:.3f} (leave-one-pipeline-out isotonic R^2 = "
            f"{group['r2_cv'][best]:.3f})"
        )
        if group["r2"][best] < good:
            lines.append(f"{memory}: no unit collapses the pipelines ({scores}).")
            continue
        better = "a better" if acc > epochs else "not a better"
        lines.append(
            f"{memory}: accumulated regularization is {better} unit of forgetting than epoch count "
            f"({scores})."
        )
    return lines


# ----------------------------------------------------------------------------------- phase diagrams
def phase_table(runs: pd.DataFrame, spread: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Spread (pp) of each pipeline placed on the axes ``x`` and ``y`` (config columns or ``decay``).

    ``decay`` is ``l2 + weight_decay``; ``spread`` is :func:`initmem.empirical.memory.spread_table`.
    One row per (optimizer, x, y) cell: ``spread_pp`` (mean over the pipelines in the cell),
    ``n_pipelines``, and ``x_name`` / ``y_name``.
    """
    configs = runs.drop_duplicates("pipeline").set_index("pipeline")
    table = spread[["pipeline", "spread_pp"]].join(configs, on="pipeline")
    table = table.assign(decay=table["l2"] + table["weight_decay"])
    out = table.groupby(["optimizer", x, y]).agg(
        spread_pp=("spread_pp", "mean"), n_pipelines=("spread_pp", "size")
    )
    return out.reset_index().rename(columns={x: "x", y: "y"}).assign(x_name=x, y_name=y)


# ----------------------------------------------------------------------------------- the report
@dataclass
class BridgeReport:
    """Everything the bridge computed for one sweep, as tidy DataFrames (times in optimizer steps).

    ``pipelines`` one row per pipeline (label, settings, measured and predicted times);
    ``norm_times`` / ``function_times`` measured forgetting times (:mod:`initmem.bridge.measure`);
    ``predicted`` the law's times per layer; ``identity`` the SGD one-step identity check;
    ``fit`` (``fit.csv``) one row per fitted relation; ``units`` (``units.csv``) one row per
    (memory, candidate unit); ``phase`` the spread tables behind the phase diagrams; the curves
    (``norm_curves``, ``predicted_curves``, ``spread_curves``, ``disagreement_curves``,
    ``accumulated``, ``unit_points``) for the figures; ``notes`` what could not be computed and why; ``layers``
    the per-layer logs the bridge read (:func:`~initmem.empirical.tables.load_layers`); ``cubes``
    the per-seed memories beside their units (:func:`~initmem.bridge.unit_decision.memory_cubes`);
    ``spread_course`` each spread's time course, first / peak / end and its rise
    (:func:`~initmem.bridge.unit_decision.spread_course`).
    """

    runs: pd.DataFrame
    pipelines: pd.DataFrame
    norm_times: pd.DataFrame
    function_times: pd.DataFrame
    predicted: pd.DataFrame
    identity: pd.DataFrame
    fit: pd.DataFrame
    units: pd.DataFrame
    phase: dict[str, pd.DataFrame]
    norm_curves: pd.DataFrame
    predicted_curves: pd.DataFrame
    spread_curves: pd.DataFrame
    disagreement_curves: pd.DataFrame
    accumulated: pd.DataFrame
    unit_points: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    decision: pd.DataFrame = field(default_factory=pd.DataFrame)
    layers: pd.DataFrame = field(default_factory=pd.DataFrame)
    cubes: dict = field(default_factory=dict)
    spread_course: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def verdict(self) -> list[str]:
        """The pre-registered unit decision per memory (:func:`~initmem.bridge.unit_decision.unit_bootstrap`:
        accumulated regularization against epochs on the leave-one-pipeline-out R^2, a winner only
        when its bootstrap interval excludes 0); without it (``n_boot = 0``) the in-sample
        comparison of :func:`unit_verdict`. Empty without a unit comparison."""
        if not self.decision.empty:
            return list(self.decision["text"])
        return unit_verdict(self.units) if not self.units.empty else []

    def identity_max_error(self) -> float:
        """Largest relative error of the SGD one-step identity over runs and layers (NaN if none)."""
        return float(self.identity["max_rel_error"].max()) if not self.identity.empty else np.nan

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables written by :meth:`save`, by file stem."""
        out = {
            "pipelines": self.pipelines,
            "norm_times": self.norm_times,
            "function_times": self.function_times,
            "predicted": self.predicted,
            "identity": self.identity,
            "fit": self.fit,
            "units": self.units,
            "decision": self.decision,
        }
        out.update({f"phase_{name}": table for name, table in self.phase.items()})
        return out

    def summary(self) -> str:
        """A short plain-text summary: per-pipeline times, the identity check, fits, the verdict."""
        lines = [f"bridge: {self.runs['pipeline'].nunique()} pipelines, {len(self.runs)} runs"]
        if not self.pipelines.empty:
            lines.append(
                f"norm-memory forgetting time (steps; forgotten: {FORGETTING.name}, the first "
                f"evaluation with the seed-mean |memory| there, layers combined as the "
                f"{LAYER_RULE} (theory.criterion); '>' = not forgotten within the run, with the "
                "e-fold time of a fit exp(-t/tau) extrapolated):"
            )
            for _, row in self.pipelines.iterrows():
                lines.append(
                    f"  {row['label']}: measured "
                    f"{_time(row, 'tau_steps', 'forgotten', 'tau_fit_steps')}, law "
                    f"{_time(row, 'pred_tau_steps', 'pred_forgotten', 'pred_tau_fit_steps')}, "
                    f"accumulated regularization at the end {row['accumulated_end']:.3g}, "
                    f"spread decay {_time(row, 'spread_tau_steps', 'spread_forgotten')}"
                )
        if not self.identity.empty:
            worst = self.identity_max_error()
            verdict = "within" if worst <= predict.IDENTITY_TOLERANCE else "NOT within"
            lines.append(
                f"SGD one-step identity: max relative error {worst:.2e} over "
                f"{self.identity['hash'].nunique()} runs x {self.identity['layer'].nunique()} "
                f"{invariant_name(self.runs)} ({verdict} {predict.IDENTITY_TOLERANCE:.0%})"
            )
        # fits over the pipelines forgotten within the run: censored times are lower bounds
        main = self.fit[(self.fit["points"] == "forgotten")] if not self.fit.empty else self.fit
        for _, row in main.iterrows():
            if row["measured"] in ("norm", "spread") and row["n"] >= 3:
                lines.append(
                    f"fit ln({row['measured']} time) ~ ln({row['predicted']} time): slope "
                    f"{row['slope']:.2f} [{row['slope_lo']:.2f}, {row['slope_hi']:.2f}], intercept "
                    f"{row['intercept']:.2f}, R^2 {row['r2']:.2f} [bootstrap {row['r2_lo']:.2f}, "
                    f"{row['r2_hi']:.2f}] (n = {row['n']} pipelines forgotten within the run)"
                )
        lines += self.agreement_sentences()
        lines += self.verdict
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def agreement_sentences(self) -> list[str]:
        """Per pipeline: the law's norm memory at the last evaluation against the measured one (the
        mean over the scale-invariant layers, then the seeds), and whether they agree on forgotten."""
        measured, predicted = self.norm_curves, self.predicted_curves
        if measured.empty or predicted.empty:
            return []
        labels = self.runs.drop_duplicates("pipeline").set_index("pipeline")["label"]
        weights = invariant_name(self.runs)
        lines = []
        for pipeline in labels.index:
            seen = measured[
                (measured["pipeline"] == pipeline) & (measured["layer"] == SCALE_INVARIANT_MEAN)
            ]
            law = predicted[
                (predicted["pipeline"] == pipeline) & (predicted["layer"] == SCALE_INVARIANT_MEAN)
            ]
            if seen.empty or law.empty:
                continue
            end = int(seen["step"].max())
            value = float(seen[seen["step"] == end]["memory"].mean())
            at_end = law[law["step"] == end]
            if at_end.empty or not np.isfinite(value):
                continue
            expected = float(at_end["memory"].mean())
            level = FORGETTING.level
            same = (expected <= level) == (value <= level)
            lines.append(
                f"{labels[pipeline]}: the law predicted norm memory {expected:.2f} of the {weights} "
                f"at the end (step {end}); {value:.2f} was measured ("
                + ("both" if same else "they disagree on whether alpha is")
                + (" forgotten" if (value <= level and same) or not same else " kept")
                + f", {FORGETTING.name})."
            )
        return lines

    def save(self, out_dir: str | Path, *, figures: bool = True) -> list[Path]:
        """Write every table as CSV and Markdown (``report.md``), and the figures as PNG."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            path = out / f"{name}.csv"
            table.to_csv(path, index=False)
            written.append(path)
        figure_paths = []
        if figures:
            from initmem.bridge import plots  # deferred: matplotlib loads only to draw figures

            figure_paths = plots.save_figures(self, out)
            written += figure_paths
        report = out / "report.md"
        report.write_text(self.markdown([p.name for p in figure_paths]))
        written.append(report)
        return written

    def markdown(self, figures=()) -> str:
        """The report as Markdown: summary, then each table, then the figures."""
        summary = self.summary()
        parts = [
            "# Bridge: measured against predicted forgetting",
            "",
            "```",
            summary,
            "```",
        ]
        legend = legend_line(
            [summary, *(" ".join(map(str, t.columns)) for t in self.tables().values())]
        )
        parts += ["", legend] if legend else []
        labels = self.runs.drop_duplicates("pipeline").set_index("pipeline")["label"].to_dict()
        for name, table in self.tables().items():
            first = [c for c in MARKDOWN_FIRST.get(name, ()) if c in table.columns]
            table = table[first + [c for c in table.columns if c not in first]]
            shown, hidden = markdown.readable(table, labels)
            parts += ["", f"## {name}", "", markdown_table(shown)]
            if hidden:
                parts += ["", markdown.hidden_note(hidden, f"{name}.csv")]
        parts += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
        return "\n".join(parts) + "\n"


#: The columns a table shows first in report.md (the rest up to ``markdown.MAX_COLUMNS``; all in
#: its CSV): for the pipelines, the memory (M2) and the forgetting times rather than the settings,
#: which the label names.
MARKDOWN_FIRST = {
    "pipelines": (
        "label",
        "n_seeds_used",
        "spread_pp",
        "ci_low_pp",
        "ci_high_pp",
        "p_value",
        "accumulated_end",
        "tau_steps",
        "forgotten",
        "memory_end",
        "spread_tau_steps",
        "disagreement_tau_steps",
    ),
}


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A pipe table of ``frame`` (floats to ``digits`` significant digits;
    :func:`initmem.empirical.markdown.frame_table`)."""
    return markdown.frame_table(frame, digits, "g", empty="(empty)")


def _time(row, column: str, forgotten: str, fitted: str | None = None) -> str:
    """``tau``, or ``> span (extrapolated tau)`` when not forgotten within the run (the fit never
    decides, :mod:`initmem.theory.criterion`); ``–`` when unmeasured."""
    value = row.get(column, np.nan)
    if value is None or not np.isfinite(value):
        return "–"
    if bool(row.get(forgotten, True)):
        return f"{value:.3g}"
    extrapolated = row.get(fitted, np.nan) if fitted else np.nan
    return f"> {value:.3g}" + (
        f" (extrapolated {extrapolated:.3g})" if np.isfinite(extrapolated) else ""
    )


# ----------------------------------------------------------------------------------- the driver
def fit(
    runs: pd.DataFrame, *, n_boot: int = 200, level: float = 0.95, seed: int = 0
) -> BridgeReport:
    """Measure, predict and fit forgetting for a sweep's runs (``load_sweep(DIR)``).

    ``n_boot`` bootstrap resamples of seeds for every measured time, ``level`` the interval level,
    ``seed`` the bootstrap's random seed. Raises :class:`~initmem.bridge.measure.BridgeDataError` when the
    sweep cannot be measured at all (no finished run, or one alpha per pipeline); what only part of the
    sweep lacks is skipped and recorded in ``notes``.
    """
    notes: list[str] = []
    planned = runs
    runs = measure.prepare_runs(runs)
    notes += tables.missing_memory_sentences(runs)
    measure.require_alphas(runs, planned=planned)
    epochs, layers = measure.load_logs(runs)
    steps_per_epoch = measure.steps_per_epoch(epochs.merge(runs[["hash", "pipeline"]], on="hash"))

    norm_curves = predicted_curves = pd.DataFrame()
    norm_times = predicted = identity = pd.DataFrame()
    if layers.empty or "weight_norm" not in layers.columns:
        notes.append("no per-layer logs: norm memory and the laws are skipped")
    else:
        try:
            norm_curves = curves.norm_memory_curves(runs, layers)
            norm_times = measure.norm_forgetting_times(norm_curves, level=level)
        except BridgeDataError as err:
            notes.append(f"norm memory skipped: {err}")
        if "grad_sq_sum" in layers.columns and layers["grad_sq_sum"].notna().any():
            identity = predict.identity_check(runs, epochs, layers)
            if identity.empty:
                notes.append("one-step identity: no SGD run without momentum in the sweep")
            if not norm_curves.empty:
                predicted_curves = predict.predicted_memory_curves(runs, layers, norm_curves)
                predicted = predict.predicted_times(predicted_curves, steps_per_epoch)
        else:
            notes.append(
                "no gradient-norm sums in the logs (track_grad_norms = false): the laws and the "
                "one-step identity are skipped"
            )

    accuracy = measure.accuracy_pair(runs, epochs)  # built once for every function memory
    spread = curves.spread_curves(runs, epochs, accuracy[0])
    disagreement = curves.disagreement_curves(runs)
    if disagreement.empty:
        notes.append("no per-evaluation predictions (save_predictions = false): no disagreement")
    function_times = measure.function_forgetting_times(
        runs, epochs, disagreement, n_boot=n_boot, level=level, seed=seed, accuracy=accuracy
    )
    accumulated = evaluation_units(runs, epochs, layers if not layers.empty else None)

    memories = spread_table(runs, seed=seed, with_disagreement=False)  # M2, as report and study
    pipelines = _pipeline_table(runs, norm_times, predicted, function_times, layers, memories)
    fits = _fit_table(pipelines, norm_times, predicted, level, n_boot=n_boot, seed=seed)
    course: list = []
    cubes = unit_decision.memory_cubes(
        runs, epochs, norm_curves, accumulated, predicted_curves, notes, accuracy, course
    )
    points = unit_decision.cube_points(cubes)
    units = unit_comparison(points)
    decision = pd.DataFrame()
    if not units.empty and n_boot > 0:
        intervals, decision = unit_decision.decide(
            cubes, list(units["unit"].unique()), n_boot=n_boot, level=level, seed=seed
        )
        if not intervals.empty:
            units = units.merge(intervals, on=["memory", "unit"], how="left")
    if runs["pipeline"].nunique() < 2:
        notes.append(
            "one pipeline: the fits across pipelines and the unit comparison need two or more"
        )
    phase = _phase_tables(runs, memories, notes)
    return BridgeReport(
        runs=runs,
        pipelines=pipelines,
        norm_times=norm_times,
        function_times=function_times,
        predicted=predicted,
        identity=identity,
        fit=fits,
        units=units,
        phase=phase,
        norm_curves=norm_curves,
        predicted_curves=predicted_curves,
        spread_curves=spread,
        disagreement_curves=disagreement,
        accumulated=accumulated,
        unit_points=points,
        notes=notes,
        decision=decision,
        layers=layers,
        cubes=cubes,
        spread_course=pd.DataFrame(course),
    )


def summarize(sweep_dir: str | Path, *, n_boot: int = 100) -> str:
    """The bridge's plain-text summary of a sweep folder (what ``initmem demo`` prints last)."""
    try:
        return fit(tables.load_sweep(sweep_dir), n_boot=n_boot).summary()
    except BridgeDataError as err:
        return f"bridge: {err}"


def _pipeline_table(runs, norm_times, predicted, function_times, layers, spread) -> pd.DataFrame:
    """One row per pipeline: its settings, its spread (M2 of :mod:`initmem.empirical.memory`:
    ``n_seeds_used``, ``spread_pp`` [``ci_low_pp``, ``ci_high_pp``], ``p_value``), measured and
    predicted times (steps)."""
    settings = ["optimizer", "lr", "momentum", "l2", "weight_decay", "batch_size", "epochs"]
    first = runs.drop_duplicates("pipeline")
    table = first[["pipeline", "label", *[c for c in settings if c in first]]].copy()
    shown = ["n_seeds_used", "spread_pp", "ci_low_pp", "ci_high_pp", "p_value"]
    table = table.join(
        spread.set_index("pipeline")[[c for c in shown if c in spread]], on="pipeline"
    )
    table["alphas"] = [
        ",".join(f"{a:g}" for a in sorted(runs.loc[runs["pipeline"] == p, "alpha"].unique()))
        for p in table["pipeline"]
    ]
    table["total_steps"] = [run_config(r).total_steps for _, r in first.iterrows()]
    scale = init_scale(runs, layers) if not layers.empty else pd.Series(dtype=float)
    ends, to_one = [], []
    for _, row in first.iterrows():
        config = run_config(row)
        inv = float(scale.get(row["pipeline"], np.nan))
        ends.append(float(run_unit_increments(config, inv)["accumulated"].sum()))
        to_one.append(steps_to_unit(config, "accumulated", 1.0, inv))
    table["inv_init_sq_per_coord"] = table["pipeline"].map(scale).astype(float)
    table["accumulated_end"] = ends
    table["accumulated_steps_to_1"] = to_one
    keep = ["tau_steps", "tau_lo_steps", "tau_hi_steps", "tau_fit_steps", "forgotten", "memory_end"]
    if not norm_times.empty:
        mean = norm_times[norm_times["layer"] == SCALE_INVARIANT_MEAN].set_index("pipeline")[keep]
        table = table.join(mean, on="pipeline")
    if not predicted.empty:
        law = predicted[predicted["layer"] == SCALE_INVARIANT_MEAN].set_index("pipeline")
        table = table.join(
            law[["pred_tau_steps", "pred_tau_fit_steps", "pred_forgotten"]], on="pipeline"
        )
    for memory in ("spread", "disagreement"):
        if function_times.empty:
            continue
        part = function_times[function_times["memory"] == memory].set_index("pipeline")
        part = part[["tau_steps", "tau_fit_steps", "forgotten", "value_start", "value_end"]]
        table = table.join(part.add_prefix(f"{memory}_"), on="pipeline")
    return table.reset_index(drop=True)


def _fit_table(pipelines, norm_times, predicted, level, n_boot=200, seed=0) -> pd.DataFrame:
    """One row per (measured memory, predictor, point set): the log-log fit across pipelines."""
    rows = []
    per_layer = pd.DataFrame()
    if not norm_times.empty and not predicted.empty:
        per_layer = norm_times.merge(predicted, on=["pipeline", "layer"])
        per_layer = per_layer[per_layer["layer"] != SCALE_INVARIANT_MEAN]
    for memory in MEMORIES:
        if memory == "norm per layer":
            table = per_layer
            columns = ("tau_steps", "tau_fit_steps", "forgotten")
        else:
            table = pipelines
            prefix = "" if memory == "norm" else f"{memory}_"
            columns = (f"{prefix}tau_steps", f"{prefix}tau_fit_steps", f"{prefix}forgotten")
        if table.empty or columns[0] not in table:
            continue
        for predictor in PREDICTORS:
            column = "pred_tau_fit_steps" if predictor == "law" else "accumulated_steps_to_1"
            if column not in table:
                continue
            for points in ("forgotten", "all"):
                chosen = (
                    table[table[columns[2]].fillna(False).astype(bool)]
                    if points == "forgotten"
                    else table
                )
                value = columns[0] if points == "forgotten" else columns[1]
                result = loglog_fit(chosen[value], chosen[column], level=level)
                result.update(
                    loglog_r2_interval(
                        chosen[value], chosen[column], n_boot=n_boot, level=level, seed=seed
                    )
                )
                rows.append(
                    {
                        "relation": f"ln {memory} time ~ ln {predictor} time",
                        "measured": memory,
                        "predicted": predictor,
                        "points": points,
                        **result,
                        "n_not_forgotten": int(  # measured, and censored by the run's end
                            (~table[columns[2]].dropna().astype(bool)).sum()
                        ),
                        "level": level,
                    }
                )
    return pd.DataFrame(rows)


def _phase_tables(runs: pd.DataFrame, spread: pd.DataFrame, notes: list[str]) -> dict:
    """Phase tables (of :func:`initmem.empirical.memory.spread_table`'s ``spread``) for the
    optimizers whose pipelines span two or more values of both axes."""
    configs = runs.drop_duplicates("pipeline")
    configs = configs.assign(decay=configs["l2"] + configs["weight_decay"])
    out = {}
    for name, (x, y) in (("lr_decay", ("lr", "decay")), ("lr_batch_size", ("lr", "batch_size"))):
        spans = configs.groupby("optimizer")[[x, y]].nunique()
        wide = spans[(spans[x] >= 2) & (spans[y] >= 2)].index
        if wide.empty:
            notes.append(
                f"phase diagram {x} x {y} skipped: no optimizer's pipelines span two or more values "
                f"of both {x} and {y}"
            )
            continue
        table = phase_table(runs, spread, x, y)
        out[name] = table[table["optimizer"].isin(wide)].reset_index(drop=True)
    return out


__all__ = [
    "BridgeReport",
    "fit",
    "markdown_table",
    "phase_table",
    "summarize",
    "unit_comparison",
    "unit_verdict",
]
