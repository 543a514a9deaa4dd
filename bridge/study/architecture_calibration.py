"""Planted-answer calibration of the architectures study's verdicts (A6 of
:mod:`initmem.bridge.study.architectures`).

Setting
-------
The design as the sweep measured it: per architecture its cells (pipelines), each with the seeds it
used ``n_c`` (M1; the sweep's seed count where fewer than 2 interpolate), the seed-to-seed standard
deviation ``sd_c`` of its paired difference (E1 of :mod:`~initmem.bridge.study.equivalence`; the
architecture's pooled sd where a cell has none) and its predicted state (A3). Differences in pp.

Truths (per architecture: each cell's true paired difference ``D_c``)
---------------------------------------------------------------------
(C1) ``holds``: the thesis holds; a cell predicted to keep has ``D_c = +-max(|D_measured|,
     2 margin)`` (the measured sign; a memory at least twice the equivalence margin), a cell
     predicted to forget has ``D_c = 0``. The right verdict: "holds".
(C2) ``memory stays``: as C1, but the cells predicted to forget keep ``D_c = 2 margin``. The right
     verdict: "does not hold".
(C3) ``memory goes early``: every cell ``D_c = 0`` (those predicted to keep forgot too). The right
     verdict: "does not hold".

Replicas and scores
-------------------
A replica draws ``d_{c,s} ~ N(D_c, sd_c^2)`` for ``s = 1..n_c`` independently per cell and runs the
study's own rules on them: A1 (:func:`~initmem.bridge.study.equivalence.decide_differences`), A4
(:func:`~initmem.bridge.study.architectures.agreement`, the norm memory left out: the function rule
is what is calibrated) and A5 (:func:`~initmem.bridge.study.architectures.architecture_verdict`). Per
architecture and truth: ``decided`` (the verdict is not "cannot tell"), ``right`` and ``wrong`` (a
decided verdict naming the other answer), with a Wilson interval on ``wrong``
(:func:`~initmem.bridge.study.calibrate.wilson_interval`). The seeds are explicit; the draws are
normal (the assumption of E3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from initmem.bridge.study import equivalence
from initmem.bridge.study.architectures import ArchitectureStudy, agreement, architecture_verdict
from initmem.bridge.study.calibrate import wilson_interval

#: The truths C1 to C3 with the verdict that is right under each.
TRUTHS = {"holds": "holds", "memory stays": "does not hold", "memory goes early": "does not hold"}
#: Columns of :func:`calibrate_architectures`.
COLUMNS = ["model", "truth", "replicas", "decided", "right", "wrong", "wrong_lo", "wrong_hi"]


def true_differences(cells: pd.DataFrame, truth: str, margin: float) -> np.ndarray:
    """C1 to C3: each cell's true paired difference (pp) under ``truth``."""
    if truth not in TRUTHS:
        raise ValueError(f"truth must be one of {sorted(TRUTHS)} (got {truth!r})")
    forgets = (cells["predicted_state"] == "forgets within the run").to_numpy()
    measured = cells["diff_pp"].to_numpy(dtype=np.float64)
    sign = np.where(np.isfinite(measured) & (measured > 0), 1.0, -1.0)
    keep = sign * np.maximum(np.nan_to_num(np.abs(measured)), 2 * margin)
    if truth == "memory goes early":
        return np.zeros(len(cells))
    return np.where(forgets, 2 * margin if truth == "memory stays" else 0.0, keep)


def design_noise(cells: pd.DataFrame, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's seeds ``n_c`` and seed sd ``sd_c`` (the Setting's rules)."""
    n = cells["n_seeds_used"].to_numpy(dtype=float)
    n = np.where(np.isfinite(n) & (n >= 2), n, seeds).astype(int)
    sd = cells["sd_pp"].to_numpy(dtype=np.float64)
    known = np.isfinite(sd)
    pooled = float(np.sqrt(np.mean(sd[known] ** 2))) if known.any() else np.nan
    return n, np.where(known, sd, pooled)


def replica_verdict(cells: pd.DataFrame, d: list[np.ndarray], margin: float) -> str:
    """A1, A4 and A5 on one replica's per-cell differences ``d`` (the study's functions)."""
    rows = []
    for (_, cell), values in zip(cells.iterrows(), d, strict=True):
        function = equivalence.decide_differences(values, margin)["verdict"]
        state, _ = agreement(function, cell["predicted_state"], "cannot tell", len(values))
        rows.append({"agreement": state, "predicted_state": cell["predicted_state"]})
    return architecture_verdict(pd.DataFrame(rows))


def calibrate_architectures(
    cells: pd.DataFrame,
    *,
    seeds: int,
    replicas: int = 1000,
    margin: float = equivalence.EQUIVALENCE_MARGIN_PP,
    seed: int = 0,
) -> pd.DataFrame:
    """C1 to C3 on every architecture of ``cells`` (the study's cell table): one row per
    architecture and truth (:data:`COLUMNS`; rates are fractions of ``replicas``). ``seeds``: the
    sweep's seeds per cell, for cells with fewer than 2 used."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1 (got {replicas})")
    rng = np.random.default_rng(seed)
    rows = []
    for model, group in cells.groupby("model", sort=False):
        group = group[group["predicted_state"] != "no prediction"]
        if group.empty:
            continue
        n, sd = design_noise(group, seeds)
        if not np.isfinite(sd).all():
            continue
        for truth, right in TRUTHS.items():
            true = true_differences(group, truth, margin)
            said = [
                replica_verdict(
                    group,
                    [rng.normal(m, s, k) for m, s, k in zip(true, sd, n, strict=True)],
                    margin,
                )
                for _ in range(replicas)
            ]
            decided = sum(v != "cannot tell" for v in said)
            wrong = sum(v not in ("cannot tell", right) for v in said)
            lo, hi = wilson_interval(wrong, replicas)
            rows.append(
                {
                    "model": model,
                    "truth": truth,
                    "replicas": replicas,
                    "decided": decided / replicas,
                    "right": sum(v == right for v in said) / replicas,
                    "wrong": wrong / replicas,
                    "wrong_lo": lo,
                    "wrong_hi": hi,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def calibrate_study(study: ArchitectureStudy, replicas: int, *, seed: int = 0) -> ArchitectureStudy:
    """A6 on a study's own cells (its sweep's seed count for cells with fewer than 2 used), set as
    ``study.calibration`` (which the document prints); returns the study."""
    study.calibration = calibrate_architectures(
        study.cells, seeds=study.runs["seed"].nunique(), replicas=replicas, seed=seed
    )
    return study


__all__ = [
    "COLUMNS",
    "TRUTHS",
    "calibrate_architectures",
    "calibrate_study",
    "design_noise",
    "replica_verdict",
    "true_differences",
]
