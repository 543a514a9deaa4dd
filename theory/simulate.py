"""Small float64 numpy simulators: the iterations the closed forms describe, run step by step.

Used by the tests (closed form against simulation) and wherever no closed form exists (Adam).
Conventions are those of ``initmem.theory.linear`` (least squares) and ``initmem.theory.deep_linear``
(deep linear networks): L = |X w - y|^2 / (2n), optimizer updates as ``torch.optim`` applies them.

Minibatches: each step draws a fresh uniformly random subset of ``batch_size`` distinct examples,
independently across steps (seeded ``numpy.random.default_rng``); ``batch_size=None`` is full-batch
GD. Trajectories are recorded every ``record_every`` steps, step 0 and the last step included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .checks import check_data, check_integer, check_momentum, check_number, check_steps
from .deep_linear import check_weights, check_xy, deep_linear_gradients
from .linear import null_space_projector

__all__ = [
    "DeepLinearTrajectory",
    "LogisticTrajectory",
    "LogitScaleTrajectory",
    "Trajectory",
    "adam_null_space_forgetting",
    "measured_forgetting_step",
    "simulate_adam_least_squares",
    "simulate_deep_linear",
    "simulate_least_squares",
    "simulate_logit_scale",
    "simulate_logistic",
]


@dataclass(frozen=True)
class Trajectory:
    """Recorded weights of a least-squares run: ``weights[k]`` after ``steps[k]`` optimizer steps."""

    steps: np.ndarray
    weights: np.ndarray


@dataclass(frozen=True)
class DeepLinearTrajectory:
    """Recorded layers of a deep linear run: ``weights[k]`` ([W_1, ..., W_L]) after ``steps[k]`` steps."""

    steps: np.ndarray
    weights: list[list[np.ndarray]]


# ---------------------------------------------------------------------------------------------
# Checks and minibatches


def _check_batch_size(batch_size: int | None, n: int) -> int | None:
    if batch_size is None:
        return None
    batch_size = check_integer("batch_size", batch_size)
    if batch_size > n:
        raise ValueError(f"batch_size must be an integer in [1, {n}] or None, got {batch_size!r}")
    return batch_size


def _check_run(lr: float, steps: int, record_every: int) -> tuple[float, int, int]:
    steps_checked = check_steps(steps)
    if steps_checked == np.inf:
        raise ValueError("steps must be finite for a simulation")
    record_every = check_integer("record_every", record_every)
    return check_number("lr", lr, strict=True), steps_checked, record_every


def _is_recorded(step: int, steps: int, record_every: int) -> bool:
    return step % record_every == 0 or step == steps


def _batches(n: int, batch_size: int | None, steps: int, seed: int):
    """Index arrays, one per step: all of range(n), or a fresh random subset of size batch_size."""
    rng = np.random.default_rng(seed)
    everything = np.arange(n)
    for _ in range(steps):
        yield everything if batch_size is None else rng.choice(n, size=batch_size, replace=False)


def _least_squares_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Gradient of |X w - y|^2 / (2 |rows|) on the given rows."""
    return X.T @ (X @ w - y) / X.shape[0]


def _check_least_squares(X, y, w0):
    X, y = check_data(X, y)
    w0 = np.asarray(w0, dtype=np.float64)
    if w0.shape != (X.shape[1],):
        raise ValueError(f"w0 must have shape ({X.shape[1]},) to match X, got {w0.shape}")
    return X, y, w0.copy()


# ---------------------------------------------------------------------------------------------
# Least squares: SGD with heavy ball, coupled L2 and decoupled decay; Adam / AdamW


def simulate_least_squares(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    lr: float,
    steps: int,
    *,
    batch_size: int | None = None,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    seed: int = 0,
    record_every: int = 1,
) -> Trajectory:
    """GD (``batch_size=None``) or minibatch SGD on L = |Xw - y|^2 / (2n), recorded.

    Update (``torch.optim.SGD`` with dampening 0, plus AdamW-style decoupled decay):
    g = grad_B(w) + l2 * w; buf = momentum * buf + g (buf = g at the first step);
    w = (1 - lr * weight_decay) * w - lr * buf.
    """
    X, y, w = _check_least_squares(X, y, w0)
    lr, steps, record_every = _check_run(lr, steps, record_every)
    batch_size = _check_batch_size(batch_size, X.shape[0])
    l2 = check_number("l2", l2)
    momentum = check_momentum(momentum)
    decay = 1.0 - lr * check_number("weight_decay", weight_decay)
    buf = np.zeros_like(w)
    recorded_steps, records = [0], [w.copy()]
    for step, rows in enumerate(_batches(X.shape[0], batch_size, steps, seed), start=1):
        g = _least_squares_gradient(X[rows], y[rows], w) + l2 * w
        buf = momentum * buf + g
        w = decay * w - lr * buf
        if _is_recorded(step, steps, record_every):
            recorded_steps.append(step)
            records.append(w.copy())
    return Trajectory(steps=np.array(recorded_steps), weights=np.array(records))


