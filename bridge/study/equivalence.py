"""Function memory decided by rules that can say both things: kept, gone, or cannot tell.

Setting
-------
A pipeline p of a sweep ran at two or more alphas; each run keeps its validation-selected
checkpoint and its test accuracy ``acc(alpha, s)`` (the paper's object). The seeds used ``S(p)`` are
M1 of :mod:`initmem.empirical.memory` (the seeds whose runs interpolate at every alpha).

Conventions
-----------
Accuracies and differences in percentage points (``*_pp``). The contrast is fixed in advance, not
picked on the data: the **largest** against the **smallest** alpha (by value, not by accuracy, so
the estimate carries no selection bias; the study's spread M2 picks the best and worst alpha and is
biased upward). Levels: :data:`LEVEL` for "kept", :data:`TOST_ALPHA` per side for "gone".

Definitions
-----------
(E1) **Paired difference** (:func:`paired_differences`): ``d_s = acc(alpha_max, s) -
     acc(alpha_min, s)`` for s in ``S(p)``, its mean ``D`` and its seed-to-seed standard deviation
     ``sd`` (the noise floor the document prints: the seed noise of the contrast itself, not a
     permutation mean).
(E2) **Kept** when the 95% Student-t interval of ``D`` over seeds excludes 0
     (:func:`initmem.empirical.memory.mean_interval`).
(E3) **Gone** when the two one-sided tests (TOST; Schuirmann 1987, J. Pharmacokinet. Biopharm. 15,
     657-680) reject both ``D <= -margin`` and ``D >= +margin`` at level :data:`TOST_ALPHA` each:
     ``p_TOST = max(P(T_{n-1} >= (D + margin)/se), P(T_{n-1} <= (D - margin)/se)) < TOST_ALPHA``
     with ``se = sd / sqrt(n)``; equivalently the ``1 - 2 TOST_ALPHA`` (90%) t-interval lies within
     ``(-margin, +margin)``. The margin is :data:`EQUIVALENCE_MARGIN_PP`, fixed before any data.
     Assumption: the ``d_s`` are independent normal draws (seeds are independent runs).
(E4) **Verdict** (:func:`verdict`): ``gone`` when E3 holds (a difference shown smaller than the
     margin is the pre-registered practical zero, even where its 95% interval excludes 0: the table
     prints that interval); else ``kept`` when E2 holds; else ``cannot tell``; ``cannot tell``
     (fewer than 2 seeds used) with no seeds to decide on.
(E5) **Seeds "gone" needs** (:func:`seeds_for_gone`): the smallest n at which E3 says "gone" with
     probability :data:`GONE_POWER` when the true difference is 0 and the seed noise is the
     measured ``sd``. The power of E3 (:func:`tost_power`, derived here; the exact form of Owen
     1965, Biometrika 52, 437-446) with ``D ~ N(delta, sd^2/n)`` independent of
     ``s^2 ~ sd^2 chi^2_{n-1}/(n-1)`` and ``c = t_{n-1}(1 - TOST_ALPHA)/sqrt(n)``:
     ``power = E_s[ max(0, Phi((margin - c s - delta) sqrt(n)/sd) - Phi((c s - margin - delta)
     sqrt(n)/sd)) ]``, one integral over the chi-square density, zero for ``c s >= margin``.
(E5') **Seeds "kept" needs** (:func:`seeds_for_kept`): the smallest n at which E2 says "kept" with
     probability :data:`GONE_POWER` when the true difference is ``delta`` (the measured one) and the
     seed noise the measured ``sd``: with ``T = D sqrt(n) / s`` noncentral t (``n - 1`` degrees of
     freedom, noncentrality ``delta sqrt(n) / sd``), ``power = P(|T| > t_{n-1}(1 - (1 - LEVEL)/2))``
     (:func:`kept_power`; the standard power of the two-sided one-sample t-test).
(E6) **Permutation test** (:func:`initmem.empirical.memory.spread_null` on the two alphas' columns:
     with two alphas the within-seed permutation is the sign flip of ``d_s``, the statistic ``|D|``).
     Its smallest attainable p-value is computed by that function (``2 / 2^n`` for n seeds); the
     document prints the test only where it is below :data:`~initmem.empirical.memory.ALPHA_LEVEL`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from initmem.empirical import memory

#: The largest size (seeds, pipelines) a search for the size that would tell goes to (E5, and
#: :func:`initmem.bridge.study.seeds.size_needed`).
MAX_SIZE = 10_000
#: The margin of the equivalence test (E3), in pp of test accuracy: fixed in advance, one place.
EQUIVALENCE_MARGIN_PP = 2.0
#: Level of each one-sided test of E3 (the 90% interval within the margin).
TOST_ALPHA = 0.05
#: Confidence of the "kept" interval (E2).
LEVEL = 0.95
#: The probability at which :func:`seeds_for_gone` counts the seeds "gone" needs (E5).
GONE_POWER = 0.8
#: The verdicts of E4.
VERDICTS = ("kept", "gone", "cannot tell")
#: Columns of :func:`verdict_table`.
VERDICT_COLUMNS = [
    "pipeline",
    "label",
    "alpha_low",
    "alpha_high",
    "n_seeds_used",
    "diff_pp",
    "diff_lo",
    "diff_hi",
    "sd_pp",
    "margin_pp",
    "tost_lo",
    "tost_hi",
    "p_tost",
    "verdict",
    "seeds_for_gone",
    "perm_p",
    "perm_p_min",
]


def paired_differences(runs: pd.DataFrame) -> tuple[float, float, np.ndarray, np.ndarray]:
    """E1 for one pipeline's finished runs: ``(alpha_min, alpha_max, seeds, d)``, ``d`` (pp) per
    seed used (M1), sorted by seed; ``d`` is empty with fewer than 2 alphas or 2 seeds used."""
    low, high, seeds, _, d = _paired(runs)
    return low, high, seeds, d


def _paired(runs: pd.DataFrame):
    """E1 with the accuracy table it is read from (:func:`initmem.empirical.memory.accuracy_by_seed`;
    None with fewer than 2 alphas or 2 seeds used): ``(low, high, seeds, table, d)``."""
    alphas, seeds, table = memory.accuracy_by_seed(runs)
    low, high = (float(alphas[0]), float(alphas[-1])) if alphas.size else (math.nan, math.nan)
    if table is None:
        return low, high, seeds, None, np.array([])
    d = (table[high] - table[low]).to_numpy(np.float64)
    return low, high, table.index.to_numpy(), table, d


def tost(values, margin: float = EQUIVALENCE_MARGIN_PP, *, alpha: float = TOST_ALPHA) -> dict:
    """E3 on a sample of differences: ``mean``, ``sd``, ``lo`` / ``hi`` (the ``1 - 2 alpha``
    t-interval), ``p`` (the larger of the two one-sided p-values) and ``equivalent`` (``p < alpha``).
    With ``sd = 0`` the tests are decided by the mean alone (p 0 inside the margin, 1 outside);
    NaN and False with fewer than 2 finite values."""
    # deferred: scipy loads only when a test is computed
    from scipy import stats

    if margin <= 0:
        raise ValueError(f"margin must be > 0 (got {margin})")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must satisfy 0 < alpha < 0.5 (got {alpha})")
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    out = {"mean": math.nan, "sd": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan}
    if v.size < 2:
        return out | {"equivalent": False}
    mean, sd = float(v.mean()), float(v.std(ddof=1))
    if sd == 0:
        inside = abs(mean) < margin
        return {"mean": mean, "sd": 0.0, "lo": mean, "hi": mean, "p": 0.0 if inside else 1.0} | {
            "equivalent": inside
        }
    se, nu = sd / math.sqrt(v.size), v.size - 1
    p_low = float(stats.t.sf((mean + margin) / se, nu))  # H0: D <= -margin
    p_high = float(stats.t.cdf((mean - margin) / se, nu))  # H0: D >= +margin
    half = float(stats.t.ppf(1 - alpha, nu)) * se
    p = max(p_low, p_high)
    return {"mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half, "p": p} | {
        "equivalent": bool(p < alpha)
    }


def tost_power(
    diff: float, sd: float, n: int, margin: float = EQUIVALENCE_MARGIN_PP, *, alpha=TOST_ALPHA
) -> float:
    """E5: the probability that E3 says "gone" on n normal differences of mean ``diff`` and standard
    deviation ``sd`` (the integral over the chi-square density of the sample variance). NaN for
    n < 2 or an undefined ``sd``; for ``sd = 0``, 1 inside the margin and 0 outside."""
    # deferred: scipy loads only when a power is computed
    from scipy import integrate, stats

    if n < 2 or not (np.isfinite(diff) and np.isfinite(sd)) or sd < 0:
        return math.nan
    if sd == 0:
        return float(abs(diff) < margin)
    nu = n - 1
    c = float(stats.t.ppf(1 - alpha, nu)) / math.sqrt(n)
    scale = math.sqrt(n) / sd
    x_max = nu * (margin / (c * sd)) ** 2  # c s < margin <=> x < x_max (s = sd sqrt(x / nu))
    upper = min(x_max, float(stats.chi2.isf(1e-13, nu)))

    def integrand(x: float) -> float:
        s = sd * math.sqrt(x / nu)
        inside = stats.norm.cdf((margin - c * s - diff) * scale) - stats.norm.cdf(
            (c * s - margin - diff) * scale
        )
        return float(stats.chi2.pdf(x, nu) * max(0.0, inside))

    mode = max(nu - 2.0, 0.0)
    points = [p for p in (mode,) if 0 < p < upper]
    value, _ = integrate.quad(integrand, 0.0, upper, points=points or None, limit=200)
    return float(min(1.0, max(0.0, value)))


def seeds_for_gone(
    sd: float,
    margin: float = EQUIVALENCE_MARGIN_PP,
    *,
    power: float = GONE_POWER,
    alpha: float = TOST_ALPHA,
    diff: float = 0.0,
) -> float:
    """E5: the smallest n >= 2 whose :func:`tost_power` at a true difference ``diff`` (0: the
    power table's; a measured difference: the seeds that would call that pipeline gone) is at
    least ``power``; NaN when none up to :data:`MAX_SIZE` (always for ``|diff| >= margin``) or
    ``sd`` is undefined. The power grows with n, so the search doubles n, then bisects."""
    if not np.isfinite(diff) or abs(diff) >= margin:
        return math.nan
    return _smallest_n(lambda n: tost_power(diff, sd, n, margin, alpha=alpha) >= power, sd)


def _smallest_n(enough, sd: float) -> float:
    """The smallest n >= 2 with ``enough(n)`` (a power that grows with n): doubling, then
    bisection; NaN when none up to :data:`MAX_SIZE` or ``sd`` is undefined."""
    if not np.isfinite(sd) or sd < 0:
        return math.nan
    if enough(2):
        return 2.0
    low, high = 2, 4
    while not enough(high):
        if high >= MAX_SIZE:
            return math.nan
        low, high = high, min(2 * high, MAX_SIZE)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return float(high)


def kept_power(diff: float, sd: float, n: int, *, level: float = LEVEL) -> float:
    """E5': the probability that E2 says "kept" on n normal differences of mean ``diff`` and
    standard deviation ``sd``. NaN for n < 2 or an undefined ``sd``; for ``sd = 0``, 1 when
    ``diff != 0``."""
    # deferred: scipy loads only when a power is computed
    from scipy import stats

    if n < 2 or not (np.isfinite(diff) and np.isfinite(sd)) or sd < 0:
        return math.nan
    if sd == 0:
        return float(diff != 0)
    crit = float(stats.t.ppf(0.5 + level / 2, n - 1))
    nc = diff * math.sqrt(n) / sd
    return float(stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc))


def seeds_for_kept(diff: float, sd: float, *, power: float = GONE_POWER) -> float:
    """E5': the smallest n >= 2 whose :func:`kept_power` at ``diff`` and ``sd`` is at least
    ``power``; NaN when none up to :data:`MAX_SIZE` (``diff`` 0) or an input is undefined."""
    if not np.isfinite(diff) or diff == 0:
        return math.nan
    return _smallest_n(lambda n: kept_power(diff, sd, n) >= power, sd)


def verdict(diff_lo: float, diff_hi: float, equivalent: bool, *, n_seeds: int = 2) -> str:
    """E4: ``gone`` (E3), else ``kept`` (the 95% interval excludes 0), else ``cannot tell``."""
    if n_seeds < 2:
        return "cannot tell"
    if equivalent:
        return "gone"
    if np.isfinite(diff_lo) and np.isfinite(diff_hi) and (diff_lo > 0 or diff_hi < 0):
        return "kept"
    return "cannot tell"


def decide_differences(d, margin: float = EQUIVALENCE_MARGIN_PP) -> dict:
    """E2 to E4 on the per-seed differences ``d`` (pp): ``diff_pp`` with its 95% interval
    ``diff_lo`` / ``diff_hi``, ``sd_pp``, the 90% interval ``tost_lo`` / ``tost_hi``, ``p_tost``
    and ``verdict``."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    mean, lo, hi = memory.mean_interval(d, level=LEVEL) if d.size else (math.nan,) * 3
    test = tost(d, margin)
    return {
        "diff_pp": mean,
        "diff_lo": lo,
        "diff_hi": hi,
        "sd_pp": test["sd"],
        "tost_lo": test["lo"],
        "tost_hi": test["hi"],
        "p_tost": test["p"],
        "verdict": verdict(lo, hi, test["equivalent"], n_seeds=int(d.size)),
    }


def pipeline_verdict(runs: pd.DataFrame, margin: float = EQUIVALENCE_MARGIN_PP) -> dict:
    """E1 to E6 for one pipeline's finished runs (the keys of :data:`VERDICT_COLUMNS` but
    ``pipeline`` and ``label``)."""
    low, high, _, table, d = _paired(runs)
    decided = decide_differences(d, margin)
    perm = {"p_value": math.nan, "p_min": math.nan}
    if table is not None:
        perm = memory.spread_null(table[[low, high]].to_numpy())
    return {
        "alpha_low": low,
        "alpha_high": high,
        "n_seeds_used": int(d.size),
        **decided,
        "margin_pp": float(margin),
        "seeds_for_gone": seeds_for_gone(decided["sd_pp"], margin),
        "perm_p": perm["p_value"],
        "perm_p_min": perm["p_min"],
    }


def verdict_table(runs: pd.DataFrame, margin: float = EQUIVALENCE_MARGIN_PP) -> pd.DataFrame:
    """One row per pipeline with two or more alphas (in sweep order): :data:`VERDICT_COLUMNS`.
    ``runs``: finished runs with ``pipeline`` and ``label`` (the study's)."""
    rows = []
    for pipeline, group in runs.groupby("pipeline", sort=False):
        if group["alpha"].nunique() < 2:
            continue
        rows.append(
            {"pipeline": pipeline, "label": group["label"].iloc[0]}
            | pipeline_verdict(group, margin)
        )
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def permutation_text(row) -> str:
    """E6 as the document prints it: the p-value where its smallest attainable value is below
    :data:`~initmem.empirical.memory.ALPHA_LEVEL`, else why it is not printed."""
    p, p_min = float(row["perm_p"]), float(row["perm_p_min"])
    if not np.isfinite(p_min):
        return "–"
    if p_min < memory.ALPHA_LEVEL:
        return f"{p:.3f}"
    return f"– (smallest attainable p {p_min:.3g})"


def verdict_sentences(table: pd.DataFrame) -> list[str]:
    """The counts of each verdict with the pipelines named, one sentence per "gone" pipeline whose
    95% interval excludes 0 (gone within the margin, not 0), then one per "cannot tell" pipeline
    with the seeds "gone" would need at its seed noise; every number from ``table``."""
    if table.empty:
        return []
    margin = float(table["margin_pp"].iloc[0])
    counts = []
    for name in VERDICTS:
        part = table[table["verdict"] == name]
        listed = f": {', '.join(map(str, part['label']))}" if len(part) else ""
        counts.append(f"{name} in {len(part)}{listed}")
    lines = [
        f"Function memory (largest against smallest alpha, validation-selected test accuracy, "
        f"margin +-{margin:g} pp) of {len(table)} pipelines: " + "; ".join(counts) + "."
    ]
    for _, r in table[table["verdict"] == "gone"].iterrows():
        if r["diff_lo"] > 0 or r["diff_hi"] < 0:
            lines.append(
                f"{r['label']}: gone within the margin, though not 0: difference "
                f"{r['diff_pp']:+.2f} pp [95% {r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}], 90% "
                f"[{r['tost_lo']:+.2f}, {r['tost_hi']:+.2f}] within +-{margin:g}."
            )
    for _, r in table[table["verdict"] == "cannot tell"].iterrows():
        if r["n_seeds_used"] < 2:
            lines.append(f"{r['label']}: cannot tell ({r['n_seeds_used']} seeds used; 2 needed).")
            continue
        need = r["seeds_for_gone"]
        needs = (
            f"at this seed noise (sd {r['sd_pp']:.2f} pp) a pipeline that forgot would be called "
            f"gone with probability {GONE_POWER:.1f} from {int(need)} seeds"
            if np.isfinite(need)
            else f"no number of seeds up to {MAX_SIZE} would call it gone at this seed noise"
        )
        lines.append(
            f"{r['label']}: cannot tell at {int(r['n_seeds_used'])} seeds (difference "
            f"{r['diff_pp']:+.2f} pp [95% {r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}], 90% "
            f"[{r['tost_lo']:+.2f}, {r['tost_hi']:+.2f}] against +-{margin:g}); {needs}."
        )
    return lines


__all__ = [
    "EQUIVALENCE_MARGIN_PP",
    "GONE_POWER",
    "LEVEL",
    "MAX_SIZE",
    "TOST_ALPHA",
    "VERDICTS",
    "VERDICT_COLUMNS",
    "decide_differences",
    "kept_power",
    "paired_differences",
    "permutation_text",
    "pipeline_verdict",
    "seeds_for_gone",
    "seeds_for_kept",
    "tost",
    "tost_power",
    "verdict",
    "verdict_sentences",
    "verdict_table",
]
