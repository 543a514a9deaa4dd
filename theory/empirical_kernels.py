"""Empirical kernels of a torch module via ``torch.func``: the torch half of :mod:`~initmem.theory.kernels`.

:func:`empirical_ntk` gives the NTK ``Theta(x1, x2) = J(x1) J(x2)^T`` and the one-draw NNGP of any
``torch.nn.Module`` at its current weights, by Jacobian contraction or by NTK-vector products, in blocks
of inputs; :class:`ReLUMLP` is the finite-width network whose kernels converge to
:func:`~initmem.theory.kernels.relu_mlp_kernel`. Conventions (the "ntk" parameterization, outputs
averaged as neural-tangents' ``trace_axes=(-1,)``) are those of :mod:`initmem.theory.kernels`, which
re-exports every name here on first use; this is the only theory module that imports torch.

Importing this module loads triton first where it is installed and tensorflow is not yet loaded:
``torch.func`` imports triton lazily, which segfaults here once tensorflow (neural-tangents) is loaded
(see :func:`initmem.theory.kernels._preload_triton`).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from .kernels import Kernel, _check_depth_and_stds, _preload_triton

__all__ = [
    "JACOBIAN_CACHE_BYTES",
    "ReLUMLP",
    "empirical_jacobian",
    "empirical_ntk",
    "flat_parameters",
    "init_outputs",
]

_preload_triton()


class ReLUMLP(nn.Module):
    """ReLU MLP in the "ntk" parameterization, the finite-width network of :func:`relu_mlp_kernel`.

    Layer ``l`` computes ``W_std / sqrt(fan_in) * h @ weight_l + b_std * bias_l`` with ``weight_l`` of
    shape (fan_in, fan_out) (stax's layout, so weights transfer to ``relu_mlp_stax`` unchanged) and
    all parameters drawn N(0, 1) from ``torch.Generator().manual_seed(seed)``. With this scaling the
    NTK converges to :func:`relu_mlp_kernel` as ``width -> inf`` and training is lazy.

    Args:
      in_dim, width, out_dim: layer sizes; ``depth`` hidden layers of ``width`` units (>= 0).
      W_std, b_std: as in :func:`relu_mlp_kernel` (``b_std`` ``None`` or 0: no bias parameters).
      seed: integer seed of the initialization.
      dtype: parameter dtype (float64 for comparisons with theory).
    """

    def __init__(
        self,
        in_dim: int,
        width: int,
        depth: int,
        out_dim: int = 1,
        W_std: float = 1.0,
        b_std: float | None = 0.0,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        b_std = _check_depth_and_stds(depth, W_std, b_std)
        for name, size in (("in_dim", in_dim), ("width", width), ("out_dim", out_dim)):
            if not isinstance(size, (int, np.integer)) or size < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {size!r}")
        self.W_std, self.b_std, self.depth = float(W_std), b_std, depth
        sizes = [in_dim] + [width] * depth + [out_dim]
        gen = torch.Generator().manual_seed(int(seed))
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(a, b, generator=gen, dtype=dtype))
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.biases = nn.ParameterList(
            nn.Parameter(torch.randn(b, generator=gen, dtype=dtype)) for b in sizes[1:]
        )
        if b_std == 0.0:
            for bias in self.biases:
                bias.requires_grad_(False)
                bias.data.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            if i > 0:
                h = torch.relu(h)
            h = self.W_std / math.sqrt(weight.shape[0]) * h @ weight
            if self.b_std:
                h = h + self.b_std * bias
        return h

    def stax_params(self) -> list:
        """The weights as a neural-tangents ``stax.serial`` parameter list (numpy float64)."""
        params = []
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            if i > 0:
                params.append(())
            w = weight.detach().cpu().double().numpy()
            b = bias.detach().cpu().double().numpy()[None, :] if self.b_std else None
            params.append((w, b))
        return params


def _functional(module: nn.Module):
    """``f(params, x) -> (batch, k)`` outputs and the trainable parameters, detached."""
    if "tensorflow" in sys.modules and "triton" not in sys.modules:
        try:
            # deferred: only this rarely used path needs it
            import importlib.util

            has_triton = importlib.util.find_spec("triton") is not None
        except ValueError:
            has_triton = False
        if has_triton:
            raise RuntimeError(
                "tensorflow (pulled in by neural-tangents) was imported before triton; torch.func "
                "would then segfault while importing triton. Import triton (or "
                "initmem.theory.empirical_kernels) before neural_tangents/tensorflow."
            )
    params = {n: p.detach() for n, p in module.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("module has no trainable parameters")
    buffers = {n: b.detach() for n, b in module.named_buffers()}

    def f(p, x):
        return _call(module, p, buffers, x).reshape(x.shape[0], -1)

    return f, params


def _call(module: nn.Module, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
    """``module(x)`` with ``params`` and ``buffers`` (``functional_call``), with attention on
    ``scaled_dot_product_attention``'s plain-math kernel: the same function, and the one kernel with
    forward-mode AD and vmap on the CPU (the fused one has neither), which every transform here
    needs (a ViT's NTK, ``jvp``)."""
    with sdpa_kernel(SDPBackend.MATH):
        return functional_call(module, (params, buffers), (x,))


def _as_module_input(name: str, x, params: dict) -> torch.Tensor:
    ref = next(iter(params.values()))
    x = torch.as_tensor(x)
    if x.ndim < 1 or x.shape[0] == 0:
        raise ValueError(f"{name} must have a non-empty leading sample axis, got shape {x.shape}")
    return x.to(device=ref.device, dtype=ref.dtype if x.is_floating_point() else x.dtype)


def _check_block_size(block_size) -> int:
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
    return int(block_size)


#: Bytes of x2 Jacobians that :func:`empirical_ntk` keeps so that each block's is computed once.
JACOBIAN_CACHE_BYTES = 2**30


def _per_sample_jacobian(f, params: dict, x: torch.Tensor) -> torch.Tensor:
    """Jacobian of the outputs of a block of inputs, shape (b * k, P), one sample at a time."""

    def f_one(p, xi):
        return f(p, xi.unsqueeze(0))[0]

    jac = vmap(jacrev(f_one), in_dims=(None, 0))(params, x)  # name -> (b, k, *param_shape)
    b, k = next(iter(jac.values())).shape[:2]
    return torch.cat([j.reshape(b, k, -1) for j in jac.values()], dim=2).reshape(b * k, -1)


def _gram(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """``a @ b.T`` as float64 numpy, in the tensors' dtype. On the CPU the product goes through
    numpy's BLAS (OpenBLAS, which also uses the symmetric rank-k update when ``b is a``): on the AMD
    CPU of BENCHMARKS.md it ran a 512 x 279,040 float32 Gram matrix in 0.41 s against 0.82 s for
    ``torch.matmul`` (MKL takes a slow path there). On a GPU it stays on the device."""
    if a.device.type == "cpu":
        an = a.detach().numpy()
        bn = an if b is a else b.detach().numpy()
        return (an @ bn.T).astype(np.float64)
    return (a @ b.T).detach().cpu().double().numpy()


def _stacked_jacobian(f, params: dict, x: torch.Tensor, block_size: int) -> torch.Tensor:
    """The Jacobian of all of ``x``, shape (n * k, P), computed ``block_size`` samples at a time into
    one preallocated matrix (no concatenation copy)."""
    first = _per_sample_jacobian(f, params, x[:block_size])
    per_sample = first.shape[0] // min(block_size, x.shape[0])
    out = first.new_empty((x.shape[0] * per_sample, first.shape[1]))
    out[: first.shape[0]] = first
    del first
    for i in range(block_size, x.shape[0], block_size):
        jac = _per_sample_jacobian(f, params, x[i : i + block_size])
        out[i * per_sample : i * per_sample + jac.shape[0]] = jac
    return out


def _ntvp_block(f, params: dict, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """Theta(x1, x2) by NTK-vector products: J1 (J2^T e_j) for every output e_j of the x2 block.

    vjp of the x2 outputs gives the columns J2^T e_j (vmapped over the basis cotangents); a jvp at the
    x1 outputs then gives J1 J2^T e_j. Returns shape (b1 * k, b2 * k).
    """
    out2, vjp_fn = vjp(lambda p: f(p, x2), params)
    m = out2.numel()
    basis = torch.eye(m, dtype=out2.dtype, device=out2.device).reshape(m, *out2.shape)
    (cols,) = vmap(vjp_fn)(basis)

    def push(tangent):
        return jvp(lambda p: f(p, x1), (params,), (tangent,))[1]

    prods = vmap(push)(cols)  # (b2 * k, b1, k)
    return prods.reshape(m, -1).T


def empirical_ntk(
    module: nn.Module,
    x1,
    x2=None,
    *,
    implementation: str = "jacobian",
    block_size: int = 64,
    trace_outputs: bool = True,
) -> Kernel:
    """Empirical NTK and one-draw NNGP of a torch module at its current parameters.

    ``ntk = J(x1) J(x2)^T`` with ``J`` the Jacobian of the outputs with respect to all parameters
    with ``requires_grad``; ``nngp = f(x1) f(x2)^T``, the one-draw estimate of the output covariance
    (neural-tangents' ``empirical_nngp_fn``). With ``trace_outputs`` both are averaged over the ``k``
    outputs (shape (n1, n2), neural-tangents' ``trace_axes=(-1,)``); otherwise they have shape
    (n1 * k, n2 * k), rows ordered ``sample * k + output`` (``trace_axes=()``), which is what the exact
    linearized dynamics of a multi-output network need.

    Computed with ``torch.func`` in blocks of ``block_size`` inputs on each side, so memory stays
    at about ``2 * block_size * k * P`` numbers for ``P`` parameters:

    - ``implementation="jacobian"``: per-sample Jacobians (``vmap(jacrev)``), contracted blockwise.
      When the Jacobian of all of x2 fits in :data:`JACOBIAN_CACHE_BYTES` (``n2 * k * P`` numbers
      in the module's dtype), it is computed once, block by block, into one matrix and each x1
      block is one matrix product with it (``x2=None``: one product in all); memory about
      ``(n2 + block_size) * k * P`` numbers. Otherwise x2's blocks are recomputed for every x1
      block, and memory stays at the bound above.
    - ``implementation="ntvp"``: NTK-vector products: ``vjp`` gives ``J2^T e`` for every output
      ``e`` of an x2 block, and one ``jvp`` per such vector gives ``J1 (J2^T e)``; only one block's
      Jacobian is held at a time (about ``block_size * k * P`` numbers).

    The module is called as it is (its mode, dtype and device): put BatchNorm/Dropout in eval mode.
    The arithmetic is in the module's dtype; the result is float64 numpy. ``x2=None`` computes
    ``k(x1, x1)`` once (one product, or the upper blocks mirrored) and symmetrizes it exactly.
    """
    if implementation not in ("jacobian", "ntvp"):
        raise ValueError(f"implementation must be 'jacobian' or 'ntvp', got {implementation!r}")
    block_size = _check_block_size(block_size)
    f, params = _functional(module)
    x1t = _as_module_input("x1", x1, params)
    x2t = x1t if x2 is None else _as_module_input("x2", x2, params)
    if x2t.shape[1:] != x1t.shape[1:]:
        raise ValueError(f"x2 sample shape {tuple(x2t.shape[1:])} != x1's {tuple(x1t.shape[1:])}")
    symmetric = x2 is None

    with torch.no_grad():
        out1 = f(params, x1t)
        out2 = out1 if symmetric else f(params, x2t)
    k = out1.shape[1]
    n1, n2 = x1t.shape[0], x2t.shape[0]
    ntk = np.zeros((n1 * k, n2 * k))
    starts1 = range(0, n1, block_size)
    starts2 = range(0, n2, block_size)
    n_params = sum(p.numel() for p in params.values())
    itemsize = next(iter(params.values())).element_size()
    if implementation == "jacobian" and n2 * k * n_params * itemsize <= JACOBIAN_CACHE_BYTES:
        # x2's Jacobian held whole: one matrix product per x1 block, one in all when symmetric
        j2 = _stacked_jacobian(f, params, x2t, block_size)
        if symmetric:
            ntk = _gram(j2, j2)
        else:
            for i in starts1:
                ja = _per_sample_jacobian(f, params, x1t[i : i + block_size])
                ntk[i * k : i * k + ja.shape[0]] = _gram(ja, j2)
    else:
        for i in starts1:
            xa = x1t[i : i + block_size]
            ja = _per_sample_jacobian(f, params, xa) if implementation == "jacobian" else None
            for j in starts2:
                if symmetric and j < i:
                    continue
                xb = x2t[j : j + block_size]
                if implementation == "jacobian":
                    jb = ja if (symmetric and j == i) else _per_sample_jacobian(f, params, xb)
                    block = _gram(ja, jb)
                else:
                    block = _ntvp_block(f, params, xa, xb).detach().cpu().double().numpy()
                rows = slice(i * k, (i + xa.shape[0]) * k)
                cols = slice(j * k, (j + xb.shape[0]) * k)
                ntk[rows, cols] = block
                if symmetric:
                    ntk[cols, rows] = block.T
    if symmetric:
        ntk = (ntk + ntk.T) / 2
    o1 = out1.detach().cpu().double().numpy().reshape(-1)
    o2 = out2.detach().cpu().double().numpy().reshape(-1)
    nngp = np.outer(o1, o2)
    if trace_outputs:
        ntk = np.einsum("iaja->ij", ntk.reshape(n1, k, n2, k)) / k
        nngp = np.einsum("iaja->ij", nngp.reshape(n1, k, n2, k)) / k
    return Kernel(nngp=nngp, ntk=ntk)


def empirical_jacobian(module: nn.Module, x, *, block_size: int = 64) -> np.ndarray:
    """Jacobian of the outputs with respect to the trainable parameters, float64, shape (n * k, P).

    Rows ordered ``sample * k + output``; columns in the order of :func:`flat_parameters`. Memory is
    ``n * k * P`` numbers: meant for small models and for checks in parameter space.
    """
    block_size = _check_block_size(block_size)
    f, params = _functional(module)
    xt = _as_module_input("x", x, params)
    return _stacked_jacobian(f, params, xt, block_size).detach().cpu().double().numpy()


def flat_parameters(module: nn.Module) -> np.ndarray:
    """The trainable parameters as one float64 vector, in ``named_parameters`` order."""
    return np.concatenate(
        [
            p.detach().cpu().double().reshape(-1).numpy()
            for p in module.parameters()
            if p.requires_grad
        ]
    )


def init_outputs(module: nn.Module, x) -> tuple[np.ndarray, np.ndarray]:
    """The outputs ``f_0(x)`` and their parameter-carried part ``J(x) theta_0``, float64.

    ``J(x) theta_0`` is the derivative of ``f(x; (1 + s) theta_0)`` at ``s = 0``: one ``jvp`` with the
    parameters as tangent. The linearized model is ``f_lin(x; theta) = [f_0(x) - J(x) theta_0] +
    J(x) theta``; under weight decay toward zero only the second part can be forgotten (see
    :func:`initmem.theory.ntk.linearized_l2_mse`). For a network positively homogeneous of
    degree L in its parameters (bias-free ReLU MLP with L dense layers) ``J theta_0 = L f_0``.
    Both arrays have the module's output shape, flattened to (n,) if the module returns (n,).
    """
    _, params = _functional(module)
    buffers = {n: b.detach() for n, b in module.named_buffers()}
    xt = _as_module_input("x", x, params)
    f0, jtheta = jvp(lambda p: _call(module, p, buffers, xt), (params,), (params,))
    shape = f0.shape if f0.ndim <= 2 else (f0.shape[0], -1)
    f0 = f0.detach().cpu().double().numpy().reshape(shape)
    jtheta = jtheta.detach().cpu().double().numpy().reshape(shape)
    return f0, jtheta
