"""Linear least squares: how fast gradient descent forgets the initialization, direction by direction.

Conventions (every function of this module)
--------------------------------------------
Data ``X`` of shape (n, d), targets ``y`` of shape (n,), linear predictor f(x) = x^T w. Loss

    L(w) = |X w - y|^2 / (2 n),   gradient  H w - b,   H = X^T X / n  (the Hessian),  b = X^T y / n.

``H = V diag(h) V^T``; an argument named ``eigenvalues`` takes the 1-D eigenvalues ``h`` of ``H`` or,
if 2-D, the data matrix ``X`` itself (its ``H`` is then diagonalized, eigenvalues below
``max(n, d) * eps * max(h)`` set to exactly 0: the null space of the data).

Optimizer conventions are those of ``torch.optim`` (dampening 0, no Nesterov):

- ``l2``: coupled L2, added to the gradient as ``torch.optim.SGD`` does: g <- grad + lambda w.
- ``momentum``: heavy ball as ``torch.optim.SGD``: buf <- mu buf + g (buf = g at the first step),
  w <- w - lr buf.
- ``weight_decay``: decay applied to the weights, not the gradient, as ``torch.optim.AdamW``
  applies it ("SGDW"): w <- (1 - lr lambda_d) w - lr buf. Without momentum it is identical to
  coupled L2; with momentum it is not.

Units: ``steps`` are optimizer steps; "continuous time" is lr * steps, the time of gradient flow.

The per-direction iteration (derivation)
-----------------------------------------
Write w_t, b~ for the components along an eigenvector of ``H`` with eigenvalue h, lambda for
``l2``, lambda_d for ``weight_decay``, and u_t = -lr buf_{t-1} (u_0 = 0). Then

    u_{t+1} = mu u_t - lr ((h + lambda) w_t - b~),     w_{t+1} = (1 - lr lambda_d) w_t + u_{t+1},

a linear map of the state (w_t, u_t, 1). Without decoupled decay u_t = w_t - w_{t-1} and the
homogeneous part in (w_t, w_{t-1}) coordinates is the companion matrix

    [[1 + mu - lr (h + lambda), -mu], [1, 0]],

with characteristic polynomial z^2 - tau z + delta, tau = 1 + mu - lr (h + lambda + lambda_d),
delta = mu (1 - lr lambda_d) (the decoupled case has -mu (1 - lr lambda_d) in the corner). Since the
map is affine, w_T = a_T + c_T w_0 exactly, with c_T = [M^T]_{00} (state (1, 0) evolved by the
homogeneous 2x2 part M): the init component shrinks like rho^T, rho = max |z| the spectral radius.
Its forgetting time, the number of steps to shrink by a factor e, is -1 / ln(rho); without momentum
c_T = (1 - lr (h + lambda + lambda_d))^T is exactly rho^T (up to sign) at every T.

Stability (Jury's conditions on z^2 - tau z + delta): rho <= 1 iff
lr (h + lambda + (1 + mu) lambda_d) <= 2 (1 + mu) and mu |1 - lr lambda_d| <= 1.

Gradient-flow limit: p(1) = 1 - tau + delta = lr (h + lambda + (1 - mu) lambda_d) and
p'(1) = 1 - mu + O(lr), so the root near 1 is 1 - lr r + O(lr^2) with

    r = (h + lambda) / (1 - mu) + lambda_d,

the forgetting time tends to 1 / (lr r) steps, i.e. 1 / r in continuous time. With momentum this
needs the overdamped regime lr (h + lambda) <= (1 - sqrt(mu))^2 (real roots; lambda_d = 0): beyond
it the roots are complex with |z| = sqrt(delta) and the forgetting time saturates at
-2 / ln(mu (1 - lr lambda_d)) ~ 2 / (1 - mu) steps, the same for every such direction.

Null space (h = 0): without decay p(1) = 0, z = 1 is a root and the init component is kept forever
(c_T = 1 for every T, with or without momentum). With decay it is forgotten on about
(1 - mu) / (lr lambda) steps (coupled) or exactly -1 / ln(1 - lr lambda_d) ~ 1 / (lr lambda_d) steps
(decoupled, any momentum: the buffer never sees the null space).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .checks import check_data, check_momentum, check_number, check_steps

__all__ = [
    "PredictorInitDependence",
    "flow_forgetting_times",
    "forgetting_table",
    "forgetting_times",
    "hessian_eigh",
    "init_contraction",
    "max_stable_lr",
    "null_space_forgetting_time",
    "null_space_projector",
    "predictor_init_dependence",
    "spectral_radii",
]

# ---------------------------------------------------------------------------------------------
# The Hessian and its null space


def hessian_eigh(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of the least-squares Hessian H = X^T X / n.

    Returns ``(eigenvalues, eigenvectors)``: ``d`` eigenvalues in ascending order, the columns of
    the (d, d) ``eigenvectors`` orthonormal. Eigenvalues below ``max(n, d) * eps * max(h)``
    (numerically zero, as in ``numpy.linalg.matrix_rank``) are set to exactly 0: they span the null
    space of the data, which no gradient step ever touches.
    """
    X, _ = check_data(X)
    n, d = X.shape
    eigenvalues, eigenvectors = np.linalg.eigh(X.T @ X / n)
    cutoff = max(n, d) * np.finfo(np.float64).eps * max(float(eigenvalues[-1]), 0.0)
    eigenvalues = np.where(eigenvalues <= cutoff, 0.0, eigenvalues)
    return eigenvalues, eigenvectors


