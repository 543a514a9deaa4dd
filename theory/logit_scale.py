r"""The logit scale: a softmax head on BatchNorm features, its init scaled by alpha, under cross-entropy.

Setting and conventions
-----------------------
Features phi_i in R^p leave the last BatchNorm normalized (per feature: zero mean, unit variance over
the batch); the BN affine scales them by the gain gamma in R^p and shifts them by beta; the head
W (K x p) gives the logits

    z_i = W (gamma * phi_i + beta),                                                              (1)

trained with the mean softmax cross-entropy. Scaling the init by alpha on the head and on the BN
affine multiplies the init logits by alpha^2 (alpha on the head alone: by alpha). The logit scale
is the RMS logit s = |Z|_F / sqrt(n K). Optimizer conventions are those of ``RunConfig`` (``l2``
coupled, ``weight_decay`` decoupled, heavy-ball ``momentum``).

A 2-homogeneous pair: the balance (derived here; deep_linear's identity for a diagonal layer)
-----------------------------------------------------------------------------------------------
For every feature j, the logits depend on (W_{:,j}, gamma_j, beta_j) through W_{:,j} gamma_j and
W_{:,j} beta_j, so the gradients obey W_{:,j} . dL/dW_{:,j} = gamma_j dL/dgamma_j + beta_j dL/dbeta_j
(for any loss of the logits, any minibatch; the same identity as W_{l+1}^T G_{l+1} = G_l W_l^T in
:mod:`initmem.theory.deep_linear`). Hence the *balance*

    b_j = |W_{:,j}|^2 - gamma_j^2 - beta_j^2                                                     (2)

is conserved by gradient flow (the factorization of the logit scale between the BN gain and the
head, set by alpha, is kept forever), and one SGD step with coupled L2 and decoupled decay,
theta <- a theta - lr G with a = 1 - lr (l2 + weight_decay), gives exactly

    b_j' = a^2 b_j + lr^2 (|G_{W,j}|^2 - G_{gamma,j}^2 - G_{beta,j}^2)                           (3)

(:func:`balance_after_step`). The decay part contracts the init's balance like a^{2T}: e-fold time
-1 / (2 ln(1 - kappa)) steps, kappa = lr (l2 / (1 - mu) + wd) with heavy ball (mean field, as in
:mod:`initmem.theory.normalized`) (:func:`balance_forgetting_steps`). Lyu and Li 2020 ("Gradient
descent maximizes the margin of homogeneous neural networks", ICLR) and Moroshko et al. 2020
("Implicit bias in deep linear classification: initialization scale vs training accuracy",
NeurIPS) treat the no-decay case: for homogeneous models trained by cross-entropy without decay the
parameters grow like (ln t)^{1/L} in a direction that converges to a KKT point of the max-margin
problem, and for diagonal (product) models which KKT point, and how fast, depends on the init scale
alpha: the rich (small-alpha) and kernel (large-alpha) limits differ, and the alpha-dependence fades
only once the training loss is exponentially small in alpha^2. Agrees with (2): without decay the
balance (alpha's factorization) is never forgotten by gradient flow.

The logit scale under SGD with decay (derived here; a relaxation model)
---------------------------------------------------------------------------
With decay the regularized problem in the product V_j = W_{:,j} (gamma_j, beta_j) is convex
(min over factorizations of (|W_j|^2 + gamma_j^2 + beta_j^2) / 2 is |V_j|, a group-lasso penalty),
so the logit scale tends to an alpha-independent s*. The init's part of each factor contracts by
(1 - kappa) per step, so its part of the logits (a product) by q = (1 - kappa)^2. Model: the logit
scale of init scale alpha mixes the init's contracting part and the relaxing data part,

    s_T(alpha) = alpha^k s_0 q^T + s* (1 - q^T),   k = 2 (head and BN affine) or 1 (head only),  (4)

and the memory m_T = ln(s_T(alpha) / s_T(1)) falls to ``tol`` at q^T = u, u solving the linear
equation (alpha^k s_0 u + s* (1 - u)) = r (s_0 u + s* (1 - u)), r = exp(+-tol)
(:func:`logit_scale_forgetting_steps`). Regime, measured over a panel of 16 random feature draws
(fixed normalized Gaussian features, 6 shapes n x p from 48 x 16 to 80 x 40, K = 2..5; SGD lr 0.3
with l2 0.01 on all, heavy ball lr 0.03 / momentum 0.9 on four; 1,500 steps; s_0 and s* from each
draw's alpha = 1 run; tol 0.1; tests/theory/test_logit_scale_panel.py): measured / predicted in
0.44-1.28 at alpha = 2, 0.60-1.11 at alpha = 4, 0.69-1.05 at alpha = 8. At alpha >= 4 the measured
time is between 0.60 and 1.11 of (4)'s: the decay is not the only force on the init's logits. On
each draw the error is mostly an offset free of alpha: measured minus predicted spans -308 to +98
steps over the panel (alpha 2-8) but changes by at most 83 steps between alpha = 2 and 8 on one
draw, as if the data multiplied the init's part of (4) by a factor between e^-1.9 and e^0.6 (the
offset over the decay's e-fold time, 166 steps) that (4) leaves out; so the relative error falls as
alpha grows. What the runs show (time course of s_T(alpha) - s_T(1) on three draws, measured once,
not a test): in the first ~50 steps the excess falls 2.4-4.4x faster than the decay (the loss
gradient on the head is proportional to the gain, alpha, so the head's random init direction is
rotated at an alpha-free relative rate), and afterwards it contracts at 0.7-1.3x the decay's rate,
faster where misclassified examples keep the O(1) gradient of cross-entropy's 1-homogeneous tail on
large logits, slower where the data push the scale outward. Both depend on the data, not on the
scalars (4) takes, and whether the features separate the labels (a linear program per draw) does not
decide it either: separable draws fell on both sides of 1. No model with these inputs closes the
band here. For alpha < 1 the logits first grow at the data's rate and (4) underestimates the time
(1.6x at alpha = 0.5, one draw). Head only (``both=False``, the gain not scaled) has no law: the
unscaled gain takes a loss gradient proportional to the head, alpha, and the pair rebalances through
the data rather than the decay; on the same panel the measured times were 0.07-0.92 of (4) with k =
1 (median 0.2), so :func:`logit_scale_forgetting_steps` refuses it. With trained features (a torch
BN MLP 8-32-32-BN-4 on 64 random points, head and last BN affine scaled by alpha, 1,500 full-batch
steps, l2 = 0.01): with momentum 0.9 and lr 0.03 the measured times were 574 / 905 steps at alpha =
4 / 8 against (4)'s 605 / 842 (5-7%); with plain SGD at lr 0.3 they were 1,368 / 1,410 against 589 /
825 (1.7-2.3x longer, the inner layers still moving: the alpha = 4 run ended 2% from the alpha = 1
scale). (4) holds once the features have settled; not a test (15 s per configuration). In the
smaller 6-16-BN(8)-3 MLP (64 points, momentum 0.9, lr 0.03, l2 0.05, 1,000 steps, tested) the alpha
= 1 scale is still rising 5% over the last 500 steps and the measured times, 954 / 898 steps at
alpha = 4 / 8, are 8x / 5x (4)'s 122 / 169: while the features relax, (4) is only a lower bound.
Without s* (``equilibrium_scale=None``) the decay alone, (4) with s* = s_0: ln(|alpha^k - 1| /
|e^{+-tol} - 1|) / (-ln q), an upper bound on (4)'s time whenever s* >= s_0, for alpha above and
below 1 (the simpler ln(|alpha^k - 1| / tol) is not one for alpha < 1, where 1 - e^{-tol} < tol).

Adam with coupled L2: the gain's excess follows a curvature-free scalar recursion (derived here)
---------------------------------------------------------------------------------------------------
Adam's update u = m_hat / (sqrt(v_hat) + eps) (Kingma and Ba 2015, "Adam", ICLR;
``torch.optim.Adam``) is invariant to the scale of the gradient for eps = 0:

    u(c g_1, ..., c g_t) = u(g_1, ..., g_t)   for every c > 0.                                   (5)

Take a coordinate whose gradient is c d_t, d_t = theta_t - theta* its distance from where it
settles. Then by (5) d_t follows a recursion free of c (and so of l2 and of the data):

    m_t = b1 m_{t-1} + (1 - b1) d_t,  v_t = b2 v_{t-1} + (1 - b2) d_t^2,
    d_{t+1} = d_t - lr_t (m_t / (1 - b1^t)) / sqrt(v_t / (1 - b2^t)),                            (6)

homogeneous of degree one in (d_0, lr): d_t(k d_0, k lr) = k d_t(d_0, lr)
(:func:`adam_excess_path`). Its first phase moves lr per step (u = 1 while the gradient keeps its
sign: the transient alpha |theta_0| / lr, linear in alpha, that Adam's fixed step size suggests);
v's memory of the larger past gradients (1 / (1 - b2) steps) then slows it: from d_0 = 7.8, lr =
1e-2 it takes 2,007 steps to reach 0.023, not the 777 of the linear phase. With coupled L2 and alpha
scaling the head and the BN affine, the slowest factor of the logit scale is the BN gain (init alpha
per coordinate, the head's alpha |W_0| ~ alpha / sqrt(3p)); its gradient is l2 gamma + (loss
gradient), about c (gamma - gamma*) (far out the L2 term dominates, near gamma* the linearization).
The logit scale is proportional to the gain, so the memory ln(s(alpha) / s(1)) is about d / gamma*,
and the law is

    T = first t with |d_t| <= tol gamma*,  d_0 = alpha gamma_0 - gamma*,  d_t from (6),          (7)

gamma_0 the gain at alpha = 1 (1 for BatchNorm), gamma* the RMS gain where the alpha = 1 run settles
(measured) (:func:`adam_logit_scale_forgetting_steps`). T depends on l2 only through gamma* (the
decay's size sets where the gain settles, not how fast Adam gets there: unlike SGD's 1 / (lr l2)).
Regime, from the tests (fixed random features p = 32, K = 4, n = 64; Adam with coupled L2, betas
(0.9, 0.999); alpha in {2, 4, 8} scaling head and gain): within 15% for (lr, l2) = (1e-2, 0.1) and
(1e-2, 0.03) (measured 400 / 940 / 1,980 vs (7)'s 392 / 945 / 2,007 at l2 = 0.1; 220 / 670 / 1,580
vs 249 / 740 / 1,732 at l2 = 0.03). In a BatchNorm MLP trained jointly (6-16-BN(8)-3, 64 points,
alpha on head and BN affine, lr 2e-2, l2 0.1) the measured times are 0.70-0.72 of (7) (252 / 630 vs
349 / 882 at alpha = 4 / 8): (7) is an upper bound there, within 40%; which of the scaled BN bias,
the head's bias or the moving features shortens it cannot be told at this size.

Adam-family without a law (explicit "no prediction" in ``predict_forgetting``):
- AdamW (decoupled decay). The suggestion "once the adaptive updates no longer depend on alpha, the
  difference of the alpha and alpha = 1 runs contracts by (1 - lr wd) per step" fails: the updates
  keep depending on where each run is. Fixed random features, lr 1e-2, wd 1 (1 / (lr wd) = 100
  steps): the memory |ln(s(4) / s(1))| is 0.64 at step 200 and still 0.60 / 0.27 at steps
  1,000 / 4,000 (|W_4 - W_1| RMS 0.27 -> 0.22 of a 0.67 RMS head); at lr wd = 1e-3, 0.15 after
  20,000 steps. AdamW behaves like sign descent inside the box |theta|_inf <= 1 / wd (Xie and Li
  2024, "Implicit bias of AdamW: l_inf norm constrained optimization", ICML), and in the product
  W gamma that constrained problem is not convex: which point the run reaches depends on alpha.
  The decay time 1 / (lr wd) (as in Kosson et al. 2024's rotational equilibrium for scale-invariant
  weights) is not the head's forgetting time; tested as such.
- Adam without decay. Not kept (Adam is not gradient flow, the balance (2) moves by O(lr) per step)
  but forgotten only algebraically: both logit scales grow (lr 1e-2: s(1) = 9.9 / 23.2 / 28.7 at
  steps 300 / 3,000 / 6,000) and the memory at alpha = 8 falls 0.80 / 0.13 / 0.046 with a
  difference s(8) - s(1) that itself shrinks (12.2 / 3.3 / 1.35): no constant-offset law
  ln((alpha s_0 + v t) / (s_0 + v t)) fits; no closed form here.
- Head only (alpha not on the gain): no law for SGD (above) or Adam; RMSprop: untested; no
  prediction.
"""

