"""The unit-of-forgetting study's Markdown document: one function per section, in order.

:func:`document` joins the sections of a :class:`~initmem.bridge.study.unit_of_forgetting.UnitStudy` (``study``: any
object with its fields and sentence methods; this module imports nothing of the study's). Every
number comes from the study's tables and every finding sentence from its methods or from the
definitions of :mod:`initmem.empirical.memory`, so the text says only what the folder says.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from initmem.bridge.study import framing
from initmem.bridge.study.calibrate import MAX_ERROR, wilson_interval, worst_errors
from initmem.bridge.study.equivalence import (
    EQUIVALENCE_MARGIN_PP,
    GONE_POWER,
    TOST_ALPHA,
    permutation_text,
)
from initmem.empirical import memory, tables
from initmem.empirical.markdown import MISSING, interval, number, table
from initmem.theory.criterion import FORGETTING, LAYER_RULE


def document(study, figures: dict[str, str], *, command: str = "", wall: str = "") -> str:
    """The Markdown document (figures: ``{name: relative path}``; see the module docstring)."""
    parts = [
        *question(study),
        *verdict(study),
        *calibration(study),
        *design(study),
        *units(study, figures),
        *rivals(study),
        *time_course(study),
        *function_memory(study),
        *alpha_grid(study, figures),
        *accuracy(study),
        *seed_counts(study),
        *measured_vs_predicted(study, figures),
        *convergence(study),
        *groups(study, figures),
        *identity(study),
        *rules(study),
        *reproduce(study, command, wall),
    ]
    return "\n".join(parts)


def question(study) -> list[str]:
    """The title, where the numbers come from, and the question with its decision rule."""
    return [
        f"# {framing.title(study.sweep_dir)}",
        "",
        generated_by(study.sweep_dir),
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
        "decides between them by a comparison fixed in advance: over the pairs of evaluations "
        "the two units order differently, the fraction where the memory is ordered as accumulated "
        "regularization says minus the fraction ordered as epochs say, with a 95% bootstrap "
        "interval over pipelines and seeds; a winner only when the interval excludes 0 and its "
        f"error rate on synthetic sweeps of this design is at most {MAX_ERROR:.0%}. The paired "
        "difference of "
        "the leave-one-pipeline-out R^2 of a decreasing fit is reported beside it.",
        "",
        framing.question(study.sweep_dir),
        "",
    ]


def verdict(study) -> list[str]:
    """The pre-registered decision and the collapse sentences, then what the memories are."""
    return [
        "## Verdict",
        "",
        *[f"- {line}" for line in study.verdict()],
        "",
        "Memories: *norm* is the log-ratio of the weight norms of the BN-followed convs between the "
        "largest and the smallest alpha, divided by its value at init (1: the alphas' effective "
        "learning rates lr/|w|^2 are as far apart as at init; 0: equal); *spread* is the "
        "max-minus-min over alpha of the seed-mean test accuracy (pp), at every evaluation from "
        "its peak after the pipeline has learned (the rule fixed in advance: a spread that first "
        "rises is compared from its peak on), from seeds whose runs interpolate at every alpha.",
        "",
    ]


def calibration(study) -> list[str]:
    """How often the verdicts would be wrong on synthetic sweeps of this design with a known answer
    (:mod:`initmem.bridge.study.calibrate`), or how to compute it."""
    parts = ["## How often would this verdict be wrong?", ""]
    calibrated = getattr(study, "calibration", None)
    if calibrated is None and getattr(study, "no_decision", ""):
        return parts + [
            f"Nothing to calibrate: this design has no unit decision ({study.no_decision}).",
            "",
        ]
    if calibrated is None:
        return parts + [
            "Not computed for this document. `initmem study DIR --calibrate 200` draws 200 synthetic "
            "sweeps of this design under each truth (forgetting in accumulated regularization, in "
            "epochs, in explicit decay only, in epochs for the pipelines with decay only, in "
            "neither; a spread rising first; a norm memory ending below 0; the seed noise measured "
            "here), scores every verdict against the "
            f"known answer and keeps a named unit only where it is wrong in at most {MAX_ERROR:.0%} "
            "of them; "
            "without it a verdict for epochs says cannot tell.",
            "",
        ]
    result = calibrated.calibration
    errors = result.errors()
    truths = list(result.truths)
    rows = []
    for verdict_name, group in errors.groupby("verdict", sort=False):
        by_truth = group.set_index("truth")
        coverage = "covers" in verdict_name
        cells = []
        for truth in truths:
            if truth not in by_truth.index:
                cells.append(MISSING)
                continue
            r = by_truth.loc[truth]
            if coverage:  # the rate the interval covers the truth
                value, lo, hi = 1 - r["error"], 1 - r["hi"], 1 - r["lo"]
            else:
                value, lo, hi = r["error"], r["lo"], r["hi"]
            cells.append(f"{100 * value:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]")
        label = f"{verdict_name} (coverage)" if coverage else f"{verdict_name} (wrong)"
        rows.append([label, str(int(group["n"].iloc[0])), *cells])
    truth_text = "; ".join(
        f"{unit}: scale {number(t.scale, 3, 'g') if t.scale else 'median of the design'}, "
        f"shape {t.shape:.2f}"
        for unit, t in result.truths.items()
    )
    first = next(iter(result.truths.values()))
    parts += [
        f"{result.n_replicas} synthetic sweeps of this design ({result.design.name}) under each "
        f"of {len(truths)} truths ({', '.join(truths)}): memory exp(-(u / u0)^k) in a unit "
        "(accumulated regularization, epochs, explicit decay only"
        + (
            "; steps, explicit decay plus SGD noise, explicit decay plus the Adam term: the "
            "rivals' truths"
            if calibrated.rivals
            else ""
        )
        + "), in epochs for the pipelines "
        "with decay only, or in neither (each pipeline on its own clock), with a spread that "
        "first rises or a norm memory that ends below 0 where the truth says so "
        f"(`initmem.bridge.study.synthetic`); {truth_text}. Seed noise measured here: norm memory "
        f"{first.sigma_norm:.3f}, test accuracy {100 * first.sigma_acc:.2f} pp per run, largest "
        f"alpha gap {100 * first.gap:.1f} pp. Each cell: how often the verdict was wrong (or the "
        "95% interval covered the truth), with its 95% Wilson interval; per-pipeline verdicts "
        "count pipeline-replicas.",
        "",
        table(["verdict", "n", *[f"truth: {t}" for t in truths]], rows),
        "",
    ]
    worst_any = worst_errors(result.scores)
    n = result.n_replicas  # replicas per truth and memory: the subject's own interval

    def wilson(rate):
        lo, hi = wilson_interval(round(rate * n), n)
        return f"{100 * rate:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"

    for name, worst in calibrated.allowed.items():
        named = ", ".join(f"{unit} {100 * rate:.1f}%" for unit, rate in worst.items())
        if name in worst_any:
            rate, truth, n_truths = worst_any[name]
            parts.append(
                f"- {name}: the rank decision is wrong, at worst over the {n_truths} truths, in "
                f"{wilson(rate)} of the {n} replicas (under the truth {truth!r})."
            )
        parts.append(
            f"- {name}: it names a unit wrongly, at worst over the truths where that unit is "
            f"wrong, in: {named} (allowed up to {100 * MAX_ERROR:.0f}%)."
        )
        if name in calibrated.tells:
            parts.append(f"- {name}: {calibrated.tells[name]}.")
    rival_scores = result.scores[result.scores["verdict"] == "unit against its rivals"]
    for name, (rate, truth, n_truths) in calibrated.rivals.items():
        mine = rival_scores[rival_scores["subject"] == name]
        right = mine[mine["truth"] == "accumulated"]
        power = float((right["said"] == "accumulated").mean()) if len(right) else float("nan")
        parts.append(
            f"- {name}: the comparison against the rivals names a unit wrongly, at worst over the "
            f"{n_truths} truths, in {wilson(rate)} of the {n} replicas (under the truth "
            f"{truth!r}; allowed up to {100 * MAX_ERROR:.0f}%); where accumulated regularization "
            f"is the truth it names it in {wilson(power)} (its power on this design)."
        )
    return parts + [""]


def design(study) -> list[str]:
    """The design paragraph (interpolation, the range of accumulated regularization, r) and table."""
    corr, frame = study.correlation, study.design
    n_all = corr.get("n_all", corr["n"])
    header = ["variant", "pipeline", "alpha on", "alphas", "epochs", "steps", "accumulated"]
    header += [
        "interpolating runs",
        "spread pp [95%]",
        "function memory",
        "norm memory at end [95%]",
        "norm state",
    ]
    return [
        "## Design",
        "",
        f"{int(frame['runs_done'].sum())} runs finished. Pipelines with two or more alphas whose "
        f"runs all interpolate (final train accuracy >= {_threshold_pct(study)}): {corr['n']} of {n_all}; "
        f"over them accumulated regularization runs from {number(corr['y_min'], 3, 'g')} to "
        f"{number(corr['y_max'], 3, 'g')} ({number(corr['decades'], 1)} decades) and the Pearson r "
        f"of ln(epochs) and ln(accumulated) is {_r_text(corr, frame)}; over all {n_all} pipelines "
        f"with two or more alphas (the design) it is {number(corr.get('r_all', math.nan))}.",
        "",
        table(header, design_rows(study)),
        "",
    ]


def design_rows(study) -> list[list[str]]:
    """One row per pipeline of the design: settings, units, interpolation, spread, the function
    memory's verdict (:mod:`~initmem.bridge.study.equivalence`), norm memory."""
    function = _by_pipeline(study.function)
    verdicts = _by_pipeline(study.function_verdicts)
    norm = _by_pipeline(study.norm_end)
    rows = []
    for _, row in study.design.iterrows():
        f = function.loc[row["pipeline"]] if row["pipeline"] in function.index else None
        n = norm.loc[row["pipeline"]] if row["pipeline"] in norm.index else None
        spread = MISSING
        if f is not None and "spread_lo" in f:
            spread = interval(f["spread_pp"], f.get("spread_lo"), f.get("spread_hi"), 1)
        rows.append(
            [
                str(row["variant"]),
                _settings(row),
                str(row["alpha_groups"]),
                row["alphas"],
                f"{row['epochs']:.0f}",
                f"{row['steps']:.0f}",
                number(row["accumulated"], 3, "g"),
                f"{row['runs_interpolating']}/{row['runs_done']}",
                spread,
                str(verdicts.loc[row["pipeline"], "verdict"])
                if row["pipeline"] in verdicts.index
                else MISSING,
                interval(n["memory_end"], n["lo"], n["hi"]) if n is not None else MISSING,
                str(n.get("state", MISSING)) if n is not None else MISSING,
            ]
        )
    return rows