def null_space_projector(X: np.ndarray) -> np.ndarray:
    """Orthogonal projector (d, d) onto the null space of ``X`` (the directions with h = 0)."""
    eigenvalues, eigenvectors = hessian_eigh(X)
    null = eigenvectors[:, eigenvalues == 0.0]
    return null @ null.T


def _as_eigenvalues(eigenvalues: np.ndarray) -> np.ndarray:
    """1-D eigenvalues of H as given, or the eigenvalues of X^T X / n for a 2-D data matrix."""
    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    if eigenvalues.ndim == 2:
        return hessian_eigh(eigenvalues)[0]
    eigenvalues = np.atleast_1d(eigenvalues)
    if eigenvalues.ndim != 1:
        raise ValueError(
            "eigenvalues must be 1-D (eigenvalues of H) or 2-D (a data matrix X), "
            f"got shape {eigenvalues.shape}"
        )
    if eigenvalues.size == 0:
        raise ValueError("eigenvalues must not be empty (one eigenvalue of H per direction)")
    if not np.all(np.isfinite(eigenvalues)) or np.any(eigenvalues < 0):
        raise ValueError(
            "eigenvalues must be finite and >= 0 (H = X^T X / n is positive semidefinite)"
        )
    return eigenvalues


# ---------------------------------------------------------------------------------------------
# Spectral radius of the per-direction iteration


