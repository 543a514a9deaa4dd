"""Simulators for scale-invariant (BatchNorm-like) weights, in numpy float64.

What backs :mod:`initmem.theory.normalized`: :class:`ScaleInvariantLoss` and
:func:`simulate_norms`, a synthetic loss ``L(w) = f(w / |w|)`` with analytic gradients and fresh
"minibatch" noise every step, trained by numpy copies of torch's SGD (heavy ball, Nesterov), Adam,
AdamW and RMSprop. Several init scales ``alpha`` run side by side on the same noise (common random
numbers), so the log-ratio of their norms is measured directly.

Conventions (as in ``docs/run-format.md`` and ``initmem.empirical.optim``): ``l2`` is coupled (added
to the gradient, torch's ``weight_decay`` of SGD/Adam/RMSprop); ``weight_decay`` is decoupled,
``w <- w - lr * weight_decay * w``; both are computed from the pre-step weights, so one step is
``w' = (1 - lr * weight_decay) w - lr * u`` with ``u`` the optimizer's update for ``g + l2 * w``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import check_integer, check_momentum, check_number
from .normalized import OPTIMIZERS, angular_update, check_optimizer


@dataclass(frozen=True)
class ScaleInvariantLoss:
    """``L_t(w) = f_t(w / |w|)`` with ``f_t(u) = 0.5 * u^T A u + xi_t^T u``: exactly scale-invariant.

    ``A = curvature * Q diag(linspace(0, 1, dim)) Q^T`` (a random rotation ``Q`` from ``seed``) is the
    deterministic part; ``xi_t`` is fresh Gaussian noise each step with ``E|P xi_t|^2 = noise_sq``,
    ``P = I - u u^T`` (the minibatch noise at unit norm; a batch of ``b`` examples with per-example
    trace ``s`` has ``noise_sq = s / b``). The gradient is ``g = P (A u + xi_t) / |w|``, so
    ``<w, g> = 0`` and ``|g| = |g_hat| / |w|`` hold exactly for every draw.
    """

    dim: int
    noise_sq: float = 1.0
    curvature: float = 0.0
    seed: int = 0

    def __post_init__(self):
        check_integer("dim", self.dim, low=2)
        check_number("noise_sq", self.noise_sq)
        check_number("curvature", self.curvature)

    def matrix(self) -> np.ndarray:
        """The PSD matrix ``A`` (dim x dim, float64)."""
        rng = np.random.default_rng([self.seed, 1])
        q, _ = np.linalg.qr(rng.standard_normal((self.dim, self.dim)))
        return self.curvature * (q * np.linspace(0.0, 1.0, self.dim)) @ q.T

    def draw_noise(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """One step's noise ``xi`` (shared by ``rows`` parallel runs), scaled so ``E|P xi|^2 = noise_sq``."""
        xi = rng.standard_normal(self.dim) * np.sqrt(self.noise_sq / (self.dim - 1))
        return np.broadcast_to(xi, (rows, self.dim))

    def loss_and_grad(
        self, w: np.ndarray, noise: np.ndarray, matrix: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Loss and analytic gradient for each row of ``w`` (shape ``(rows, dim)``)."""
        a = self.matrix() if matrix is None and self.curvature else matrix
        norm = np.sqrt(np.einsum("ri,ri->r", w, w))[:, None]
        u = w / norm
        au = 0.0 * u if a is None else u @ a
        grad_f = au + noise
        loss = 0.5 * np.einsum("ri,ri->r", au, u) + np.einsum("ri,ri->r", noise, u)
        radial = np.einsum("ri,ri->r", grad_f, u)[:, None]
        return loss, (grad_f - radial * u) / norm


@dataclass(frozen=True)
class NormTrajectory:
    """Squared norms of parallel runs that differ only in the init scale.

    ``steps`` (n_records,) optimizer steps done; ``alphas`` (n_alpha,); ``norm_sq`` (n_alpha,
    n_records) ``|w_t|^2``; ``grad_sq_unit_sum`` (n_alpha, n_records) the running sum over steps
    ``s < t`` of ``|g_hat_s|^2 = |g_s|^2 |w_s|^2`` (the loss gradient at unit norm, without L2);
    ``angular_update`` (n_alpha, n_records) the running sum over steps ``s < t`` of the angle
    ``angle(w_s, w_{s+1})`` in radians (:func:`~initmem.theory.normalized.angular_update`).
    """

    steps: np.ndarray
    alphas: np.ndarray
    norm_sq: np.ndarray
    grad_sq_unit_sum: np.ndarray
    angular_update: np.ndarray | None = None

    def log_ratio(self, reference: int = 0) -> np.ndarray:
        """``ln(|w_t(alpha)|^2 / |w_t(alpha_ref)|^2)`` for every run (row ``reference`` is the reference)."""
        return np.log(self.norm_sq / self.norm_sq[reference])


def simulate_norms(
    loss: ScaleInvariantLoss,
    *,
    optimizer: str = "sgd",
    lr: float,
    steps: int,
    alphas=(1.0,),
    init_norm_sq: float = 1.0,
    momentum: float = 0.0,
    nesterov: bool = False,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    seed: int = 0,
    record_every: int = 1,
    lr_multipliers=None,
) -> NormTrajectory:
    """Train ``w_0 = alpha * sqrt(init_norm_sq) * e`` (one random unit ``e``) for ``steps`` steps.

    Each optimizer is a line-by-line numpy copy of torch's update rule (``betas[1]`` is RMSprop's
    smoothing constant; RMSprop uses ``momentum``; Adam-family ignore it). ``lr_multipliers``: the
    schedule, one factor per step (multiplying ``lr`` and so the decoupled decay). Units: steps.
    """
    check_optimizer(optimizer)
    lr = check_number("lr", lr, strict=True)
    init_norm_sq = check_number("init_norm_sq", init_norm_sq, strict=True)
    for name, value in (("l2", l2), ("weight_decay", weight_decay), ("eps", eps)):
        check_number(name, value)
    check_momentum(momentum)
    steps = check_integer("steps", steps)
    record_every = check_integer("record_every", record_every)
    if lr_multipliers is not None:
        lr_multipliers = check_number("lr_multipliers", np.atleast_1d(lr_multipliers))
        if lr_multipliers.shape != (steps,):
            raise ValueError(f"lr_multipliers must hold {steps} numbers >= 0 (one per step)")
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or not np.all(alphas > 0):
        raise ValueError(f"alphas must be a 1-d sequence of positive numbers (got {alphas})")

    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(loss.dim)
    direction /= np.linalg.norm(direction)
    w = np.outer(alphas * np.sqrt(init_norm_sq), direction)
    a = loss.matrix() if loss.curvature else None
    rows = len(alphas)
    buf = np.zeros_like(w)
    sq = np.zeros_like(w)
    beta1, beta2 = betas
    grad_sq_unit_sum = np.zeros(rows)
    angle_sum = np.zeros(rows)
    records = [0]
    norms = [np.sum(w * w, axis=1)]
    sums = [grad_sq_unit_sum.copy()]
    angles = [angle_sum.copy()]
    for t in range(1, steps + 1):
        _, g = loss.loss_and_grad(w, loss.draw_noise(rng, rows), a)
        norm_sq = np.sum(w * w, axis=1)
        grad_sq_unit_sum += np.sum(g * g, axis=1) * norm_sq
        lr_t = lr if lr_multipliers is None else lr * lr_multipliers[t - 1]
        if l2:
            g = g + l2 * w
        if optimizer == "sgd":
            buf = g if t == 1 else momentum * buf + g
            update = g + momentum * buf if nesterov else buf
        elif optimizer in ("adam", "adamw"):
            buf = beta1 * buf + (1 - beta1) * g
            sq = beta2 * sq + (1 - beta2) * g * g
            update = (buf / (1 - beta1**t)) / (np.sqrt(sq / (1 - beta2**t)) + eps)
        else:
            sq = beta2 * sq + (1 - beta2) * g * g
            update = g / (np.sqrt(sq) + eps)
            if momentum:
                buf = momentum * buf + update
                update = buf
        w_new = (1.0 - lr_t * weight_decay) * w - lr_t * update
        angle_sum += angular_update(w, w_new)
        w = w_new
        if t % record_every == 0 or t == steps:
            records.append(t)
            norms.append(np.sum(w * w, axis=1))
            sums.append(grad_sq_unit_sum.copy())
            angles.append(angle_sum.copy())
    return NormTrajectory(
        steps=np.asarray(records),
        alphas=alphas,
        norm_sq=np.stack(norms, axis=1),
        grad_sq_unit_sum=np.stack(sums, axis=1),
        angular_update=np.stack(angles, axis=1),
    )


def first_time_below(steps: np.ndarray, values: np.ndarray, tol: float) -> float:
    """First recorded step from which ``|values|`` stays <= ``tol`` (``inf`` if never)."""
    above = np.flatnonzero(np.abs(np.asarray(values)) > tol)
    if above.size == 0:
        return float(steps[0])
    if above[-1] == len(steps) - 1:
        return float("inf")
    return float(steps[above[-1] + 1])


__all__ = [
    "NormTrajectory",
    "OPTIMIZERS",
    "ScaleInvariantLoss",
    "first_time_below",
    "simulate_norms",
]
