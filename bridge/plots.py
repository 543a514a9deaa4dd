"""Figures of the bridge (PNG): the ones a paper would print.

* ``norm_memory.png``: the norm memory of the scaled BN-followed convs (layer mean) against steps, one
  colour per pipeline: measured (seed mean, band over seeds) and the normalized-weight law (dashed).
* ``collapse.png``: the memory against epochs and against accumulated regularization, side by side:
  the unit that collapses the pipelines onto one curve is the unit of forgetting.
* ``function_memory.png``: accuracy spread (pp) and prediction disagreement against steps.
* ``measured_vs_predicted.png``: measured against predicted forgetting times, log-log; open triangles
  are lower bounds (not forgotten within the run).
* ``phase_lr_decay.png``, ``phase_lr_batch_size.png``: spread heat maps with the boundary where
  accumulated regularization reaches 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from initmem.bridge.units import UNIT_DEFINITIONS, phase_boundary, run_config
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from initmem.empirical.legend import invariant_name, pipeline_colors

FIGURE_DPI = 120


def save_figures(report, out_dir: str | Path) -> list[Path]:
    """Write every figure the report has data for into ``out_dir``; return their paths.

    Figures are :class:`matplotlib.figure.Figure` objects saved with ``fig.savefig``: no pyplot, so
    the caller's backend and pyplot's figure list are left as they were.
    """
    out = Path(out_dir)
    made = []
    for name, plot in (
        ("norm_memory.png", plot_norm_memory),
        ("collapse.png", plot_collapse),
        ("function_memory.png", plot_function_memory),
        ("measured_vs_predicted.png", plot_measured_vs_predicted),
    ):
        if plot(report, out / name):
            made.append(out / name)
    for name, table in report.phase.items():
        path = out / f"phase_{name}.png"
        if plot_phase(report, table, path):
            made.append(path)
    return made


def _colors(report) -> dict:
    """One colour per pipeline, the same in every figure of the folder (the report's, the study's)."""
    return pipeline_colors(report.runs["pipeline"])


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=FIGURE_DPI)


def _labels(report) -> dict:
    return report.runs.drop_duplicates("pipeline").set_index("pipeline")["label"].to_dict()


def plot_norm_memory(report, path: Path) -> bool:
    """Measured (solid, band over seeds) and predicted (dashed) norm memory against steps."""
    curves = report.norm_curves
    if curves.empty:
        return False
    curves = curves[curves["layer"] == SCALE_INVARIANT_MEAN]
    if curves.empty:
        return False
    labels = _labels(report)
    colors = _colors(report)
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for pipeline, group in curves.groupby("pipeline", sort=False):
        stats = group.groupby("step")["memory"].agg(["mean", "min", "max"])
        color = colors[pipeline]
        ax.plot(stats.index, stats["mean"], color=color, label=labels.get(pipeline, pipeline))
        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.2, lw=0)
        law = report.predicted_curves
        if not law.empty:
            law = law[(law["pipeline"] == pipeline) & (law["layer"] == SCALE_INVARIANT_MEAN)]
            ax.plot(law["step"], law["memory"], color=color, ls="--", lw=1)
    ax.axhline(np.exp(-1), color="grey", lw=0.6, ls=":")
    ax.set_xlabel("optimizer steps")
    ax.set_ylabel("norm memory  ln(|w|_hi/|w|_lo) / ln(a_hi/a_lo)")
    ax.set_title(f"norm memory of the {invariant_name(report.runs)} (dashed: law; dotted: 1/e)")
    ax.legend(fontsize=7)
    _save(fig, path)
    return True


def plot_collapse(report, path: Path) -> bool:
    """Each memory against epochs (left) and accumulated regularization (right)."""
    points = report.unit_points
    if points.empty:
        return False
    labels = _labels(report)
    memories = [m for m in ("norm", "spread") if (points["memory"] == m).any()]
    colors = _colors(report)
    fig = Figure(figsize=(10, 3.6 * len(memories)))
    axes = fig.subplots(len(memories), 2, squeeze=False)
    r2 = report.units.set_index(["memory", "unit"])["r2"] if not report.units.empty else {}
    for row, memory in enumerate(memories):
        part = points[points["memory"] == memory]
        for col, unit in enumerate(("epochs", "accumulated")):
            ax = axes[row, col]
            if unit != "epochs":
                part_unit = part[part[unit] > 0]  # a log axis: the init (u = 0) is left out
            else:
                part_unit = part
            plot_memory_lines(ax, part_unit, unit, colors, labels, ms=3)
            if unit != "epochs" and not part_unit.empty:
                ax.set_xscale("log")
            score = r2.get((memory, unit), np.nan) if len(r2) else np.nan
            ax.set_title(f"{memory} memory vs {unit} (R^2 = {score:.2f})")
            ax.set_xlabel(UNIT_DEFINITIONS[unit])
            ax.set_ylabel("norm memory" if memory == "norm" else "test-accuracy spread (pp)")
    axes[0, 0].legend(fontsize=7)
    _save(fig, path)
    return True


def plot_memory_lines(ax, points: pd.DataFrame, unit: str, colors: dict, labels: dict, **style):
    """One line per pipeline of ``points`` (``pipeline``, ``value`` and the ``unit`` column, as in
    ``BridgeReport.unit_points``): the memory against the unit, coloured and labelled per pipeline.
    ``style``: extra keywords for ``ax.plot`` (marker size, line width)."""
    for pipeline, group in points.groupby("pipeline", sort=False):
        group = group.sort_values(unit)
        ax.plot(
            group[unit],
            group["value"],
            marker="o",
            color=colors[pipeline],
            label=labels.get(pipeline, pipeline),
            **style,
        )


def plot_function_memory(report, path: Path) -> bool:
    """Accuracy spread and prediction disagreement against steps, one colour per pipeline."""
    spread = report.spread_curves
    if spread.empty:
        return False
    labels = _labels(report)
    colors = _colors(report)
    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, 2)
    for pipeline, group in spread.groupby("pipeline", sort=False):
        axes[0].plot(
            group["step"],
            group["spread_pp"],
            marker="o",
            ms=3,
            color=colors[pipeline],
            label=labels.get(pipeline, pipeline),
        )
    axes[0].set_xlabel("optimizer steps")
    axes[0].set_ylabel("test-accuracy spread across alphas (pp)")
    dis = report.disagreement_curves
    if not dis.empty:
        step_of = report.spread_curves.groupby(["pipeline", "epoch"])["step"].first()
        for pipeline, group in dis.groupby("pipeline", sort=False):
            mean = group.groupby("epoch")["disagreement"].mean()
            steps = step_of.reindex(list(zip([pipeline] * len(mean), mean.index, strict=True)))
            axes[1].plot(
                steps.to_numpy(), mean.to_numpy(), marker="o", ms=3, color=colors[pipeline]
            )
    axes[1].set_xlabel("optimizer steps")
    axes[1].set_ylabel("prediction disagreement between alphas")
    axes[0].legend(fontsize=7)
    _save(fig, path)
    return True


def plot_measured_vs_predicted(report, path: Path) -> bool:
    """Measured against law-predicted norm forgetting times (log-log; per layer faint)."""
    if report.norm_times.empty or report.predicted.empty:
        return False
    both = report.norm_times.merge(report.predicted, on=["pipeline", "layer"])
    both = both[np.isfinite(both["tau_fit_steps"]) & np.isfinite(both["pred_tau_fit_steps"])]
    both = both[(both["tau_fit_steps"] > 0) & (both["pred_tau_fit_steps"] > 0)]
    if both.empty:
        return False
    labels = _labels(report)
    colors = _colors(report)
    fig = Figure(figsize=(5.2, 4.8))
    ax = fig.subplots()
    for _, row in both.iterrows():
        mean = row["layer"] == SCALE_INVARIANT_MEAN
        ax.scatter(
            row["pred_tau_fit_steps"],
            row["tau_fit_steps"],
            marker="o" if row["forgotten"] else "^",
            facecolors=colors[row["pipeline"]] if row["forgotten"] else "none",
            edgecolors=colors[row["pipeline"]],
            s=50 if mean else 14,
            alpha=1.0 if mean else 0.45,
            label=labels.get(row["pipeline"]) if mean else None,
        )
    for span in both["t_span_steps"].unique():
        ax.axhline(span, color="grey", lw=0.6, ls="--")
    lo = min(both["pred_tau_fit_steps"].min(), both["tau_fit_steps"].min())
    hi = max(both["pred_tau_fit_steps"].max(), both["tau_fit_steps"].max())
    line = np.geomspace(lo / 2, hi * 2, 10)
    ax.plot(line, line, color="grey", lw=0.8, ls=":", label="measured = predicted")
    fits = report.fit
    # the line fits the pipelines forgotten within the run only: censored times are lower bounds
    # and their extrapolated fits are not measurements
    row = fits[
        (fits["measured"] == "norm")
        & (fits["predicted"] == "law")
        & (fits["points"] == "forgotten")
        & (fits["n"] >= 3)
    ]
    if not row.empty and np.isfinite(row["slope"].iloc[0]):
        slope, intercept = row["slope"].iloc[0], row["intercept"].iloc[0]
        ax.plot(
            line,
            np.exp(intercept) * line**slope,
            color="black",
            lw=1,
            label=f"fit over the {row['n'].iloc[0]} forgotten: slope {slope:.2f}, "
            f"R^2 {row['r2'].iloc[0]:.2f}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted forgetting time (steps, normalized-weight law)")
    ax.set_ylabel("measured forgetting time (steps)")
    ax.set_title(
        "big: layer mean, small: layers; open ^: not forgotten within the run\n"
        "(extrapolated fit; dashed: run length)",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    _save(fig, path)
    return True


def _positions(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Place ``grid`` values on the index axis of the sorted category ``values`` (log-linear)."""
    values = np.asarray(values, dtype=float)
    stand_in = _zero_stand_in(values)
    logs = np.log(np.where(values > 0, values, stand_in))
    idx = np.arange(len(values), dtype=float)
    g = np.log(np.asarray(grid, dtype=float))
    if len(values) == 1:
        return np.zeros_like(g)
    inside = np.interp(g, logs, idx)
    low = (g - logs[0]) / (logs[1] - logs[0])
    high = len(values) - 1 + (g - logs[-1]) / (logs[-1] - logs[-2])
    return np.where(g < logs[0], low, np.where(g > logs[-1], high, inside))


