"""Closed forms of initmem.theory.deep_linear against direct simulation (float64).

Tolerances: exact one-step identities 1e-10 relative (exact enumeration of minibatches 1e-12);
gradient-flow statements by the first-order convergence of GD (Euler) to the flow, error ratio 2
when the step halves.
"""

import itertools
import math

import numpy as np
import pytest

from initmem.theory import deep_linear as dl
from initmem.theory.simulate import simulate_deep_linear


def random_problem(widths=(4, 5, 3, 2), n=7, scale=0.7, seed=0):
    """Random weights [W_1, ..., W_L] of the given widths d_0..d_L and a non-realizable target."""
    rng = np.random.default_rng(seed)
    weights = [
        scale * rng.standard_normal((d_out, d_in)) / math.sqrt(d_in)
        for d_in, d_out in itertools.pairwise(widths)
    ]
    X = rng.standard_normal((n, widths[0]))
    Y = rng.standard_normal((n, widths[-1]))
    return weights, X, Y


def frobenius(matrices):
    return math.sqrt(sum(float(np.sum(M**2)) for M in matrices))


def difference(a, b):
    return [x - y for x, y in zip(a, b, strict=True)]


def whitened_problem(signals=(3.0, 1.5, 0.0), d0=4, n=8, seed=0):
    """Whitened inputs (X^T X / n = I) and Syx = U diag(signals) V^T."""
    rng = np.random.default_rng(seed)
    X = math.sqrt(n) * np.linalg.qr(rng.standard_normal((n, d0)))[0]
    m = len(signals)
    U = np.linalg.qr(rng.standard_normal((m, m)))[0]
    V = np.linalg.qr(rng.standard_normal((d0, m)))[0]
    Y = X @ (U @ np.diag(signals) @ V.T).T
    return X, Y, U, V, rng


def aligned_init(U, V, a, b, rng):
    """W_1 = Q diag(a) V^T, W_2 = U diag(b) Q^T: each mode i has strength u_i = a_i b_i."""
    Q = np.linalg.qr(rng.standard_normal((len(a), len(a))))[0]
    return [Q @ np.diag(a) @ V.T, U @ np.diag(b) @ Q.T]


def mode_strengths(trajectory, U, V):
    return np.array([np.diag(U.T @ W2 @ W1 @ V) for W1, W2 in trajectory.weights])


# ---------------------------------------------------------------------------------------------
# Balance: the exact step, gradient flow, weight decay


def test_gradients_match_finite_differences():
    weights, X, Y = random_problem()
    grads = dl.deep_linear_gradients(weights, X, Y)
    rng = np.random.default_rng(1)
    for layer in range(len(weights)):
        direction = rng.standard_normal(weights[layer].shape)
        step = 1e-6

        def loss_at(t, layer=layer, direction=direction):
            moved = [W.copy() for W in weights]
            moved[layer] = moved[layer] + t * direction
            return dl.deep_linear_loss(moved, X, Y)

        numeric = (loss_at(step) - loss_at(-step)) / (2 * step)
        assert numeric == pytest.approx(float(np.sum(grads[layer] * direction)), rel=1e-7)
    per_example = dl.per_example_gradients(weights, X, Y)
    for G, g in zip(grads, per_example, strict=True):
        np.testing.assert_allclose(g.mean(axis=0), G, rtol=0, atol=1e-14)


