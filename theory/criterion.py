"""What "forgotten" means: one statistic and one tolerance, shared by theory, report, bridge and study.

Setting. Two runs differ only in the init scale: alpha against a reference (1 in the theory, the
sweep's smallest alpha in the bridge and the study). For a BatchNorm-followed (scale-invariant)
weight the loss does not see ``|w|``; alpha only sets the effective learning rate ``lr / |w|^2``
(:mod:`initmem.theory.normalized`).

Conventions. The statistic is the **norm memory** of the BN-followed convs,

    m(t) = ln(|w_alpha(t)|^2 / |w_ref(t)|^2) / ln(|w_alpha(0)|^2 / |w_ref(0)|^2)
         = ln(eff_lr_ref(t) / eff_lr_alpha(t)) / ln(eff_lr_ref(0) / eff_lr_alpha(0)),     (1)

1 at init (``2 ln(alpha / ref)`` in the numerator of a scaled layer), 0 when the alphas' effective
learning rates agree. The tolerance is relative: alpha is **forgotten** once ``m(t) <= 1/e``, i.e.
``|ln eff_lr ratio| <= |2 ln(alpha / ref)| / e`` (2); the **forgetting time** is the time it takes,
the e-fold time of the memory. Other weights follow the same rule on their own statistic (one e-fold
of their initial deviation: ``|alpha - 1|`` for a weight that decay alone forgets, ``k |ln alpha|``
for the logit scale, :mod:`initmem.theory.logit_scale`).

Derivation (estimators of the one time). A law's noise-free curve: the first step with
``m <= 1/e`` (the theory's closed forms, :func:`initmem.theory.forgetting.predict_forgetting`). A
curve on logged steps (measured, or the law evaluated there): the time scale ``tau`` of the
least-squares fit ``exp(-t / tau)`` (:func:`initmem.bridge.fits.fit_decay_time`; the bridge and
the study), which equals the first crossing of 1/e for an exponential curve and uses every point of
a noisy one; censored (not forgotten, ``tau`` at least the run's length) when the fit shrinks by e
only beyond the run. At the end of a run: ``m_end <= 1/e`` with its interval over seeds (the report
and the study's "converged"). Derived here: (1) is ``-1/2`` times the log-ratio of effective learning
rates, and for an exponential decay (2) marks one time constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .checks import check_number


@dataclass(frozen=True)
class ForgettingCriterion:
    """When alpha counts as forgotten (module docstring): ``statistic`` at or below ``level``.

    ``statistic``: the name of the memory (1 at init, 0 forgotten); ``level``: the relative
    tolerance, 1/e (the e-fold time). Every printed forgetting time names it (:attr:`name`).
    """

    statistic: str = "norm memory"
    level: float = math.exp(-1.0)

    def __post_init__(self):
        check_number("level", self.level, strict=True, high=1.0)

    @property
    def name(self) -> str:
        """The short name every output prints beside a forgetting time."""
        level = "1/e" if math.isclose(self.level, math.exp(-1.0)) else f"{self.level:g}"
        return f"{self.statistic} m <= {level} (e-fold time)"

    @property
    def definition(self) -> str:
        """One line: the statistic, identity (1), and the tolerance, identity (2)."""
        return (
            f"{self.statistic} m(t) = ln(eff_lr(ref) / eff_lr(alpha)) at t over its value at init "
            f"(BN-followed convs); forgotten once m <= {self.level:.3g}"
        )

    def tolerance(self, initial: float) -> float:
        """The absolute tolerance on a statistic that starts at ``initial``: ``level * |initial|``
        (identity (2); e.g. ``initial = 2 ln alpha`` for ``|ln eff_lr ratio|``)."""
        return self.level * abs(float(initial))

    def forgotten(self, memory: float) -> bool:
        """Whether a memory value (1 at init) is at or below the level."""
        return bool(memory <= self.level)


#: The one meaning of "forgotten" in initmem (theory, report, bridge, study).
FORGETTING = ForgettingCriterion()

__all__ = ["FORGETTING", "ForgettingCriterion"]
