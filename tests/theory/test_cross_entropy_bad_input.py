"""Bad input through every public function of initmem.theory.logistic and .logit_scale: each case
raises ValueError naming the field (nan, wrong shapes, out-of-range numbers, values past the float
range), before any solve."""

import numpy as np
import pytest

from initmem.theory import logistic as lg
from initmem.theory import logit_scale as ls
from initmem.theory.simulate import simulate_logit_scale
from tests.theory.test_logistic import nonseparable_problem, separable_problem

XS, YS = separable_problem()
XN, YN = nonseparable_problem()
NAN_X = XS.copy()
NAN_X[0, 0] = np.nan
HUGE_X = XS * 1e300  # finite, but its squares overflow
W3 = np.ones(3)

DATA_FUNCTIONS = {
    "loss": lambda X, y: lg.loss(X, y, np.ones(X.shape[1])),
    "gradient": lambda X, y: lg.gradient(X, y, np.ones(X.shape[1])),
    "hessian": lambda X, y: lg.hessian(X, y, np.ones(X.shape[1])),
    "kept_component": lambda X, y: lg.kept_component(X, np.ones(X.shape[1])),
    "separability": lg.separability,
    "hard_margin": lg.hard_margin,
    "max_margin": lg.max_margin,
    "residual_limit": lambda X, y: lg.residual_limit(X, y, 0.5),
    "residual_decay_exponent": lg.residual_decay_exponent,
    "init_share": lambda X, y: lg.init_share(X, y, np.ones(X.shape[1]), 0.5, 10.0),
    "init_share_forgetting_steps": lambda X, y: lg.init_share_forgetting_steps(
        X, y, np.ones(X.shape[1]), 0.5, 0.1
    ),
    "minimizer": lambda X, y: lg.minimizer(X, y, l2=0.1),
    "forgetting_times": lambda X, y: lg.forgetting_times(X, y, 0.5, l2=0.1),
    "forgetting_table": lambda X, y: lg.forgetting_table(X, y, 0.5, l2=0.1),
    "transient_bounds": lambda X, y: lg.transient_bounds(X, y, np.ones(X.shape[1]), 0.5, 0.5),
}


BAD_DATA = {
    "nan X": (NAN_X, YS, "X must be finite"),
    "X past float range": (HUGE_X, YS, "X must be finite and its Gram matrix"),
    "3-D X": (XS[:, :, None], YS, "X must be a non-empty 2-D array"),
    "short y": (XS, YS[:-1], r"y must have shape \(8,\)"),
    "0/1 labels": (XS, np.where(YS > 0, 1.0, 0.0), r"labels in \{-1, \+1\}"),
    "nan y": (XS, np.full(8, np.nan), "y must be finite"),
}
#: kept_component takes no labels: only the X cases apply to it.
CASES = [
    (name, case)
    for name in sorted(DATA_FUNCTIONS)
    for case in BAD_DATA
    if name != "kept_component" or BAD_DATA[case][0] is not XS
]


@pytest.mark.parametrize("name, case", CASES)
def test_logistic_rejects_bad_data(name, case):
    X, y, match = BAD_DATA[case]
    with pytest.raises(ValueError, match=match):
        DATA_FUNCTIONS[name](X, y)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: lg.loss(XS, YS, np.ones(2)), r"w must be a finite vector of shape \(3,\)"),
        (lambda: lg.gradient(XS, YS, [np.nan, 0, 0]), "w must be a finite vector"),
        (lambda: lg.hessian(XS, YS, np.ones((3, 1))), "w must be a finite vector"),
        (lambda: lg.kept_component(XS, np.ones(4)), "w0 must be a finite vector"),
        (lambda: lg.residual_limit(XS, YS, 0.0), "lr must be finite and > 0"),
        (lambda: lg.residual_limit(XS, YS, np.nan), "lr must be finite and > 0"),
        (lambda: lg.residual_limit(XS, YS, 1e300), r"lr must be < 8 n / sigma_max\(Z\)\^2"),
        (lambda: lg.init_share(XS, YS, W3, 0.5, -1.0), "steps must be finite and > 0"),
        (lambda: lg.init_share(XS, YS, W3, 0.5, [10.0, np.inf]), "steps must be finite"),
        (lambda: lg.init_share(XS, YS, np.ones(2), 0.5, 10.0), "w0 must be a finite vector"),
        (lambda: lg.init_share_forgetting_steps(XS, YS, W3, 0.5, 1.0), "tol must be finite"),
        (lambda: lg.init_share_forgetting_steps(XS, YS, W3, 0.5, np.nan), "tol must be finite"),
        (lambda: lg.minimizer(XN, YN, l2=-1.0), "l2 must be finite and >= 0"),
        (lambda: lg.minimizer(XN, YN, momentum=1.0), "momentum must be finite"),
        (lambda: lg.minimizer(XN, YN, weight_decay=np.inf), "weight_decay must be finite"),
        (lambda: lg.minimizer(XS, YS), "no minimizer"),
        (lambda: lg.forgetting_times(XN, YN, -0.5, l2=0.1), "lr must be finite and > 0"),
        (lambda: lg.forgetting_table(XN, YN, np.nan, l2=0.1), "lr must be finite and > 0"),
        (lambda: lg.transient_bounds(XN, YN, np.ones(4), 0.5, 0.0), "radius must be finite"),
        (lambda: lg.transient_bounds(XN, YN, np.ones(4), 1e6, 0.5), "lr must be <= 1 / smooth"),
        (lambda: lg.transient_bounds(XN, YN, np.ones(3), 0.5, 0.5), "w0 must be a finite vector"),
        (lambda: lg.hard_margin(XN, YN), "not linearly separable"),
    ],
)
def test_logistic_rejects_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