from __future__ import annotations

import math

import numpy as np

from .checks import check_integer, check_momentum, check_number
from .criterion import FORGETTING

__all__ = [
    "HEAD_ONLY_REFUSAL",
    "adam_excess_path",
    "adam_logit_scale_forgetting_steps",
    "balance",
    "balance_after_step",
    "balance_forgetting_steps",
    "decay_per_step",
    "logit_scale_forgetting_steps",
    "required_log_contraction",
]


def _finite_array(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got a non-finite entry in shape {arr.shape})")
    return arr


def balance(W, gamma, beta=None) -> np.ndarray:
    """b_j = |W_{:,j}|^2 - gamma_j^2 - beta_j^2 per feature (equation (2)); W of shape (K, p)."""
    W = _finite_array("W", W)
    gamma = _finite_array("gamma", gamma)
    if W.ndim != 2 or gamma.shape != (W.shape[1],):
        raise ValueError(f"W must be (K, p) and gamma (p,), got {W.shape} and {gamma.shape}")
    b = np.sum(W * W, axis=0) - gamma * gamma
    if beta is not None:
        beta = _finite_array("beta", beta)
        if beta.shape != gamma.shape:
            raise ValueError(f"beta must have shape {gamma.shape}, got {beta.shape}")
        b = b - beta * beta
    return b


