"""A run's schedule: per-step learning-rate factors and schedule checks.

Accumulated regularization, the unit in which forgetting is counted, is defined once in
:mod:`initmem.theory.units` (momentum and the init's ``d / |w_0|^2`` included); the momentum-free
sums below are its special case ``mu = 0``, ``d / |w_0|^2 = 1``
(:func:`initmem.theory.units.accumulated_units`).

The forgetting laws of :mod:`initmem.theory.normalized` depend on a pipeline only through sums over
optimizer steps t of the per-step learning rate ``lr_t`` and decay ``lambda_t``:

* ``explicit = sum_t lr_t * lambda_t``: explicit decay contracts a weight by
  ``prod_t (1 - lr_t lambda_t) ~ exp(-explicit)`` (coupled L2 or decoupled weight decay; with
  heavy-ball momentum mu, coupled L2 acts as ``explicit / (1 - mu)``).
* ``sgd_noise = sum_t lr_t^2 / b``: SGD grows ``|w|^4`` of a scale-invariant weight by
  ``2 lr_t^2 |g_hat_t|^2`` per step, and the minibatch-noise part of ``|g_hat|^2`` is
  ``s / b`` (``s`` the per-example gradient covariance trace at unit norm): the drift is
  ``2 s * sgd_noise`` (times ``1 / (1 - mu)^2`` with momentum). Dimensionless for a fixed ``s``.
* ``adam = sum_t lr_t^2``: Adam-family updates have a size set by lr, so ``|w|^2`` grows by
  ``lr_t^2`` per coordinate per step: ``adam`` is that growth per coordinate.

Check against the paper (eta = 1e-3, b = 128, 40,000 training images, 312 steps per epoch): 300
epochs give ``sgd_noise = 7.3e-4`` and 5,000 epochs ``1.2e-2``; eta = lambda = 1e-2 over 300 epochs
gives ``explicit = 9.4`` (a contraction of e^-9.4).

:func:`lr_multipliers` expands a run's schedule (constant, step, cosine, linear warmup) into the
per-step factors of ``lr``, exactly as the trainer applies them (the trainer indexes ``RunConfig.lr_multipliers()``, which calls it).
"""

from __future__ import annotations

import math

import numpy as np

SCHEDULES = ("constant", "step", "cosine")


def check_schedule(
    epochs: float,
    schedule: str = "constant",
    warmup_epochs: float = 0.0,
    milestone_epochs=(),
) -> None:
    """Check a schedule against the run's length in epochs (fractional when given in steps).

    ``schedule`` must be one of :data:`SCHEDULES`; ``warmup_epochs`` in ``[0, epochs]`` (a longer
    warmup never reaches the full ``lr``); ``milestone_epochs`` positive epochs. Raises ValueError
    naming the field and its allowed range. ``RunConfig`` and :func:`lr_multipliers` call it.
    """
    if not (isinstance(epochs, (int, float, np.integer, np.floating)) and epochs > 0):
        raise ValueError(f"epochs must be a number > 0 (got {epochs!r})")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {list(SCHEDULES)} (got {schedule!r})")
    if not (math.isfinite(warmup_epochs) and 0 <= warmup_epochs <= epochs):
        raise ValueError(
            f"warmup_epochs must be in [0, {epochs:g}] (the run's epochs; a longer warmup never "
            f"reaches the full lr) (got {warmup_epochs!r})"
        )
    if any(not (math.isfinite(m) and m > 0) for m in milestone_epochs):
        raise ValueError(f"milestone_epochs must be positive epochs (got {list(milestone_epochs)})")


#: The longest schedule expanded per step (a bound set before allocating: 8 bytes per step and
#: array, 0.4 GiB at the bound; a ResNet on ImageNet for 90 epochs at batch 256 has 0.45 M steps).
MAX_SCHEDULE_STEPS = 50_000_000


def lr_multipliers(
    total_steps: int,
    steps_per_epoch: int,
    schedule: str = "constant",
    *,
    warmup_epochs: float = 0.0,
    milestone_epochs=(),
    step_gamma: float = 0.1,
) -> np.ndarray:
    """Per-step factors multiplying ``lr`` (length ``total_steps``), the trainer's schedule.

    Linear warmup over ``W = round(warmup_epochs * steps_per_epoch)`` steps: factor ``(t + 1) / W``
    at step t (0-based). After it: ``constant`` 1; ``step`` ``step_gamma ** k`` with k the number of
    milestones (epochs from the start of the run) with ``t >= milestone * steps_per_epoch``;
    ``cosine`` ``(1 + cos(pi (t - W) / (T - W))) / 2``.
    """
    for name, value in (("total_steps", total_steps), ("steps_per_epoch", steps_per_epoch)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer (got {value!r})")
    check_schedule(total_steps / steps_per_epoch, schedule, warmup_epochs, milestone_epochs)
    if not 0 < step_gamma <= 1:
        raise ValueError(f"step_gamma must satisfy 0 < step_gamma <= 1 (got {step_gamma!r})")
    if total_steps > MAX_SCHEDULE_STEPS:
        raise ValueError(
            f"total_steps must be <= {MAX_SCHEDULE_STEPS:,} (got {int(total_steps):,}): the schedule "
            f"is expanded one float64 per step, {8 * int(total_steps) / 2**30:.1f} GiB per array "
            "here; shorten the run (epochs) or raise batch_size"
        )
    steps = np.arange(int(total_steps))
    warmup = int(round(warmup_epochs * steps_per_epoch))
    if schedule == "constant":
        factors = np.ones(len(steps))
    elif schedule == "step":
        milestones = np.asarray(milestone_epochs, dtype=np.float64) * steps_per_epoch
        passed = (steps[:, None] >= milestones[None, :]).sum(axis=1)
        factors = step_gamma**passed
    else:
        span = max(int(total_steps) - warmup, 1)
        factors = 0.5 * (1.0 + np.cos(np.pi * (steps - warmup) / span))
    if warmup > 0:
        factors = np.where(steps < warmup, (steps + 1) / warmup, factors)
    return factors.astype(np.float64)


__all__ = [
    "MAX_SCHEDULE_STEPS",
    "SCHEDULES",
    "check_schedule",
    "lr_multipliers",
]
