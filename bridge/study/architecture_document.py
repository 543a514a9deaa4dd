"""The architectures study's Markdown document (``docs/architectures.md``): one function per section.

:func:`document` joins the sections of an :class:`~initmem.bridge.study.architectures.ArchitectureStudy`
(``study``: any object with its fields, rule constants and sentence methods; this module imports
nothing of the study's). Every number comes from the study's
tables and every finding sentence from :mod:`initmem.bridge.study.architectures` or
:mod:`initmem.empirical.memory`, so the text says only what the folder says.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from initmem.bridge.study.document import generated_by, notes_lines, reproduce_lines
from initmem.bridge.study.equivalence import permutation_text
from initmem.empirical import memory, tables
from initmem.empirical.markdown import MISSING, interval, number, table
from initmem.theory.criterion import FORGETTING


def document(study, *, command: str = "", wall: str = "") -> str:
    """The Markdown document (see the module docstring)."""
    parts = [
        *question(study),
        *verdict(study),
        *per_architecture(study),
        *predictions(study),
        *rules(study),
        *reproduce(study, command, wall),
    ]
    return "\n".join(parts)


def question(study) -> list[str]:
    """The title, where the numbers come from, and the design as the folder holds it."""
    runs = study.runs
    models = study.architectures()
    alphas = sorted(runs["alpha"].unique())
    seeds = sorted(runs["seed"].unique())
    per_model = study.cells.groupby("model", sort=False)["pipeline"].nunique()
    return [
        "# Beyond BatchNorm ResNets: where the memory of alpha goes, architecture by architecture",
        "",
        generated_by(study.sweep_dir),
        "",
        "## The question",
        "",
        "The thesis: training forgets the init scale alpha through mechanisms the theory names and "
        "times, and through nothing else. With scale-invariant weights (a BatchNorm or LayerNorm "
        "downstream) alpha only sets their effective learning rate lr/|w|^2, and the memory goes "
        "when the alphas' effective learning rates meet (the normalized-weight laws); without "
        "invariance the network at large alpha is lazy, and the linearized (NTK) memory term is kept "
        "unless decay erases it. Each architecture is trained under each pipeline at every alpha, "
        "and the memory measured is set against the forgetting time predicted before the runs.",
        "",
        f"This sweep ({len(runs)} runs) trains {len(models)} architectures ("
        + ", ".join(f"{m}: {_count(per_model.get(m, 0), 'pipeline')}" for m in models)
        + f"), alpha {', '.join(f'{a:g}' for a in alphas)}, {len(seeds)} seeds.",
        "",
    ]


def verdict(study) -> list[str]:
    """One verdict per architecture (A5)."""
    return ["## Verdict", "", *[f"- {line}" for line in study.verdict()], ""]


def per_architecture(study) -> list[str]:
    """Per architecture: the table of its cells and the sentences on its norm memory."""
    parts = ["## Per architecture", ""]
    header = [
        "pipeline",
        "settings",
        "seeds used",
        "test acc % by alpha",
        "alpha max - min, pp [95%]",
        "seed sd pp",
        "90% interval (margin)",
        "permutation p",
        "function memory",
        "norm memory at end [95%]",
        "norm forgetting time (steps)",
        "predicted (steps)",
        "predicted",
        "agreement",
    ]
    for model in study.architectures():
        cells = study.cells_of(model)
        parts += [f"### {model}", "", table(header, [cell_row(r) for _, r in cells.iterrows()]), ""]
        norm = cells[cells["has_norm_memory"] & cells["norm_end"].notna()]
        if not norm.empty:
            frame = pd.DataFrame(
                {
                    "label": norm["pipeline_label"],
                    "memory_end": norm["norm_end"],
                    "lo": norm["norm_lo"],
                    "hi": norm["norm_hi"],
                    "n_seeds": norm["norm_n_seeds"],
                }
            )
            parts += [f"- {line}" for line in memory.norm_sentences(frame)]
        law = study.law_sentences()
        parts += [f"- {line}" for line in law if line.startswith(f"{model}:")]
        parts += [f"- {line}" for line in _fit_lines(study, cells)]
        if not cells["has_norm_memory"].any():
            parts.append(
                f"- {model}: norm memory not defined: no scale-invariant weights and no pre-LN "
                "residual stream."
            )
        parts += _calibration_lines(study, model)
        parts.append("")
    return parts


def _fit_lines(study, cells) -> list[str]:
    """Per cell whose seeds did not all reach the fit threshold at every alpha: how many did (the
    function memory uses those only, M1)."""
    seeds = study.runs.groupby("pipeline")["seed"].nunique()
    threshold = tables.threshold_text(study.runs)
    return [
        f"{r['pipeline_label']}: {int(r['n_seeds_used'])} of {int(seeds[r['pipeline']])} seeds "
        f"reached the fit threshold (final train accuracy >= {threshold}) at every alpha; the "
        "function memory uses those only."
        for _, r in cells.iterrows()
        if r["n_seeds_used"] < seeds.get(r["pipeline"], 0)
    ]


def _calibration_lines(study, model: str) -> list[str]:
    """A6 for one architecture: the verdict's worst error over the truths and its power."""
    rows = study.calibration
    rows = rows[rows["model"] == model] if not rows.empty else rows
    if rows.empty:
        return []
    worst = rows.loc[rows["wrong"].idxmax()]
    decided = ", ".join(
        f"{r.truth}: {100 * r.decided:.0f}% ({100 * r.right:.0f}% right)" for r in rows.itertuples()
    )
    return [
        f"- Calibration ({int(rows['replicas'].iloc[0])} planted-answer replicas of this design "
        f"per truth, each cell at its measured seed noise): the verdict names a wrong answer in at "
        f"most {100 * worst['wrong']:.1f}% [95% {100 * worst['wrong_lo']:.1f}, "
        f"{100 * worst['wrong_hi']:.1f}] of replicas (worst truth: {worst['truth']}); it decides "
        f"in {decided}."
    ]


