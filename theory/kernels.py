"""Kernels of the lazy (NTK) regime from three sources, behind one interface.

Every source returns a :class:`Kernel` holding two float64 arrays of shape ``(n1, n2)``:

- ``nngp``: covariance of the network outputs over the random initialization,
  ``E[f_0(x1) f_0(x2)]`` (the NNGP kernel; for an empirical kernel, the one-draw estimate).
- ``ntk``: the neural tangent kernel ``Theta(x1, x2) = J(x1) J(x2)^T``, with ``J`` the Jacobian of the
  output with respect to the parameters.

Sources:

1. :func:`relu_mlp_kernel`: closed-form arc-cosine kernels of an infinitely wide ReLU MLP, numpy.
2. :func:`stax_kernel`: any neural-tangents ``stax`` ``kernel_fn`` (optional extra ``initmem[nt]``);
   :func:`relu_mlp_stax` builds the stax network that :func:`relu_mlp_kernel` and :class:`ReLUMLP`
   describe.
3. :func:`empirical_ntk`: the empirical kernels of any ``torch.nn.Module`` at its current weights via
   ``torch.func``, by Jacobian contraction or by NTK-vector products, in blocks of inputs; with
   :class:`ReLUMLP`, :func:`empirical_jacobian`, :func:`flat_parameters` and :func:`init_outputs` it
   lives in :mod:`initmem.theory.empirical_kernels`, the only theory module that imports torch (it
   imports this module's :class:`Kernel`, never the other way, so the closed forms import without
   torch; ``initmem.theory.empirical_ntk`` loads it on first use).

Parameterization: "ntk", as in neural-tangents' ``stax.Dense``. A dense layer maps
``h -> W_std / sqrt(fan_in) * h @ W + b_std * b`` with ``W, b ~ N(0, 1)``; the input kernel is
``x1 x2^T / d``. Multi-output kernels follow neural-tangents' ``trace_axes=(-1,)``: the output axis is
averaged, so ``ntk = J(x1) J(x2)^T / k`` summed over the ``k`` outputs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Kernel",
    "relu_mlp_kernel",
    "relu_mlp_stax",
    "stax_kernel",
]


def _preload_triton() -> None:
    """Import triton (if installed) before tensorflow can be imported.

    neural-tangents imports tensorflow; importing triton after it segfaults this environment, and
    torch.func imports triton lazily (through torch._dynamo) on its first gradient. Loading triton
    first avoids the crash; it costs about 0.3 s and nothing where triton is absent. Called before
    neural-tangents is imported (:func:`_import_nt`) and when the torch half of the kernels loads
    (:mod:`initmem.theory.empirical_kernels`), not when this module is imported.
    """
    if "tensorflow" in sys.modules:
        return
    try:
        import triton  # noqa: F401
    except ImportError:
        pass


_NT_MISSING = (
    "neural-tangents is not installed; it is an optional extra: pip install initmem[nt] "
    "(pins jax==0.5.3, neural-tangents==0.6.5)"
)


@dataclass(frozen=True)
class Kernel:
    """NNGP and NTK between two sets of inputs, float64 arrays of equal shape.

    Shape ``(n1, n2)`` (outputs averaged, neural-tangents' ``trace_axes=(-1,)``), or
    ``(n1 * k, n2 * k)`` for an untraced multi-output empirical kernel, rows ordered
    ``sample * k + output``.
    """

    nngp: np.ndarray
    ntk: np.ndarray

    def __post_init__(self):
        nngp = np.asarray(self.nngp, dtype=np.float64)
        ntk = np.asarray(self.ntk, dtype=np.float64)
        if nngp.ndim != 2:
            raise ValueError(f"nngp must be a 2-D array, got shape {nngp.shape}")
        if ntk.shape != nngp.shape:
            raise ValueError(f"ntk shape {ntk.shape} must equal nngp shape {nngp.shape}")
        object.__setattr__(self, "nngp", nngp)
        object.__setattr__(self, "ntk", ntk)

    @property
    def T(self) -> Kernel:
        """The kernel between the inputs in swapped order, ``k(x2, x1)``."""
        return Kernel(nngp=self.nngp.T, ntk=self.ntk.T)

    def __getitem__(self, index) -> Kernel:
        """Rows and columns of both kernels, e.g. ``k[:n, :n]`` or ``k[n:, :n]``."""
        return Kernel(nngp=self.nngp[index], ntk=self.ntk[index])


# --------------------------------------------------------------------------------------------
# 1. Closed form: arc-cosine kernels of an infinitely wide ReLU MLP
# --------------------------------------------------------------------------------------------


def _check_depth_and_stds(depth: int, W_std: float, b_std: float | None) -> float:
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"depth must be an integer >= 0 (number of hidden layers), got {depth!r}")
    if not np.isfinite(W_std) or W_std <= 0:
        raise ValueError(f"W_std must be a finite number > 0, got {W_std!r}")
    b_std = 0.0 if b_std is None else float(b_std)
    if not np.isfinite(b_std) or b_std < 0:
        raise ValueError(f"b_std must be a finite number >= 0 or None, got {b_std!r}")
    return b_std


def _as_inputs(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (samples, features), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    return x


def _relu_step(
    nngp: np.ndarray, ntk: np.ndarray, var1: np.ndarray, var2: np.ndarray, same: bool
) -> tuple[np.ndarray, ...]:
    """One ReLU layer on the kernels (arc-cosine kernels of degree 1 and 0).

    For a centred Gaussian pair (u, v) with variances var1, var2 and covariance nngp, and
    angle phi = arccos(nngp / sqrt(var1 var2)) (Cho & Saul 2009):
    E[relu(u) relu(v)] = sqrt(var1 var2) (sin phi + (pi - phi) cos phi) / (2 pi),
    E[relu'(u) relu'(v)] = (pi - phi) / (2 pi); the NTK is multiplied by the latter.
    The angle is taken with arctan2, as stax does, for accuracy near phi = 0; ``same`` marks a
    self-kernel k(x, x), whose diagonal angle is set to exactly 0.
    """
    prod = np.outer(var1, var2)
    sine = np.sqrt(np.maximum(prod - nngp**2, 0.0))
    if same:  # k(x, x): the angle of a point with itself is exactly 0
        np.fill_diagonal(sine, 0.0)
    angle = np.arctan2(sine, nngp)
    dot_sigma = (np.pi - angle) / (2 * np.pi)
    new_nngp = sine / (2 * np.pi) + dot_sigma * nngp
    return new_nngp, ntk * dot_sigma, var1 / 2, var2 / 2


def relu_mlp_kernel(
    x1,
    x2=None,
    *,
    depth: int,
    W_std: float = 1.0,
    b_std: float | None = 0.0,
) -> Kernel:
    """NNGP and NTK of an infinitely wide ReLU MLP in the "ntk" parameterization, closed form.

    Network: ``Dense -> (ReLU -> Dense) * depth``, i.e. ``depth`` hidden layers, every dense layer
    ``h -> W_std / sqrt(fan_in) * h @ W + b_std * b`` with standard normal ``W, b``: exactly
    ``stax.serial(Dense(w, W_std, b_std), Relu(), ..., Dense(k, W_std, b_std))`` of neural-tangents
    and :class:`ReLUMLP`. The kernels do not depend on the widths or the output count ``k``.

    Recursion (Jacot et al. 2018; Lee et al. 2019, eq. for the ntk parameterization):
    ``Sigma_1 = W_std^2 x1 x2^T / d + b_std^2``, ``Theta_1 = Sigma_1``; through a ReLU the NNGP maps by
    the degree-1 arc-cosine kernel and the NTK is multiplied by the degree-0 one (see
    :func:`_relu_step`); each dense layer then gives ``Sigma <- W_std^2 Sigma + b_std^2`` and
    ``Theta <- W_std^2 Theta + Sigma``.

    Args:
      x1: inputs, shape (n1, d).
      x2: inputs, shape (n2, d); ``None`` means ``x1``.
      depth: number of hidden layers, >= 0 (0 is the linear model ``f = W_std x W / sqrt(d)``).
      W_std: weight standard deviation, > 0.
      b_std: bias standard deviation, >= 0 (``None`` or 0: no bias).

    Returns:
      :class:`Kernel` with float64 arrays of shape (n1, n2).
    """
    b_std = _check_depth_and_stds(depth, W_std, b_std)
    x1 = _as_inputs("x1", x1)
    same = x2 is None
    x2 = x1 if same else _as_inputs("x2", x2)
    if x2.shape[1] != x1.shape[1]:
        raise ValueError(f"x2 has {x2.shape[1]} features but x1 has {x1.shape[1]}")
    d = x1.shape[1]
    w2, b2 = W_std**2, b_std**2
    nngp = w2 * (x1 @ x2.T) / d + b2
    var1 = w2 * np.einsum("ij,ij->i", x1, x1) / d + b2
    var2 = w2 * np.einsum("ij,ij->i", x2, x2) / d + b2
    ntk = nngp.copy()
    for _ in range(depth):
        nngp, ntk, var1, var2 = _relu_step(nngp, ntk, var1, var2, same)
        nngp, var1, var2 = w2 * nngp + b2, w2 * var1 + b2, w2 * var2 + b2
        ntk = w2 * ntk + nngp
    return Kernel(nngp=nngp, ntk=ntk)


# --------------------------------------------------------------------------------------------
# 2. neural-tangents stax (optional extra)
# --------------------------------------------------------------------------------------------


def _import_nt():
    _preload_triton()
    try:
        # deferred: neural-tangents (jax) is optional
        import neural_tangents
        from neural_tangents import stax
    except ImportError as err:
        raise ImportError(_NT_MISSING) from err
    return neural_tangents, stax


def relu_mlp_stax(
    depth: int,
    W_std: float = 1.0,
    b_std: float | None = 0.0,
    width: int = 512,
    out_dim: int = 1,
):
    """The neural-tangents ``stax`` ReLU MLP of :func:`relu_mlp_kernel`: ``(init_fn, apply_fn,
    kernel_fn)``. ``width`` matters only to ``init_fn``/``apply_fn``; requires ``initmem[nt]``."""
    b_std = _check_depth_and_stds(depth, W_std, b_std)
    _, stax = _import_nt()
    b = b_std if b_std > 0 else None
    layers = [stax.Dense(width if depth else out_dim, W_std, b)]
    for i in range(depth):
        layers += [stax.Relu(), stax.Dense(width if i < depth - 1 else out_dim, W_std, b)]
    return stax.serial(*layers)


def stax_kernel(kernel_fn, x1, x2=None) -> Kernel:
    """NNGP and NTK of a neural-tangents ``stax`` ``kernel_fn`` as a float64 :class:`Kernel`.

    Enable float64 in JAX (``jax.config.update("jax_enable_x64", True)``) before building inputs if
    agreement beyond float32 matters. Requires ``initmem[nt]``.
    """
    _import_nt()
    x1 = _as_inputs("x1", x1)
    x2 = None if x2 is None else _as_inputs("x2", x2)
    k = kernel_fn(x1, x2, ("nngp", "ntk"))
    return Kernel(nngp=np.asarray(k.nngp), ntk=np.asarray(k.ntk))
