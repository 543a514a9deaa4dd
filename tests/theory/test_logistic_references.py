"""initmem.theory.logistic against independent references and on the inputs its assumptions exclude.

The reproducers of the audit's discrepancies (the exact inputs), each giving the right value or a
ValueError naming the violated assumption; the results against computations that share no code
with the module (scipy.optimize's BFGS and SLSQP, float64 gradient descent, finite differences).
"""

import math

import numpy as np
import pytest

from initmem.theory import logistic
from initmem.theory.simulate import simulate_logistic

# Two support vectors (1, +-1) with dual 1/2 each and two examples off the margin (theta = 3).
X_D1 = np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [3.0, 0.0, 0.0], [3.0, 1.0, 0.0]])
Y_D1 = np.ones(4)
# The same plus (1, 0): on the margin with SVM dual 0 (degenerate support).
X_D2 = np.array([[1.0, 1.0], [1.0, -1.0], [1.0, 0.0], [3.0, 0.5], [2.5, -1.0]])
Y_D2 = np.ones(5)


def gd_share(X, y, w0, lr, steps):
    """|P_perp w_0| / |w_t| of float64 GD at steps 0..steps (0 where P_perp w_0 = 0)."""
    run = simulate_logistic(X, y, w0, lr, np.arange(steps + 1))
    kept = np.linalg.norm(logistic.kept_component(X, w0))
    return kept / np.linalg.norm(run.weights[:, 0], axis=1)


@pytest.mark.parametrize("lr", [1.0, 0.01])
def test_d1_no_off_span_component_is_forgotten_at_step_0(lr):
    w0 = np.array([0.3, -0.2, 0.0])
    assert logistic.init_share_forgetting_steps(X_D1, Y_D1, w0, lr, 0.1) == 0.0
    np.testing.assert_array_equal(gd_share(X_D1, Y_D1, w0, lr, 50), 0.0)  # (3): 0 at every step
    np.testing.assert_array_equal(logistic.init_share(X_D1, Y_D1, w0, lr, [1.0, 1e3]), 0.0)


def test_d1_crossing_in_the_transient_is_refused():
    """w0 = (0, 0, 0.05), lr 0.01: (4) crosses 0.1 at 329 steps, before its regime (2,000 steps);
    GD crosses at step 73: the error names the regime instead of returning 329."""
    w0 = np.array([0.0, 0.0, 0.05])
    share = gd_share(X_D1, Y_D1, w0, 0.01, 400)
    crossing = int(np.argmax(share <= 0.1))
    assert crossing == 73
    regime = logistic.ASYMPTOTIC_FROM * 4 * 0.5 / 0.01  # 10 n max a_i / lr
    assert crossing < regime
    with pytest.raises(ValueError, match=r"asymptotic regime t >= 10 n max a_i / lr = 2000 steps"):
        logistic.init_share_forgetting_steps(X_D1, Y_D1, w0, 0.01, 0.1)


def test_d1_share_starting_below_tol_is_0():
    # A null-space component small against the span part: starts below tol, and GD's share stays
    # below it (the (4) bump at t ~ 2 lies before its regime, 20 steps, and is not a crossing).
    w0 = np.array([2.0, 0.0, 0.05])
    assert logistic.init_share_forgetting_steps(X_D1, Y_D1, w0, 1.0, 0.1) == 0.0
    assert gd_share(X_D1, Y_D1, w0, 1.0, 200).max() <= 0.1


