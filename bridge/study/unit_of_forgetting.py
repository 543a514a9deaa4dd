"""The unit-of-forgetting study of a sweep folder, and the document it publishes.

``unit_study(DIR)`` reads a finished sweep (the ``units`` preset, or any sweep with two or more
alphas per pipeline) and computes, from the data only:

* the **design** (:mod:`initmem.bridge.units`): every pipeline's accumulated regularization and
  epochs, which of its runs interpolate, and the Pearson r of ln(epochs) and ln(accumulated) over
  the pipelines whose runs all interpolate;
* the **bridge** (:func:`initmem.bridge.fitting.fit`): forgetting times measured and predicted, the unit
  comparison with its intervals and the decision (:func:`initmem.bridge.unit_decision.decide`);
* **how often the verdict would be wrong** (``calibrate`` replicas,
  :func:`initmem.bridge.study.calibrate.calibrate_study`): synthetic sweeps of this design under each
  truth with the seed noise measured here; a named unit stays only where its calibrated error rate is
  at most :data:`~initmem.bridge.study.calibrate.MAX_ERROR`, else "cannot tell" and the design that would tell
  (:func:`~initmem.bridge.study.calibrate.apply_calibration`); without a calibration a verdict for epochs
  says "cannot tell";
* **function memory against noise**, per pipeline with two or more alphas: the spread of the
  validation-selected test accuracy with its within-seed permutation null
  (:func:`~initmem.empirical.memory.spread_null`) and bootstrap interval, and the disagreement between
  alphas minus that between seeds (:func:`~initmem.empirical.memory.disagreement_excess`), from the
  seeds whose runs interpolate at every alpha (a pipeline with fewer than 2 is left out);
* **function memory kept, gone or cannot tell** per pipeline (:mod:`initmem.bridge.study.equivalence`):
  the seed-paired difference of the validation-selected test accuracy between the largest and the
  smallest alpha, "kept" when its 95% interval excludes 0, "gone" when the two one-sided tests put
  it within the margin fixed in advance, with its seed noise and the seeds "gone" would need;
* **accuracy levels** (:mod:`initmem.bridge.study.accuracy`): the test accuracy per pipeline and
  alpha (seed mean with its interval), and per optimizer family whether the pipelines whose
  function memory is gone reach a higher accuracy than those that keep it (seed-paired);
* **the spread at each seed count** (:mod:`initmem.bridge.study.seeds`): the spread decision on the
  first k seeds used (k = 2 up to the sweep's), per pipeline and pooled over pipelines, and how many
  seeds (per pipeline) or pipelines (pooled) the observed effect would need to tell;
* **norm memory at the end** per pipeline (layer mean over the scaled BN-followed convs) with a
  t-interval over seeds and its state (:func:`initmem.theory.criterion.interval_state`: ``|m|``
  decides forgetting; below 0 with the interval excluding 0 "reversed", above 1 with the interval
  excluding 1 "overshoot"), beside the law's predicted memory at the end, which explains a memory
  outside [0, 1] where it lies on the same side (:func:`norm_end_table`);
* **memory against ln(alpha)** for the pipelines with three or more alphas
  (:mod:`initmem.bridge.study.alpha_grid`): each alpha against the smallest, norm memory with the
  law's beside it and the function memory's verdict;
* **which mechanism forgets** (:mod:`initmem.bridge.study.mechanisms`): the norm memory at the end
  per mechanism (SGD noise only, Adam term only, explicit decay), and per short / long pair the
  seed-paired change of the norm and the function memory;
* **where the memory lives**: for pipelines that differ only in ``alpha_groups`` (the ``units``
  preset's part 2), the spread (with its null) and the norm memory of the scaled layers per group.
  At alpha = 1 ``alpha_groups`` changes nothing, so a group pipeline without alpha = 1 runs takes
  them from a pipeline of its family that has them (bit-identical runs).

:meth:`UnitStudy.markdown` writes ``docs/unit-of-forgetting.md``: every number in it comes from the
folder, every finding sentence is computed here (``initmem study DIR --doc PATH``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.fits import COLLAPSE_R2
from initmem.bridge.fitting import fit
from initmem.bridge.measure import prepare_runs
from initmem.bridge.preregister import read_sweep_predictions
from initmem.bridge.study import synthetic
from initmem.bridge.study.accuracy import (
    accuracy_comparison,
    accuracy_levels,
    comparison_sentences,
)
from initmem.bridge.study.alpha_grid import (
    MIN_ALPHAS,
    alpha_grid_sentences,
    alpha_grid_table,
    at_common_alphas,
)
from initmem.bridge.study.calibrate import apply_calibration, calibrate_study
from initmem.bridge.study.document import document
from initmem.bridge.study.equivalence import verdict_sentences, verdict_table
from initmem.bridge.study.mechanisms import (
    length_pairs,
    length_sentences,
    mechanism_sentences,
    mechanism_table,
)
from initmem.bridge.study.seeds import (
    power_note,
    power_sentences,
    spread_by_seeds,
    unit_decision_by_seeds,
)
from initmem.bridge.unit_decision import (
    DECIDING_UNITS,
    MIN_DECISION_PIPELINES,
    RIVAL_UNITS,
    rival_bootstrap,
    rival_verdict,
)
from initmem.bridge.units import design_correlation, design_table
from initmem.empirical import memory, tables
from initmem.empirical.curves import SCALE_INVARIANT_MEAN, MemoryDataError, norm_memory_curves
from initmem.empirical.sweep import read_manifest
from initmem.theory.criterion import interval_state


@dataclass
class UnitStudy:
    """Everything the document states, as tables (see the module docstring)."""

    sweep_dir: Path
    design: pd.DataFrame
    correlation: dict
    bridge: object
    function: pd.DataFrame
    norm_end: pd.DataFrame
    groups: pd.DataFrame
    measured_vs_predicted: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    calibration: object = None
    spread_by_seeds: pd.DataFrame = field(default_factory=pd.DataFrame)
    spread_power: pd.DataFrame = field(default_factory=pd.DataFrame)
    unit_by_seeds: pd.DataFrame = field(default_factory=pd.DataFrame)
    no_decision: str = ""  # why the design has no unit decision (:func:`no_decision_reason`)
    #: kept / gone / cannot tell per pipeline (:func:`initmem.bridge.study.equivalence.verdict_table`)
    function_verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: test accuracy per pipeline and alpha (:func:`initmem.bridge.study.accuracy.accuracy_levels`)
    accuracy_levels: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: forgetting against keeping pipelines, per family (:func:`~initmem.bridge.study.accuracy.accuracy_comparison`)
    accuracy_comparison: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: accumulated regularization against each rival unit, per memory
    #: (:func:`initmem.bridge.unit_decision.rival_bootstrap`)
    rivals: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: memory against ln(alpha) for the pipelines with three or more alphas
    #: (:func:`initmem.bridge.study.alpha_grid.alpha_grid_table`)
    alpha_grid: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the norm memory at the end by mechanism (:func:`initmem.bridge.study.mechanisms.mechanism_table`)
    mechanisms: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: every finished run of the folder, at every alpha (the other tables compare the common alphas)
    every_run: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: short / long pairs (:func:`initmem.bridge.study.mechanisms.length_pairs`)
    length_pairs: pd.DataFrame = field(default_factory=pd.DataFrame)

    # ------------------------------------------------------------------ sentences
    def verdict(self) -> list[str]:
        """The pre-registered decision, one sentence per memory (from the bridge), then whether
        the pipelines collapse onto one curve of accumulated regularization at all; with neither,
        the sentence saying why there is no verdict."""
        lines = list(self.bridge.verdict) + collapse_sentences(
            self.bridge.units, decision=self.bridge.decision
        )
        if not lines and self.no_decision:
            lines = [f"No verdict: this design has no unit decision ({self.no_decision})."]
        return lines

    def group_sentences(self) -> list[str]:
        """Which parameter group carries the function memory, per optimizer family."""
        return group_sentences(self.groups)

    def norm_sentences(self) -> list[str]:
        """Per pipeline: did the effective learning rates of the alphas converge?"""
        return memory.norm_sentences(self.norm_end)

    def rival_sentences(self) -> list[str]:
        """Per memory: which rival units accumulated regularization beats with its interval
        (:func:`initmem.bridge.unit_decision.rival_verdict`), and whether it is named the unit
        (its calibrated worst error)."""
        return rival_sentences(self.rivals, self.calibration)

    def alpha_grid_sentences(self) -> list[str]:
        """Per pipeline with three or more alphas: its memories against ln(alpha) beside the law's
        (:func:`initmem.bridge.study.alpha_grid.alpha_grid_sentences`)."""
        return alpha_grid_sentences(self.alpha_grid)

    def mechanism_sentences(self) -> list[str]:
        """Per mechanism (SGD noise only, Adam term only, explicit decay): the pipelines whose norm
        memory ended at or below 1/e (:func:`initmem.bridge.study.mechanisms.mechanism_sentences`)."""
        return mechanism_sentences(self.mechanisms)

    def length_sentences(self) -> list[str]:
        """Per short / long pair: what the longer run changed
        (:func:`initmem.bridge.study.mechanisms.length_sentences`)."""
        return length_sentences(self.length_pairs)

    def function_verdict_sentences(self) -> list[str]:
        """Function memory kept, gone or cannot tell, per pipeline
        (:func:`initmem.bridge.study.equivalence.verdict_sentences`)."""
        return verdict_sentences(self.function_verdicts)

    def accuracy_sentences(self) -> list[str]:
        """Per optimizer family: do the pipelines that forget reach a higher accuracy
        (:func:`initmem.bridge.study.accuracy.comparison_sentences`)?"""
        return comparison_sentences(self.accuracy_comparison)

    def power_sentences(self) -> list[str]:
        """Per pipeline the seeds, pooled the pipelines, the spread would need to tell
        (:func:`initmem.bridge.study.seeds.power_sentences`)."""
        return power_sentences(self.spread_power)

    # ------------------------------------------------------------------ the document
    def markdown(
        self, figures: dict[str, str] | None = None, *, command: str = "", wall: str = ""
    ) -> str:
        """The published document (figures: ``{name: relative path}``;
        :func:`initmem.bridge.study.document.document`)."""
        return document(self, figures or {}, command=command, wall=wall)


def unit_study(
    sweep_dir: str | Path,
    *,
    n_boot: int = 200,
    seed: int = 0,
    calibrate: int = 0,
    workers: int = 1,
) -> UnitStudy:
    """Analyse a sweep folder (module docstring); ``calibrate``: synthetic replicas per truth of its
    design that calibrate the unit decision and the comparison against the rivals, under the named
    and the rival truths (:func:`initmem.bridge.study.calibrate.calibrate_study`; 0: none, and a
    verdict for epochs then says "cannot tell", and no unit is named against the rivals);
    ``workers``: the calibration's processes (the same tables with any number)."""
    sweep_dir = Path(sweep_dir)
    manifest = read_manifest(sweep_dir)
    design = design_table([r.config for r in manifest], [r.variant for r in manifest])
    all_runs = tables.load_sweep(sweep_dir, manifest)
    every_alpha = prepare_runs(all_runs)
    per_pipeline = (
        every_alpha.assign(fits=tables.interpolates(every_alpha))
        .groupby("pipeline")["fits"]
        .agg(["sum", "size"])
    )
    # every pipeline compared at the same alphas; the others of a pipeline go to the alpha grid
    runs, alpha_notes = at_common_alphas(every_alpha)
    all_runs = all_runs[all_runs["hash"].isin(runs["hash"])]
    design["runs_done"] = design["pipeline"].map(per_pipeline["size"]).fillna(0).astype(int)
    design["runs_interpolating"] = design["pipeline"].map(per_pipeline["sum"]).fillna(0).astype(int)
    design["interpolates"] = (design["runs_done"] > 0) & (
        design["runs_interpolating"] == design["runs_done"]
    )
    correlation = design_correlation(design[design["interpolates"]])
    every = design_correlation(design)
    correlation.update(n_all=every["n"], r_all=every["r"])

    report = fit(all_runs, n_boot=n_boot, seed=seed)
    calibration = None
    if calibrate > 0 and not report.decision.empty:
        try:
            design_now = synthetic.design_of(
                [r.config for r in manifest], [r.variant for r in manifest]
            )
        except ValueError as err:
            report.notes.append(f"calibration skipped: {err}")
        else:
            calibration = calibrate_study(
                report,
                design_now,
                calibrate,
                n_boot=n_boot,
                seed=seed,
                rivals=True,
                workers=workers,
            )
    report.decision = apply_calibration(
        report.decision, calibration, command=f"initmem study {sweep_dir} --calibrate 200"
    )
    predictions = read_sweep_predictions(sweep_dir)  # pre-registered before the runs, if any
    function = memory.function_memory(runs, n_boot=max(n_boot, 200), seed=seed)
    verdicts = verdict_table(runs)
    norm_end = norm_end_table(report.norm_curves, report.predicted_curves, runs)
    groups = group_memory(runs, seed=seed, layers=report.layers)
    mvp = (
        report.fit[report.fit["measured"].isin(["norm", "spread"])].reset_index(drop=True)
        if not report.fit.empty
        else pd.DataFrame()
    )
    return UnitStudy(
        sweep_dir=sweep_dir,
        design=design,
        correlation=correlation,
        bridge=report,
        function=function,
        norm_end=norm_end,
        groups=groups,
        measured_vs_predicted=mvp,
        notes=list(report.notes) + alpha_notes,
        calibration=calibration,
        spread_by_seeds=spread_by_seeds(runs, seed=seed),
        spread_power=power_note(runs),
        unit_by_seeds=unit_decision_by_seeds(
            report.cubes,
            list(report.units["unit"].unique()) if not report.units.empty else None,
            n_boot=n_boot if not report.decision.empty else 0,
            seed=seed,
        ),
        no_decision=no_decision_reason(report),
        function_verdicts=verdicts,
        accuracy_levels=accuracy_levels(runs),
        accuracy_comparison=accuracy_comparison(runs, verdicts),
        rivals=rival_bootstrap(report.cubes, n_boot=n_boot, seed=seed)
        if report.cubes and not report.decision.empty
        else pd.DataFrame(),
        alpha_grid=_alpha_grid(every_alpha, predictions),
        mechanisms=mechanism_table(runs, norm_end, predictions),
        every_run=every_alpha,
        length_pairs=length_pairs(runs, report.norm_curves),
    )


