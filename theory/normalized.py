r"""Scale-invariant (BatchNorm-followed) weights: exact one-step norm identities, norm laws, forgetting.

Setting and conventions
-----------------------
A weight group ``w`` (one conv filter, or a whole conv layer, followed by BatchNorm) with ``d``
coordinates, loss invariant to ``w -> c w`` (c > 0). Differentiating ``L(c w) = L(w)`` gives

    <w, g> = 0,        g(w) = g_hat(w / |w|) / |w|,                                           (1)

``g_hat`` the gradient at unit norm. So the init scale ``alpha`` (w_0 = alpha * w_0_default) only sets
the *effective learning rate* ``lr / |w|^2``: the memory of ``alpha`` is the memory of ``|w|^2``.

Optimizer conventions (``docs/run-format.md``, ``initmem.empirical.optim``): ``l2`` is coupled, added
to the gradient as ``torch.optim.SGD`` / ``Adam`` / ``RMSprop`` do (``u = g + l2 * w``); ``weight_decay``
is decoupled, ``w <- w - lr * weight_decay * w`` as ``torch.optim.AdamW`` does (the decay is multiplied
by ``lr``), both computed from the pre-step weights. Momentum is heavy ball as in ``torch.optim.SGD``:
``buf <- mu buf + u``, ``w <- w - lr buf`` (Nesterov is treated like heavy ball: the same long-run
effective rate).

Exact one-step identities (any loss; (1) then drops the ``<w, .>`` terms)
--------------------------------------------------------------------------
Every optimizer here does ``w' = c w - lr u`` with ``c = 1 - lr * weight_decay`` and ``u`` its update
direction (SGD: ``g + l2 w``; momentum: the new buffer; Adam: ``m_hat / (sqrt(v_hat) + eps)``), so

    |w'|^2 = c^2 |w|^2 - 2 c lr <w, u> + lr^2 |u|^2.                                         (2)

SGD: ``|w'|^2 = a^2 |w|^2 - 2 a lr <w, g> + lr^2 |g|^2`` with ``a = 1 - lr (l2 + wd)``; with (1):
``|w'|^2 = a^2 |w|^2 + lr^2 |g|^2``. Momentum: with ``b' = mu b + g + l2 w`` and ``w' = c w - lr b'``,

    <w, b'> = mu <w, b> + <w, g> + l2 |w|^2,
    |b'|^2  = mu^2 |b|^2 + |g|^2 + l2^2 |w|^2 + 2 mu <b, g> + 2 l2 (mu <w, b> + <w, g>),
    |w'|^2  = c^2 |w|^2 - 2 c lr <w, b'> + lr^2 |b'|^2,   <w', b'> = c <w, b'> - lr |b'|^2,   (3)

a closed recursion for (|w|^2, <w, b>, |b|^2) given the step's |g|^2, <b, g> (and <w, g> = 0).

Laws (mean field: the per-step |g_hat|^2 replaced by a constant G; the proofs are one line each)
-------------------------------------------------------------------------------------------------
* Gradient flow conserves |w|^2: d|w|^2/dt = -2 <w, g> = 0. The memory of alpha is kept forever.
* SGD without decay: squaring ``|w'|^2 = |w|^2 + lr^2 G / |w|^2`` gives, exactly,
  ``|w'|^4 = |w|^4 + 2 lr^2 |g_hat|^2 + lr^4 |g_hat|^4 / |w|^4``, so
  ``|w_T|^4 = |w_0|^4 + 2 lr^2 sum_t |g_hat_t|^2`` up to the positive O(lr^4) term: the squared norm
  grows like sqrt(T). Gradient noise puts a part ``s / b`` in |g_hat|^2 (``s`` the per-example
  trace at unit norm), which makes the accumulated SGD noise ``sum_t lr_t^2 / b`` the unit.
* SGD + decay: ``x' = a^2 x + lr^2 G / x`` (x = |w|^2). Its fixed point is
  ``x*^2 = lr^2 G / (1 - a^2) ~ lr G / (2 lambda)`` (with l2 only: ``lr G / (l2 (2 - lr l2))``),
  independent of alpha. Squaring, ``y = x^2 = |w|^4`` obeys the *linear* recursion
  ``y' = a^4 y + 2 a^2 lr^2 G`` (+ lr^4 G^2 / y, dropped), so
  ``y_t = y* + (y_0 - y*) a^(4 t)`` with ``y* = 2 a^2 lr^2 G / (1 - a^4)``: |w|^4 relaxes to the
  equilibrium with time constant ``-1 / (4 ln a) ~ 1 / (4 lr lambda)`` steps (|w|^2 deviations
  near equilibrium relax at the same rate: the linearized map has slope 2 a^2 - 1 ~ 1 - 4 lr lambda).
* Momentum mu (heavy ball): for gradients uncorrelated across steps, summing the cross terms of (3),
  ``E <w_t, b_{t+1}> = -lr G' mu / ((1 - mu)^2 (1 + mu))`` and ``E |b|^2 = G' / (1 - mu^2)``
  (G' = G / |w|^2), so ``E delta|w|^2 = lr^2 G' / (1 - mu)^2``: the effective rate is
  ``lr / (1 - mu)``. The coupled L2 term enters the buffer and is summed over 1 / (1 - mu) steps:
  the decay rate per step is ``kappa = lr l2 / (1 - mu) + lr weight_decay`` (decoupled decay never
  enters the buffer). Both laws above hold with ``lr -> lr / (1 - mu)`` and ``a -> 1 - kappa``.
* Adam: the update ``u = m_hat / sqrt(v_hat)`` does not scale with |w| (both scale as 1/|w|). With
  ``m`` a (1 - beta1)-weighted heavy ball on ``D g`` (``D = diag(v^-1/2)``) the same cross-term sum
  gives ``E delta|w|^2 = lr^2 sum_i E[g_i^2 / v_i] ~ lr^2 d`` per step, whatever beta1 and the
  gradient's size: ``|w_t|^2 = |w_0|^2 + rho lr^2 d t`` (``rho`` = 1, the per-coordinate mean square
  of the normalized update). Valid while |w|^2 changes little over the 1 / (1 - beta2) steps that
  ``v`` averages, i.e. ``lr^2 d / (1 - beta2) << |w|^2``; otherwise v's lag (v remembers the larger
  gradients of the smaller past norm) slows the growth, several-fold with torch's default init in
  wide layers at lr 1e-3: :class:`AdaptiveMeanField` tracks v and stays accurate there.
  RMSprop: the same with ``lr / (1 - mu)`` for its momentum.
* AdamW: ``x' = c^2 x + rho lr^2 d``, so ``x_t = x* + (x_0 - x*) c^(2 t)`` with
  ``x* = rho lr^2 d / (1 - c^2) ~ rho lr d / (2 weight_decay)`` (independent of alpha) and time
  constant ``-1 / (2 ln c) ~ 1 / (2 lr weight_decay)`` steps.
* Adam / RMSprop with coupled L2: the decay term ``l2 w / sqrt(v)`` depends on how v splits between
  noise and decay; no closed form. :class:`AdaptiveMeanField` integrates the mean-field ODE of
  (|w|^2, v) (Gaussian coordinates), which also covers the lag of v that the laws above neglect.

Angular update at equilibrium (4)
---------------------------------
The angle a step turns the weight by, ``theta_t = angle(w_t, w_{t+1})``, is the effective learning
rate as the network sees it. At the norm's equilibrium the injection balances the decay. SGD
without momentum: ``|w'|^2 = a^2 |w|^2 + lr^2 |g|^2`` at ``|w'| = |w|`` gives
``lr^2 |g|^2 / |w|^2 = 1 - a^2``, and the step ``a w - lr g`` (``g`` orthogonal to ``w``) turns by
``tan theta = lr |g| / (a |w|) = sqrt(1 - a^2) / a``, i.e. exactly ``theta* = arccos(a)``,
``a = 1 - lr (l2 + wd)``: ``theta* ~ sqrt(2 lr lambda)``. Heavy ball (mean field, gradients
uncorrelated across steps, as for the norm law): ``E |buf|^2 = |g|^2 / (1 - mu^2)`` and the
equilibrium ``|w|^4 = eta^2 G / (1 - (1 - kappa)^2) ~ eta^2 G / (2 kappa)`` (eta = lr / (1 - mu),
kappa = lr (l2 / (1 - mu) + wd)) give ``theta*^2 = lr^2 |buf|^2 / |w|^2``, so

    theta*^2 = 2 lr (l2 + (1 - mu) wd) / (1 + mu)        (small lr lambda; derived here),        (4)

which is ``2 lr l2 / (1 + mu)`` with coupled L2 (Wan et al. 2021; Kosson et al. 2024) and
``2 lr wd (1 - mu) / (1 + mu)`` with decoupled decay on SGD (derived here: the decay does not enter
the buffer, so momentum lowers the equilibrium angle by a further 1 - mu). AdamW: the norm's injection is ``lr^2 d`` per step whatever |w|, so ``x* ~ lr d / (2 wd)``;
the first moment ``m = (1 - beta1) sum_k beta1^k g`` moves each step by only
``|m|^2 = d (1 - beta1) / (1 + beta1)`` (successive steps are correlated), so
``theta*^2 = 2 lr wd (1 - beta1) / (1 + beta1)``: ``2 lr wd`` at beta1 = 0 (exactly
``arccos(1 - lr wd)`` in the same mean field), 0.053 times that at torch's beta1 = 0.9. RMSprop with
momentum mu: ``2 lr wd (1 - mu) / (1 + mu)`` as SGD. Adam / RMSprop with coupled L2: the equilibrium depends on the gradient's scale
through v (Kosson et al. 2024): no closed form here. :func:`equilibrium_angular_update`,
:func:`angular_update` (measured).

Where these laws sit in the literature (each agrees / differs as stated)
------------------------------------------------------------------------
* van Laarhoven 2017, "L2 Regularization versus Batch and Weight Normalization": with normalization
  L2 has no regularizing effect; it only rescales the effective learning rate ``lr / |w|^2``, and
  the norm settles where decay and gradient growth cancel. Agrees with (1)-(2) and the SGD + L2
  equilibrium; this module adds the exact one-step identity, that the equilibrium does not depend
  on alpha, and the relaxation time ``-1 / (4 ln(1 - kappa))`` of ``|w|^4``.
* Hoffer et al. 2018, "Norm matters: efficient and accurate normalization schemes in deep networks":
  the effective step of a normalized weight is ``lr / |w|^2`` and weight decay acts by controlling
  it; they fix the norm instead (bounded weight normalization). Agrees on the effective learning
  rate; differs in that this module derives how the norm (so alpha's memory) evolves rather than
  removing it.
* Li and Arora 2019 (ICLR 2020), "An exponential learning rate schedule for deep learning": GD with
  weight decay (and momentum) on scale-invariant losses equals GD without decay under an
  exponentially growing learning rate, ``(1 - lr lambda)^{-2t}`` without momentum. Agrees exactly
  with the contraction factor ``a^2`` per step of ``|w|^2`` in (2): rescaling w by ``a`` is the same
  as multiplying the next steps' lr by ``a^{-2}``.
* Li, Lyu and Arora 2020 (NeurIPS), "Reconciling modern deep learning with traditional optimization
  analyses: the intrinsic learning rate": the dynamics depend on ``lr * lambda`` (the intrinsic
  learning rate) and their Fast Equilibrium Conjecture says equilibrium comes in O(1 / (lr lambda))
  steps. Agrees: the relaxation time of the norm is ``1 / (4 lr lambda)`` steps (``(1 - mu) /
  (4 lr l2)`` with momentum) and the angle (4) depends only on ``lr lambda`` and mu. Differs in
  scope: their equilibrium is of the direction's distribution (it can mix more slowly); here only
  the norm and the angle's mean, in a mean field where gradients are uncorrelated across steps.
* Wan et al. 2021 (NeurIPS), "Spherical motion dynamics": SGD with momentum and (coupled) weight
  decay reaches an angular update ``sqrt(2 lr lambda / (1 + mu))`` per step. Agrees with (4) at
  wd = 0 (same mean-field assumptions); (4) adds decoupled decay.
* Kosson et al. 2024 (ICML), "Rotational equilibrium": expected equilibrium angular update per
  neuron ``sqrt(2 lr lambda / (1 + mu))`` for SGD with momentum and, for AdamW,
  ``sqrt(2 lr lambda (1 - beta1) / (1 + beta1))``, in a random-walk model (often quoted as
  ``sqrt(2 lr lambda)``, its beta1 = 0 value); Adam + L2 unbalanced. Agrees with (4) and the AdamW
  case, checked against simulation at beta1 = 0 and 0.9 (the factor (1 - beta1) / (1 + beta1)
  is 0.053 at torch's default: the plain ``sqrt(2 lr lambda)`` would overstate the angle 4.4x);
  their per-neuron grouping is this module's per-filter group.

Forgetting of alpha
-------------------
Every case above is ``z_{t+1} = q_t z_t + D_t`` for ``z = |w|^(2p)`` (p = 2 SGD, p = 1 adaptive), so

    z_T(alpha) = Q_T (alpha^(2p) z_0 + S_T),   S_T = sum_{t<T} D_t / Q_{t+1},   Q_T = prod_{t<T} q_t,

and the memory, the log-ratio of effective learning rates between init scales alpha and 1, is

    m_T(alpha) = ln(|w_T(alpha)|^2 / |w_T(1)|^2) = (1/p) ln((alpha^(2p) z_0 + S_T) / (z_0 + S_T)),

which starts at ``2 ln alpha`` and decays to 0 as the alpha-independent injection ``S_T`` outgrows
``alpha^(2p) z_0``. *Forgetting time*: the first T with ``|m_T| <= tol`` (natural-log units; default
the shared criterion of :mod:`initmem.theory.criterion`, ``tol = |2 ln alpha| / e``: norm memory at
or below 1/e, one default for every function here and for ``predict_forgetting``), i.e. ``S_T >= K = z_0 (alpha^(2p) - r) / (r - 1)``
with ``r = exp(+-p tol)``. For constant q, D: ``T = ln(1 + K (1 - q) / D) / (-ln q)``, and
``T = K / D`` without decay. So T grows like alpha^4 (SGD) or alpha^2 (Adam) without decay, and
only like ``ln(alpha) / (lr lambda)`` with it. Units: optimizer steps (epochs = steps /
steps_per_epoch).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .checks import OPTIMIZERS, check_number, check_optimizer
from .criterion import FORGETTING
from .units import HEAVY_BALL

#: Placeholder for the per-example trace of the gradient covariance at unit filter norm, used when
#: no measured |g_hat|^2 is given (then G = this / batch_size). Supply a measured value where known.
DEFAULT_PER_EXAMPLE_GRAD_SQ_UNIT = 1.0


def log_ratio_tolerance(alpha: float, tol: float | None = None) -> float:
    """The absolute tolerance on ``|ln(eff_lr(alpha) / eff_lr(1))|``: ``tol`` when given, else the
    shared criterion's, ``|2 ln alpha| / e`` (:data:`initmem.theory.criterion.FORGETTING`: norm
    memory at or below 1/e). Every forgetting time of this module defaults to it, as
    :func:`initmem.theory.forgetting.predict_forgetting` does."""
    check_number("alpha", alpha, strict=True)
    if tol is not None:
        return check_number("tol", tol, strict=True)
    if alpha == 1.0:
        return FORGETTING.level  # nothing to forget: any positive tolerance gives time 0
    return FORGETTING.tolerance(2.0 * math.log(alpha))


# ------------------------------------------------------------------------------ one-step identities
def norm_sq_after_step(norm_sq, w_dot_update, update_norm_sq, lr, decay_factor=1.0):
    """Exact ``|w'|^2`` for ``w' = decay_factor * w - lr * u``: identity (2) of the module docstring.

    ``c^2 |w|^2 - 2 c lr <w, u> + lr^2 |u|^2`` with ``c = decay_factor`` (``1 - lr * weight_decay``
    for decoupled decay). Holds for any optimizer whose step has this form (SGD, momentum with u the
    new buffer, Adam/AdamW/RMSprop with u their normalized update). Arrays broadcast.
    """
    check_number("norm_sq", norm_sq)
    check_number("update_norm_sq", update_norm_sq)
    check_number("lr", lr, strict=True)
    c = np.asarray(decay_factor, dtype=np.float64)
    return c * c * norm_sq - 2.0 * c * lr * np.asarray(w_dot_update) + lr * lr * update_norm_sq


def sgd_norm_sq_after_step(norm_sq, grad_norm_sq, lr, l2=0.0, weight_decay=0.0, w_dot_grad=0.0):
    """Exact ``|w'|^2`` after one SGD step (no momentum): ``a^2 |w|^2 - 2 a lr <w, g> + lr^2 |g|^2``.

    ``a = 1 - lr (l2 + weight_decay)`` (both decays from the pre-step weights, as the trainer applies
    them). Scale invariance makes ``w_dot_grad`` 0, giving
    ``|w'|^2 = (1 - lr lambda)^2 |w|^2 + lr^2 |g|^2`` with ``|g|^2 = |g_hat|^2 / |w|^2``.
    ``grad_norm_sq`` is the loss gradient only (without the L2 term).
    """
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    a = 1.0 - lr * (l2 + weight_decay)
    return norm_sq_after_step(norm_sq, w_dot_grad, grad_norm_sq, lr, a)


@dataclass(frozen=True)
class MomentumNormState:
    """Inner products that close the momentum recursion (3): ``|w|^2``, ``<w, buf>``, ``|buf|^2``."""

    norm_sq: float
    w_dot_buf: float = 0.0
    buf_norm_sq: float = 0.0


def momentum_state_after_step(
    state: MomentumNormState,
    grad_norm_sq: float,
    buf_dot_grad: float,
    lr: float,
    momentum: float,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    w_dot_grad: float = 0.0,
) -> MomentumNormState:
    """Exact state after one heavy-ball step (``torch.optim.SGD``, dampening 0): recursion (3).

    ``buf' = momentum * buf + g + l2 * w``, then ``w' = (1 - lr weight_decay) w - lr buf'`` (the
    trainer's order: both decays from the pre-step weights). Inputs are the step's ``|g|^2``,
    ``<buf, g>`` and ``<w, g>`` (0 for a scale-invariant weight). torch's first step sets
    ``buf = g + l2 w``: start from a zero buffer.
    """
    check_number("momentum", momentum, high=1.0)
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    check_number("lr", lr, strict=True)
    check_number("grad_norm_sq", grad_norm_sq)
    c = 1.0 - lr * weight_decay
    x, wb, bb = state.norm_sq, state.w_dot_buf, state.buf_norm_sq
    w_dot_new = momentum * wb + w_dot_grad + l2 * x
    new_sq = (
        momentum**2 * bb
        + grad_norm_sq
        + l2 * l2 * x
        + 2.0 * momentum * buf_dot_grad
        + 2.0 * l2 * (momentum * wb + w_dot_grad)
    )
    return MomentumNormState(
        norm_sq=c * c * x - 2.0 * c * lr * w_dot_new + lr * lr * new_sq,
        w_dot_buf=c * w_dot_new - lr * new_sq,
        buf_norm_sq=new_sq,
    )


# ------------------------------------------------------------------------------------------- laws
def effective_lr(lr, momentum=0.0, optimizer="sgd"):
    """Long-run step multiplier: ``lr / (1 - momentum)`` for SGD and RMSprop, ``lr`` for Adam/AdamW.

    (Adam's ``(1 - beta1)`` in the first moment already cancels the ``1 / (1 - beta1)`` of the sum.)
    """
    check_optimizer(optimizer)
    check_number("momentum", momentum, high=1.0)
    return lr / (1.0 - momentum) if optimizer in HEAVY_BALL else lr


def decay_rate(lr, l2=0.0, weight_decay=0.0, momentum=0.0):
    """Per-step shrink rate ``kappa`` of w: ``lr l2 / (1 - momentum) + lr weight_decay`` (SGD).

    Coupled L2 enters the momentum buffer and is summed over 1 / (1 - mu) steps; decoupled decay is
    applied to w directly. Raises ValueError if ``kappa >= 1`` (an unstable step size for the decay).
    """
    check_number("lr", lr, strict=np.ndim(lr) == 0)  # a schedule may hold steps with lr 0
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    check_number("momentum", momentum, high=1.0)
    kappa = np.asarray(lr) * (np.asarray(l2) / (1.0 - momentum) + np.asarray(weight_decay))
    if np.any(kappa >= 1.0):
        raise ValueError(
            "lr is unstable for the decay: lr * (l2 / (1 - momentum) + weight_decay) must be < 1 "
            f"(got {np.max(kappa):.4g})"
        )
    return float(kappa) if np.ndim(kappa) == 0 else kappa


def sgd_norm4_after_steps(init_norm_sq, lr, grad_sq_unit_sum, momentum=0.0):
    """``|w_T|^4 = |w_0|^4 + 2 (lr / (1 - mu))^2 sum_t |g_hat_t|^2``: SGD without decay, in steps.

    Exact as a lower bound for mu = 0 (the dropped term ``lr^4 |g_hat|^4 / |w|^4`` is positive and
    second order in the effective step); mean field for mu > 0 (gradients uncorrelated across steps).
    ``grad_sq_unit_sum``: the sum over the T steps of |g_hat_t|^2 (gradient at unit norm, no L2).
    """
    check_number("init_norm_sq", init_norm_sq, strict=True)
    check_number("grad_sq_unit_sum", grad_sq_unit_sum)
    eta = effective_lr(check_number("lr", lr, strict=True), momentum)
    return np.asarray(init_norm_sq) ** 2 + 2.0 * eta**2 * np.asarray(grad_sq_unit_sum)


def sgd_equilibrium_norm_sq(lr, grad_sq_unit, l2=0.0, weight_decay=0.0, momentum=0.0):
    """Alpha-independent equilibrium ``|w*|^2`` of SGD with decay: ``sqrt(eta^2 G / (1 - a^2))``.

    ``eta = lr / (1 - mu)``, ``a = 1 - kappa`` (:func:`decay_rate`); for mu = 0 and l2 only it is the
    exact fixed point of ``x' = a^2 x + lr^2 G / x``: ``x*^2 = lr G / (l2 (2 - lr l2))``, about
    ``lr G / (2 l2)``. ``G``: mean |g_hat|^2 per step. ``inf`` without decay.
    """
    check_number("grad_sq_unit", grad_sq_unit)
    kappa = decay_rate(lr, l2, weight_decay, momentum)
    if kappa == 0:
        return math.inf
    if momentum == 0 and weight_decay == 0:
        return math.sqrt(lr * grad_sq_unit / (l2 * (2.0 - lr * l2)))
    eta = effective_lr(lr, momentum)
    return math.sqrt(eta**2 * grad_sq_unit / (1.0 - (1.0 - kappa) ** 2))


def sgd_relaxation_steps(lr, l2=0.0, weight_decay=0.0, momentum=0.0):
    """Time constant of |w|^4 -> equilibrium under SGD with decay: ``-1 / (4 ln(1 - kappa))`` steps.

    About ``1 / (4 lr lambda)`` (``(1 - mu) / (4 lr l2)`` with momentum and coupled L2). Derived from
    the linear recursion ``y' = (1 - kappa)^4 y + const`` of ``y = |w|^4`` (module docstring).
    """
    kappa = decay_rate(lr, l2, weight_decay, momentum)
    return math.inf if kappa == 0 else -1.0 / (4.0 * math.log1p(-kappa))


def adaptive_norm_sq_after_steps(init_norm_sq, lr, numel, steps, momentum=0.0, update_sq=1.0):
    """Adam / RMSprop without decay: ``|w_T|^2 = |w_0|^2 + rho eta^2 d T`` (d = ``numel``, in steps).

    ``eta = lr`` (Adam) or ``lr / (1 - momentum)`` (RMSprop with momentum); ``rho = update_sq`` the
    mean square per coordinate of the normalized update (1 by the module docstring's derivation).
    Independent of the gradient's size and of beta1.
    """
    check_number("init_norm_sq", init_norm_sq, strict=True)
    check_number("numel", numel, low=1.0)
    check_number("steps", steps)
    eta = check_number("lr", lr, strict=True) / (1.0 - check_number("momentum", momentum, high=1.0))
    return np.asarray(init_norm_sq) + update_sq * eta**2 * numel * np.asarray(steps, dtype=float)


def adamw_equilibrium_norm_sq(lr, weight_decay, numel, update_sq=1.0):
    """AdamW's alpha-independent equilibrium ``|w*|^2 = rho lr^2 d / (1 - (1 - lr wd)^2)``.

    About ``rho lr d / (2 weight_decay)``; ``inf`` without decay. d = ``numel`` coordinates.
    """
    kappa = decay_rate(lr, 0.0, weight_decay)
    check_number("numel", numel, low=1.0)
    if kappa == 0:
        return math.inf
    return update_sq * lr**2 * numel / (1.0 - (1.0 - kappa) ** 2)


def adamw_relaxation_steps(lr, weight_decay):
    """Time constant of |w|^2 -> AdamW's equilibrium: ``-1 / (2 ln(1 - lr wd)) ~ 1 / (2 lr wd)`` steps."""
    kappa = decay_rate(lr, 0.0, weight_decay)
    return math.inf if kappa == 0 else -1.0 / (2.0 * math.log1p(-kappa))


# --------------------------------------------------------------------- angular update (4)
def angular_update(w_before, w_after):
    """Angle (radians) between ``w_before`` and ``w_after`` along the last axis: what a step turned.

    ``arctan2(|w x w'|, <w, w'>)`` with ``|w x w'|^2 = |w|^2 |w'|^2 - <w, w'>^2``: accurate for
    small angles, where ``arccos`` of the cosine loses half the digits. Rows broadcast.
    """
    a = np.asarray(w_before, dtype=np.float64)
    b = np.asarray(w_after, dtype=np.float64)
    dot = np.sum(a * b, axis=-1)
    diff = b - a
    # |a x b|^2 = |a|^2 |b - a|^2 - <a, b - a>^2 (cancellation-free for b close to a)
    cross_sq = (
        np.sum(a * a, axis=-1) * np.sum(diff * diff, axis=-1) - np.sum(a * diff, axis=-1) ** 2
    )
    return np.arctan2(np.sqrt(np.maximum(cross_sq, 0.0)), dot)


def equilibrium_angular_update(
    lr, optimizer="sgd", momentum=0.0, l2=0.0, weight_decay=0.0, beta1=0.9
):
    """Angle per step at the norm's equilibrium, radians: (4) of the module docstring.

    SGD (heavy ball): ``sqrt(2 lr (l2 + (1 - mu) wd) / (1 + mu))``, exactly ``arccos(1 - lr (l2 +
    wd))`` without momentum. AdamW / Adam with decoupled ``weight_decay`` only:
    ``sqrt(2 lr wd (1 - beta1) / (1 + beta1))`` (``arccos(1 - lr wd)`` at beta1 = 0, the
    ``sqrt(2 lr wd)`` usually quoted); RMSprop with decoupled decay and momentum mu:
    ``sqrt(2 lr wd (1 - mu) / (1 + mu))``. Adam-family with coupled ``l2``: NaN (no closed form:
    the angle depends on the gradient's scale). 0 without decay (the norm grows forever and the
    angle tends to 0). Assumptions: mean field (gradients uncorrelated across steps), small
    ``lr * lambda``. Citations and where they agree: module docstring.
    """
    check_optimizer(optimizer)
    lr = check_number("lr", lr, strict=True)
    momentum = check_number("momentum", momentum, high=1.0)
    l2 = check_number("l2", l2)
    weight_decay = check_number("weight_decay", weight_decay)
    beta1 = check_number("beta1", beta1, high=1.0)
    decay_rate(lr, l2, weight_decay, momentum)  # stability of the decay
    if optimizer != "sgd" and l2 > 0:
        return math.nan
    if optimizer in ("adam", "adamw"):
        # m = (1 - b1) sum_k b1^k g: the norm's injection is lr^2 d (weights sum to 1), but each
        # step moves only |m|^2 = (1 - b1) / (1 + b1) d of it: the angle shrinks by that factor.
        if beta1 == 0.0:
            return math.acos(1.0 - lr * weight_decay)
        return math.sqrt(2.0 * lr * weight_decay * (1.0 - beta1) / (1.0 + beta1))
    if momentum == 0.0:
        return math.acos(1.0 - lr * (l2 + weight_decay))
    return math.sqrt(2.0 * lr * (l2 + (1.0 - momentum) * weight_decay) / (1.0 + momentum))


# -------------------------------------------------------------------------------- the norm law
@dataclass(frozen=True)
class NormLaw:
    """``z_{t+1} = q_t z_t + D_t`` for ``z = |w|^(2 power)``: every closed-form case of this module.

    ``contraction`` q and ``injection`` D are floats (constant hyperparameters) or 1-d arrays, one
    entry per optimizer step (a schedule). Built by :func:`sgd_norm_law` / :func:`adaptive_norm_law`.
    Times are in optimizer steps.
    """

    power: int
    contraction: float | np.ndarray
    injection: float | np.ndarray
    formula: str = ""

    @property
    def scheduled(self) -> bool:
        return np.ndim(self.contraction) > 0 or np.ndim(self.injection) > 0

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        q, d = np.broadcast_arrays(np.atleast_1d(self.contraction), np.atleast_1d(self.injection))
        return q.astype(float), d.astype(float)

    def _log_injected(self, steps) -> np.ndarray:
        """``ln S_T`` (``-inf`` when nothing is injected) at the given steps."""
        steps = np.asarray(steps, dtype=np.float64)
        if self.scheduled:
            q, d = self._arrays()
            if np.any(steps > len(q)) or np.any(steps < 0):
                raise ValueError(f"steps must lie in [0, {len(q)}] for this schedule (got {steps})")
            log_q = np.concatenate([[0.0], np.cumsum(np.log(q))])
            with np.errstate(divide="ignore"):
                terms = np.log(d) - log_q[1:]
            log_s = np.concatenate([[-np.inf], np.logaddexp.accumulate(terms)])
            return log_s[steps.astype(int)]
        q, d = float(self.contraction), float(self.injection)
        with np.errstate(divide="ignore"):
            if d == 0:
                return np.full(steps.shape, -np.inf)
            if q == 1.0:
                return np.log(d * steps)
            log_q = math.log(q)
            return math.log(d) + np.log(np.expm1(-log_q * steps)) - math.log1p(-q)

    def _log_contraction(self, steps) -> np.ndarray:
        steps = np.asarray(steps, dtype=np.float64)
        if self.scheduled:
            q, _ = self._arrays()
            log_q = np.concatenate([[0.0], np.cumsum(np.log(q))])
            return log_q[steps.astype(int)]
        return steps * math.log(float(self.contraction))

    def norm_sq(self, steps, init_norm_sq):
        """``|w_T|^2`` at ``steps`` (scalar or array) from ``|w_0|^2 = init_norm_sq``."""
        check_number("init_norm_sq", init_norm_sq, strict=True)
        log_z0 = self.power * np.log(init_norm_sq)
        log_z = self._log_contraction(steps) + np.logaddexp(log_z0, self._log_injected(steps))
        return np.exp(log_z / self.power)

    def log_ratio(self, steps, alpha, init_norm_sq):
        """Memory ``m_T = ln(|w_T(alpha)|^2 / |w_T(1)|^2)`` at ``steps``; ``2 ln alpha`` at T = 0."""
        check_number("alpha", alpha, strict=True)
        check_number("init_norm_sq", init_norm_sq, strict=True)
        p = self.power
        log_z0 = p * np.log(init_norm_sq)
        log_s = self._log_injected(steps)
        top = np.logaddexp(2 * p * np.log(alpha) + log_z0, log_s)
        return (top - np.logaddexp(log_z0, log_s)) / p

    def forgetting_steps(self, alpha, init_norm_sq, tol=None) -> float:
        """First step T with ``|m_T(alpha)| <= tol`` (module docstring); ``inf`` if never (or, with
        a schedule, not within it). ``tol`` None: the shared criterion (:func:`log_ratio_tolerance`).

        Constant law: ``ln(1 + K (1 - q) / D) / (-ln q)`` (``K / D`` for q = 1), with
        ``K = z_0 (alpha^(2p) - r) / (r - 1)``, ``r = exp(sign(ln alpha) p tol)``; a real number
        (the continuous solution of the recursion). Schedule: the first integer step reaching it,
        ``inf`` if the schedule ends first.
        """
        check_number("alpha", alpha, strict=True)
        check_number("init_norm_sq", init_norm_sq, strict=True)
        tol = log_ratio_tolerance(alpha, tol)
        p = self.power
        if abs(2.0 * math.log(alpha)) <= tol:
            return 0.0
        r = math.exp(math.copysign(p * tol, math.log(alpha)))
        log_k = p * math.log(init_norm_sq) + math.log((alpha ** (2 * p) - r) / (r - 1.0))
        if self.scheduled:
            log_s = self._log_injected(np.arange(len(self._arrays()[0]) + 1))
            hit = np.flatnonzero(log_s >= log_k)
            return float(hit[0]) if hit.size else math.inf
        q, d = float(self.contraction), float(self.injection)
        if d == 0:
            return math.inf
        if q == 1.0:
            return math.exp(log_k) / d
        return math.log1p(math.exp(log_k) * (1.0 - q) / d) / -math.log(q)

    def equilibrium_norm_sq(self) -> float:
        """Alpha-independent fixed point ``(D / (1 - q))^(1 / p)`` (``inf`` without decay; constant law)."""
        q, d = float(np.mean(self.contraction)), float(np.mean(self.injection))
        return math.inf if q >= 1.0 else (d / (1.0 - q)) ** (1.0 / self.power)

    def relaxation_steps(self) -> float:
        """E-folding time ``-1 / ln q`` of the contraction of ``z`` (``inf`` without decay; constant law)."""
        q = float(np.mean(self.contraction))
        return math.inf if q >= 1.0 else -1.0 / math.log(q)


def sgd_norm_law(lr, grad_sq_unit, *, momentum=0.0, l2=0.0, weight_decay=0.0) -> NormLaw:
    """``|w|^4`` law of SGD (heavy ball) on a scale-invariant weight: ``y' = a^4 y + 2 a^2 eta^2 G``.

    ``eta = lr / (1 - mu)``, ``a = 1 - kappa`` (:func:`decay_rate`), ``G = grad_sq_unit`` the mean
    |g_hat|^2 per step. Exact recursion (up to ``lr^4 G^2 / y``) for mu = 0; mean field for mu > 0.
    """
    check_number("grad_sq_unit", grad_sq_unit)
    kappa = decay_rate(lr, l2, weight_decay, momentum)
    eta = effective_lr(lr, momentum)
    a = 1.0 - kappa
    return NormLaw(
        power=2,
        contraction=a**4,
        injection=2.0 * a**2 * eta**2 * grad_sq_unit,
        formula="|w|^4' = (1-k)^4 |w|^4 + 2 (1-k)^2 (lr/(1-mu))^2 G,  k = lr (l2/(1-mu) + wd)",
    )


def adaptive_norm_law(lr, numel, *, momentum=0.0, weight_decay=0.0, update_sq=1.0) -> NormLaw:
    """``|w|^2`` law of Adam/AdamW/RMSprop: ``x' = c^2 x + rho eta^2 d`` (decoupled decay c only).

    ``eta = lr / (1 - momentum)`` (pass momentum = 0 for Adam), ``c = 1 - lr weight_decay``,
    ``d = numel``, ``rho = update_sq``. Valid while ``eta^2 d / (1 - beta2) << |w|^2`` (v's lag);
    coupled L2 is not covered. :class:`AdaptiveMeanField` covers both.
    """
    kappa = decay_rate(lr, 0.0, weight_decay)
    eta = effective_lr(lr, momentum, "rmsprop")
    check_number("numel", numel, low=1.0)
    check_number("update_sq", update_sq, strict=True)
    return NormLaw(
        power=1,
        contraction=(1.0 - kappa) ** 2,
        injection=update_sq * eta**2 * numel,
        formula="|w|^2' = (1-lr wd)^2 |w|^2 + lr^2 d",
    )


# -------------------------------------------------- adaptive optimizers: mean field with v's lag
_HERMITE_Z, _HERMITE_W = np.polynomial.hermite_e.hermegauss(48)
_HERMITE_W = _HERMITE_W / _HERMITE_W.sum()


@dataclass(frozen=True)
class AdaptiveMeanField:
    """Mean-field dynamics of ``(|w|^2, v)`` for Adam / AdamW / RMSprop on a scale-invariant group.

    Where :func:`adaptive_norm_law` needs ``|w|^2`` to change little over the ``1 / (1 - beta2)``
    steps that the second moment ``v`` averages, this ODE (in steps) tracks ``v`` itself::

        sigma^2 = G / (x d)                            (per-coordinate gradient variance, x = |w|^2)
        d ln v / dt = k(t) (sigma^2 / v - 1)           k = (1 - b2) / (1 - b2^(t+1)) for Adam's
                                                       bias-corrected v_hat, (1 - b2) for RMSprop
        d x / dt = eta^2 d E_z[(sigma^2 + s z^2) / (v + s z^2)] - 2 eta l2 x E_z[z^2 / sqrt(v + s z^2)]
                   + 2 ln(1 - lr_t wd) x,              s = l2^2 x / d, z ~ N(0, 1)

    ``eta`` = lr_t (Adam/AdamW) or lr_t / (1 - momentum) (RMSprop); RMSprop starts from
    ``v = (1 - b2) sigma^2`` (torch's un-corrected first step), Adam from ``v_hat = sigma^2``. The
    growth term is the Adam law with ``E[g_i^2 / v_i]`` in place of 1 (coupled L2 adds
    ``l2^2 w_i^2`` to ``v_i``, coordinates of w taken Gaussian); the decay term is
    ``2 eta <w, l2 w / sqrt(v)>``. The first :attr:`discrete_steps` run as the per-step recursion
    of the same rates. Without l2 the result does not depend on ``G``. Limitation: with coupled l2
    dominating v (``l2 |w|^2 >> |g_hat|``, sign-like updates) coordinates stop being Gaussian and v
    lags the shrinking weights: the forgetting time can then be off by a factor ~2. Checked against
    :func:`~initmem.theory.normalized_sim.simulate_norms` in the tests. ``lr_multipliers``: one per
    step (the schedule); beyond its end the run is over.
    """

    optimizer: str
    lr: float
    numel: int
    beta2: float = 0.999
    momentum: float = 0.0
    l2: float = 0.0
    weight_decay: float = 0.0
    grad_sq_unit: float = 1.0
    lr_multipliers: np.ndarray | None = None

    def __post_init__(self):
        if check_optimizer(self.optimizer) == "sgd":
            raise ValueError("optimizer must be one of ['adam', 'adamw', 'rmsprop'] (got 'sgd')")
        check_number("lr", self.lr, strict=True)
        check_number("numel", self.numel, low=1.0)
        check_number("beta2", self.beta2, high=1.0)
        check_number("momentum", self.momentum, high=1.0)
        check_number("l2", self.l2)
        check_number("grad_sq_unit", self.grad_sq_unit, strict=self.l2 > 0)
        peak = self.lr * (1.0 if self.lr_multipliers is None else np.max(self.lr_multipliers))
        decay_rate(peak, 0.0, self.weight_decay)
        if self.lr_multipliers is not None:
            check_number("lr_multipliers", self.lr_multipliers)

    @property
    def _eta_scale(self) -> float:
        return 1.0 / (1.0 - self.momentum) if self.optimizer == "rmsprop" else 1.0

    def _lr_at(self, t: float) -> float:
        if self.lr_multipliers is None:
            return self.lr
        idx = min(int(t), len(self.lr_multipliers) - 1)
        return self.lr * float(self.lr_multipliers[idx])

    @property
    def horizon(self) -> float:
        return math.inf if self.lr_multipliers is None else float(len(self.lr_multipliers))

    def _sigma_sq(self, x):
        return (self.grad_sq_unit if self.l2 > 0 else 1.0) / (x * self.numel)

    def _x_rate(self, x, v, lr):
        """``dx/dt`` at given x, v (arrays of runs) and current lr."""
        eta = lr * self._eta_scale
        sigma_sq = self._sigma_sq(x)
        if self.l2 == 0:
            growth, decay = eta * eta * self.numel * sigma_sq / v, 0.0
        else:
            s = (self.l2 * self.l2 * x / self.numel)[..., None] * _HERMITE_Z**2
            vv = v[..., None] + s
            growth = eta * eta * self.numel * (((sigma_sq[..., None] + s) / vv) @ _HERMITE_W)
            decay = 2.0 * eta * self.l2 * x * ((_HERMITE_Z**2 / np.sqrt(vv)) @ _HERMITE_W)
        return growth - decay + 2.0 * math.log1p(-lr * self.weight_decay) * x

    def _rhs(self, t, y):
        n = len(y) // 2
        x, v = np.exp(y[:n]), np.exp(y[n:])
        b2 = self.beta2
        k = (
            (1.0 - b2) / -math.expm1((t + 1.0) * math.log(b2))
            if self.optimizer != "rmsprop"
            else 1 - b2
        )
        dlogv = k * (self._sigma_sq(x) / v - 1.0)
        return np.concatenate([self._x_rate(x, v, self._lr_at(t)) / x, dlogv])

    @property
    def discrete_steps(self) -> int:
        """Steps run as the exact per-step recursion before the ODE takes over: ``3 / (1 - b2)``.

        Over the first ~1 / (1 - b2) steps v is far from its average (bias correction, RMSprop's
        small start) and sums over steps differ from integrals; the recursion keeps them exact.
        """
        return int(min(math.ceil(3.0 / (1.0 - self.beta2)), self.horizon))

    def _discrete(self, init_norm_sq) -> tuple[np.ndarray, np.ndarray]:
        """Per-step mean-field recursion: ``x`` at steps 0..discrete_steps (rows) and the final state.

        ``v <- b2 v + (1 - b2) sigma^2(x)`` (Adam divides by ``1 - b2^t``), then
        ``x <- (1 - lr wd)^2 x + growth - decay`` with the rates of the class docstring.
        """
        x = np.atleast_1d(np.asarray(init_norm_sq, dtype=np.float64)).copy()
        v_raw = np.zeros_like(x)
        b2 = self.beta2
        xs = [x.copy()]
        v = v_raw
        for t in range(1, self.discrete_steps + 1):
            lr = self._lr_at(t - 1)
            v_raw = b2 * v_raw + (1.0 - b2) * self._sigma_sq(x)
            v = v_raw / (1.0 - b2**t) if self.optimizer != "rmsprop" else v_raw
            shrink = (1.0 - lr * self.weight_decay) ** 2
            x = shrink * x + self._x_rate(x, v, lr) - 2.0 * math.log1p(-lr * self.weight_decay) * x
            xs.append(x.copy())
        return np.array(xs), np.log(np.concatenate([x, v]))

    def norm_sq(self, steps, init_norm_sq) -> np.ndarray:
        """``|w_t|^2`` at ``steps`` (sorted, >= 0) for each initial squared norm: (n_runs, n_steps)."""
        # deferred: scipy loads only when this computation runs
        from scipy.integrate import solve_ivp

        steps = np.atleast_1d(np.asarray(steps, dtype=np.float64))
        if np.any(np.diff(steps) < 0) or steps[0] < 0 or steps[-1] > self.horizon:
            raise ValueError(f"steps must be sorted within [0, {self.horizon}] (got {steps})")
        xs, y = self._discrete(init_norm_sq)
        n0 = len(xs) - 1
        early = steps <= n0
        out = np.empty((xs.shape[1], len(steps)))
        out[:, early] = xs[np.rint(steps[early]).astype(int)].T
        if np.any(~early):
            sol = solve_ivp(
                self._rhs,
                (float(n0), steps[-1]),
                y,
                method="LSODA",
                t_eval=steps[~early],
                rtol=1e-8,
                atol=1e-10,
            )
            if not sol.success:
                raise RuntimeError(f"mean-field integration failed: {sol.message}")
            out[:, ~early] = np.exp(sol.y[: xs.shape[1]])
        return out

    def forgetting_steps(self, alpha, init_norm_sq, tol=None, max_steps=1e12) -> float:
        """First time (steps) with ``|ln(|w(alpha)|^2 / |w(1)|^2)| <= tol``; ``inf`` if never (or,
        with a schedule, not within it). ``tol`` None: the shared criterion
        (:func:`log_ratio_tolerance`).

        Runs the exact recursion for :attr:`discrete_steps`, then integrates the runs at ``alpha``
        and 1 together on a doubling horizon up to ``max_steps`` (or the end of the schedule).
        """
        # deferred: scipy loads only when this computation runs
        from scipy.integrate import solve_ivp

        check_number("alpha", alpha, strict=True)
        check_number("init_norm_sq", init_norm_sq, strict=True)
        tol = log_ratio_tolerance(alpha, tol)
        if abs(2.0 * math.log(alpha)) <= tol:
            return 0.0
        xs, y = self._discrete([alpha**2 * init_norm_sq, init_norm_sq])
        hit = np.flatnonzero(np.abs(np.log(xs[:, 0] / xs[:, 1])) <= tol)
        if hit.size:
            return float(hit[0])

        def event(_, y):
            return abs(y[0] - y[1]) - tol

        event.terminal = True
        stop = min(max_steps, self.horizon)
        start, window = float(len(xs) - 1), 1.0 / (1.0 - self.beta2)
        while start < stop:
            # a last window shorter than a step (1 / (1 - b2) rounds below 1000) joins this one:
            # LSODA refuses a span of a few ulps
            end = stop if start + window > stop - 1.0 else start + window
            sol = solve_ivp(
                self._rhs, (start, end), y, method="LSODA", rtol=1e-8, atol=1e-10, events=event
            )
            if sol.t_events[0].size:
                return float(sol.t_events[0][0])
            if not sol.success:
                raise RuntimeError(f"mean-field integration failed: {sol.message}")
            start, y, window = end, sol.y[:, -1], 2.0 * window
        return math.inf

    def equilibrium(self) -> tuple[float, float]:
        """Alpha-independent equilibrium ``|w*|^2`` and its relaxation time in steps (constant lr).

        With v following x adiabatically (v = sigma^2(x)); ``(inf, inf)`` without decay.
        """
        if self.l2 == 0 and self.weight_decay == 0:
            return math.inf, math.inf
        # deferred: scipy loads only when this computation runs
        from scipy.optimize import brentq

        def rate(x):
            x = np.atleast_1d(float(x))
            v = self._sigma_sq(x) + 0.0
            return float(self._x_rate(x, v, self.lr)[0])

        low = high = 1.0
        while rate(low) < 0:
            low /= 4.0
        while rate(high) > 0:
            high *= 4.0
        root = brentq(rate, low, high, rtol=1e-13)
        h = 1e-5 * root
        slope = (rate(root + h) - rate(root - h)) / (2.0 * h)
        return root, (-1.0 / slope if slope < 0 else math.inf)


# ------------------------------------------------------------- explicit decay's own time (5)
def decay_forgetting_steps(alpha, log_contraction, power, tol=None) -> float:
    """Explicit decay's own forgetting time (5), in steps: the relaxation from the equilibrium.

    Statement (derived here). Start both runs at the alpha-independent equilibrium ``z*`` of the
    law ``z' = q z + D`` (``z = |w|^(2p)``), the alpha run at ``alpha^(2p) z*``. The excess relaxes as
    ``z_T(alpha) - z* = (alpha^(2p) - 1) z* Q_T`` (``Q_T = prod q_t``), so the memory
    ``m_T = (1/p) ln(1 + (alpha^(2p) - 1) Q_T)`` reaches ``tol`` once

        -ln Q_T >= ln(|alpha^(2p) - 1| / |r - 1|),    r = exp(sign(ln alpha) p tol).             (5)

    This is the time the decay itself needs, whatever the drift that sets ``z*``; the drift's own
    time is the law without decay. Both are forgetting times of the same criterion, so the faster
    one names the dominant mechanism (:func:`initmem.theory.forgetting.predict_forgetting`).
    ``log_contraction``: ``ln q_t``, one number (constant lr: ``T = needed / -ln q``, a real number)
    or one per step (a schedule: the first whole step reaching it, ``inf`` if the schedule ends
    first). ``inf`` without decay (``ln q = 0``). ``tol`` None: the shared criterion.
    Assumptions: the law's mean field (q, D the same for both runs).
    """
    tol = log_ratio_tolerance(alpha, tol)
    p = check_number("power", power, strict=True)
    log_q = np.asarray(log_contraction, dtype=np.float64)
    if np.any(np.isnan(log_q)) or np.any(log_q > 0):
        raise ValueError(f"log_contraction must be <= 0 (got {log_contraction!r})")
    if abs(2.0 * math.log(alpha)) <= tol:
        return 0.0
    r = math.exp(math.copysign(p * tol, math.log(alpha)))
    needed = math.log(abs(alpha ** (2 * p) - 1.0) / abs(r - 1.0))
    if log_q.ndim == 0:
        return math.inf if log_q == 0 else needed / -float(log_q)
    reached = np.flatnonzero(np.cumsum(-log_q) >= needed)
    return float(reached[0] + 1) if reached.size else math.inf


# --------------------------------------------------------------------------- predicted forgetting
@dataclass(frozen=True)
class NormalizedForgetting:
    """Predicted forgetting of alpha for one scale-invariant weight group under one pipeline.

    ``steps`` the forgetting time (optimizer steps; ``inf``: never, or with a schedule not within
    it), ``epochs`` (``steps / steps_per_epoch``, None when not given), ``decay_steps`` explicit
    decay's own forgetting time (5) (:func:`decay_forgetting_steps`, over the schedule when one is
    given; ``inf`` without decay), ``relaxation_steps`` the e-folding time of the decay
    (``inf`` without; constant lr), ``equilibrium_norm_sq`` (``inf`` without decay), ``formula`` the law used,
    ``law`` the :class:`NormLaw` (None for the mean-field case).
    """

    steps: float
    epochs: float | None
    decay_steps: float
    relaxation_steps: float
    equilibrium_norm_sq: float
    init_norm_sq: float
    formula: str
    law: NormLaw | None


#: Above this effective step ``eta^2 G / |w|^4`` the SGD law's dropped ``lr^4 G^2 / |w|^4`` term is
#: no longer small: the closed form can be off by a factor of 2-4 (normalized_forgetting warns).
SGD_SMALL_STEP_LIMIT = 0.3


class LargeStepWarning(RuntimeWarning):
    """The SGD norm law is used outside its small-step regime (``eta^2 G / |w|^4 > 0.3``)."""


def _warn_large_sgd_step(lr, momentum, grad_sq_unit, norm_sq):
    eta = lr / (1.0 - momentum)
    step = eta * eta * grad_sq_unit / norm_sq**2
    if step > SGD_SMALL_STEP_LIMIT:
        warnings.warn(
            f"effective SGD step (lr / (1 - momentum))^2 G / |w_0|^4 = {step:.3g} exceeds "
            f"{SGD_SMALL_STEP_LIMIT}: the |w|^4 law drops a term of this relative size, so its "
            "forgetting time can be off by a factor of 2-4; simulate (normalized_sim) instead",
            LargeStepWarning,
            stacklevel=3,
        )


def grad_sq_unit_estimate(batch_size, grad_sq_unit=None, per_example_grad_sq_unit=None) -> float:
    """|g_hat|^2 per step: ``grad_sq_unit`` if given, else ``per_example / batch_size``.

    The SGD-noise part of |g_hat|^2 is the per-example gradient covariance trace at unit norm over
    the batch size. ``per_example_grad_sq_unit`` defaults to :data:`DEFAULT_PER_EXAMPLE_GRAD_SQ_UNIT`
    (an order-one placeholder, not a measurement: the bridge supplies logged values, e.g. per conv
    filter ``grad_norm^2 * weight_norm^2 / out_channels^2`` from ``layers`` in ``log.jsonl``).
    """
    if grad_sq_unit is not None:
        return check_number("grad_sq_unit", grad_sq_unit)
    per_example = (
        DEFAULT_PER_EXAMPLE_GRAD_SQ_UNIT
        if per_example_grad_sq_unit is None
        else per_example_grad_sq_unit
    )
    check_number("per_example_grad_sq_unit", per_example)
    return per_example / check_number("batch_size", batch_size, low=1.0)


def normalized_forgetting(
    alpha: float,
    *,
    lr: float,
    fan_in: int,
    optimizer: str = "sgd",
    momentum: float = 0.0,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    batch_size: int = 128,
    beta2: float = 0.999,
    init_sq_per_coord: float | None = None,
    grad_sq_unit: float | None = None,
    per_example_grad_sq_unit: float | None = None,
    tol: float | None = None,
    steps_per_epoch: int | None = None,
    lr_multipliers=None,
) -> NormalizedForgetting:
    """Predicted forgetting time of the init scale ``alpha`` for one BN-followed conv filter.

    The group is one filter: ``fan_in`` coordinates (``c_in * k * k``), initial squared norm
    ``alpha^2 * fan_in * init_sq_per_coord`` (default ``1 / (3 fan_in)``: torch's default
    kaiming-uniform init of Conv2d/Linear, so |w_0|^2 = 1/3 per filter at alpha = 1).

    * SGD (heavy ball; Nesterov alike): the closed form of :func:`sgd_norm_law`, ``G`` from
      :func:`grad_sq_unit_estimate` (``per_example / batch_size`` unless measured).
    * Adam / AdamW / RMSprop: :class:`AdaptiveMeanField` (the lag of ``v`` matters whenever
      ``lr^2 fan_in / (1 - beta2)`` is not small against |w|^2, as with torch's default init);
      ``law`` is then the closed-form limit :func:`adaptive_norm_law` (None with coupled l2, which
      has no closed form). Adam and AdamW ignore ``momentum``; ``beta2`` is RMSprop's smoothing.

    Forgetting: the first step with ``|ln(eff_lr(alpha) / eff_lr(1))| <= tol`` (module docstring);
    ``tol`` None (default): the shared criterion, norm memory at or below 1/e
    (:func:`log_ratio_tolerance`), the same as :func:`initmem.theory.forgetting.predict_forgetting`.
    ``lr_multipliers`` (one per step) applies a schedule: the time is then the first step within
    the schedule that reaches it, ``inf`` if none. ``relaxation_steps`` and ``equilibrium_norm_sq``
    are for the constant ``lr``. Units: steps; epochs when ``steps_per_epoch`` is given.
    """
    check_optimizer(optimizer)
    check_number("alpha", alpha, strict=True)
    check_number("fan_in", fan_in, low=1.0)
    check_number("lr", lr, strict=True)
    check_number("l2", l2)
    check_number("weight_decay", weight_decay)
    init_sq = 1.0 / (3.0 * fan_in) if init_sq_per_coord is None else init_sq_per_coord
    init_norm_sq = fan_in * check_number("init_sq_per_coord", init_sq, strict=True)
    if steps_per_epoch is not None:
        check_number("steps_per_epoch", steps_per_epoch, low=1.0)
    mults = (
        None
        if lr_multipliers is None
        else check_number("lr_multipliers", np.atleast_1d(lr_multipliers))
    )
    grad_sq = grad_sq_unit_estimate(batch_size, grad_sq_unit, per_example_grad_sq_unit)

    lrs = lr if mults is None else lr * mults
    if optimizer == "sgd":
        law = sgd_norm_law(lr, grad_sq, momentum=momentum, l2=l2, weight_decay=weight_decay)
        peak = float(np.max(lrs))
        _warn_large_sgd_step(peak, momentum, grad_sq, min(alpha**2, 1.0) * init_norm_sq)
        relaxation, equilibrium = law.relaxation_steps(), law.equilibrium_norm_sq()
        if mults is not None:
            law = sgd_norm_law(lrs, grad_sq, momentum=momentum, l2=l2, weight_decay=weight_decay)
        steps = law.forgetting_steps(alpha, init_norm_sq, tol)
        log_q = np.log(law.contraction)
        formula = law.formula
    else:
        rms_momentum = momentum if optimizer == "rmsprop" else 0.0
        field = AdaptiveMeanField(
            optimizer,
            lr,
            fan_in,
            beta2=beta2,
            momentum=rms_momentum,
            l2=l2,
            weight_decay=weight_decay,
            grad_sq_unit=grad_sq,
            lr_multipliers=mults,
        )
        steps = field.forgetting_steps(alpha, init_norm_sq, tol)
        equilibrium, relaxation = field.equilibrium()
        law = None
        formula = "mean field (|w|^2, v): d|w|^2/dt = lr^2 d E[g^2/v] - 2 lr l2 <w, w/sqrt(v)>"
        # the relaxation's rate scales with lr_t (the coupled-L2 case: its constant-lr e-fold time)
        log_q = -(np.asarray(lrs) / lr) / relaxation if math.isfinite(relaxation) else 0.0
        if l2 == 0:
            law = adaptive_norm_law(lr, fan_in, momentum=rms_momentum, weight_decay=weight_decay)
            formula = "mean field (|w|^2, v) -> |w|^2' = (1 - lr wd)^2 |w|^2 + lr^2 d"
            log_q = 2.0 * np.log1p(-np.asarray(lrs) * weight_decay)
    power = 2 if optimizer == "sgd" else 1
    decay_steps = (
        decay_forgetting_steps(alpha, log_q, power, tol) if l2 or weight_decay else math.inf
    )
    epochs = None if steps_per_epoch is None else steps / steps_per_epoch
    return NormalizedForgetting(
        steps=float(steps),
        epochs=epochs,
        decay_steps=float(decay_steps),
        relaxation_steps=float(relaxation),
        equilibrium_norm_sq=float(equilibrium),
        init_norm_sq=float(init_norm_sq),
        formula=formula,
        law=law,
    )


__all__ = [
    "AdaptiveMeanField",
    "DEFAULT_PER_EXAMPLE_GRAD_SQ_UNIT",
    "LargeStepWarning",
    "MomentumNormState",
    "NormLaw",
    "NormalizedForgetting",
    "OPTIMIZERS",
    "SGD_SMALL_STEP_LIMIT",
    "adamw_equilibrium_norm_sq",
    "adamw_relaxation_steps",
    "adaptive_norm_law",
    "adaptive_norm_sq_after_steps",
    "angular_update",
    "check_optimizer",
    "decay_forgetting_steps",
    "decay_rate",
    "effective_lr",
    "equilibrium_angular_update",
    "grad_sq_unit_estimate",
    "log_ratio_tolerance",
    "momentum_state_after_step",
    "norm_sq_after_step",
    "normalized_forgetting",
    "sgd_equilibrium_norm_sq",
    "sgd_norm4_after_steps",
    "sgd_norm_law",
    "sgd_relaxation_steps",
]
