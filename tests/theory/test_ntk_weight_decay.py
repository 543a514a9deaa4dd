"""Weight decay toward zero in the lazy regime: closed form against parameter-space simulation."""

import numpy as np
import pytest
import torch
from scipy.linalg import expm
from torch.func import functional_call, jvp

from initmem.theory.empirical_kernels import ReLUMLP, empirical_ntk, init_outputs
from initmem.theory.ntk import (
    forgetting_times,
    gradient_descent_mse,
    linearized_l2_mse,
)

N_TRAIN, N_TEST, N_PARAMS = 5, 3, 12

# torch's forward-mode AD loads decompositions through the deprecated torch.jit.script (torch 2.14).
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")


@pytest.fixture(scope="module")
def linear_model():
    """A linearized model f(x; theta) = g(x) + J(x) theta with P > n (a null space), random offset g."""
    rng = np.random.default_rng(0)
    jac = rng.standard_normal((N_TRAIN, N_PARAMS))
    jac_test = rng.standard_normal((N_TEST, N_PARAMS))
    return {
        "jac": jac,
        "jac_test": jac_test,
        "k": jac @ jac.T,
        "k_xX": jac_test @ jac.T,
        "theta0": rng.standard_normal((N_PARAMS, 2)),
        "g": rng.standard_normal((N_TRAIN, 2)),
        "g_test": rng.standard_normal((N_TEST, 2)),
        "y": rng.standard_normal((N_TRAIN, 2)),
    }


def _closed_form(m, outputs, lr, lam, t, discrete=False):
    cols = slice(0, outputs)
    squeeze = (lambda a: a[:, 0]) if outputs == 1 else (lambda a: a)
    u, u_test = m["jac"] @ m["theta0"][:, cols], m["jac_test"] @ m["theta0"][:, cols]
    f0, f0_test = m["g"][:, cols] + u, m["g_test"][:, cols] + u_test
    return linearized_l2_mse(
        m["k"],
        m["k_xX"],
        squeeze(m["y"][:, cols]),
        lr,
        lam,
        t,
        squeeze(f0),
        squeeze(f0_test),
        squeeze(u),
        squeeze(u_test),
        discrete=discrete,
    )