@pytest.mark.parametrize("widths", [(3, 4, 2), (4, 5, 3, 2), (2, 3, 3, 3, 1)])
@pytest.mark.parametrize("l2", [0.0, 0.3])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_one_step_balance_identity_is_exact(widths, l2, batch_size):
    """D_l <- (1 - lr lambda)^2 D_l + lr^2 (G_{l+1}^T G_{l+1} - G_l G_l^T), along 30 steps."""
    weights, X, Y = random_problem(widths, seed=len(widths))
    lr = 0.2
    run = simulate_deep_linear(weights, X, Y, lr, 30, l2=l2, batch_size=batch_size, seed=3)
    rng = np.random.default_rng(3)  # the simulator's minibatch stream
    worst_error, largest_lr2_term = 0.0, 0.0
    for before, after in zip(run.weights[:-1], run.weights[1:], strict=True):
        rows = np.arange(len(X)) if batch_size is None else rng.choice(len(X), batch_size, False)
        grads = dl.deep_linear_gradients(before, X[rows], Y[rows])
        predicted = dl.balance_after_step(dl.balance_matrices(before), grads, lr, l2)
        actual = dl.balance_matrices(after)
        error = frobenius(difference(predicted, actual)) / frobenius(actual)
        decay_only = [(1 - lr * l2) ** 2 * D for D in dl.balance_matrices(before)]
        lr2_term = frobenius(difference(actual, decay_only)) / frobenius(actual)
        worst_error, largest_lr2_term = max(worst_error, error), max(largest_lr2_term, lr2_term)
    assert worst_error <= 1e-10
    # the lr^2 term is really there: the identity resolves it far below its size
    assert largest_lr2_term > 1e4 * worst_error


def test_gradient_flow_conserves_balance_to_first_order():
    """GD is the Euler integrator of gradient flow: at fixed time lr * T = 1 the balance drifts by
    O(lr) (order 1), lr * integral of (G^T G - G G^T); the error halves when lr halves."""
    weights, X, Y = random_problem()
    D0 = dl.balance_matrices(weights)
    errors = []
    for lr in (4e-3, 2e-3, 1e-3):
        run = simulate_deep_linear(weights, X, Y, lr, round(1.0 / lr), record_every=10**6)
        errors.append(frobenius(difference(dl.balance_matrices(run.weights[-1]), D0)))
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.02)
    assert errors[1] / errors[2] == pytest.approx(2.0, rel=0.02)
    assert errors[-1] < 1e-3 * frobenius(D0)
    # the loss did change: the network trained while the balance stayed
    assert dl.deep_linear_loss(run.weights[-1], X, Y) < 0.9 * dl.deep_linear_loss(weights, X, Y)


def test_l2_shrinks_balance_as_exp_minus_2_lambda_t():
    weights, X, Y = random_problem(scale=1.5)
    D0 = dl.balance_matrices(weights)
    l2, time = 0.5, 2.0
    flow = dl.balance_under_l2(D0, l2, time)
    errors = []
    for lr in (4e-3, 2e-3, 1e-3):
        run = simulate_deep_linear(weights, X, Y, lr, round(time / lr), l2=l2, record_every=10**6)
        errors.append(frobenius(difference(dl.balance_matrices(run.weights[-1]), flow)))
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.03)
    assert errors[1] / errors[2] == pytest.approx(2.0, rel=0.03)
    assert errors[-1] < 2e-3 * frobenius(D0)
    assert frobenius(flow) == pytest.approx(math.exp(-2.0) * frobenius(D0), rel=1e-14)
    # forgetting time of the balance: shrink by e
    lr = 1e-3
    tau = dl.balance_forgetting_time(lr, l2)
    assert tau.lr_time == pytest.approx(1 / (2 * l2), rel=1e-14)
    assert tau.steps == pytest.approx(-1 / (2 * math.log(1 - lr * l2)), rel=1e-12)
    assert lr * tau.steps == pytest.approx(tau.lr_time, rel=lr * l2)
    assert math.isinf(dl.balance_forgetting_time(lr, 0.0).steps)


# ---------------------------------------------------------------------------------------------
# What SGD's noise adds


