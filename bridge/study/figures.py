"""Figures of the unit-of-forgetting document (matplotlib's object API: no pyplot, no global state).

* :func:`plot_units`: each memory against each unit of forgetting, one line per pipeline;
* :func:`plot_predicted`: measured against predicted forgetting times, log-log;
* :func:`plot_groups`: spread (with its permutation null) and norm memory per parameter group;
* :func:`plot_alpha_grid`: norm memory (with the law's) and the test-accuracy difference against
  ln(alpha), for the pipelines with three or more alphas.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from initmem.empirical.legend import pipeline_colors

#: Resolution of the published PNGs (small files under docs/).
DPI = 90


def _figure(width: float, height: float):
    # deferred: matplotlib loads only to draw
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _colors(n: int):
    # deferred: matplotlib loads only to draw
    from matplotlib import colormaps

    # tab20, then tab20b: 40 distinct colours before any repeats (a 24-pipeline design)
    palette = [colormaps["tab20"](i) for i in range(20)] + [
        colormaps["tab20b"](i) for i in range(20)
    ]
    return [palette[i % len(palette)] for i in range(n)]


#: The x label of each unit's panel: what it counts, with its unit (the sums are dimensionless).
UNIT_AXIS_LABELS = {
    "epochs": "epochs",
    "steps": "optimizer steps",
    "explicit": "explicit: Σ lr·(l2 + wd) (dimensionless)",
    "sgd_noise": "sgd_noise: Σ lr²/B (dimensionless)",
    "adam": "adam: Σ lr²·d/|w₀|² (dimensionless)",
    "accumulated": "accumulated regularization (dimensionless)",
}
#: The y label of each memory's row, with its unit.
MEMORY_AXIS_LABELS = {"norm": "norm memory (dimensionless)", "spread": "spread (pp)"}


def readable_axis(ax, values, which: str = "x") -> None:
    """Ticks on the ``which`` ("x" or "y") axis of ``ax`` that a reader can read over the
    positive ``values``: at least 3 labelled ticks, written as plain numbers.

    Under a decade the axis is linear (a log axis would show one tick); over it, log with ticks at
    1, 2, 5 x 10^k (one to two decades), 1, 3 x 10^k (two to three) or every power of 10 (more): any
    range of the data then holds at least 3 of them (the widest gap between 3 consecutive ticks is
    a factor 5, 10 and 100 respectively).
    """
    # deferred: matplotlib loads only to draw
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return
    decades = np.log10(values.max() / values.min())
    if decades < 1:
        axis.set_major_locator(MaxNLocator(nbins=4, min_n_ticks=3))
        return
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    subs = (1.0, 2.0, 5.0) if decades < 2 else (1.0, 3.0) if decades < 3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_formatter(NullFormatter())


def units_figure(study):
    """The collapse figure (a :class:`matplotlib.figure.Figure`, or None without unit points).

    Rows: memories (one y axis per row, shared); columns: units, the deciding pair first (epochs,
    accumulated); each panel's x axis through :func:`readable_axis`, labelled with its unit.
    """
    # matplotlib (through the bridge's plots) only where a figure is drawn
    from initmem.bridge.plots import plot_memory_lines
    from initmem.theory.units import UNITS

    points = study.bridge.unit_points
    if points.empty:
        return None
    memories = [m for m in ("norm", "spread") if (points["memory"] == m).any()]
    order = ["epochs", "accumulated"] + [u for u in UNITS if u not in ("epochs", "accumulated")]
    units = [u for u in order if u in points.columns and points[u].notna().any()]
    labels = study.design.set_index("pipeline")["variant"].to_dict()
    colors = pipeline_colors(study.bridge.runs["pipeline"])  # as in every figure of the folder
    table = (
        study.bridge.units.set_index(["memory", "unit"]) if not study.bridge.units.empty else None
    )
    fig = _figure(2.8 * len(units), 2.6 * len(memories) + 0.8)
    axes = fig.subplots(len(memories), len(units), squeeze=False, sharey="row")
    for row, memory in enumerate(memories):
        part = points[points["memory"] == memory]
        for col, unit in enumerate(units):
            ax = axes[row, col]
            data = part[part[unit] > 0]  # log axis: the init (u = 0) is left out
            plot_memory_lines(ax, data, unit, colors, labels, ms=2, lw=1)
            readable_axis(ax, data[unit])
            score = np.nan
            if table is not None and (memory, unit) in table.index:
                score = table.loc[(memory, unit), "r2_cv"]
            ax.set_title(f"{unit} (loo R² {score:.2f})", fontsize=8)
            ax.set_xlabel(UNIT_AXIS_LABELS.get(unit, unit), fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel(MEMORY_AXIS_LABELS[memory], fontsize=8)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=6, fontsize=6)
    return fig


def plot_units(study, path: Path) -> bool:
    """Save :func:`units_figure` to ``path``; False (nothing written) without unit points."""
    fig = units_figure(study)
    if fig is None:
        return False
    fig.savefig(path, dpi=DPI)
    return True


def plot_predicted(study, path: Path) -> bool:
    """Measured against predicted norm-memory forgetting time (steps), law and accumulated."""
    pipelines = study.bridge.pipelines
    if pipelines.empty or "tau_steps" not in pipelines:
        return False
    predictors = [
        ("pred_tau_fit_steps", "normalized-weight law"),
        ("accumulated_steps_to_1", "accumulated regularization reaches 1"),
    ]
    predictors = [p for p in predictors if p[0] in pipelines]
    if not predictors:
        return False
    labels = study.design.set_index("pipeline")["variant"].to_dict()
    fig = _figure(4.2 * len(predictors) + 1.6, 3.8)
    axes = fig.subplots(1, len(predictors), squeeze=False)[0]
    colors = _colors(len(pipelines))
    for ax, (column, name) in zip(axes, predictors, strict=True):
        lows, highs = [], []
        for i, (_, row) in enumerate(pipelines.iterrows()):
            x, y = float(row[column]), float(row["tau_steps"])
            if not (np.isfinite(x) and np.isfinite(y) and x > 0 and y > 0):
                continue
            forgotten = bool(row.get("forgotten", False))
            ax.plot(
                x,
                y,
                "o" if forgotten else "^",
                color=colors[i],
                mfc=colors[i] if forgotten else "none",
                label=labels.get(row["pipeline"], row["label"]),
            )
            lows.append(min(x, y))
            highs.append(max(x, y))
        if lows:
            span = [min(lows) / 2, max(highs) * 2]
            ax.plot(span, span, "k:", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"predicted time (steps): {name}", fontsize=8)
        ax.set_ylabel("measured norm-memory time (steps)", fontsize=8)
        ax.tick_params(labelsize=7)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(  # beside the panels: inside, it hid points of a 24-pipeline design
        handles,
        names,
        loc="outside right upper",
        fontsize=6,
        title="▲: not forgotten (lower bound)",
        title_fontsize=6,
    )
    fig.savefig(path, dpi=DPI)
    return True


def plot_groups(study, path: Path) -> bool:
    """Spread per group (bars, 95% interval) with its null (dots); norm memory of the group's layers."""
    groups = study.groups
    if groups.empty:
        return False
    fig = _figure(8.5, 3.4)
    left, right = fig.subplots(1, 2)
    families = list(dict.fromkeys(groups["family"]))
    width = 0.8 / max(len(families), 1)
    names = list(dict.fromkeys(groups["group"]))
    x = np.arange(len(names))
    colors = _colors(len(families))
    for k, family in enumerate(families):
        part = groups[groups["family"] == family].set_index("group").reindex(names)
        pos = x + (k - (len(families) - 1) / 2) * width
        spread = part["spread_pp"].to_numpy(dtype=float)
        err = np.vstack(
            [
                spread - part["spread_lo"].to_numpy(dtype=float),
                part["spread_hi"].to_numpy(dtype=float) - spread,
            ]
        )
        left.bar(pos, spread, width, yerr=np.abs(np.nan_to_num(err)), color=colors[k], label=family)
        left.plot(pos, part["null_mean_pp"].to_numpy(dtype=float), "k_", ms=10)
        memory = part["norm_memory_end"].to_numpy(dtype=float)
        merr = np.vstack(
            [
                memory - part["norm_lo"].to_numpy(dtype=float),
                part["norm_hi"].to_numpy(dtype=float) - memory,
            ]
        )
        right.bar(
            pos, memory, width, yerr=np.abs(np.nan_to_num(merr)), color=colors[k], label=family
        )
    for ax, title in (
        (left, "test-accuracy spread (pp); —: permutation null"),
        (right, "norm memory at the end"),
    ):
        ax.set_xticks(x, names)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
    left.legend(fontsize=6)
    fig.savefig(path, dpi=DPI)
    return True


