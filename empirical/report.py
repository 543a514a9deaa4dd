"""The report of a sweep: a Markdown file with tables and PNG figures, readable without the text.

``write_report(DIR)`` writes ``DIR/report.md``, its tables with every column as
``DIR/tables/memory.csv``, ``accuracy.csv`` and ``pipelines.csv`` (report.md shows at most
``markdown.MAX_COLUMNS`` columns and names the others under the table) and ``DIR/figures/*.png``:

- ``accuracy_vs_alpha.png``: test accuracy of the validation-selected model against alpha, one line
  per pipeline with error bars over seeds, beside the final train accuracy (interpolation line: the threshold);
- ``spread.png``: the spread across alpha per pipeline with its bootstrap interval;
- ``training_curves.png``: train (un-augmented) and test accuracy over epochs, one panel per pipeline,
  one colour per alpha (seed mean);
- ``eff_lr.png``: effective learning rate lr / |w|^2 of the BN-followed convs over epochs (geometric
  mean over layers), one panel per pipeline, one colour per alpha; and ``eff_lr_layers_<k>.png``:
  the same per layer, one panel per alpha, for pipeline k.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, NullLocator

from initmem.empirical import markdown, runfolder
from initmem.empirical.curves import MemoryDataError, norm_memory_curves
from initmem.empirical.legend import BN_CONVS, invariant_name, legend_line, pipeline_colors
from initmem.empirical.memory import (
    accuracy_table,
    norm_memory_end,
    norm_sentences,
    spread_table,
)
from initmem.empirical.sweep import SweepStatus, sweep_status
from initmem.empirical.tables import (
    FINISHED,
    INTERPOLATION_THRESHOLD,
    interpolation_thresholds,
    load_epochs,
    load_layers,
    load_runs,
    load_sweep,
    missing_memory_sentences,
    pipeline_columns,
    threshold_text,
)
from initmem.theory.criterion import FORGETTING

FIGURE_DPI = 120
#: Where ``write_report`` writes the report of run folders when no ``out`` is given (working folder).
RUNS_REPORT_DIR = "initmem-report"
#: The folder beside report.md with each of its tables as CSV (every column).
TABLES_DIR = "tables"


def runs_status(runs: pd.DataFrame) -> SweepStatus:
    """The :class:`~initmem.empirical.sweep.SweepStatus` of any runs (a :func:`load_runs` frame)."""
    counts = runs["status"].value_counts()
    failed = runs[runs["status"] == "failed"]
    return SweepStatus(
        total=len(runs),
        resumable=0,
        failures=tuple(
            (h, v, runfolder.failure_message(d))
            for h, v, d in zip(failed["hash"], failed["variant"], failed["run_dir"], strict=True)
        ),
        **{state: int(counts.get(state, 0)) for state in runfolder.RUN_STATES},
    )


def write_report(
    sweep_dir: str | Path | Sequence[str | Path],
    *,
    notes: Sequence[str] = (),
    n_boot: int = 2000,
    confidence: float = 0.95,
    out: str | Path | None = None,
    interpolation: float | None = None,
) -> Path:
    """Write ``report.md`` and ``figures/*.png`` into ``out`` (default: the sweep folder, which is only
    read otherwise); return the report's path.

    ``sweep_dir``: a sweep folder, or run folders (and sweep folders) in any mix, read by
    :func:`~initmem.empirical.tables.load_runs` (the pipelines inferred from the configs; ``out``
    defaults to :data:`RUNS_REPORT_DIR` in the working folder then). ``interpolation``: the train
    accuracy (fraction) a run must reach to count as interpolating (None: the sweep file's
    ``[study] interpolation``, else ``tables.INTERPOLATION_THRESHOLD``).

    ``notes`` are Markdown paragraphs placed after the summary table (e.g. a demo's verdict). The
    figures are :class:`matplotlib.figure.Figure` objects (no pyplot): the caller's backend and
    pyplot's figure list are left as they were.
    """
    paths = [sweep_dir] if isinstance(sweep_dir, (str, Path)) else list(sweep_dir)
    one_sweep = len(paths) == 1 and (Path(paths[0]) / "manifest.json").is_file()
    if one_sweep:
        sweep_dir = Path(paths[0])
        out = sweep_dir if out is None else Path(out)
        runs = load_sweep(sweep_dir, interpolation=interpolation)
        status = sweep_status(sweep_dir)
        name, description = _title(sweep_dir)
        where = f"Folder `{sweep_dir}`"
    else:
        out = Path(RUNS_REPORT_DIR if out is None else out)
        runs = load_runs(paths, interpolation=interpolation)
        status = runs_status(runs)
        name, description = f"{len(runs)} run folders", ""
        where = "Run folders " + ", ".join(f"`{p}`" for p in paths)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    tables = out / TABLES_DIR
    spread = spread_table(runs, n_boot=n_boot, confidence=confidence)
    accuracy = accuracy_table(runs)
    finished = runs[runs["status"].isin(FINISHED)]
    epochs = load_epochs(finished)
    layers = load_layers(finished)

    lines = [f"# Sweep report: {name}", ""]
    if description:
        lines += [description.strip(), ""]
    lines += [
        f"{where}: {status.summary()}.",
        "",
        "## Initialization memory per pipeline",
        "",
        "A pipeline is every config field except `alpha` (init scale) and `seed`. Every memory is "
        "measured on the pipeline's *seeds used*: those whose runs interpolate (final train accuracy "
        f">= {threshold_text(runs)} on the un-augmented training set) at every alpha "
        "(definition M1 of `initmem.empirical.memory`; fewer than 2: no memory). *Spread* (M2): max "
        "minus min over alpha of the seed-mean test accuracy of the validation-selected checkpoint "
        f"(percentage points), with a {100 * confidence:.0f}% bootstrap interval over seeds, its noise "
        "floor (*null*: the mean spread with the alpha labels permuted within each seed) and the "
        "permutation p-value. *Interpolated*: every run of the pipeline finished and interpolates. "
        "*Disagreement* (M3): fraction of test points where the validation-selected models of two "
        "alphas (same seed) predict different classes, averaged over pairs and seeds; *seed "
        "disagreement* is the same between two seeds at one alpha (its floor).",
        "",
    ]
    if spread.empty or not spread["n_runs"].any():
        lines += ["No finished runs yet.", ""]
    else:
        lines += [_report_table(_spread_display(spread, confidence), tables / "memory.csv"), ""]
        lines += [f"- {sentence}" for sentence in missing_memory_sentences(runs)] + [""]
        lines += [*[f"{n.strip()}\n" for n in notes]]
        lines += [_figure(figures / "spread.png", plot_spread(spread, figures / "spread.png"))]
        lines += ["", "## Test accuracy against alpha", ""]
        lines += [_report_table(_accuracy_display(accuracy), tables / "accuracy.csv"), ""]
        thresholds = interpolation_thresholds(runs).tolist()
        plot_accuracy_vs_alpha(accuracy, figures / "accuracy_vs_alpha.png", thresholds)
        lines += [_figure(figures / "accuracy_vs_alpha.png", True), ""]
    lines += ["## Training curves", ""]
    done = plot_training_curves(finished, epochs, figures / "training_curves.png")
    lines += [_figure(figures / "training_curves.png", done, "no per-epoch logs"), ""]
    weights = invariant_name(runs)
    lines += [f"## Effective learning rate of the {weights}", ""]
    lines += [
        f"lr / |w|^2 for each of the {weights}"
        + (
            " (conv weights followed by BatchNorm)"
            if weights == BN_CONVS
            else " (weights followed by a normalization: the function ignores their scale)"
        )
        + ": the quantity the "
        "init scale sets (|w| grows with alpha). Per pipeline, from the data: the norm memory at "
        "the end (log-ratio of these weights' norms between the largest and the smallest alpha over "
        "its value at init, mean over layers and seeds, 95% t-interval over seeds); the lines "
        f"converged when alpha is forgotten: {FORGETTING.name} ({FORGETTING.definition}).",
        "",
        *[f"- {line}" for line in _convergence_lines(finished, layers, weights)],
        "",
    ]
    done = plot_effective_lr(finished, layers, figures / "eff_lr.png")
    lines += [_figure(figures / "eff_lr.png", done, "no per-layer logs"), ""]
    for k, pipeline in enumerate(finished["pipeline"].unique()):
        path = figures / f"eff_lr_layers_{k}.png"
        if plot_effective_lr_layers(finished, layers, pipeline, path):
            lines += [_figure(path, True), ""]
    pipelines = _report_table(_pipeline_display(runs), tables / "pipelines.csv")
    lines += ["## Pipelines", "", pipelines, ""]
    if status.failures:
        lines += ["## Failed runs", ""]
        lines += [f"- `{h}` ({v}): {e}" for h, v, e in status.failures]
        lines += [""]
    legend = legend_line(lines)  # the codes the report prints, spelled out once, near the top
    if legend:
        at = lines.index("## Initialization memory per pipeline")
        lines[at:at] = [legend, ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report


def _convergence_lines(
    runs: pd.DataFrame, layers: pd.DataFrame, weights: str = BN_CONVS
) -> list[str]:
    """Per pipeline: did the alphas' effective learning rates converge (M4, with its interval)?"""
    if runs.empty or layers.empty or "weight_norm" not in layers:
        return ["no per-layer logs: cannot tell."]
    try:
        curves = norm_memory_curves(runs, layers)
    except MemoryDataError as err:
        return [f"cannot tell: {err}."]
    if not curves.empty and curves["step"].max() == 0:
        return ["no run logged an evaluation after a step (all stopped at init): nothing to tell."]
    return norm_sentences(norm_memory_end(curves, runs)) or [f"none of the {weights} is scaled."]


def _title(sweep_dir: Path) -> tuple[str, str]:
    """The sweep's name and description from its ``sweep.toml`` (only these two keys are read, so a
    sweep file that a newer version would reject still gets its report)."""
    if sys.version_info >= (3, 11):
        # Python-version dependent TOML reader
        import tomllib
    else:  # pragma: no cover
        # Python-version dependent TOML reader
        import tomli as tomllib

    path = sweep_dir / "sweep.toml"
    values = tomllib.loads(path.read_text()) if path.is_file() else {}
    return str(values.get("name", sweep_dir.name)), str(values.get("description", ""))


# ====================================================================== tables
def _fmt(value: Any, digits: int = 1) -> str:
    return markdown.number(value, digits)


def _alpha(value: Any) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:g}"


def _markdown_table(frame: pd.DataFrame) -> str:
    return markdown.frame_table(frame)


def _report_table(frame: pd.DataFrame, csv_path: Path) -> str:
    """``frame`` as Markdown, at most ``markdown.MAX_COLUMNS`` columns with the others named under
    it, and every column written to ``csv_path`` (relative to report.md in the note)."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(csv_path, index=False)
    shown, hidden = markdown.readable(frame)
    note = markdown.hidden_note(hidden, f"{TABLES_DIR}/{csv_path.name}")
    return _markdown_table(shown) + (f"\n\n{note}" if note else "")


def _spread_display(spread: pd.DataFrame, confidence: float) -> pd.DataFrame:
    rows = []
    for _, r in spread.iterrows():
        ci = (
            f"[{_fmt(r['ci_low_pp'])}, {_fmt(r['ci_high_pp'])}]"
            if np.isfinite(r.get("ci_low_pp", np.nan))
            else _too_few(r, "–")
        )
        finite = np.isfinite(r.get("spread_pp", np.nan))
        rows.append(
            {
                "pipeline": r["label"],
                "seeds used": str(r.get("n_seeds_used", 0)),
                "spread (pp)": _fmt(r.get("spread_pp")) if finite else _too_few(r),
                f"{100 * confidence:.0f}% CI (pp)": ci,
                "null (pp)": _fmt(r.get("null_mean_pp")),
                "p": _fmt(r.get("p_value"), 3),
                "best / worst alpha": f"{_alpha(r.get('best_alpha'))} / {_alpha(r.get('worst_alpha'))}",
                "interpolated": _fmt(r.get("interpolated")),
                "min train acc (%)": _fmt(r.get("min_train_acc_pct")),
                "disagreement alphas": _fmt(r.get("disagreement"), 3),
                "disagreement seeds": _fmt(r.get("seed_disagreement"), 3),
                "runs": f"{r['n_runs']}"
                + (f" ({r['n_diverged']} diverged)" if r["n_diverged"] else "")
                + (f", {r['n_unfinished']} unfinished" if r["n_unfinished"] else ""),
                "seed std (pp)": _fmt(r.get("seed_std_pp")),
            }
        )
    return pd.DataFrame(rows)


def _too_few(row: pd.Series, otherwise: str = "") -> str:
    """Why a pipeline has no spread (M1, M2): one alpha (a spread of 0 by definition), one seed, or
    fewer than 2 seeds that interpolate at every alpha (no noise floor)."""
    if row["n_alphas"] == 1:
        return "– (one alpha)"
    if row["n_seeds"] == 1:
        return "– (one seed)"
    used = int(row.get("n_seeds_used", 0))
    if used < 2:
        return f"– ({used} of {row['n_seeds']} seeds interpolate at every alpha)"
    return otherwise


def _accuracy_display(accuracy: pd.DataFrame) -> pd.DataFrame:
    cells = accuracy.assign(
        cell=[
            f"{_fmt(m)} ± {_fmt(s)}" if np.isfinite(s) else _fmt(m)
            for m, s in zip(accuracy["test_acc_pct"], accuracy["test_acc_std_pct"], strict=True)
        ]
    )
    table = cells.pivot_table(index="alpha", columns="label", values="cell", aggfunc="first")
    table = table[list(dict.fromkeys(accuracy["label"]))].fillna("–")
    table.insert(0, "alpha", [f"{a:g}" for a in table.index])
    table.columns.name = None
    return table.reset_index(drop=True)


def _pipeline_display(runs: pd.DataFrame) -> pd.DataFrame:
    firsts = runs.drop_duplicates("pipeline")
    varying = [c for c in pipeline_columns() if firsts[c].astype(str).nunique(dropna=False) > 1]
    shown = firsts[["label", *varying]].copy()
    for column in varying:
        shown[column] = [f"{v:g}" if isinstance(v, float) else _fmt(v) for v in shown[column]]
    grid = runs.groupby("pipeline", sort=False).agg(
        alphas=("alpha", lambda a: ", ".join(f"{x:g}" for x in sorted(set(a)))),
        seeds=("seed", lambda s: len(set(s))),
    )
    shown["alphas"] = list(grid.loc[firsts["pipeline"], "alphas"])
    shown["seeds"] = list(grid.loc[firsts["pipeline"], "seeds"])
    return shown.rename(columns={"label": "pipeline"})


def _figure(path: Path, made: bool, missing: str = "no data") -> str:
    return f"![{path.stem}](figures/{path.name})" if made else f"_({path.stem}: {missing})_"


# ====================================================================== figures
def _alpha_colors(alphas: Sequence[float]) -> dict[float, Any]:
    alphas = sorted(set(alphas))
    cmap = matplotlib.colormaps["viridis"]
    if len(alphas) == 1:
        return {alphas[0]: cmap(0.5)}
    logs = np.log(alphas)
    return {
        a: cmap(0.9 * (la - logs[0]) / (logs[-1] - logs[0]))
        for a, la in zip(alphas, logs, strict=True)
    }


def _alpha_axis(ax: Any, alphas: Sequence[float]) -> None:
    """Log-scale x axis with a tick at every alpha of the sweep, labelled by its value."""
    values = sorted(set(alphas))
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(values, [f"{a:g}" for a in values])
    ax.set_xlabel("init scale α (log scale)")
    ax.grid(alpha=0.3)


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=FIGURE_DPI, bbox_inches="tight")


def plot_spread(spread: pd.DataFrame, path: Path) -> bool:
    """Horizontal bars: spread across alpha per pipeline (pp), bootstrap interval as whiskers."""
    table = spread.dropna(subset=["spread_pp"])
    if table.empty:
        return False
    fig = Figure(figsize=(7, 0.6 * len(table) + 1.6))
    ax = fig.subplots()
    y = np.arange(len(table))[::-1]
    low = (table["spread_pp"] - table["ci_low_pp"]).clip(lower=0).fillna(0)
    high = (table["ci_high_pp"] - table["spread_pp"]).clip(lower=0).fillna(0)
    colors = ["tab:blue" if i else "tab:gray" for i in table["interpolated"]]
    ax.barh(y, table["spread_pp"], xerr=[low, high], color=colors, capsize=4, alpha=0.85)
    for yi, value, whisker in zip(y, table["spread_pp"], high, strict=True):
        ax.text(value + whisker, yi, f"  {value:.1f} pp", va="center", fontsize=9)
    ax.set_yticks(y, table["label"])
    ax.set_xlabel("spread of test accuracy across α (max − min of seed means, pp)")
    ax.set_title(
        "Initialization memory per pipeline\n(blue: every run interpolated; grey: not all)"
    )
    ax.set_xlim(0, max(1.0, float((table["spread_pp"] + high).max()) * 1.3))
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
    return True


def plot_accuracy_vs_alpha(
    accuracy: pd.DataFrame, path: Path, thresholds: Sequence[float] = (INTERPOLATION_THRESHOLD,)
) -> bool:
    """Test accuracy (seed mean ± std) and lowest final train accuracy against alpha, per pipeline;
    ``thresholds``: the interpolation thresholds (fractions) drawn as lines."""
    if accuracy.empty:
        return False
    fig = Figure(figsize=(12, 4.5))
    ax_test, ax_train = fig.subplots(1, 2)
    colors = pipeline_colors(accuracy["pipeline"])  # as in every figure of the folder
    for label, group in accuracy.groupby("label", sort=False):
        color = colors[group["pipeline"].iloc[0]]
        ax_test.errorbar(
            group["alpha"],
            group["test_acc_pct"],
            yerr=group["test_acc_std_pct"].fillna(0),
            marker="o",
            capsize=3,
            color=color,
            label=label,
        )
        ax_train.plot(
            group["alpha"], group["min_train_acc_pct"], marker="s", color=color, label=label
        )
    for threshold in sorted(set(thresholds)):
        pct = 100 * threshold
        ax_train.axhline(pct, color="k", ls="--", lw=1, label=f"{pct:g}% (interpolation)")
    for ax in (ax_test, ax_train):
        _alpha_axis(ax, accuracy["alpha"])
    ax_test.set_ylabel("test accuracy of the validation-selected model (%)")
    ax_test.set_title("Test accuracy vs α (error bars: std over seeds)")
    ax_train.set_ylabel("final train accuracy, lowest seed (%)")
    ax_train.set_title("Did every run fit its training set?")
    ax_test.legend(fontsize=8)
    ax_train.legend(fontsize=8, loc="lower left")
    _save(fig, path)
    return True


def _panel_grid(n: int, width: float = 4.2, height: float = 3.3, max_cols: int = 3):
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def plot_training_curves(runs: pd.DataFrame, epochs: pd.DataFrame, path: Path) -> bool:
    """Per pipeline: train (dashed, un-augmented) and test (solid) accuracy over epochs, per alpha."""
    if epochs.empty or "test_acc" not in epochs:
        return False
    merged = epochs.merge(runs[["hash", "pipeline", "label", "alpha"]], on="hash")
    train_key = "train_eval_acc" if "train_eval_acc" in merged else "train_acc"
    colors = _alpha_colors(merged["alpha"])
    pipelines = list(dict.fromkeys(merged["pipeline"]))
    fig, axes = _panel_grid(len(pipelines))
    for ax, pipeline in zip(axes, pipelines, strict=True):
        part = merged[merged["pipeline"] == pipeline]
        mean = part.groupby(["alpha", "epoch"])[["test_acc", train_key]].mean().reset_index()
        for alpha, curve in mean.groupby("alpha"):
            color = colors[alpha]
            ax.plot(curve["epoch"], 100 * curve["test_acc"], color=color, label=f"α = {alpha:g}")
            ax.plot(curve["epoch"], 100 * curve[train_key], color=color, ls="--", lw=1)
        ax.set_title(part["label"].iloc[0], fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 101)
    axes[0].legend(
        fontsize=8, loc="lower right", title="solid: test, dashed: train", title_fontsize=8
    )
    fig.suptitle("Training curves (seed mean)")
    fig.tight_layout()
    _save(fig, path)
    return True


def _scale_invariant(layers: pd.DataFrame) -> pd.DataFrame:
    if layers.empty or "eff_lr" not in layers:
        return layers.iloc[0:0]
    if "scale_invariant" in layers and layers["scale_invariant"].astype(bool).any():
        return layers[layers["scale_invariant"].astype(bool)]
    return layers


def plot_effective_lr(runs: pd.DataFrame, layers: pd.DataFrame, path: Path) -> bool:
    """Per pipeline: geometric mean over BN-followed convs of lr/|w|^2 over epochs, one line per alpha."""
    chosen = _scale_invariant(layers)
    if chosen.empty:
        return False
    merged = chosen.merge(runs[["hash", "pipeline", "label", "alpha"]], on="hash")
    merged = merged[np.isfinite(merged["eff_lr"]) & (merged["eff_lr"] > 0)]
    if merged.empty:
        return False
    merged = merged.assign(log_eff_lr=np.log10(merged["eff_lr"]))
    colors = _alpha_colors(merged["alpha"])
    pipelines = list(dict.fromkeys(merged["pipeline"]))
    fig, axes = _panel_grid(len(pipelines))
    for ax, pipeline in zip(axes, pipelines, strict=True):
        part = merged[merged["pipeline"] == pipeline]
        mean = part.groupby(["alpha", "epoch"])["log_eff_lr"].mean().reset_index()
        for alpha, curve in mean.groupby("alpha"):
            ax.plot(
                curve["epoch"],
                10 ** curve["log_eff_lr"],
                color=colors[alpha],
                label=f"α = {alpha:g}",
            )
        ax.set_yscale("log")
        ax.set_title(part["label"].iloc[0], fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel("lr / |w|² (geometric mean over layers)")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"Effective learning rate of the {invariant_name(runs)}: separated lines = memory of α"
    )
    fig.tight_layout()
    _save(fig, path)
    return True


def plot_effective_lr_layers(
    runs: pd.DataFrame, layers: pd.DataFrame, pipeline: str, path: Path
) -> bool:
    """One pipeline: lr/|w|^2 per layer over epochs, one panel per alpha (first seed), colour = depth."""
    chosen = _scale_invariant(layers)
    part = runs[runs["pipeline"] == pipeline]
    if chosen.empty or part.empty:
        return False
    first_seed = part.sort_values("seed").drop_duplicates("alpha").sort_values("alpha")
    data = chosen[chosen["hash"].isin(first_seed["hash"])]
    data = data[np.isfinite(data["eff_lr"]) & (data["eff_lr"] > 0)]
    if data.empty:
        return False
    names = list(dict.fromkeys(data["layer"]))
    cmap = matplotlib.colormaps["plasma"]
    fig, axes = _panel_grid(len(first_seed), width=3.6, height=3.0, max_cols=4)
    low, high = data["eff_lr"].min(), data["eff_lr"].max()
    for ax, (_, run) in zip(axes, first_seed.iterrows(), strict=True):
        for i, name in enumerate(names):
            curve = data[(data["hash"] == run["hash"]) & (data["layer"] == name)]
            color = cmap(0.85 * i / max(1, len(names) - 1))
            ax.plot(curve["epoch"], curve["eff_lr"], color=color, lw=1.2, label=name)
        ax.set_yscale("log")
        ax.set_ylim(low / 1.5, high * 1.5)
        ax.set_title(f"α = {run['alpha']:g} (seed {run['seed']})", fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("lr / |w|²")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        title="layer (input → output)",
    )
    fig.suptitle(f"Per-layer effective learning rate — {part['label'].iloc[0]}")
    fig.tight_layout()
    _save(fig, path)
    return True


__all__ = [
    "plot_accuracy_vs_alpha",
    "plot_effective_lr",
    "plot_effective_lr_layers",
    "plot_spread",
    "plot_training_curves",
    "write_report",
]