@pytest.mark.parametrize("seed", range(5))
def test_the_asymptotic_regime_starts_after_step_1_at_every_stable_lr(seed):
    """10 n a_max / lr > 1.25 for lr < 8 n / sigma_max^2: a_max sigma_max^2 >= 1 (docstring)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((6, 4))
    y = np.sign(X @ rng.standard_normal(4))
    hm = logistic.hard_margin(X, y)
    assert hm.dual.max() * np.linalg.norm(X, 2) ** 2 >= 1.0 - 1e-12


def test_d3_crossing_past_the_float_range_is_inf():
    w0 = np.array([0.0, 0.0, 100.0])
    assert logistic.init_share_forgetting_steps(X_D1, Y_D1, w0, 1.0, 0.01) == math.inf
    # Independently: the predicted share is still above 0.01 at 1e300 steps.
    assert logistic.init_share(X_D1, Y_D1, w0, 1.0, 1e300) > 0.01


def test_d2_degenerate_support_names_the_example():
    for fn in (
        lambda: logistic.residual_limit(X_D2, Y_D2, 1.0),
        lambda: logistic.residual_decay_exponent(X_D2, Y_D2),
        lambda: logistic.init_share(X_D2, Y_D2, np.zeros(2), 1.0, 10.0),
    ):
        with pytest.raises(ValueError, match=r"degenerate support: example 2 \(x = \[1.0, 0.0\]"):
            fn()
    # Why: GD's limit is (ln(3/5), 0), not the support equation's (ln(2/5), 0) = (-0.916, 0).
    steps = 20000
    run = simulate_logistic(X_D2, Y_D2, np.zeros(2), 1.0, [steps])
    rho = run.weights[-1, 0] - np.array([1.0, 0.0]) * math.log(steps)
    np.testing.assert_allclose(rho, [math.log(3 / 5), 0.0], atol=2e-3)
    assert abs(rho[0] - math.log(2 / 5)) > 0.4


def test_d3_lr_above_the_stability_bound_names_the_bound():
    bound = 8 * 4 / np.linalg.svd(X_D1, compute_uv=False)[0] ** 2
    for fn in (
        lambda lr: logistic.residual_limit(X_D1, Y_D1, lr),
        lambda lr: logistic.init_share(X_D1, Y_D1, np.array([0, 0, 1.0]), lr, 10.0),
        lambda lr: logistic.init_share_forgetting_steps(X_D1, Y_D1, np.array([0, 0, 1.0]), lr, 0.1),
    ):
        with pytest.raises(ValueError, match=f"8 n / sigma_max\\(Z\\)\\^2 = {bound:.6g}"):
            fn(20 * bound)
        fn(0.9 * bound)  # below the bound: a value


def test_d3_steps_must_be_a_number_or_a_vector():
    with pytest.raises(ValueError, match="1-D"):
        logistic.init_share(X_D1, Y_D1, np.array([0, 0, 1.0]), 1.0, np.ones((2, 2)))


# ------------------------------------------------------------------------- independent references
def two_supports(c, theta, seed=0):
    """Support vectors z = (1, +-c) (dual 1/2 each, lambda = min(1, c^2)) and four examples at
    first coordinate >= theta, one exactly at theta (theta - 1 the other term); random labels."""
    rng = np.random.default_rng(seed)
    others = np.column_stack([rng.uniform(theta, theta + 2, 4), rng.uniform(-2, 2, 4)])
    others[0, 0] = theta
    z = np.vstack([[1.0, c], [1.0, -c], others])
    y = np.where(rng.random(len(z)) < 0.5, -1.0, 1.0)
    return y[:, None] * z, y


@pytest.mark.parametrize(
    "c, theta, p, rel",
    [(0.5, 3.0, 0.25, 0.02), (1.0, 1.4, 0.4, 0.1)],
    ids=["lambda picks", "theta - 1 picks"],
)
def test_residual_decay_exponent_away_from_1_against_gd(c, theta, p, rel):
    """min(lambda, theta - 1) with each term the smaller: the slope of log |rho_t - w_tilde|
    against log t over t in [1e3, 3e4] of float64 GD (measured -0.2495 and -0.369)."""
    X, y = two_supports(c, theta)
    assert logistic.residual_decay_exponent(X, y) == pytest.approx(p, rel=1e-10)
    hm = logistic.hard_margin(X, y)
    w_tilde = logistic.residual_limit(X, y, 1.0)
    record = np.unique(np.logspace(3, math.log10(3e4), 15).astype(int))
    run = simulate_logistic(X, y, np.zeros(2), 1.0, record)
    err = np.linalg.norm(run.weights[:, 0] - np.log(record)[:, None] * hm.w_svm - w_tilde, axis=1)
    slope = np.polyfit(np.log(record), np.log(err), 1)[0]
    assert -slope == pytest.approx(p, rel=rel)


@pytest.mark.parametrize("lr", [0.3, 0.7])
def test_residual_limit_at_lr_other_than_1_against_gd(lr):
    """rho_t -> w_tilde(lr), ln(lr / (n a_i)) on the support margins, within 2e-3 |w_tilde| after
    3e4 steps (p = 1 here; measured 1.1e-3 at lr 0.3), and not w_tilde(1) (the support margins
    shift by ln lr)."""
    from tests.theory.test_logistic import separable_problem

    X, y = separable_problem()
    hm = logistic.hard_margin(X, y)
    w_tilde = logistic.residual_limit(X, y, lr)
    steps = 30000
    run = simulate_logistic(X, y, np.zeros(3), lr, [steps])
    rho = run.weights[-1, 0] - math.log(steps) * hm.w_svm
    err = np.linalg.norm(rho - w_tilde)
    assert err < 2e-3 * np.linalg.norm(w_tilde)
    assert np.linalg.norm(rho - logistic.residual_limit(X, y, 1.0)) > 100 * err
    Z = y[:, None] * X
    shift = Z[hm.support] @ (w_tilde - logistic.residual_limit(X, y, 1.0))
    np.testing.assert_allclose(shift, math.log(lr), atol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_hard_margin_against_slsqp(seed):
    """min |w|^2 / 2 s.t. Z w >= 1 by scipy's SLSQP (an independent QP solve) vs the NNLS route."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    d = 3 + seed % 3
    X = rng.standard_normal((12, d))
    y = np.sign(X @ rng.standard_normal(d))
    Z = y[:, None] * X
    hm = logistic.hard_margin(X, y)
    start = 10 * hm.w_svm + rng.standard_normal(d)  # feasible, away from the answer
    res = minimize(
        lambda w: 0.5 * w @ w,
        start,
        jac=lambda w: w,
        constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1.0, "jac": lambda w: Z}],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 500},
    )
    assert res.success
    np.testing.assert_allclose(hm.w_svm, res.x, rtol=1e-10, atol=1e-12)  # measured 7e-15
    assert hm.margin == pytest.approx(1 / np.linalg.norm(res.x), rel=1e-10)


