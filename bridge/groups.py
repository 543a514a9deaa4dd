"""One table per sweep: each parameter group's predicted and measured memory of alpha, side by side.

Setting. Any finished runs (``load_sweep(DIR)`` or ``load_runs([RUN, ...])``) of any model, a
plug-in included, with at least two alphas per pipeline and per-layer logs. For each pipeline and
each parameter group of its model (``scale_invariant``, ``residual_stream``, ``head``, ``other``;
the groups of :mod:`initmem.bridge.preregister`), the row holds:

- the group's size (``parameters``) and the mechanism the theory names for it (P1 normalized-weight
  laws, P2 the lazy (NTK) memory term, P3 the logit-scale laws; :func:`~.preregister.predict_groups`);
- the predicted forgetting step ``predicted_step`` (the first step at which the law's memory is at
  most 1/e, the one decision of :mod:`initmem.theory.criterion`, optimizer steps; ``inf``: not within
  the run) and the law's own memory at the end of the run ``predicted_memory_end`` (P1: the
  normalized-weight laws per layer, layer mean, with G probed at both alphas before training,
  :mod:`initmem.bridge.probe`; P2: ``prod_t (1 - kappa_t)^L`` over the schedule, (L1) of
  :mod:`initmem.theory.ntk`; P3 gives a time only, so its memory at the end is blank).
  ``prediction_source`` says where the numbers come from, P1's gradient scale by the ``g_source``
  the prediction records;
- the measured norm memory (M4 of :mod:`initmem.empirical.memory`) of the group's scaled weights:
  ``measured_memory_end``, at the last evaluation (mean over the group's layers, then over seeds;
  ``residual_stream``: its one joint entry of the layer logs),
  and ``measured_step``, the first logged step forgotten by the one rule of
  :mod:`initmem.theory.criterion` (seed-mean |memory| at most 1/e, not reversed; NaN: not
  within the run);
- ``agreement``: ``agrees`` when the prediction (forgotten within the run or not) and the
  measurement (memory at the end at most 1/e or not) say the same, ``disagrees`` otherwise,
  ``cannot tell`` (with ``reason``) when either side has no number.

:func:`group_sentences` states each disagreement and each agreement with its numbers;
:func:`write_group_section` adds the table (Markdown, with its legend; ``groups.csv``) to a report.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.measure import decide_seeds
from initmem.empirical import curves, markdown, memory, tables
from initmem.empirical.config import RESIDUAL_STREAM_LAYER, RunConfig

#: Groups of the table, in order, and what each name means in a sentence.
GROUP_NAMES = {
    "scale_invariant": "scale-invariant (normalized) weights",
    "residual_stream": "the residual stream (embedding and residual writers, joint norm)",
    "head": "the head (last linear layer)",
    "other": "the other parameters",
}
#: The mechanism codes of :mod:`initmem.bridge.preregister`, spelled out (the legend).
MECHANISMS = {
    "P1": "normalized-weight laws: alpha sets lr/|w|^2 only, forgotten when those of the alphas meet",
    "P2": "lazy (NTK) memory term: kept by gradient flow, contracted by weight decay",
    "P3": "logit-scale laws of the head under cross-entropy",
}
#: Columns of the Markdown table (the CSV has every column).
SHOWN = {
    "label": "pipeline",
    "group": "group",
    "parameters": "parameters",
    "mechanism": "mechanism",
    "predicted_memory_end": "predicted memory at end",
    "predicted_step": "predicted forgetting step",
    "measured_memory_end": "measured memory at end",
    "measured_step": "measured forgetting step",
    "agreement": "agreement",
}


def group_table(
    runs: pd.DataFrame, layers: pd.DataFrame | None = None, *, probe_size: int = 16
) -> pd.DataFrame:
    """The table of the module docstring, one row per (pipeline, group). ``layers``: the runs'
    :func:`~initmem.empirical.tables.load_layers` (read when not given)."""
    # deferred: the predictions build the model and read the data (torch)
    from initmem.bridge.preregister import predict_groups
    from initmem.empirical.models import default_model, parameter_groups

    done = tables.finished_runs(runs)
    if layers is None:
        layers = tables.load_layers(done)
    try:
        norm = curves.norm_memory_curves(done, layers)
    except curves.MemoryDataError:
        norm = pd.DataFrame()
    cache: dict = {}  # the NTK per model, draw and data; the G probes per model, data and batch
    probes: dict = {}
    rows = []
    for pipeline, group in done.groupby("pipeline", sort=False):
        config = _config(group.iloc[0])
        predicted = predict_groups(
            config, probe_size=probe_size, memory_cache=cache, probe_cache=probes
        ).table
        head = set(parameter_groups(default_model(config))["head"])
        measured = _measured(norm[norm["pipeline"] == pipeline] if len(norm) else norm, head)
        for _, row in predicted.iterrows():
            steps, total = float(row["steps"]), float(config.total_steps)
            memory_end = float(row["memory_end"])  # the law's own memory at the run's end
            seen = measured.get(row["group"], (math.nan, math.nan))
            agreement, reason = _agreement(memory_end, steps, total, seen[0])
            rows.append(
                {
                    "pipeline": pipeline,
                    "label": str(group["label"].iloc[0]),
                    "group": row["group"],
                    "parameters": int(row["parameters"]),
                    "mechanism": str(row["mechanism"]),
                    "total_steps": total,
                    "predicted_memory_end": memory_end,
                    "predicted_step": steps,
                    "prediction_source": _source(row["group"], str(row["g_source"])),
                    "law": str(row["law"]),
                    "measured_memory_end": seen[0],
                    "measured_step": seen[1],
                    "agreement": agreement,
                    "reason": reason,
                }
            )
    return pd.DataFrame(rows)


def _config(row: pd.Series) -> RunConfig:
    """The run config of a row of the runs table (its config columns)."""
    values = {name: _plain(row[name]) for name in RunConfig.field_names() if name in row.index}
    return RunConfig.from_dict(values, validate=False)


def _plain(value):
    """A table cell as the config holds it: tuples as lists, numpy scalars as Python's, NaN as None."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _measured(norm: pd.DataFrame, head: set[str]) -> dict[str, tuple[float, float]]:
    """Per group: (norm memory at the last evaluation, first step forgotten by the one rule,
    :func:`~initmem.bridge.measure.decide_seeds`; NaN: not within the run) of its scaled layers."""
    if norm.empty:
        return {}
    layers = norm[norm["layer"] != curves.SCALE_INVARIANT_MEAN].copy()
    layers["group"] = np.where(
        layers["scale_invariant"].astype(bool),
        "scale_invariant",
        np.where(
            layers["layer"] == RESIDUAL_STREAM_LAYER,  # the joint entry: its own group, not "other"
            "residual_stream",
            np.where(layers["layer"].isin(head), "head", "other"),
        ),
    )
    out = {}
    for name, part in layers.groupby("group"):
        per_seed = part.groupby(["seed", "step"])["memory"].mean().reset_index()
        last = per_seed[per_seed["step"] == per_seed["step"].max()]["memory"].mean()
        table = per_seed.pivot_table(index="seed", columns="step", values="memory", dropna=False)
        steps = table.columns.to_numpy(dtype=np.float64)
        decision = decide_seeds(steps - steps.min(), table.to_numpy())  # the one rule
        first = steps.min() + decision.step if np.isfinite(decision.step) else math.nan
        out[name] = (float(last), float(first))
    return out


