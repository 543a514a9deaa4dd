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
* ``sgd_noise`` ``eta_t^2 / b``: a G-free *proxy*, for designing sweeps before any gradient is
  measured. The law (:func:`law_increments`) is that a scale-invariant weight's ``|w|^4`` grows by
  ``2 eta_t^2 G_t`` per SGD step (``G = |g|^2 |w|^2``, identity of :mod:`initmem.theory.normalized`),
  so in init units ``n = |w|^2 / |w_0|^2`` the term is ``2 eta_t^2 G_t / |w_0|^4`` on ``n^2``; the
  proxy puts ``G / |w_0|^4 = 1 / (2 b)`` on ``n`` instead, which is right in neither the power nor
  the scale (:func:`proxy_error` measures how far its memory is from the law's);
* ``adam`` ``eta_t^2 d / |w_0|^2``: an adaptive step has size ~``lr`` per coordinate, so ``|w|^2``
  grows by ~``lr^2 d`` per step; divided by the alpha = 1 init norm this is the relative growth
  (:class:`initmem.theory.normalized.AdaptiveMeanField`). The law's preconditioned form puts the
  measured ``P = sum_i g_i^2 / v_hat_i`` in place of ``d`` (``d`` is the proxy ``rho = 1``);
  coupled L2 under Adam / RMSprop is divided by ``sqrt(v)`` (Adam preconditions the L2 gradient
  too): its decay per step is ``lr l2 / sqrt(v)``, not ``lr l2`` (:func:`law_increments`; without
  a measured ``sqrt(v)`` :func:`unit_increments` keeps ``lr l2``, a proxy with ``sqrt(v) = 1``);
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

from .checks import check_integer, check_momentum, check_number, check_optimizer

#: Candidate units of forgetting, in the order the tables list them.
UNITS = ("epochs", "steps", "explicit", "sgd_noise", "adam", "accumulated")
#: One line per unit: its per-step increment.
UNIT_DEFINITIONS = {
    "epochs": "epochs of training",
    "steps": "optimizer steps",
    "explicit": "sum_t lr_t (l2 / (1 - mu) + weight_decay)",
    "sgd_noise": "sum_t (lr_t / (1 - mu))^2 / batch_size (a G-free proxy of the law's "
    "2 (lr_t / (1 - mu))^2 G_t / |w_0|^4 on |w|^4)",
    "adam": "sum_t (lr_t / (1 - mu))^2 d / |w_0|^2 (|w_0| at alpha = 1; d: the proxy rho = 1 of the "
    "law's preconditioned sum_i g_i^2 / v_i)",
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
    check_optimizer(optimizer)
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


def update_contraction(
    lr: float, *, optimizer: str, momentum: float = 0.0, l2: float = 0.0, weight_decay: float = 0.0
) -> float:
    """The contraction ``c`` of the update form ``w' = c w - lr u`` in which the trainer logs a
    scale-invariant weight's update (identity (2) of :mod:`initmem.theory.normalized`; derived
    here): ``1 - lr (l2 / (1 - momentum) + weight_decay)`` for SGD (coupled L2 rides the heavy-ball
    buffer, so its long-run decay is taken out and ``u`` is, up to the buffer's transient, the
    gradient part), ``1 - lr weight_decay`` for Adam, AdamW and RMSprop (their coupled L2 passes
    through the preconditioner and stays in ``u``). Dimensionless."""
    check_number("lr", lr)
    check_momentum(momentum)
    if optimizer == "sgd":
        return 1.0 - lr * (l2 / (1.0 - momentum) + weight_decay)
    return 1.0 - lr * weight_decay


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


def accumulated_norm_memory(
    explicit, noise, alpha: float, reference: float = 1.0, *, power: int = 1, noise_alpha=None
) -> np.ndarray:
    """Norm memory ``m_t`` after each step by the accumulated unit's norm law, (U1) and (U2) of the
    module docstring (derived here), or by the law of :func:`law_increments` (``power`` 2 for SGD:
    the recursion runs on ``z = n^2 = |w|^4 / |w_0|^4``, contraction ``(1 - explicit)^4``).

    ``explicit``, ``noise``: per-step increments of ``explicit`` and of the pipeline's noise term
    (:func:`unit_increments` / :func:`law_increments`), same length; ``noise_alpha``: the noise of
    the run at ``alpha`` where it differs from the reference's (a gradient scale measured per
    alpha); ``alpha`` and ``reference`` the two init scales (positive, different). Dimensionless;
    ``m`` after step ``t`` is entry ``t - 1`` (an empty schedule gives an empty array).
    """
    explicit = np.asarray(
        check_number("explicit", explicit, high=1.0, nonempty=False), dtype=np.float64
    )
    noise = np.asarray(check_number("noise", noise, nonempty=False), dtype=np.float64)
    noise_alpha = (
        noise
        if noise_alpha is None
        else np.asarray(check_number("noise_alpha", noise_alpha, nonempty=False), dtype=float)
    )
    if explicit.shape != noise.shape or explicit.ndim != 1 or noise_alpha.shape != noise.shape:
        raise ValueError("explicit and noise must be 1-d, one entry per step, of the same length")
    check_number("alpha", alpha, strict=True)
    check_number("reference", reference, strict=True)
    if power not in (1, 2):
        raise ValueError(f"power must be 1 (|w|^2) or 2 (|w|^4) (got {power!r})")
    if alpha == reference:
        raise ValueError(f"alpha and reference must differ (both {alpha:g})")
    contraction = (1.0 - explicit) ** (2 * power)
    norms = np.empty((len(explicit), 2))
    state = np.array([alpha ** (2 * power), reference ** (2 * power)], dtype=np.float64)
    for step, (factor, grow_alpha, grow_ref) in enumerate(
        zip(contraction, noise_alpha, noise, strict=True)
    ):
        state = factor * state + np.array([grow_alpha, grow_ref])
        norms[step] = state
    return np.log(norms[:, 0] / norms[:, 1]) / (power * math.log(alpha**2 / reference**2))


def law_increments(
    lrs,
    *,
    optimizer: str,
    init_norm_sq: float,
    momentum: float = 0.0,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    grad_sq_unit=math.nan,
    precond_grad_sq=math.nan,
    grad_rms_per_coord=math.nan,
) -> dict[str, np.ndarray | int]:
    """The law's per-step decay and noise in init units, with the gradient scale (derived here).

    ``n = |w|^2 / |w_0|^2`` (``init_norm_sq`` = ``|w_0|^2``, the alpha = 1 init) and ``z = n^p``
    obey ``z' = (1 - explicit)^(2 p) z + noise`` (the recursion of
    :func:`accumulated_norm_memory` with ``power = p``):

    * SGD (heavy ball), ``p = 2``: from ``|w'|^2 = (1 - kappa)^2 |w|^2 + eta^2 G / |w|^2``
      (identity (2) of :mod:`initmem.theory.normalized` with ``<w, g> = 0``; mean field for mu > 0),
      squaring and dropping ``eta^4 G^2 / |w|^4``: ``explicit = kappa = lr (l2 / (1 - mu) + wd)``,
      ``noise = 2 (1 - kappa)^2 eta^2 G / |w_0|^4``, ``eta = lr / (1 - mu)``. ``grad_sq_unit``: G
      per step (scalar or one per step) *of the run at that alpha*.
    * Adam, AdamW, RMSprop, ``p = 1``: ``|w'|^2 = c^2 |w|^2 + eta^2 P`` in the mean field, ``P =
      sum_i g_i^2 / v_hat_i`` (``precond_grad_sq``; ``eta = lr``, RMSprop ``lr / (1 - mu)``):
      ``noise = eta^2 P / |w_0|^2``. Coupled L2 enters as ``l2 w_i / sqrt(v_i)``, so ``explicit =
      lr (wd + l2 / grad_rms_per_coord)`` with ``grad_rms_per_coord`` the typical ``sqrt(v_hat)``
      (per step or scalar; NaN with l2 > 0 leaves ``explicit`` NaN: no silent proxy).

    Returns ``{"explicit": array, "noise": array, "power": p}``. Units: per optimizer step.
    """
    lrs = np.asarray(check_number("lrs", lrs, nonempty=False), dtype=np.float64)
    check_number("init_norm_sq", init_norm_sq, strict=True)
    check_momentum(momentum)
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    if optimizer not in (*ADAPTIVE, "sgd"):
        raise ValueError(f"optimizer must be one of {['sgd', *ADAPTIVE]} (got {optimizer!r})")
    mu = momentum if optimizer in HEAVY_BALL else 0.0
    eta = lrs / (1.0 - mu)
    if optimizer == "sgd":
        kappa = lrs * (l2 / (1.0 - mu) + weight_decay)
        g = np.broadcast_to(np.asarray(grad_sq_unit, dtype=np.float64), lrs.shape)
        noise = 2.0 * (1.0 - kappa) ** 2 * eta**2 * g / init_norm_sq**2
        return {"explicit": kappa, "noise": noise, "power": 2}
    rms = np.broadcast_to(np.asarray(grad_rms_per_coord, dtype=np.float64), lrs.shape)
    coupled = lrs * l2 / rms if l2 > 0 else np.zeros_like(lrs)
    p = np.broadcast_to(np.asarray(precond_grad_sq, dtype=np.float64), lrs.shape)
    return {
        "explicit": lrs * weight_decay + coupled,
        "noise": eta**2 * p / init_norm_sq,
        "power": 1,
    }


def proxy_error(
    lrs,
    *,
    batch_size: int,
    grad_sq_unit,
    init_norm_sq: float,
    alpha: float,
    momentum: float = 0.0,
    l2: float = 0.0,
    weight_decay: float = 0.0,
) -> float:
    """How far the G-free ``sgd_noise`` proxy's norm memory at the end of an SGD run is from the
    law's (:func:`law_increments`, ``G`` alpha-free here): ``m_proxy - m_law`` (dimensionless).
    What a design built on the proxy gets wrong, given a measured ``G``."""
    settings = dict(momentum=momentum, l2=l2, weight_decay=weight_decay)
    proxy = unit_increments(
        lrs, optimizer="sgd", batch_size=batch_size, steps_per_epoch=1, **settings
    )
    law = law_increments(
        lrs, optimizer="sgd", init_norm_sq=init_norm_sq, grad_sq_unit=grad_sq_unit, **settings
    )
    m_proxy = accumulated_norm_memory(proxy["explicit"], proxy["sgd_noise"], alpha)
    m_law = accumulated_norm_memory(law["explicit"], law["noise"], alpha, power=2)
    return float(m_proxy[-1] - m_law[-1])


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
    "law_increments",
    "noise_unit",
    "proxy_error",
    "unit_increments",
    "update_contraction",
]
