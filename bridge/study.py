"""The unit-of-forgetting study of a sweep folder, and the document it publishes.

``unit_study(DIR)`` reads a finished sweep (the ``units`` preset, or any sweep with two or more
alphas per pipeline) and computes, from the data only:

* the **design** (:mod:`initmem.bridge.design`): every pipeline's accumulated regularization and
  epochs, which of its runs interpolate, and the Pearson r of ln(epochs) and ln(accumulated) over
  the pipelines whose runs all interpolate;
* the **bridge** (:func:`initmem.bridge.fitting.fit`): forgetting times measured and predicted, the unit
  comparison with its intervals and the pre-registered decision;
* **function memory against noise**, per pipeline with two or more alphas: the spread of the
  validation-selected test accuracy with its within-seed permutation null
  (:func:`~initmem.bridge.stats.spread_null`) and bootstrap interval, and the disagreement between
  alphas minus that between seeds (:func:`~initmem.bridge.stats.disagreement_excess`), from the
  seeds whose runs interpolate at every alpha (a pipeline with fewer than 2 is left out);
* **norm memory at the end** per pipeline (layer mean over the scaled BN-followed convs) with a
  t-interval over seeds: whether the effective learning rates of the alphas converged;
* **where the memory lives**: for pipelines that differ only in ``alpha_groups`` (the ``units``
  preset's part 2), the spread (with its null) and the norm memory of the scaled layers per group.
  At alpha = 1 ``alpha_groups`` changes nothing, so a group pipeline without alpha = 1 runs takes
  them from a pipeline of its family that has them (bit-identical runs).

:meth:`UnitStudy.markdown` writes ``docs/unit-of-forgetting.md``: every number in it comes from the
folder, every finding sentence is computed here (``initmem study DIR --doc PATH``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge import framing, stats
from initmem.bridge.measure import SCALE_INVARIANT_MEAN
from initmem.theory.criterion import FORGETTING

#: A memory whose permutation p-value is below this counts as above its noise floor.
ALPHA_LEVEL = 0.05
#: Columns of the function-memory statistics of one pipeline (:func:`function_memory`).
FUNCTION_COLUMNS = [
    "alphas",
    "n_seeds_used",
    "spread_pp",
    "spread_lo",
    "spread_hi",
    "null_mean_pp",
    "null_hi_pp",
    "p_value",
    "p_min",
    "n_permutations",
    "best_alpha",
    "acc_by_alpha",
    "alpha_dis",
    "seed_dis",
    "excess",
    "excess_lo",
    "excess_hi",
]
#: Leave-one-pipeline-out R^2 above which the pipelines count as collapsed onto one curve.
COLLAPSE_R2 = 0.5
#: Norm memory below this at the end of the run: the alphas' effective learning rates converged
#: (the memory shrank by e, the definition of a forgetting time).
FORGOTTEN_LEVEL = FORGETTING.level


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

    # ------------------------------------------------------------------ sentences
    def verdict(self) -> list[str]:
        """The pre-registered decision, one sentence per memory (from the bridge), then whether
        the pipelines collapse onto one curve of accumulated regularization at all."""
        return list(self.bridge.verdict) + collapse_sentences(self.bridge.units)

    def group_sentences(self) -> list[str]:
        """Which parameter group carries the function memory, per optimizer family."""
        return group_sentences(self.groups)

    def norm_sentences(self) -> list[str]:
        """Per pipeline: did the effective learning rates of the alphas converge?"""
        return norm_sentences(self.norm_end)

    # ------------------------------------------------------------------ the document
    def markdown(
        self, figures: dict[str, str] | None = None, *, command: str = "", wall: str = ""
    ) -> str:
        """The published document (figures: ``{name: relative path}``)."""
        return document(self, figures or {}, command=command, wall=wall)


def unit_study(sweep_dir: str | Path, *, n_boot: int = 200, seed: int = 0) -> UnitStudy:
    """Analyse a sweep folder (module docstring)."""
    from initmem.bridge.design import design_correlation, design_table
    from initmem.bridge.fitting import fit
    from initmem.bridge.measure import prepare_runs
    from initmem.empirical.memory import interpolates, load_sweep
    from initmem.empirical.sweep import read_manifest

    sweep_dir = Path(sweep_dir)
    manifest = read_manifest(sweep_dir)
    design = design_table([r.config for r in manifest], [r.variant for r in manifest])
    all_runs = load_sweep(sweep_dir)
    runs = prepare_runs(all_runs)
    per_pipeline = (
        runs.assign(fits=interpolates(runs)).groupby("pipeline")["fits"].agg(["sum", "size"])
    )
    design["runs_done"] = design["pipeline"].map(per_pipeline["size"]).fillna(0).astype(int)
    design["runs_interpolating"] = design["pipeline"].map(per_pipeline["sum"]).fillna(0).astype(int)
    design["interpolates"] = (design["runs_done"] > 0) & (
        design["runs_interpolating"] == design["runs_done"]
    )
    correlation = design_correlation(design[design["interpolates"]])
    every = design_correlation(design)
    correlation.update(n_all=every["n"], r_all=every["r"])

    report = fit(all_runs, n_boot=n_boot, seed=seed)
    function = function_memory(runs, n_boot=max(n_boot, 200), seed=seed)
    norm_end = norm_memory_end(report.norm_curves, runs)
    groups = group_memory(runs, seed=seed)
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
        notes=list(report.notes),
    )


def collapse_sentences(units: pd.DataFrame, unit: str = "accumulated") -> list[str]:
    """Per memory: do the pipelines collapse onto one decreasing curve of ``unit``?

    "Collapse" when the 95% interval of the leave-one-pipeline-out R^2 lies above
    :data:`COLLAPSE_R2`, "do not collapse" when it lies below, else "cannot tell".
    """
    lines = []
    if units.empty or "r2_cv_lo" not in units:
        return lines
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
        lines.append(f"{row['memory']}: {state} ({numbers}).")
    return lines


# ----------------------------------------------------------------------------------- function memory
def _interpolating_seeds(group: pd.DataFrame, alphas) -> np.ndarray:
    from initmem.empirical.memory import interpolates

    fits = group.assign(fits=interpolates(group))
    per_seed = fits.groupby("seed").agg(fits=("fits", "all"), n=("alpha", "nunique"))
    return per_seed.index[per_seed["fits"] & (per_seed["n"] == len(alphas))].to_numpy()


def _function_row(group: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """Spread with null and interval, disagreement excess: one pipeline's runs (any alphas)."""
    from initmem.empirical.memory import bootstrap_spread

    alphas = np.sort(group["alpha"].unique())
    seeds = _interpolating_seeds(group, alphas)
    row = {"alphas": ",".join(f"{a:g}" for a in alphas), "n_seeds_used": int(seeds.size)}
    if alphas.size < 2 or seeds.size < 2:
        return row | {"spread_pp": np.nan, "p_value": np.nan}
    used = group[group["seed"].isin(seeds)]
    table = used.pivot_table(index="seed", columns="alpha", values="test_acc") * 100.0
    null = stats.spread_null(table.to_numpy())
    low, high = bootstrap_spread(
        [table[a].to_numpy() for a in table.columns], n_boot=2000, seed=seed
    )
    means = table.mean()
    row |= {
        "spread_pp": null["spread"],
        "spread_lo": low,
        "spread_hi": high,
        "null_mean_pp": null["null_mean"],
        "null_hi_pp": null["null_hi"],
        "p_value": null["p_value"],
        "p_min": null["p_min"],
        "n_permutations": null["n_permutations"],
        "best_alpha": float(means.idxmax()),
        "acc_by_alpha": ", ".join(f"{a:g}: {means[a]:.1f}" for a in table.columns),
    }
    predictions = _predictions(used)
    if predictions:
        dis = stats.disagreement_excess(predictions, n_boot=n_boot, seed=seed)
        row |= {k: dis[k] for k in ("alpha_dis", "seed_dis", "excess", "excess_lo", "excess_hi")}
    return row


