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