def _alpha_grid(runs: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """:func:`~initmem.bridge.study.alpha_grid.alpha_grid_table` of the pipelines with three or
    more alphas, their layer logs read here (the bridge read those of the common alphas only), with
    the folder's pre-registered predictions."""
    counts = runs.groupby("pipeline")["alpha"].nunique()
    grid = runs[runs["pipeline"].isin(counts[counts >= MIN_ALPHAS].index)]
    if grid.empty:
        return alpha_grid_table(grid, pd.DataFrame())
    return alpha_grid_table(grid, tables.load_layers(grid), predictions)


def rival_sentences(table: pd.DataFrame, calibration=None) -> list[str]:
    """One sentence per memory from :func:`~initmem.bridge.unit_decision.rival_bootstrap`'s table:
    the rivals beaten, not beaten and beating the candidate, and whether the candidate is named the
    unit of forgetting: only where it beats each rival with its interval and ``calibration``
    (:class:`~initmem.bridge.study.calibrate.StudyCalibration` with its rival comparison scored)
    puts the comparison's worst error over the truths at most 5%."""
    if table.empty:
        return []
    lines = []
    for _, r in rival_verdict(table).iterrows():
        n = len(RIVAL_UNITS)
        beaten = r["beaten"].split(", ") if r["beaten"] else []
        text = (
            f"{r['memory']}: accumulated regularization orders the memory better than "
            f"{len(beaten)} of {n} rival units with its interval"
            + (f" ({r['beaten']})" if beaten else "")
        )
        if r["not_beaten"]:
            text += f"; not beaten: {r['not_beaten']}"
        if r["beats_candidate"]:
            text += f"; better than it: {r['beats_candidate']}"
        allowed, clause = (
            calibration.rival_named(r["memory"])
            if calibration is not None
            else (False, "the comparison against the rivals was not calibrated on this design")
        )
        if r["best"] == "cannot tell":
            text += (
                ". Not named the unit of forgetting against its rivals: it does not beat each one"
            )
        elif allowed:
            text += ". Accumulated regularization is the unit of forgetting against its rivals"
        else:
            text += (
                ". Not named the unit of forgetting against its rivals: its error is not "
                "calibrated at 5% or less"
            )
        lines.append(f"{text} ({clause}).")
    return lines


def norm_end_table(
    norm_curves: pd.DataFrame, predicted_curves: pd.DataFrame, runs: pd.DataFrame
) -> pd.DataFrame:
    """:func:`initmem.empirical.memory.norm_memory_end` with ``state`` (the one rule,
    :func:`~initmem.theory.criterion.interval_state`) and ``law_memory_end``: the law's predicted
    memory of the same layers (:func:`initmem.bridge.predict.predicted_memory_curves`, layer mean)
    at its last step, NaN where the bridge has no prediction for the pipeline."""
    table = memory.norm_memory_end(norm_curves, runs)
    if table.empty:
        return table.assign(state=pd.Series(dtype=str), law_memory_end=pd.Series(dtype=float))
    law = {}
    if not predicted_curves.empty:
        mean = predicted_curves[predicted_curves["layer"] == SCALE_INVARIANT_MEAN]
        for pipeline, group in mean.groupby("pipeline"):
            law[pipeline] = float(group.loc[group["step"].idxmax(), "memory"])
    states = [interval_state(r.memory_end, r.lo, r.hi) for r in table.itertuples()]
    return table.assign(state=states, law_memory_end=table["pipeline"].map(law).astype(float))


def no_decision_reason(report) -> str:
    """Why the bridge ``report`` (:func:`initmem.bridge.fitting.fit`) holds no unit decision, as a
    clause; "" when it holds one. The decision (:func:`initmem.bridge.unit_decision.decide`) orders
    the evaluations of two or more pipelines by accumulated regularization and by epochs, so it needs
    a memory (norm or spread) measured in two or more pipelines; it names a unit only from
    :data:`~initmem.bridge.unit_decision.MIN_DECISION_PIPELINES` pipelines on."""
    if not report.decision.empty:
        return ""
    n_pipelines = report.runs["pipeline"].nunique() if "pipeline" in report.runs else 0
    if n_pipelines < 2:
        return (
            f"{n_pipelines} pipeline{'' if n_pipelines == 1 else 's'}: the decision compares "
            f"pipelines and needs {MIN_DECISION_PIPELINES} or more"
        )
    if report.units.empty:
        return (
            "no memory (norm or spread) could be measured over its pipelines' evaluations; "
            "the notes say why"
        )
    return "no memory (norm or spread) was measured in two or more pipelines; the notes say why"


def collapse_sentences(
    units: pd.DataFrame, unit: str = "accumulated", decision: pd.DataFrame | None = None
) -> list[str]:
    """Per memory: do the pipelines collapse onto one decreasing curve of ``unit``?

    "Collapse" when the 95% interval of the leave-one-pipeline-out R^2 lies above
    :data:`COLLAPSE_R2`, "do not collapse" when it lies below, else "cannot tell". With the study's
    ``decision`` (:func:`initmem.bridge.unit_decision.decide`, after
    :func:`~initmem.bridge.study.calibrate.apply_calibration`): "collapse" only where it names ``unit``,
    "do not collapse" only where it names the other deciding unit, else "cannot tell". On synthetic
    sweeps the R^2 interval alone said "do not collapse" where the truth was ``unit`` far more often
    than 5% (4 pipelines, 2 seeds: ``docs/unit-of-forgetting.md``); tied to a calibrated decision,
    its error rate is at most the decision's.
    """
    lines = []
    if units.empty or "r2_cv_lo" not in units:
        return lines
    winners = {}
    if decision is not None and not decision.empty:
        winners = dict(zip(decision["memory"], decision["winner"], strict=True))
    for _, row in units[units["unit"] == unit].iterrows():
        numbers = (
            f"leave-one-pipeline-out R^2 {row['r2_cv']:.2f} [95% {row['r2_cv_lo']:.2f}, "
            f"{row['r2_cv_hi']:.2f}] against {COLLAPSE_R2}"
        )
        if row["r2_cv_lo"] > COLLAPSE_R2:
            state = f"the pipelines collapse onto one curve of {unit} regularization"
        elif row["r2_cv_hi"] < COLLAPSE_R2:
            state = f"the pipelines do not collapse onto one curve of {unit} regularization at this size"
        else:
            state = f"cannot tell at this size whether the pipelines collapse onto one curve of {unit} regularization"
        said = winners.get(row["memory"]) if winners else None
        other = [u for u in DECIDING_UNITS if u != unit][0]
        if winners and (
            (state.startswith("the pipelines collapse") and said != unit)
            or (state.startswith("the pipelines do not") and said != other)
        ):
            state = (
                f"cannot tell at this size whether the pipelines collapse onto one curve of {unit} "
                f"regularization (the R^2 interval alone is not calibrated; the unit decision "
                f"says: {said})"
            )
        lines.append(f"{row['memory']}: {state} ({numbers}).")
    return lines


# ----------------------------------------------------------------------------------- groups
def group_families(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Pipelines that differ only in ``alpha_groups``, by family key (two or more groups)."""
    fields = [c for c in tables.pipeline_columns() if c != "alpha_groups" and c in runs.columns]
    firsts = runs.drop_duplicates("pipeline")
    families: dict[str, list[str]] = {}
    for _, row in firsts.iterrows():
        values = {f: list(row[f]) if isinstance(row[f], tuple) else row[f] for f in fields}
        key = tables.pipeline_id(values)
        families.setdefault(key, []).append(row["pipeline"])
    return {k: v for k, v in families.items() if len(v) >= 2}


def group_memory(
    runs: pd.DataFrame, *, seed: int = 0, layers: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per family and parameter group: spread with its null, and the norm memory of its layers.

    Columns: ``family`` (the label of the family's ``all`` pipeline, or its first), ``group``
    (``alpha_groups`` joined), ``n_seeds_used``, ``spread_pp``, ``spread_lo``, ``spread_hi``,
    ``null_mean_pp``, ``p_value``, ``norm_memory_end`` (mean over the layers alpha scales, at the end,
    mean over seeds), ``norm_lo``, ``norm_hi``, ``n_layers``. ``layers``: the runs' per-layer logs
    when already read (the bridge's), else read here.
    """
    rows = []
    for members in group_families(runs).values():
        family = runs[runs["pipeline"].isin(members)]
        ones = family[np.isclose(family["alpha"], 1.0)].drop_duplicates("seed")
        names = family.drop_duplicates("pipeline").set_index("pipeline")
        all_label = [
            names.loc[p, "label"]
            for p in members
            if tuple(names.loc[p, "alpha_groups"]) == ("all",)
        ]
        family_label = all_label[0] if all_label else names.loc[members[0], "label"]
        for pipeline in members:
            mine = family[family["pipeline"] == pipeline]
            if mine["alpha"].nunique() < 2:  # alpha = 1 from the family (bit-identical runs)
                mine = pd.concat(
                    [
                        mine,
                        ones[
                            ~ones["seed"].isin(mine.loc[np.isclose(mine["alpha"], 1.0), "seed"])
                        ].assign(pipeline=pipeline),
                    ],
                    ignore_index=True,
                )
            if mine["alpha"].nunique() < 2:
                continue
            row = {
                "family": family_label,
                "group": ",".join(names.loc[pipeline, "alpha_groups"]),
                "pipeline": pipeline,
            } | memory.spread_memory(mine, seed=seed)
            if "spread_lo" in row:
                row |= memory.disagreement_memory(mine, n_boot=500, seed=seed)
            mine_layers = (
                tables.load_layers(mine)
                if layers is None
                else layers[layers["hash"].isin(mine["hash"])]
            )
            norm = np.nan, np.nan, np.nan
            n_layers = 0
            if not mine_layers.empty and "weight_norm" in mine_layers:
                try:
                    curves = norm_memory_curves(mine, mine_layers)
                except MemoryDataError:
                    curves = pd.DataFrame()
                if not curves.empty:
                    per_layer = curves[curves["layer"] != SCALE_INVARIANT_MEAN]
                    last = per_layer[per_layer["step"] == per_layer["step"].max()]
                    n_layers = int(last["layer"].nunique())
                    norm = memory.mean_interval(last.groupby("seed")["memory"].mean())
            row |= {
                "norm_memory_end": norm[0],
                "norm_lo": norm[1],
                "norm_hi": norm[2],
                "n_layers": n_layers,
            }
            rows.append(row)
    columns = ["family", "group", "pipeline", *memory.FUNCTION_COLUMNS]
    return pd.DataFrame(
        rows, columns=[*columns, "norm_memory_end", "norm_lo", "norm_hi", "n_layers"]
    )


def group_sentences(groups: pd.DataFrame) -> list[str]:
    """Per family: the groups whose spread is above its null (p < :data:`~initmem.empirical.memory.ALPHA_LEVEL`)."""
    lines = []
    if groups.empty:
        return lines
    for family, table in groups.groupby("family", sort=False):
        table = table[np.isfinite(table["p_value"].astype(float))]
        if table.empty:
            lines.append(f"{family}: no group has 2 or more interpolating seeds: cannot tell.")
            continue

        def show(r):
            return f"{r['group']} ({r['spread_pp']:.1f} pp, p = {r['p_value']:.3f})"

        carry = table[table["p_value"] < memory.ALPHA_LEVEL]
        rest = table[table["p_value"] >= memory.ALPHA_LEVEL]
        singles = carry[carry["group"] != "all"]
        floor = float(table["p_min"].astype(float).min())
        if carry.empty:
            lines.append(
                f"{family}: no group's spread exceeds its permutation null at p < {memory.ALPHA_LEVEL} "
                f"(cannot tell at this size; smallest attainable p {floor:.3f}): "
                + ", ".join(show(r) for _, r in table.iterrows())
                + "."
            )
        elif singles.empty:
            lines.append(
                f"{family}: only the combination (all parameters) carries function memory above "
                f"its null: {', '.join(show(r) for _, r in carry.iterrows())}; no single group "
                f"does: {', '.join(show(r) for _, r in rest.iterrows())}."
            )
        else:
            together = carry[carry["group"] == "all"]
            lines.append(
                f"{family}: function memory above its null is carried by "
                f"{', '.join(show(r) for _, r in singles.iterrows())}"
                + (
                    f" (and by all parameters together: {show(together.iloc[0])})"
                    if not together.empty
                    else ""
                )
                + (
                    f"; not by {', '.join(show(r) for _, r in rest.iterrows())}"
                    if not rest.empty
                    else ""
                )
                + "."
            )
    return lines


__all__ = [
    "COLLAPSE_R2",
    "UnitStudy",
    "collapse_sentences",
    "group_families",
    "group_memory",
    "group_sentences",
    "norm_end_table",
    "unit_study",
]