def balance_after_step(b, grad_W, grad_gamma, lr, l2=0.0, weight_decay=0.0, grad_beta=None):
    """Exact balance after one SGD step (no momentum): a^2 b + lr^2 (|G_W,j|^2 - G_g,j^2 - G_b,j^2).

    Equation (3): a = 1 - lr (l2 + weight_decay); ``grad_*`` are the loss gradients (without L2);
    ``b`` (p,) the balance before the step. Holds for any loss of the logits (1) and any minibatch.
    """
    lr = check_number("lr", lr, strict=True)
    a = 1.0 - lr * (check_number("l2", l2) + check_number("weight_decay", weight_decay))
    drift = balance(grad_W, grad_gamma, grad_beta)
    b = _finite_array("b", b)
    if b.shape != drift.shape:
        raise ValueError(f"b must have shape {drift.shape} to match grad_gamma, got {b.shape}")
    return a * a * b + lr * lr * drift


def decay_per_step(lr, l2=0.0, weight_decay=0.0, momentum=0.0) -> float:
    """kappa = lr (l2 / (1 - mu) + wd): each factor's init part shrinks by 1 - kappa per step."""
    lr = check_number("lr", lr, strict=True)
    momentum = check_momentum(momentum)
    kappa = lr * (
        check_number("l2", l2) / (1.0 - momentum) + check_number("weight_decay", weight_decay)
    )
    if kappa >= 1.0:
        raise ValueError(f"lr * (l2 / (1 - momentum) + weight_decay) must be < 1 (got {kappa:.4g})")
    return kappa


