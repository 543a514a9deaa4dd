"""Closed forms of initmem.theory.logistic against float64 gradient descent (simulate_logistic).

Tolerances: identities (KKT of the max-margin solution, the kept component) 1e-10; the asymptotic
laws (Soudry et al.'s residual, the init share, local rates, the transient's linear growth) 1-15%
in their stated regime, checked on a log grid of steps up to 3e4.
"""

import math

import numpy as np
import pytest

from initmem.theory import linear, logistic
from initmem.theory.simulate import simulate_logistic


def separable_problem(seed=0):
    """8 points in a 2-D plane of R^3: two support vectors z = (1, +-1) that span it, the others
    at margin >= 2 (theta - 1 = 1 = lambda: the residual decays like 1/t); random labels/rotation."""
    rng = np.random.default_rng(seed)
    z = np.vstack([[[1.0, 1.0], [1.0, -1.0]], rng.uniform([2.0, -3.0], [4.0, 3.0], size=(6, 2))])
    y = np.where(rng.random(8) < 0.5, -1.0, 1.0)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return (y[:, None] * z) @ q[:, :2].T, y


def nonseparable_problem(seed=3, n=12):
    """Random labels on 3 Gaussian features plus a 4th coordinate no example uses (a null space)."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, 3)), np.zeros((n, 1))])
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


def test_max_margin_satisfies_kkt_and_beats_every_direction():
    X, y = separable_problem()
    hm = logistic.hard_margin(X, y)
    Z = y[:, None] * X
    margins = Z @ hm.w_svm
    # KKT of min |w|^2/2 s.t. Zw >= 1: feasibility, a >= 0, stationarity, complementary slackness.
    assert margins.min() >= 1.0 - 1e-10
    assert np.all(hm.dual >= 0)
    np.testing.assert_allclose(Z.T @ hm.dual, hm.w_svm, atol=1e-10)
    np.testing.assert_allclose(hm.dual * (margins - 1.0), 0.0, atol=1e-10)
    w_hat, gamma = logistic.max_margin(X, y)
    assert abs(np.linalg.norm(w_hat) - 1.0) < 1e-12
    assert abs(gamma - np.min(Z @ w_hat)) < 1e-10
    assert gamma == pytest.approx(1.0, abs=1e-10)  # by construction: support z = (1, +-1)
    rng = np.random.default_rng(1)
    others = rng.standard_normal((2000, 3))
    others /= np.linalg.norm(others, axis=1, keepdims=True)
    assert np.max(np.min(Z @ others.T, axis=0)) < gamma


def test_cases_of_the_data():
    X, y = separable_problem()
    assert logistic.separability(X, y).case == "separable"
    Xn, yn = nonseparable_problem()
    sep = logistic.separability(Xn, yn)
    assert sep.case == "not separable" and sep.has_minimizer and not sep.separable_mask.any()
    Xp = Xn.copy()
    Xp[:3, 3] = yn[:3]  # the first three examples get a private separating coordinate
    sep = logistic.separability(Xp, yn)
    assert sep.case == "partly separable"
    np.testing.assert_array_equal(sep.separable_mask, np.arange(12) < 3)
    with pytest.raises(ValueError, match="not linearly separable"):
        logistic.max_margin(Xn, yn)
    for data in ((X, y), (Xp, yn)):
        with pytest.raises(ValueError, match="separable"):
            logistic.forgetting_times(*data, lr=0.5)
    with pytest.raises(ValueError, match="labels"):
        logistic.max_margin(X, np.zeros(8))


def test_soudry_residual_kept_component_and_init_share_against_long_gd():
    X, y = separable_problem()
    lr = 1.0
    hm = logistic.hard_margin(X, y)
    w_tilde = logistic.residual_limit(X, y, lr)
    p = logistic.residual_decay_exponent(X, y)
    assert p == pytest.approx(1.0, abs=1e-10)
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(3)
    w0 /= np.linalg.norm(w0)
    alphas = np.array([1.0, 2.0, 3.0])
    record = np.unique(np.logspace(0, math.log10(3e4), 30).astype(int))
    run = simulate_logistic(X, y, alphas[:, None] * w0, lr, record)
    late = record >= 100
    for j, alpha in enumerate(alphas):
        kept = logistic.kept_component(X, alpha * w0)
        w = run.weights[:, j]
        # (3): the null-space component never moves (identity).
        np.testing.assert_allclose(logistic.kept_component(X, w[-1]), kept, atol=1e-10)
        # (2): rho_t - P_perp w0 -> w_tilde, the error decaying like t^-p (p = 1 here).
        err = np.linalg.norm(
            w - np.log(np.maximum(record, 1))[:, None] * hm.w_svm - kept - w_tilde, axis=1
        )
        assert err[-1] < 2e-3 * np.linalg.norm(w_tilde)
        slope = np.polyfit(np.log(record[late]), np.log(err[late]), 1)[0]
        assert slope == pytest.approx(-p, rel=0.15)
        # (4): the init share, measured vs predicted on the log grid (asymptotic: t >= 100).
        share = np.linalg.norm(kept) / np.linalg.norm(w, axis=1)
        predicted = logistic.init_share(X, y, alpha * w0, lr, record[late])
        np.testing.assert_allclose(share[late], predicted, rtol=0.05)
        # Its crossing time, where the prediction is at most 3e4 steps: within 5%.
        tol = 0.1 * alpha
        t_pred = logistic.init_share_forgetting_steps(X, y, alpha * w0, lr, tol)
        assert 100 < t_pred < 3e4
        fine = np.unique(np.geomspace(t_pred / 2, min(2 * t_pred, 3e4), 80).astype(int))
        sub = simulate_logistic(X, y, alpha * w0, lr, fine)
        measured = fine[
            np.argmax(np.linalg.norm(kept) / np.linalg.norm(sub.weights[:, 0], axis=1) <= tol)
        ]
        assert measured == pytest.approx(t_pred, rel=0.05)
    # exp(c alpha / tol): at fixed alpha / tol the time changes only through w_tilde (order one).
    times = [logistic.init_share_forgetting_steps(X, y, a * w0, lr, 0.1 * a) for a in alphas]
    assert max(times) / min(times) < 2.0
    longer = logistic.init_share_forgetting_steps(X, y, 2 * w0, lr, 0.1)
    assert math.log(longer) == pytest.approx(2 * math.log(times[0]), rel=0.15)


@pytest.mark.parametrize(
    "l2, momentum, weight_decay",
    [(0.0, 0.0, 0.0), (0.05, 0.0, 0.0), (0.0, 0.9, 0.0), (0.01, 0.5, 0.02)],
)
def test_local_forgetting_times_against_gd_near_the_minimizer(l2, momentum, weight_decay):
    X, y = nonseparable_problem()
    lr = 0.5
    w_star = logistic.minimizer(X, y, l2, momentum, weight_decay)
    kappa = l2 + (1 - momentum) * weight_decay
    np.testing.assert_allclose(logistic.gradient(X, y, w_star) + kappa * w_star, 0.0, atol=1e-12)
    times = logistic.forgetting_times(X, y, lr, l2, momentum, weight_decay)
    h, V = np.linalg.eigh(logistic.hessian(X, y, w_star))
    rng = np.random.default_rng(0)
    w0 = w_star + 0.01 * rng.standard_normal(4)
    record = np.arange(0, 3001, 10)
    run = simulate_logistic(
        X, y, w0, lr, record, l2=l2, momentum=momentum, weight_decay=weight_decay
    )
    deviation = np.abs((run.weights[:, 0] - w_star) @ V)
    if kappa == 0:  # the null space (h = 0): kept exactly, forgetting time inf
        assert times[0] == np.inf
        np.testing.assert_allclose(deviation[:, 0], deviation[0, 0], rtol=1e-10)
    # The slowest contracting direction sets the tail; fit its e-fold time over the late steps.
    j = int(np.argmax(np.where(np.isfinite(times), times, -1)))
    ok = (record >= min(500, 3 * times[j])) & (deviation[:, j] > 1e-11)
    measured = -1.0 / np.polyfit(record[ok], np.log(deviation[ok, j]), 1)[0]
    rel = 0.05 if momentum > 0.6 else 1e-3  # underdamped: oscillation in the fit
    assert measured == pytest.approx(times[j], rel=rel)


def test_transient_grows_linearly_in_alpha_within_its_bounds():
    X, y = nonseparable_problem()
    lr, radius = 0.5, 0.5
    w_star = logistic.minimizer(X, y)
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(4)
    w0 /= np.linalg.norm(w0)
    span = np.diag([1.0, 1.0, 1.0, 0.0])
    entry = {}
    for alpha in (20.0, 40.0, 80.0):
        bounds = logistic.transient_bounds(X, y, alpha * w0, lr, radius)
        run = simulate_logistic(X, y, alpha * w0, lr, np.arange(4000))
        dist = np.linalg.norm((run.weights[:, 0] - w_star) @ span, axis=1)
        entry[alpha] = int(np.flatnonzero(dist <= radius)[0])
        assert bounds.lower <= entry[alpha] <= bounds.upper
    # Far from w* the loss is 1-homogeneous: the travel time grows linearly with alpha.
    assert entry[80.0] - entry[40.0] == pytest.approx(2 * (entry[40.0] - entry[20.0]), rel=0.1)


def test_local_times_reduce_to_linear_and_validate():
    X, y = nonseparable_problem()
    h = np.linalg.eigvalsh(logistic.hessian(X, y, logistic.minimizer(X, y, 0.1)))
    np.testing.assert_allclose(
        logistic.forgetting_times(X, y, 0.5, l2=0.1)[1:],
        linear.forgetting_times(h, 0.5, 0.1)[1:],
        rtol=1e-10,
    )
    table = logistic.forgetting_table(X, y, 0.5, l2=0.1)
    assert list(table.columns)[:3] == ["eigenvalue", "spectral_radius", "forgetting_steps"]
    with pytest.raises(ValueError, match="lr"):
        logistic.forgetting_times(X, y, -1.0, l2=0.1)
    with pytest.raises(ValueError, match="diverges"):
        logistic.forgetting_times(X, y, 100.0, l2=0.1)
