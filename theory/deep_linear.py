"""Deep linear networks: what training conserves, what weight decay and SGD noise erase, Saxe modes.

Conventions (every function of this module)
--------------------------------------------
``weights = [W_1, ..., W_L]``, ``W_l`` of shape (d_l, d_{l-1}); the network is f(x) = W x with the
end-to-end matrix W = W_L ... W_1. Data ``X`` (n, d_0), targets ``Y`` (n, d_L); loss

    L = |X W^T - Y|_F^2 / (2n) = (1/n) sum_i |W x_i - y_i|^2 / 2,

so dL/dW = E = W Sxx - Syx with Sxx = X^T X / n, Syx = Y^T X / n, and the gradient of layer l is
G_l = (W_L ... W_{l+1})^T E (W_{l-1} ... W_1)^T. Coupled L2 (``l2``, as
``torch.optim.SGD``) adds lambda W_l to G_l. Units: ``steps`` are optimizer steps; continuous time
is lr * steps (gradient flow dW_l/dt = -G_l - lambda W_l).

Balance matrices
----------------
D_l = W_{l+1}^T W_{l+1} - W_l W_l^T (d_l x d_l), l = 1 .. L-1. The key identity
W_{l+1}^T G_{l+1} = G_l W_l^T (both equal (W_L..W_{l+1})^T E (W_l..W_1)^T; true for any loss of
the product W, hence for every minibatch) gives:

- gradient flow: dD_l/dt = 0 (Arora, Cohen and Hazan 2018; Du, Hu and Lee 2018): the balance set
  by the init is kept;
- gradient flow with L2: dD_l/dt = -2 lambda D_l, so D_l(t) = exp(-2 lambda t) D_l(0);
- one discrete step W_l <- (1 - lr lambda) W_l - lr G_l (exact, any minibatch):
  D_l <- (1 - lr lambda)^2 D_l + lr^2 (G_{l+1}^T G_{l+1} - G_l G_l^T),
  the cross terms cancelling by the identity above.

With minibatch gradients the lr^2 term has the expectation of the full-batch term plus a noise
term, lr^2 c_b (S_{l+1} - S'_l) with c_b = (n - b) / (b (n - 1)) for a uniformly random subset of b
distinct examples and S the per-example gradient covariances: an implicit, lr^2 / b-sized drift of
what gradient flow would keep forever (``sgd_balance_drift``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from .checks import check_number

__all__ = [
    "BalanceDrift",
    "ForgettingTime",
    "balance_after_step",
    "balance_forgetting_time",
    "balance_matrices",
    "balance_under_l2",
    "check_weights",
    "check_xy",
    "deep_linear_gradients",
    "deep_linear_loss",
    "end_to_end",
    "per_example_gradients",
    "saxe_learning_time",
    "saxe_mode_strength",
    "sgd_balance_drift",
    "zero_signal_forgetting_time",
    "zero_signal_mode_strength",
]


@dataclass(frozen=True)
class ForgettingTime:
    """A forgetting time (shrink by a factor e) in optimizer steps and in continuous time lr * t."""

    steps: float
    lr_time: float


# ---------------------------------------------------------------------------------------------
# Checks


def check_weights(weights) -> list[np.ndarray]:
    weights = [np.asarray(W, dtype=np.float64) for W in weights]
    if len(weights) < 1:
        raise ValueError("weights must hold at least one matrix")
    for index, W in enumerate(weights):
        if W.ndim != 2:
            raise ValueError(f"weights[{index}] must be 2-D (d_l, d_(l-1)), got shape {W.shape}")
        if index and W.shape[1] != weights[index - 1].shape[0]:
            raise ValueError(
                f"weights[{index}] has shape {W.shape}, but weights[{index - 1}] outputs "
                f"{weights[index - 1].shape[0]} features: shapes do not chain"
            )
    return weights


def check_xy(weights: list[np.ndarray], X, Y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != weights[0].shape[1]:
        raise ValueError(f"X must have shape (n, {weights[0].shape[1]}), got {X.shape}")
    if Y.shape != (X.shape[0], weights[-1].shape[0]):
        raise ValueError(f"Y must have shape ({X.shape[0]}, {weights[-1].shape[0]}), got {Y.shape}")
    return X, Y


# ---------------------------------------------------------------------------------------------
# The network, its loss and gradients


def _product(matrices: list[np.ndarray], size: int) -> np.ndarray:
    """W_k ... W_1 for matrices = [W_1, ..., W_k]; the identity of ``size`` when empty."""
    return reduce(lambda acc, W: W @ acc, matrices, np.eye(size))


def end_to_end(weights) -> np.ndarray:
    """End-to-end matrix W = W_L ... W_1, shape (d_L, d_0)."""
    weights = check_weights(weights)
    return _product(weights, weights[0].shape[1])


def deep_linear_loss(weights, X, Y) -> float:
    """L = |X W^T - Y|_F^2 / (2n) (no L2 term)."""
    weights = check_weights(weights)
    X, Y = check_xy(weights, X, Y)
    residual = X @ end_to_end(weights).T - Y
    return float(np.sum(residual**2) / (2 * X.shape[0]))


def _layer_gradients(weights: list[np.ndarray], E: np.ndarray) -> list[np.ndarray]:
    """G_l = (W_L..W_{l+1})^T E (W_{l-1}..W_1)^T for the end-to-end gradient E = dL/dW."""
    grads = []
    for l in range(len(weights)):
        below = _product(weights[:l], weights[0].shape[1])
        above = _product(weights[l + 1 :], weights[l].shape[0])
        grads.append(above.T @ E @ below.T)
    return grads


def deep_linear_gradients(weights, X, Y) -> list[np.ndarray]:
    """Gradients G_l of L = |X W^T - Y|_F^2 / (2n) with respect to each W_l (no L2 term)."""
    weights = check_weights(weights)
    X, Y = check_xy(weights, X, Y)
    E = (end_to_end(weights) @ X.T - Y.T) @ X / X.shape[0]
    return _layer_gradients(weights, E)


def per_example_gradients(weights, X, Y) -> list[np.ndarray]:
    """Gradients of each example's loss |W x_i - y_i|^2 / 2: one array (n, d_l, d_(l-1)) per layer.

    Their mean over examples is ``deep_linear_gradients``.
    """
    weights = check_weights(weights)
    X, Y = check_xy(weights, X, Y)
    residuals = X @ end_to_end(weights).T - Y  # (n, d_L)
    size = weights[0].shape[1]
    grads = []
    for l in range(len(weights)):
        below = _product(weights[:l], size)  # (d_{l-1}, d_0)
        above = _product(weights[l + 1 :], weights[l].shape[0])  # (d_L, d_l)
        grads.append(np.einsum("ij,nj,nk->nik", above.T, residuals, X @ below.T))
    return grads


# ---------------------------------------------------------------------------------------------
# Balance: conservation, weight decay, the discrete step, SGD noise


def balance_matrices(weights) -> list[np.ndarray]:
    """D_l = W_{l+1}^T W_{l+1} - W_l W_l^T for l = 1 .. L-1 (a list of L-1 arrays, d_l x d_l).

    Conserved by gradient flow on any loss of W_L ... W_1 (module docstring); a zero-mean random
    init of scale alpha gives D_l of size alpha^2, so the balance is the part of the init that
    gradient flow never forgets.
    """
    weights = check_weights(weights)
    return [
        W_next.T @ W_next - W @ W.T for W, W_next in zip(weights[:-1], weights[1:], strict=True)
    ]


def balance_after_step(balances, gradients, lr: float, l2: float = 0.0) -> list[np.ndarray]:
    """Exact balance after one step W_l <- (1 - lr lambda) W_l - lr G_l.

    D_l' = (1 - lr lambda)^2 D_l + lr^2 (G_{l+1}^T G_{l+1} - G_l G_l^T). ``gradients``: the
    unregularized gradients used by the step (full batch, or the minibatch's: the identity holds
    for any loss of the end-to-end matrix). Derivation in the module docstring.
    """
    lr = check_number("lr", lr, strict=True)
    l2 = check_number("l2", l2)
    gradients = [np.asarray(G, dtype=np.float64) for G in gradients]
    balances = [np.asarray(D, dtype=np.float64) for D in balances]
    if len(balances) != len(gradients) - 1:
        raise ValueError(
            f"balances must hold len(gradients) - 1 = {len(gradients) - 1} arrays, "
            f"got {len(balances)}"
        )
    shrink = (1.0 - lr * l2) ** 2
    out = []
    for l, D in enumerate(balances):
        G, G_next = gradients[l], gradients[l + 1]
        if D.shape != (G.shape[0], G.shape[0]) or G_next.shape[1] != G.shape[0]:
            raise ValueError(
                f"balances[{l}] {D.shape} does not match gradients[{l}] {G.shape} and "
                f"gradients[{l + 1}] {G_next.shape}"
            )
        out.append(shrink * D + lr**2 * (G_next.T @ G_next - G @ G.T))
    return out


def balance_under_l2(balances, l2: float, lr_time: float) -> list[np.ndarray]:
    """D_l(t) = exp(-2 lambda t) D_l(0) under gradient flow with L2, t in continuous time lr * steps.

    Exact for gradient flow (module docstring); discrete GD adds the lr^2 term of
    ``balance_after_step``, an O(lr) correction at fixed continuous time.
    """
    l2 = check_number("l2", l2)
    lr_time = check_number("lr_time", lr_time)
    return [math.exp(-2.0 * l2 * lr_time) * np.asarray(D, dtype=np.float64) for D in balances]


def balance_forgetting_time(lr: float, l2: float) -> ForgettingTime:
    """Time for the balance D_l (the init's conserved part) to shrink by a factor e under L2.

    The decay part of one step multiplies D_l by (1 - lr lambda)^2: -1 / (2 ln(1 - lr lambda))
    steps, about 1 / (2 lr lambda); in continuous time 1 / (2 lambda) for gradient flow. Without
    weight decay, ``inf`` (only the lr^2 term changes D_l: see ``sgd_balance_drift``).
    """
    lr = check_number("lr", lr, strict=True)
    l2 = check_number("l2", l2)
    if l2 == 0.0:
        return ForgettingTime(steps=math.inf, lr_time=math.inf)
    if lr * l2 >= 1.0:
        raise ValueError(f"lr * l2 must be < 1 for a contraction, got {lr * l2}")
    return ForgettingTime(
        steps=-1.0 / (2.0 * math.log1p(-lr * l2)),
        lr_time=1.0 / (2.0 * l2),
    )


@dataclass(frozen=True)
class BalanceDrift:
    """Expected one-step change of each D_l under minibatch SGD, split by cause.

    ``expected_change[l] = decay[l] + full_batch[l] + noise[l]``:
    ``decay`` = ((1 - lr lambda)^2 - 1) D_l (explicit L2);
    ``full_batch`` = lr^2 (G_{l+1}^T G_{l+1} - G_l G_l^T) (finite steps; 0 at a stationary point);
    ``noise`` = lr^2 c_b (S_{l+1} - S'_l) (SGD's added term: 0 for b = n).
    ``noise_scale`` = lr^2 c_b, c_b = (n - b) / (b (n - 1)): the size of the implicit forgetting per
    step, lr^2 / b for b << n. ``noise_steps`` = |D|_F / |noise|_F summed over layers: the steps the
    noise needs to move the balance by its own size at this point (``inf`` where noise is 0).
    """

    decay: list[np.ndarray]
    full_batch: list[np.ndarray]
    noise: list[np.ndarray]
    expected_change: list[np.ndarray]
    noise_scale: float
    noise_steps: float


def sgd_balance_drift(weights, X, Y, lr: float, batch_size: int, l2: float = 0.0) -> BalanceDrift:
    """Expectation of the one-step balance change under SGD with uniformly random size-b batches.

    By ``balance_after_step``, the change is ((1 - lr lambda)^2 - 1) D_l + lr^2 (G^B_{l+1}^T
    G^B_{l+1} - G^B_l G^B_l^T). The minibatch gradient is the mean of b per-example gradients g_i
    drawn without replacement, so E[G^B^T G^B] = G^T G + c_b S with S = (1/n) sum_i
    (g_i - G)^T (g_i - G) and c_b = (n - b) / (b (n - 1)) (finite-population correction; exact).
    """
    weights = check_weights(weights)
    X, Y = check_xy(weights, X, Y)
    lr = check_number("lr", lr, strict=True)
    l2 = check_number("l2", l2)
    n = X.shape[0]
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be an integer in [1, {n}], got {batch_size!r}")
    c_b = (n - batch_size) / (batch_size * (n - 1)) if n > 1 else 0.0
    balances = balance_matrices(weights)
    per_example = per_example_gradients(weights, X, Y)
    grads = [g.mean(axis=0) for g in per_example]
    centered = [g - G for g, G in zip(per_example, grads, strict=True)]
    decay, full_batch, noise, total = [], [], [], []
    for l, D in enumerate(balances):
        G, G_next = grads[l], grads[l + 1]
        S_next = np.einsum("nij,nik->jk", centered[l + 1], centered[l + 1]) / n
        S_here = np.einsum("nij,nkj->ik", centered[l], centered[l]) / n
        decay.append(((1.0 - lr * l2) ** 2 - 1.0) * D)
        full_batch.append(lr**2 * (G_next.T @ G_next - G @ G.T))
        noise.append(lr**2 * c_b * (S_next - S_here))
        total.append(decay[-1] + full_batch[-1] + noise[-1])
    noise_norm = math.sqrt(sum(float(np.sum(N**2)) for N in noise))
    balance_norm = math.sqrt(sum(float(np.sum(D**2)) for D in balances))
    return BalanceDrift(
        decay=decay,
        full_batch=full_batch,
        noise=noise,
        expected_change=total,
        noise_scale=lr**2 * c_b,
        noise_steps=balance_norm / noise_norm if noise_norm > 0 else math.inf,
    )


# ---------------------------------------------------------------------------------------------
# Saxe, McClelland and Ganguli (2014): two-layer mode dynamics with whitened inputs


def _phi(x: np.ndarray) -> np.ndarray:
    """(1 - exp(-x)) / x, with its limit 1 at x = 0."""
    x = np.asarray(x, dtype=np.float64)
    safe = np.where(x == 0.0, 1.0, x)
    return np.where(x == 0.0, 1.0, -np.expm1(-safe) / safe)


def saxe_mode_strength(lr_time, signal: float, u0: float, l2: float = 0.0) -> np.ndarray:
    """Strength u(t) of one input-output mode of a two-layer linear net from a balanced init.

    Setting (Saxe, McClelland and Ganguli, ICLR 2014): whitened inputs (Sxx = I), Syx = U diag(s)
    V^T, and W_1 = Q diag(a) V^T, W_2 = U diag(b) Q^T with a = b (balanced, aligned with the modes).
    Then each mode obeys da/dt = b (s - a b) - lambda a, db/dt = a (s - a b) - lambda b, so u = a b
    obeys the logistic equation du/dt = 2 u (s' - u), s' = s - lambda, with solution

        u(t) = s' e^{2 s' t} / (e^{2 s' t} - 1 + s' / u0) = u0 / (e^{-2 s' t} + 2 u0 t phi(2 s' t)),

    phi(x) = (1 - e^{-x}) / x (the second form is used: finite for s' <= 0 too, and for s' = 0 it is
    the zero-signal law u0 / (1 + 2 u0 t)). ``lr_time`` in continuous time lr * steps; u0 > 0.
    """
    u0 = check_number("u0", u0, strict=True)
    signal = float(signal)
    if not math.isfinite(signal):
        raise ValueError(f"signal must be finite, got {signal!r}")
    l2 = check_number("l2", l2)
    lr_time = np.asarray(lr_time, dtype=np.float64)
    if np.any(lr_time < 0) or not np.all(np.isfinite(lr_time)):
        raise ValueError("lr_time must be finite and >= 0 (continuous time lr * steps)")
    s_eff = signal - l2
    x = 2.0 * s_eff * lr_time
    with np.errstate(over="ignore"):
        return u0 / (np.exp(-x) + 2.0 * u0 * lr_time * _phi(x))


def saxe_learning_time(signal: float, u0: float, fraction: float = 0.5, l2: float = 0.0) -> float:
    """Continuous time lr * t for a balanced mode to grow from u0 to ``fraction`` of s' = s - lambda.

    Inverting the logistic solution of ``saxe_mode_strength``: with u_f = fraction * s',

        t = ln(u_f (s' - u0) / (u0 (s' - u_f))) / (2 s').

    For u0 = alpha^2 u_draw << s' this is ln(s'/u0) / (2 s') + ln(fraction / (1 - fraction)) / (2 s'),
    growing like ln(1 / alpha^2) / (2 s'): a smaller init takes logarithmically longer to learn.
    Needs 0 < u0 < fraction * s' < s' (signal above the weight decay).
    """
    u0 = check_number("u0", u0, strict=True)
    l2 = check_number("l2", l2)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    s_eff = float(signal) - l2
    u_final = fraction * s_eff
    if not (s_eff > 0 and u0 < u_final):
        raise ValueError(
            f"need signal - l2 > 0 and u0 < fraction * (signal - l2); got "
            f"signal={signal!r}, l2={l2!r}, u0={u0!r}, fraction={fraction!r}"
        )
    return math.log(u_final * (s_eff - u0) / (u0 * (s_eff - u_final))) / (2.0 * s_eff)


def zero_signal_mode_strength(lr_time, u0: float, imbalance: float = 0.0) -> np.ndarray:
    """Strength u(t) = a b of a mode with no signal (s = 0), from any init, without weight decay.

    da/dt = -b (a b), db/dt = -a (a b) conserve c = a^2 - b^2 (the mode's balance, the ``imbalance``),
    and u obeys du/dt = -u sqrt(c^2 + 4 u^2). Integrating,

        u(t) = |c| / (2 sinh(asinh(|c| / (2 u0)) + |c| t)),      c != 0,
        u(t) = u0 / (1 + 2 u0 t),                                c = 0 (balanced).

    Balanced: algebraic decay, forgetting u0 only as 1/(2t) (slowly: on (e - 1) / (2 u0) time units,
    ~ 1/alpha^2). Unbalanced: exponential decay at rate |c| at late times, while c itself is never
    forgotten: the larger factor tends to sqrt(|c|) and keeps the init's imbalance forever. Any
    sign of u0 (u(t) keeps it). ``lr_time`` in continuous time lr * steps.
    """
    u0 = float(u0)
    if not math.isfinite(u0):
        raise ValueError(f"u0 must be finite, got {u0!r}")
    imbalance = float(imbalance)
    if not math.isfinite(imbalance):
        raise ValueError(f"imbalance must be finite, got {imbalance!r}")
    lr_time = np.asarray(lr_time, dtype=np.float64)
    if np.any(lr_time < 0) or not np.all(np.isfinite(lr_time)):
        raise ValueError("lr_time must be finite and >= 0 (continuous time lr * steps)")
    if u0 == 0.0:
        return np.zeros_like(lr_time)
    c, size = abs(imbalance), abs(u0)
    if c == 0.0:
        return math.copysign(1.0, u0) * size / (1.0 + 2.0 * size * lr_time)
    with np.errstate(over="ignore"):
        return (
            math.copysign(1.0, u0) * c / (2.0 * np.sinh(math.asinh(c / (2.0 * size)) + c * lr_time))
        )


def zero_signal_forgetting_time(u0: float, imbalance: float = 0.0) -> float:
    """Continuous time lr * t for a zero-signal mode to shrink by a factor e (from ``zero_signal_mode_strength``).

    Balanced (c = 0): (e - 1) / (2 |u0|), so an init of scale alpha (u0 ~ alpha^2) is forgotten on
    ~ 1 / alpha^2 time units. Unbalanced: (asinh(e |c| / (2 |u0|)) - asinh(|c| / (2 |u0|))) / |c|,
    which is at most min((e - 1) / (2 |u0|), 1 / |c|) (asinh is concave and asinh(e z) - asinh(z)
    < 1) and tends to 1 / |c| for |c| >> |u0|.
    """
    u0 = float(u0)
    if u0 == 0.0 or not math.isfinite(u0):
        raise ValueError(f"u0 must be finite and nonzero, got {u0!r}")
    c, size = abs(float(imbalance)), abs(u0)
    if not math.isfinite(c):
        raise ValueError(f"imbalance must be finite, got {imbalance!r}")
    if c == 0.0:
        return (math.e - 1.0) / (2.0 * size)
    return (math.asinh(math.e * c / (2.0 * size)) - math.asinh(c / (2.0 * size))) / c