@pytest.mark.parametrize("batch_size", [1, 2, 3, 6])
@pytest.mark.parametrize("l2", [0.0, 0.2])
def test_sgd_balance_drift_is_the_exact_minibatch_expectation(batch_size, l2):
    """Average of the one-step balance change over all C(n, b) minibatches, enumerated."""
    weights, X, Y = random_problem(n=6)
    lr = 0.3
    drift = dl.sgd_balance_drift(weights, X, Y, lr, batch_size, l2)
    D = dl.balance_matrices(weights)
    subsets = list(itertools.combinations(range(len(X)), batch_size))
    total = [np.zeros_like(M) for M in D]
    for rows in subsets:
        grads = dl.deep_linear_gradients(weights, X[list(rows)], Y[list(rows)])
        after = dl.balance_after_step(D, grads, lr, l2)
        total = [t + (a - d) / len(subsets) for t, a, d in zip(total, after, D, strict=True)]
    scale = frobenius(total)
    assert frobenius(difference(drift.expected_change, total)) <= 1e-12 * scale
    c_b = (6 - batch_size) / (batch_size * 5)
    assert drift.noise_scale == pytest.approx(lr**2 * c_b, rel=1e-15)
    if batch_size == 6:
        assert frobenius(drift.noise) == 0.0
    else:
        assert frobenius(drift.noise) > 1e-3 * frobenius(drift.full_batch)


def test_sgd_noise_moves_the_balance_where_gd_keeps_it():
    """At a minimum of a non-realizable problem GD's balance is frozen (G = 0); SGD keeps drifting.
    The drift accumulated over T steps matches the sum of the predicted expectations along the
    trajectory (a martingale difference of relative size ~ 1/sqrt(T); tolerance 10%)."""
    weights, X, Y = random_problem(widths=(3, 4, 2), n=12, scale=1.0)
    minimum = simulate_deep_linear(weights, X, Y, 0.1, 3000, record_every=10**6).weights[-1]
    assert frobenius(dl.deep_linear_gradients(minimum, X, Y)) < 1e-10
    lr, batch_size, T = 0.02, 2, 1500
    gd = simulate_deep_linear(minimum, X, Y, lr, T, record_every=10**6).weights[-1]
    sgd = simulate_deep_linear(minimum, X, Y, lr, T, batch_size=batch_size, seed=0)
    D0 = dl.balance_matrices(minimum)
    gd_change = frobenius(difference(dl.balance_matrices(gd), D0))
    measured = difference(dl.balance_matrices(sgd.weights[-1]), D0)
    predicted = [np.zeros_like(M) for M in D0]
    for state in sgd.weights[:-1]:
        step = dl.sgd_balance_drift(state, X, Y, lr, batch_size).expected_change
        predicted = [p + s for p, s in zip(predicted, step, strict=True)]
    assert gd_change < 1e-12
    assert frobenius(difference(measured, predicted)) < 0.1 * frobenius(predicted)
    at_minimum = dl.sgd_balance_drift(minimum, X, Y, lr, batch_size)
    assert frobenius(at_minimum.full_batch) < 1e-20
    # smaller steps stay at the minimum: T times the drift predicted there gives the measured
    # change, and the change scales like lr^2 (the implicit forgetting is lr^2-sized)
    small_lr = lr / 4
    small = simulate_deep_linear(minimum, X, Y, small_lr, T, batch_size=batch_size, seed=0)
    measured_small = difference(dl.balance_matrices(small.weights[-1]), D0)
    at_minimum = dl.sgd_balance_drift(minimum, X, Y, small_lr, batch_size)
    assert frobenius(at_minimum.full_batch) < 1e-20
    predicted_small = [T * step for step in at_minimum.expected_change]
    assert frobenius(difference(measured_small, predicted_small)) < 0.12 * frobenius(
        predicted_small
    )
    ratio = (frobenius(measured) / lr**2) / (frobenius(measured_small) / small_lr**2)
    assert ratio == pytest.approx(1.0, rel=0.25)


# ---------------------------------------------------------------------------------------------
# Saxe, McClelland and Ganguli (2014)