def balance_forgetting_steps(lr, l2=0.0, weight_decay=0.0, momentum=0.0) -> float:
    """E-fold time of the balance (2) under SGD with decay: -1 / (2 ln(1 - kappa)) steps.

    About 1 / (2 lr lambda) (as ``deep_linear.balance_forgetting_time``; heavy ball through kappa,
    mean field). ``inf`` without decay: gradient flow conserves it (only the lr^2 term of (3) moves
    it). Range of the heavy-ball mean field, measured against simulate_logit_scale (fixed random
    features, three draws; tests/theory/test_logit_scale_checks.py): within 10% while
    x = lr (l2 + (1 - mu) weight_decay) / (1 - sqrt(mu))^2 <= 0.2 (x = 1 is the heavy ball's
    critical damping on the decay's curvature); at the edge x = 0.19 (lr 0.01, l2 0.05, mu 0.9) the
    measured time is 0.92-0.93 of this, at x = 0.15 (lr 0.25, mu 0.5) 0.93-0.95; beyond it the
    decay oscillates and the mean field is off: 0.65-0.73 at x = 0.57 (lr 0.03, l2 0.05, mu 0.9).
    Decoupled weight_decay enters kappa as lr wd (0.996 with lr 0.01, wd 0.05, mu 0.9).
    """
    kappa = decay_per_step(lr, l2, weight_decay, momentum)
    return math.inf if kappa == 0 else -1.0 / (2.0 * math.log1p(-kappa))


