"""Argument checks shared by every theory module: one style, one message format.

Each check converts its argument (to float64, or to a float64 array) and raises ``ValueError`` whose
message names the argument, the allowed range and the value received, e.g.
``lr must be finite and > 0 (got -1.0)``. Nothing here imports beyond numpy.
"""

from __future__ import annotations

import math

import numpy as np

#: Optimizers the theory covers, spelled as ``RunConfig.optimizer`` spells them (a test holds the two
#: lists equal); :func:`check_optimizer` refuses any other name.
OPTIMIZERS = ("sgd", "adam", "adamw", "rmsprop")

__all__ = [
    "OPTIMIZERS",
    "check_data",
    "check_integer",
    "check_memory",
    "check_momentum",
    "check_number",
    "check_optimizer",
    "check_optimizer_name",
    "check_steps",
]


def _as_float64(name: str, value) -> np.ndarray:
    """``value`` as a float64 array, or ValueError naming ``name``."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number or an array of numbers (got {value!r})"
        ) from None


def check_number(
    name: str,
    value,
    *,
    low: float = 0.0,
    strict: bool = False,
    high: float = math.inf,
    nonempty: bool = True,
):
    """A float (or a float64 array) with every entry finite and in ``[low, high)``.

    ``strict=True`` excludes ``low`` itself (``(low, high)``). Arrays must hold at least one entry
    unless ``nonempty=False``. Returns a float for a scalar input, else the float64 array.
    """
    arr = _as_float64(name, value)
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} must not be empty (got {value!r})")
    bad = ~np.isfinite(arr) | (arr <= low if strict else arr < low) | (arr >= high)
    if np.any(bad):
        rel = ">" if strict else ">="
        upper = f" and < {high}" if high < math.inf else ""
        raise ValueError(f"{name} must be finite and {rel} {low}{upper} (got {value!r})")
    return float(arr) if arr.ndim == 0 else arr


def check_integer(name: str, value, *, low: int = 1) -> int:
    """An integer >= ``low`` (a float with an integer value is accepted; booleans are not)."""
    ok = not isinstance(value, bool)
    try:
        ok = ok and float(value).is_integer() and value >= low
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer >= {low} (got {value!r})")
    return int(value)


def check_momentum(momentum: float) -> float:
    """Heavy-ball momentum in ``[0, 1)``."""
    return check_number("momentum", momentum, high=1.0)


def check_optimizer_name(optimizer, allowed) -> str:
    """``optimizer`` spelled exactly as one of ``allowed`` (lower case, e.g. ``"sgd"``).

    A mis-cased name (``"SGD"``) or an unknown one (``"nadam"``) raises ValueError naming the
    allowed values (and the lower-case spelling when that is the only fault): never read as SGD.
    """
    allowed = tuple(allowed)
    if isinstance(optimizer, str) and optimizer in allowed:
        return optimizer
    hint = ""
    if isinstance(optimizer, str) and optimizer.lower() in allowed:
        hint = f"; names are lower case: {optimizer.lower()!r}"
    raise ValueError(f"optimizer must be one of {list(allowed)} (got {optimizer!r}){hint}")


def check_optimizer(optimizer) -> str:
    """One of :data:`OPTIMIZERS`, spelled exactly (:func:`check_optimizer_name`)."""
    return check_optimizer_name(optimizer, OPTIMIZERS)


def check_memory(name: str, memory):
    """A memory value or array (1 at init, 0 forgotten; signed): finite. NaN raises ValueError
    naming the field: a NaN memory is neither forgotten nor kept, so it is never compared with a
    level. Returns a float for a scalar input, else the float64 array."""
    arr = _as_float64(name, memory)
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"{name} must be finite (got {memory!r}): a NaN or infinite memory is neither "
            "forgotten nor kept"
        )
    return float(arr) if arr.ndim == 0 else arr


def check_steps(steps) -> float | int:
    """Steps: an integer >= 0, or ``numpy.inf`` for the limit T -> infinity."""
    if steps == np.inf:
        return np.inf
    return check_integer("steps", steps, low=0)


def check_data(X, y=None) -> tuple[np.ndarray, np.ndarray | None]:
    """A non-empty finite (n, d) data matrix and, if given, a finite target vector of shape (n,)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n, d), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite")
    if y is not None:
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise ValueError("y must be finite")
    return X, y
