"""Kernels from the three sources agree: closed form vs stax, torch.func vs neural-tangents."""

import copy
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from initmem.theory.empirical_kernels import (
    ReLUMLP,
    empirical_jacobian,
    empirical_ntk,
    flat_parameters,
    init_outputs,
)
from initmem.theory.kernels import Kernel, relu_mlp_kernel, relu_mlp_stax, stax_kernel

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")


@pytest.fixture(scope="module")
def nt():
    """neural-tangents with float64 JAX (initmem imported first: see kernels._preload_triton)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return pytest.importorskip("neural_tangents")


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((6, 5)), rng.standard_normal((4, 5))


def _close(ours, ref, tol=1e-6):
    ref = np.asarray(ref)
    np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol * np.max(np.abs(ref)))


@pytest.mark.parametrize(("depth", "w_std", "b_std"), [(0, 1.0, 0.0), (3, 1.4, 0.3)])
def test_relu_mlp_kernel_equals_stax(nt, inputs, depth, w_std, b_std):
    x1, x2 = inputs
    _, _, kernel_fn = relu_mlp_stax(depth, w_std, b_std)
    for args in ((x1, x2), (x1, None)):
        ours = relu_mlp_kernel(*args, depth=depth, W_std=w_std, b_std=b_std)
        ref = stax_kernel(kernel_fn, *args)
        _close(ours.nngp, ref.nngp)
        _close(ours.ntk, ref.ntk)


def test_relu_mlp_kernel_known_values():
    """One hidden layer, unit inputs: orthogonal pair and identical pair by hand (Cho & Saul)."""
    x = np.array([[1.0, 0.0], [0.0, 1.0]]) * np.sqrt(2)  # x x^T / d = identity
    k = relu_mlp_kernel(x, depth=1, W_std=1.0, b_std=0.0)
    # Sigma_1 = I; relu: diag 1/2, off-diag (angle pi/2) 1/(2 pi); Theta = Sigma_2 + Theta_1 * dot.
    np.testing.assert_allclose(k.nngp, [[0.5, 1 / (2 * np.pi)], [1 / (2 * np.pi), 0.5]])
    np.testing.assert_allclose(k.ntk, [[1.0, 1 / (2 * np.pi)], [1 / (2 * np.pi), 1.0]])


def test_wide_network_kernels_approach_closed_form(inputs):
    """Empirical NTK of a width-2048 ReLUMLP is within 10% of the infinite-width kernel (O(w^-1/2))."""
    x1, _ = inputs
    net = ReLUMLP(5, 2048, 1, W_std=1.4, b_std=0.3, seed=0)
    emp = empirical_ntk(net, x1).ntk
    inf = relu_mlp_kernel(x1, depth=1, W_std=1.4, b_std=0.3).ntk
    assert np.max(np.abs(emp - inf)) < 0.1 * np.max(np.abs(inf))


@pytest.fixture(scope="module")
def small_net():
    return ReLUMLP(5, 32, 2, out_dim=3, W_std=1.4, b_std=0.3, seed=1)


def test_relu_mlp_matches_stax_apply(nt, inputs, small_net):
    _, apply_fn, _ = relu_mlp_stax(2, 1.4, 0.3, width=32, out_dim=3)
    x1, _ = inputs
    ref = np.asarray(apply_fn(small_net.stax_params(), x1))
    np.testing.assert_allclose(small_net(torch.tensor(x1)).detach().numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_empirical_ntk_equals_neural_tangents(nt, inputs, small_net, traced, symmetric):
    x1, x2 = inputs
    x2 = None if symmetric else x2
    _, apply_fn, _ = relu_mlp_stax(2, 1.4, 0.3, width=32, out_dim=3)
    params = small_net.stax_params()
    trace_axes = (-1,) if traced else ()
    ref_ntk = np.asarray(nt.empirical_ntk_fn(apply_fn, trace_axes=trace_axes)(x1, x2, params))
    ref_nngp = np.asarray(nt.empirical_nngp_fn(apply_fn, trace_axes=trace_axes)(x1, x2, params))
    if not traced:  # nt: (n1, n2, k, k); ours: (n1 * k, n2 * k), rows sample * k + output
        n1, n2 = ref_ntk.shape[:2]
        ref_ntk = ref_ntk.transpose(0, 2, 1, 3).reshape(n1 * 3, n2 * 3)
        ref_nngp = ref_nngp.transpose(0, 2, 1, 3).reshape(n1 * 3, n2 * 3)
    for implementation in ("jacobian", "ntvp"):
        ours = empirical_ntk(
            small_net, x1, x2, implementation=implementation, block_size=4, trace_outputs=traced
        )
        _close(ours.ntk, ref_ntk, tol=1e-10)
        _close(ours.nngp, ref_nngp, tol=1e-10)


def test_empirical_ntk_independent_of_block_size_and_equal_to_jacobian_product(inputs, small_net):
    x1, x2 = inputs
    full = empirical_ntk(small_net, x1, x2, block_size=64, trace_outputs=False).ntk
    jac1, jac2 = empirical_jacobian(small_net, x1), empirical_jacobian(small_net, x2, block_size=1)
    np.testing.assert_allclose(full, jac1 @ jac2.T, rtol=1e-12, atol=1e-12)
    for impl in ("jacobian", "ntvp"):
        blocked = empirical_ntk(
            small_net, x1, x2, implementation=impl, block_size=1, trace_outputs=False
        ).ntk
        np.testing.assert_allclose(blocked, full, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("symmetric", [True, False])
def test_empirical_ntk_with_and_without_the_jacobian_cache(
    inputs, small_net, monkeypatch, symmetric
):
    """x2's Jacobian held whole (one product per x1 block) or recomputed block by block: the same
    kernel, equal to the product of the Jacobians (stacked in blocks that do not divide n)."""
    from initmem.theory import empirical_kernels

    x1, x2 = inputs
    x2 = None if symmetric else x2
    cached = empirical_ntk(small_net, x1, x2, block_size=4, trace_outputs=False).ntk
    monkeypatch.setattr(empirical_kernels, "JACOBIAN_CACHE_BYTES", 0)
    recomputed = empirical_ntk(small_net, x1, x2, block_size=4, trace_outputs=False).ntk
    np.testing.assert_allclose(recomputed, cached, rtol=1e-12, atol=1e-12)
    jac1 = empirical_jacobian(small_net, x1, block_size=3)
    jac2 = jac1 if symmetric else empirical_jacobian(small_net, x2, block_size=5)
    np.testing.assert_allclose(cached, jac1 @ jac2.T, rtol=1e-12, atol=1e-12)
    if symmetric:
        assert np.array_equal(cached, cached.T)


def test_empirical_ntk_in_float32_returns_float64(inputs):
    x1, _ = inputs
    net64 = ReLUMLP(5, 64, 1, W_std=1.4, b_std=0.3, seed=3)
    net32 = copy.deepcopy(net64).float()
    k32 = empirical_ntk(net32, x1)
    assert k32.ntk.dtype == np.float64 and np.array_equal(k32.ntk, k32.ntk.T)
    # float32 rounding, lambda sqrt(n) u (Higham & Mary 2019) with lambda = 4 and n = (parameters the
    # contraction J J^T sums over) x (layers of the chain): 7e-6 of the kernel's scale; measured 5e-8
    n = sum(p.numel() for p in net64.parameters()) * 2
    tol = 4 * np.sqrt(n) * np.finfo(np.float32).eps / 2
    ref = empirical_ntk(net64, x1).ntk
    np.testing.assert_allclose(k32.ntk, ref, rtol=0, atol=tol * np.max(np.abs(ref)))


def test_init_outputs_split_the_initial_function(inputs, small_net):
    x1, _ = inputs
    f0, jtheta0 = init_outputs(small_net, x1)
    np.testing.assert_allclose(f0, small_net(torch.tensor(x1)).detach().numpy(), rtol=1e-14)
    jac = empirical_jacobian(small_net, x1)
    np.testing.assert_allclose(jtheta0.reshape(-1), jac @ flat_parameters(small_net), rtol=1e-10)
    # Bias-free ReLU MLP with 3 dense layers is 3-homogeneous in its parameters: J theta0 = 3 f0.
    homogeneous = ReLUMLP(5, 32, 2, W_std=1.4, b_std=None, seed=4)
    f0, jtheta0 = init_outputs(homogeneous, x1)
    assert f0.shape == (6, 1)
    np.testing.assert_allclose(jtheta0, 3 * f0, rtol=1e-12, atol=1e-12)


def test_kernel_dataclass_slicing_and_validation():
    k = Kernel(nngp=np.arange(6.0).reshape(2, 3), ntk=np.ones((2, 3)))
    assert k.T.nngp.shape == (3, 2) and k[:1, 1:].ntk.shape == (1, 2)
    assert k.nngp.dtype == np.float64
    with pytest.raises(ValueError, match="ntk shape"):
        Kernel(nngp=np.ones((2, 2)), ntk=np.ones((2, 3)))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"depth": -1}, "depth"),
        ({"depth": 1, "W_std": 0.0}, "W_std"),
        ({"depth": 1, "b_std": -0.1}, "b_std"),
        ({"depth": 1, "x2": np.ones((2, 3))}, "x2"),
    ],
)
def test_relu_mlp_kernel_bad_inputs(kwargs, name):
    with pytest.raises(ValueError, match=name):
        relu_mlp_kernel(np.ones((2, 4)), **kwargs)


def test_empirical_ntk_bad_inputs(small_net):
    x = np.ones((2, 5))
    with pytest.raises(ValueError, match="implementation"):
        empirical_ntk(small_net, x, implementation="structured")
    with pytest.raises(ValueError, match="block_size"):
        empirical_ntk(small_net, x, block_size=0)
    with pytest.raises(ValueError, match="x2"):
        empirical_ntk(small_net, x, np.ones((2, 4)))


def test_missing_neural_tangents_raises_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "neural_tangents", None)  # makes `import` fail
    with pytest.raises(ImportError, match=r"pip install initmem\[nt\]"):
        relu_mlp_stax(1)


def test_theory_ntk_imports_without_jax():
    code = (
        "import sys, initmem.theory.ntk, initmem.theory.kernels; "
        "assert 'jax' not in sys.modules and 'neural_tangents' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_theory_imports_without_torch():
    """Only initmem.theory.empirical_kernels imports torch (and triton), on first use of its names."""
    modules = "initmem.theory, initmem.theory.linear, initmem.theory.normalized, " + (
        "initmem.theory.forgetting, initmem.theory.schedule, initmem.theory.kernels, "
        "initmem.theory.logistic, initmem.theory.logit_scale, initmem.theory.checks, "
        "initmem.theory.simulate, initmem.theory.normalized_sim"
    )
    code = (
        f"import sys, {modules}; "
        "loaded = sorted(m for m in ('torch', 'triton') if m in sys.modules); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_names_resolve_to_the_torch_half():
    import initmem.theory
    from initmem.theory import empirical_kernels, kernels

    assert initmem.theory.empirical_ntk is empirical_kernels.empirical_ntk
    assert initmem.theory.empirical_kernels is empirical_kernels
    assert not hasattr(kernels, "empirical_ntk")  # the numpy half never loads the torch half


# A fresh process importing jax, tensorflow and torch (about 11 s of CPU): in the default run on purpose,
# since the import order it guards is what crashes this machine (kernels._preload_triton).
def test_stax_kernel_then_empirical_ntk_in_one_process():
    """neural-tangents (tensorflow) first, torch.func second, in a fresh process: no segfault.

    stax_kernel loads triton before neural-tangents; empirical_ntk then loads torch.func, whose lazy
    triton import would crash had tensorflow come first (theory.kernels._preload_triton).
    """
    pytest.importorskip("neural_tangents")
    code = """