def simulate_adam_least_squares(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    lr: float,
    steps: int,
    *,
    batch_size: int | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    seed: int = 0,
    record_every: int = 1,
) -> Trajectory:
    """Adam (AdamW with ``weight_decay``) on least squares, as ``torch.optim.AdamW``.

    Per step t = 1, 2, ...: w <- (1 - lr lambda_d) w; m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
    w <- w - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
    The per-coordinate normalization does not commute with the projection on the data's row space,
    so unlike SGD, Adam moves the null-space component of w: at step 1 by exactly
    lr * P_null (g_0 / (|g_0| + eps)), i.e. lr * P_null sign(g_0) when |g_0| >> eps.
    """
    X, y, w = _check_least_squares(X, y, w0)
    lr, steps, record_every = _check_run(lr, steps, record_every)
    batch_size = _check_batch_size(batch_size, X.shape[0])
    beta1, beta2 = (float(b) for b in betas)
    if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
        raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
    eps = check_number("eps", eps, strict=True)
    decay = 1.0 - lr * check_number("weight_decay", weight_decay)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    recorded_steps, records = [0], [w.copy()]
    for step, rows in enumerate(_batches(X.shape[0], batch_size, steps, seed), start=1):
        g = _least_squares_gradient(X[rows], y[rows], w)
        w = decay * w
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        w = w - lr * (m / (1.0 - beta1**step)) / (np.sqrt(v / (1.0 - beta2**step)) + eps)
        if _is_recorded(step, steps, record_every):
            recorded_steps.append(step)
            records.append(w.copy())
    return Trajectory(steps=np.array(recorded_steps), weights=np.array(records))


# ---------------------------------------------------------------------------------------------
# Measured forgetting


def measured_forgetting_step(steps: np.ndarray, component: np.ndarray) -> float:
    """First recorded step at which a component has moved by (1 - 1/e) of its initial size.

    ``component``: (records, k) trajectory of a part of the weights (e.g. its null-space
    projection) recorded at ``steps``. Returns the first step with |c_t - c_0| >= (1 - 1/e) |c_0|,
    ``inf`` if none. For a pure contraction c_t = rho^t c_0 (0 < rho < 1) that is
    ceil(-1 / ln rho), the closed-form forgetting time rounded up: the simulated and closed-form
    times measure the same thing. It also measures motion that is not a contraction (Adam).
    """
    steps = np.asarray(steps)
    component = np.asarray(component, dtype=np.float64)
    if component.ndim == 1:
        component = component[:, None]
    if component.ndim != 2 or steps.shape != (component.shape[0],):
        raise ValueError(
            f"component must be (records, k) with records = len(steps) = {steps.shape}, "
            f"got {component.shape}"
        )
    start = np.linalg.norm(component[0])
    if start == 0:
        raise ValueError("component must be nonzero at step 0 to measure its forgetting")
    moved = np.linalg.norm(component - component[0], axis=1) >= (1.0 - math.exp(-1.0)) * start
    hits = np.flatnonzero(moved)
    return float(steps[hits[0]]) if hits.size else math.inf


