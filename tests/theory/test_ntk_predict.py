"""Closed-form lazy-regime predictors against independent computations.

References: neural-tangents' ``predict`` (to 1e-6, float64), matrix exponentials of the linear ODEs
(scipy ``expm``), explicit step-by-step iteration, and Monte Carlo over Gaussian initial functions.
"""

import numpy as np
import pytest
from scipy.linalg import expm

from initmem.theory.kernels import Kernel, relu_mlp_kernel
from initmem.theory.ntk import (
    gradient_descent_mse,
    gradient_descent_mse_discrete,
    gradient_descent_mse_ensemble,
    memory_term,
    memory_variance,
)

N_TRAIN, N_TEST, DIM = 8, 5, 6
DEPTH, W_STD, B_STD = 2, 1.5, 0.2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_TRAIN + N_TEST, DIM))
    kernel = relu_mlp_kernel(x, depth=DEPTH, W_std=W_STD, b_std=B_STD)
    return {
        "x_train": x[:N_TRAIN],
        "x_test": x[N_TRAIN:],
        "k": kernel,
        "k_dd": kernel[:N_TRAIN, :N_TRAIN],
        "k_td": kernel[N_TRAIN:, :N_TRAIN],
        "k_tt": kernel[N_TRAIN:, N_TRAIN:],
        "y1": rng.standard_normal(N_TRAIN),
        "y2": rng.standard_normal((N_TRAIN, 3)),
        "f0_train2": rng.standard_normal((N_TRAIN, 3)),
        "f0_test2": rng.standard_normal((N_TEST, 3)),
        "f0_train1": rng.standard_normal(N_TRAIN),
        "f0_test1": rng.standard_normal(N_TEST),
    }