@dataclass(frozen=True)
class _Pipeline:
    lr: float
    l2: float
    momentum: float
    weight_decay: float

    @classmethod
    def checked(cls, lr, l2, momentum, weight_decay) -> _Pipeline:
        return cls(
            lr=check_number("lr", lr, strict=True),
            l2=check_number("l2", l2),
            momentum=check_momentum(momentum),
            weight_decay=check_number("weight_decay", weight_decay),
        )

    def homogeneous_matrices(self, h: np.ndarray) -> np.ndarray:
        """(len(h), 2, 2) matrices of the map (w_t, u_t) -> (w_{t+1}, u_{t+1}), data term dropped."""
        lr, mu = self.lr, self.momentum
        curvature = lr * (h + self.l2)
        matrices = np.empty((h.size, 2, 2))
        matrices[:, 0, 0] = 1.0 - lr * self.weight_decay - curvature
        matrices[:, 0, 1] = mu
        matrices[:, 1, 0] = -curvature
        matrices[:, 1, 1] = mu
        return matrices

    def flow_rate(self, h: np.ndarray) -> np.ndarray:
        """Gradient-flow forgetting rate r per unit of continuous time lr * t (module docstring)."""
        return (h + self.l2) / (1.0 - self.momentum) + self.weight_decay

    def log_spectral_radius(self, h: np.ndarray) -> np.ndarray:
        """ln(rho) per direction, accurate also when rho is within rounding of 1.

        Roots of z^2 - tau z + delta: complex pairs have |z| = sqrt(delta); real roots are taken
        in the cancellation-free form r1 = (tau + sign(tau) sqrt(disc)) / 2, r2 = delta / r1, and a
        positive dominant root r uses 1 - r = p(1) / (1 - r_other), p(1) = 1 - tau + delta computed
        without cancellation, so that ln(r) = log1p(-(1 - r)) keeps full relative precision.
        """
        lr, mu, lam_d = self.lr, self.momentum, self.weight_decay
        tau = 1.0 + mu - lr * (h + self.l2 + lam_d)
        delta = mu * (1.0 - lr * lam_d)
        p_at_1 = lr * (h + self.l2) + lr * lam_d * (1.0 - mu)
        disc = tau**2 - 4.0 * delta
        out = np.empty_like(h)
        is_complex = disc < 0
        if np.any(is_complex):  # complex pair: disc < 0 forces delta > 0
            out[is_complex] = 0.5 * np.log(delta)
        real = ~is_complex
        sq = np.sqrt(disc[real])
        r1 = 0.5 * (tau[real] + np.copysign(sq, tau[real]))
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = np.where(r1 != 0.0, delta / r1, 0.0)
            dominant = np.where(np.abs(r1) >= np.abs(r2), r1, r2)
            other = np.where(np.abs(r1) >= np.abs(r2), r2, r1)
            log_rho = np.log(np.abs(dominant))
            use_p1 = (dominant > 0) & (1.0 - other > 1e-8)
            accurate = np.log1p(-p_at_1[real] / (1.0 - other))
        out[real] = np.where(use_p1, accurate, log_rho)
        return out

    def stability_message(self, h: float, log_rho: float) -> str:
        lr, mu = self.lr, self.momentum
        load = h + self.l2 + (1.0 + mu) * self.weight_decay
        bound = 2.0 * (1.0 + mu) / load
        return (
            f"lr={lr!r} diverges along the eigendirection with eigenvalue h={h:.6g} (spectral "
            f"radius {math.exp(log_rho):.6g} > 1). Stability needs "
            "lr * (h + l2 + (1 + momentum) * weight_decay) <= 2 * (1 + momentum)"
            f" (and momentum * |1 - lr * weight_decay| <= 1): lr <= {bound:.6g} here."
        )

    def checked_log_spectral_radius(self, h: np.ndarray) -> np.ndarray:
        log_rho = self.log_spectral_radius(h)
        unstable = log_rho > 1e-12
        if np.any(unstable):
            worst = int(np.argmax(np.where(unstable, h, -np.inf)))
            raise ValueError(self.stability_message(float(h[worst]), float(log_rho[worst])))
        return np.minimum(log_rho, 0.0)

    def forgetting_steps(self, h: np.ndarray) -> np.ndarray:
        log_rho = self.checked_log_spectral_radius(h)
        with np.errstate(divide="ignore"):
            return np.where(log_rho < 0.0, -1.0 / log_rho, np.inf)


