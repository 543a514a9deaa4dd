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

The one decision (:func:`decide`), used by the theory CLI, the pre-registration, the dry run, the
bridge and both studies. On a curve of evaluations (a law's noise-free curve, or the seed mean of a
measured one with its 95% interval over seeds):

- an evaluation is **reversed** when the memory is below 0 and its interval excludes 0 (``hi < 0``):
  the alphas' order flipped, which is not forgetting; **forgotten** when ``|m| <= level`` and it is
  not reversed; **undefined** when ``m`` is NaN; **kept** otherwise;
- alpha is forgotten at the **first evaluation that is forgotten**; the interval of that step is
  ``[first evaluation whose interval reaches the level (lo <= level), first whose interval lies at
  or below it (hi <= level)]``;
- a curve whose last evaluation is reversed is *reversed*; one with no forgotten evaluation is *not
  forgotten within the run* (the end memory says how much is left), or *undefined* when its end is
  NaN: a NaN memory is never read as "not forgotten";
- one evaluation decided by its interval (the studies' state at the end, :func:`interval_state`):
  reversed, forgotten (the interval within ``[-level, level]``), **overshoot** (``lo > 1``: the
  alphas' effective learning rates further apart than at init, kept and more), kept
  (``lo > level``) or cannot tell; ``|m|`` decides forgetting, the sign and 1 only name which way
  a memory that is not forgotten left ``[0, 1]``;
- an exponential fit ``exp(-t / tau)`` never decides; it may extend a curve that was not forgotten,
  labelled **extrapolated** (e.g. a measured AdamW curve ending at 0.465 has a fitted ``tau`` of 509
  steps within its 640: by this rule it is *not forgotten within the run*).

Combining layers (:data:`LAYER_RULE`, :func:`combine_layers`): the memory of a pipeline is the mean,
over the scale-invariant layers that alpha scales, of each layer's norm memory (1), per seed, before
the seed mean; NaN if any layer is NaN. The reason: (1) is a log-ratio normalized per layer, so every
scaled layer weighs the same whatever its size, and the mean is the memory of the network's average
effective learning rate ratio in units of its initial value; the slowest layer would let one small
layer decide for the net, and a pooled norm would let the widest layers decide. Layers alpha does not
scale have no (1) (its denominator is 0) and are left out.

Derived here: (1) is ``-1/2`` times the log-ratio of effective learning rates, and for an exponential
decay (2) marks one time constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .checks import check_memory, check_number

#: How a pipeline's memory combines its layers (module docstring, "Combining layers").
LAYER_RULE = "mean over the scaled scale-invariant layers of each layer's norm memory"
#: The states of one evaluation (:func:`evaluation_states`).
EVALUATION_STATES = ("forgotten", "reversed", "kept", "undefined")
#: The states of one evaluation decided by its interval (:func:`interval_state`).
INTERVAL_STATES = ("forgotten", "reversed", "overshoot", "kept", "cannot tell", "undefined")
#: The states of a curve (:class:`Decision`).
DECISION_STATES = ("forgotten", "reversed", "not forgotten", "undefined")


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
        """Whether a memory value (1 at init) is at or below the level. NaN raises ValueError: a
        NaN memory is neither forgotten nor kept (:func:`~initmem.theory.checks.check_memory`)."""
        return bool(check_memory("memory", memory) <= self.level)


#: The one meaning of "forgotten" in initmem (theory, report, bridge, study).
FORGETTING = ForgettingCriterion()


def combine_layers(memory, axis: int = -1) -> np.ndarray:
    """A pipeline's memory from its layers' (:data:`LAYER_RULE`): the mean over ``axis`` (the scaled
    scale-invariant layers) of per-layer norm memories; NaN where any layer is NaN (never skipped)."""
    values = np.asarray(memory, dtype=np.float64)
    if values.shape[axis] == 0:
        raise ValueError(
            "combine_layers needs at least one layer (no scaled scale-invariant layer)"
        )
    return values.mean(axis=axis)


def evaluation_states(memory, lo=None, hi=None, level: float = FORGETTING.level) -> np.ndarray:
    """The state of each evaluation (module docstring): ``reversed`` (``hi < 0``), ``forgotten``
    (``|memory| <= level``), ``undefined`` (NaN memory) or ``kept``. ``lo`` / ``hi``: the interval
    over seeds (None: a noise-free curve, its own interval)."""
    memory = np.asarray(memory, dtype=np.float64)
    hi = memory if hi is None else np.asarray(hi, dtype=np.float64)
    states = np.full(memory.shape, "kept", dtype=object)
    states[np.abs(memory) <= level] = "forgotten"
    states[np.isfinite(hi) & (hi < 0)] = "reversed"
    states[np.isnan(memory)] = "undefined"
    return states


def interval_state(memory: float, lo: float, hi: float, level: float = FORGETTING.level) -> str:
    """One evaluation decided by its interval over seeds (the studies' end state,
    :data:`INTERVAL_STATES`): ``reversed`` (``hi < 0``), ``forgotten`` (the interval within
    ``[-level, level]``), ``overshoot`` (``lo > 1``: the memory is larger than at init),
    ``kept`` (``lo > level``), ``undefined`` (NaN memory) or ``cannot tell`` (an interval across
    the level, or none)."""
    if not np.isfinite(memory):
        return "undefined"
    if np.isfinite(hi) and hi < 0:
        return "reversed"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "cannot tell"
    if hi <= level and lo >= -level:
        return "forgotten"
    if lo > 1.0:
        return "overshoot"
    return "kept" if lo > level else "cannot tell"


@dataclass(frozen=True)
class Decision:
    """Whether and when a curve forgot alpha by the one rule (:func:`decide`).

    ``state`` one of :data:`DECISION_STATES`; ``step``: the first forgotten evaluation (``inf``
    when none, NaN when undefined), in the curve's time unit, with ``step_lo`` / ``step_hi`` from the
    interval (``inf``: not reached); ``memory_end`` [``memory_end_lo``, ``memory_end_hi``]: the last
    evaluation; ``t_end``: its time; ``extrapolated``: an e-fold time fitted beyond the run (only
    where not forgotten; NaN otherwise), never a decision.
    """

    state: str
    step: float
    step_lo: float
    step_hi: float
    memory_end: float
    memory_end_lo: float
    memory_end_hi: float
    t_end: float
    extrapolated: float = math.nan

    @property
    def forgotten(self) -> bool:
        return self.state == "forgotten"

    @property
    def reported_step(self) -> float:
        """``step`` when forgotten, else the run's length ``t_end`` (a lower bound), NaN when
        undefined."""
        if self.state == "undefined":
            return math.nan
        return self.step if self.forgotten else self.t_end

    def text(self, unit: str = "steps") -> str:
        """One phrase: "forgotten at 120 steps [80, 160]", "not within the run: the run ends with
        memory 0.47 [0.41, 0.52]", "reversed: ...", "undefined: ..."."""
        end = _interval_text(self.memory_end, self.memory_end_lo, self.memory_end_hi)
        if self.state == "forgotten":
            bounds = ""
            if np.isfinite(self.step_lo) or np.isfinite(self.step_hi):
                bounds = f" [{_step_text(self.step_lo)}, {_step_text(self.step_hi)}]"
            return f"forgotten at {self.step:.4g} {unit}{bounds}"
        if self.state == "reversed":
            return f"reversed: the alphas' order flipped, memory {end} at the end"
        if self.state == "undefined":
            return "undefined: the memory is NaN"
        text = f"not within the run: the run ends with memory {end}"
        if np.isfinite(self.extrapolated):
            text += f" (extrapolated e-fold time {self.extrapolated:.4g} {unit})"
        return text


def decide(
    t,
    memory,
    lo=None,
    hi=None,
    *,
    level: float = FORGETTING.level,
    extrapolated: float = math.nan,
) -> Decision:
    """The one decision of "forgotten" on a curve (module docstring).

    ``t``: the evaluations' times (increasing; steps or any unit); ``memory``: the combined memory at
    each (a law's curve, or the seed mean); ``lo`` / ``hi``: its interval over seeds (None for a
    noise-free curve); ``extrapolated``: an exponential fit's e-fold time, kept only where the curve
    is not forgotten. Raises ValueError on mismatched lengths or an empty curve.
    """
    t = np.asarray(t, dtype=np.float64)
    memory = np.asarray(memory, dtype=np.float64)
    lo = memory if lo is None else np.asarray(lo, dtype=np.float64)
    hi = memory if hi is None else np.asarray(hi, dtype=np.float64)
    if not (t.ndim == 1 and t.shape == memory.shape == lo.shape == hi.shape) or t.size == 0:
        raise ValueError("t, memory, lo and hi must be 1-d arrays of one non-zero length")
    check_number("level", level, strict=True, high=1.0)
    states = evaluation_states(memory, lo, hi, level)
    reversed_ = states == "reversed"
    end = len(t) - 1
    step = _first(t, states == "forgotten")
    step_lo = _first(t, (lo <= level) & ~reversed_)
    step_hi = _first(t, (hi <= level) & (np.abs(memory) <= level) & ~reversed_)
    if states[end] == "reversed":
        state = "reversed"
    elif np.isfinite(step):
        state = "forgotten"
    elif states[end] == "undefined":
        state = "undefined"
    else:
        state = "not forgotten"
    if state == "undefined":
        step = math.nan
    return Decision(
        state=state,
        step=step,
        step_lo=min(step_lo, step) if np.isfinite(step) else step_lo,
        step_hi=step_hi,
        memory_end=float(memory[end]),
        memory_end_lo=float(lo[end]),
        memory_end_hi=float(hi[end]),
        t_end=float(t[end]),
        extrapolated=float(extrapolated) if state == "not forgotten" else math.nan,
    )


def _first(t: np.ndarray, mask: np.ndarray) -> float:
    hit = np.flatnonzero(mask)
    return float(t[hit[0]]) if hit.size else math.inf


def _step_text(value: float) -> str:
    return f"{value:.4g}" if np.isfinite(value) else "not reached"


def _interval_text(value: float, lo: float, hi: float) -> str:
    if not np.isfinite(value):
        return "NaN"
    if np.isfinite(lo) and np.isfinite(hi) and (lo != value or hi != value):
        return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"
    return f"{value:.3g}"


__all__ = [
    "DECISION_STATES",
    "EVALUATION_STATES",
    "FORGETTING",
    "INTERVAL_STATES",
    "LAYER_RULE",
    "Decision",
    "ForgettingCriterion",
    "combine_layers",
    "decide",
    "evaluation_states",
    "interval_state",
]