@pytest.mark.parametrize(
    "l2, momentum, weight_decay",
    [(0.0, 0.0, 0.0), (0.05, 0.0, 0.0), (0.0, 0.9, 0.1), (0.01, 0.5, 0.02)],
)
def test_minimizer_against_bfgs(l2, momentum, weight_decay):
    """The fixed point vs scipy's BFGS on L(w) + kappa |w|^2 / 2, kappa = l2 + (1 - mu) wd, from
    w = 0 (BFGS stays in the data's span there, as the fixed point does)."""
    from scipy.optimize import minimize

    from tests.theory.test_logistic import nonseparable_problem

    X, y = nonseparable_problem()
    kappa = l2 + (1 - momentum) * weight_decay
    res = minimize(
        lambda w: logistic.loss(X, y, w) + 0.5 * kappa * w @ w,
        np.zeros(4),
        jac=lambda w: logistic.gradient(X, y, w) + kappa * w,
        method="BFGS",
        options={"gtol": 1e-12},
    )
    w_star = logistic.minimizer(X, y, l2, momentum, weight_decay)
    np.testing.assert_allclose(w_star, res.x, atol=1e-7)  # measured 2.3e-9 (BFGS's gtol)


def test_hessian_against_finite_differences_of_the_gradient():
    from tests.theory.test_logistic import nonseparable_problem

    X, y = nonseparable_problem()
    w = np.array([0.3, -0.7, 1.1, 0.4])
    h = 1e-6
    fd = np.column_stack(
        [
            (logistic.gradient(X, y, w + h * e) - logistic.gradient(X, y, w - h * e)) / (2 * h)
            for e in np.eye(4)
        ]
    )
    np.testing.assert_allclose(logistic.hessian(X, y, w), fd, atol=1e-8)


def test_transient_bounds_speed_and_basin_radius():
    """speed G bounds |grad L| everywhere (sampled near and far); within basin_radius of w* the
    Hessian on the span is within 10% of min h, and GD started on the basin's edge along the
    slowest direction contracts at forgetting_times' rate to within 1e-3."""
    from tests.theory.test_logistic import nonseparable_problem

    X, y = nonseparable_problem()
    Z = y[:, None] * X
    rng = np.random.default_rng(0)
    bounds = logistic.transient_bounds(X, y, np.ones(4), 0.5, 0.5)
    assert bounds.speed == pytest.approx(np.mean(np.linalg.norm(Z, axis=1)), rel=1e-12)
    dirs = rng.standard_normal((400, 4))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    grads = [
        np.linalg.norm(logistic.gradient(X, y, r * v)) for v in dirs for r in (0.1, 1.0, 100.0)
    ]
    assert max(grads) <= bounds.speed
    w_star = logistic.minimizer(X, y)
    h_star = np.linalg.eigvalsh(logistic.hessian(X, y, w_star))[1:]  # the null direction dropped
    span = np.eye(4)[:, :3]  # the 4th coordinate is the null space here
    for v in dirs[:200]:
        u = span @ (v[:3] / np.linalg.norm(v[:3]))
        h = logistic.hessian(X, y, w_star + bounds.basin_radius * u)[:3, :3]
        diff = np.linalg.norm(h - logistic.hessian(X, y, w_star)[:3, :3], 2)
        assert diff <= 0.1 * h_star.min()
    assert np.linalg.eigvalsh(h).min() >= 0.9 * h_star.min()
    lr = 0.5
    times = logistic.forgetting_times(X, y, lr)
    h_all, V = np.linalg.eigh(logistic.hessian(X, y, w_star))
    slow = V[:, 1]  # the smallest nonzero eigenvalue (index 0 is the null space)
    record = np.arange(0, int(3 * times[1]) + 1, 5)
    run = simulate_logistic(X, y, w_star + bounds.basin_radius * slow, lr, record)
    deviation = np.abs((run.weights[:, 0] - w_star) @ slow)
    measured = -1.0 / np.polyfit(record, np.log(deviation), 1)[0]
    assert measured == pytest.approx(times[1], rel=1e-3)  # measured 8e-5: a cautious radius