@pytest.mark.parametrize("outputs", [1, 2])
@pytest.mark.parametrize(("lam", "t"), [(0.3, 0.0), (0.3, 2.0), (0.3, 40.0), (0.02, 15.0)])
def test_gradient_flow_equals_parameter_space_expm(linear_model, outputs, lam, t):
    """d theta/ds = -(J^T J / N + lam) theta + J^T (y - g) / N, solved by expm of the affine system."""
    m, lr = linear_model, 0.7
    y = m["y"][:, :outputs]
    size = y.size
    gen = np.zeros((N_PARAMS + 1, N_PARAMS + 1))
    gen[:N_PARAMS, :N_PARAMS] = -(m["jac"].T @ m["jac"] / size + lam * np.eye(N_PARAMS))
    prop = expm(gen * lr * t)
    thetas = []
    for c in range(outputs):
        gen[:N_PARAMS, -1] = m["jac"].T @ (y[:, c] - m["g"][:, c]) / size
        prop = expm(gen * lr * t)
        thetas.append(prop @ np.append(m["theta0"][:, c], 1.0))
    theta = np.stack(thetas, axis=1)[:N_PARAMS]
    f_train = m["g"][:, :outputs] + m["jac"] @ theta
    f_test = m["g_test"][:, :outputs] + m["jac_test"] @ theta
    p_train, p_test = _closed_form(m, outputs, lr, lam, t)
    np.testing.assert_allclose(p_train.reshape(f_train.shape), f_train, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(p_test.reshape(f_test.shape), f_test, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("lr_lam", [0.01, 0.3])
@pytest.mark.parametrize("steps", [1, 30, 400])
def test_discrete_equals_parameter_iteration(linear_model, lr_lam, steps):
    m, lr = linear_model, 0.5
    lam = lr_lam / lr
    theta = m["theta0"].copy()
    for _ in range(steps):
        grad = m["jac"].T @ (m["g"] + m["jac"] @ theta - m["y"]) / m["y"].size + lam * theta
        theta = theta - lr * grad
    p_train, p_test = _closed_form(m, 2, lr, lam, steps, discrete=True)
    np.testing.assert_allclose(p_train, m["g"] + m["jac"] @ theta, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(p_test, m["g_test"] + m["jac_test"] @ theta, rtol=1e-9, atol=1e-9)


def test_infinite_time_is_kernel_ridge_regression_plus_offset(linear_model):
    m, lam = linear_model, 0.05
    size = m["y"].size
    coef = np.linalg.solve(m["k"] + size * lam * np.eye(N_TRAIN), m["y"] - m["g"])
    for discrete in (False, True):
        p_train, p_test = _closed_form(m, 2, 0.4, lam, np.inf, discrete=discrete)
        np.testing.assert_allclose(p_train, m["g"] + m["k"] @ coef, rtol=1e-10)
        np.testing.assert_allclose(p_test, m["g_test"] + m["k_xX"] @ coef, rtol=1e-10)


def test_zero_l2_reduces_to_gradient_descent_mse(linear_model):
    m = linear_model
    u = m["jac"] @ m["theta0"]
    f0, f0_test = m["g"] + u, m["g_test"] + m["jac_test"] @ m["theta0"]
    for t in (0.0, 3.0, np.inf):
        ref = gradient_descent_mse(m["k"], m["k_xX"], m["y"], 0.6, t, f0, f0_test)
        got = linearized_l2_mse(
            m["k"], m["k_xX"], m["y"], 0.6, 0.0, t, f0, f0_test, u, m["jac_test"] @ m["theta0"]
        )
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-12, atol=1e-12)


def test_torch_sgd_with_weight_decay_on_linearized_mlp_matches_closed_form():
    """torch.optim.SGD(weight_decay) on the torch.func linearization of a 2-output MLP, float64."""
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((N_TRAIN + N_TEST, 3)))
    y = torch.tensor(rng.standard_normal((N_TRAIN, 2)))
    net = ReLUMLP(3, 16, 1, out_dim=2, W_std=1.4, b_std=0.3, seed=2)
    params0 = {k: p.detach().clone() for k, p in net.named_parameters()}

    def f_lin(params, inputs):
        delta = {k: params[k] - params0[k] for k in params}
        out0, change = jvp(lambda q: functional_call(net, q, (inputs,)), (params0,), (delta,))
        return out0 + change

    params = {k: p.clone().requires_grad_(True) for k, p in params0.items()}
    lr, lam, steps = 0.4, 0.05, 150
    opt = torch.optim.SGD(params.values(), lr=lr, weight_decay=lam)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((f_lin(params, x[:N_TRAIN]) - y) ** 2).sum() / (2 * y.numel())
        loss.backward()
        opt.step()
    with torch.no_grad():
        simulated = f_lin(params, x).numpy()

    kernel = empirical_ntk(net, x, trace_outputs=False).ntk  # (n*k, n*k): exact for 2 outputs
    f0, jtheta0 = init_outputs(net, x)
    rows = 2 * N_TRAIN
    p_train, p_test = linearized_l2_mse(
        kernel[:rows, :rows],
        kernel[rows:, :rows],
        y.numpy().reshape(-1),
        lr,
        lam,
        steps,
        f0[:N_TRAIN].reshape(-1),
        f0[N_TRAIN:].reshape(-1),
        jtheta0[:N_TRAIN].reshape(-1),
        jtheta0[N_TRAIN:].reshape(-1),
        discrete=True,
    )
    np.testing.assert_allclose(p_train.reshape(-1, 2), simulated[:N_TRAIN], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(p_test.reshape(-1, 2), simulated[N_TRAIN:], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("discrete", [False, True])
def test_forgetting_times_match_simulated_decay(linear_model, discrete):
    """Two inits that agree on the training outputs (they differ in the null space of J): their test
    predictions differ by a factor exp(-t / null_space_steps); training modes decay per mode_steps."""
    m, lr, lam, steps = linear_model, 0.3, 0.04, 60
    null_basis = np.linalg.svd(m["jac"])[2][N_TRAIN:].T  # (P, P - n), J @ null_basis = 0
    delta = null_basis @ np.random.default_rng(3).standard_normal(N_PARAMS - N_TRAIN)
    y, g = m["y"][:, 0], m["g"][:, 0]
    size = y.size

    def run(theta):
        hist = [theta]
        for _ in range(steps):
            if discrete:
                theta = theta - lr * (m["jac"].T @ (g + m["jac"] @ theta - y) / size + lam * theta)
            else:  # exact gradient flow over one unit of t (continuous time lr)
                gen = np.zeros((N_PARAMS + 1, N_PARAMS + 1))
                gen[:N_PARAMS, :N_PARAMS] = -(m["jac"].T @ m["jac"] / size + lam * np.eye(N_PARAMS))
                gen[:N_PARAMS, -1] = m["jac"].T @ (y - g) / size
                theta = (expm(gen * lr) @ np.append(theta, 1.0))[:N_PARAMS]
            hist.append(theta)
        return np.array(hist)

    theta_a = run(m["theta0"][:, 0])
    theta_b = run(m["theta0"][:, 0] + delta)
    times = forgetting_times(m["k"], lr, lam, discrete=discrete)
    gap = (theta_b - theta_a) @ m["jac_test"].T
    measured = -steps / np.log(np.linalg.norm(gap[-1]) / np.linalg.norm(gap[0]))
    np.testing.assert_allclose(measured, times.null_space_steps, rtol=1e-7)
    assert times.forgetting_steps == times.null_space_steps

    # Training outputs: eigenmode i of f_X(t) - f_X(inf) shrinks by exp(-t / mode_steps[i]).
    f_train = g + theta_a @ m["jac"].T
    f_inf = _closed_form(m, 1, lr, lam, np.inf)[0]
    evecs = np.linalg.eigh(m["k"])[1][:, ::-1]  # descending, as times.eigenvalues
    proj = (f_train - f_inf) @ evecs
    measured_modes = -10 / np.log(np.abs(proj[10] / proj[0]))
    np.testing.assert_allclose(measured_modes, times.mode_steps, rtol=1e-6)


def test_forgetting_times_closed_forms():
    k = np.diag([4.0, 1.0])
    flow = forgetting_times(k, lr=0.1, l2=0.5)
    np.testing.assert_allclose(flow.eigenvalues, [4.0, 1.0])
    np.testing.assert_allclose(flow.mode_steps, [1 / (0.1 * (0.5 + 2.0)), 1 / (0.1 * (0.5 + 0.5))])
    assert flow.null_space_steps == pytest.approx(20.0)
    assert forgetting_times(k, lr=0.1).null_space_steps == np.inf
    steps = forgetting_times(k, lr=0.1, l2=0.5, discrete=True)
    assert steps.null_space_steps == pytest.approx(-1 / np.log(0.95))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"l2": -1.0}, "l2"),
        ({"l2": 3.0, "discrete": True}, "lr \\* l2"),
        ({"jtheta0_train": np.ones(3)}, "jtheta0_train"),
        ({"t": 1.5, "discrete": True}, "steps"),
    ],
)
def test_bad_l2_inputs(linear_model, kwargs, name):
    m = linear_model
    args = {
        "k_train_train": m["k"],
        "k_test_train": m["k_xX"],
        "y_train": m["y"][:, 0],
        "lr": 0.5,
        "l2": 0.1,
        "t": 2.0,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        linearized_l2_mse(**args)
    with pytest.raises(ValueError, match="lr"):
        forgetting_times(m["k"], lr=-1.0)


def test_forgetting_times_empty_kernel_and_divergence():
    k = np.diag([4.0, 1.0])
    with pytest.raises(TypeError):  # coupled L2 is l2; the old alias is gone
        forgetting_times(k, lr=0.1, weight_decay=0.5, discrete=True)
    with pytest.raises(ValueError, match="empty"):
        forgetting_times(np.zeros((0, 0)), lr=0.1)
    # lr = 1.2 on w / N = 2: |1 - 2.4| > 1 diverges; linear.forgetting_times raises there too.
    with pytest.raises(ValueError, match=r"diverges.*w_max / N\) = 1$"):
        forgetting_times(k, lr=1.2, discrete=True)
    assert forgetting_times(k, lr=1.0, discrete=True).mode_steps[0] == np.inf  # |1 - 2| = 1