def _source(group: str, g_source: str) -> str:
    """Where a group's prediction comes from: P1's gradient scale as the prediction names it."""
    if group in ("scale_invariant", "residual_stream"):
        return f"before training: the normalized-weight laws with G from {g_source}"
    if group == "head":
        return "before training: the logit-scale law of the config"
    return "before training: the config's decay over its schedule, depth measured on the model (L1)"


def _agreement(
    predicted_memory: float, predicted_step: float, total_steps: float, measured: float
) -> tuple[str, str]:
    """Whether the prediction (forgotten within the run: the law's memory at the end at most 1/e,
    or, for a law that gives a time only, its step within the run) and the measurement say the
    same."""
    level = memory.FORGOTTEN_LEVEL
    if np.isfinite(predicted_memory):
        forgets = predicted_memory <= level
    elif not np.isnan(predicted_step):
        forgets = predicted_step <= total_steps
    else:
        return "cannot tell", "the theory has no closed form for this group"
    if not np.isfinite(measured):
        return "cannot tell", "no scaled weight of this group in the layer logs"
    if forgets == (measured <= level):
        return "agrees", "both forgotten" if measured <= level else "both kept"
    return "disagrees", "forgotten as predicted" if forgets else "kept, not predicted"


def group_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per row with both numbers: what the law predicted at the end, what was measured."""
    sentences = []
    for _, row in table.iterrows():
        if row["agreement"] not in ("agrees", "disagrees"):
            continue
        verb = {"agrees": "agreeing", "disagrees": "disagreeing"}[row["agreement"]]
        if np.isfinite(row["predicted_memory_end"]):
            said = f"memory {row['predicted_memory_end']:.2g} at the end of the run"
        elif np.isfinite(row["predicted_step"]):  # a law that gives a time only (P3)
            said = f"forgetting at step {row['predicted_step']:.0f}"
        else:
            said = "no forgetting within the run"
        sentences.append(
            f"{row['label']}, {GROUP_NAMES.get(row['group'], row['group'])}: the law predicted "
            f"{said} (the run ends at step {row['total_steps']:.0f}); "
            f"{row['measured_memory_end']:.2f} was measured at the end, "
            f"{verb} on whether alpha is forgotten (memory <= 1/e)."
        )
    return sentences


def legend() -> list[str]:
    """The table's legend: the mechanism codes and the columns, spelled out."""
    return [
        "Mechanisms: " + "; ".join(f"{code}: {text}" for code, text in MECHANISMS.items()) + ".",
        "Memory: the norm memory (log-ratio of the group's weight norms between the largest and "
        "smallest alpha over its value at init; 1 = as at init, 0 = forgotten); forgetting step: "
        "when it reaches 1/e (predicted: the e-fold time; memory at end = exp(-steps/that time)). "
        "Every column, the laws and the prediction sources: groups.csv.",
    ]


