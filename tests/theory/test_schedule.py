"""Accumulated regularization: the paper's figures, closed-form sums, and the unit of SGD forgetting."""

import math

import numpy as np
import pytest

from initmem.theory.normalized_sim import ScaleInvariantLoss, simulate_norms
from initmem.theory.schedule import lr_multipliers
from initmem.theory.units import accumulated_units

STEPS_PER_EPOCH = 40_000 // 128  # the paper's 40,000 training images, batch 128


def momentum_free_sums(lrs, decay: float, batch: int) -> dict[str, float]:
    """The schedule module's sums (``explicit``, ``sgd_noise``, ``adam``, ``steps``): the units of
    :func:`initmem.theory.units.accumulated_units` at ``mu = 0``, ``d / |w_0|^2 = 1``."""
    common = dict(batch_size=batch, steps_per_epoch=1, inv_init_sq_per_coord=1.0)
    sgd = accumulated_units(lrs, optimizer="sgd", l2=decay, **common)
    return {**sgd, "adam": accumulated_units(lrs, optimizer="adam", **common)["adam"]}


@pytest.mark.parametrize(
    "lr,decay,epochs,key,expected,rel",
    [
        (1e-3, 0.0, 300, "sgd_noise", 7.3e-4, 5e-3),
        (1e-3, 0.0, 5000, "sgd_noise", 1.2e-2, 2e-2),
        (1e-2, 1e-2, 300, "explicit", 9.4, 5e-3),
    ],
)
def test_paper_figures(lr, decay, epochs, key, expected, rel):
    steps = epochs * STEPS_PER_EPOCH
    acc = momentum_free_sums(np.full(steps, lr), decay, 128)
    assert acc[key] == pytest.approx(expected, rel=rel)
    assert acc["steps"] == steps
    assert acc["adam"] == pytest.approx(lr**2 * steps)


def test_cosine_sums_match_integrals():
    """sum of cos-schedule lr and lr^2 against the integrals T/2 and 3T/8 (relative error ~ 1/T)."""
    steps, lr, decay, batch = 20_000, 0.1, 5e-4, 64
    lrs = lr * lr_multipliers(steps, 100, "cosine")
    acc = momentum_free_sums(lrs, decay, batch)
    assert acc["explicit"] == pytest.approx(lr * decay * steps / 2, rel=1e-3)
    assert acc["sgd_noise"] == pytest.approx(lr**2 * 3 * steps / 8 / batch, rel=1e-3)


def test_explicit_is_the_log_contraction():
    """prod (1 - lr_t lambda) = exp(-explicit) up to the second-order sum of (lr_t lambda)^2 / 2."""
    lrs = 0.05 * lr_multipliers(3000, 300, "step", milestone_epochs=(4, 8), step_gamma=0.2)
    acc = momentum_free_sums(lrs, 0.01, 128)
    log_product = float(np.sum(np.log1p(-lrs * 0.01)))
    second_order = float(np.sum((lrs * 0.01) ** 2)) / 2
    assert -log_product == pytest.approx(acc["explicit"] + second_order, rel=1e-6)


def test_sgd_noise_is_the_unit_of_norm_drift():
    """SGD on a scale-invariant weight with batch-b noise: |w|^4 grows by 2 s * sgd_noise."""
    per_example, batch = 4.0, 16
    loss = ScaleInvariantLoss(dim=200, noise_sq=per_example / batch)
    mults = lr_multipliers(3000, 100, "step", milestone_epochs=(10, 20), step_gamma=0.3)
    traj = simulate_norms(loss, lr=0.05, steps=3000, lr_multipliers=mults, record_every=3000)
    acc = momentum_free_sums(0.05 * mults, 0.0, batch)
    growth = traj.norm_sq[0, -1] ** 2 - traj.norm_sq[0, 0] ** 2
    assert growth == pytest.approx(2 * per_example * acc["sgd_noise"], rel=0.05)


def test_warmup_shape():
    mults = lr_multipliers(100, 10, "constant", warmup_epochs=2)
    np.testing.assert_allclose(mults[:20], (np.arange(20) + 1) / 20)
    assert np.all(mults[20:] == 1.0)
    assert math.isclose(lr_multipliers(10, 5, "cosine")[0], 1.0)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: lr_multipliers(10, 2, "linear"), "schedule"),
        (lambda: lr_multipliers(0, 2), "total_steps"),
        (lambda: lr_multipliers(10, 2, warmup_epochs=-1), "warmup_epochs"),
    ],
)
def test_bad_inputs_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_empty_schedules_and_warmup_longer_than_the_run_are_rejected():
    from initmem.theory.schedule import check_schedule

    # 10 steps of 5 per epoch = 2 epochs: a 4-epoch warmup would never reach the full lr.
    with pytest.raises(ValueError, match=r"warmup_epochs must be in \[0, 2\]"):
        lr_multipliers(10, 5, "cosine", warmup_epochs=4)
    assert lr_multipliers(10, 5, "cosine", warmup_epochs=2)[-1] == 1.0
    check_schedule(2.5, "step", 2.5, (1, 2))
    for args, name in [
        ((0, "constant"), "epochs"),
        ((2, "linear"), "schedule"),
        ((2, "step", -1.0), "warmup_epochs"),
        ((2, "step", 0.0, (0,)), "milestone_epochs"),
    ]:
        with pytest.raises(ValueError, match=name):
            check_schedule(*args)


def test_theory_and_config_name_the_same_optimizers_and_schedules():
    """One list each: the optimizers and schedules the theory covers are exactly the ones a
    RunConfig accepts (same names, same order), and every theory entry point refuses any other."""
    from initmem.empirical import config
    from initmem.theory import checks, normalized, schedule

    assert checks.OPTIMIZERS == normalized.OPTIMIZERS == config.OPTIMIZERS
    assert schedule.SCHEDULES == config.SCHEDULES
    for name in config.OPTIMIZERS:
        assert checks.check_optimizer(name) == name
    for bad in ("SGD", "Adam", "nadam", "lion", None):
        with pytest.raises(ValueError, match="optimizer must be one of"):
            checks.check_optimizer(bad)
    for name in config.SCHEDULES:
        assert len(lr_multipliers(100, 10, name, milestone_epochs=(5,) * (name == "step"))) == 100