def adam_null_space_forgetting(
    X: np.ndarray,
    y: np.ndarray,
    w0_draw: np.ndarray,
    alphas,
    lrs,
    steps: int,
    *,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    batch_size: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Measured forgetting of the null-space init component by Adam, one row per (alpha, lr).

    No closed form: Adam is simulated (``simulate_adam_least_squares``) from w_0 = alpha * w0_draw
    and the null-space projection n_t = P_null w_t measured (``measured_forgetting_step``). SGD
    keeps n_t = n_0 exactly (forgetting time ``inf``); Adam's steps are about lr per coordinate,
    whatever the gradient's size, so the heuristic forgetting time is

        heuristic_steps = (1 - 1/e) |n_0| / (lr |P_null sign(g_0)|),

    the steps to cover (1 - 1/e) |n_0| moving at Adam's first-step null-space speed: linear in
    alpha / lr. Adam stops moving once it has fit the data, so the null-space motion is bounded by
    the path to the solution: large inits are forgotten only in part (``final_displacement`` < 1 - 1/e,
    ``measured_steps`` = inf).

    Columns: alpha, lr, measured_steps, heuristic_steps, final_displacement (|n_T - n_0| / |n_0|),
    final_loss.
    """
    X, y, w0_draw = _check_least_squares(X, y, w0_draw)
    projector = null_space_projector(X)
    null_draw = projector @ w0_draw
    if np.linalg.norm(null_draw) == 0:
        raise ValueError("w0_draw has no component in the null space of X: nothing to forget")
    rows = []
    for alpha in np.atleast_1d(np.asarray(alphas, dtype=np.float64)):
        alpha = check_number("alphas", alpha, strict=True)
        w0 = alpha * w0_draw
        sign_speed = np.linalg.norm(projector @ np.sign(_least_squares_gradient(X, y, w0)))
        for lr in np.atleast_1d(np.asarray(lrs, dtype=np.float64)):
            run = simulate_adam_least_squares(
                X, y, w0, lr, steps, batch_size=batch_size, betas=betas, eps=eps, seed=seed
            )
            null = run.weights @ projector
            start = np.linalg.norm(null[0])
            residual = X @ run.weights[-1] - y
            rows.append(
                {
                    "alpha": alpha,
                    "lr": float(lr),
                    "measured_steps": measured_forgetting_step(run.steps, null),
                    "heuristic_steps": (1.0 - math.exp(-1.0)) * start / (lr * sign_speed),
                    "final_displacement": float(np.linalg.norm(null[-1] - null[0]) / start),
                    "final_loss": float(residual @ residual / (2 * X.shape[0])),
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Deep linear networks: GD / SGD with coupled L2


def simulate_deep_linear(
    weights,
    X: np.ndarray,
    Y: np.ndarray,
    lr: float,
    steps: int,
    *,
    l2: float = 0.0,
    batch_size: int | None = None,
    seed: int = 0,
    record_every: int = 1,
) -> DeepLinearTrajectory:
    """GD or minibatch SGD on a deep linear net: W_l <- (1 - lr lambda) W_l - lr G_l (all layers at once).

    Conventions of ``initmem.theory.deep_linear`` (loss |X W^T - Y|_F^2 / (2n), W_l of shape
    (d_l, d_(l-1))); minibatch gradients average over the batch's examples.
    """
    weights = [W.copy() for W in check_weights(weights)]
    X, Y = check_xy(weights, X, Y)
    lr, steps, record_every = _check_run(lr, steps, record_every)
    batch_size = _check_batch_size(batch_size, X.shape[0])
    shrink = 1.0 - lr * check_number("l2", l2)
    recorded_steps, records = [0], [[W.copy() for W in weights]]
    for step, rows in enumerate(_batches(X.shape[0], batch_size, steps, seed), start=1):
        grads = deep_linear_gradients(weights, X[rows], Y[rows])
        weights = [shrink * W - lr * G for W, G in zip(weights, grads, strict=True)]
        if _is_recorded(step, steps, record_every):
            recorded_steps.append(step)
            records.append([W.copy() for W in weights])
    return DeepLinearTrajectory(steps=np.array(recorded_steps), weights=records)


# ---------------------------------------------------------------------------------------------
# Logistic regression (initmem.theory.logistic's conventions)


@dataclass(frozen=True)
class LogisticTrajectory:
    """Weights of parallel logistic-regression runs: ``weights[k, j]`` is run j after ``steps[k]``."""

    steps: np.ndarray
    weights: np.ndarray


def simulate_logistic(
    X: np.ndarray,
    y: np.ndarray,
    w0: np.ndarray,
    lr: float,
    record_steps,
    *,
    l2: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> LogisticTrajectory:
    """Full-batch GD on the mean logistic loss from each row of ``w0`` ((d,) or (runs, d)).

    Update (``torch.optim.SGD`` heavy ball, dampening 0; decoupled decay as AdamW):
    g = -(1/n) Z^T sigma(-Z w) + l2 w, buf = momentum buf + g (buf = g at the first step),
    w = (1 - lr weight_decay) w - lr buf. Recorded after each step count in ``record_steps``
    (sorted integers >= 0; the run lasts until the last one). float64.
    """
    X, y = check_data(X, y)
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("y must hold labels in {-1, +1}")
    Z = y[:, None] * X
    n, d = Z.shape
    w = np.atleast_2d(np.asarray(w0, dtype=np.float64)).copy()
    if w.shape[1] != d:
        raise ValueError(f"w0 must have shape ({d},) or (runs, {d}), got {np.shape(w0)}")
    lr = check_number("lr", lr, strict=True)
    l2 = check_number("l2", l2)
    momentum = check_momentum(momentum)
    shrink = 1.0 - lr * check_number("weight_decay", weight_decay)
    record = np.asarray(record_steps, dtype=np.int64)
    if record.ndim != 1 or record.size == 0 or record[0] < 0 or np.any(np.diff(record) <= 0):
        raise ValueError("record_steps must be a non-empty increasing sequence of integers >= 0")
    out = np.empty((record.size, w.shape[0], d))
    buf = np.zeros_like(w)
    k = 0
    for t in range(int(record[-1]) + 1):
        while k < record.size and record[k] == t:
            out[k] = w
            k += 1
        if t == record[-1]:
            break
        u = w @ Z.T
        g = -(0.5 * (1.0 - np.tanh(0.5 * u))) @ Z / n + l2 * w
        buf = g if t == 0 else momentum * buf + g
        w = shrink * w - lr * buf
    return LogisticTrajectory(steps=record, weights=out)


# ---------------------------------------------------------------------------------------------
# A softmax head on fixed normalized features (initmem.theory.logit_scale's conventions)


@dataclass(frozen=True)
class LogitScaleTrajectory:
    """``scale[k]``: RMS logit after ``steps[k]`` steps; ``balance[k]``: |W_j|^2 - gamma_j^2 (p,);
    ``gain[k]``: RMS of the gain gamma."""

    steps: np.ndarray
    scale: np.ndarray
    balance: np.ndarray
    gain: np.ndarray


def simulate_logit_scale(
    features: np.ndarray,
    labels: np.ndarray,
    classes: int,
    alpha: float,
    lr: float,
    steps: int,
    *,
    optimizer: str = "sgd",
    l2: float = 0.0,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    both: bool = True,
    seed: int = 0,
    record_every: int = 10,
) -> LogitScaleTrajectory:
    """Full-batch training of z_i = W (gamma * phi_i) (no BN bias) by mean softmax cross-entropy.

    Init: W ~ alpha U(-1, 1) / sqrt(p) (torch's default Linear init, times alpha) and gamma = alpha
    (``both``) or 1 (head only). ``optimizer``: "sgd" (heavy ball), "adam" or "adamw" (numpy copies
    of torch's rules, eps = 1e-8: ``torch.optim.Adam(weight_decay=l2)`` and
    ``torch.optim.AdamW(weight_decay=weight_decay)`` to 1e-10 in float64, tested; ``l2`` coupled,
    ``weight_decay`` decoupled for every optimizer). float64.
    """
    phi = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels)
    n, p = phi.shape
    check_number("alpha", alpha, strict=True)
    lr = check_number("lr", lr, strict=True)
    if optimizer not in ("sgd", "adam", "adamw"):
        raise ValueError(f"optimizer must be one of ['sgd', 'adam', 'adamw'] (got {optimizer!r})")
    if not isinstance(both, (bool, np.bool_)):
        raise ValueError(f"both must be a bool (got {both!r})")
    rng = np.random.default_rng(seed)
    W = alpha * rng.uniform(-1.0, 1.0, (classes, p)) / math.sqrt(p)
    gamma = np.full(p, alpha if both else 1.0)
    onehot = np.eye(classes)[labels]
    params, bufs = [W, gamma], [np.zeros_like(W), np.zeros_like(gamma)]
    sqs = [np.zeros_like(W), np.zeros_like(gamma)]
    beta1, beta2 = betas
    records, scales, balances, gains = [], [], [], []
    for t in range(steps + 1):
        W, gamma = params
        z = (phi * gamma) @ W.T
        if t % record_every == 0 or t == steps:
            records.append(t)
            scales.append(math.sqrt(float(np.mean(z * z))))
            balances.append(np.sum(W * W, axis=0) - gamma * gamma)
            gains.append(math.sqrt(float(np.mean(gamma * gamma))))
        if t == steps:
            break
        prob = np.exp(z - z.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        delta = (prob - onehot) / n
        grads = [delta.T @ (phi * gamma), np.sum((delta @ W) * phi, axis=0)]
        for i in range(2):
            g = grads[i] + l2 * params[i]
            if optimizer == "sgd":
                bufs[i] = g if t == 0 else momentum * bufs[i] + g
                update = bufs[i]
            else:
                bufs[i] = beta1 * bufs[i] + (1 - beta1) * g
                sqs[i] = beta2 * sqs[i] + (1 - beta2) * g * g
                m_hat = bufs[i] / (1 - beta1 ** (t + 1))
                update = m_hat / (np.sqrt(sqs[i] / (1 - beta2 ** (t + 1))) + 1e-8)
            params[i] = (1.0 - lr * weight_decay) * params[i] - lr * update
    return LogitScaleTrajectory(
        steps=np.asarray(records),
        scale=np.asarray(scales),
        balance=np.asarray(balances),
        gain=np.asarray(gains),
    )