import sys
import numpy as np
from initmem.theory.kernels import relu_mlp_kernel, relu_mlp_stax, stax_kernel
assert "torch" not in sys.modules
x = np.random.default_rng(0).standard_normal((3, 4))
ref = stax_kernel(relu_mlp_stax(1, 1.4, 0.1)[2], x)
assert "tensorflow" in sys.modules and "triton" in sys.modules
from initmem.theory import empirical_ntk
from initmem.theory.empirical_kernels import ReLUMLP
k = empirical_ntk(ReLUMLP(4, 8, 1, W_std=1.4, b_std=0.1, seed=0), x)
assert k.ntk.shape == (3, 3) and np.allclose(k.ntk, k.ntk.T)
np.testing.assert_allclose(relu_mlp_kernel(x, depth=1, W_std=1.4, b_std=0.1).ntk, ref.ntk, rtol=1e-5)
print("ok")
"""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_a_vits_ntk_and_init_outputs_equal_reverse_mode_autograd():
    """Attention (``scaled_dot_product_attention``, whose fused CPU kernel has no forward-mode AD
    or vmap) inside the transforms: the ViT's empirical NTK and ``J theta_0`` equal those built from
    one plain ``torch.autograd.grad`` per output (the module's own forward, any kernel), float64,
    to 1e-9 relative."""
    from initmem.empirical.config import RunConfig
    from initmem.empirical.models import default_model

    config = RunConfig(dataset="cifar10-fixture", model="vit-tiny", width=0.125, device="cpu")
    model = default_model(config).double().eval()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    params = [p for p in model.parameters() if p.requires_grad]
    out = model(x)
    rows = [
        torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, params, retain_graph=True)])
        for value in out.reshape(-1)
    ]
    jac = torch.stack(rows).numpy()  # (outputs, parameters), rows ordered sample * k + output
    ntk = empirical_ntk(model, x, trace_outputs=False).ntk
    np.testing.assert_allclose(ntk, jac @ jac.T, rtol=1e-9, atol=1e-9 * np.abs(ntk).max())
    f0, jtheta = init_outputs(model, x)
    np.testing.assert_allclose(f0.reshape(-1), out.detach().numpy().reshape(-1), rtol=1e-12)
    expected = jac @ flat_parameters(model)
    np.testing.assert_allclose(
        jtheta.reshape(-1), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max()
    )
