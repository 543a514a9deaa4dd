"""Pure fits: functions of arrays that the bridge's measures, statistics and comparisons call.

Nothing here reads a sweep or knows a pipeline: e-fold decay times of a curve (:func:`fit_decay_time`,
with a bootstrap over seeds, :func:`bootstrap_decay`), log-log regressions of measured on predicted
times (:func:`loglog_fit`, :func:`loglog_r2_interval`), and the monotone fits of a memory against a
unit (:func:`stretched_exponential_fit`, :func:`isotonic_fit`, its leave-one-group-out R^2
:func:`lopo_r2`). Every other bridge module imports this one; it imports none of them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

#: Leave-one-pipeline-out R^2 above which the pipelines count as collapsed onto one curve.
COLLAPSE_R2 = 0.5


# ----------------------------------------------------------------------------------- decay fits
@dataclass(frozen=True)
class DecayFit:
    """One fitted forgetting time.

    ``tau``: the e-fold time of the best fit ``exp(-t / tau)`` (unit of ``t``; ``inf`` when the curve
    does not decay at all); ``t_span``: how long the curve was observed; ``forgotten``: ``tau <= t_span``
    (the fitted curve shrank by e within the run); ``r2``: goodness of the fit.
    """

    tau: float
    t_span: float
    forgotten: bool
    r2: float

    @property
    def reported(self) -> float:
        """``tau`` when forgotten, else the lower bound ``t_span`` (not forgotten within the run)."""
        return self.tau if self.forgotten else self.t_span


def fit_decay_time(t: np.ndarray, memory: np.ndarray) -> DecayFit:
    """Fit ``memory(t) ~ exp(-t / tau)`` by least squares over the whole curve; ``memory(0) = 1``.

    ``t`` >= 0 (any time unit, e.g. steps since the curve's start), ``memory`` the curve divided by its
    value at ``t = 0``. The sum of squared residuals is minimized over ``log tau`` (a log-spaced grid,
    then a bounded Brent refinement); a best fit beyond 1e6 times the observed span is reported as
    ``tau = inf`` (no decay visible). NaN points are ignored.
    """
    # deferred: scipy loads only when this computation runs
    from scipy.optimize import minimize_scalar

    t = np.asarray(t, dtype=np.float64)
    memory = np.asarray(memory, dtype=np.float64)
    if t.shape != memory.shape or t.ndim != 1:
        raise ValueError(f"t and memory must be 1-d of one shape (got {t.shape}, {memory.shape})")
    keep = np.isfinite(t) & np.isfinite(memory)
    t, memory = t[keep], memory[keep]
    if np.any(t < 0):
        raise ValueError("t must be >= 0 (time since the start of the curve)")
    positive = t[t > 0]
    if positive.size == 0:
        raise ValueError("t must hold at least one time > 0 to fit a decay")
    t_span = float(positive.max())

    def sse(log_tau):
        tau = np.exp(np.atleast_1d(log_tau))[:, None]
        return np.sum((memory[None, :] - np.exp(-t[None, :] / tau)) ** 2, axis=1)

    lo, hi = np.log(positive.min() / 100.0), np.log(t_span * 1e6)
    grid = np.linspace(lo, hi, 241)
    values = sse(grid)
    best = int(np.argmin(values))
    log_tau = grid[best]
    if 0 < best < len(grid) - 1:
        res = minimize_scalar(
            lambda x: float(sse(x)[0]), bounds=(grid[best - 1], grid[best + 1]), method="bounded"
        )
        log_tau = res.x if res.fun <= values[best] else log_tau
    tau = np.inf if log_tau >= hi - 1e-9 else float(np.exp(log_tau))
    residual = float(sse(log_tau)[0])
    total = float(np.sum((memory - memory.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else np.nan
    return DecayFit(tau=tau, t_span=t_span, forgotten=bool(tau <= t_span), r2=r2)


def bootstrap_decay(
    t: np.ndarray,
    curves: np.ndarray,
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    reduce=None,
) -> dict:
    """Forgetting time of the seed-mean curve and its bootstrap interval over seeds.

    ``curves`` (n_seeds, n_times, ...) holds one curve per seed on the common times ``t``; ``reduce``
    maps a resampled stack to the normalized 1-d memory (default: the NaN-mean over seeds). The point
    estimate fits the reduction of all seeds; the interval is the ``level`` percentile range of the fits
    of ``n_boot`` resamples of seeds with replacement (NaN with one seed; ``inf`` ends allowed).
    Returns ``tau``, ``tau_lo``, ``tau_hi``, ``t_span``, ``forgotten``, ``r2``, ``n_seeds``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1) (got {level})")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0 (got {n_boot})")
    curves = np.asarray(curves, dtype=np.float64)
    reduce = reduce or (lambda stack: np.nanmean(stack, axis=0))
    point = fit_decay_time(t, reduce(curves))
    n_seeds = curves.shape[0]
    lo = hi = np.nan
    if n_seeds > 1 and n_boot > 0:
        rng = np.random.default_rng(seed)
        taus = np.full(n_boot, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns of a resample
            for i in range(n_boot):
                pick = rng.integers(0, n_seeds, n_seeds)
                try:
                    taus[i] = fit_decay_time(t, reduce(curves[pick])).tau
                except ValueError:  # a resample with no finite point left
                    continue
        q = (1 - level) / 2
        if np.isfinite(taus).any() or np.isinf(taus).any():
            lo, hi = np.nanquantile(taus, [q, 1 - q], method="lower")
    return {
        "tau": point.reported,
        "tau_fit": point.tau,
        "tau_lo": float(lo),
        "tau_hi": float(hi),
        "t_span": point.t_span,
        "forgotten": point.forgotten,
        "r2": point.r2,
        "n_seeds": n_seeds,
    }


# ----------------------------------------------------------------------------------- log-log fits
def loglog_fit(measured, predicted, *, level: float = 0.95) -> dict:
    """Least squares ``ln(measured) = intercept + slope * ln(predicted)``.

    Returns ``n``, ``slope``, ``intercept``, ``r2`` and ``level`` t-intervals ``slope_lo``,
    ``slope_hi``, ``intercept_lo``, ``intercept_hi`` (n - 2 degrees of freedom; NaN for n < 3). Pairs
    with a non-finite or non-positive time are dropped. A slope of 1 means measured is proportional to
    predicted; ``exp(intercept)`` is then the constant factor.
    """
    # deferred: scipy loads only when this computation runs
    from scipy import stats

    x = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(measured, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = np.log(x[keep]), np.log(y[keep])
    out = dict.fromkeys(
        ["slope", "slope_lo", "slope_hi", "intercept", "intercept_lo", "intercept_hi", "r2"], np.nan
    )
    out["n"] = int(x.size)
    if x.size < 2 or np.ptp(x) == 0:
        return out
    res = stats.linregress(x, y)
    out.update(slope=res.slope, intercept=res.intercept, r2=res.rvalue**2)
    if x.size >= 3:
        q = stats.t.ppf(0.5 + level / 2, x.size - 2)
        out.update(
            slope_lo=res.slope - q * res.stderr,
            slope_hi=res.slope + q * res.stderr,
            intercept_lo=res.intercept - q * res.intercept_stderr,
            intercept_hi=res.intercept + q * res.intercept_stderr,
        )
    return out


# ----------------------------------------------------------------------------------- monotone fits
def stretched_exponential_fit(u, y, start=None) -> dict:
    """Least squares ``y = A exp(-(u / u0)^k)`` (A, u0 > 0; 0.1 <= k <= 10); R^2 over all points.

    ``u0`` is kept within a factor 1000 of the positive ``u`` and ``A`` below 1000 times max ``|y|``.

    A grid over (u0, k) (u0 log-spaced from a tenth of the smallest positive ``u`` to ten times the
    largest, k from 0.1 to 10, A solved in closed form at each node) picks the start of a bounded
    least-squares refinement of all three (``start``: ``(amplitude, scale, shape)`` to refine from
    instead, e.g. the full-data fit inside a bootstrap). Returns ``amplitude``, ``scale`` (u0, in the
    unit of u), ``shape`` (k), ``r2`` and ``prediction``.
    """
    # deferred: scipy loads only when this computation runs
    from scipy.optimize import least_squares

    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    total = float(np.sum((y - y.mean()) ** 2))
    positive = u[u > 0]
    if positive.size == 0 or total == 0:
        pred = np.full_like(y, y.mean())
        return {
            "amplitude": y.mean(),
            "scale": np.nan,
            "shape": np.nan,
            "r2": 0.0,
            "prediction": pred,
        }

    def model(theta):
        a, scale, shape = np.exp(theta)
        return a * np.exp(-((u / scale) ** shape))

    top = max(float(np.max(np.abs(y))), 1e-12)
    lower = np.log([1e-12, positive.min() / 1e3, 0.1])
    upper = np.log([1e3 * top, positive.max() * 1e3, 10.0])
    if start is None:
        scales = np.geomspace(positive.min() / 10, positive.max() * 10, 60)
        shapes = np.geomspace(0.1, 10.0, 30)
        basis = np.exp(-((u[None, None, :] / scales[:, None, None]) ** shapes[None, :, None]))
        amplitude = np.maximum((basis @ y) / np.maximum(np.sum(basis**2, axis=-1), 1e-300), 1e-12)
        sse = np.sum((amplitude[..., None] * basis - y) ** 2, axis=-1)
        i, j = np.unravel_index(np.argmin(sse), sse.shape)
        start = (amplitude[i, j], scales[i], shapes[j])
    start = np.clip(np.log(np.maximum(np.asarray(start, dtype=np.float64), 1e-300)), lower, upper)
    res = least_squares(lambda theta: model(theta) - y, start, bounds=(lower, upper))
    pred = model(res.x)
    a, scale, shape = np.exp(res.x)
    r2 = 1.0 - float(np.sum((y - pred) ** 2)) / total
    return {"amplitude": a, "scale": scale, "shape": shape, "r2": r2, "prediction": pred}


def isotonic_fit(u, y, u_new=None) -> np.ndarray:
    """Decreasing least-squares fit of ``y`` on ``u`` (ties pooled), evaluated at ``u`` or ``u_new``.

    Between fitted points the fit is interpolated linearly in ``ln u`` and held constant beyond them.
    """
    # deferred: scipy loads only when this computation runs
    from scipy.optimize import isotonic_regression

    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    levels, inverse, counts = np.unique(u, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=y)
    fitted = isotonic_regression(sums / counts, weights=counts, increasing=False).x
    if u_new is None:
        return fitted[inverse]
    floor = levels[levels > 0].min() * 1e-3 if np.any(levels > 0) else 1.0
    return np.interp(
        np.log(np.maximum(np.asarray(u_new, dtype=np.float64), floor)),
        np.log(np.maximum(levels, floor)),
        fitted,
    )


# ----------------------------------------------------------------------------------- leave one out
def lopo_r2(u, y, groups) -> float:
    """Leave-one-pipeline-out R^2 of a decreasing isotonic fit of ``y`` on ``u``.

    Each group (pipeline) is predicted by the fit to all other groups
    (:func:`isotonic_fit`, interpolated in ``ln u``); R^2 = 1 - SSE / SST over
    every point. NaN with fewer than two groups or no variance.
    """
    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    groups = np.asarray(groups)
    total = float(np.sum((y - y.mean()) ** 2))
    labels = np.unique(groups)
    if labels.size < 2 or total == 0:
        return np.nan
    pred = np.empty_like(y)
    for label in labels:
        held = groups == label
        pred[held] = isotonic_fit(u[~held], y[~held], u[held])
    return 1.0 - float(np.sum((y - pred) ** 2)) / total


# ----------------------------------------------------------------------------------- fit intervals
def loglog_r2_interval(
    measured, predicted, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict:
    """Percentile bootstrap (over pipelines) of the slope and R^2 of ``ln measured ~ ln predicted``.

    Pairs with a non-finite or non-positive time are dropped first. Returns ``slope_boot_lo``,
    ``slope_boot_hi``, ``r2_lo``, ``r2_hi`` (NaN with fewer than 3 pairs).
    """
    x = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(measured, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = np.log(x[keep]), np.log(y[keep])
    out = dict.fromkeys(["slope_boot_lo", "slope_boot_hi", "r2_lo", "r2_hi"], np.nan)
    if x.size < 3:
        return out
    rng = np.random.default_rng(seed)
    slopes, r2s = [], []
    for _ in range(n_boot):
        i = rng.integers(0, x.size, x.size)
        xi, yi = x[i], y[i]
        if np.ptp(xi) == 0:
            continue
        slope, intercept = np.polyfit(xi, yi, 1)
        total = float(np.sum((yi - yi.mean()) ** 2))
        slopes.append(slope)
        r2s.append(
            1.0 - float(np.sum((yi - intercept - slope * xi) ** 2)) / total if total else 1.0
        )
    tail = (1 - level) / 2
    if slopes:
        out.update(
            slope_boot_lo=float(np.quantile(slopes, tail)),
            slope_boot_hi=float(np.quantile(slopes, 1 - tail)),
            r2_lo=float(np.quantile(r2s, tail)),
            r2_hi=float(np.quantile(r2s, 1 - tail)),
        )
    return out


__all__ = [
    "COLLAPSE_R2",
    "DecayFit",
    "bootstrap_decay",
    "fit_decay_time",
    "isotonic_fit",
    "loglog_fit",
    "loglog_r2_interval",
    "lopo_r2",
    "stretched_exponential_fit",
]
