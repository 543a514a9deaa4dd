"""The codes the reports print (M1-M4, P1-P3, U1-U2), spelled out once, for a legend beside a table,
and the one colour of each pipeline in every figure of a folder.

The codes are defined where their formulas live: M1-M4 in :mod:`initmem.empirical.memory`, P1-P3 in
:mod:`initmem.bridge.preregister`, U1-U2 in :mod:`initmem.theory.units`; this module only names them
in words (no torch, no pandas).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Every code a report, the bridge or the study prints, in words.
CODES = {
    "M1": "seeds used: the seeds whose runs interpolate at every alpha (2 or more needed)",
    "M2": "spread: max minus min over alpha of the seed-mean test accuracy (pp)",
    "M3": "disagreement excess: test points where two alphas' models disagree, beyond two seeds'",
    "M4": "norm memory: log-ratio of the weight norms of the largest and smallest alpha over its "
    "value at init (1 = as at init, forgotten at <= 1/e)",
    "P1": "normalized-weight laws (scale-invariant weights: alpha sets lr/|w|^2 only)",
    "P2": "lazy (NTK) memory term (kept by gradient flow, contracted by weight decay)",
    "P3": "logit-scale laws (the head under cross-entropy)",
    "U1": "the accumulated unit's norm recursion n' = (1 - explicit)^2 n + noise",
    "U2": "the norm memory that recursion predicts, ln(n(alpha)/n(ref)) / ln(alpha^2/ref^2)",
}
#: The codes in a text: ``M1``, ``(P2)``, ``U1-U2`` (ranges expanded).
_CODE = re.compile(r"\b([MPU])([1-4])(?:\s*[-–]\s*\1?([1-4]))?\b")


def codes_in(texts: Iterable[str]) -> list[str]:
    """The codes of :data:`CODES` that ``texts`` mention, in the order of :data:`CODES`."""
    found = set()
    for text in texts:
        for letter, first, last in _CODE.findall(str(text)):
            for k in range(int(first), int(last or first) + 1):
                found.add(f"{letter}{k}")
    return [code for code in CODES if code in found]


def legend_line(texts: Iterable[str]) -> str:
    """One legend line for the codes ``texts`` mention ("" when none)."""
    codes = codes_in(texts)
    if not codes:
        return ""
    return "Codes: " + "; ".join(f"{code} = {CODES[code]}" for code in codes) + "."


#: The palette of pipelines (matplotlib's tab10, as hex), in the order of the folder's pipelines.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def pipeline_colors(pipelines: Iterable[str]) -> dict[str, str]:
    """One colour per pipeline id, in the order given (the sweep's order: ``runs["pipeline"]``); the
    report, the bridge and the study draw each pipeline in its colour in every figure."""
    order = list(dict.fromkeys(pipelines))
    return {p: PALETTE[k % len(PALETTE)] for k, p in enumerate(order)}


#: What the scale-invariant weights are called: in the BatchNorm ResNets, and in any other model.
BN_CONVS = "BN-followed convs"
INVARIANT_WEIGHTS = "scale-invariant (normalized) weights"


def invariant_name(runs) -> str:
    """:data:`BN_CONVS` when every run of ``runs`` (a runs table) trains a BatchNorm ResNet, else
    :data:`INVARIANT_WEIGHTS` (a plug-in, a LayerNorm or GroupNorm model)."""
    models = set(runs["model"]) if "model" in getattr(runs, "columns", ()) else set()
    return BN_CONVS if models and models <= {"resnet9", "resnet18"} else INVARIANT_WEIGHTS


__all__ = [
    "BN_CONVS",
    "CODES",
    "INVARIANT_WEIGHTS",
    "PALETTE",
    "codes_in",
    "invariant_name",
    "legend_line",
    "pipeline_colors",
]
