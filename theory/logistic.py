r"""Linear logistic regression: what gradient descent keeps of the initialization under cross-entropy.

Setting and conventions
-----------------------
Data ``X`` (n, d), labels ``y`` in {-1, +1}, no bias term, linear predictor f(x) = x^T w. Write
``z_i = y_i x_i`` (the rows of ``Z = diag(y) X``) and ``u_i = z_i^T w`` (the margins). The loss is the
*mean* logistic loss

    L(w) = (1/n) sum_i l(u_i),   l(u) = ln(1 + e^{-u}),   grad L = -(1/n) Z^T sigma(-Z w),        (1)
    Hess L(w) = (1/n) Z^T diag(sigma(u) sigma(-u)) Z,

``sigma`` the logistic function. Optimizer conventions are those of :mod:`initmem.theory.linear` and
``RunConfig``: ``l2`` is coupled decay, (l2/2)|w|^2 added to the loss; ``weight_decay`` is decoupled,
w <- (1 - lr weight_decay) w - lr buf; heavy-ball ``momentum`` as ``torch.optim.SGD``
(buf <- mu buf + grad + l2 w, buf = grad + l2 w at the first step). Steps are optimizer steps;
gradient flow is the limit lr -> 0 at fixed continuous time lr * steps. Soudry et al. (2018) *sum*
the loss over examples: their step size eta is our ``lr / n``.

Which case the data are in (derivation)
---------------------------------------
Call index i *separable* if some v has Z v >= 0 (every example on the correct side or on the
boundary) with z_i^T v > 0. The sum of two such v is again such a v, so there is a maximal separable
subset I (Ji and Telgarsky 2019, "The implicit bias of gradient descent on nonseparable data",
COLT): one linear program finds it (:func:`separability`). Three cases:

* I = all: the data are *separable* (some w has every margin > 0). L has no minimizer; the
  iterates diverge (below).
* I empty: *not separable*. No v != 0 in the data's span has Z v >= 0, so L grows at least
  linearly in every direction of the span: it has a unique minimizer w* in the span (the component
  off the span never moves, see (3)).
* otherwise *partly separable*: GD diverges along the max-margin ray of the examples in I while
  converging on the span of the others (Ji and Telgarsky 2019: the direction converges at rate
  O(ln ln t / ln t), the offset at rate O((ln t)^2 / sqrt(t))). No minimizer.

With any decay (l2 > 0 or weight_decay > 0) the fixed point of the iteration exists in every case:
grad L(w*) + kappa w* = 0 with kappa = l2 + (1 - mu) weight_decay (the decoupled term enters the
fixed point of the momentum buffer divided by 1 - mu; :func:`minimizer`).

The separable case without decay (Soudry et al. 2018, JMLR, Theorems 3 and 4)
------------------------------------------------------------------------------
Let w_svm = argmin |w| subject to Z w >= 1 (the hard-margin SVM, :func:`hard_margin`), with dual
variables a_i >= 0, w_svm = sum_i a_i z_i, support vectors S = {i : a_i > 0}. The unit direction
is w_hat = w_svm / |w_svm| with margin gamma = 1 / |w_svm| (:func:`max_margin`). GD with a small
enough step (any lr below 2 / the smoothness constant, lr < 8 n / sigma_max(Z)^2 for the mean loss)
from any w_0 gives

    w_t = w_svm ln t + rho_t,   rho_t bounded,                                                  (2)

so the direction w_t / |w_t| tends to w_hat only like 1 / ln t. For almost every data set, on the
span of the support vectors rho_t tends to w_tilde, the solution in that span of

    (lr / n) exp(-z_i^T w_tilde) = a_i   for i in S                                             (Soudry's eta exp(-x_n^T w~) = a_n)

(:func:`residual_limit`). w_tilde does not depend on w_0. Derivation of its approach (derived
here): with w = w_svm ln t + w_tilde + delta, the support vectors' gradient terms are
(a_i / t) exp(-z_i^T delta), so in log-time s = ln t, d delta / ds = -sum_S a_i z_i z_i^T delta +
O(t^{1 - theta}) (theta > 1 the smallest margin z_j^T w_svm of the other examples): delta decays
like t^{-min(lambda, theta - 1)}, lambda the smallest eigenvalue of sum_S a_i z_i z_i^T on the
support span. Only polynomially in t: the init's part of rho is forgotten, slowly.

What is kept: GD only ever adds rows of Z to w, so the component of w_0 orthogonal to the data's
span is kept exactly, at every step, with or without momentum (any optimizer whose update lies in
the span of the gradients):

    P_perp w_t = P_perp w_0,   P_perp the projector onto the null space of X.                      (3)

The rest of the data span (directions of the data's span orthogonal to the support vectors, when
those do not span the data) keeps an init-dependent residual without a closed form here (Soudry et
al. 2018, Section 4 and Appendix: there rho_t may grow like ln ln t).

The init's share of the direction (derived here). Define it as the sine of the angle between the
iterate and the data's span,

    share_t = |P_perp w_t| / |w_t| = |P_perp w_0| / |w_t|,                                          (4)

exact by (3): the part of the predictor's direction that only the initialization put there (it
changes predictions off the training span: test points with a component in the null space). When
the support vectors span the data, (2)-(3) give w_t -> w_svm ln t + w_tilde + P_perp w_0, and since
w_svm, w_tilde lie in the span,

    share_t ~ |P_perp w_0| / sqrt(|w_svm ln t + w_tilde|^2 + |P_perp w_0|^2) ~ gamma |P_perp w_0| / ln t.

It falls to ``tol`` at ln t = the positive root s of |w_svm|^2 s^2 + 2 <w_svm, w_tilde> s +
|w_tilde|^2 = R^2, R = |P_perp w_0| sqrt(1 / tol^2 - 1) (:func:`init_share_forgetting_steps`), that
is t ~ exp(alpha |P_perp w_0| / (|w_svm| tol)) for w_0 = alpha * w0_draw: exponential in alpha / tol.
With decay the share falls like the null space's contraction in :mod:`initmem.theory.linear`.

When a minimizer exists: local forgetting (derived here, as in :mod:`initmem.theory.linear`)
-----------------------------------------------------------------------------------------------
Near w* the iteration is affine in the deviation w - w*, with the Hessian H* = Hess L(w*) in place of
least squares' X^T X / n: per eigendirection h of H*, the deviation shrinks like rho^T, rho the
spectral radius of linear's companion matrix with (h, l2, momentum, weight_decay). Forgetting
times -1 / ln(rho) steps (:func:`forgetting_times`); gradient flow 1 / (lr r),
r = (h + l2) / (1 - mu) + weight_decay. ``inf`` on the null space of X without decay.

The transient (derived here). These local times do not depend on alpha, but a large init must first
travel to the basin. Since sigma <= 1, |grad L| <= G = (1/n) sum_i |z_i| everywhere, so without
decay GD moves at most lr G per step: reaching the ball |w - w*| <= r from w_0 takes at least
(|w_0 - w*| - r) / (lr G) steps, linear in alpha (:func:`transient_bounds`). L is convex, so
L(w_T) - L* <= |w_0 - w*|^2 / (2 lr T) for lr <= 1 / the smoothness constant; on the ball's
boundary L - L* >= mu_r r^2 / 2 with mu_r the smallest Hessian eigenvalue on the span over the ball
(a lower bound from sigma'(|u_i*| + |z_i| r)), and by convexity outside it as well: at most
|w_0 - w*|^2 / (lr mu_r r^2) steps. For large alpha the travel time is linear in alpha: the loss
far from w* is 1-homogeneous, L(alpha v) ~ alpha (1/n) sum_i max(0, -z_i^T v), so the flow from
alpha * w_0 is alpha times the flow from w_0 run for time / alpha. That transient is alpha's memory
in this setting; the local rates hold within the basin where |Hess L(w) - H*| is small against
min h: |w - w*| <= eps min(h) / M, M = (1 / (6 sqrt 3)) (1/n) sum_i |z_i|^3 the Hessian's
Lipschitz constant (|l'''| <= 1 / (6 sqrt 3)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import linear
from .checks import check_data, check_momentum, check_number

__all__ = [
    "ASYMPTOTIC_FROM",
    "CASES",
    "HardMargin",
    "Separability",
    "TransientBounds",
    "forgetting_table",
    "forgetting_times",
    "gradient",
    "hard_margin",
    "hessian",
    "init_share",
    "init_share_forgetting_steps",
    "kept_component",
    "loss",
    "max_margin",
    "minimizer",
    "residual_decay_exponent",
    "residual_limit",
    "separability",
    "transient_bounds",
]

#: The three cases of the data (module docstring), in the order of :attr:`Separability.case`.
CASES = ("separable", "partly separable", "not separable")
#: |l'''(u)| <= 1 / (6 sqrt 3) for the logistic loss: the Hessian's Lipschitz factor.
_THIRD_DERIVATIVE_BOUND = 1.0 / (6.0 * math.sqrt(3.0))
_LOG_MAX_FLOAT = math.log(np.finfo(np.float64).max)


# ------------------------------------------------------------------------------------ the loss (1)
def _check_scale(X: np.ndarray) -> np.ndarray:
    """X whose Gram matrix X^T X is finite in float64 (the solves and norms below need it)."""
    largest = float(np.max(np.abs(X)))
    if largest * largest * X.size >= np.finfo(np.float64).max:
        raise ValueError(
            f"X must be finite and its Gram matrix X^T X representable in float64 (max |x_ij| = "
            f"{largest:.3g} overflows it): rescale the features"
        )
    return X


def _check_labels(X, y) -> tuple[np.ndarray, np.ndarray]:
    X, y = check_data(X, y)
    _check_scale(X)
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("y must hold labels in {-1, +1}")
    return X, y


def _signed(X, y) -> np.ndarray:
    X, y = _check_labels(X, y)
    return y[:, None] * X


def _check_w(w, d: int, name: str = "w") -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (d,) or not np.all(np.isfinite(w)):
        raise ValueError(
            f"{name} must be a finite vector of shape ({d},) to match X, got {w.shape}"
        )
    return w


def _sigmoid(u: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * u))


def loss(X, y, w) -> float:
    """Mean logistic loss (1/n) sum_i ln(1 + exp(-y_i x_i^T w)): equation (1)."""
    Z = _signed(X, y)
    return float(np.mean(np.logaddexp(0.0, -Z @ _check_w(w, Z.shape[1]))))


def gradient(X, y, w) -> np.ndarray:
    """Gradient of the mean logistic loss: -(1/n) Z^T sigma(-Z w), equation (1)."""
    Z = _signed(X, y)
    return -Z.T @ _sigmoid(-Z @ _check_w(w, Z.shape[1])) / Z.shape[0]


def hessian(X, y, w) -> np.ndarray:
    """Hessian of the mean logistic loss: (1/n) Z^T diag(sigma(u) sigma(-u)) Z, u = Z w (1)."""
    Z = _signed(X, y)
    u = Z @ _check_w(w, Z.shape[1])
    s = _sigmoid(u) * _sigmoid(-u)
    return (Z.T * s) @ Z / Z.shape[0]


def kept_component(X, w0) -> np.ndarray:
    """P_perp w_0: the init's component off the data's span, kept exactly by GD without decay (3)."""
    X = _check_scale(check_data(X)[0])
    return linear.null_space_projector(X) @ _check_w(w0, X.shape[1], "w0")


# ------------------------------------------------------------------------------- which case (LP)
@dataclass(frozen=True)
class Separability:
    """Which case the data are in (module docstring).

    ``case``: one of :data:`CASES`; ``separable_mask`` (n,): the maximal separable subset I (examples
    some v with Z v >= 0 puts strictly on the correct side); ``direction``: such a v (unit norm; zero
    when I is empty).
    """

    case: str
    separable_mask: np.ndarray
    direction: np.ndarray

    @property
    def has_minimizer(self) -> bool:
        """Whether L itself (no decay) has a minimizer: only when no example is separable."""
        return self.case == "not separable"


def separability(X, y) -> Separability:
    """The maximal separable subset I and the case: separable, partly separable or not separable.

    One linear program (HiGHS): maximize sum_i s_i over (v, s) with 0 <= s_i <= z_i^T v, s_i <= 1
    and Z v >= 0. Any separable i reaches s_i = 1 (scale v), every other has z_i^T v = 0 for every
    feasible v: the optimum's s is the indicator of I (Ji and Telgarsky 2019's decomposition).
    """
    from scipy.optimize import linprog  # scipy.optimize is slow to import; only this needs it

    Z = _signed(X, y)
    n, d = Z.shape
    scale = np.max(np.abs(Z)) or 1.0
    Zs = Z / scale
    cost = np.concatenate([np.zeros(d), -np.ones(n)])
    a_ub = np.block([[-Zs, np.eye(n)], [-Zs, np.zeros((n, n))]])
    bounds = [(None, None)] * d + [(0.0, 1.0)] * n
    res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(2 * n), bounds=bounds, method="highs")
    if not res.success:  # the LP is feasible (v = 0) and bounded (s <= 1): this is a solver failure
        raise RuntimeError(f"separability LP failed: {res.message}")
    mask = res.x[d:] > 0.5
    v = res.x[:d]
    norm = np.linalg.norm(v)
    direction = v / norm if mask.any() and norm > 0 else np.zeros(d)
    case = CASES[0] if mask.all() else (CASES[2] if not mask.any() else CASES[1])
    return Separability(case=case, separable_mask=mask, direction=direction)


# ----------------------------------------------------------------------- the separable case (2)-(4)
@dataclass(frozen=True)
class HardMargin:
    """The hard-margin SVM without bias: ``w_svm`` = argmin |w| s.t. y_i x_i^T w >= 1.

    ``dual`` (n,): the multipliers a_i >= 0 with w_svm = sum_i a_i y_i x_i (0 off the support);
    ``support``: the mask a_i > 0; ``margin`` = 1 / |w_svm|, the unit direction's margin.
    """

    w_svm: np.ndarray
    dual: np.ndarray
    support: np.ndarray
    margin: float

    @property
    def direction(self) -> np.ndarray:
        """The unit max-margin direction w_svm / |w_svm|."""
        return self.w_svm * self.margin


def hard_margin(X, y) -> HardMargin:
    """Hard-margin SVM through origin by least-distance programming (Lawson and Hanson 1974, ch. 23).

    min |w| s.t. Z w >= 1 equals NNLS: min_{u >= 0} |E u - f|, E = [Z^T; 1^T], f = e_{d+1}; with
    r = E u - f, w_svm = -r[:d] / r[d] and the dual a = u / (1 - sum u). ``r = 0`` means infeasible:
    the data are not linearly separable (ValueError). The support set's equalities are then solved
    again in least squares to polish w_svm and a to rounding.
    """
    from scipy.optimize import nnls  # scipy.optimize is slow to import; only this needs it

    Z = _signed(X, y)
    n, d = Z.shape
    E = np.vstack([Z.T, np.ones((1, n))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (n + d))
    r = E @ u - f
    if abs(r[-1]) <= 1e-12 or 1.0 - u.sum() <= 1e-12:
        raise ValueError(
            "the data are not linearly separable (no w has y_i x_i^T w > 0 for every i): "
            "no max-margin direction; see logistic.separability for the partly separable case"
        )
    dual = u / (1.0 - u.sum())
    support = dual > 1e-12 * max(dual.max(), 1.0)
    Zs = Z[support]
    # Polish: w_svm = Zs^T a_S with Zs w_svm = 1, i.e. (Zs Zs^T) a_S = 1 (min-norm a_S if singular).
    a_s = np.linalg.lstsq(Zs @ Zs.T, np.ones(Zs.shape[0]), rcond=None)[0]
    if np.all(a_s > 0):
        dual = np.zeros(n)
        dual[support] = a_s
    w_svm = Z.T @ dual
    if np.min(Z @ w_svm) < 1.0 - 1e-8:
        raise RuntimeError("hard-margin solve lost feasibility (ill-conditioned data)")
    return HardMargin(
        w_svm=w_svm, dual=dual, support=support, margin=float(1.0 / np.linalg.norm(w_svm))
    )


def max_margin(X, y) -> tuple[np.ndarray, float]:
    """Unit-norm hard-margin direction w_hat and its margin min_i y_i x_i^T w_hat.

    The direction GD's iterates tend to on separable data without decay (Soudry et al. 2018,
    Theorem 3; (2) of the module docstring). ValueError saying the data are not linearly
    separable otherwise.
    """
    hm = hard_margin(X, y)
    return hm.direction, hm.margin


def _stable_lr(Z: np.ndarray, lr) -> float:
    """lr in (0, 8 n / sigma_max(Z)^2): GD on the mean loss below 2 / its smoothness constant."""
    lr = check_number("lr", lr, strict=True)
    bound = 8.0 * Z.shape[0] / np.linalg.norm(Z, 2) ** 2
    if lr >= bound:
        raise ValueError(
            f"lr must be < 8 n / sigma_max(Z)^2 = {bound:.6g} here (got {lr!r}): the separable "
            "results (Soudry et al. 2018) assume GD below 2 / the mean loss's smoothness"
        )
    return lr


def _nondegenerate_margin(X, y) -> HardMargin:
    """The hard margin, with ValueError if an example lies on the margin with SVM dual 0.

    Soudry et al.'s w_tilde and the residual's rate assume every example on the margin is a support
    vector with a_i > 0 (their Theorem 4's "almost every data set"); on such degenerate data the
    support equation misses an example GD does feel (module docstring).
    """
    hm = hard_margin(X, y)
    X, _ = _check_labels(X, y)
    margins = _signed(X, y) @ hm.w_svm
    on_margin = np.flatnonzero(~hm.support & (margins <= 1.0 + 1e-8))
    if on_margin.size:
        i = int(on_margin[0])
        raise ValueError(
            f"degenerate support: example {i} (x = {X[i].tolist()}, y = {float(y[i]):+g}) lies on "
            f"the margin (y x^T w_svm = {margins[i]:.12g}) with SVM dual 0; residual_limit, "
            "residual_decay_exponent and init_share assume every example on the margin has a_i > 0 "
            "(Soudry et al. 2018, Theorem 4)"
        )
    return hm


def residual_limit(X, y, lr: float) -> np.ndarray:
    """Soudry et al.'s w_tilde: the limit of rho_t = w_t - w_svm ln t on the support vectors' span.

    Solves (lr / n) exp(-z_i^T w_tilde) = a_i for the support vectors (a the SVM dual), w_tilde in
    their span: z_i^T w_tilde = ln(lr / (n a_i)). Their eta is our lr / n (summed vs mean loss).
    Independent of the init. Gradient flow in continuous time tau = lr * t: pass ``lr=1``.
    Assumes what Soudry et al.'s Theorem 4 assumes, checked: lr < 8 n / sigma_max(Z)^2 (GD stable)
    and no example on the margin with a_i = 0 (degenerate support); ValueError naming the bound or
    the offending example otherwise. Where the support vectors do not span the data, rho_t off their
    span is not covered.
    """
    Z = _signed(X, y)
    lr = _stable_lr(Z, lr)
    hm = _nondegenerate_margin(X, y)
    n = Z.shape[0]
    Zs = Z[hm.support]
    target = np.log(lr / (n * hm.dual[hm.support]))
    return np.linalg.lstsq(Zs, target, rcond=None)[0]


def residual_decay_exponent(X, y) -> float:
    """Exponent p with |rho_t - w_tilde| = O(t^-p) on the support span: min(lambda, theta - 1).

    lambda: the smallest eigenvalue of sum_S a_i z_i z_i^T on the support vectors' span; theta: the
    smallest margin z_j^T w_svm of the other examples (inf if none). Derived here (module docstring,
    log-time linearization); the init's part of the residual is forgotten like t^-p. ValueError on
    degenerate support (an example on the margin with a_i = 0, where theta - 1 = 0 would be
    returned for an example the support equation does not hold).
    """
    hm = _nondegenerate_margin(X, y)
    Z = _signed(X, y)
    Zs = Z[hm.support]
    gram = (Zs.T * hm.dual[hm.support]) @ Zs
    _, sv, vh = np.linalg.svd(Zs, full_matrices=False)
    span = vh[sv > max(Zs.shape) * np.finfo(np.float64).eps * sv[0]]
    lam = float(np.linalg.eigvalsh(span @ gram @ span.T).min())
    others = Z[~hm.support] @ hm.w_svm
    theta = float(others.min()) if others.size else math.inf
    return min(lam, theta - 1.0)


def _separable_parts(X, y, w0, lr):
    Z = _signed(X, y)
    w0 = _check_w(w0, Z.shape[1], "w0")
    lr = _stable_lr(Z, lr)
    hm = _nondegenerate_margin(X, y)
    kept = kept_component(X, w0)
    return hm, residual_limit(X, y, lr), float(np.linalg.norm(kept))


def _check_steps_array(steps):
    t = check_number("steps", steps, strict=True)
    if np.ndim(t) > 1:
        raise ValueError(f"steps must be a number or a 1-D array (got shape {np.shape(t)})")
    return t


def init_share(X, y, w0, lr: float, steps) -> np.ndarray:
    """Predicted init share of the direction, |P_perp w_0| / |w_t|, at ``steps`` (equation (4)).

    |P_perp w_0| / sqrt(|w_svm ln t + w_tilde|^2 + |P_perp w_0|^2): asymptotic in t (the residual's
    init part decays like a power of t, module docstring; t >> n max a_i / lr), exact in its
    numerator by (3). Assumes separable data, no decay, support vectors that span the data, and
    what :func:`residual_limit` checks (stable lr, no degenerate support). Decays like
    margin * |P_perp w_0| / ln t. ``steps``: a number or a 1-D array of steps > 0.
    """
    t = _check_steps_array(steps)
    hm, w_tilde, kept = _separable_parts(X, y, w0, lr)
    s = np.log(np.atleast_1d(t))[:, None]
    span = np.linalg.norm(hm.w_svm[None, :] * s + w_tilde[None, :], axis=1)
    out = kept / np.sqrt(span**2 + kept**2) if kept > 0 else np.zeros_like(span)
    return float(out[0]) if np.ndim(t) == 0 else out


#: The asymptotic form (2) is trusted from this many separation times n max a_i / lr on (the time
#: the support vectors' margins ln(lr t / (n a_i)) of (2) turn positive).
ASYMPTOTIC_FROM = 10.0


def init_share_forgetting_steps(X, y, w0, lr: float, tol: float) -> float:
    """Steps until the init share (4) falls to ``tol``: exp(s), s the root in the module docstring.

    ~ exp(|P_perp w_0| / (|w_svm| tol)): exponential in alpha / tol for w_0 = alpha * w0_draw.
    Same assumptions as :func:`init_share`. Returns

    * 0 when P_perp w_0 = 0 (the share is 0 at every step, by (3)), and 0 when the share starts at
      or below ``tol`` (|P_perp w_0| / |w_0| <= tol) and (4) is below ``tol`` throughout its
      regime (below);
    * ``inf`` when the crossing lies beyond the float range (s > ln(max float) ~ 709.8);
    * exp(s), the larger root, when it lies in the asymptotic regime t >= ASYMPTOTIC_FROM n max_S
      a_i / lr (a_i the SVM dual), where (2) holds.

    ValueError when the share starts above ``tol`` and the root lies before that regime (or (4)
    never exceeds ``tol``): the share then falls to ``tol`` in the transient before the margins are
    positive, which (2)-(4) do not describe (simulate_logistic does). The regime never starts
    before step 1: |w_svm|^2 = sum a_i <= sigma_max(Z)^2 a_max sum a_i, so at any stable lr
    10 n a_max / lr > 1.25 (derived here).
    """
    tol = check_number("tol", tol, strict=True, high=1.0)
    hm, w_tilde, kept = _separable_parts(X, y, w0, lr)
    if kept == 0.0:
        return 0.0
    w_svm = hm.w_svm
    n = len(hm.dual)
    start_share = kept / float(np.linalg.norm(_check_w(w0, len(w_svm), "w0")))
    regime = math.log(ASYMPTOTIC_FROM * n * float(hm.dual.max()) / lr)
    a, b = w_svm @ w_svm, w_svm @ w_tilde
    c = w_tilde @ w_tilde - kept**2 * (1.0 / tol**2 - 1.0)
    disc = b * b - a * c
    s = (-b + math.sqrt(disc)) / a if disc > 0 else -math.inf
    if s <= regime:
        if start_share <= tol:
            return 0.0
        raise ValueError(
            f"the init share (4) reaches tol = {tol:g} at {math.exp(min(s, 709.0)):.4g} steps, "
            f"before the asymptotic regime t >= {ASYMPTOTIC_FROM:g} n max a_i / lr = "
            f"{math.exp(regime):.4g} steps where w_t = w_svm ln t + w_tilde (2) holds (the share "
            f"starts at {start_share:.4g}): it falls to tol in the transient, which (2)-(4) do not "
            "describe; simulate (simulate_logistic)"
        )
    return math.inf if s > _LOG_MAX_FLOAT else math.exp(s)


# ------------------------------------------------------------------------ when a minimizer exists
def _decay(l2: float, momentum: float, weight_decay: float) -> float:
    """kappa = l2 + (1 - mu) weight_decay: the decay at the fixed point of the iteration."""
    return l2 + (1.0 - momentum) * weight_decay


def minimizer(X, y, l2: float = 0.0, momentum: float = 0.0, weight_decay: float = 0.0):
    """The fixed point w* of GD: grad L(w*) + kappa w* = 0, kappa = l2 + (1 - momentum) weight_decay.

    Damped Newton in the data's span (w* has no component off it: there the decay pulls to 0, or,
    without decay, the loss is flat and the fixed point is taken in the span). ValueError when no
    fixed point exists: no decay and data separable or partly separable (module docstring).
    """
    Z = _signed(X, y)
    l2 = check_number("l2", l2)
    momentum = check_momentum(momentum)
    weight_decay = check_number("weight_decay", weight_decay)
    kappa = _decay(l2, momentum, weight_decay)
    if kappa == 0:
        case = separability(X, y).case
        if case != "not separable":
            raise ValueError(
                f"the data are {case}: without decay (l2 = weight_decay = 0) the logistic loss has "
                "no minimizer, GD diverges along a max-margin ray (Soudry et al. 2018; Ji and "
                "Telgarsky 2019); use max_margin / init_share, or add decay"
            )
    n, d = Z.shape
    h, V = linear.hessian_eigh(Z)
    basis = V[:, h > 0]
    A = Z @ basis
    c = np.zeros(basis.shape[1])

    def objective(c):
        return np.mean(np.logaddexp(0.0, -A @ c)) + 0.5 * kappa * c @ c

    for _ in range(200):
        u = A @ c
        g = -A.T @ _sigmoid(-u) / n + kappa * c
        s = _sigmoid(u) * _sigmoid(-u)
        H = (A.T * s) @ A / n + kappa * np.eye(len(c))
        step = np.linalg.solve(H, g)
        f0, t = objective(c), 1.0
        while objective(c - t * step) > f0 - 0.25 * t * (g @ step) and t > 1e-12:
            t *= 0.5
        c = c - t * step
        if np.linalg.norm(t * step) <= 1e-15 * max(1.0, np.linalg.norm(c)):
            break
    return basis @ c


def _local_eigenvalues(X, y, l2, momentum, weight_decay) -> np.ndarray:
    Z = _signed(X, y)
    w_star = minimizer(X, y, l2, momentum, weight_decay)
    u = Z @ w_star
    s = np.sqrt(_sigmoid(u) * _sigmoid(-u))
    # Eigenvalues of Hess L(w*) = (1/n) (S Z)^T (S Z): linear.hessian_eigh of the data matrix S Z,
    # with its null-space cutoff (the same null space as X's: s > 0 everywhere).
    return linear.hessian_eigh(s[:, None] * Z)[0]


def forgetting_times(
    X, y, lr: float, l2: float = 0.0, momentum: float = 0.0, weight_decay: float = 0.0
) -> np.ndarray:
    """Steps for the deviation from the fixed point w* to shrink by e, per eigendirection of H*.

    H* = Hess L(w*) (the data loss's Hessian at the fixed point :func:`minimizer`); the times are
    those of :func:`initmem.theory.linear.forgetting_table` with H*'s eigenvalues h in place of
    least squares' (coupled ``l2``, heavy-ball ``momentum``, decoupled ``weight_decay``): -1 / ln(rho),
    exact for the linearized iteration, asymptotic for logistic GD (the local rate, reached once the
    iterate is in the basin; see :func:`transient_bounds`). ``inf`` on the null space of X without
    decay (P_perp w_0 kept). Ascending h. ValueError when no minimizer exists (no decay and
    separable or partly separable data), or when lr is unstable along a direction.
    """
    h = _local_eigenvalues(X, y, l2, momentum, weight_decay)
    table = linear.forgetting_table(h, lr, l2=l2, momentum=momentum, weight_decay=weight_decay)
    return table.forgetting_steps.to_numpy()


def forgetting_table(
    X, y, lr: float, l2: float = 0.0, momentum: float = 0.0, weight_decay: float = 0.0
) -> pd.DataFrame:
    """:func:`forgetting_times` as a table, with the gradient-flow limit (linear's columns)."""
    h = _local_eigenvalues(X, y, l2, momentum, weight_decay)
    return linear.forgetting_table(h, lr, l2=l2, momentum=momentum, weight_decay=weight_decay)


@dataclass(frozen=True)
class TransientBounds:
    """Steps GD takes from w_0 into the ball |P_span (w - w*)| <= ``radius`` (no decay).

    Distances are measured in the data's span (the null-space part of w_0 never moves, (3)).

    ``lower`` = (|w_0 - w*| - r) / (lr G), G = (1/n) sum |z_i| (the largest gradient norm), linear in
    alpha; ``upper`` = |w_0 - w*|^2 / (lr mu_r r^2) (convexity), quadratic in alpha; ``speed`` = G.
    ``basin_radius``: the radius within which the Hessian is within 10% of H* on the span
    (0.1 min h / M), where :func:`forgetting_times` holds to about 10% (a cautious radius: GD
    started on its edge along the slowest direction kept the local rate to 8e-5 in the tests).
    """

    lower: float
    upper: float
    speed: float
    basin_radius: float


def transient_bounds(X, y, w0, lr: float, radius: float) -> TransientBounds:
    """Bounds on the transient before the local forgetting times apply (no decay, not separable).

    See :class:`TransientBounds` and the module docstring. The upper bound needs
    lr <= 4 n / sigma_max(Z)^2 (1 / the smoothness constant of the mean loss); ValueError otherwise.
    """
    Z = _signed(X, y)
    n, d = Z.shape
    w0 = _check_w(w0, d, "w0")
    lr = check_number("lr", lr, strict=True)
    radius = check_number("radius", radius, strict=True)
    smooth = np.linalg.norm(Z, 2) ** 2 / (4.0 * n)
    if lr > 1.0 / smooth:
        raise ValueError(f"lr must be <= 1 / smoothness = {1.0 / smooth:.6g} here (got {lr!r})")
    w_star = minimizer(X, y)
    norms = np.linalg.norm(Z, axis=1)
    speed = float(norms.mean())
    gap = w0 - w_star
    dist = float(np.linalg.norm(gap - linear.null_space_projector(Z) @ gap))  # span part only
    u_max = np.abs(Z @ w_star) + norms * radius
    s_min = _sigmoid(u_max) * _sigmoid(-u_max)
    h = linear.hessian_eigh(np.sqrt(s_min)[:, None] * Z)[0]
    mu_r = float(h[h > 0].min())
    h_star = _local_eigenvalues(X, y, 0.0, 0.0, 0.0)
    lipschitz = _THIRD_DERIVATIVE_BOUND * float(np.mean(norms**3))
    return TransientBounds(
        lower=max(dist - radius, 0.0) / (lr * speed),
        upper=dist**2 / (lr * mu_r * radius**2),
        speed=speed,
        basin_radius=0.1 * float(h_star[h_star > 0].min()) / lipschitz,
    )