@pytest.fixture(scope="module")
def nt():
    """neural-tangents with float64 JAX (initmem imported first: see kernels._preload_triton)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return pytest.importorskip("neural_tangents")


def _close(ours, ref, tol=1e-6):
    ref = np.asarray(ref)
    np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol * max(1.0, np.max(np.abs(ref))))


# ---------------------------------------------------------------- against neural-tangents


@pytest.mark.parametrize("outputs", [1, 3])
def test_gradient_descent_mse_matches_neural_tangents(nt, data, outputs):
    lr = 1.3
    y = data["y1"] if outputs == 1 else data["y2"]
    f0_tr = data["f0_train1"] if outputs == 1 else data["f0_train2"]
    f0_te = data["f0_test1"] if outputs == 1 else data["f0_test2"]
    predict = nt.predict.gradient_descent_mse(
        data["k_dd"].ntk, y, learning_rate=lr, trace_axes=() if outputs == 1 else (-1,)
    )
    for t in (0.0, 0.7, 5.0, 60.0, np.inf):
        ref_tr, ref_te = predict(None if np.isinf(t) else t, f0_tr, f0_te, data["k_td"].ntk)
        f_tr, f_te = gradient_descent_mse(
            data["k_dd"].ntk, data["k_td"].ntk, y, lr, t, f0_tr, f0_te
        )
        _close(f_tr, ref_tr)
        _close(f_te, ref_te)


def test_gradient_descent_mse_array_of_times_matches_neural_tangents(nt, data):
    t = np.array([[0.5, 2.0], [10.0, 30.0]])
    predict = nt.predict.gradient_descent_mse(data["k_dd"].ntk, data["y2"], learning_rate=0.4)
    ref_tr, ref_te = predict(t, data["f0_train2"], data["f0_test2"], data["k_td"].ntk)
    f_tr, f_te = gradient_descent_mse(
        data["k_dd"].ntk, data["k_td"].ntk, data["y2"], 0.4, t, data["f0_train2"], data["f0_test2"]
    )
    assert f_tr.shape == (2, 2, N_TRAIN, 3) and f_te.shape == (2, 2, N_TEST, 3)
    _close(f_tr, ref_tr)
    _close(f_te, ref_te)


@pytest.mark.parametrize("get", ["ntk", "nngp"])
@pytest.mark.parametrize("on_test", [False, True])
def test_ensemble_matches_neural_tangents(nt, data, get, on_test):
    from initmem.theory.kernels import relu_mlp_stax

    lr = 0.9
    _, _, kernel_fn = relu_mlp_stax(DEPTH, W_STD, B_STD)
    predict = nt.predict.gradient_descent_mse_ensemble(
        kernel_fn, data["x_train"], data["y2"], learning_rate=lr
    )
    for t in (0.5, 8.0, np.inf):
        ref = predict(
            None if np.isinf(t) else t, data["x_test"] if on_test else None, get, compute_cov=True
        )
        ours = gradient_descent_mse_ensemble(
            data["k_dd"],
            data["y2"],
            lr,
            t,
            data["k_td"] if on_test else None,
            data["k_tt"].nngp if on_test else None,
            get=get,
        )
        _close(ours.mean, ref.mean)
        _close(ours.cov, ref.covariance)


# ---------------------------------------------------------------- against direct computation


@pytest.mark.parametrize("t", [0.0, 0.3, 4.0, 25.0])
def test_gradient_flow_equals_matrix_exponential(data, t):
    """Integrate d[f_X, f_x]/ds = -[K; K_xX](f_X - y)/N exactly with expm of the augmented system."""
    lr, y = 0.8, data["y1"]
    k, k_xX = data["k_dd"].ntk, data["k_td"].ntk
    n, m = N_TRAIN, N_TEST
    gen = np.zeros((n + m + 1, n + m + 1))
    gen[:n, :n] = -k / n
    gen[n : n + m, :n] = -k_xX / n
    gen[:n, -1] = k @ y / n
    gen[n : n + m, -1] = k_xX @ y / n
    z0 = np.concatenate([data["f0_train1"], data["f0_test1"], [1.0]])
    z = expm(gen * lr * t) @ z0
    f_tr, f_te = gradient_descent_mse(k, k_xX, y, lr, t, data["f0_train1"], data["f0_test1"])
    np.testing.assert_allclose(f_tr, z[:n], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(f_te, z[n : n + m], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("steps", [0, 1, 7, 200])
@pytest.mark.parametrize("step_scale", [0.3, 1.5])  # lr * lambda_max / N; 1.5 oscillates
def test_discrete_equals_step_by_step(data, steps, step_scale):
    k, k_xX, y = data["k_dd"].ntk, data["k_td"].ntk, data["y2"]
    lr = step_scale * y.size / np.linalg.eigvalsh(k)[-1]
    f_tr, f_te = data["f0_train2"].copy(), data["f0_test2"].copy()
    for _ in range(steps):
        residual = f_tr - y
        f_tr, f_te = f_tr - lr * k @ residual / y.size, f_te - lr * k_xX @ residual / y.size
    p_tr, p_te = gradient_descent_mse_discrete(
        k, k_xX, y, lr, steps, data["f0_train2"], data["f0_test2"]
    )
    np.testing.assert_allclose(p_tr, f_tr, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(p_te, f_te, rtol=1e-9, atol=1e-9)


def test_discrete_converges_to_gradient_flow_limit(data):
    k, k_xX, y = data["k_dd"].ntk, data["k_td"].ntk, data["y1"]
    lr = 1.0 * y.size / np.linalg.eigvalsh(k)[-1]
    flow = gradient_descent_mse(k, k_xX, y, lr, np.inf, data["f0_train1"], data["f0_test1"])
    steps = gradient_descent_mse_discrete(
        k, k_xX, y, lr, np.inf, data["f0_train1"], data["f0_test1"]
    )
    np.testing.assert_allclose(steps[1], flow[1], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(steps[0], y, atol=1e-12)


def test_singular_kernel_keeps_null_modes_at_infinite_time():
    """A rank-deficient K: the modes it cannot see stay at f0 - y; test points use the range only."""
    rng = np.random.default_rng(3)
    jac = rng.standard_normal((6, 3))  # rank 3 < 6 training points
    jac_test = rng.standard_normal((2, 3))
    k, k_xX = jac @ jac.T, jac_test @ jac.T
    y, f0, f0_test = rng.standard_normal(6), rng.standard_normal(6), rng.standard_normal(2)
    f_tr, f_te = gradient_descent_mse(k, k_xX, y, 1.0, np.inf, f0, f0_test)
    long_tr, long_te = gradient_descent_mse(k, k_xX, y, 1.0, 1e6, f0, f0_test)
    np.testing.assert_allclose(f_tr, long_tr, atol=1e-8)
    np.testing.assert_allclose(f_te, long_te, atol=1e-8)
    proj = jac @ np.linalg.pinv(jac)
    np.testing.assert_allclose(f_tr, y + (np.eye(6) - proj) @ (f0 - y), atol=1e-10)


def test_ensemble_covariance_matches_monte_carlo(data):
    """Draw f0 ~ GP(0, NNGP) on train and test inputs, train each draw, compare moments at 4 sigma."""
    rng = np.random.default_rng(1)
    samples, lr, t = 20000, 0.9, 6.0
    s = data["k"].nngp
    f0 = np.linalg.cholesky(s + 1e-12 * np.eye(len(s))) @ rng.standard_normal((len(s), samples))
    y = np.repeat(data["y1"][:, None], samples, axis=1)
    # y of shape (n, S) sets N = n * S: rescale lr so every column sees the single-output time scale.
    _, f_te = gradient_descent_mse(
        data["k_dd"].ntk, data["k_td"].ntk, y, lr * samples, t, f0[:N_TRAIN], f0[N_TRAIN:]
    )
    gauss = gradient_descent_mse_ensemble(
        data["k_dd"], data["y1"], lr, t, data["k_td"], data["k_tt"].nngp
    )
    sd = np.sqrt(np.diag(gauss.cov))
    np.testing.assert_array_less(np.abs(f_te.mean(axis=1) - gauss.mean), 4 * sd / np.sqrt(samples))
    mc_cov = np.cov(f_te)
    scale = np.outer(sd, sd)
    # Standard error of a sample covariance entry is at most ~ sqrt(2) sd_i sd_j / sqrt(S).
    np.testing.assert_array_less(
        np.abs(mc_cov - gauss.cov), 4 * np.sqrt(2) * scale / np.sqrt(samples)
    )


# ---------------------------------------------------------------- memory of the initialization


def test_memory_term_is_the_whole_init_dependence(data):
    k, k_xX = data["k_dd"].ntk, data["k_td"].ntk
    rng = np.random.default_rng(2)
    f0_tr, f0_te = data["f0_train1"], data["f0_test1"]
    mem = memory_term(k, k_xX, f0_tr, f0_te)
    np.testing.assert_allclose(mem, f0_te - k_xX @ np.linalg.solve(k, f0_tr), rtol=1e-10)
    # Any f0 that agrees with this one on the training inputs has the same trained train outputs, and
    # trained test outputs that differ by exactly the difference of the memory terms.
    other_te = f0_te + rng.standard_normal(N_TEST)
    a = gradient_descent_mse(k, k_xX, data["y1"], 1.0, np.inf, f0_tr, f0_te)[1]
    b = gradient_descent_mse(k, k_xX, data["y1"], 1.0, np.inf, f0_tr, other_te)[1]
    np.testing.assert_allclose(b - a, memory_term(k, k_xX, f0_tr, other_te) - mem, atol=1e-12)
    np.testing.assert_allclose(memory_term(k, k, f0_tr, f0_tr), 0.0, atol=1e-10)


def test_memory_variance_matches_monte_carlo_and_scales_as_alpha_squared(data):
    rng = np.random.default_rng(4)
    samples = 20000
    s = data["k"].nngp
    draws = np.linalg.cholesky(s + 1e-12 * np.eye(len(s))) @ rng.standard_normal((len(s), samples))
    k_dd, k_td, k_tt = data["k_dd"], data["k_td"], data["k_tt"]
    base = memory_variance(k_dd, k_td, k_tt.nngp)
    assert np.all(base > 0)
    np.testing.assert_allclose(memory_variance(k_dd, k_td, np.diag(k_tt.nngp)), base, rtol=1e-12)
    for alpha in (0.25, 1.0, 4.0):
        mem = memory_term(k_dd.ntk, k_td.ntk, alpha * draws[:N_TRAIN], alpha * draws[N_TRAIN:])
        var_mc = mem.var(axis=1)
        predicted = memory_variance(k_dd, k_td, k_tt.nngp, alpha=alpha)
        np.testing.assert_allclose(predicted, alpha**2 * base, rtol=1e-12)
        # Relative standard error of a Gaussian sample variance: sqrt(2 / S) ~ 1%; allow 5 sigma.
        np.testing.assert_allclose(var_mc, predicted, rtol=5 * np.sqrt(2 / samples))


def test_memory_variance_is_ensemble_covariance_at_infinity(nt, data):
    from initmem.theory.kernels import relu_mlp_stax

    _, _, kernel_fn = relu_mlp_stax(DEPTH, W_STD, B_STD)
    predict = nt.predict.gradient_descent_mse_ensemble(
        kernel_fn, data["x_train"], data["y1"][:, None]
    )
    ref = predict(None, data["x_test"], "ntk", compute_cov=True)
    ours = memory_variance(data["k_dd"], data["k_td"], data["k_tt"].nngp, alpha=2.0)
    _close(ours, 4.0 * np.diag(ref.covariance))


# ---------------------------------------------------------------- bad inputs


def _kernels():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 6))
    return a @ a.T, rng.standard_normal((2, 4)), rng.standard_normal(4)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"lr": -0.1}, "lr"),
        ({"lr": np.nan}, "lr"),
        ({"t": -1.0}, "t"),
        ({"t": np.array([1.0, np.nan])}, "t"),
        ({"k_train_train": -np.eye(4)}, "positive semi-definite"),
        ({"k_train_train": np.triu(np.ones((4, 4)))}, "symmetric"),
        ({"k_train_train": np.eye(3)}, "k_train_train"),
        ({"k_test_train": np.ones((2, 3))}, "k_test_train"),
        ({"y_train": np.ones((4, 2, 2))}, "y_train"),
        ({"f0_train": np.ones(5)}, "f0_train"),
        ({"f0_test": np.ones(3)}, "f0_test"),
        ({"y_train": np.array([0.0, np.inf, 1.0, 2.0])}, "y_train"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(change, name):
    k, k_xX, y = _kernels()
    args = {"k_train_train": k, "k_test_train": k_xX, "y_train": y, "lr": 0.5, "t": 2.0}
    args.update(change)
    with pytest.raises(ValueError, match=name):
        gradient_descent_mse(**args)


def test_bad_discrete_inputs():
    k, k_xX, y = _kernels()
    with pytest.raises(ValueError, match="steps"):
        gradient_descent_mse_discrete(k, k_xX, y, 0.1, 2.5)
    big_lr = 2.5 * y.size / np.linalg.eigvalsh(k)[-1]
    with pytest.raises(ValueError, match="too large"):
        gradient_descent_mse_discrete(k, k_xX, y, big_lr, np.inf)
    k_dd = Kernel(nngp=k, ntk=k)
    with pytest.raises(ValueError, match="get"):
        gradient_descent_mse_ensemble(k_dd, y, 0.1, 1.0, get="both")
    with pytest.raises(ValueError, match="nngp_test_test"):
        gradient_descent_mse_ensemble(k_dd, y, 0.1, 1.0, Kernel(nngp=k_xX, ntk=k_xX))