#: Above this ln(alpha^2), alpha^2 is computed in logs (exp(700) is near the float range).
_LOG_HUGE = 700.0
#: Head only (``both=False``) against (4) with k = 1 on the panel of the module docstring.
HEAD_ONLY_REFUSAL = (
    "both=False (alpha on the head only, the gain not scaled): no law; the gain takes a loss "
    "gradient proportional to the head (alpha) and the pair rebalances through the data, not the "
    "decay: on a panel of 16 random feature draws the measured times were 0.07-0.92 of model (4) "
    "with k = 1 (logit_scale docstring); scale the head and the BN affine (both=True) or simulate"
)


def _check_both(both) -> bool:
    """``both`` must be a bool; False (head only) has no law: ValueError saying why."""
    if not isinstance(both, (bool, np.bool_)):
        raise ValueError(
            f"both must be a bool: True (alpha on the head and the BN affine) or False (head only) "
            f"(got {both!r})"
        )
    if not both:
        raise ValueError(HEAD_ONLY_REFUSAL)
    return True


def _tolerance(alpha: float, tol: float | None) -> float:
    """``tol`` when given (absolute); None: the shared criterion on the logit scale's log-ratio,
    which starts at ``2 ln alpha`` (alpha on the head and the BN gain): one e-fold of it,
    ``2 |ln alpha| / e`` (:data:`initmem.theory.criterion.FORGETTING`), the tolerance
    ``predict_forgetting`` passes for this group."""
    if tol is not None:
        return check_number("tol", tol, strict=True)
    return FORGETTING.tolerance(2.0 * math.log(alpha)) if alpha != 1.0 else FORGETTING.level


def required_log_contraction(
    alpha, *, init_scale=1.0, equilibrium_scale=None, both=True, tol=None
) -> float:
    """-ln u: how far (in e-folds of q = (1 - kappa)^2) the init's logits must shrink, model (4).

    u solves (alpha^k s_0 u + s* (1 - u)) = r (s_0 u + s* (1 - u)), r = exp(+-tol) (the sign of
    alpha^k - 1), k = 2 (``both`` must be True: head only has no law, ValueError). Without s* (``equilibrium_scale=None``) the decay-only value, (4) with s* = s_0:
    u = (r - 1) / (alpha^k - 1), -ln u = ln(|alpha^k - 1| / |r - 1|); an upper bound on (4)'s value
    whenever s* >= s_0, for every alpha (derived here: the denominator s* - (s* - s_0) u is >= s_0).
    0 when alpha^k is within ``tol`` of 1 (``tol`` None: the shared criterion, :func:`_tolerance`). Lr-free: divide by -ln q per step (or accumulate it over
    a schedule).
    """
    alpha = check_number("alpha", alpha, strict=True)
    tol = _tolerance(alpha, tol)
    s0 = check_number("init_scale", init_scale, strict=True)
    _check_both(both)
    s_eq = (
        s0
        if equilibrium_scale is None
        else check_number("equilibrium_scale", equilibrium_scale, strict=True)
    )
    log_start = 2.0 * math.log(alpha)
    if abs(log_start) <= tol:
        return 0.0
    r = math.exp(math.copysign(tol, log_start))
    if log_start > _LOG_HUGE:  # alpha^2 past the float range: -ln u -> ln(alpha^2 s0 / ((r-1) s*))
        return log_start + math.log(s0 / ((r - 1.0) * s_eq))
    start = math.exp(log_start)
    u = (r - 1.0) * s_eq / (s0 * (start - r) + (r - 1.0) * s_eq)
    return max(-math.log(u), 0.0)


