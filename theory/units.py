"""Units of forgetting: every candidate clock of a training pipeline, from its schedule and its init.

Setting. A pipeline trains for T optimizer steps with per-step learning rate ``lr_t`` (the base rate
times the schedule's factor), heavy-ball momentum ``mu`` (SGD and RMSprop; Adam-family optimizers
count ``mu = 0``: their first moment averages gradients but does not lengthen the long-run step),
coupled L2 ``l2`` (added to the gradient, so it rides the momentum buffer), decoupled decay
``weight_decay`` (``w <- w - lr_t weight_decay w`` outside the optimizer's statistics), batch size
``b``, ``steps_per_epoch`` steps per epoch, and BatchNorm-followed (scale-invariant) conv weights
whose alpha = 1 init has ``d`` coordinates and squared norm ``|w_0|^2``. Only numbers enter: the
model at init is summarized by ``inv_init_sq_per_coord = mean over those layers of d / |w_0|^2``.

Conventions. ``eta_t = lr_t / (1 - mu)`` is the long-run step of heavy ball. Every unit is a sum over
steps of a per-step increment (:func:`unit_increments`), dimensionless except ``epochs`` and
``steps``:

* ``epochs`` ``1 / steps_per_epoch`` and ``steps`` 1 per step: the clocks the paper argues against;
* ``explicit`` ``lr_t (l2 / (1 - mu) + weight_decay)``: explicit decay contracts a weight by
  ``exp(-explicit)`` (:func:`initmem.theory.normalized.sgd_norm_law`: coupled L2 acts through the
  momentum buffer, decoupled decay does not);
* ``sgd_noise`` ``eta_t^2 / b``: a scale-invariant weight's ``|w|^4`` grows by ``2 eta_t^2 |g_t|^2``
  per SGD step, and the minibatch part of ``|g_t|^2`` scales as ``1 / b`` (the paper's
  ``eta^2 T / b``);
* ``adam`` ``eta_t^2 d / |w_0|^2``: an adaptive step has size ~``lr`` per coordinate, so ``|w|^2``
  grows by ~``lr^2 d`` per step; divided by the alpha = 1 init norm this is the relative growth
  (:class:`initmem.theory.normalized.AdaptiveMeanField`);
* ``accumulated`` = ``explicit + sgd_noise`` (SGD) or ``explicit + adam`` (Adam, AdamW, RMSprop):
  *accumulated regularization*, the unit the paper proposes. Level 1 is where the regularization has
  had an effect of order the init (``e``-fold contraction, or growth equal to the alpha = 1 norm).

Derivation. Derived here from the one-step identities of :mod:`initmem.theory.normalized` (cited
there). With ``mu = 0`` and ``inv_init_sq_per_coord = 1`` the sums are the momentum-free sums of
:mod:`initmem.theory.schedule` (``explicit``, ``sgd_noise``, ``adam``); with momentum those are not
the accumulated regularization. :func:`initmem.theory.forgetting.predict_forgetting` reports
:func:`accumulated_units` (``ForgettingReport.accumulated``).

The same function serves the dry run of a sweep (``initmem sweep run FILE --dry-run``: the schedule
from the config, ``d / |w_0|^2`` from the model built at init, nothing trained) and the bridge
(:func:`initmem.bridge.units.run_unit_increments`: ``d / |w_0|^2`` read from the logged init norms).

The accumulated unit read as a norm law (:func:`accumulated_norm_memory`, derived here). Level 1 of
``accumulated`` means an effect of order the init; taking that literally, the squared norm of a
scale-invariant weight in units of its alpha = 1 init, ``n_t = |w_t|^2 / |w_0(1)|^2``, obeys

    n_{t+1} = (1 - explicit_t)^2 n_t + noise_t,     n_0 = alpha^2 (ref^2 for the reference),  (U1)

with ``explicit_t`` and ``noise_t`` the per-step increments of ``explicit`` and of the pipeline's
noise unit (:func:`noise_unit`). For an adaptive optimizer (U1) is the mean field
``|w|^2' = (1 - lr wd)^2 |w|^2 + lr^2 d`` of :class:`initmem.theory.normalized.AdaptiveMeanField`
without the second moment's lag, divided by ``|w_0(1)|^2``; for SGD it is an idealization that
puts the minibatch gradient's growth of ``|w|^2`` at ``(lr / (1 - mu))^2 / b`` per step in init
units (the normalized-weight law, ``|w|^4`` growing by ``2 eta^2 |g_hat|^2``, needs the measured
gradient scale ``|g_hat|^2``, which a design does not have). The norm memory of alpha against a
reference (criterion (1) of :mod:`initmem.theory.criterion`) is then

    m_t = ln(n_t(alpha) / n_t(ref)) / ln(alpha^2 / ref^2),                                  (U2)

1 at init; explicit decay alone leaves it at 1 (both norms contract alike) and it falls only when
the growth term matters against the contracted norms. It is the design's prediction of when alpha is
forgotten (:func:`forgetting_step`): a statement before training, which the study then measures.
"""

