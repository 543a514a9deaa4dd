"""Every mechanism's predicted forgetting time of the init scale alpha for one training pipeline.

A pipeline forgets alpha through three mechanisms acting on BatchNorm-followed (scale-invariant)
weights, where alpha only sets the effective learning rate ``lr / |w|^2``
(:mod:`initmem.theory.normalized`), and one acting on the other weights (:mod:`initmem.theory.linear`):

========================  ==========================================================================
``gradient_flow``         reference: small steps, no noise, no decay conserve |w|: never forgotten.
``sgd_noise``             implicit, finite-step / minibatch: |w|^4 grows by 2 eta^2 |g_hat|^2 per
                          step, eta = lr / (1 - mu): the time to outgrow ``alpha^4 |w_0|^4``.
``explicit_decay``        L2 or decoupled weight decay pulls |w| to an alpha-independent equilibrium;
                          its forgetting time is that of the relaxation from the equilibrium,
                          (5) of :mod:`~initmem.theory.normalized` (``e_fold_steps``: its e-folding
                          time).
``adaptive``              Adam-family: |w|^2 grows by about lr^2 per coordinate per step, whatever the
                          gradient: the time to outgrow ``alpha^2 |w_0|^2``.
``pipeline``              all of the pipeline's mechanisms together: the predicted forgetting time.
``linear_decay``          weights without BatchNorm (the head, the null space of the data): only
                          decay forgets their init, in ``ln(|alpha - 1| / tol)`` e-folds.
========================  ==========================================================================

Which dominates: the acting mechanism (of ``sgd_noise``, ``explicit_decay``, ``adaptive``) with the
shortest forgetting time. Every row's ``steps`` is a forgetting time of the one criterion (the drift
without decay; the decay's own relaxation (5); the whole pipeline), so the comparison is of like
with like; e-folding times are a separate column (``e_fold_steps``) and never compared. With
constant rates the pipeline's time is about ``ln(1 + T_noise / tau) * tau`` (tau the decay's
e-fold time, T_noise the drift's): about T_noise when the drift is faster, and a few tau when the
decay is. When no acting mechanism forgets within a scheduled run, none dominates (``"none"``):
``memory_left`` says what each leaves.

Schedules: a non-constant ``lr_multipliers`` makes every time the first step within the run that
reaches it, as ``memory_left`` does; a constant one is the constant-lr law, whose time may lie
beyond the run (``Pipeline.time_schedule``). An infinite time says why (``verdict``): "never" only
where nothing erases the memory even under an endless constant schedule (gradient flow; no decay
for the decay-only rows; no injection); a schedule that ends first gives "not within the run: the
schedule ends with memory m" (m the memory left at its end).

Parameter groups under cross-entropy (``ForgettingReport.groups``, :data:`GROUPS`): the BN-followed
conv weights (the ``pipeline`` row), the head x last-BN-gain pair whose product is the logit scale
(:mod:`initmem.theory.logit_scale`: kept without decay, model (4) with SGD + decay, law (7) with
Adam + coupled L2 given the equilibrium gain; no prediction for AdamW's decoupled decay, Adam
without decay, RMSprop or alpha on the head only), the other weights' null-space component (``linear_decay``) and the inner BN
affine (an explicit "no prediction" row). The groups with a prediction are ranked by their time;
``forgets_last`` names the slowest (ties: the first in :data:`GROUPS` order).

Units: optimizer steps, and epochs (steps / steps_per_epoch) when the pipeline knows its epoch
length. Forgetting is the one criterion of :mod:`initmem.theory.criterion` (``FORGETTING``): the
norm memory ``m = ln eff_lr ratio / its value at init`` of the BN weights at or below 1/e, i.e.
``|ln(eff_lr(alpha) / eff_lr(1))| <= 2 |ln alpha| / e`` (one e-fold of the initial deviation for the
other groups); each time here is the first step of the law's noise-free curve that reaches it. An
explicit ``tol`` (absolute, in nats) replaces the shared tolerance and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .checks import check_integer, check_memory, check_number
from .criterion import FORGETTING
from .linear import null_space_forgetting_time
from .logit_scale import (
    HEAD_ONLY_REFUSAL,
    adam_logit_scale_forgetting_steps,
    decay_per_step,
    required_log_contraction,
)
from .normalized import (
    AdaptiveMeanField,
    check_optimizer,
    decay_rate,
    grad_sq_unit_estimate,
    normalized_forgetting,
    sgd_norm_law,
)
from .units import accumulated_units

MECHANISMS = (
    "gradient_flow",
    "sgd_noise",
    "explicit_decay",
    "adaptive",
    "pipeline",
    "linear_decay",
)
#: Mechanisms that compete for "dominant".
COMPETING = ("sgd_noise", "explicit_decay", "adaptive")
#: Parameter groups of a BatchNorm network trained with cross-entropy, as ``ForgettingReport.groups``.
#: The init scales and learning rates the laws are evaluated for: they square alpha and lr and
#: multiply them by squared norms and gradients (alpha^2 |w_0|^2, lr^2 |g|^2), which overflow float64
#: far beyond these bounds (derived here; no run of interest comes near them).
ALPHA_RANGE = (1e-6, 1e6)
LR_LIMIT = 1e6
GROUPS = ("bn_conv_weights", "head_logit_scale", "non_bn_weights", "inner_bn_affine")


@dataclass(frozen=True)
class Pipeline:
    """A training pipeline as the theory sees it (conventions of ``docs/run-format.md``).

    ``l2`` coupled, ``weight_decay`` decoupled (w <- w - lr * wd * w), ``momentum`` heavy ball (SGD,
    RMSprop), ``beta2`` Adam's second-moment / RMSprop's smoothing constant. ``steps_per_epoch``
    converts steps to epochs; ``total_steps`` is the run's length and ``lr_multipliers`` its schedule
    (one factor per step; None: constant), both optional.
    """

    optimizer: str = "sgd"
    lr: float = 1e-3
    momentum: float = 0.0
    l2: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 128
    beta2: float = 0.999
    steps_per_epoch: int | None = None
    total_steps: int | None = None
    lr_multipliers: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        check_optimizer(self.optimizer)
        check_number("lr", self.lr, strict=True)
        check_number("momentum", self.momentum, high=1.0)
        check_number("l2", self.l2)
        check_number("weight_decay", self.weight_decay)
        check_integer("batch_size", self.batch_size)
        check_number("beta2", self.beta2, high=1.0)
        for name in ("steps_per_epoch", "total_steps"):
            if getattr(self, name) is not None:
                check_integer(name, getattr(self, name))
        if self.lr_multipliers is not None:
            mults = check_number("lr_multipliers", np.atleast_1d(self.lr_multipliers))
            if self.total_steps is not None and len(mults) != self.total_steps:
                raise ValueError(
                    f"lr_multipliers must have total_steps = {self.total_steps} entries "
                    f"(got {len(mults)})"
                )

    @property
    def time_schedule(self) -> tuple[float, np.ndarray | None]:
        """``(lr, multipliers)`` the forgetting times follow.

        A constant schedule (no ``lr_multipliers``, or all equal) is the constant-lr law at
        ``lr * multiplier``: its time may lie beyond the run's end (``memory_left`` says what the
        run leaves). Any other schedule: ``(lr, lr_multipliers)``, and a time is the first step
        within the run, ``inf`` if the run ends first.
        """
        if self.lr_multipliers is None:
            return float(self.lr), None
        mults = np.atleast_1d(np.asarray(self.lr_multipliers, dtype=np.float64))
        if np.all(mults == mults[0]) and mults[0] > 0:
            return float(self.lr * mults[0]), None
        return float(self.lr), mults

    @property
    def lrs(self) -> np.ndarray | None:
        """The learning rate at every step of the run (None when the length is unknown)."""
        if self.lr_multipliers is not None:
            return self.lr * np.asarray(self.lr_multipliers, dtype=np.float64)
        if self.total_steps is None:
            return None
        return np.full(int(self.total_steps), float(self.lr))


@dataclass(frozen=True)
class ForgettingReport:
    """Predicted forgetting of alpha under one pipeline.

    ``table``: one row per mechanism (:data:`MECHANISMS`) with columns ``mechanism``, ``acts``
    (does it act in this pipeline), ``steps`` and ``epochs`` (its forgetting time; ``inf`` never or
    not within the run, NaN not applicable or no closed form), ``memory_left`` (fraction of the
    initial memory left at the end of the run, with its schedule; NaN without a run length),
    ``e_fold_steps`` (the decay's e-folding time; NaN for the other rows), ``verdict`` (the time in
    words: "forgotten at step N", "never: ...", "not within the run: the schedule ends with memory
    m"), ``formula``. ``verdict``: the ``pipeline`` row's. ``layers``: the same per BN-conv fan-in. ``dominant``: the competing mechanism
    with the shortest forgetting time (or ``"none"``). ``steps`` / ``epochs``: the ``pipeline`` row. ``accumulated``: every
    unit of forgetting summed over the run, :func:`initmem.theory.units.accumulated_units` (the one
    definition, momentum and the init's ``d / |w_0|^2`` included; what ``sweep run --dry-run`` and
    the bridge print), None without a length.
    ``groups``: one row per parameter group (:data:`GROUPS`) with columns ``group``,
    ``prediction`` (False: an explicit "no prediction" row), ``steps``, ``epochs``, ``rank`` (1 =
    forgets first among the groups with a prediction; NaN without one), ``verdict`` and
    ``formula`` (or the reason there is none). ``forgets_last``: the predicted group that forgets last.
    """

    alpha: float
    table: pd.DataFrame
    layers: pd.DataFrame
    dominant: str
    steps: float
    epochs: float | None
    verdict: str
    accumulated: dict | None
    assumptions: dict
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    forgets_last: str = "none"

    def to_dict(self) -> dict:
        """JSON-ready: ``inf`` becomes the string ``"inf"`` and NaN becomes None."""

        def clean(value):
            if isinstance(value, (float, np.floating)):
                if math.isnan(value):
                    return None
                return "inf" if math.isinf(value) else float(value)
            if isinstance(value, (np.integer, np.bool_)):
                return value.item()
            return value

        rows = [{k: clean(v) for k, v in row.items()} for row in self.table.to_dict("records")]
        return {
            "alpha": self.alpha,
            "dominant": self.dominant,
            "steps": clean(self.steps),
            "epochs": clean(self.epochs),
            "verdict": self.verdict,
            "mechanisms": rows,
            "layers": [{k: clean(v) for k, v in r.items()} for r in self.layers.to_dict("records")],
            "accumulated": None
            if self.accumulated is None
            else {k: clean(v) for k, v in self.accumulated.items()},
            "assumptions": {k: clean(v) for k, v in self.assumptions.items()},
            "groups": [{k: clean(v) for k, v in r.items()} for r in self.groups.to_dict("records")],
            "forgets_last": self.forgets_last,
        }


def _memory_left_sgd(pipeline, grad_sq, alpha, init_norm_sq, *, l2, weight_decay):
    lrs = pipeline.lrs
    law = sgd_norm_law(lrs, grad_sq, momentum=pipeline.momentum, l2=l2, weight_decay=weight_decay)
    return float(abs(law.log_ratio(len(lrs), alpha, init_norm_sq)) / abs(2 * math.log(alpha)))


def _memory_left_adaptive(pipeline, grad_sq, alpha, init_norm_sq, fan_in, *, l2, weight_decay):
    lrs = pipeline.lrs
    mf = AdaptiveMeanField(
        pipeline.optimizer,
        pipeline.lr,
        fan_in,
        beta2=pipeline.beta2,
        momentum=pipeline.momentum if pipeline.optimizer == "rmsprop" else 0.0,
        l2=l2,
        weight_decay=weight_decay,
        grad_sq_unit=grad_sq,
        lr_multipliers=lrs / pipeline.lr,
    )
    x = mf.norm_sq([len(lrs)], [alpha**2 * init_norm_sq, init_norm_sq])[:, -1]
    return float(abs(math.log(x[0] / x[1])) / abs(2 * math.log(alpha)))


def _verdict(steps: float, memory_left: float, *, never: bool, scheduled: bool) -> str:
    """What an ``inf`` means, in words: ``never`` only where no mechanism erases the memory even
    with an endless constant schedule; a schedule that ends first says so, with the memory it
    leaves (``memory_left``, the fraction of the initial memory at the run's end)."""
    if math.isnan(steps):
        return "no closed form"
    if math.isfinite(steps):
        return f"forgotten at step {steps:.6g}"
    if never or not scheduled:
        return "never: no mechanism erases it"
    if math.isnan(memory_left):
        return "not within the run: the schedule ends first"
    check_memory("memory_left", memory_left)
    return f"not within the run: the schedule ends with memory {memory_left:.3g}"


def _layer_rows(pipeline, alpha, fan_in, init_sq_per_coord, grad_sq, tol):
    """Per mechanism for one BN-conv group of ``fan_in`` coordinates: ``(acts, steps, memory_left,
    e_fold_steps, never)``; ``steps``: forgetting times of the shared criterion (drift without
    decay, the decay's own time (5), the pipeline); ``never``: nothing would ever erase it."""
    lr, mults = pipeline.time_schedule
    common = dict(
        lr=lr,
        fan_in=fan_in,
        optimizer=pipeline.optimizer,
        momentum=pipeline.momentum,
        batch_size=pipeline.batch_size,
        beta2=pipeline.beta2,
        init_sq_per_coord=init_sq_per_coord,
        grad_sq_unit=grad_sq,
        tol=tol,
        lr_multipliers=mults,
    )
    sgd = pipeline.optimizer == "sgd"
    has_decay = pipeline.l2 > 0 or pipeline.weight_decay > 0
    full = normalized_forgetting(
        alpha, l2=pipeline.l2, weight_decay=pipeline.weight_decay, **common
    )
    bare = normalized_forgetting(alpha, **common) if has_decay else full
    run_known = pipeline.lrs is not None and abs(math.log(alpha)) > 0

    def left(l2, weight_decay):
        if not run_known:
            return math.nan
        if sgd:
            return _memory_left_sgd(
                pipeline, grad_sq, alpha, full.init_norm_sq, l2=l2, weight_decay=weight_decay
            )
        return _memory_left_adaptive(
            pipeline, grad_sq, alpha, full.init_norm_sq, fan_in, l2=l2, weight_decay=weight_decay
        )

    drift_left = left(0.0, 0.0)
    full_left = left(pipeline.l2, pipeline.weight_decay) if has_decay else drift_left
    no_injection = sgd and grad_sq == 0
    nan = math.nan
    rows = {
        "gradient_flow": (True, math.inf, 1.0 if run_known else nan, nan, True),
        "sgd_noise": (
            sgd,
            bare.steps if sgd else nan,
            drift_left if sgd else nan,
            nan,
            no_injection,
        ),
        "explicit_decay": (
            has_decay,
            full.decay_steps if has_decay else nan,
            full_left if has_decay else nan,
            full.relaxation_steps if has_decay else nan,
            no_injection,
        ),
        "adaptive": (not sgd, nan if sgd else bare.steps, nan if sgd else drift_left, nan, False),
        "pipeline": (True, full.steps, full_left, nan, no_injection),
    }
    return rows, full


def _linear_row(pipeline: Pipeline, alpha: float, tol: float) -> tuple[bool, float, float, str]:
    """Null-space / non-BN weights: the init component shrinks only by decay (``linear`` module).

    Returns ``(acts, steps, memory_left, formula)``. The time is the first step at which the
    accumulated e-folds sum_t -ln(1 - kappa_t) reach ``ln(|alpha - 1| / tol)``, kappa_t = lr_t (l2 /
    (1 - mu) + wd) (``normalized.decay_rate``), ``inf`` if a schedule ends first; constant lr: the
    closed form (:func:`~initmem.theory.linear.null_space_forgetting_time`). ``memory_left``:
    ``exp(-sum_t -ln(1 - kappa_t))`` over the run, the fraction of the initial deviation left.
    """
    efolds = max(math.log(abs(alpha - 1.0) / tol), 0.0) if alpha != 1 else 0.0
    formula = "ln(|alpha-1|/tol) * e-fold time of (1 - lr (l2/(1-mu) + wd)) per step"
    sgd = pipeline.optimizer == "sgd"
    if not sgd and pipeline.l2 > 0:
        return True, math.nan, math.nan, "no closed form: Adam-family with coupled L2 (simulate)"
    acts = pipeline.l2 > 0 or pipeline.weight_decay > 0
    if not sgd:
        formula = "ln(|alpha-1|/tol) / -ln(1 - lr wd)"
    momentum = pipeline.momentum if sgd else 0.0
    lrs = pipeline.lrs
    left = math.nan
    if lrs is not None:
        kappa = decay_rate(lrs, pipeline.l2, pipeline.weight_decay, momentum)
        left = float(np.exp(-np.sum(-np.log1p(-np.atleast_1d(kappa)))))
    lr, mults = pipeline.time_schedule
    if mults is not None:
        kappa = decay_rate(lr * mults, pipeline.l2, pipeline.weight_decay, momentum)
        reached = np.cumsum(-np.log1p(-np.atleast_1d(kappa))) >= efolds
        steps = float(np.argmax(reached) + 1) if efolds > 0 and reached.any() else math.inf
        return acts, (0.0 if efolds == 0 else steps), left, formula + " (over the schedule)"
    e_fold = null_space_forgetting_time(
        lr, l2=pipeline.l2 if sgd else 0.0, momentum=momentum, weight_decay=pipeline.weight_decay
    )
    return acts, e_fold * efolds, left, formula


def _head_row(
    pipeline: Pipeline,
    alpha: float,
    tol: float,
    *,
    logit_scale: float | None,
    equilibrium_logit_scale: float | None,
    equilibrium_gain: float | None,
    both: bool,
):
    """The head x last-BN-gain pair (:mod:`initmem.theory.logit_scale`): (prediction, steps,
    formula). ``logit_scale``: RMS logit at alpha = 1 at init (default 1);
    ``equilibrium_logit_scale``: where the run settles (model (4); without it the decay-only
    bound); ``equilibrium_gain``: RMS BN gain where the alpha = 1 run settles (Adam + coupled L2,
    law (7)); ``both``: alpha scales the head and the BN gain (logits ~ alpha^2), else no law."""
    init_scale = 1.0 if logit_scale is None else logit_scale
    equilibrium = equilibrium_logit_scale
    if pipeline.optimizer != "sgd":
        return _adaptive_head_row(pipeline, alpha, tol, equilibrium_gain, both)
    if pipeline.l2 == 0 and pipeline.weight_decay == 0:
        return True, math.inf, "kept: gradient flow conserves the balance |W_j|^2 - gamma_j^2"
    if not both:
        return False, math.nan, "no prediction: " + HEAD_ONLY_REFUSAL
    needed = required_log_contraction(
        alpha, init_scale=init_scale, equilibrium_scale=equilibrium, both=both, tol=tol
    )
    formula = (
        "-ln u / (-2 ln(1 - kappa)), model (4) of logit_scale"
        if equilibrium is not None
        else "ln(|alpha^k - 1| / |e^{+-tol} - 1|) / (-2 ln(1 - kappa)) (decay-only bound)"
    )
    momentum = pipeline.momentum
    lr, mults = pipeline.time_schedule
    if mults is None:
        kappa = decay_per_step(lr, pipeline.l2, pipeline.weight_decay, momentum)
        return True, needed / (-2.0 * math.log1p(-kappa)), formula
    kappa = decay_rate(lr * mults, pipeline.l2, pipeline.weight_decay, momentum)
    reached = np.cumsum(-2.0 * np.log1p(-np.atleast_1d(kappa))) >= needed
    return True, float(np.argmax(reached) + 1) if reached.any() else math.inf, formula


def _adaptive_head_row(pipeline: Pipeline, alpha: float, tol: float, equilibrium_gain, both):
    """Adam-family head: law (7) of logit_scale where it applies, else the reason it does not."""
    reason = None
    if pipeline.optimizer == "rmsprop":
        reason = "RMSprop: untested (logit_scale docstring)"
    elif pipeline.weight_decay > 0:
        reason = (
            "AdamW's decoupled decay: the alpha runs do not contract at (1 - lr wd); no law "
            "(logit_scale docstring)"
        )
    elif pipeline.l2 == 0:
        reason = "Adam without decay: forgotten only algebraically, no closed form"
    elif not both:
        reason = "alpha on the head only: law (7) is for alpha on the head and the BN gain"
    elif equilibrium_gain is None:
        reason = "law (7) needs equilibrium_gain (RMS BN gain where the alpha = 1 run settles)"
    if reason is not None:
        return False, math.nan, "no prediction: " + reason
    lr, mults = pipeline.time_schedule
    steps = adam_logit_scale_forgetting_steps(
        alpha,
        lr,
        l2=pipeline.l2,
        equilibrium_gain=equilibrium_gain,
        betas=(0.9, pipeline.beta2),
        tol=tol,
        lr_multipliers=mults,
    )
    formula = "first t with |d_t| <= tol gamma*, d_0 = alpha - gamma*, Adam recursion (6): law (7)"
    return True, steps, formula + (" (over the schedule)" if mults is not None else "")


def _group_table(pipeline, bn, linear, head):
    """``ForgettingReport.groups`` and the group that forgets last (module docstring of report).

    ``bn``: the pipeline row's ``(steps, memory_left, verdict)``; ``linear``: ``_linear_row``'s
    tuple; ``head``: ``_head_row``'s."""
    head_pred, head_steps, head_formula = head
    _, linear_steps, linear_left, linear_formula = linear
    scheduled = pipeline.time_schedule[1] is not None
    no_decay = pipeline.l2 == 0 and pipeline.weight_decay == 0
    rows = [
        (
            "bn_conv_weights",
            True,
            bn[0],
            bn[2],
            "the pipeline row (effective learning rate lr/|w|^2)",
        ),
        (
            "head_logit_scale",
            head_pred,
            head_steps,
            _verdict(head_steps, math.nan, never=no_decay, scheduled=scheduled),
            head_formula,
        ),
        (
            "non_bn_weights",
            not math.isnan(linear_steps),
            linear_steps,
            _verdict(linear_steps, linear_left, never=no_decay, scheduled=scheduled),
            linear_formula,
        ),
        (
            "inner_bn_affine",
            False,
            math.nan,
            "no prediction",
            "no prediction: inner BN gains/biases are neither scale-invariant nor a head pair "
            "(no closed form; their memory stays near 1 in the demo's runs)",
        ),
    ]
    table = pd.DataFrame(rows, columns=["group", "prediction", "steps", "verdict", "formula"])
    table.loc[~table.prediction, "steps"] = math.nan
    table.loc[~table.prediction, "verdict"] = "no prediction"
    per_epoch = pipeline.steps_per_epoch
    table.insert(3, "epochs", table.steps / per_epoch if per_epoch else math.nan)
    table.insert(4, "rank", table.steps.where(table.prediction).rank(method="min"))
    predicted = table[table.prediction]
    last = "none" if predicted.empty else str(predicted.loc[predicted.steps.idxmax()].group)
    return table[["group", "prediction", "steps", "epochs", "rank", "verdict", "formula"]], last


def _tolerance(tol: float | None, initial: float) -> float:
    """``tol`` when given (absolute), else the shared criterion's for a statistic starting at
    ``initial`` (:meth:`~initmem.theory.criterion.ForgettingCriterion.tolerance`); alpha = 1 has
    nothing to forget (any positive tolerance gives time 0)."""
    if tol is not None:
        return tol
    return FORGETTING.tolerance(initial) if initial != 0 else FORGETTING.level


def _grad_sq_per_layer(pipeline, fan_ins, grad_sq_unit, per_example_grad_sq_unit) -> list[float]:
    """|g_hat|^2 per step per filter for each entry of ``fan_ins``: ``grad_sq_unit`` (one number
    or one per layer), else the estimate of :func:`~initmem.theory.normalized.grad_sq_unit_estimate`."""
    if grad_sq_unit is not None and np.ndim(grad_sq_unit) > 0:
        values = np.atleast_1d(check_number("grad_sq_unit", grad_sq_unit))
        if len(values) != len(fan_ins):
            raise ValueError(
                f"grad_sq_unit must be one number or one per fan_in ({len(fan_ins)}; got {len(values)})"
            )
        return [float(v) for v in values]
    value = grad_sq_unit_estimate(pipeline.batch_size, grad_sq_unit, per_example_grad_sq_unit)
    return [value] * len(fan_ins)


def _accumulated(pipeline, fan_ins, init_sq_per_coord, inv_init_sq_per_coord) -> dict | None:
    """Every unit of forgetting summed over the run (:func:`~initmem.theory.units.accumulated_units`);
    None without a run length. ``epochs`` is left out when the epoch length is unknown."""
    lrs = pipeline.lrs
    if lrs is None:
        return None
    if inv_init_sq_per_coord is None:
        per_coord = [
            1.0 / init_sq_per_coord if init_sq_per_coord is not None else 3.0 * fan_in
            for fan_in in fan_ins
        ]
        inv_init_sq_per_coord = float(np.mean(per_coord))
    totals = accumulated_units(
        lrs,
        optimizer=pipeline.optimizer,
        batch_size=pipeline.batch_size,
        steps_per_epoch=pipeline.steps_per_epoch or 1,
        momentum=pipeline.momentum,
        l2=pipeline.l2,
        weight_decay=pipeline.weight_decay,
        inv_init_sq_per_coord=check_number("inv_init_sq_per_coord", inv_init_sq_per_coord),
    )
    if not pipeline.steps_per_epoch:
        totals.pop("epochs")
    return totals


_FORMULAS = {
    "gradient_flow": "d|w|^2/dt = -2 <w, g> = 0",
    "sgd_noise": "|w|^4_T = |w|^4_0 + 2 (lr/(1-mu))^2 sum |g_hat|^2",
    "explicit_decay": "relaxation from the equilibrium: -ln Q_T >= ln(|alpha^2p - 1| / |r - 1|) "
    "((5) of normalized); e-fold time -1/ln(q): SGD 1/(4 lr lambda_eff), AdamW 1/(2 lr wd)",
    "adaptive": "|w|^2_T = |w|^2_0 + lr^2 d T (mean field with v's lag)",
}


def _check_inputs(pipeline, alpha, fan_ins, init_sq_per_coord, inv_init_sq_per_coord, **scales):
    """Every argument of :func:`predict_forgetting` checked (one line naming it); the fan-ins."""
    check_number("alpha", alpha, low=ALPHA_RANGE[0], high=ALPHA_RANGE[1])
    check_number("lr", pipeline.lr, strict=True, high=LR_LIMIT)
    for name, value in (
        *scales.items(),
        ("init_sq_per_coord", init_sq_per_coord),
        ("inv_init_sq_per_coord", inv_init_sq_per_coord),
    ):
        if value is not None:
            check_number(name, value, strict=True)
    fan_ins = [int(check_number("fan_ins", f, low=1.0)) for f in np.atleast_1d(fan_ins)]
    if not fan_ins:
        raise ValueError("fan_ins must name at least one BN-followed conv")
    return fan_ins


def _layer_table(pipeline, alpha, fan_ins, grad_sqs, init_sq_per_coord, tol):
    """One row per (BN-conv fan-in, mechanism) and the pipeline's law (its formula)."""
    per_layer, formula = [], ""
    columns = ("acts", "steps", "memory_left", "e_fold_steps", "never")
    for fan_in, grad_sq in zip(fan_ins, grad_sqs, strict=True):
        rows, full = _layer_rows(pipeline, alpha, fan_in, init_sq_per_coord, grad_sq, tol)
        formula = full.formula
        for name, values in rows.items():
            per_layer.append(
                {"fan_in": fan_in, "mechanism": name, **dict(zip(columns, values, strict=True))}
            )
    return pd.DataFrame(per_layer), formula


def _slowest(sub: pd.DataFrame, column: str) -> float:
    """The slowest layer's value (the memory lasts until every layer has forgotten); NaN if any
    layer has none."""
    return float(sub[column].max()) if sub[column].notna().all() else math.nan


def _mechanism_table(pipeline, layers, linear, formulas) -> pd.DataFrame:
    """``ForgettingReport.table``: each mechanism's slowest layer, and ``linear_decay``."""
    scheduled = pipeline.time_schedule[1] is not None
    rows = []
    for name in MECHANISMS:
        if name == "linear_decay":
            acts, steps, left, _ = linear
            e_fold, never = math.nan, pipeline.l2 == 0 and pipeline.weight_decay == 0
        else:
            sub = layers[layers.mechanism == name]
            acts, never = bool(sub.acts.iloc[0]), bool(sub.never.all())
            steps, left = _slowest(sub, "steps"), _slowest(sub, "memory_left")
            e_fold = _slowest(sub, "e_fold_steps")
        rows.append(
            {
                "mechanism": name,
                "acts": acts,
                "steps": steps,
                "epochs": steps / pipeline.steps_per_epoch
                if pipeline.steps_per_epoch
                else math.nan,
                "memory_left": left,
                "e_fold_steps": e_fold,
                "verdict": _verdict(steps, left, never=never, scheduled=scheduled)
                if acts
                else "does not act",
                "formula": formulas[name],
            }
        )
    return pd.DataFrame(rows)


def _dominant(table: pd.DataFrame) -> str:
    """The acting competing mechanism with the shortest forgetting time (ties: the first of
    :data:`COMPETING`); ``"none"`` when none forgets (within the run, with a schedule)."""
    acting = table[table.mechanism.isin(COMPETING) & table.acts]
    finite = acting[np.isfinite(acting.steps)]
    return "none" if finite.empty else str(finite.loc[finite.steps.idxmin()].mechanism)


def _assumptions(tol, tol_bn, grad_sq_unit, per_example_grad_sq_unit, grad_sqs, init_sq, fan_ins):
    """``ForgettingReport.assumptions``: the criterion, the gradient scale and its source, the init."""
    source = (
        "given"
        if grad_sq_unit is not None
        else "per_example_grad_sq_unit / batch_size"
        + ("" if per_example_grad_sq_unit is not None else " (placeholder 1.0 per example)")
    )
    return {
        "forgetting": FORGETTING.name
        if tol is None
        else f"|ln eff_lr ratio| <= tol = {tol:g} (absolute)",
        "tol": tol_bn,
        "grad_sq_unit": float(np.max(grad_sqs)),
        "grad_sq_unit_source": source,
        "init_sq_per_coord": "1 / (3 fan_in)" if init_sq is None else init_sq,
        "fan_ins": ",".join(str(f) for f in fan_ins),
    }


def predict_forgetting(
    pipeline: Pipeline,
    alpha: float,
    *,
    fan_ins=(576,),
    init_sq_per_coord: float | None = None,
    inv_init_sq_per_coord: float | None = None,
    grad_sq_unit=None,
    per_example_grad_sq_unit: float | None = None,
    tol: float | None = None,
    logit_scale: float | None = None,
    equilibrium_logit_scale: float | None = None,
    head_and_bn_scaled: bool = True,
    equilibrium_gain: float | None = None,
) -> ForgettingReport:
    """Predicted forgetting time of init scale ``alpha`` (vs 1) for every mechanism of ``pipeline``.

    ``fan_ins``: coordinates per filter of each BN-followed conv; each mechanism's time is the
    slowest layer's (``layers``: per layer). ``init_sq_per_coord``: init variance per coordinate at
    alpha = 1 (default ``1 / (3 fan_in)``); ``inv_init_sq_per_coord``: mean ``d / |w_0|^2`` at
    alpha = 1, the ``adam`` unit's. ``grad_sq_unit``: |g_hat|^2 per step per filter (one, or one
    per fan-in), else ``per_example_grad_sq_unit / batch_size`` (placeholder 1 per example).
    ``tol``: None, the shared criterion (norm memory <= 1/e); a number, an absolute threshold on
    ``|ln eff_lr ratio|``. The head group's inputs: :func:`_head_row`. Parts, in order:
    :func:`_layer_table`, :func:`_linear_row`, :func:`_mechanism_table`, :func:`_head_row`,
    :func:`_group_table`, :func:`_dominant`.
    """
    head_in = dict(
        logit_scale=logit_scale,
        equilibrium_logit_scale=equilibrium_logit_scale,
        equilibrium_gain=equilibrium_gain,
    )
    init = (init_sq_per_coord, inv_init_sq_per_coord)
    fan_ins = _check_inputs(pipeline, alpha, fan_ins, *init, **head_in)
    grad_sqs = _grad_sq_per_layer(pipeline, fan_ins, grad_sq_unit, per_example_grad_sq_unit)
    tol = None if tol is None else check_number("tol", tol, strict=True)
    tol_bn = _tolerance(tol, 2.0 * math.log(alpha))
    layers, law = _layer_table(pipeline, alpha, fan_ins, grad_sqs, init_sq_per_coord, tol_bn)
    linear = _linear_row(pipeline, alpha, _tolerance(tol, alpha - 1.0))
    formulas = {**_FORMULAS, "pipeline": law, "linear_decay": linear[3]}
    table = _mechanism_table(pipeline, layers, linear, formulas)
    overall = table.set_index("mechanism").loc["pipeline"]
    head_tol = _tolerance(tol, (2.0 if head_and_bn_scaled else 1.0) * math.log(alpha))
    head = _head_row(pipeline, alpha, head_tol, both=head_and_bn_scaled, **head_in)
    bn = (overall.steps, overall.memory_left, overall.verdict)
    groups, forgets_last = _group_table(pipeline, bn, linear, head)
    sources = (grad_sq_unit, per_example_grad_sq_unit, grad_sqs)
    return ForgettingReport(
        alpha=float(alpha),
        table=table,
        layers=layers,
        dominant=_dominant(table),
        steps=float(overall.steps),
        epochs=None if not pipeline.steps_per_epoch else float(overall.epochs),
        verdict=str(overall.verdict),
        accumulated=_accumulated(pipeline, fan_ins, *init),
        assumptions=_assumptions(tol, tol_bn, *sources, init_sq_per_coord, fan_ins),
        groups=groups,
        forgets_last=forgets_last,
    )


__all__ = [
    "ALPHA_RANGE",
    "COMPETING",
    "GROUPS",
    "LR_LIMIT",
    "MECHANISMS",
    "ForgettingReport",
    "Pipeline",
    "predict_forgetting",
]