def logit_scale_forgetting_steps(
    alpha,
    lr,
    *,
    l2=0.0,
    weight_decay=0.0,
    momentum=0.0,
    init_scale=1.0,
    equilibrium_scale=None,
    both=True,
    tol=None,
) -> float:
    """Steps until |ln(s_T(alpha) / s_T(1))| <= tol under SGD with decay: model (4).

    ``init_scale`` s_0: the RMS logit at alpha = 1; ``equilibrium_scale`` s*: the alpha-independent
    RMS logit the run relaxes to (measured, e.g. from the alpha = 1 run; None: the decay-only bound
    ln(|alpha^2 - 1| / |e^{+-tol} - 1|) / (-ln q), (4) with s* = s_0); ``both``: alpha scales the
    head and the BN affine (k = 2; must be True: head only, ``False``, has no law and raises
    ValueError saying why). ``inf`` without decay (the balance and, for practical horizons, the
    logit scale keep alpha: module docstring). Accuracy, measured over a panel of 16 random
    feature draws (module docstring): the measured time is 0.44-1.28 of this at alpha = 2,
    0.60-1.11 at alpha = 4, 0.69-1.05 at alpha = 8 (at tol 0.1). ``tol`` None: the shared
    criterion, ``2 |ln alpha| / e`` (:func:`_tolerance`), as ``predict_forgetting`` passes it.
    """
    needed = required_log_contraction(
        alpha, init_scale=init_scale, equilibrium_scale=equilibrium_scale, both=both, tol=tol
    )
    kappa = decay_per_step(lr, l2, weight_decay, momentum)
    if needed == 0.0:
        return 0.0
    if kappa == 0:
        return math.inf
    return needed / (-2.0 * math.log1p(-kappa))


# ---------------------------------------------------------------------------------------------
# Adam with coupled L2: identities (5)-(6) and law (7)


def _check_betas(betas) -> tuple[float, float]:
    if np.ndim(betas) != 1 or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), each in [0, 1) (got {betas!r})")
    beta1, beta2 = betas
    return check_number("beta1", beta1, high=1.0), check_number("beta2", beta2, high=1.0)


def _adam_excess(excess, lrs, betas):
    """Yield d_1, d_2, ... of recursion (6), one per learning rate in ``lrs`` (an iterable)."""
    beta1, beta2 = betas
    # Homogeneity d_t(k d_0, k lr) = k d_t(d_0, lr): run at |d_0| = 1 (no overflow of d^2), rescale.
    unit = abs(float(excess)) or 1.0
    d, m, v = float(excess) / unit, 0.0, 0.0
    for t, lr in enumerate(lrs, start=1):
        m = beta1 * m + (1.0 - beta1) * d
        v = beta2 * v + (1.0 - beta2) * d * d
        if v > 0.0:
            d = d - (lr / unit) * (m / (1.0 - beta1**t)) / math.sqrt(v / (1.0 - beta2**t))
        yield d * unit