from __future__ import annotations

import math

import numpy as np

from .checks import check_integer, check_momentum, check_number

#: Candidate units of forgetting, in the order the tables list them.
UNITS = ("epochs", "steps", "explicit", "sgd_noise", "adam", "accumulated")
#: One line per unit: its per-step increment.
UNIT_DEFINITIONS = {
    "epochs": "epochs of training",
    "steps": "optimizer steps",
    "explicit": "sum_t lr_t (l2 / (1 - mu) + weight_decay)",
    "sgd_noise": "sum_t (lr_t / (1 - mu))^2 / batch_size",
    "adam": "sum_t (lr_t / (1 - mu))^2 d / |w_0|^2 (|w_0| at alpha = 1)",
    "accumulated": "explicit + sgd_noise (SGD) or explicit + adam (Adam, AdamW, RMSprop)",
    "theory": "-ln(norm memory predicted by the normalized-weight law)",
}
#: Optimizers whose noise unit is ``adam`` (fixed-size steps); the others use ``sgd_noise``.
ADAPTIVE = ("adam", "adamw", "rmsprop")
#: Optimizers whose ``momentum`` multiplies the long-run step (heavy ball).
HEAVY_BALL = ("sgd", "rmsprop")


def unit_increments(
    lrs,
    *,
    optimizer: str,
    batch_size: int,
    steps_per_epoch: int,
    momentum: float = 0.0,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    inv_init_sq_per_coord: float = math.nan,
) -> dict[str, np.ndarray]:
    """Per-step increment of every unit of :data:`UNITS` (module docstring), one array per unit.

    ``lrs``: the learning rate of each step (1-d, >= 0, the schedule applied); ``optimizer`` names
    the optimizer (``momentum`` counts only for :data:`HEAVY_BALL` ones); ``inv_init_sq_per_coord``:
    mean over the scale-invariant layers of ``d / |w_0|^2`` at alpha = 1 (NaN leaves ``adam``, and
    ``accumulated`` of an adaptive optimizer, undefined). Derived here (module docstring).
    """
    lrs = np.asarray(check_number("lrs", lrs, nonempty=False))
    if lrs.ndim != 1:
        raise ValueError("lrs must be a 1-d sequence of learning rates, one per step")
    check_integer("batch_size", batch_size)
    check_integer("steps_per_epoch", steps_per_epoch)
    check_momentum(momentum)
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    mu = momentum if optimizer in HEAVY_BALL else 0.0
    eff_sq = (lrs / (1.0 - mu)) ** 2
    out = {
        "epochs": np.full(len(lrs), 1.0 / steps_per_epoch),
        "steps": np.ones(len(lrs)),
        "explicit": lrs * (l2 / (1.0 - mu) + weight_decay),
        "sgd_noise": eff_sq / batch_size,
        "adam": eff_sq * float(inv_init_sq_per_coord),
    }
    out["accumulated"] = out["explicit"] + out[noise_unit(optimizer)]
    return out