def group_markdown(table: pd.DataFrame) -> list[str]:
    """The Markdown section: the table (at most :data:`SHOWN` columns), its legend, the sentences."""
    lines = ["## Memory per parameter group: predicted and measured", ""]
    if table.empty:
        return [*lines, "No finished runs with two alphas and layer logs: no group to compare.", ""]
    shown = table[list(SHOWN)].astype(object)
    unreached = table["measured_step"].isna() & table["measured_memory_end"].notna()
    shown.loc[unreached, "measured_step"] = "not within the run"
    shown = shown.rename(columns=SHOWN)
    rows = [[_cell(v) for v in row] for row in shown.itertuples(index=False)]
    lines += [markdown.table(list(SHOWN.values()), rows), ""]
    lines += [f"- {text}" for text in legend()] + [""]
    lines += [f"- {text}" for text in group_sentences(table)] + [""]
    return lines


def _cell(value) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "never"
        return markdown.number(value, 3, "g")
    return str(value)


def try_group_section(runs: pd.DataFrame, out_dir: str | Path, report: str | Path) -> str:
    """:func:`write_group_section`, or the one line that says why the table could not be computed
    (the data cannot be read here, a plug-in cannot be imported, no layer logs...), also appended to
    the report. Returns a line for the terminal."""
    try:
        table = write_group_section(runs, out_dir, report)
    except Exception as err:  # noqa: BLE001 - any failure of the extra table is said, not raised
        line = f"per-group table skipped: {type(err).__name__}: {' '.join(str(err).split())}"
        path = Path(report)
        path.write_text(path.read_text().rstrip("\n") + f"\n\n{line}\n")
        return line
    return f"per-group table: {len(table)} rows in {Path(out_dir) / 'groups.csv'}"


def write_group_section(
    runs: pd.DataFrame, out_dir: str | Path, report: str | Path | None = None
) -> pd.DataFrame:
    """Write ``groups.csv`` into ``out_dir`` and append the section to ``report`` (a Markdown file,
    when given); return the table."""
    table = group_table(runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "groups.csv", index=False)
    if report is not None:
        path = Path(report)
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + "\n".join(group_markdown(table)))
    return table


__all__ = [
    "GROUP_NAMES",
    "MECHANISMS",
    "group_markdown",
    "group_sentences",
    "group_table",
    "legend",
    "try_group_section",
    "write_group_section",
]