def units(study, figures: dict[str, str]) -> list[str]:
    """The collapse figure and every unit's R^2 and leave-one-pipeline-out R^2 with intervals."""
    parts = []
    if "collapse" in figures:
        parts += [
            "## Memory against each unit",
            "",
            f"![memory against each unit]({figures['collapse']})",
            "",
        ]
    frame = study.bridge.units
    if frame.empty:
        return parts
    rows = [
        [
            r["memory"],
            r["unit"],
            interval(r["r2"], r.get("r2_lo", np.nan), r.get("r2_hi", np.nan)),
            interval(r["r2_cv"], r.get("r2_cv_lo", np.nan), r.get("r2_cv_hi", np.nan)),
            str(r["n_pipelines"]),
        ]
        for _, r in frame.iterrows()
    ]
    header = ["memory", "unit", "R^2 [95%]", "leave-one-out R^2 [95%]", "pipelines"]
    return parts + [
        "Every unit beside the deciding pair (reported, not used to pick a winner): R^2 of one "
        "stretched exponential across all pipelines, and the leave-one-pipeline-out R^2 of the "
        "isotonic fit, each with its 95% bootstrap interval.",
        "",
        table(header, rows),
        "",
    ]


def rivals(study) -> list[str]:
    """Accumulated regularization against each rival unit (R1 per memory, with its interval)."""
    frame = study.rivals
    if frame.empty:
        return []
    rows = [
        [
            str(r["memory"]),
            str(r["rival"]),
            interval(r["rank_diff"], r["rank_lo"], r["rank_hi"], 2),
            "accumulated" if r["beats"] else r["rival"] if r["loses"] else "cannot tell",
            str(int(r["n_pipelines"])),
        ]
        for _, r in frame.iterrows()
    ]
    return [
        "## The unit against its rivals",
        "",
        "The rank difference R1 (the deciding rule) of accumulated regularization against each "
        "rival: epochs, optimizer steps, explicit decay alone, explicit decay plus SGD noise or "
        "plus the Adam term for every pipeline, and the theory's predicted forgetting (-ln of the "
        "law's norm memory); positive when the pairs the two units order differently are ordered "
        "as accumulated regularization says. A rival no pipeline carries has no row. Accumulated "
        "regularization is named the unit only where it beats every rival with its interval and "
        "the study's calibration (synthetic sweeps of this design with its measured noise, under "
        "the named truths and one truth per rival: steps, explicit decay plus SGD noise, explicit "
        "decay plus the Adam term; the generator has no law, so not the theory's) puts the "
        "comparison's error at most 5% under every truth.",
        "",
        table(["memory", "rival", "R1 [95%]", "better unit", "pipelines"], rows),
        "",
        *[f"- {line}" for line in study.rival_sentences()],
        *theory_source(study),
        "",
    ]


