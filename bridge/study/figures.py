"""Figures of the unit-of-forgetting document (matplotlib's object API: no pyplot, no global state).

* :func:`plot_units`: each memory against each unit of forgetting, one line per pipeline;
* :func:`plot_predicted`: measured against predicted forgetting times, log-log;
* :func:`plot_groups`: spread (with its permutation null) and norm memory per parameter group.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

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


def plot_units(study, path: Path) -> bool:
    """Rows: memories; columns: units. The deciding pair first (epochs, accumulated)."""
    # deferred: matplotlib loads only to draw
    from matplotlib.ticker import NullFormatter

    from initmem.bridge.plots import plot_memory_lines
    from initmem.theory.units import UNITS

    points = study.bridge.unit_points
    if points.empty:
        return False
    memories = [m for m in ("norm", "spread") if (points["memory"] == m).any()]
    order = ["epochs", "accumulated"] + [u for u in UNITS if u not in ("epochs", "accumulated")]
    units = [u for u in order if u in points.columns and points[u].notna().any()]
    labels = study.design.set_index("pipeline")["variant"].to_dict()
    pipelines = list(dict.fromkeys(points["pipeline"]))
    colors = dict(zip(pipelines, _colors(len(pipelines)), strict=True))
    table = (
        study.bridge.units.set_index(["memory", "unit"]) if not study.bridge.units.empty else None
    )
    fig = _figure(2.6 * len(units), 2.4 * len(memories) + 0.6)
    axes = fig.subplots(len(memories), len(units), squeeze=False)
    for row, memory in enumerate(memories):
        part = points[points["memory"] == memory]
        for col, unit in enumerate(units):
            ax = axes[row, col]
            data = part[part[unit] > 0]  # log axis: the init (u = 0) is left out
            plot_memory_lines(ax, data, unit, colors, labels, ms=2, lw=1)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            score = np.nan
            if table is not None and (memory, unit) in table.index:
                score = table.loc[(memory, unit), "r2_cv"]
            ax.set_title(f"{unit} (loo R² {score:.2f})", fontsize=8)
            ax.tick_params(labelsize=7)
            if col == 0:
                ax.set_ylabel("norm memory" if memory == "norm" else "spread (pp)", fontsize=8)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=6, fontsize=6)
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


def save_study_figures(study, folder: Path) -> dict[str, Path]:
    """Write the three figures into ``folder``; returns ``{name: path}`` of those drawn."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, draw in (
        ("collapse", plot_units),
        ("predicted", plot_predicted),
        ("groups", plot_groups),
    ):
        path = folder / f"{name}.png"
        if draw(study, path):
            out[name] = path
    return out


__all__ = ["DPI", "plot_groups", "plot_predicted", "plot_units", "save_study_figures"]