def _zero_stand_in(values: np.ndarray) -> float:
    positive = np.sort(values[values > 0])
    if positive.size >= 2:
        return positive[0] ** 2 / positive[1]
    return positive[0] / 10 if positive.size else 1.0


def plot_phase(report, table: pd.DataFrame, path: Path) -> bool:
    """Heat map of the spread with the accumulated-regularization = 1 boundary, per optimizer."""
    if table.empty:
        return False
    x_name, y_name = table["x_name"].iloc[0], table["y_name"].iloc[0]
    optimizers = list(table["optimizer"].unique())
    fig = Figure(figsize=(5.2 * len(optimizers), 4.4))
    axes = fig.subplots(1, len(optimizers), squeeze=False)
    pipelines = report.pipelines.set_index("pipeline")
    for ax, optimizer in zip(axes[0], optimizers, strict=True):
        part = table[table["optimizer"] == optimizer]
        grid = part.pivot_table(index="y", columns="x", values="spread_pp")
        xs, ys = grid.columns.to_numpy(dtype=float), grid.index.to_numpy(dtype=float)
        image = ax.imshow(grid.to_numpy(), origin="lower", aspect="auto", cmap="viridis")
        for (i, j), value in np.ndenumerate(grid.to_numpy()):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.1f}", ha="center", va="center", color="white", fontsize=8)
        ax.set_xticks(range(len(xs)), [f"{v:g}" for v in xs])
        ax.set_yticks(range(len(ys)), [f"{v:g}" for v in ys])
        ax.set_xlabel(x_name)
        ax.set_ylabel("l2 + weight_decay" if y_name == "decay" else y_name)
        fig.colorbar(image, ax=ax, label="test-accuracy spread (pp)")
        first = report.runs[report.runs["optimizer"] == optimizer].iloc[0]
        inv = float(pipelines["inv_init_sq_per_coord"].get(first["pipeline"], np.nan))
        if min(len(xs), len(ys)) < 2:  # one row or column: no boundary to draw
            ax.set_title(f"{optimizer}: spread", fontsize=9)
            continue
        x_grid = _fine_grid(xs, x_name)
        y_grid = _fine_grid(ys, y_name)
        values = phase_boundary(run_config(first), x_name, y_name, x_grid, y_grid, inv)
        if np.nanmin(values) < 1 < np.nanmax(values):
            ax.contour(
                _positions(xs, x_grid),
                _positions(ys, y_grid),
                values,
                levels=[1.0],
                colors="white",
                linestyles="--",
            )
        ax.set_title(f"{optimizer}: spread; dashed = accumulated regularization 1", fontsize=9)
    _save(fig, path)
    return True


def _fine_grid(values: np.ndarray, name: str) -> np.ndarray:
    low = _zero_stand_in(values) if np.any(values <= 0) else values.min()
    grid = np.geomspace(low / 1.5, values.max() * 1.5, 60)
    if name == "batch_size":
        grid = np.unique(np.maximum(np.round(grid), 1.0))
    return grid


__all__ = [
    "plot_collapse",
    "plot_function_memory",
    "plot_measured_vs_predicted",
    "plot_norm_memory",
    "plot_phase",
    "save_figures",
]