def theory_source(study) -> list[str]:
    """Where the ``theory`` rival's gradient scale came from (the bridge's ``g_source``): from the
    runs' own logs it reconstructs the measured norms by the one-step identity, which the sentence
    says, so that beating it or not is read for what it is."""
    curves = getattr(study.bridge, "predicted_curves", None)
    if curves is None or curves.empty or "g_source" not in curves:
        return []
    forms = "; ".join(
        sorted(
            {
                part.split(", logged by run")[0]
                for g in curves["g_source"].dropna()
                for part in str(g).split("; ")
            }
        )
    )
    return [
        "- The theory rival is -ln of the normalized-weight law's norm memory with the gradient "
        f"scale read from each run's own log ({forms}). For the norm memory it reconstructs the "
        "measured norms through the one-step identity, so its order is the measurement's: it "
        "checks the identity, it is not a prediction made before the runs (those, with the "
        "gradient scale probed at init, are the pre-registered predictions under `DIR/predictions/`)."
    ]


def alpha_grid(study, figures: dict[str, str]) -> list[str]:
    """Memory against ln(alpha) for the pipelines with three or more alphas (G1-G3 of
    :mod:`initmem.bridge.study.alpha_grid`)."""
    frame = study.alpha_grid
    if frame.empty:
        return []
    rows = [
        [
            str(r["label"]),
            f"{r['alpha']:g} vs {r['alpha_low']:g}",
            f"{r['ln_ratio']:.2f}",
            interval(r["norm_end"], r["norm_lo"], r["norm_hi"], 2),
            number(r["law_end"], 2),
            number(r["preregistered_end"], 2),
            str(int(r["n_seeds_used"])),
            interval(r["diff_pp"], r["diff_lo"], r["diff_hi"], 1),
            str(r["verdict"]),
        ]
        for _, r in frame.iterrows()
    ]
    parts = [
        "## Memory against ln(alpha)",
        "",
        "Each alpha of the pipelines trained at three or more against the smallest, as the study "
        "compares the extreme pair: the norm memory at the end (seed mean, 95% t-interval), the "
        "normalized-weight law's for the same runs (each run's own init norm and logged gradient "
        "scale, `initmem.bridge.predict`: a reconstruction through the one-step identity, not a "
        "prediction), the law's prediction written before the runs with the gradient scale probed "
        "at init (`DIR/predictions/`, for the pair it was written for), and the seed-paired "
        "difference of the "
        "validation-selected test accuracy with its kept / gone / cannot tell verdict (the rules "
        "of the function-memory section). With growth by gradient noise alone and the same "
        "gradient scale at every alpha, the norm memory rises towards 1 with ln(alpha) at a fixed "
        "growth (`initmem.bridge.study.alpha_grid`, derived there); explicit decay alone leaves it "
        "at 1.",
        "",
        table(
            [
                "pipeline",
                "alphas",
                "ln ratio",
                "norm memory [95%]",
                "law (logged G)",
                "pre-registered",
                "seeds",
                "test acc. diff. pp [95%]",
                "function memory",
            ],
            rows,
        ),
        "",
        *[f"- {line}" for line in study.alpha_grid_sentences()],
        "",
    ]
    if "alphas" in figures:
        parts += [f"![memory against ln(alpha)]({figures['alphas']})", ""]
    return parts