def adam_excess_path(excess, lr, steps, *, betas=(0.9, 0.999), lr_multipliers=None) -> np.ndarray:
    """d_0, ..., d_T of Adam on a quadratic c d^2 / 2 (any c > 0, eps = 0): recursion (6).

    ``excess`` d_0 (a coordinate's distance from where it settles, any unit), ``lr`` the step,
    ``steps`` T, ``lr_multipliers`` an optional schedule (T factors). Exact for Adam on a
    quadratic with eps = 0 (torch's eps = 1e-8 changes nothing while |g| >> eps), by the scale
    invariance (5); homogeneous: d_t(k d_0, k lr) = k d_t(d_0, lr). Derived here (Kingma and Ba
    2015's update). Units: steps; d in the units of d_0.
    """
    check_number("excess", abs(excess))
    lr = check_number("lr", lr, strict=True)
    steps = check_integer("steps", steps, low=0)
    lrs = _schedule(lr, steps, lr_multipliers)
    path = [float(excess), *_adam_excess(excess, lrs, _check_betas(betas))]
    return np.asarray(path, dtype=np.float64)


def _schedule(lr, steps, lr_multipliers):
    if lr_multipliers is None:
        return np.full(steps, lr)
    mults = check_number("lr_multipliers", np.atleast_1d(lr_multipliers))
    if len(mults) != steps:
        raise ValueError(f"lr_multipliers must have {steps} entries (got {len(mults)})")
    return lr * mults


def adam_logit_scale_forgetting_steps(
    alpha,
    lr,
    *,
    l2,
    equilibrium_gain,
    weight_decay=0.0,
    init_gain=1.0,
    betas=(0.9, 0.999),
    tol=None,
    lr_multipliers=None,
    max_steps=10**6,
) -> float:
    """Steps until |ln(s_T(alpha) / s_T(1))| <= tol under Adam with coupled L2: law (7).

    The BN gain's excess d_0 = alpha ``init_gain`` - gamma* (alpha on the head and the BN affine)
    follows recursion (6) until |d_T| <= tol gamma*; ``equilibrium_gain`` gamma* is the RMS gain
    where the alpha = 1 run settles (measured). ``l2`` only selects the regime: T does not depend
    on it beyond gamma*. With ``lr_multipliers`` (one factor per step of the run) T is the first
    step within the run, ``inf`` if the run ends first; without, ``inf`` beyond ``max_steps``.
    Assumptions and regime (module docstring): fixed features 15% for alpha in [2, 8]; jointly
    trained BN MLP: an upper bound, measured 0.70-0.72 of T. Derived here; its first phase is the
    linear transient (alpha gamma_0 - gamma*) / lr of the adaptive heuristic, the rest v's lag.

    ``tol`` None: ``2 |ln alpha| / e``, the value ``predict_forgetting`` passes (:func:`_tolerance`).
    Raises ``ValueError`` outside the law's regime: ``l2 == 0`` (Adam without decay forgets only
    algebraically) or ``weight_decay > 0`` (AdamW: no law, module docstring).
    """
    alpha = check_number("alpha", alpha, strict=True)
    lr = check_number("lr", lr, strict=True)
    tol = _tolerance(alpha, tol)
    gamma0 = check_number("init_gain", init_gain, strict=True)
    gamma_eq = check_number("equilibrium_gain", equilibrium_gain, strict=True)
    if check_number("l2", l2) == 0:
        raise ValueError("l2 must be > 0: Adam without decay has no law (logit_scale docstring)")
    if check_number("weight_decay", weight_decay) > 0:
        raise ValueError(
            "weight_decay must be 0: AdamW's decoupled decay has no law (logit_scale docstring)"
        )
    betas = _check_betas(betas)
    max_steps = check_integer("max_steps", max_steps)
    excess, target = alpha * gamma0 - gamma_eq, tol * gamma_eq
    if abs(excess) <= target:
        return 0.0
    lrs = (
        np.full(max_steps, lr)
        if lr_multipliers is None
        else _schedule(lr, len(np.atleast_1d(lr_multipliers)), lr_multipliers)
    )
    for t, d in enumerate(_adam_excess(excess, lrs, betas), start=1):
        if abs(d) <= target:
            return float(t)
    return math.inf
