"""Lazy (NTK) regime: MSE training of the linearized network in closed form, and what it forgets.

Setting. A network ``f(x; theta)`` trained near its initialization ``theta_0`` behaves like its
linearization ``f_lin(x; theta) = f_0(x) + J(x) (theta - theta_0)`` (Lee et al. 2019, "Wide Neural
Networks of Any Depth Evolve as Linear Models Under Gradient Descent"), exactly so at infinite width.
Its training dynamics depend on the data only through the NTK ``Theta = J J^T``.

Conventions (neural-tangents' ``predict``):

- Loss ``L(theta) = ||f(X) - y||^2 / (2 N)`` with ``N = y_train.size``; gradient descent
  ``theta <- theta - lr * grad L``. ``t`` counts steps: continuous time (gradient flow) is
  ``s = lr * t``, so "time in units of lr".
- Kernels on the training set have shape (n, n) and act on every output column of ``y_train`` of
  shape (n,) or (n, k) (``Theta x I``, neural-tangents' ``trace_axes=(-1,)``); the normalization still
  uses ``N = y_train.size = n * k``.
- ``f0 = None`` means a zero initial function; ``t = numpy.inf`` is allowed; float64 throughout.

Derivation sketch (gradient flow). With ``K = Theta(X, X)`` and ``K_xX = Theta(x, X)``, the linearized
outputs obey ``df_X/ds = -K (f_X - y) / N`` and ``df_x/ds = -K_xX (f_X - y) / N``. Hence
``f_X(t) = y + exp(-lr t K / N) (f0_X - y)`` and, integrating the second equation,
``f_x(t) = f0_x + K_xX K^-1 (f_X(t) - f0_X)``. Discrete steps replace ``exp(-lr t K / N)`` by
``(I - lr K / N)^t``. Everything is evaluated in the eigenbasis of ``K`` with the divided difference
``(h(w) - h(0)) / w`` written stably, so singular or ill-conditioned kernels are safe at finite ``t``;
at ``t = inf`` eigenvalues below ``n * eps * max`` count as null (their modes never move).

What survives. At ``t = inf`` the test prediction is ``K_xX K^-1 y + m(x)`` with the *memory term*
``m(x) = f0(x) - K_xX K^-1 f0(X)``: the part of the initial function the training set cannot see. It
is linear in ``f0``, so it is never forgotten by gradient descent, and its variance over random
initializations scales as ``alpha^2`` when ``f0`` is scaled by ``alpha`` (:func:`memory_variance`).
Coupled L2 toward zero (``l2``) erases it at rate ``lr * l2`` per step in the *linearized* model
(:func:`linearized_l2_mse`, :func:`forgetting_times`).

The lazy term of a deep network under decay: the depth factor (derived here)
----------------------------------------------------------------------------
A network positively homogeneous of degree ``L`` in its weights, ``f(x; c theta) = c^L f(x; theta)``
for ``c > 0`` (a bias-free ReLU MLP with ``L`` weight layers), has ``J(x; c theta) = c^(L-1) J(x;
theta)`` and, by Euler's identity, ``J(x; theta_0) theta_0 = L f_0(x)``. In the lazy regime (``J``
fixed at its init) write ``theta_t = c_t theta_0 + J(X)^T a_t``. A step with per-step decay rate
``kappa_t`` (coupled L2 ``lr_t l2 / (1 - mu)`` with heavy-ball momentum mu, mean field; decoupled
decay ``lr_t weight_decay``) and the loss gradient ``J(X)^T r_t / N`` (in the row space of ``J``)
gives ``c_{t+1} = (1 - kappa_t) c_t``: the loss gradient moves only ``a``. Linearizing around
``c_t theta_0``, ``f_t(x) = c_t^L f_0(x) + c_t^(L-1) K(x, X) a_t``, and the second part lies in the
span of the kernel sections, so the memory term ``m_t(x) = f_t(x) - K_xX K^-1 f_t(X)`` is

    m_t = c_t^L m_0,    |m_t| / |m_0| = prod_{s<t} (1 - kappa_s)^L ~ exp(-L sum_s kappa_s).      (L1)

A depth-``L`` net's lazy memory decays ``L`` times faster than the linearized model's ``h(0) =
prod (1 - kappa_s)`` says: ``exp(-2 t / tau)`` for two layers, ``exp(-3 t / tau)`` for three
(``tau = 1 / kappa``); the linearization sees only ``1 + L (c - 1)``, the first order of ``c^L``.
With a schedule the sum runs over the per-step rates. Forgotten (memory at or below 1/e, the shared
criterion) at the first step ``T`` with ``L sum_{s<T} -ln(1 - kappa_s) >= 1``: :func:`lazy_forgetting`.
Assumptions: lazy regime (``J`` fixed: wide networks, checked against float64 simulations of 2- and
3-layer ReLU nets in ``tests/theory/test_ntk_lazy_depth.py``), SGD-type updates in the row space of
``J``. Adam-family updates are preconditioned, leave that row space and move ``m`` too: (L1) with
their decoupled decay is then the decay's part only; with coupled L2 Adam divides the decay by
``sqrt(v)``: no closed form (NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .checks import check_number, check_optimizer
from .criterion import FORGETTING
from .kernels import Kernel

__all__ = [
    "ForgettingTimes",
    "Gaussian",
    "LazyForgetting",
    "homogeneity_degree",
    "lazy_forgetting",
    "forgetting_times",
    "gradient_descent_mse",
    "gradient_descent_mse_discrete",
    "gradient_descent_mse_ensemble",
    "linearized_l2_mse",
    "memory_term",
    "memory_variance",
]

# Symmetry and positive semi-definiteness are checked relative to the largest |entry|/eigenvalue;
# loose enough for kernels computed in float32, tight enough to catch a wrong matrix.
_PSD_RTOL = 1e-6


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def _array(name: str, x, ndim: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in ndim:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, ndim))} dims, got shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    return x


def _times(name: str, t, integer: bool) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if np.any(np.isnan(t)) or np.any(t < 0):
        raise ValueError(f"{name} must be >= 0 (numpy.inf allowed), got {t!r}")
    finite = t[np.isfinite(t)]
    if integer and np.any(finite != np.round(finite)):
        raise ValueError(f"{name} must be whole numbers of steps (or numpy.inf), got {t!r}")
    return t


def _targets(y_train) -> np.ndarray:
    return _array("y_train", y_train, (1, 2))


def _eigh_train(k_train_train, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of a symmetric PSD (n, n) kernel; eigenvalues clipped at 0."""
    k = _array("k_train_train", k_train_train, (2,))
    if k.size == 0:
        raise ValueError(f"k_train_train must not be empty (got shape {k.shape})")
    if k.shape != (n, n):
        raise ValueError(
            f"k_train_train must have shape ({n}, {n}) to match y_train, got {k.shape}"
        )
    scale = max(np.max(np.abs(k)), np.finfo(np.float64).tiny)
    if np.max(np.abs(k - k.T)) > _PSD_RTOL * scale:
        raise ValueError("k_train_train must be symmetric")
    w, v = np.linalg.eigh((k + k.T) / 2)
    if w[0] < -_PSD_RTOL * max(w[-1], np.finfo(np.float64).tiny):
        raise ValueError(
            f"k_train_train must be positive semi-definite: smallest eigenvalue {w[0]:.3g} "
            f"(largest {w[-1]:.3g})"
        )
    return np.maximum(w, 0.0), v