def time_course(study) -> list[str]:
    """The spread's time course per pipeline (first learned evaluation, peak, end) and whether it
    rises before it falls (:func:`initmem.bridge.unit_decision.spread_course`)."""
    frame = study.bridge.spread_course
    if frame.empty:
        return []
    labels = study.bridge.runs.drop_duplicates("pipeline").set_index("pipeline")["label"]
    rows = [
        [
            str(labels.get(r["pipeline"], r["pipeline"])),
            f"{r['first_pp']:.1f} (step {r['first_step']:.0f})",
            f"{r['peak_pp']:.1f} (step {r['peak_step']:.0f})",
            f"{r['end_pp']:.1f} (step {r['end_step']:.0f})",
            interval(r["rise_pp"], r["rise_lo"], r["rise_hi"], 1),
            "rises first" if r["rises"] else "no rise shown",
        ]
        for _, r in frame.iterrows()
    ]
    rising = frame[frame["rises"]]
    names = ", ".join(str(labels.get(p, p)) for p in rising["pipeline"])
    return [
        "## The spread over time",
        "",
        f"The spread rises before it falls in {len(rising)} of {len(frame)} pipelines"
        + (f" ({names})" if len(rising) else "")
        + ": its peak after the pipeline has learned lies above its first value there, the "
        "95% seed-bootstrap interval of the rise above 0 (the peak is chosen on the data, so the "
        "interval describes the rise; the calibration truth 'accumulated, spread rising first' is "
        "the test of what a rise does to the decision). By the rule fixed in advance the unit "
        "decision reads every spread from its peak on.",
        "",
        table(["pipeline", "first pp", "peak pp", "end pp", "rise pp [95%]", "course"], rows),
        "",
    ]


def function_memory(study) -> list[str]:
    """Per pipeline: the spread (M2), the verdict kept / gone / cannot tell on the seed-paired
    difference (:mod:`~initmem.bridge.study.equivalence`) with its seed noise, the disagreement
    excess (M3); then the sentences on them."""
    parts = ["## Function memory against its noise floor", ""]
    frame = study.function
    if frame.empty:
        return parts
    verdicts = _by_pipeline(study.function_verdicts)
    rows = []
    for _, r in frame.iterrows():
        v = verdicts.loc[r["pipeline"]] if r["pipeline"] in verdicts.index else None
        rows.append(
            [
                str(r["label"]),
                str(r.get("n_seeds_used", "")),
                interval(r["spread_pp"], r.get("spread_lo", np.nan), r.get("spread_hi", np.nan), 1),
                spread_p_text(r),
                *(_verdict_cells(v) if v is not None else [MISSING] * 5),
                interval(
                    r.get("excess", np.nan),
                    r.get("excess_lo", np.nan),
                    r.get("excess_hi", np.nan),
                    3,
                ),
            ]
        )
    header = ["pipeline", "seeds", "spread pp [95%]", "p", "largest - smallest alpha pp [95%]"]
    header += ["seed sd pp", "90% (TOST)", "function memory", "seeds for gone"]
    header += ["disagreement excess [95%]"]
    return parts + [
        "Spread of the validation-selected test accuracy across alpha (bootstrap interval over "
        "seeds) and its within-seed permutation p-value, printed only where the seeds allow a "
        f"p-value below {memory.ALPHA_LEVEL}; the seed-paired difference between the largest and "
        "the smallest alpha with its 95% t-interval, its noise floor (the seed-to-seed sd of that "
        "difference) and its 90% interval, which decide *function memory* "
        f"(kept: the 95% interval excludes 0; gone: the two one-sided tests put it within "
        f"+-{EQUIVALENCE_MARGIN_PP:g} pp; else cannot tell), and the seeds at which a pipeline "
        f"that forgot would be called gone with probability {GONE_POWER:.1f} at that seed noise; "
        "the disagreement between alphas (same seed) minus the disagreement between seeds (same "
        "alpha), with a bootstrap interval over seeds.",
        "",
        table(header, rows),
        "",
        *[f"- {line}" for line in study.function_verdict_sentences()],
        "",
        *function_sentences(frame),
    ]