def spectral_radii(
    eigenvalues: np.ndarray,
    lr: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> np.ndarray:
    """Spectral radius rho of the per-direction iteration of the init component (one per eigenvalue).

    rho = max |z| over the roots of z^2 - tau z + delta (module docstring); without momentum
    rho = |1 - lr (h + l2 + weight_decay)|. Values above 1 are returned as they
    are (no stability check): use it to see how far a step size is from stable.
    """
    h = _as_eigenvalues(eigenvalues)
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    return np.exp(pipeline.log_spectral_radius(h))


def max_stable_lr(
    eigenvalues: np.ndarray,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> float:
    """Largest lr with rho <= 1 along every direction: 2 (1 + mu) / (h_max + lambda + (1 + mu) lambda_d).

    From Jury's condition 1 + tau + delta >= 0 on z^2 - tau z + delta (module docstring); the other
    condition, mu |1 - lr lambda_d| <= 1, binds only when lr lambda_d > 1 + 1/mu and is not included.
    ``inf`` when every eigenvalue and both decays are 0 (nothing can diverge).
    """
    h = _as_eigenvalues(eigenvalues)
    _Pipeline.checked(1.0, l2, momentum, weight_decay)
    load = float(h.max()) + l2 + (1.0 + momentum) * weight_decay
    return 2.0 * (1.0 + momentum) / load if load > 0 else math.inf


# ---------------------------------------------------------------------------------------------
# Forgetting times (user-facing)


def forgetting_times(
    eigenvalues: np.ndarray,
    lr: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> np.ndarray:
    """Steps for the init component along each eigendirection of H to shrink by a factor e.

    Statement: GD (``torch.optim.SGD`` conventions) with coupled ``l2`` (lambda), heavy-ball
    ``momentum`` and decoupled ``weight_decay`` (lambda_d) shrinks the init component along the
    eigendirection with eigenvalue h like rho^T, rho the spectral radius of the companion matrix
    [[1 + mu - lr (h + lambda), -mu (1 - lr lambda_d)], [1, 0]] with the decoupled decay on its
    diagonal (derivation in the module docstring). Returned: -1 / ln(rho) steps, exact for discrete
    steps (without momentum the component is exactly (1 - lr (h + lambda + lambda_d))^T w_0; with
    momentum rho^T is its asymptotic rate). In the null space with decoupled decay only the init
    component is exactly (1 - lr lambda_d)^T w_0 whatever the momentum. ``inf`` where rho = 1 (null
    space without decay: kept forever); 0 where rho = 0. Multiply by ``lr`` for continuous time.

    Assumptions: full-batch GD on L(w) = |Xw - y|^2 / (2n) (minibatch SGD has the same null-space
    behaviour, see ``initmem.theory.simulate``). ``eigenvalues``: eigenvalues of H, or a data
    matrix X. Raises ValueError naming the stability bound where a direction diverges (rho > 1).
    """
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    return pipeline.forgetting_steps(_as_eigenvalues(eigenvalues))


def flow_forgetting_times(
    eigenvalues: np.ndarray,
    lr: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> np.ndarray:
    """Gradient-flow limit of the forgetting times, in steps: 1 / (lr r), r = (h + lambda)/(1 - mu) + lambda_d.

    The limit lr -> 0 of ``forgetting_times`` (coupled ``l2``, decoupled ``weight_decay``) at fixed
    continuous time lr * t: the dominant root is 1 - lr r + O(lr^2) (module docstring), so the
    discrete time differs from this by a relative O(lr r) without momentum. With momentum the limit
    is reached only in the overdamped regime lr (h + lambda) << (1 - sqrt(mu))^2, with a relative
    error O(lr (h + lambda) / (1 - mu)^2); underdamped directions forget in about 2 / (1 - mu)
    steps instead (``forgetting_times``). In continuous time lr * t the forgetting time is 1 / r:
    1 / (h + lambda) without momentum. ``inf`` where r = 0.
    """
    h = _as_eigenvalues(eigenvalues)
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    rate = pipeline.flow_rate(h)
    with np.errstate(divide="ignore"):
        return np.where(rate > 0, 1.0 / (lr * rate), np.inf)


def null_space_forgetting_time(
    lr: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> float:
    """Steps for the init component in the null space of the data (h = 0) to shrink by a factor e.

    ``inf`` without decay (GD, momentum and minibatch SGD never touch it); with coupled L2 about
    (1 - mu) / (lr lambda) steps; with decoupled decay exactly -1 / ln(1 - lr lambda_d) steps.
    """
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    return float(pipeline.forgetting_steps(np.zeros(1))[0])


def forgetting_table(
    eigenvalues: np.ndarray,
    lr: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> pd.DataFrame:
    """One row per eigendirection: eigenvalue, spectral radius, forgetting times (steps and lr * t).

    Columns: ``eigenvalue``, ``spectral_radius``, ``forgetting_steps`` (exact, discrete),
    ``flow_forgetting_steps`` (gradient-flow limit), ``forgetting_lr_time`` and ``flow_forgetting_lr_time``
    (the same in continuous time lr * steps).
    """
    h = _as_eigenvalues(eigenvalues)
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    steps = pipeline.forgetting_steps(h)
    flow_steps = flow_forgetting_times(h, lr, l2, momentum, weight_decay)
    return pd.DataFrame(
        {
            "eigenvalue": h,
            "spectral_radius": np.exp(pipeline.log_spectral_radius(h)),
            "forgetting_steps": steps,
            "flow_forgetting_steps": flow_steps,
            "forgetting_lr_time": lr * steps,
            "flow_forgetting_lr_time": lr * flow_steps,
        }
    )


# ---------------------------------------------------------------------------------------------
# Exact trajectories: the init component and the trained predictor


def init_contraction(
    eigenvalues: np.ndarray,
    lr: float,
    steps: float,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> np.ndarray:
    """Factor c_T per eigendirection: the init component after T steps is c_T times its start.

    c_T = [M^T]_{00}, M the 2x2 homogeneous map of (w_t, u_t) (module docstring), computed by
    matrix powers: exact for discrete steps. Without momentum c_T = (1 - lr (h + lambda +
    lambda_d))^T. ``steps = numpy.inf`` gives the limit: 0 where rho < 1, 1 in the null space
    without decay; ValueError where it does not exist (rho = 1 at the stability edge) or diverges.
    """
    h = _as_eigenvalues(eigenvalues)
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    steps = check_steps(steps)
    log_rho = pipeline.checked_log_spectral_radius(h)
    if steps == np.inf:
        return _limit_of_contraction(pipeline, h, log_rho)
    return np.linalg.matrix_power(pipeline.homogeneous_matrices(h), steps)[:, 0, 0]


def _limit_of_contraction(pipeline: _Pipeline, h: np.ndarray, log_rho: np.ndarray) -> np.ndarray:
    kept = pipeline.flow_rate(h) == 0.0
    marginal = (log_rho == 0.0) & ~kept
    if np.any(marginal):
        raise ValueError(
            f"lr={pipeline.lr!r} sits on the stability edge along eigenvalue "
            f"h={float(h[marginal][0]):.6g}: the iterates oscillate without converging, so the "
            "limit steps -> inf does not exist"
        )
    return np.where(kept, 1.0, 0.0)


@dataclass(frozen=True)
class PredictorInitDependence:
    """The trained predictor after ``steps`` steps from w_0 = alpha * w0_draw, split exactly as

        f_T(x) = data_part(x) + alpha * init_part(x),   w_T = weights_data + alpha * weights_init.

    ``data_part`` is the predictor trained from w_0 = 0; ``init_part`` is what the init adds per
    unit of alpha (the memory of the initialization), both at the query points.
    """

    steps: float
    data_part: np.ndarray
    init_part: np.ndarray
    weights_data: np.ndarray
    weights_init: np.ndarray

    def predict(self, alpha: float) -> np.ndarray:
        """Predictions at the query points for init scale ``alpha``."""
        return self.data_part + alpha * self.init_part

    def weights(self, alpha: float) -> np.ndarray:
        """Weights w_T for init scale ``alpha``."""
        return self.weights_data + alpha * self.weights_init


def predictor_init_dependence(
    X: np.ndarray,
    y: np.ndarray,
    w0_draw: np.ndarray,
    lr: float,
    steps: float,
    *,
    x_query: np.ndarray | None = None,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> PredictorInitDependence:
    """Closed form of the trained linear predictor's dependence on the init scale alpha.

    Statement: full-batch GD (coupled L2, heavy ball, decoupled decay; module conventions) from
    w_0 = alpha * w0_draw gives w_T = A_T + alpha * V diag(c_T) V^T w0_draw, with c_T from
    ``init_contraction`` and A_T the weights trained from 0. Per eigendirection the state
    (w_t, u_t, 1) evolves by the 3x3 matrix [[1 - lr lambda_d - lr (h + lambda), mu, lr b~],
    [-lr (h + lambda), mu, lr b~], [0, 0, 1]]; its T-th power (exact, by repeated squaring) gives
    both parts. At ``steps = numpy.inf``: A_inf = V diag(1 / (h + lambda + (1 - mu) lambda_d)) V^T b
    on the directions with a positive rate (0 on the null space without decay: b has no component
    there) and the init part V_null V_null^T w0_draw (the null-space projection of the init, kept
    forever) without decay, 0 with it.

    Predictions are at ``x_query`` (m, d), default the training inputs ``X``.
    """
    X, y = check_data(X, y)
    n, d = X.shape
    w0_draw = np.asarray(w0_draw, dtype=np.float64)
    if w0_draw.shape != (d,):
        raise ValueError(f"w0_draw must have shape ({d},) to match X, got {w0_draw.shape}")
    x_query = X if x_query is None else np.asarray(x_query, dtype=np.float64)
    if x_query.ndim != 2 or x_query.shape[1] != d:
        raise ValueError(f"x_query must have shape (m, {d}), got {x_query.shape}")
    pipeline = _Pipeline.checked(lr, l2, momentum, weight_decay)
    steps = check_steps(steps)

    h, V = hessian_eigh(X)
    b = V.T @ (X.T @ y / n)
    b[h == 0.0] = 0.0  # b = X^T y / n lies in the row space: drop the rounding in the null space
    log_rho = pipeline.checked_log_spectral_radius(h)
    if steps == np.inf:
        contraction = _limit_of_contraction(pipeline, h, log_rho)
        rate = h + l2 + (1.0 - momentum) * weight_decay
        safe = np.where(rate > 0, rate, 1.0)
        data_coords = np.where(rate > 0, b / safe, 0.0)
    else:
        M = np.zeros((d, 3, 3))
        M[:, :2, :2] = pipeline.homogeneous_matrices(h)
        M[:, 0, 2] = lr * b
        M[:, 1, 2] = lr * b
        M[:, 2, 2] = 1.0
        power = np.linalg.matrix_power(M, steps)
        contraction, data_coords = power[:, 0, 0], power[:, 0, 2]
    weights_data = V @ data_coords
    weights_init = V @ (contraction * (V.T @ w0_draw))
    return PredictorInitDependence(
        steps=steps,
        data_part=x_query @ weights_data,
        init_part=x_query @ weights_init,
        weights_data=weights_data,
        weights_init=weights_init,
    )
