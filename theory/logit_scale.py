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

    b_j = |W_{:,j}|^2 - gamma_j^2 - beta_j^2                                                       (2)

is conserved by gradient flow (the factorization of the logit scale between the BN gain and the
head, set by alpha, is kept forever), and one SGD step with coupled L2 and decoupled decay,
theta <- a theta - lr G with a = 1 - lr (l2 + weight_decay), gives exactly

    b_j' = a^2 b_j + lr^2 (|G_{W,j}|^2 - G_{gamma,j}^2 - G_{beta,j}^2)                               (3)

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

    s_T(alpha) = alpha^k s_0 q^T + s* (1 - q^T),   k = 2 (head and BN affine) or 1 (head only),      (4)

and the memory m_T = ln(s_T(alpha) / s_T(1)) falls to ``tol`` at q^T = u, u solving the linear
equation (alpha^k s_0 u + s* (1 - u)) = r (s_0 u + s* (1 - u)), r = exp(+-tol)
(:func:`logit_scale_forgetting_steps`). Regime, from the tests (fixed random features, SGD with L2,
with and without momentum, lr / (1 - mu) <= 1): within 15% for alpha >= 4 and 25% at alpha = 2
(the init's logits dominate the start and the decay does the forgetting; (4) is short by up to
21% at alpha = 2); for alpha < 1 the logits first grow at the data's rate and (4) underestimates
the time (1.6x at alpha = 0.5). With trained features (a torch BN MLP 8-32-32-BN-4 on 64 random
points, head and last BN affine scaled by alpha, 1,500 full-batch steps, l2 = 0.01): with momentum
0.9 and lr 0.03 the measured times were 574 / 905 steps at alpha = 4 / 8 against (4)'s 605 / 842
(5-7%); with plain SGD at lr 0.3 they were 1,368 / 1,410 against 589 / 825 (1.7-2.3x longer, the
inner layers still moving: the alpha = 4 run ended 2% from the alpha = 1 scale). (4) holds once the
features have settled; not a test (15 s per configuration). Without s* (``equilibrium_scale=None``) the
decay alone: ln(|alpha^k - 1| / tol) / (-ln q), an upper bound on (4)'s time when s* >= s_0.

Adam-family: no prediction. Adam's steps have a fixed size, so the head's init is outgrown in
about alpha |theta_0| / lr steps, but simulation (fixed random features, p = 32, K = 4, lr 1e-2)
shows the alpha = 4 run settling to a different logit scale than alpha = 1 (30.4 vs 35.3 after
20,000 AdamW steps with lr wd = 1e-3, where (4) predicts forgetting in about 630 steps): the
product's nonconvex Adam dynamics keep alpha far longer than the decay alone implies. Rows for
Adam-family say "no prediction" rather than a number.
"""

from __future__ import annotations

import math

import numpy as np

from .checks import check_momentum, check_number

__all__ = [
    "balance",
    "balance_after_step",
    "balance_forgetting_steps",
    "decay_per_step",
    "logit_scale_forgetting_steps",
    "required_log_contraction",
]


def balance(W, gamma, beta=None) -> np.ndarray:
    """b_j = |W_{:,j}|^2 - gamma_j^2 - beta_j^2 per feature (equation (2)); W of shape (K, p)."""
    W = np.asarray(W, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    if W.ndim != 2 or gamma.shape != (W.shape[1],):
        raise ValueError(f"W must be (K, p) and gamma (p,), got {W.shape} and {gamma.shape}")
    b = np.sum(W * W, axis=0) - gamma * gamma
    if beta is not None:
        beta = np.asarray(beta, dtype=np.float64)
        if beta.shape != gamma.shape:
            raise ValueError(f"beta must have shape {gamma.shape}, got {beta.shape}")
        b = b - beta * beta
    return b


def balance_after_step(b, grad_W, grad_gamma, lr, l2=0.0, weight_decay=0.0, grad_beta=None):
    """Exact balance after one SGD step (no momentum): a^2 b + lr^2 (|G_W,j|^2 - G_g,j^2 - G_b,j^2).

    Equation (3): a = 1 - lr (l2 + weight_decay); ``grad_*`` are the loss gradients (without L2).
    Holds for any loss of the logits (1) and any minibatch.
    """
    lr = check_number("lr", lr, strict=True)
    a = 1.0 - lr * (check_number("l2", l2) + check_number("weight_decay", weight_decay))
    drift = balance(grad_W, grad_gamma, grad_beta)
    return a * a * np.asarray(b, dtype=np.float64) + lr * lr * drift


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
    it).
    """
    kappa = decay_per_step(lr, l2, weight_decay, momentum)
    return math.inf if kappa == 0 else -1.0 / (2.0 * math.log1p(-kappa))


def required_log_contraction(
    alpha, *, init_scale=1.0, equilibrium_scale=None, both=True, tol=0.1
) -> float:
    """-ln u: how far (in e-folds of q = (1 - kappa)^2) the init's logits must shrink, model (4).

    u solves (alpha^k s_0 u + s* (1 - u)) = r (s_0 u + s* (1 - u)), r = exp(+-tol); without s*
    (``equilibrium_scale=None``) the decay-only bound ln(|alpha^k - 1| / tol). 0 when alpha^k is
    within ``tol`` of 1. Lr-free: divide by -ln q per step (or accumulate it over a schedule).
    """
    alpha = check_number("alpha", alpha, strict=True)
    tol = check_number("tol", tol, strict=True)
    s0 = check_number("init_scale", init_scale, strict=True)
    start = alpha ** (2 if both else 1)
    if abs(math.log(start)) <= tol:
        return 0.0
    if equilibrium_scale is None:
        return math.log(abs(start - 1.0) / tol)
    s_eq = check_number("equilibrium_scale", equilibrium_scale, strict=True)
    r = math.exp(math.copysign(tol, start - 1.0))
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
    tol=0.1,
) -> float:
    """Steps until |ln(s_T(alpha) / s_T(1))| <= tol under SGD with decay: model (4).

    ``init_scale`` s_0: the RMS logit at alpha = 1; ``equilibrium_scale`` s*: the alpha-independent
    RMS logit the run relaxes to (measured, e.g. from the alpha = 1 run; None: the decay-only bound
    ln(|alpha^k - 1| / tol) / (-ln q)); ``both``: alpha scales the head and the BN affine (k = 2)
    or the head only (k = 1). ``inf`` without decay (the balance and, for practical horizons, the
    logit scale keep alpha: module docstring). Regime: alpha >= 4, 15% (module docstring).
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