def spread_p_text(row) -> str:
    """The spread's permutation p-value (M2) where its smallest attainable value is below
    :data:`~initmem.empirical.memory.ALPHA_LEVEL`, else why it is not printed."""
    return permutation_text({"perm_p": row.get("p_value"), "perm_p_min": row.get("p_min")})


def _verdict_cells(v) -> list[str]:
    """The function-memory verdict's cells of one pipeline (E1 to E5)."""
    need = v["seeds_for_gone"]
    return [
        interval(v["diff_pp"], v["diff_lo"], v["diff_hi"], 1),
        number(v["sd_pp"], 2),
        f"[{number(v['tost_lo'], 1)}, {number(v['tost_hi'], 1)}]",
        str(v["verdict"]),
        f"{int(need)}" if np.isfinite(need) else MISSING,
    ]


def function_sentences(frame: pd.DataFrame) -> list[str]:
    """Among the pipelines whose seeds allow a permutation p-value below ALPHA_LEVEL, how many
    spreads are above their null; how many reach the smallest attainable p; how many disagreement
    excesses lie above 0."""
    p_min = frame["p_min"].astype(float)
    testable = frame[p_min < memory.ALPHA_LEVEL]
    untestable = frame[frame["p_value"].notna() & ~(p_min < memory.ALPHA_LEVEL)]
    above = testable[testable["p_value"] < memory.ALPHA_LEVEL]
    floor = frame[np.isclose(frame["p_value"].astype(float), p_min)]
    first = (
        f"{len(above)} of {len(testable)} pipelines whose seeds allow it have a spread above "
        f"its permutation null at p < {memory.ALPHA_LEVEL}"
        + (f": {', '.join(above['label'])}." if len(above) else ".")
        if len(testable)
        else ""
    )
    if len(untestable):
        first += (
            f" {len(untestable)} pipeline{'s' if len(untestable) != 1 else ''} cannot reach p < "
            f"{memory.ALPHA_LEVEL} with {'their' if len(untestable) != 1 else 'its'} seeds "
            f"(smallest attainable p {float(untestable['p_min'].min()):.3g}): no permutation test "
            "is printed there."
        )
    parts = [
        first.strip()
        + f" {len(floor)} reach the smallest p-value their seeds allow (every seed ranks the "
        "alphas the same way; with two alphas and n seeds it is 2 / 2^n)"
        + (f": {', '.join(_floor_labels(floor, frame))}." if len(floor) else "."),
        "",
    ]
    dis = frame.dropna(subset=["excess_lo"]) if "excess_lo" in frame else []
    if len(dis):
        pos = dis[dis["excess_lo"] > 0]
        parts += [
            f"The alphas disagree more than seeds do (interval above 0) in {len(pos)} of the "
            f"{len(dis)} pipelines with an interval ({memory.MIN_SEEDS_INTERVAL} or more seeds)"
            + (f": {', '.join(pos['label'])}." if len(pos) else "."),
            "",
        ]
        p = dis["p_value"].astype(float)
        shifted = (p < memory.ALPHA_LEVEL) | np.isclose(p, dis["p_min"].astype(float))
        level = dis[shifted & ~(dis["excess_lo"] > 0)]
        if len(level):
            parts += [
                f"In {len(level)} of the pipelines whose spread is above its null or whose seeds "
                "all rank the alphas the same way, the alphas disagree no more than seeds do: "
                "there the init scale moves the accuracy level, "
                "not a reproducible function (a run at the other alpha differs from its own "
                "seed's run no more than two seeds' runs differ): "
                f"{', '.join(level['label'])}.",
                "",
            ]
    return parts