def _predictions(runs: pd.DataFrame) -> dict:
    """``{alpha: {seed: best_test_pred}}`` of the runs that saved predictions."""
    from initmem.empirical import runfolder

    out: dict = {}
    for _, run in runs.iterrows():
        try:
            data = runfolder.read_predictions(run["run_dir"], keys=("best_test_pred",))
        except FileNotFoundError:  # the run saved no predictions
            continue
        if "best_test_pred" in data:
            out.setdefault(run["alpha"], {})[run["seed"]] = data["best_test_pred"]
    return out


def function_memory(runs: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per pipeline with two or more alphas: spread (pp) of the validation-selected test
    accuracy with its bootstrap interval (``spread_lo``, ``spread_hi``), permutation null
    (``null_mean_pp``, ``null_hi_pp``, ``p_value``), and the disagreement between alphas minus that
    between seeds (``excess`` [``excess_lo``, ``excess_hi``]); from interpolating seeds only."""
    rows = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        if group["alpha"].nunique() < 2:
            continue
        rows.append(
            {"pipeline": pipeline, "label": group["label"].iloc[0]}
            | _function_row(group, n_boot, seed)
        )
    return pd.DataFrame(rows, columns=["pipeline", "label", *FUNCTION_COLUMNS])


# ----------------------------------------------------------------------------------- norm memory
def norm_memory_end(norm_curves: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline: the norm memory of the scaled BN-followed convs at the last evaluation, mean
    over seeds with a 95% t-interval (``memory_end``, ``lo``, ``hi``, ``n_seeds``)."""
    if norm_curves.empty:
        return pd.DataFrame(columns=["pipeline", "label", "memory_end", "lo", "hi", "n_seeds"])
    mean = norm_curves[norm_curves["layer"] == SCALE_INVARIANT_MEAN]
    labels = runs.drop_duplicates("pipeline").set_index("pipeline")["label"]
    rows = []
    order = list(dict.fromkeys(runs["pipeline"]))  # sweep order
    for pipeline in [p for p in order if p in set(mean["pipeline"])]:
        group = mean[mean["pipeline"] == pipeline]
        last = group[group["step"] == group["step"].max()]
        value, lo, hi = stats.mean_interval(last["memory"])
        rows.append(
            {
                "pipeline": pipeline,
                "label": labels.get(pipeline, pipeline),
                "memory_end": value,
                "lo": lo,
                "hi": hi,
                "n_seeds": int(last["memory"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)


def norm_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per pipeline: converged, stayed apart, or cannot tell (interval vs 1/e)."""
    lines = []
    for _, row in table.iterrows():
        numbers = f"norm memory at the end {row['memory_end']:.2f}"
        if np.isfinite(row["lo"]):
            numbers += f" [95% {row['lo']:.2f}, {row['hi']:.2f}], {row['n_seeds']} seeds"
        if np.isfinite(row["hi"]) and row["hi"] < FORGOTTEN_LEVEL:
            state = "the effective learning rates of the alphas converged"
        elif np.isfinite(row["lo"]) and row["lo"] > FORGOTTEN_LEVEL:
            state = "the effective learning rates of the alphas stayed apart"
        else:
            state = "cannot tell at this size whether the effective learning rates converged"
        lines.append(f"{row['label']}: {state} ({numbers}; converged means {FORGETTING.name}).")
    return lines


# ----------------------------------------------------------------------------------- groups
def group_families(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Pipelines that differ only in ``alpha_groups``, by family key (two or more groups)."""
    from initmem.empirical.memory import pipeline_columns, pipeline_id

    fields = [c for c in pipeline_columns() if c != "alpha_groups" and c in runs.columns]
    firsts = runs.drop_duplicates("pipeline")
    families: dict[str, list[str]] = {}
    for _, row in firsts.iterrows():
        values = {f: list(row[f]) if isinstance(row[f], tuple) else row[f] for f in fields}
        key = pipeline_id(values)
        families.setdefault(key, []).append(row["pipeline"])
    return {k: v for k, v in families.items() if len(v) >= 2}


def group_memory(runs: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Per family and parameter group: spread with its null, and the norm memory of its layers.

    Columns: ``family`` (the label of the family's ``all`` pipeline, or its first), ``group``
    (``alpha_groups`` joined), ``n_seeds_used``, ``spread_pp``, ``spread_lo``, ``spread_hi``,
    ``null_mean_pp``, ``p_value``, ``norm_memory_end`` (mean over the layers alpha scales, at the end,
    mean over seeds), ``norm_lo``, ``norm_hi``, ``n_layers``.
    """
    from initmem.bridge import measure
    from initmem.empirical.memory import load_layers

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
            } | _function_row(mine, 500, seed)
            layers = load_layers(mine)
            norm = np.nan, np.nan, np.nan
            n_layers = 0
            if not layers.empty and "weight_norm" in layers:
                try:
                    curves = measure.norm_memory_curves(mine, layers)
                except measure.BridgeDataError:
                    curves = pd.DataFrame()
                if not curves.empty:
                    per_layer = curves[curves["layer"] != SCALE_INVARIANT_MEAN]
                    last = per_layer[per_layer["step"] == per_layer["step"].max()]
                    n_layers = int(last["layer"].nunique())
                    norm = stats.mean_interval(last.groupby("seed")["memory"].mean())
            row |= {
                "norm_memory_end": norm[0],
                "norm_lo": norm[1],
                "norm_hi": norm[2],
                "n_layers": n_layers,
            }
            rows.append(row)
    columns = ["family", "group", "pipeline", *FUNCTION_COLUMNS]
    return pd.DataFrame(
        rows, columns=[*columns, "norm_memory_end", "norm_lo", "norm_hi", "n_layers"]
    )


def group_sentences(groups: pd.DataFrame) -> list[str]:
    """Per family: the groups whose spread is above its null (p < :data:`ALPHA_LEVEL`)."""
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

        carry = table[table["p_value"] < ALPHA_LEVEL]
        rest = table[table["p_value"] >= ALPHA_LEVEL]
        singles = carry[carry["group"] != "all"]
        floor = float(table["p_min"].astype(float).min())
        if carry.empty:
            lines.append(
                f"{family}: no group's spread exceeds its permutation null at p < {ALPHA_LEVEL} "
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


# ----------------------------------------------------------------------------------- the document
def _f(value, digits: int = 2, fmt: str = "f") -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(value):
        return "–"
    return f"{value:.{digits}{fmt}}"


def _interval(value, lo, hi, digits: int = 2) -> str:
    if not math.isfinite(float(lo)) if lo is not None else True:
        return _f(value, digits)
    return f"{_f(value, digits)} [{_f(lo, digits)}, {_f(hi, digits)}]"


def _r_text(corr: dict, design: pd.DataFrame) -> str:
    """r over the interpolating pipelines, or why it is undefined."""
    if math.isfinite(corr["r"]):
        return _f(corr["r"])
    used = design[design["interpolates"] & (design["alphas"].str.count(",") >= 1)]
    if len(used) >= 3 and np.ptp(np.round(used["epochs"].to_numpy(dtype=float), 6)) == 0:
        return f"undefined (all of them ran {used['epochs'].iloc[0]:.0f} epochs)"
    return "undefined (fewer than 3 such pipelines)"


def _threshold_pct() -> str:
    """The interpolation rule's threshold as the document prints it (e.g. ``99.5%``)."""
    from initmem.empirical.memory import INTERPOLATION_THRESHOLD

    return f"{100 * INTERPOLATION_THRESHOLD:g}%"


def _group_alphas(groups: pd.DataFrame) -> str:
    """The alphas other than 1 that the group pipelines ran (e.g. ``4``), from their ``alphas``."""
    alphas = {a for value in groups["alphas"] for a in str(value).split(",") if float(a) != 1.0}
    return ", ".join(sorted(alphas, key=float)) or "1"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def document(
    study: UnitStudy, figures: dict[str, str], *, command: str = "", wall: str = ""
) -> str:
    """The Markdown document (see the module docstring)."""
    design = study.design
    function = study.function.set_index("pipeline") if not study.function.empty else pd.DataFrame()
    norm = study.norm_end.set_index("pipeline") if not study.norm_end.empty else pd.DataFrame()
    corr = study.correlation
    runs_total = int(design["runs_done"].sum())
    parts = [
        f"# {framing.title(study.sweep_dir)}",
        "",
        "*Generated by `initmem study` from the sweep folder "
        f"`{study.sweep_dir}`; every number and every finding sentence below is computed from it.*",
        "",
        "## The question",
        "",
        "A network's init is scaled by alpha; training with a pipeline (optimizer, learning rate, "
        "batch size, decay, schedule, length) then forgets part of that choice. If forgetting is "
        "counted in *accumulated regularization* (the sum over steps of the regularization each "
        "step applies: `lr (l2/(1-mu) + weight_decay)` plus the noise term `(lr/(1-mu))^2/b` for SGD "
        "or `(lr/(1-mu))^2 d/|w_0|^2` for adaptive optimizers; `initmem.theory.units`), pipelines "
        "that differ in everything else should forget alike at equal accumulated regularization; "
        "if it is counted in epochs, at equal epochs. The study varies the two independently and "
        "decides between them by a comparison fixed in advance: the paired difference of the "
        "leave-one-pipeline-out R^2 of a decreasing fit of the memory against each unit, with a 95% "
        "bootstrap interval over pipelines and seeds; a winner only when the interval excludes 0.",
        "",
        framing.question(study.sweep_dir),
        "",
        "## Verdict",
        "",
        *[f"- {line}" for line in study.verdict()],
        "",
        "Memories: *norm* is the log-ratio of the weight norms of the BN-followed convs between the "
        "largest and the smallest alpha, divided by its value at init (1: the alphas' effective "
        "learning rates lr/|w|^2 are as far apart as at init; 0: equal); *spread* is the "
        "max-minus-min over alpha of the seed-mean test accuracy (pp), at every evaluation after "
        "the pipeline has learned, from seeds whose runs interpolate at every alpha.",
        "",
        "## Design",
        "",
        f"{runs_total} runs finished. Pipelines with two or more alphas whose runs all interpolate "
        f"(final train accuracy >= {_threshold_pct()}): {corr['n']} of {corr.get('n_all', corr['n'])}; over them "
        f"accumulated regularization runs from {_f(corr['y_min'], 3, 'g')} to "
        f"{_f(corr['y_max'], 3, 'g')} ({_f(corr['decades'], 1)} decades) and the Pearson r of "
        f"ln(epochs) and ln(accumulated) is {_r_text(corr, design)}; over all "
        f"{corr.get('n_all', corr['n'])} pipelines with two or more alphas (the design) it is "
        f"{_f(corr.get('r_all', math.nan))}.",
        "",
    ]
    rows = []
    for _, row in design.iterrows():
        p = row["pipeline"]
        f = function.loc[p] if p in function.index else None
        n = norm.loc[p] if p in norm.index else None
        settings = f"{row['optimizer']} lr {row['lr']:g}"
        if row["momentum"]:
            settings += f", mu {row['momentum']:g}"
        if row["l2"]:
            settings += f", L2 {row['l2']:g}"
        if row["weight_decay"]:
            settings += f", wd {row['weight_decay']:g}"
        if row["schedule"] != "constant":
            settings += f", {row['schedule']}"
        rows.append(
            [
                str(row["variant"]),
                settings,
                str(row["alpha_groups"]),
                row["alphas"],
                f"{row['epochs']:.0f}",
                f"{row['steps']:.0f}",
                _f(row["accumulated"], 3, "g"),
                f"{row['runs_interpolating']}/{row['runs_done']}",
                _interval(f["spread_pp"], f.get("spread_lo"), f.get("spread_hi"), 1)
                if f is not None and "spread_lo" in f
                else "–",
                _f(f["p_value"], 3) if f is not None else "–",
                _interval(n["memory_end"], n["lo"], n["hi"]) if n is not None else "–",
            ]
        )
    parts += [
        _table(
            [
                "variant",
                "pipeline",
                "alpha on",
                "alphas",
                "epochs",
                "steps",
                "accumulated",
                "interpolating runs",
                "spread pp [95%]",
                "p (null)",
                "norm memory at end [95%]",
            ],
            rows,
        ),
        "",
    ]
    if "collapse" in figures:
        parts += [
            "## Memory against each unit",
            "",
            f"![memory against each unit]({figures['collapse']})",
            "",
        ]
    units = study.bridge.units
    if not units.empty:
        urows = []
        for _, r in units.iterrows():
            urows.append(
                [
                    r["memory"],
                    r["unit"],
                    _interval(r["r2"], r.get("r2_lo", np.nan), r.get("r2_hi", np.nan)),
                    _interval(r["r2_cv"], r.get("r2_cv_lo", np.nan), r.get("r2_cv_hi", np.nan)),
                    str(r["n_pipelines"]),
                ]
            )
        parts += [
            "Every unit beside the deciding pair (reported, not used to pick a winner): R^2 of one "
            "stretched exponential across all pipelines, and the leave-one-pipeline-out R^2 of the "
            "isotonic fit, each with its 95% bootstrap interval.",
            "",
            _table(["memory", "unit", "R^2 [95%]", "leave-one-out R^2 [95%]", "pipelines"], urows),
            "",
        ]
    parts += ["## Function memory against its noise floor", ""]
    if not study.function.empty:
        frows = []
        for _, r in study.function.iterrows():
            frows.append(
                [
                    str(r["label"]),
                    str(r.get("n_seeds_used", "")),
                    _interval(
                        r["spread_pp"], r.get("spread_lo", np.nan), r.get("spread_hi", np.nan), 1
                    ),
                    _f(r.get("null_mean_pp", np.nan), 1),
                    _f(r["p_value"], 3),
                    _interval(
                        r.get("excess", np.nan),
                        r.get("excess_lo", np.nan),
                        r.get("excess_hi", np.nan),
                        3,
                    ),
                ]
            )
        above = study.function[study.function["p_value"] < ALPHA_LEVEL]
        floor = study.function[
            np.isclose(
                study.function["p_value"].astype(float), study.function["p_min"].astype(float)
            )
        ]
        parts += [
            "Spread of the validation-selected test accuracy across alpha (bootstrap interval over "
            "seeds), its noise floor (mean spread with the alpha labels permuted within each seed) "
            "and the permutation p-value; the disagreement between alphas (same seed) minus the "
            "disagreement between seeds (same alpha), with a bootstrap interval over seeds.",
            "",
            _table(
                [
                    "pipeline",
                    "seeds",
                    "spread pp [95%]",
                    "null pp",
                    "p",
                    "disagreement excess [95%]",
                ],
                frows,
            ),
            "",
            f"{len(above)} of {int(study.function['p_value'].notna().sum())} pipelines with function "
            f"statistics have a spread above its permutation null at p < {ALPHA_LEVEL}"
            + (f": {', '.join(above['label'])}." if len(above) else ".")
            + f" {len(floor)} reach the smallest p-value their seeds allow (every seed ranks the "
            "alphas the same way; with two alphas it is 2 / 2^seeds, 1/16 for 5 seeds)"
            + (f": {', '.join(floor['label'])}." if len(floor) else "."),
            "",
        ]
        dis = study.function.dropna(subset=["excess_lo"]) if "excess_lo" in study.function else []
        if len(dis):
            pos = dis[dis["excess_lo"] > 0]
            parts += [
                f"The alphas disagree more than seeds do (interval above 0) in {len(pos)} of "
                f"{len(dis)} pipelines" + (f": {', '.join(pos['label'])}." if len(pos) else "."),
                "",
            ]
    parts += ["## Measured against predicted forgetting times", ""]
    mvp = study.measured_vs_predicted
    if "predicted" in figures:
        parts += [f"![measured vs predicted]({figures['predicted']})", ""]
    if not mvp.empty:
        mrows = [
            [
                r["measured"],
                r["predicted"],
                "forgotten within the run" if r["points"] == "forgotten" else "all (fitted times)",
                str(r["n"]),
                str(r.get("n_not_forgotten", "")),
                _interval(r["slope"], r["slope_lo"], r["slope_hi"]) if r["n"] >= 3 else "– (n < 3)",
                _interval(r["r2"], r.get("r2_lo", np.nan), r.get("r2_hi", np.nan))
                if r["n"] >= 3
                else "– (n < 3)",
            ]
            for _, r in mvp.iterrows()
        ]
        parts += [
            "ln(measured time) against ln(predicted time) across pipelines: first over the "
            "pipelines whose memory shrank by e within the run (censored ones, not forgotten by the "
            "end, are left out and counted: the fit the rules fix), then over every pipeline with "
            "its fitted, possibly extrapolated, time; *law*: the normalized-weight laws fed with "
            "each pipeline's logged "
            "gradient sums; *accumulated*: steps until accumulated regularization reaches 1. Slope "
            "with its t-interval, R^2 with a bootstrap interval over pipelines.",
            "",
            _table(
                [
                    "measured",
                    "predicted",
                    "points",
                    "pipelines",
                    "censored",
                    "slope [95%]",
                    "R^2 [95%]",
                ],
                mrows,
            ),
            "",
        ]
    else:
        parts += ["No pipeline forgot within its run: no fit (cannot tell at this size).", ""]
    parts += ["## Did the effective learning rates converge?", ""]
    parts += [f"- {line}" for line in study.norm_sentences()] + [""]
    parts += ["## Where the memory lives", ""]
    if study.groups.empty:
        parts += ["The sweep has no pipelines that differ only in `alpha_groups`.", ""]
    else:
        grows = [
            [
                str(r["family"]),
                str(r["group"]),
                str(r.get("n_seeds_used", "")),
                _interval(
                    r["spread_pp"], r.get("spread_lo", np.nan), r.get("spread_hi", np.nan), 1
                ),
                _f(r.get("null_mean_pp", np.nan), 1),
                _f(r["p_value"], 3),
                _interval(r["norm_memory_end"], r["norm_lo"], r["norm_hi"]),
            ]
            for _, r in study.groups.iterrows()
        ]
        parts += [
            f"alpha = {_group_alphas(study.groups)} on one parameter group at a time (`conv`: the "
            "BN-followed convs; `bn`: BatchNorm's affine parameters; `head`: the last linear layer; "
            "`all`: every parameter), against alpha = 1. Norm memory: mean over the layers the group "
            "scales, at the end.",
            "",
            _table(
                [
                    "pipeline",
                    "alpha on",
                    "seeds",
                    "spread pp [95%]",
                    "null pp",
                    "p",
                    "norm memory at end [95%]",
                ],
                grows,
            ),
            "",
            *[f"- {line}" for line in study.group_sentences()],
            "",
        ]
        if "groups" in figures:
            parts += [f"![memory by group]({figures['groups']})", ""]
    identity = study.bridge.identity
    if not identity.empty:
        worst = study.bridge.identity_max_error()
        parts += [
            "## The exact SGD identity",
            "",
            f"For SGD without momentum the logged norms satisfy the one-step identity "
            f"|w'|^2 = (1 - lr(l2 + wd))^2 |w|^2 + lr^2 |g|^2 to a largest relative error of "
            f"{worst:.1e} over {identity['hash'].nunique()} runs and "
            f"{identity['layer'].nunique()} BN-followed convs.",
            "",
        ]
    parts += [
        "## Rules fixed in advance",
        "",
        f"- A run interpolates when its final train accuracy is >= {_threshold_pct()}. Function-memory "
        "statistics use, per pipeline, the seeds whose runs interpolate at every alpha; a pipeline "
        "with fewer than 2 such seeds is left out of them.",
        f"- Forgotten means {FORGETTING.name}: {FORGETTING.definition} (initmem.theory.criterion; "
        "the theory, the report and the bridge use the same).",
        "- A forgetting time not reached within the run is censored: reported as a lower bound "
        "and left out of the measured-vs-predicted fit.",
        "- The decision: accumulated regularization against epochs only, on the paired difference "
        "of leave-one-pipeline-out R^2; other units are reported, not used to pick a winner.",
        "- With two alphas the spread is symmetric under swapping every seed's labels at once, so "
        "the smallest attainable permutation p-value is 2 / 2^seeds.",
        "",
    ]
    if study.notes:
        parts += ["Notes from the analysis:", "", *[f"- {n}" for n in study.notes], ""]
    parts += ["## Reproduce", ""]
    trained = study.bridge.runs
    if "wall_time" in trained and trained["wall_time"].notna().any():
        parts += [
            f"Training: {len(trained)} runs, {trained['wall_time'].sum() / 60:.1f} minutes of "
            "training summed over runs (each run's own wall time, one thread per worker).",
            "",
        ]
    if command:
        parts += ["```bash", command, "```", ""]
    if wall:
        parts += [wall, ""]
    return "\n".join(parts)


__all__ = [
    "ALPHA_LEVEL",
    "COLLAPSE_R2",
    "FORGOTTEN_LEVEL",
    "UnitStudy",
    "collapse_sentences",
    "document",
    "function_memory",
    "group_families",
    "group_memory",
    "group_sentences",
    "norm_memory_end",
    "norm_sentences",
    "unit_study",
]
