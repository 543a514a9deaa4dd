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
        "spread pp [95%]",
        "null pp",
        "p",
        "alpha max - min, pp [95%]",
        "spread",
        "norm memory at end [95%]",
        "norm forgetting time (steps)",
        "predicted (steps)",
        "predicted",
        "agreement",
    ]
    for model in study.architectures():
        cells = study.cells_of(model)
        parts += [f"### {model}", "", table(header, [cell_row(r) for _, r in cells.iterrows()]), ""]
        norm = cells[cells["has_scale_invariant"] & cells["norm_end"].notna()]
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
        if not cells["has_scale_invariant"].any():
            parts.append(f"- {model}: norm memory not defined: no scale-invariant weights.")
        parts.append("")
    return parts


def cell_row(r) -> list[str]:
    """One cell's table row."""
    if r["has_scale_invariant"]:
        norm = interval(r["norm_end"], r["norm_lo"], r["norm_hi"])
        if not np.isfinite(r["norm_end"]):
            norm = "no layer logs"
        time = (
            f"> {r['total_steps']:.0f} (censored)"
            if r["norm_time_censored"]
            else f"{r['norm_time_steps']:.0f}"
        )
    else:
        norm, time = "not defined: no scale-invariant weights", MISSING
    return [
        str(r["pipeline_label"]),
        str(r["settings"]),
        number(r["n_seeds_used"]),
        str(r["acc_by_alpha"]) if isinstance(r["acc_by_alpha"], str) else MISSING,
        interval(r["spread_pp"], r["spread_lo"], r["spread_hi"], 1),
        number(r["null_mean_pp"], 1),
        number(r["p_value"], 3),
        interval(r.get("diff_pp", np.nan), r.get("diff_lo", np.nan), r.get("diff_hi", np.nan), 1),
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
        f"- A run interpolates when its final train accuracy is >= {threshold}; the spread uses, "
        "per pipeline, the seeds whose runs interpolate at every alpha (fewer than 2: no spread).",
        "- The spread (max minus min over alpha of the seed-mean test accuracy) is reported with "
        "its bootstrap interval, its noise floor (the mean spread with alpha labels permuted within "
        "each seed) and its permutation p-value; with two alphas that p-value cannot go below "
        f"2 / 2^seeds ({_p_min_text(study)}), so the memory's state is decided by the seed-paired "
        "difference of test accuracy between the largest and the smallest alpha and its 95% "
        f"t-interval over seeds: *gone* when the interval lies within +-{study.spread_margin_pp:g} "
        "pp, *kept* when it excludes 0, otherwise cannot tell at this size.",
        f"- Norm memory (scale-invariant weights only): forgotten means {FORGETTING.name}: "
        f"{FORGETTING.definition}; the end state is decided by its 95% t-interval over seeds "
        "(converged within 1/e of 0, apart above it, reversed when the interval lies below 0: not "
        "forgotten); the measured forgetting time is the first logged step where the seed-mean "
        "|memory| reaches it, censored when it never does (initmem.theory.criterion).",
        f"- The deciding group of the prediction is `{study.deciding_groups[0]}` for a model with "
        f"scale-invariant weights, `{study.deciding_groups[1]}` (the lazy NTK memory term) otherwise; it "
        "predicts forgetting when its time is at most the run's length in steps.",
        "- A pipeline disagrees with the thesis when its spread is kept although forgetting is "
        "predicted (or gone although it is not), or when the norm memory converged while the "
        "spread was kept; an architecture with any such pipeline: the thesis does not hold here.",
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
    values = sorted({float(v) for v in study.cells["p_min"] if np.isfinite(float(v))})
    if not values:
        return "no cell has two seeds used"
    return "here " + ", ".join(f"{v:.3g}" for v in values)


def _steps(value: float) -> str:
    """A time as text: ``never`` for infinity, the missing mark for NaN."""
    if value is None or not np.isfinite(value) and not np.isinf(value):
        return MISSING
    return "never" if np.isinf(value) else f"{value:.4g}"


__all__ = ["document"]