def accuracy(study) -> list[str]:
    """The test accuracy per pipeline and alpha, and the within-family comparison of the pipelines
    that forget against those that keep (:mod:`~initmem.bridge.study.accuracy`)."""
    levels = study.accuracy_levels
    if levels.empty:
        return []
    rows = [
        [
            str(r["label"]),
            f"{r['alpha']:g}",
            str(int(r["n_seeds"])),
            interval(r["acc_pct"], r["acc_lo"], r["acc_hi"], 2),
        ]
        for _, r in levels.iterrows()
    ]
    parts = [
        "## Accuracy levels",
        "",
        "Test accuracy of the validation-selected checkpoint per pipeline and alpha: seed mean over "
        "the finished runs with its 95% t-interval over seeds.",
        "",
        table(["pipeline", "alpha", "seeds", "test accuracy % [95%]"], rows),
        "",
    ]
    if not study.accuracy_comparison.empty:
        parts += [
            "Per optimizer family, the pipelines whose function memory is gone against those "
            "whose memory is kept: per seed both used, the mean over alphas and pipelines of the "
            "first minus that of the second, with its 95% t-interval over seeds (cannot tell "
            "where it includes 0):",
            "",
            *[f"- {line}" for line in study.accuracy_sentences()],
            "",
        ]
    return parts