W, G = np.ones((3, 4)), np.ones(4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ls.balance(np.ones(4), G), r"W must be \(K, p\)"),
        (lambda: ls.balance(W, np.ones(3)), r"W must be \(K, p\)"),
        (lambda: ls.balance(W * np.nan, G), "W must be finite"),
        (lambda: ls.balance(W, G, np.ones(3)), "beta must have shape"),
        (lambda: ls.balance(W, np.full(4, np.inf)), "gamma must be finite"),
        (lambda: ls.balance_after_step(np.zeros(4), W, G, 0.0), "lr must be finite and > 0"),
        (lambda: ls.balance_after_step(np.zeros(4), W, G, 0.1, l2=-1), "l2 must be finite"),
        (lambda: ls.balance_after_step(np.zeros((2, 4)), W, G, 0.1), "b must have shape"),
        (lambda: ls.balance_after_step(np.zeros(4), W, G, 0.1, weight_decay=np.nan), "weight_dec"),
        (lambda: ls.decay_per_step(1.0, l2=1.0), r"must be < 1"),
        (lambda: ls.decay_per_step(0.1, momentum=1.5), "momentum must be finite"),
        (lambda: ls.balance_forgetting_steps(np.nan, 0.1), "lr must be finite"),
        (lambda: ls.balance_forgetting_steps(0.1, 0.1, momentum=-0.1), "momentum must be"),
        (lambda: ls.required_log_contraction(0.0), "alpha must be finite and > 0"),
        (lambda: ls.required_log_contraction(4.0, tol=np.nan), "tol must be finite"),
        (lambda: ls.required_log_contraction(4.0, init_scale=-1.0), "init_scale must be"),
        (lambda: ls.required_log_contraction(4.0, equilibrium_scale=0.0), "equilibrium_scale"),
        (lambda: ls.required_log_contraction(4.0, both=1), "both must be a bool"),
        (lambda: ls.required_log_contraction(4.0, both=False), "no law"),
        (
            lambda: simulate_logit_scale(np.ones((4, 2)), [0, 1, 0, 1], 2, 2.0, 0.1, 5, both="no"),
            "both must be a bool",
        ),
        (lambda: ls.logit_scale_forgetting_steps(4.0, 0.0, l2=0.1), "lr must be finite"),
        (lambda: ls.logit_scale_forgetting_steps(np.inf, 0.1, l2=0.1), "alpha must be finite"),
        (lambda: ls.logit_scale_forgetting_steps(4.0, 0.1, l2=20.0), r"must be < 1"),
        (lambda: ls.adam_excess_path(np.nan, 0.01, 10), "excess must be finite"),
        (lambda: ls.adam_excess_path(1.0, 0.01, 2.5), "steps must be an integer"),
        (lambda: ls.adam_excess_path(1.0, 0.01, 10, betas=(0.9,)), "betas must be a pair"),
        (lambda: ls.adam_excess_path(1.0, 0.01, 10, betas=(0.9, 1.0)), "beta2 must be"),
        (lambda: ls.adam_excess_path(1.0, 0.01, 3, lr_multipliers=[1, 1]), "3 entries"),
        (lambda: ls.adam_excess_path(1.0, 0.01, 2, lr_multipliers=[1, np.nan]), "lr_multipl"),
        (
            lambda: ls.adam_logit_scale_forgetting_steps(4.0, 0.01, l2=0.1, equilibrium_gain=0.0),
            "equilibrium_gain must be",
        ),
        (
            lambda: ls.adam_logit_scale_forgetting_steps(
                4.0, 0.01, l2=0.1, equilibrium_gain=0.3, max_steps=0
            ),
            "max_steps must be an integer",
        ),
        (
            lambda: ls.adam_logit_scale_forgetting_steps(
                4.0, 0.01, l2=0.1, equilibrium_gain=0.3, betas=(0.9, 0.99, 0.9)
            ),
            "betas must be a pair",
        ),
    ],
)
def test_logit_scale_rejects_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