def test_saxe_balanced_modes_follow_the_sigmoid():
    """Aligned balanced small init, whitened inputs: simulated u_i(t) against the closed form,
    error O(lr) (ratio 2 when lr halves); learning times where u crosses s/2."""
    signals = np.array([3.0, 1.5, 0.0])
    X, Y, U, V, rng = whitened_problem(tuple(signals))
    u0 = 1e-3
    weights = aligned_init(U, V, np.full(3, math.sqrt(u0)), np.full(3, math.sqrt(u0)), rng)
    horizon = 4.0
    errors = []
    for lr in (2e-3, 1e-3):
        run = simulate_deep_linear(weights, X, Y, lr, round(horizon / lr), record_every=20)
        u = mode_strengths(run, U, V)
        closed = np.stack([dl.saxe_mode_strength(lr * run.steps, s, u0) for s in signals], axis=1)
        errors.append(np.max(np.abs(u - closed)))
        for i, s in enumerate(signals[:2]):  # learning time to half strength
            crossing = lr * run.steps[np.flatnonzero(u[:, i] >= s / 2)[0]]
            assert crossing == pytest.approx(dl.saxe_learning_time(s, u0), abs=25 * lr)
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.05)
    assert errors[1] < 0.01
    # the closed form is the logistic solution in both of its forms
    t = np.linspace(0, 3, 7)
    s = 1.5
    logistic = s * np.exp(2 * s * t) / (np.exp(2 * s * t) - 1 + s / u0)
    np.testing.assert_allclose(dl.saxe_mode_strength(t, s, u0), logistic, rtol=1e-12)


def test_saxe_learning_time_grows_like_log_one_over_alpha_squared():
    """Random (unaligned) init of scale alpha: the time for the top mode (s = 3) to reach s/2 grows
    by ln(1 / alpha^2) / (2 s) per factor alpha, the slope of saxe_learning_time."""
    X, Y, U, V, rng = whitened_problem((3.0, 1.5, 1.0))
    draw = [rng.standard_normal((3, 4)), rng.standard_normal((3, 3))]
    lr, s = 5e-3, 3.0
    half_times = []
    alphas = np.array([1e-3, 1e-4, 1e-5])
    for alpha in alphas:
        run = simulate_deep_linear([alpha * W for W in draw], X, Y, lr, round(5 / lr))
        u = mode_strengths(run, U, V)[:, 0]
        i = np.flatnonzero(u >= s / 2)[0]
        half_times.append(lr * (run.steps[i - 1] + (s / 2 - u[i - 1]) / (u[i] - u[i - 1])))
    slopes = np.diff(half_times) / np.diff(np.log(1 / alphas**2))
    np.testing.assert_allclose(slopes, 1 / (2 * s), rtol=0.02)
    closed_slope = dl.saxe_learning_time(s, 1e-12) - dl.saxe_learning_time(s, 1e-10)
    assert closed_slope / math.log(100) == pytest.approx(1 / (2 * s), rel=1e-9)


def test_saxe_with_l2_shifts_the_signal():
    """Coupled L2: the balanced mode follows the sigmoid with s' = s - lambda."""
    signals = (2.0, 0.5)
    X, Y, U, V, rng = whitened_problem(signals, d0=3)
    u0, l2, lr = 0.05, 0.8, 1e-3
    weights = aligned_init(U, V, np.full(2, math.sqrt(u0)), np.full(2, math.sqrt(u0)), rng)
    run = simulate_deep_linear(weights, X, Y, lr, 3000, l2=l2, record_every=50)
    u = mode_strengths(run, U, V)
    for i, s in enumerate(signals):
        closed = dl.saxe_mode_strength(lr * run.steps, s, u0, l2)
        np.testing.assert_allclose(u[:, i], closed, atol=3e-3)
    assert u[-1, 1] < 0.2 * u0  # s < lambda: the mode dies
    assert u[-1, 0] == pytest.approx(signals[0] - l2, rel=0.02)