def _floor_labels(floor: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """The labels of pipelines at their smallest attainable p, each whose floor is above the
    sweep's lowest with its own (a pipeline left with fewer seeds reaches a weaker floor)."""
    lowest = float(frame["p_min"].astype(float).min())
    return [
        str(r["label"])
        if math.isclose(float(r["p_min"]), lowest)
        else f"{r['label']} (smallest attainable p {float(r['p_min']):.3g})"
        for _, r in floor.iterrows()
    ]


def seed_counts(study) -> list[str]:
    """The spread decision on the first k seeds, per pipeline and pooled, and the power sentences
    (:mod:`initmem.bridge.study.seeds`)."""
    frame = getattr(study, "spread_by_seeds", pd.DataFrame())
    if frame is None or frame.empty:
        return []
    rows = [
        [
            str(int(r["k_seeds"])),
            str(r["label"]),
            interval(
                r["estimate_pp"], r["lo_pp"], r["hi_pp"], 2 if r["pipeline"] == "pooled" else 1
            ),
            number(r["null_mean_pp"], 1) if r["pipeline"] != "pooled" else MISSING,
            r["decision"],
        ]
        for _, r in frame.iterrows()
    ]
    header = [
        "seeds",
        "pipeline",
        "spread pp [95%] (pooled: excess over null)",
        "null pp",
        "decision",
    ]
    unit_rows = getattr(study, "unit_by_seeds", pd.DataFrame())
    unit_part = []
    if unit_rows is not None and not unit_rows.empty:
        unit_part = [
            "The pre-registered unit decision on the spread recomputed on the first k seeds "
            "(rank difference of accumulated regularization against epochs, 95% bootstrap "
            "interval; the calibration is of the full design only, so at k seeds a verdict for "
            "epochs says cannot tell). A pipeline enters at k when it has at least k seeds used, "
            "so a row can hold fewer pipelines than the verdict, which takes every pipeline at "
            "its own number of seeds:",
            "",
            table(
                ["seeds", "pipelines", "rank difference [95%]", "decision"],
                [
                    [
                        str(int(r["k_seeds"])),
                        str(int(r["n_pipelines"])),
                        interval(r["rank_diff"], r["rank_lo"], r["rank_hi"]),
                        "cannot tell at this size"
                        if r["winner"] not in ("accumulated", "epochs")
                        else f"{r['winner']}",
                    ]
                    for _, r in unit_rows.iterrows()
                ],
            ),
            "",
        ]
    return [
        "## The spread at each seed count",
        "",
        *unit_part,
        "The spread decision recomputed on the first k seeds used of each pipeline (k = 2 up to "
        f"{int(frame['k_seeds'].max())}); *pooled*: over the pipelines with at least k seeds used, "
        "the mean of spread minus its null with a Student-t interval over pipelines.",
        "",
        table(header, rows),
        "",
        "How many seeds or pipelines the observed effect would need (the observed mean and sd "
        "taken as the truth, normal draws, Student-t interval; the best and worst alpha are picked "
        "on these seeds, so the sizes are optimistic):",
        "",
        *[f"- {line}" for line in study.power_sentences()],
        "",
    ]


def measured_vs_predicted(study, figures: dict[str, str]) -> list[str]:
    """The log-log fits of measured on predicted forgetting times, or why there is none."""
    parts = ["## Measured against predicted forgetting times", ""]
    if "predicted" in figures:
        parts += [f"![measured vs predicted]({figures['predicted']})", ""]
    frame = study.measured_vs_predicted
    if frame.empty:
        return parts + ["No pipeline forgot within its run: no fit (cannot tell at this size).", ""]
    rows = [
        [
            r["measured"],
            r["predicted"],
            "forgotten within the run"
            if r["points"] == "forgotten"
            else "all (censored ones extrapolated)",
            str(r["n"]),
            str(r.get("n_not_forgotten", "")),
            interval(r["slope"], r["slope_lo"], r["slope_hi"]) if r["n"] >= 3 else "– (n < 3)",
            interval(r["r2"], r.get("r2_lo", np.nan), r.get("r2_hi", np.nan))
            if r["n"] >= 3
            else "– (n < 3)",
        ]
        for _, r in frame.iterrows()
    ]
    header = [
        "measured",
        "predicted",
        "points",
        "pipelines",
        "censored",
        "slope [95%]",
        "R^2 [95%]",
    ]
    return parts + [
        "ln(measured time) against ln(predicted time) across pipelines: first over the "
        "pipelines forgotten within the run (the first evaluation with the seed-mean |memory| at "
        "most 1/e; censored ones, not forgotten by the end, are left out and counted: the fit the "
        "rules fix), then over every pipeline, the censored ones at the e-fold time of a fit "
        "exp(-t/tau), extrapolated; *law*: the normalized-weight laws fed with "
        "each pipeline's logged "
        "gradient sums; *accumulated*: steps until accumulated regularization reaches 1. Slope "
        "with its t-interval, R^2 with a bootstrap interval over pipelines.",
        "",
        table(header, rows),
        "",
    ]


def convergence(study) -> list[str]:
    """One sentence per pipeline on its norm memory at the end (M4), then by mechanism and for the
    short / long pairs (:mod:`initmem.bridge.study.mechanisms`)."""
    parts = [
        "## Did the effective learning rates converge?",
        "",
        *[f"- {line}" for line in study.norm_sentences()],
        "",
    ]
    if not study.mechanisms.empty:
        parts += [
            "### Which mechanism forgets",
            "",
            "Each pipeline by what can shrink its memory, read from its config: SGD noise only "
            "(SGD with no L2 and no weight decay), the Adam term only (an adaptive optimizer with "
            "neither), or explicit decay (either, with its noise term beside it); the norm memory "
            "at the end (seed mean) beside the end memory pre-registered before the runs (the "
            "normalized-weight law with the gradient scale probed at init; `DIR/predictions/`), "
            "where it was written for the alphas compared.",
            "",
            *[f"- {line}" for line in study.mechanism_sentences()],
            "",
        ]
    if not study.length_pairs.empty:
        parts += [
            "### Do more epochs change anything?",
            "",
            "Pipelines identical but for their length: the seed-paired change from the short "
            "run's end to the long run's end, with its 95% t-interval; a change is said only where "
            "the interval excludes 0.",
            "",
            *[f"- {line}" for line in study.length_sentences()],
            "",
        ]
    return parts


def groups(study, figures: dict[str, str]) -> list[str]:
    """Where the memory lives: spread and norm memory per parameter group, and the sentences."""
    parts = ["## Where the memory lives", ""]
    frame = study.groups
    if frame.empty:
        return parts + ["The sweep has no pipelines that differ only in `alpha_groups`.", ""]
    rows = [
        [
            str(r["family"]),
            str(r["group"]),
            str(r.get("n_seeds_used", "")),
            interval(r["spread_pp"], r.get("spread_lo", np.nan), r.get("spread_hi", np.nan), 1),
            number(r.get("null_mean_pp", np.nan), 1),
            number(r["p_value"], 3),
            interval(r["norm_memory_end"], r["norm_lo"], r["norm_hi"]),
        ]
        for _, r in frame.iterrows()
    ]
    header = ["pipeline", "alpha on", "seeds", "spread pp [95%]", "null pp", "p"]
    parts += [
        f"alpha = {_group_alphas(frame)} on one parameter group at a time (`conv`: the "
        "BN-followed convs; `bn`: BatchNorm's affine parameters; `head`: the last linear layer; "
        "`all`: every parameter), against alpha = 1. Norm memory: mean over the layers the group "
        "scales, at the end.",
        "",
        table([*header, "norm memory at end [95%]"], rows),
        "",
        *[f"- {line}" for line in study.group_sentences()],
        "",
    ]
    if "groups" in figures:
        parts += [f"![memory by group]({figures['groups']})", ""]
    return parts


def identity(study) -> list[str]:
    """The largest error of the exact SGD one-step identity over the logged runs (if any)."""
    frame = study.bridge.identity
    if frame.empty:
        return []
    return [
        "## The exact SGD identity",
        "",
        f"For SGD without momentum the logged norms satisfy the one-step identity "
        f"|w'|^2 = (1 - lr(l2 + wd))^2 |w|^2 + lr^2 |g|^2 to a largest relative error of "
        f"{study.bridge.identity_max_error():.1e} over {frame['hash'].nunique()} runs and "
        f"{frame['layer'].nunique()} BN-followed convs.",
        "",
    ]


def rules(study) -> list[str]:
    """The rules fixed in advance, then the analysis's notes."""
    parts = [
        "## Rules fixed in advance",
        "",
        f"- A run interpolates when its final train accuracy is >= {_threshold_pct(study)}. Function-memory "
        "statistics use, per pipeline, the seeds whose runs interpolate at every alpha; a pipeline "
        "with fewer than 2 such seeds is left out of them.",
        f"- Forgotten means {FORGETTING.name}: {FORGETTING.definition}; decided at the first "
        f"evaluation where the seed-mean |memory| ({LAYER_RULE}) is at most that level, a memory "
        "below 0 whose interval excludes 0 being reversed, not forgotten (initmem.theory.criterion; "
        "the theory, the report and the bridge use the same).",
        "- A forgetting time not reached within the run is censored: reported as a lower bound "
        "and left out of the measured-vs-predicted fit.",
        "- The decision: accumulated regularization against epochs only, on the rank difference "
        "(pairs of evaluations the units order differently), a winner only where calibrated "
        f"(wrong in at most {MAX_ERROR:.0%} of synthetic sweeps of this design); the "
        "leave-one-pipeline-out "
        "R^2 and other units are reported, not used to pick a winner; the collapse sentences "
        "follow the R^2 interval only where the decision agrees.",
        "- With two alphas the spread is symmetric under swapping every seed's labels at once, so "
        "the smallest attainable permutation p-value is 2 / 2^seeds; a permutation p-value is "
        f"printed only where that is below {memory.ALPHA_LEVEL}.",
        "- Function memory, per pipeline, on the seed-paired difference of the validation-selected "
        "test accuracy between the largest and the smallest alpha: gone when the two one-sided "
        f"tests (Schuirmann 1987, each at {TOST_ALPHA}) put it within +-{EQUIVALENCE_MARGIN_PP:g} "
        "pp; else kept when its 95% t-interval excludes 0; else cannot tell. Its noise floor is "
        "the seed-to-seed sd of that difference.",
        "",
    ]
    return parts + notes_lines(study.notes)


def generated_by(sweep_dir) -> str:
    """The line under a study document's title: which folder every number comes from."""
    return (
        f"*Generated by `initmem study` from the sweep folder `{sweep_dir}`; every number and every "
        "finding sentence below is computed from it.*"
    )


def notes_lines(notes) -> list[str]:
    """The analysis's own notes as a list under "Notes from the analysis:" (none: no lines)."""
    return ["Notes from the analysis:", "", *[f"- {n}" for n in notes], ""] if notes else []


def reproduce(study, command: str, wall: str) -> list[str]:
    """The training time summed over runs, the commands and how long they took."""
    every = study.every_run  # every alpha's runs (the other sections compare the common alphas)
    return reproduce_lines(every if not every.empty else study.bridge.runs, command, wall)


def reproduce_lines(trained: pd.DataFrame, command: str, wall: str) -> list[str]:
    """The section "Reproduce" of a study document: the training time summed over ``trained`` (one
    row per run, its ``wall_time`` in seconds), the ``command`` as a code block and the measured
    ``wall`` sentence."""
    parts = ["## Reproduce", ""]
    if "wall_time" in trained and trained["wall_time"].notna().any():
        parts += [
            f"Training: {len(trained)} runs, {trained['wall_time'].sum() / 60:.1f} minutes of "
            "training summed over runs (each run's own wall time, one thread per worker).",
            "",
        ]
    if "run_dir" in trained and len(trained):
        # the runs' recorded provenance: read only where the study lists trained runs
        from initmem.empirical.provenance import provenance_sentence

        if sentence := provenance_sentence(list(trained["run_dir"])):
            parts += [sentence, ""]
    if command:
        parts += ["```bash", command, "```", ""]
    if wall:
        parts += [wall, ""]
    return parts


# ----------------------------------------------------------------------------------- helpers
def _by_pipeline(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index("pipeline") if not frame.empty else pd.DataFrame()


def _settings(row: pd.Series) -> str:
    """A design row's pipeline as text: optimizer, lr and the settings that are not zero."""
    settings = f"{row['optimizer']} lr {row['lr']:g}"
    if row["momentum"]:
        settings += f", mu {row['momentum']:g}"
    if row["l2"]:
        settings += f", L2 {row['l2']:g}"
    if row["weight_decay"]:
        settings += f", wd {row['weight_decay']:g}"
    if row["schedule"] != "constant":
        settings += f", {row['schedule']}"
    return settings


def _r_text(corr: dict, frame: pd.DataFrame) -> str:
    """r over the interpolating pipelines, or why it is undefined."""
    if math.isfinite(corr["r"]):
        return number(corr["r"])
    used = frame[frame["interpolates"] & (frame["alphas"].str.count(",") >= 1)]
    if len(used) >= 3 and np.ptp(np.round(used["epochs"].to_numpy(dtype=float), 6)) == 0:
        return f"undefined (all of them ran {used['epochs'].iloc[0]:.0f} epochs)"
    return "undefined (fewer than 3 such pipelines)"


def _threshold_pct(study) -> str:
    """The interpolation rule's threshold as the document prints it (e.g. ``99.5%``): the runs' own
    (the sweep's ``[study] interpolation``)."""
    return tables.threshold_text(study.bridge.runs)


def _group_alphas(frame: pd.DataFrame) -> str:
    """The alphas other than 1 that the group pipelines ran (e.g. ``4``), from their ``alphas``."""
    alphas = {a for value in frame["alphas"] for a in str(value).split(",") if float(a) != 1.0}
    return ", ".join(sorted(alphas, key=float)) or "1"


__all__ = ["document"]
