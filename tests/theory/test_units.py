"""The one definition of the units of forgetting against closed forms and a direct simulation."""

from __future__ import annotations

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