def noise_unit(optimizer: str) -> str:
    """The noise unit that ``accumulated`` adds to ``explicit`` for ``optimizer``: ``"adam"``
    (fixed-size steps, :data:`ADAPTIVE`) or ``"sgd_noise"``."""
    return "adam" if optimizer in ADAPTIVE else "sgd_noise"


def accumulated_units(lrs, **settings) -> dict[str, float]:
    """Every unit of :data:`UNITS` summed over the whole run: ``{unit: total}`` (plus ``steps``).

    Same arguments as :func:`unit_increments` (keyword settings after ``lrs``).
    """
    return {unit: float(np.sum(inc)) for unit, inc in unit_increments(lrs, **settings).items()}


def inv_init_sq_per_coord(numels, init_norm_sq) -> float:
    """Mean over layers of ``d / |w_0|^2``: the model-at-init number the ``adam`` unit needs.

    ``numels``: coordinates of each scale-invariant layer; ``init_norm_sq``: its squared norm at
    alpha = 1 (same order). NaN for no layer.
    """
    numels = np.asarray(numels, dtype=np.float64)
    norms = np.asarray(init_norm_sq, dtype=np.float64)
    if numels.shape != norms.shape:
        raise ValueError("numels and init_norm_sq must have one entry per layer")
    if numels.size == 0:
        return math.nan
    if np.any(norms <= 0) or np.any(numels <= 0):
        raise ValueError("numels and init_norm_sq must be positive")
    return float(np.mean(numels / norms))


def accumulated_norm_memory(explicit, noise, alpha: float, reference: float = 1.0) -> np.ndarray:
    """Norm memory ``m_t`` after each step by the accumulated unit's norm law, (U1) and (U2) of the
    module docstring (derived here).

    ``explicit``, ``noise``: per-step increments of ``explicit`` and of the pipeline's noise unit
    (:func:`unit_increments`, ``noise_unit(optimizer)``), same length; ``alpha`` and ``reference``
    the two init scales (positive, different). Dimensionless; ``m`` after step ``t`` is entry
    ``t - 1`` (an empty schedule gives an empty array).
    """
    explicit = np.asarray(
        check_number("explicit", explicit, high=1.0, nonempty=False), dtype=np.float64
    )
    noise = np.asarray(check_number("noise", noise, nonempty=False), dtype=np.float64)
    if explicit.shape != noise.shape or explicit.ndim != 1:
        raise ValueError("explicit and noise must be 1-d, one entry per step, of the same length")
    check_number("alpha", alpha, strict=True)
    check_number("reference", reference, strict=True)
    if alpha == reference:
        raise ValueError(f"alpha and reference must differ (both {alpha:g})")
    contraction = (1.0 - explicit) ** 2
    norms = np.empty((len(explicit), 2))
    state = np.array([alpha**2, reference**2], dtype=np.float64)
    for step, (factor, growth) in enumerate(zip(contraction, noise, strict=True)):
        state = factor * state + growth
        norms[step] = state
    return np.log(norms[:, 0] / norms[:, 1]) / math.log(alpha**2 / reference**2)


def forgetting_step(memory, level: float = math.exp(-1.0)) -> float:
    """The first step (1-based) after which ``memory`` (one entry per step, e.g.
    :func:`accumulated_norm_memory`) is at or below ``level`` (default 1/e: the shared criterion,
    :data:`initmem.theory.criterion.FORGETTING`); ``inf`` if it stays above it: censored by the
    run's end."""
    hit = np.flatnonzero(np.asarray(memory, dtype=np.float64) <= level)
    return float(hit[0] + 1) if hit.size else math.inf


__all__ = [
    "ADAPTIVE",
    "HEAVY_BALL",
    "UNITS",
    "UNIT_DEFINITIONS",
    "accumulated_norm_memory",
    "accumulated_units",
    "forgetting_step",
    "inv_init_sq_per_coord",
    "noise_unit",
    "unit_increments",
]
