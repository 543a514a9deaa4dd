"""The one definition of the units of forgetting against closed forms and a direct simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from initmem.theory import units


def test_constant_schedule_closed_forms():
    lr, mu, l2, wd, b, T, spe, inv = 0.02, 0.9, 5e-3, 1e-3, 16, 400, 25, 700.0
    totals = units.accumulated_units(
        np.full(T, lr),
        optimizer="sgd",
        batch_size=b,
        steps_per_epoch=spe,
        momentum=mu,
        l2=l2,
        weight_decay=wd,
        inv_init_sq_per_coord=inv,
    )
    assert totals["epochs"] == pytest.approx(T / spe)
    assert totals["steps"] == pytest.approx(T)
    assert totals["explicit"] == pytest.approx(T * lr * (l2 / (1 - mu) + wd))
    assert totals["sgd_noise"] == pytest.approx(T * (lr / (1 - mu)) ** 2 / b)
    assert totals["adam"] == pytest.approx(T * (lr / (1 - mu)) ** 2 * inv)
    assert totals["accumulated"] == pytest.approx(totals["explicit"] + totals["sgd_noise"])
    # Adam ignores momentum (mu = 0) and counts its noise in the adam unit
    adam = units.accumulated_units(
        np.full(T, lr),
        optimizer="adamw",
        batch_size=b,
        steps_per_epoch=spe,
        momentum=mu,
        weight_decay=wd,
        inv_init_sq_per_coord=inv,
    )
    assert adam["accumulated"] == pytest.approx(T * lr * wd + T * lr**2 * inv)


def test_explicit_unit_is_the_contraction_of_heavy_ball_with_l2_and_decoupled_decay():
    """Simulate torch's SGD (coupled L2 in the momentum buffer, decoupled decay outside it) on a
    weight with no loss gradient: -ln(w_T / w_0) is the explicit unit (small steps)."""
    lr, mu, l2, wd, T = 1e-4, 0.9, 0.5, 0.2, 100000  # discretization error ~ lr l2 mu / (1 - mu)^2
    w, buf = 1.0, 0.0
    for _ in range(T):
        buf = mu * buf + l2 * w
        w = w - lr * buf - lr * wd * w
    explicit = units.accumulated_units(
        np.full(T, lr),
        optimizer="sgd",
        batch_size=1,
        steps_per_epoch=1,
        momentum=mu,
        l2=l2,
        weight_decay=wd,
    )["explicit"]
    assert -np.log(w) == pytest.approx(explicit, rel=0.02)


def test_inv_init_sq_and_errors():
    assert units.inv_init_sq_per_coord([4, 9], [2.0, 3.0]) == pytest.approx(2.5)
    assert np.isnan(units.inv_init_sq_per_coord([], []))
    with pytest.raises(ValueError, match="momentum"):
        units.unit_increments([0.1], optimizer="sgd", batch_size=1, steps_per_epoch=1, momentum=1.0)
    with pytest.raises(ValueError, match="batch_size"):
        units.unit_increments([0.1], optimizer="sgd", batch_size=0, steps_per_epoch=1)
    # a mis-cased or unknown optimizer is refused, never read as SGD (whose momentum it would drop)
    with pytest.raises(ValueError, match="names are lower case: 'sgd'"):
        units.unit_increments([0.1], optimizer="SGD", batch_size=1, steps_per_epoch=1)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        units.unit_increments([0.1], optimizer="nadam", batch_size=1, steps_per_epoch=1)


def test_norm_law_against_its_closed_form():
    """(U1) with constant increments: n_t = q^t n_0 + g (1 - q^t) / (1 - q), q = (1 - e)^2."""
    e, g, alpha, ref, T = 2e-3, 0.05, 8.0, 1.0, 600
    memory = units.accumulated_norm_memory(np.full(T, e), np.full(T, g), alpha, ref)
    t = np.arange(1, T + 1)
    q = (1 - e) ** 2
    grown = g * (1 - q**t) / (1 - q)
    closed = np.log((q**t * alpha**2 + grown) / (q**t * ref**2 + grown)) / np.log(alpha**2)
    np.testing.assert_allclose(memory, closed, rtol=1e-10)
    # explicit decay alone contracts both norms alike: the memory stays 1
    decay_only = units.accumulated_norm_memory(np.full(T, e), np.zeros(T), alpha, ref)
    np.testing.assert_allclose(decay_only, 1.0, rtol=1e-12)
    # the reference need not be 1: only the ratio of the init scales enters without growth
    np.testing.assert_allclose(
        units.accumulated_norm_memory(np.full(3, e), np.zeros(3), 4.0, 2.0), 1.0, rtol=1e-12
    )


def test_forgetting_step_is_the_first_crossing_of_one_over_e():
    """Pure growth: m_t <= 1/e once (a^2 + g t) / (1 + g t) <= a^(2/e), i.e. from
    t* = (a^2 - a^(2/e)) / (g (a^(2/e) - 1)) on; the first step is ceil(t*)."""
    alpha, g = 8.0, 0.02
    memory = units.accumulated_norm_memory(np.zeros(5000), np.full(5000, g), alpha)
    target = alpha ** (2 / np.e)
    crossing = (alpha**2 - target) / (g * (target - 1))
    assert units.forgetting_step(memory) == np.ceil(crossing)
    assert units.forgetting_step(memory[: int(np.floor(crossing)) - 1]) == np.inf
    assert units.forgetting_step([0.9, 0.5, 0.2], level=0.5) == 2


def test_norm_law_errors_name_the_field():
    with pytest.raises(ValueError, match="explicit"):
        units.accumulated_norm_memory([1.5], [0.0], 8.0)
    with pytest.raises(ValueError, match="same length"):
        units.accumulated_norm_memory([0.1, 0.1], [0.0], 8.0)
    with pytest.raises(ValueError, match="alpha and reference must differ"):
        units.accumulated_norm_memory([0.1], [0.0], 1.0)


# ------------------------------------------------------------------ the law with G (issue 35 item 3)
def _crossing(memory) -> int:
    """First step (1-based) at or below 1/e."""
    return int(np.flatnonzero(np.asarray(memory) <= math.exp(-1.0))[0] + 1)


def test_sgd_noise_law_crosses_at_the_simulated_step():
    """Pure-noise toy (float64, ScaleInvariantLoss with |g_hat|^2 = G = 1 per step, SGD lr 0.05,
    no decay, alpha 2 vs 1): the law's |w|^4 term 2 lr^2 G / |w_0|^4 crosses 1/e within 2% of the
    simulated crossing (the dropped lr^4 G^2 / |w|^4 and the draw's noise); the proxy
    (lr^2 / b on |w|^2) does not forget within the run, and proxy_error says by how much its memory
    at the end is off."""
    from initmem.theory.normalized_sim import ScaleInvariantLoss, simulate_norms

    steps, lr, alpha = 3000, 0.05, 2.0
    sim = simulate_norms(
        ScaleInvariantLoss(dim=512, noise_sq=1.0), lr=lr, steps=steps, alphas=(1.0, alpha)
    )
    simulated = np.log(sim.norm_sq[1, 1:] / sim.norm_sq[0, 1:]) / math.log(alpha**2)
    lrs = np.full(steps, lr)
    law = units.law_increments(lrs, optimizer="sgd", init_norm_sq=1.0, grad_sq_unit=1.0)
    assert law["power"] == 2
    memory = units.accumulated_norm_memory(law["explicit"], law["noise"], alpha, power=2)
    assert _crossing(memory) == pytest.approx(_crossing(simulated), rel=0.02)
    # the proxy (batch 16: G = 1 is a per-example trace of 16) keeps far more memory at the end
    proxy = units.unit_increments(lrs, optimizer="sgd", batch_size=16, steps_per_epoch=1)
    proxy_memory = units.accumulated_norm_memory(proxy["explicit"], proxy["sgd_noise"], alpha)
    assert proxy_memory[-1] > math.exp(-1.0) >= simulated[-1]
    error = units.proxy_error(lrs, batch_size=16, grad_sq_unit=1.0, init_norm_sq=1.0, alpha=alpha)
    assert error == pytest.approx(proxy_memory[-1] - memory[-1], rel=1e-12)
    assert error > 0.3
    print(f"sgd_noise proxy (b = 16) vs law, memory at the end: {error:+.3f}")


def test_law_memory_with_g_per_alpha():
    """G measured per alpha (alpha^4 times larger at alpha, as when alpha scales the BN gains and
    the head): z = |w|^4 grows in proportion to its init at both alphas, so the memory stays 1
    (closed form: (a^4 + S a^4) / (1 + S) = a^4)."""
    lrs = np.full(200, 0.1)
    ref = units.law_increments(lrs, optimizer="sgd", init_norm_sq=2.0, grad_sq_unit=3.0)
    high = units.law_increments(lrs, optimizer="sgd", init_norm_sq=2.0, grad_sq_unit=3.0 * 8**4)
    memory = units.accumulated_norm_memory(
        ref["explicit"], ref["noise"], 8.0, power=2, noise_alpha=high["noise"]
    )
    np.testing.assert_allclose(memory, 1.0, rtol=1e-12)


def test_adaptive_law_is_the_theorys_adamw_law():
    """AdamW without L2, P = rho d per step: n_T from law_increments equals the closed form of
    theory.normalized.adaptive_norm_law (x_T = c^(2T) x_0 + rho lr^2 d (1 - c^(2T)) / (1 - c^2))."""
    from initmem.theory.normalized import adaptive_norm_law

    lrs, d, x0 = np.full(500, 1e-3), 4608, 3.0
    law = units.law_increments(
        lrs, optimizer="adamw", init_norm_sq=x0, weight_decay=0.1, precond_grad_sq=0.7 * d
    )
    memory = units.accumulated_norm_memory(law["explicit"], law["noise"], 4.0)
    closed = adaptive_norm_law(1e-3, d, weight_decay=0.1, update_sq=0.7)
    expected = closed.log_ratio(np.arange(1, 501), 4.0, x0) / math.log(16.0)
    np.testing.assert_allclose(memory, expected, rtol=1e-9)


def test_adam_coupled_l2_is_divided_by_sqrt_v():
    lrs = np.full(3, 1e-3)
    law = units.law_increments(
        lrs,
        optimizer="adam",
        init_norm_sq=1.0,
        l2=0.01,
        precond_grad_sq=10.0,
        grad_rms_per_coord=0.05,
    )
    np.testing.assert_allclose(law["explicit"], 1e-3 * 0.01 / 0.05)
    unknown = units.law_increments(lrs, optimizer="adam", init_norm_sq=1.0, l2=0.01)
    assert np.isnan(unknown["explicit"]).all()  # no silent lr * l2
    with pytest.raises(ValueError, match="optimizer must be one of"):
        units.law_increments(lrs, optimizer="SGD", init_norm_sq=1.0)