def cell_row(r) -> list[str]:
    """One cell's table row."""
    if r["has_norm_memory"]:
        norm = interval(r["norm_end"], r["norm_lo"], r["norm_hi"])
        if not np.isfinite(r["norm_end"]):
            norm = "no layer logs"
        norm = f"{norm} (`{r['deciding_group']}`)"
        time = (
            f"> {r['total_steps']:.0f} (censored)"
            if r["norm_time_censored"]
            else f"{r['norm_time_steps']:.0f}"
        )
    else:
        norm, time = str(r["norm_state"]), MISSING
    return [
        str(r["pipeline_label"]),
        str(r["settings"]),
        number(r["n_seeds_used"]),
        str(r["acc_by_alpha"]) if isinstance(r["acc_by_alpha"], str) else MISSING,
        interval(r["diff_pp"], r["diff_lo"], r["diff_hi"], 1),
        number(r["sd_pp"], 2),
        f"[{r['tost_lo']:.1f}, {r['tost_hi']:.1f}] (+-{r['margin_pp']:g})"
        if np.isfinite(r["tost_lo"])
        else MISSING,
        permutation_text(r),
        str(r["spread_state"]),
        norm,
        time,
        f"{r['deciding_group']}: {_steps(r['predicted_steps'])} (run {r['total_steps']:.0f})",
        str(r["predicted_state"]),
        f"{r['agreement']} ({r['reason']})",
    ]


def predictions(study) -> list[str]:
    """The predictions used, per pipeline and group, with their source."""
    parts = ["## The predictions", ""]
    frame = study.predictions
    if frame.empty:
        return parts + ["No predictions were available for any pipeline.", ""]
    labels = study.runs.drop_duplicates("pipeline").set_index("pipeline")["label"]
    models = study.cells.set_index("pipeline")["model"]
    rows = [
        [
            str(models.get(r["pipeline"], MISSING)),
            str(labels.get(r["pipeline"], r.get("variant", r["pipeline"]))),
            f"{float(r['alpha']):g}",
            str(r["group"]),
            str(int(r["parameters"])) if np.isfinite(float(r["parameters"])) else MISSING,
            str(r["mechanism"]),
            _steps(float(r["steps"])),
            _steps(float(r["epochs"])),
            number(float(r["memory_fraction"]), 3),
            str(r["source"]),
        ]
        for _, r in frame.iterrows()
    ]
    header = ["model", "pipeline", "alpha", "group", "parameters", "mechanism", "steps"]
    header += ["epochs", "NTK memory fraction", "source"]
    sources = frame.drop_duplicates("pipeline")["source"].value_counts()
    return parts + [
        "Per pipeline and parameter group, the theory's forgetting time of alpha against 1 "
        "(`initmem.bridge.preregister`; *never*: no decay erases it): "
        + "; ".join(f"{n} pipelines {source}" for source, n in sources.items())
        + ". The NTK memory fraction is |m| / |f0| of the memory term on probe images: the part "
        "of the initial function the kernel cannot reach.",
        "",
        table(header, rows),
        "",
    ]


