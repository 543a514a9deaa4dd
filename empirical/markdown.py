"""The one Markdown and number formatter of the project's documents (report, bridge, study).

``number`` writes a value as a cell (``–`` for a missing or non-finite one, ``yes`` / ``no`` for a
flag), ``interval`` a value with its interval, ``table`` / ``frame_table`` a pipe table whose cells are
kept on one line with ``|`` escaped (a variant name may hold one); ``readable`` cuts a table to
:data:`MAX_COLUMNS` columns for Markdown and ``hidden_note`` names the cut columns and their CSV.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

#: What a missing or non-finite number prints as.
MISSING = "–"


def number(value: Any, digits: int = 2, fmt: str = "f") -> str:
    """``value`` as text: floats with ``digits`` in format ``fmt`` (``f`` fixed, ``g`` significant),
    integers as they are, flags as ``yes`` / ``no``, None and non-finite numbers as :data:`MISSING`,
    anything else as ``str``."""
    if value is None:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(value)
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}{fmt}}" if math.isfinite(value) else MISSING
    return str(value)


def interval(value: Any, lo: Any, hi: Any, digits: int = 2) -> str:
    """``value [lo, hi]``, or ``value`` alone when ``lo`` is None or not finite."""
    if lo is None or not math.isfinite(float(lo)):
        return number(value, digits)
    return f"{number(value, digits)} [{number(lo, digits)}, {number(hi, digits)}]"


def escape(cell: Any) -> str:
    """A table cell: on one line, ``|`` escaped."""
    return " ".join(str(cell).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A pipe table of ``rows`` (cells already text, or anything ``str`` writes) under ``header``."""
    lines = ["| " + " | ".join(escape(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def frame_table(
    frame: pd.DataFrame, digits: int = 1, fmt: str = "f", empty: str | None = None
) -> str:
    """A pipe table of ``frame``, every cell through :func:`number` (``empty``: what a frame without
    rows prints as; None: its header alone)."""
    if empty is not None and frame.empty:
        return empty
    rows = [[number(v, digits, fmt) for v in row] for row in frame.itertuples(index=False)]
    return table([str(c) for c in frame.columns], rows)


#: The most columns a Markdown table shows; the rest are in the table's CSV.
MAX_COLUMNS = 12
#: Noise units and the optimizers they apply to (``theory.units.noise_unit``): the other is blank.
_ADAPTIVE = ("adam", "adamw", "rmsprop")


def readable(
    frame: pd.DataFrame, labels: dict[str, str] | None = None, max_columns: int = MAX_COLUMNS
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` as a reader should see it in Markdown, and the columns left for the CSV.

    Pipeline ids become their names (``labels``: pipeline -> label; a ``pipeline`` column is
    dropped where the frame has a ``label``); a noise unit that does not apply to a row's optimizer
    (``adam`` for SGD, ``sgd_noise`` for Adam-family) is blank; at most ``max_columns`` columns.
    """
    shown = frame.copy()
    if "pipeline" in shown.columns:
        if "label" in shown.columns:
            shown = shown.drop(columns="pipeline")
        elif labels:
            shown["pipeline"] = shown["pipeline"].map(lambda p: labels.get(p, p))
    if "optimizer" in shown.columns:
        adaptive = shown["optimizer"].isin(_ADAPTIVE)
        for column in [c for c in shown.columns if c == "adam" or c.startswith("adam_")]:
            shown[column] = shown[column].astype(object).where(adaptive, "")
        for column in [c for c in shown.columns if c == "sgd_noise" or c.startswith("sgd_noise_")]:
            shown[column] = shown[column].astype(object).where(~adaptive, "")
    hidden = [str(c) for c in shown.columns[max_columns:]]
    return shown.iloc[:, :max_columns], hidden


def hidden_note(hidden: list[str], csv_name: str) -> str:
    """The line under a table that :func:`readable` cut: which columns, and the CSV that has them
    ("" when none was cut)."""
    if not hidden:
        return ""
    columns = "column" if len(hidden) == 1 else "columns"
    return f"_{len(hidden)} more {columns} in {csv_name}: {', '.join(hidden)}._"


__all__ = [
    "MAX_COLUMNS",
    "MISSING",
    "escape",
    "frame_table",
    "hidden_note",
    "interval",
    "number",
    "readable",
    "table",
]
