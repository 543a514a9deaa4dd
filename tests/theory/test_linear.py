"""Closed forms of initmem.theory.linear against direct simulation (float64).

Tolerances: exact discrete identities 1e-10 to 1e-12; asymptotic rates measured over a long
horizon 1e-3 relative; gradient-flow limits by their first-order convergence.
"""

import math

import numpy as np
import pytest

from initmem.theory import linear
from initmem.theory.simulate import (
    adam_null_space_forgetting,
    measured_forgetting_step,
    simulate_adam_least_squares,
    simulate_least_squares,
)


def random_problem(n=6, d=10, seed=0):
    """Underdetermined least squares (null space of dimension d - n) with a spread spectrum."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.linspace(0.3, 1.5, d) / math.sqrt(d)
    y = rng.standard_normal(n)
    w0_draw = rng.standard_normal(d)
    return X, y, w0_draw


def diagonal_problem(variances=(0.05, 0.2, 0.5, 1.0, 1.5), null_dims=2):
    """X with orthogonal columns: H = diag(variances, 0, ...) exactly, so every coordinate of w is an
    eigendirection and its contraction can be followed far below rounding of the others."""
    n = len(variances)
    X = np.zeros((n, n + null_dims))
    X[np.arange(n), np.arange(n)] = np.sqrt(np.asarray(variances) * n)
    return X, np.diag(X.T @ X / n)


def times_for(h, lr, l2, momentum, decoupled):
    if decoupled:
        return linear.forgetting_times(h, lr, momentum=momentum, weight_decay=l2)
    return linear.forgetting_times(h, lr, l2, momentum)


def decay_kwargs(l2, decoupled):
    return {"weight_decay" if decoupled else "l2": l2}


# ---------------------------------------------------------------------------------------------
# Per-direction forgetting times


@pytest.mark.parametrize("lr,l2", [(0.5, 0.0), (1.0, 0.01), (1.9, 0.05), (0.05, 0.1)])
def test_gd_contraction_is_exactly_rho_to_the_t(lr, l2):
    X, y, w0_draw = random_problem()
    h, V = linear.hessian_eigh(X)
    w0 = w0_draw
    # the init component: difference of the runs from w0 and from 0 (the iteration is affine)
    T = 40
    with_init = simulate_least_squares(X, y, w0, lr, T, l2=l2).weights
    from_zero = simulate_least_squares(X, y, 0 * w0, lr, T, l2=l2).weights
    measured = (with_init - from_zero) @ V / (V.T @ w0)
    exact = (1.0 - lr * (h + l2))[None, :] ** np.arange(T + 1)[:, None]
    np.testing.assert_allclose(measured, exact, rtol=0, atol=1e-12)
    closed = linear.init_contraction(X, lr, T, l2=l2)
    np.testing.assert_allclose(closed, exact[-1], rtol=0, atol=1e-14)
    times = linear.forgetting_times(X, lr, l2)
    rho = np.abs(1.0 - lr * (h + l2))
    with np.errstate(divide="ignore"):
        expected = np.where(rho < 1, -1.0 / np.log(rho), np.inf)
    np.testing.assert_allclose(times, expected, rtol=1e-12)
    assert np.all(np.isinf(times[h == 0])) == (l2 == 0)


@pytest.mark.parametrize(
    "lr,momentum,l2,decoupled",
    [
        (0.5, 0.9, 0.0, False),  # underdamped: every data direction at -1/ln(sqrt(0.9)) steps
        (1.5, 0.5, 0.01, False),
        (0.2, 0.5, 0.05, False),  # overdamped (real roots) on the small eigenvalues
        (1.0, 0.3, 0.01, True),
        (0.3, 0.9, 0.05, True),
        (1.0, 0.0, 0.01, False),
    ],
)
def test_forgetting_times_match_measured_rate(lr, momentum, l2, decoupled):
    """-1/ln(rho) against the decay rate of the simulated init component, fitted over a horizon
    where it shrinks from e^-150 to e^-300 (diagonal data: no rounding from other directions)."""
    X, h = diagonal_problem()
    n, d = X.shape
    times = times_for(h, lr, l2, momentum, decoupled)
    finite = np.isfinite(times)
    horizon = int(np.ceil(300 * times[finite].max()))
    run = simulate_least_squares(
        X,
        np.zeros(n),
        np.ones(d),
        lr,
        horizon,
        momentum=momentum,
        **decay_kwargs(l2, decoupled),
    )
    c = run.weights  # init component per direction, c_0 = 1
    state = np.hypot(c[1:], c[:-1])  # |(c_t, c_{t-1})|: the 2-D state's size
    for k in np.flatnonzero(finite):
        start, stop = max(int(150 * times[k]), 1), max(int(300 * times[k]), 3)
        t = np.arange(start, stop)
        slope = np.polyfit(t, np.log(state[start:stop, k]), 1)[0]
        assert -1.0 / slope == pytest.approx(times[k], rel=1e-3)
    # directions that are never forgotten keep their init component exactly
    np.testing.assert_array_equal(c[:, ~finite], 1.0)
    # and the exact matrix-power contraction follows the simulation step by step
    for T in (1, 2, 7, 60):
        closed = linear.init_contraction(h, lr, T, momentum=momentum, **decay_kwargs(l2, decoupled))
        np.testing.assert_allclose(closed, c[T], rtol=1e-10, atol=1e-14)


def test_torch_sgd_pins_the_momentum_and_l2_convention():
    """torch.optim.SGD (float64 linear model) against the closed-form w_T, at several T."""
    torch = pytest.importorskip("torch")
    X, y, w0_draw = random_problem()
    n, d = X.shape
    lr, momentum, l2, alpha = 0.7, 0.8, 0.03, 1.7
    w = torch.nn.Parameter(torch.tensor(alpha * w0_draw, dtype=torch.float64))
    Xt, yt = torch.tensor(X), torch.tensor(y)
    opt = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=l2)
    checkpoints = {1, 2, 3, 10, 57}
    for step in range(1, max(checkpoints) + 1):
        opt.zero_grad()
        loss = ((Xt @ w - yt) ** 2).sum() / (2 * n)
        loss.backward()
        opt.step()
        if step in checkpoints:
            closed = linear.predictor_init_dependence(
                X, y, w0_draw, lr, step, momentum=momentum, l2=l2
            )
            np.testing.assert_allclose(
                w.detach().numpy(), closed.weights(alpha), rtol=0, atol=1e-12
            )
    numpy_run = simulate_least_squares(
        X, y, alpha * w0_draw, lr, max(checkpoints), momentum=momentum, l2=l2
    )
    np.testing.assert_allclose(numpy_run.weights[-1], w.detach().numpy(), rtol=0, atol=1e-13)


def test_companion_matrix_spectral_radius():
    """The (w_t, u_t) iteration has the spectrum of the companion matrix of the issue."""
    h = np.array([0.0, 0.01, 0.3, 1.0, 2.5])
    lr, momentum, l2 = 0.6, 0.7, 0.02
    companion = np.zeros((h.size, 2, 2))
    companion[:, 0, 0] = 1 + momentum - lr * (h + l2)
    companion[:, 0, 1] = -momentum
    companion[:, 1, 0] = 1.0
    rho = np.abs(np.linalg.eigvals(companion)).max(axis=1)
    got = linear.spectral_radii(h, lr, l2, momentum)
    np.testing.assert_allclose(got, rho, rtol=1e-12)
    np.testing.assert_allclose(
        linear.forgetting_times(h, lr, l2, momentum), -1 / np.log(rho), rtol=1e-10
    )


@pytest.mark.parametrize(
    "momentum,l2,decoupled",
    [(0.0, 0.0, False), (0.0, 0.05, False), (0.9, 0.05, False), (0.9, 0.05, True)],
)
def test_gradient_flow_limit_is_first_order(momentum, l2, decoupled):
    h = np.array([0.0, 0.02, 0.3, 1.0])
    rate = (h + (0 if decoupled else l2)) / (1 - momentum) + (l2 if decoupled else 0)
    keep = rate > 0
    errors = []
    # heavy ball reaches its flow limit only when overdamped: lr (h + lambda) << (1 - sqrt(mu))^2
    base = 1e-2 * (1 - math.sqrt(momentum)) ** 2
    for lr in (base, base / 2, base / 4):
        continuous = lr * times_for(h, lr, l2, momentum, decoupled)
        flow_steps = linear.flow_forgetting_times(
            h, lr, momentum=momentum, **decay_kwargs(l2, decoupled)
        )
        np.testing.assert_allclose(lr * flow_steps[keep], 1 / rate[keep], rtol=1e-12)
        assert np.all(np.isinf(flow_steps[~keep])) and np.all(np.isinf(continuous[~keep]))
        errors.append(np.abs(continuous[keep] * rate[keep] - 1))
    ratios = errors[0] / errors[1], errors[1] / errors[2]
    for ratio in ratios:
        np.testing.assert_allclose(ratio, 2.0, rtol=0.03)  # error O(lr): order 1
    assert np.all(errors[-1] < 0.02)


def test_accuracy_near_rho_one():
    """Tiny rates keep full relative precision (log1p path): -1/ln(1 - x) = 1/x - 1/2 + O(x)."""
    x = np.array([1e-9, 1e-12, 1e-15])
    times = linear.forgetting_times(x, lr=1.0)
    np.testing.assert_allclose(times, 1 / x - 0.5, rtol=1e-12)
    with_momentum = linear.forgetting_times(x, lr=1.0, momentum=0.5)
    np.testing.assert_allclose(with_momentum, 0.5 / x, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# The null space


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_null_space_kept_without_decay_forgotten_with_it(momentum):
    X, y, w0_draw = random_problem()
    P = linear.null_space_projector(X)
    assert np.linalg.matrix_rank(P) == X.shape[1] - X.shape[0]
    lr, wd, T = 0.5, 0.02, 400
    kept = simulate_least_squares(X, y, w0_draw, lr, T, momentum=momentum).weights @ P
    np.testing.assert_allclose(kept, np.broadcast_to(kept[0], kept.shape), rtol=0, atol=1e-12)
    assert linear.null_space_forgetting_time(lr, momentum=momentum) == math.inf

    decoupled = (
        simulate_least_squares(X, y, w0_draw, lr, T, momentum=momentum, weight_decay=wd).weights @ P
    )
    expected = (1 - lr * wd) ** np.arange(T + 1)[:, None] * decoupled[0]
    np.testing.assert_allclose(decoupled, expected, rtol=0, atol=1e-12)
    tau = linear.null_space_forgetting_time(lr, momentum=momentum, weight_decay=wd)
    assert tau == pytest.approx(-1 / math.log1p(-lr * wd), rel=1e-12)
    assert measured_forgetting_step(np.arange(T + 1), decoupled) == math.ceil(tau)

    wd = 0.0005  # lr * wd << (1 - sqrt(momentum))^2: overdamped, where the flow limit holds
    coupled = simulate_least_squares(X, y, w0_draw, lr, T, momentum=momentum, l2=wd).weights @ P
    c = np.array([linear.init_contraction([0.0], lr, t, wd, momentum)[0] for t in range(T + 1)])
    np.testing.assert_allclose(coupled, c[:, None] * coupled[0], rtol=0, atol=1e-12)
    tau = linear.null_space_forgetting_time(lr, wd, momentum)
    assert tau == pytest.approx((1 - momentum) / (lr * wd), rel=0.05)


@pytest.mark.parametrize(
    "lr,batch_size,momentum", [(0.05, 1, 0.0), (0.3, 2, 0.0), (0.5, 3, 0.9), (1.0, 6, 0.5)]
)
def test_minibatch_sgd_never_changes_null_space(lr, batch_size, momentum):
    X, y, w0_draw = random_problem()
    P = linear.null_space_projector(X)
    run = simulate_least_squares(
        X, y, w0_draw, lr, 500, batch_size=batch_size, momentum=momentum, seed=batch_size
    )
    null = run.weights @ P
    assert np.max(np.abs(null - null[0])) <= 1e-12
    assert np.linalg.norm(run.weights[-1] - run.weights[0]) > 0.1  # it did train


# ---------------------------------------------------------------------------------------------
# Adam (no closed form): moves the null-space component


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_simulator_matches_torch(weight_decay):
    torch = pytest.importorskip("torch")
    X, y, w0_draw = random_problem()
    n = X.shape[0]
    lr, T = 0.01, 25
    w = torch.nn.Parameter(torch.tensor(w0_draw))
    opt = torch.optim.AdamW([w], lr=lr, weight_decay=weight_decay)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    for _ in range(T):
        opt.zero_grad()
        (((Xt @ w - yt) ** 2).sum() / (2 * n)).backward()
        opt.step()
    ours = simulate_adam_least_squares(X, y, w0_draw, lr, T, weight_decay=weight_decay)
    np.testing.assert_allclose(ours.weights[-1], w.detach().numpy(), rtol=0, atol=1e-13)


def test_adam_moves_the_null_space_component():
    X, y, w0_draw = random_problem(n=10, d=30, seed=1)
    P = linear.null_space_projector(X)
    lr, eps = 1e-3, 1e-8
    run = simulate_adam_least_squares(X, y, w0_draw, lr, 500, eps=eps)
    null = run.weights @ P
    g0 = X.T @ (X @ w0_draw - y) / X.shape[0]
    first_step = lr * P @ (g0 / (np.abs(g0) + eps))
    np.testing.assert_allclose(null[1] - null[0], -first_step, rtol=0, atol=1e-15)
    moved = np.linalg.norm(null[-1] - null[0]) / np.linalg.norm(null[0])
    assert moved > 0.1  # SGD: exactly 0 (test above)


def test_adam_forgetting_time_scales_like_alpha_over_lr():
    """Measured null-space forgetting steps t: t * lr / alpha constant across lr (Adam's steps
    have size ~lr per coordinate), and within 40% of the first-step-speed heuristic."""
    X, y, w0_draw = random_problem(n=10, d=30, seed=1)
    table = adam_null_space_forgetting(
        X, y, w0_draw, alphas=[0.1, 0.3], lrs=[1e-3, 3e-3, 1e-2], steps=400
    )
    assert np.all(np.isfinite(table.measured_steps))
    scaled = table.measured_steps * table.lr / table.alpha
    assert scaled.max() / scaled.min() < 1.15
    ratio = table.measured_steps / table.heuristic_steps
    assert np.all((ratio > 0.7) & (ratio < 1.4))


# ---------------------------------------------------------------------------------------------
# The trained predictor: f_T(x) = data part + alpha * init part


@pytest.mark.parametrize("steps", [0, 1, 25, 300])
@pytest.mark.parametrize(
    "l2,momentum,weight_decay",
    [(0.0, 0.0, 0.0), (0.05, 0.0, 0.0), (0.02, 0.9, 0.0), (0.0, 0.5, 0.03)],
)
def test_predictor_is_affine_in_alpha_at_step_t(steps, l2, momentum, weight_decay):
    X, y, w0_draw = random_problem()
    x_query = np.random.default_rng(7).standard_normal((5, X.shape[1]))
    lr = 0.8
    closed = linear.predictor_init_dependence(
        X,
        y,
        w0_draw,
        lr,
        steps,
        x_query=x_query,
        l2=l2,
        momentum=momentum,
        weight_decay=weight_decay,
    )
    for alpha in (0.0, 1.0, -2.5):
        run = simulate_least_squares(
            X,
            y,
            alpha * w0_draw,
            lr,
            steps,
            l2=l2,
            momentum=momentum,
            weight_decay=weight_decay,
        )
        np.testing.assert_allclose(x_query @ run.weights[-1], closed.predict(alpha), atol=1e-10)


def test_predictor_at_infinity_keeps_the_null_space_on_test_points_only():
    """T = inf, no decay: the init part is the null-space projection of the init; it vanishes on
    the training inputs (fitting) but not on test inputs (not forgetting). With decay it is 0."""
    X, y, w0_draw = random_problem()
    x_query = np.random.default_rng(7).standard_normal((5, X.shape[1]))
    lr = 1.0
    limit = linear.predictor_init_dependence(X, y, w0_draw, lr, np.inf, x_query=x_query)
    P = linear.null_space_projector(X)
    np.testing.assert_allclose(limit.init_part, x_query @ P @ w0_draw, atol=1e-12)
    train = linear.predictor_init_dependence(X, y, w0_draw, lr, np.inf)
    np.testing.assert_allclose(train.init_part, 0.0, atol=1e-12)
    np.testing.assert_allclose(train.data_part, y, atol=1e-10)  # interpolation
    assert np.linalg.norm(limit.init_part) > 0.5
    h = linear.hessian_eigh(X)[0]
    horizon = int(60 * linear.forgetting_times(h[h > 0], lr).max())
    for alpha in (0.0, 3.0):
        run = simulate_least_squares(X, y, alpha * w0_draw, lr, horizon).weights[-1]
        np.testing.assert_allclose(x_query @ run, limit.predict(alpha), atol=1e-10)

    for kwargs in ({"l2": 0.05}, {"weight_decay": 0.05, "momentum": 0.9}):
        decayed = linear.predictor_init_dependence(X, y, w0_draw, 0.5, np.inf, **kwargs)
        assert np.all(decayed.init_part == 0.0)
        horizon = int(60 * linear.forgetting_table(X, 0.5, **kwargs).forgetting_steps.max())
        run = simulate_least_squares(X, y, 2.0 * w0_draw, 0.5, horizon, **kwargs).weights[-1]
        np.testing.assert_allclose(X @ run, decayed.predict(2.0), atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Helpers and bad inputs


def test_eigenvalues_from_data_matrix_and_table():
    X, _, _ = random_problem()
    h = linear.hessian_eigh(X)[0]
    np.testing.assert_allclose(
        linear.forgetting_times(X, 0.3, 0.01), linear.forgetting_times(h, 0.3, 0.01)
    )
    assert np.sum(h == 0) == X.shape[1] - X.shape[0]
    table = linear.forgetting_table(X, 0.3, l2=0.01, momentum=0.5)
    assert list(table.columns) == [
        "eigenvalue",
        "spectral_radius",
        "forgetting_steps",
        "flow_forgetting_steps",
        "forgetting_lr_time",
        "flow_forgetting_lr_time",
    ]
    np.testing.assert_allclose(table.forgetting_lr_time, 0.3 * table.forgetting_steps)
    lr_max = linear.max_stable_lr(X, 0.01, 0.5)
    assert np.all(linear.spectral_radii(X, lr_max, 0.01, 0.5) <= 1 + 1e-12)
    assert linear.spectral_radii(X, 1.01 * lr_max, 0.01, 0.5).max() > 1


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: linear.forgetting_times([1.0], lr=-0.1), "lr"),
        (lambda: linear.forgetting_times([1.0], lr=0.1, l2=-1), "l2"),
        (lambda: linear.forgetting_times([1.0], lr=0.1, momentum=1.0), "momentum"),
        (lambda: linear.forgetting_times([-1.0], lr=0.1), "eigenvalues"),
        (lambda: linear.forgetting_times(np.ones((2, 2, 2)), lr=0.1), "eigenvalues"),
        (lambda: linear.forgetting_times([3.0], lr=1.0), r"lr <= 0\.666667"),
        (lambda: linear.forgetting_times([3.0], lr=1.3, momentum=0.9), "lr <= 1.26667"),
        (lambda: linear.forgetting_times([1.0], 0.1, weight_decay=-1), "weight_decay"),
        (lambda: linear.init_contraction([1.0], 0.1, steps=-1), "steps"),
        (lambda: linear.init_contraction([1.0], 2.0, steps=np.inf), "stability edge"),
        (
            lambda: linear.predictor_init_dependence(
                np.ones((3, 2)), np.ones(2), np.ones(2), 0.1, 1
            ),
            "y",
        ),
        (
            lambda: linear.predictor_init_dependence(
                np.ones((3, 2)), np.ones(3), np.ones(3), 0.1, 1
            ),
            "w0_draw",
        ),
        (
            lambda: simulate_least_squares(
                np.ones((3, 2)), np.ones(3), np.ones(2), 0.1, 5, batch_size=4
            ),
            "batch_size",
        ),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_empty_eigenvalues_and_one_meaning_per_decay_name():
    """``l2`` coupled, ``weight_decay`` decoupled (as RunConfig): without momentum the two are the
    same contraction; with momentum the decoupled null space is exactly (1 - lr wd)^T."""
    with pytest.raises(ValueError, match="empty"):
        linear.forgetting_times([], lr=0.1)
    h = np.array([0.0, 0.5, 2.0])
    np.testing.assert_allclose(
        linear.forgetting_times(h, 0.1, l2=0.3),
        linear.forgetting_times(h, 0.1, weight_decay=0.3),
        rtol=1e-12,
    )
    decoupled = linear.forgetting_times(h, 0.1, momentum=0.9, weight_decay=0.3)
    assert decoupled[0] == pytest.approx(-1.0 / math.log1p(-0.03), rel=1e-12)
    coupled = linear.forgetting_times(h, 0.1, 0.3, 0.9)  # positional: (lr, l2, momentum)
    assert coupled[0] == pytest.approx(linear.forgetting_times(h, 0.1, l2=0.3, momentum=0.9)[0])
    assert coupled[0] < decoupled[0]  # coupled L2 rides the buffer: about (1 - mu) / (lr l2)
    with pytest.raises(TypeError):
        linear.forgetting_times(h, 0.1, decoupled_weight_decay=0.1)  # the old name is gone