def rules(study) -> list[str]:
    """The rules fixed in advance, then the analysis's notes."""
    threshold = tables.threshold_text(study.runs)
    parts = [
        "## Rules fixed in advance",
        "",
        f"- A run counts as fitted when its final train accuracy is >= {threshold} (the sweep "
        "file's `[study] interpolation`, fixed before the runs); the function memory uses, per "
        "pipeline, the seeds whose runs are fitted at every alpha (fewer than 2: none).",
        "- Function memory: the seed-paired difference of validation-selected test accuracy "
        "between the largest and the smallest alpha (pp), its seed sd the noise floor. *Kept* when "
        "its 95% t-interval excludes 0; *gone* when two one-sided t-tests at 0.05 put it within "
        f"+-{study.spread_margin_pp:g} pp (its 90% interval inside the margin, fixed before the "
        "runs); otherwise cannot tell at this size. The within-seed permutation test is printed "
        f"only where its smallest attainable p (2 / 2^seeds: {_p_min_text(study)}) is below 0.05.",
        f"- Norm memory: of the scale-invariant weights (layer mean), or of the joint norm of a "
        f"pre-LN model's `residual_stream` group; forgotten means {FORGETTING.name}: "
        f"{FORGETTING.definition}; the end state is decided by its 95% t-interval over seeds "
        "(converged within 1/e of 0, apart above it, reversed when the interval lies below 0: not "
        "forgotten); the measured forgetting time is the first logged step where the seed-mean "
        "|memory| reaches it, censored when it never does (initmem.theory.criterion).",
        "- The deciding group of the prediction is the first of "
        + ", ".join(f"`{g}`" for g in study.deciding_groups)
        + " that the model has (the normalized-weight laws per layer, on the joint residual "
        "stream, or the lazy NTK memory term); it predicts forgetting when its time is at most the "
        "run's length in steps.",
        "- A pipeline disagrees with the thesis when its function memory is kept although "
        "forgetting is predicted (or gone although it is not), or when the norm memory converged "
        "while the function memory was kept. An architecture: *the thesis does not hold here* "
        "with any such pipeline; *the thesis holds here* when none disagrees and at least one "
        "pipeline predicted to keep and one predicted to forget agree; otherwise cannot tell, "
        "with the seeds that would decide each open pipeline at its measured seed noise (power "
        "0.8).",
        "",
    ]
    return parts + notes_lines(study.notes)


def reproduce(study, command: str, wall: str) -> list[str]:
    """The training time summed over the finished runs, the commands and how long they took
    (:func:`initmem.bridge.study.document.reproduce_lines`)."""
    return reproduce_lines(tables.finished_runs(study.runs), command, wall)


def _count(n: int, noun: str) -> str:
    """``n noun`` with the plural where it needs one."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _p_min_text(study) -> str:
    """The smallest attainable permutation p-values of the sweep's cells, as text."""
    values = sorted({float(v) for v in study.cells["perm_p_min"] if np.isfinite(float(v))})
    if not values:
        return "no cell has two seeds used"
    return "here " + ", ".join(f"{v:.3g}" for v in values)


def _steps(value: float) -> str:
    """A time as text: ``never`` for infinity, the missing mark for NaN."""
    if value is None or not np.isfinite(value) and not np.isinf(value):
        return MISSING
    return "never" if np.isinf(value) else f"{value:.4g}"


__all__ = ["document"]