def plot_alpha_grid(study, path: Path) -> bool:
    """Norm memory at the end (95% interval) and the law's against ln(alpha / alpha_low), one colour
    per pipeline with three or more alphas; the test-accuracy difference beside it."""
    frame = getattr(study, "alpha_grid", None)
    if frame is None or frame.empty:
        return False
    fig = _figure(8.5, 3.2)
    left, right = fig.subplots(1, 2)
    labels = list(dict.fromkeys(frame["label"]))
    for color, label in zip(_colors(len(labels)), labels, strict=True):
        part = frame[frame["label"] == label].sort_values("alpha")
        x = part["ln_ratio"].to_numpy(dtype=float)
        for ax, (value, lo, hi) in (
            (left, ("norm_end", "norm_lo", "norm_hi")),
            (right, ("diff_pp", "diff_lo", "diff_hi")),
        ):
            y = part[value].to_numpy(dtype=float)
            err = np.abs(
                np.nan_to_num(
                    np.vstack(
                        [y - part[lo].to_numpy(dtype=float), part[hi].to_numpy(dtype=float) - y]
                    )
                )
            )
            ax.errorbar(x, y, yerr=err, color=color, marker="o", ms=4, capsize=2, label=label)
        left.plot(x, part["law_end"].to_numpy(dtype=float), ls="--", color=color, lw=1)
    left.axhline(np.exp(-1), color="k", lw=0.6, ls=":")
    right.axhline(0, color="k", lw=0.6)
    left.set_title("norm memory at the end (- - the law; ··· 1/e)", fontsize=8)
    right.set_title("test accuracy, alpha minus the smallest (pp)", fontsize=8)
    for ax in (left, right):
        ax.set_xlabel("ln(alpha / smallest alpha)", fontsize=8)
        ax.tick_params(labelsize=7)
    left.legend(fontsize=6)
    fig.savefig(path, dpi=DPI)
    return True


def save_study_figures(study, folder: Path) -> dict[str, Path]:
    """Write the figures into ``folder``; returns ``{name: path}`` of those drawn."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, draw in (
        ("collapse", plot_units),
        ("predicted", plot_predicted),
        ("groups", plot_groups),
        ("alphas", plot_alpha_grid),
    ):
        path = folder / f"{name}.png"
        if draw(study, path):
            out[name] = path
    return out


__all__ = [
    "DPI",
    "MEMORY_AXIS_LABELS",
    "UNIT_AXIS_LABELS",
    "plot_alpha_grid",
    "plot_groups",
    "plot_predicted",
    "plot_units",
    "readable_axis",
    "save_study_figures",
    "units_figure",
]