@pytest.mark.parametrize("a0,b0", [(0.6, 0.6), (1.2, 0.3), (0.2, 1.1)])
def test_zero_signal_modes_decay_law_and_what_is_kept(a0, b0):
    """s = 0: balanced decays algebraically, unbalanced exponentially at rate |a^2 - b^2|, while
    a^2 - b^2 itself (the init's imbalance) is kept: the memory that gradient flow never erases."""
    X, Y, U, V, rng = whitened_problem((1.0, 0.0), d0=3)
    lr, horizon = 1e-3, 4.0
    weights = aligned_init(U, V, np.array([0.1, a0]), np.array([0.1, b0]), rng)
    run = simulate_deep_linear(weights, X, Y, lr, round(horizon / lr), record_every=25)
    u = mode_strengths(run, U, V)[:, 1]
    u0, c = a0 * b0, a0**2 - b0**2
    closed = dl.zero_signal_mode_strength(lr * run.steps, u0, c)
    np.testing.assert_allclose(u, closed, rtol=0, atol=5e-3 * u0)
    measured_time = lr * run.steps[np.flatnonzero(u <= u0 / math.e)[0]]
    assert measured_time == pytest.approx(dl.zero_signal_forgetting_time(u0, c), abs=30 * lr)
    # the mode's imbalance: | W_1 v |^2 - | U^T W_2 |^2 along the mode, conserved up to O(lr)
    W1, W2 = run.weights[-1]
    kept = float(np.sum((W1 @ V[:, 1]) ** 2) - np.sum((U[:, 1] @ W2) ** 2))
    assert kept == pytest.approx(c, abs=0.01)
    if c == 0:
        np.testing.assert_allclose(closed, u0 / (1 + 2 * u0 * lr * run.steps), rtol=1e-14)
    else:  # late-time exponential rate |c|
        late = np.log(dl.zero_signal_mode_strength([20.0, 21.0], u0, c))
        assert late[0] - late[1] == pytest.approx(abs(c), rel=1e-9)


# ---------------------------------------------------------------------------------------------
# Bad inputs


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: dl.balance_matrices([np.ones((3, 2)), np.ones((2, 2))]), "shapes do not chain"),
        (lambda: dl.balance_matrices([np.ones(3)]), r"weights\[0\]"),
        (
            lambda: dl.deep_linear_gradients([np.ones((3, 2))], np.ones((4, 3)), np.ones((4, 3))),
            "X",
        ),
        (
            lambda: dl.deep_linear_gradients([np.ones((3, 2))], np.ones((4, 2)), np.ones((5, 3))),
            "Y",
        ),
        (lambda: dl.balance_after_step([np.eye(2)], [np.ones((2, 2))], 0.1), "balances"),
        (lambda: dl.balance_after_step([], [np.ones((2, 2))], -0.1), "lr"),
        (lambda: dl.balance_under_l2([np.eye(2)], -0.1, 1.0), "l2"),
        (lambda: dl.balance_forgetting_time(0.1, -1.0), "l2"),
        (lambda: dl.balance_forgetting_time(2.0, 1.0), "lr \\* l2"),
        (lambda: dl.saxe_mode_strength(1.0, 1.0, -0.1), "u0"),
        (lambda: dl.saxe_mode_strength(-1.0, 1.0, 0.1), "time"),
        (lambda: dl.saxe_learning_time(1.0, 0.1, fraction=1.5), "fraction"),
        (lambda: dl.saxe_learning_time(1.0, 0.1, l2=2.0), "signal - l2"),
        (lambda: dl.zero_signal_forgetting_time(0.0), "u0"),
        (
            lambda: dl.sgd_balance_drift(
                [np.ones((2, 2)), np.ones((1, 2))], np.ones((3, 2)), np.ones((3, 1)), 0.1, 4
            ),
            "batch_size",
        ),
        (
            lambda: simulate_deep_linear(
                [np.ones((2, 2))], np.ones((3, 2)), np.ones((3, 2)), 0.1, 5, l2=-1
            ),
            "l2",
        ),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