def _test_kernel(name: str, k, n: int) -> np.ndarray | None:
    if k is None:
        return None
    k = _array(name, k, (2,))
    if k.shape[1] != n:
        raise ValueError(f"{name} must have shape (n_test, {n}) to match y_train, got {k.shape}")
    return k


def _like(name: str, f, shape: tuple[int, ...]) -> np.ndarray:
    if f is None:
        return np.zeros(shape)
    f = _array(name, f, (1, 2))
    if f.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {f.shape}")
    return f


def _null_tol(w: np.ndarray) -> float:
    return w.size * np.finfo(np.float64).eps * max(w[-1], np.finfo(np.float64).tiny)


# --------------------------------------------------------------------------------------------
# Spectral factors: the one place where time enters
# --------------------------------------------------------------------------------------------


def _factors(
    w: np.ndarray, lr: float, t: float, size: int, l2: float, discrete: bool
) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-eigenmode multipliers of the linearized dynamics after time t (steps).

    A parameter direction on which ``J^T J / N`` has eigenvalue ``w / N`` (``w`` an eigenvalue of
    ``K``) is multiplied by ``h(w) = exp(-lr t (lambda + w / N))`` under gradient flow, or by
    ``(1 - lr lambda - lr w / N)^t`` after ``t`` steps. Returns ``h(w)``, the divided difference
    ``d(w) = (h(w) - h(0)) / w`` (its limit ``h'(0)`` at ``w = 0``) and ``h0 = h(0)``, the multiplier
    of parameter directions that the training outputs do not see.
    """
    h, d, h0 = _factors_over_times(w, lr, np.array([t], dtype=np.float64), size, l2, discrete)
    return h[0], d[0], float(h0[0])


def _factors_over_times(
    w: np.ndarray, lr: float, t: np.ndarray, size: int, l2: float, discrete: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_factors` at every time of the 1-d array ``t`` at once: ``h``, ``d`` of shape
    ``(T, n)`` and ``h0`` of shape ``(T,)`` (one row per time)."""
    lam, inv_n = l2, 1.0 / size
    null = w <= _null_tol(w)
    h = np.ones((t.size, w.size))
    d = np.zeros((t.size, w.size))
    h0 = np.ones(t.size)
    if lr == 0.0:
        return h, d, h0
    at_inf = np.isinf(t)
    if at_inf.any():
        if discrete:
            a = 1.0 - lr * lam
            worst = np.abs(a - lr * w[~null] * inv_n)
            if worst.size and np.max(worst) >= 1.0:
                raise ValueError(
                    f"lr = {lr} is too large for t = inf: |1 - lr*l2 - lr*w/N| reaches "
                    f"{np.max(worst):.3g} >= 1 (w: largest kernel eigenvalue, N = y_train.size), "
                    "so discrete gradient descent does not converge"
                )
        if lam > 0:
            h[at_inf], d[at_inf], h0[at_inf] = 0.0, 0.0, 0.0
        else:
            h[at_inf] = np.where(null, 1.0, 0.0)
            d[at_inf] = np.where(null, 0.0, -1.0 / np.where(null, 1.0, w))
    rows = ~at_inf & (t != 0.0)
    if not rows.any():
        return h, d, h0
    tt = t[rows][:, None]  # (T', 1) against w (n,)
    positive = w > 0
    safe_w = np.where(positive, w, 1.0)
    if not discrete:
        h0_t = np.exp(-lr * tt * lam)
        h_t = np.exp(-lr * tt * (lam + w * inv_n))
        d_t = np.where(
            positive, h0_t * np.expm1(-lr * tt * w * inv_n) / safe_w, -h0_t * lr * tt * inv_n
        )
    else:
        a = 1.0 - lr * lam
        h0_t = a**tt
        b = lr * w * inv_n
        h_t = (a - b) ** tt
        small = b <= 0.5 * a  # (a - b)^t - a^t = a^t expm1(t log1p(-b/a)), no cancellation
        d_small = h0_t * np.expm1(tt * np.log1p(-np.where(small, b, 0.0) / a)) / safe_w
        d_large = (h_t - h0_t) / safe_w
        d_t = np.where(small, d_small, d_large)
        d_t = np.where(positive, d_t, -tt * a ** (tt - 1) * lr * inv_n)
    h[rows], d[rows], h0[rows] = h_t, d_t, h0_t[:, 0]
    return h, d, h0


def _apply(v: np.ndarray, diag: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``V diag(diag) V^T x`` for x of shape (n,) or (n, k)."""
    vx = v.T @ x
    return v @ (diag.reshape((-1,) + (1,) * (vx.ndim - 1)) * vx)


def _over_times(t: np.ndarray, one_time):
    """Evaluate ``one_time(float)`` at every entry of t; stack along leading axes of t's shape."""
    if t.ndim == 0:
        return one_time(float(t))
    results = [one_time(float(ti)) for ti in t.reshape(-1)]
    if isinstance(results[0], tuple):
        return tuple(
            None if parts[0] is None else np.stack(parts).reshape(t.shape + parts[0].shape)
            for parts in zip(*results, strict=True)
        )
    return np.stack(results).reshape(t.shape + results[0].shape)


def _linearized(
    k_train_train,
    k_test_train,
    y_train,
    lr,
    t,
    l2,
    f0_train,
    f0_test,
    jtheta0_train,
    jtheta0_test,
    discrete: bool,
):
    """Shared engine of the MSE predictors (see :func:`linearized_l2_mse`)."""
    y = _targets(y_train)
    n = y.shape[0]
    w, v = _eigh_train(k_train_train, n)
    k_xX = _test_kernel("k_test_train", k_test_train, n)
    lr = check_number("lr", lr)
    lam = check_number("l2", l2)
    if discrete and lr * lam >= 1.0:
        raise ValueError(f"lr * l2 must be < 1 for discrete steps, got {lr * lam}")
    t = _times("steps" if discrete else "t", t, integer=discrete)
    f0_X = _like("f0_train", f0_train, y.shape)
    u_X = f0_X if jtheta0_train is None else _like("jtheta0_train", jtheta0_train, y.shape)
    g_X = f0_X - u_X
    if k_xX is not None:
        test_shape = (k_xX.shape[0],) + y.shape[1:]
        f0_x = _like("f0_test", f0_test, test_shape)
        u_x = f0_x if jtheta0_test is None else _like("jtheta0_test", jtheta0_test, test_shape)
        g_x = f0_x - u_x
    elif f0_test is not None or jtheta0_test is not None:
        raise ValueError("f0_test and jtheta0_test need k_test_train")
    size = y.size
    # Time-independent products first; then every time at once (one matrix product per output).
    vt_residual = v.T @ (y - g_X).reshape(n, -1)  # (n, c) in the eigenbasis
    vt_u = v.T @ u_X.reshape(n, -1)
    h, d, h0 = _factors_over_times(w, lr, t.reshape(-1).astype(np.float64), size, lam, discrete)
    if lam == 0.0:
        q, r = -d, 1.0 - h
    else:
        q = (1.0 - h) / (w + size * lam)
        r = w * q

    def through(matrix: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``matrix @ (a_t * V^T residual + b_t * V^T u)`` for every time t: (T, rows, c)."""
        coeffs = a[:, :, None] * vt_residual + b[:, :, None] * vt_u  # (T, n, c)
        n_times, _, c = coeffs.shape
        flat = matrix @ coeffs.transpose(1, 0, 2).reshape(n, n_times * c)
        return flat.reshape(-1, n_times, c).transpose(1, 0, 2)

    f_train = g_X + through(v, r, h).reshape(t.shape + y.shape)
    if k_xX is None:
        return f_train, None
    h0_u_x = h0.reshape(t.shape + (1,) * u_x.ndim) * u_x
    f_test = g_x + h0_u_x + through(k_xX @ v, q, d).reshape(t.shape + u_x.shape)
    return f_train, f_test


# --------------------------------------------------------------------------------------------
# Public predictors
# --------------------------------------------------------------------------------------------


def gradient_descent_mse(
    k_train_train,
    k_test_train,
    y_train,
    lr: float,
    t,
    f0_train=None,
    f0_test=None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Train and test outputs of the linearized network after gradient flow on MSE, closed form.

    ``f_train(t) = y + exp(-lr t K / N) (f0_train - y)`` and
    ``f_test(t) = f0_test + K_xX K^-1 (f_train(t) - f0_train)``, with ``K = k_train_train``,
    ``K_xX = k_test_train``, ``N = y_train.size`` (neural-tangents' ``predict.gradient_descent_mse``;
    derivation in the module docstring). Exact for the linearized model; for a finite network, exact
    in the limit of infinite width (Lee et al. 2019).

    Args:
      k_train_train: NTK on the training inputs, (n, n), symmetric positive semi-definite.
      k_test_train: NTK between test and training inputs, (m, n), or ``None`` (no test outputs).
      y_train: targets, (n,) or (n, k).
      lr: learning rate, >= 0.
      t: time in steps (continuous time ``lr * t``), >= 0, scalar or array of any shape;
        ``numpy.inf`` gives the converged predictor.
      f0_train, f0_test: initial outputs, shapes of ``y_train`` and (m,) + ``y_train.shape[1:]``;
        ``None`` means zero.

    Returns:
      ``(f_train, f_test)``, with ``t.shape`` prepended when ``t`` is an array; ``f_test`` is
      ``None`` when ``k_test_train`` is ``None``.
    """
    return _linearized(
        k_train_train, k_test_train, y_train, lr, t, 0.0, f0_train, f0_test, None, None, False
    )


def gradient_descent_mse_discrete(
    k_train_train,
    k_test_train,
    y_train,
    lr: float,
    steps,
    f0_train=None,
    f0_test=None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Outputs of the linearized network after ``steps`` full-batch gradient-descent steps on MSE.

    One step maps ``f_X <- f_X - lr K (f_X - y) / N`` and ``f_x <- f_x - lr K_xX (f_X - y) / N``
    (exact for the linearized model), so ``f_train(T) = y + (I - lr K / N)^T (f0_train - y)`` and,
    summing the geometric series, ``f_test(T) = f0_test + K_xX K^-1 (f_train(T) - f0_train)``.
    Converges iff ``lr * lambda_max(K) / N < 2``; ``steps = numpy.inf`` raises ``ValueError``
    otherwise. Arguments and shapes as :func:`gradient_descent_mse`; ``steps`` are whole numbers.
    """
    return _linearized(
        k_train_train, k_test_train, y_train, lr, steps, 0.0, f0_train, f0_test, None, None, True
    )


def linearized_l2_mse(
    k_train_train,
    k_test_train,
    y_train,
    lr: float,
    l2: float,
    t,
    f0_train=None,
    f0_test=None,
    jtheta0_train=None,
    jtheta0_test=None,
    *,
    discrete: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Linearized network trained on MSE with weight decay toward zero, closed form (exact).

    Not in neural-tangents. Loss ``||f(X) - y||^2 / (2N) + l2 * ||theta||^2 / 2`` on the
    linearized model ``f_lin(x; theta) = g(x) + J(x) theta`` with ``g = f0 - J theta_0``: the decay
    pulls ``theta`` to zero, not to ``theta_0``, so the dynamics do not close on ``f`` and ``K``
    alone. They do close on two functions: the *offset* ``g`` (untouched by training) and the
    *parameter-carried* part ``u = J theta_0`` (pass ``jtheta0_*``; see
    :func:`initmem.theory.empirical_kernels.init_outputs`; ``None`` means ``u = f0``, a model linear in its
    parameters such as random features or a linear model, where ``g = 0``).

    Derivation (parameter space, ``A = J^T J / N + lambda I``, ``K = J J^T``):
    ``d theta / ds = -A theta + J^T (y - g_X) / N``, so ``theta(t) = theta* + h(A) (theta_0 - theta*)``
    with ``h(A) = exp(-lr t A)`` (gradient flow) or ``(I - lr A)^t`` (discrete steps) and
    ``theta* = J^T c``, ``c = (K + N lambda I)^-1 (y - g_X)`` (push-through identity). Mapping back
    with ``J(x)`` and ``h(J^T J) J^T = J^T h(K)``,
    ``J(x) h(J^T J) theta_0 = h(0) u(x) + K_xX [(h(K) - h(0)) K^-1] u_X``, gives

    - ``f_train(t) = g_X + K (I - h(K)) c + h(K) u_X``
    - ``f_test(t)  = g_x + K_xX (I - h(K)) c + h(0) u_x + K_xX [(h(K) - h(0)) K^-1] u_X``

    where ``h(0) = exp(-lr l2 t)`` (or ``(1 - lr l2)^t``) is the factor on the
    component of ``theta_0`` outside the row space of ``J``: the memory of the initialization at test
    points fades as ``h(0)`` (forgetting time ``1 / (lr l2)`` steps), while with
    ``l2 = 0`` it is kept forever. At ``t = inf`` (l2 > 0) the predictor is kernel
    ridge regression of ``y - g_X`` with ridge ``N l2``, plus the offset ``g``.

    Args:
      k_train_train, k_test_train, y_train, f0_train, f0_test: as :func:`gradient_descent_mse`.
      lr: learning rate, >= 0. l2: L2 coefficient lambda, >= 0 (``lr * lambda < 1`` for
        discrete steps).
      t: steps, >= 0 (continuous time ``lr * t``), scalar or array; ``numpy.inf`` allowed.
      jtheta0_train, jtheta0_test: ``J theta_0`` at the training / test inputs, shapes as f0.
      discrete: ``False`` for gradient flow, ``True`` for ``t`` plain gradient-descent steps
        (``torch.optim.SGD(lr, weight_decay=lambda)``, torch's coupled L2, without momentum).

    Returns:
      ``(f_train, f_test)`` as :func:`gradient_descent_mse`.
    """
    return _linearized(
        k_train_train,
        k_test_train,
        y_train,
        lr,
        t,
        l2,
        f0_train,
        f0_test,
        jtheta0_train,
        jtheta0_test,
        discrete,
    )


# --------------------------------------------------------------------------------------------
# Ensembles over the initialization and the memory of it
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gaussian:
    """Mean (m,) or (m, k) and covariance (m, m) (shared by all output columns); ``t.shape``
    prepended for an array of times. ``cov`` is ``None`` when it was not requested."""

    mean: np.ndarray
    cov: np.ndarray | None


def gradient_descent_mse_ensemble(
    kernel_train_train: Kernel,
    y_train,
    lr: float,
    t,
    kernel_test_train: Kernel | None = None,
    nngp_test_test=None,
    *,
    get: str = "ntk",
    compute_cov: bool = True,
    discrete: bool = False,
) -> Gaussian:
    """Mean and covariance over random initializations of the outputs after training on MSE.

    Assumes ``f0 ~ GP(0, nngp)`` jointly on train and test inputs and a deterministic kernel that
    governs training: the NTK (``get="ntk"``: the infinite-width network trained in full) or the
    NNGP (``get="nngp"``: only the last layer trained). The outputs are affine in ``f0``:
    ``f_test = f0_test + D (f0_train - y)`` with ``D = K_xX [(h(K) - I) K^-1]`` (see
    :func:`gradient_descent_mse`), so

    - mean ``= -D y``, cov ``= S_xx + D S_Xx + S_xX D^T + D S_XX D^T`` (``S`` = NNGP), and
    - on the training set (``kernel_test_train=None``) mean ``= (I - H) y``, cov ``= H S_XX H`` with
      ``H = h(K)``,

    as neural-tangents' ``predict.gradient_descent_mse_ensemble``. ``t`` in steps (continuous time
    ``lr * t``), scalar or array, ``numpy.inf`` allowed; ``discrete=True`` for whole gradient
    steps. ``nngp_test_test`` (m, m) is needed for the test covariance.
    """
    if not isinstance(kernel_train_train, Kernel):
        raise ValueError("kernel_train_train must be a Kernel")
    if kernel_test_train is not None and not isinstance(kernel_test_train, Kernel):
        raise ValueError("kernel_test_train must be a Kernel or None")
    if get not in ("ntk", "nngp"):
        raise ValueError(f"get must be 'ntk' or 'nngp', got {get!r}")
    y = _targets(y_train)
    n = y.shape[0]
    w, v = _eigh_train(getattr(kernel_train_train, get), n)
    s_XX = _array("kernel_train_train.nngp", kernel_train_train.nngp, (2,))
    lr = check_number("lr", lr)
    t = _times("steps" if discrete else "t", t, integer=discrete)
    k_xX = s_xX = s_xx = None
    if kernel_test_train is not None:
        k_xX = _test_kernel("kernel_test_train", getattr(kernel_test_train, get), n)
        s_xX = kernel_test_train.nngp
        if compute_cov:
            if nngp_test_test is None:
                raise ValueError("nngp_test_test is needed for the test covariance")
            m = k_xX.shape[0]
            s_xx = _array("nngp_test_test", nngp_test_test, (2,))
            if s_xx.shape != (m, m):
                raise ValueError(f"nngp_test_test must have shape ({m}, {m}), got {s_xx.shape}")

    def one_time(ti: float):
        h, d, _ = _factors(w, lr, ti, y.size, 0.0, discrete)
        if k_xX is None:
            mean = y - _apply(v, h, y)
            if not compute_cov:
                return mean, None
            hv = v * h
            big_h = hv @ v.T
            return mean, big_h @ s_XX @ big_h
        big_d = (k_xX @ v * d) @ v.T
        mean = -big_d @ y
        if not compute_cov:
            return mean, None
        cross = big_d @ s_xX.T
        return mean, s_xx + cross + cross.T + big_d @ s_XX @ big_d.T

    mean, cov = _over_times(t, one_time)
    return Gaussian(mean=mean, cov=cov)


def memory_term(k_train_train, k_test_train, f0_train, f0_test) -> np.ndarray:
    """Permanent memory of the initialization: ``m(x) = f0(x) - K_xX K^-1 f0(X)``.

    The converged (``t = inf``) gradient-flow or gradient-descent predictor of the linearized model
    is ``K_xX K^-1 y + m(x)`` (:func:`gradient_descent_mse`), so ``m`` is the whole dependence of
    the trained predictor on the initial function, at any training length. It vanishes on the
    training inputs and is the residual of projecting ``f0`` onto the span of the kernel sections
    ``Theta(., X)``. Shapes: f0_train (n,) or (n, k), f0_test (m,) or (m, k); returns f0_test's shape.
    Needs ``k_train_train`` (NTK) positive definite up to ``n * eps`` (null modes are dropped).
    """
    f0_X = _array("f0_train", f0_train, (1, 2))
    _, f_test = gradient_descent_mse(
        k_train_train, k_test_train, np.zeros_like(f0_X), 1.0, np.inf, f0_X, f0_test
    )
    return f_test


def memory_variance(
    kernel_train_train: Kernel,
    kernel_test_train: Kernel,
    nngp_test_test,
    *,
    alpha: float = 1.0,
) -> np.ndarray:
    """Variance over random initializations of the memory term at each test input, (m,).

    With ``f0 ~ GP(0, alpha^2 S)`` (S = NNGP) and training governed by a fixed NTK ``K``,
    ``m = f0_x - B f0_X`` with ``B = K_xX K^-1`` gives
    ``Var m(x) = alpha^2 (S_xx - 2 B S_Xx + B S_XX B^T)_diag``: the t = inf covariance of
    :func:`gradient_descent_mse_ensemble` (``get="ntk"``), times ``alpha^2``. ``alpha`` scales the
    initial function only (the kernel that trains is held fixed, e.g. a scaled output of a network
    whose NTK is unchanged); the memory is linear in ``f0``, hence the ``alpha^2``.
    ``nngp_test_test`` is the NNGP at the test inputs, (m, m) or its diagonal (m,).
    """
    for name, kernel in (
        ("kernel_train_train", kernel_train_train),
        ("kernel_test_train", kernel_test_train),
    ):
        if not isinstance(kernel, Kernel):
            raise ValueError(f"{name} must be a Kernel")
    alpha = float(alpha)
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha!r}")
    s_tt = _array("nngp_test_test", nngp_test_test, (1, 2))
    diag = s_tt if s_tt.ndim == 1 else np.diagonal(s_tt)
    m = np.shape(kernel_test_train.ntk)[0]
    if diag.shape != (m,):
        raise ValueError(f"nngp_test_test must have shape ({m}, {m}) or ({m},), got {s_tt.shape}")
    n = np.shape(kernel_train_train.ntk)[0]
    gauss = gradient_descent_mse_ensemble(
        kernel_train_train,
        np.zeros(n),
        1.0,
        np.inf,
        kernel_test_train,
        np.diag(diag),
        get="ntk",
    )
    # Off-diagonal entries of S_xx do not reach the diagonal of the covariance.
    return alpha**2 * np.diagonal(gauss.cov).copy()


# --------------------------------------------------------------------------------------------
# Forgetting times
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgettingTimes:
    """e-folding times, in steps (multiply by lr for continuous time), of the init's traces.

    eigenvalues: eigenvalues ``w`` of the training NTK, descending.
    mode_steps: e-folding time of each eigenmode of ``f0 - y`` on the training outputs.
    null_space_steps: e-folding time of the component of ``theta_0`` that the training outputs do not
      see (outside the row space of ``J``); this sets how long test-point predictions remember the
      initialization: ``inf`` without weight decay.
    """

    eigenvalues: np.ndarray
    mode_steps: np.ndarray
    null_space_steps: float

    @property
    def forgetting_steps(self) -> float:
        """Forgetting time of the trained predictor: the slowest, ``null_space_steps`` (for an
        overparameterized model, whose Jacobian has a null space)."""
        return max(self.null_space_steps, float(np.max(self.mode_steps, initial=0.0)))


def forgetting_times(
    k_train_train,
    lr: float,
    l2: float = 0.0,
    *,
    y_train_size: int | None = None,
    discrete: bool = False,
) -> ForgettingTimes:
    """How many steps the linearized model takes to forget its initialization, per mode.

    From :func:`linearized_l2_mse` (coupled L2 ``l2`` = lambda): the init enters the
    outputs through ``h(w)`` on a training eigenmode with NTK eigenvalue ``w`` and through ``h(0)``
    on the unseen part, so the e-folding times are ``1 / (lr (lambda + w / N))`` for gradient flow,
    ``-1 / log|1 - lr lambda - lr w / N|`` for discrete steps, and for the unseen part
    ``1 / (lr lambda)`` (``-1 / log(1 - lr lambda)``). In accumulated regularization
    ``lr * lambda * t`` the memory at test points decays as ``exp(-lr lambda t)``: it is gone once
    that reaches a few units, whatever the data. Without decay the unseen part is never forgotten
    (``inf``). A discrete mode with |1 - lr lambda - lr w / N| > 1 diverges: ValueError naming the
    stability bound ``lr <= 2 / (lambda + w_max / N)``, as :func:`initmem.theory.linear.forgetting_times`
    does. ``N = y_train_size`` (default: n, one output).
    """
    k = _array("k_train_train", k_train_train, (2,))
    n = k.shape[0]
    w, _ = _eigh_train(k, n)
    size = n if y_train_size is None else int(y_train_size)
    if size < n:
        raise ValueError(f"y_train_size must be >= n = {n}, got {y_train_size!r}")
    lr = check_number("lr", lr)
    lam = check_number("l2", l2)
    w = w[::-1]
    if discrete:
        if lr * lam >= 1.0:
            raise ValueError(f"lr * l2 must be < 1 for discrete steps, got {lr * lam}")
        factors = np.abs(1.0 - lr * lam - lr * w / size)
        if np.any(factors > 1.0 + 1e-12):
            bound = 2.0 / (lam + float(w[0]) / size)
            raise ValueError(
                f"lr={lr!r} diverges along the NTK eigenmode w={float(w[0]):.6g} "
                f"(|1 - lr l2 - lr w / N| = {float(factors.max()):.6g} > 1): stability needs "
                f"lr <= 2 / (l2 + w_max / N) = {bound:.6g}"
            )
        with np.errstate(divide="ignore"):  # a mode that one step clears exactly: rate inf
            rates = -np.log(factors)  # per-step log-contraction
        null_rate = -np.log1p(-lr * lam)
    else:
        rates = lr * (lam + w / size)
        null_rate = lr * lam
    # A rate of 0 (no contraction: the null space without decay) never forgets: infinite time.
    modes = np.full_like(w, np.inf)
    np.divide(1.0, rates, out=modes, where=rates > 0)
    null = 1.0 / null_rate if null_rate > 0 else np.inf
    return ForgettingTimes(eigenvalues=w, mode_steps=modes, null_space_steps=float(null))


# --------------------------------------------------------------------------------------------
# The lazy term of a depth-L network under decay: (L1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LazyForgetting:
    """The lazy memory term's forgetting under decay, (L1) of the module docstring.

    ``steps``: the first step at which the memory ``|m_t| / |m_0|`` is at or below 1/e (optimizer
    steps; ``inf`` when no decay acts (``never``), or when the schedule ends first; NaN: no closed
    form); ``memory_left``: the memory at the end of the schedule (NaN without one);
    ``e_fold_steps``: ``1 / (depth * kappa)`` at the peak rate (``inf`` without decay); ``never``:
    no decay acts, so no schedule erases it; ``formula``: the law used.
    """

    steps: float
    memory_left: float
    e_fold_steps: float
    never: bool
    formula: str


def lazy_forgetting(
    lr: float,
    *,
    depth: float,
    l2: float = 0.0,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    optimizer: str = "sgd",
    lr_multipliers=None,
) -> LazyForgetting:
    """When a depth-``depth`` network's lazy memory term forgets its init under decay: (L1).

    Memory after ``T`` steps ``prod_{t<T} (1 - kappa_t)^depth``, ``kappa_t = lr_t (l2 / (1 - mu) +
    weight_decay)`` (``mu`` = ``momentum`` for the heavy-ball optimizers SGD and RMSprop, 0 for Adam /
    AdamW; coupled ``l2``, decoupled ``weight_decay``); forgotten at the first step where it is at
    or below 1/e (the shared criterion). ``lr_multipliers``: the schedule, one factor per step (the
    time is then the first step within it, ``inf`` if it ends first, and ``memory_left`` the memory
    at its end); None: constant ``lr``, ``steps = 1 / (depth * -ln(1 - kappa))`` (a real number).
    ``depth``: the effective degree, real, from :func:`homogeneity_degree` (the degree of
    homogeneity of the network in the decayed weights: ``L`` for ``L`` weight layers of a bias-free
    ReLU MLP; any positive real number for a network that is not homogeneous). Adam-family with coupled ``l2``: NaN (no closed form). Units: steps.
    Derived here (module docstring, (L1)); tested against float64 simulations of 2- and 3-layer nets.
    """
    check_optimizer(optimizer)
    lr = check_number("lr", lr, strict=True)
    depth = check_number("depth", depth, strict=True)
    l2 = check_number("l2", l2)
    weight_decay = check_number("weight_decay", weight_decay)
    momentum = check_number("momentum", momentum, high=1.0)
    mults = None if lr_multipliers is None else check_number("lr_multipliers", lr_multipliers)
    formula = f"memory = prod_t (1 - lr_t (l2/(1-mu) + wd))^{depth:.4g}, forgotten at 1/e (L1)"
    if optimizer != "sgd" and l2 > 0:
        reason = "no closed form: an adaptive optimizer divides coupled L2 by sqrt(v)"
        return LazyForgetting(math.nan, math.nan, math.nan, False, reason)
    mu = momentum if optimizer == "sgd" else 0.0  # decoupled decay never enters a buffer
    rate = l2 / (1.0 - mu) + weight_decay
    lrs = lr * (np.ones(1) if mults is None else np.atleast_1d(mults))
    kappa = lrs * rate
    if np.any(kappa >= 1.0):
        raise ValueError(
            "lr is unstable for the decay: lr * (l2 / (1 - momentum) + weight_decay) must be < 1 "
            f"(got {np.max(kappa):.4g})"
        )
    log_decay = -depth * np.log1p(-kappa)  # e-folds of the memory per step
    peak = float(np.max(log_decay))
    e_fold = math.inf if peak == 0 else 1.0 / peak
    needed = -math.log(FORGETTING.level)
    if mults is None:
        return LazyForgetting(e_fold * needed, math.nan, e_fold, rate == 0, formula)
    total = np.cumsum(log_decay)
    reached = np.flatnonzero(total >= needed)
    steps = float(reached[0] + 1) if reached.size else math.inf
    return LazyForgetting(steps, float(np.exp(-total[-1])), e_fold, rate == 0, formula)


def homogeneity_degree(f0, jtheta0) -> float:
    """The ``depth`` of (L1) for any network: ``<J theta_0, f_0> / |f_0|^2`` over the outputs given.

    Euler's identity (derived here, as (L1)): a network positively homogeneous of degree ``L`` in
    the decayed weights has ``J(x) theta_0 = L f_0(x)`` exactly (``L`` weight layers of a bias-free
    ReLU MLP), so this returns ``L``. For any other network the decay ``theta -> c theta`` changes
    the outputs by ``(c - 1) J theta_0`` to first order, and this least-squares ratio is the rate,
    per unit of ``-ln c``, at which it scales ``f_0``: the effective degree to pass to
    :func:`lazy_forgetting`. ``f0``, ``jtheta0``: the outputs and their parameter-carried part
    (:func:`initmem.theory.empirical_kernels.init_outputs`, with only the decayed parameters
    trainable), the same shape; NaN when ``f0`` is zero.
    """
    f = _array("f0", f0, (1, 2))
    u = _array("jtheta0", jtheta0, (1, 2))
    if u.shape != f.shape:
        raise ValueError(f"jtheta0 must have the shape of f0 {f.shape}, got {u.shape}")
    norm_sq = float(np.sum(f * f))
    return math.nan if norm_sq == 0 else float(np.sum(u * f)) / norm_sq
