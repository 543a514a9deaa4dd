"""Forgetting time scales in closed form, each checked against simulation in the tests.

Submodules (use them as namespaces, like neural-tangents' ``nt.predict`` and ``nt.stax``):

- :mod:`~initmem.theory.linear`: least squares under GD, L2, decoupled decay, momentum, SGD.
- :mod:`~initmem.theory.deep_linear`: balance invariants, Saxe mode dynamics.
- :mod:`~initmem.theory.kernels` and :mod:`~initmem.theory.ntk`: NNGP/NTK kernels and the lazy regime;
  :mod:`~initmem.theory.empirical_kernels`: empirical kernels of a torch module (the only module that
  imports torch: it and :func:`empirical_ntk` load on first use, so ``import initmem.theory`` does not).
- :mod:`~initmem.theory.normalized`: scale-invariant (BatchNorm) weights, the paper's mechanism.
- :mod:`~initmem.theory.logistic`: cross-entropy on a linear model (max margin, minimizers).
- :mod:`~initmem.theory.logit_scale`: the head x last-BN-gain pair under cross-entropy.
- :mod:`~initmem.theory.checks`: the argument checks every theory module shares.
- :mod:`~initmem.theory.schedule`: accumulated regularization of a schedule.
- :mod:`~initmem.theory.forgetting`: every mechanism's forgetting time for one pipeline.
- :mod:`~initmem.theory.simulate`, :mod:`~initmem.theory.normalized_sim`: simulators used by the tests.
"""

import importlib

from . import (
    checks,
    deep_linear,
    forgetting,
    kernels,
    linear,
    logistic,
    logit_scale,
    normalized,
    normalized_sim,
    ntk,
    schedule,
    simulate,
)
from .forgetting import ForgettingReport, Pipeline, predict_forgetting
from .kernels import Kernel, relu_mlp_kernel
from .normalized import normalized_forgetting
from .ntk import gradient_descent_mse
from .schedule import accumulated_regularization


def __getattr__(name: str):
    """``empirical_ntk`` and ``empirical_kernels``, loaded on first use (PEP 562)."""
    if name in ("empirical_kernels", "empirical_ntk"):
        # deferred: torch and torch.func take seconds to import (import_module: a `from . import`
        # would ask this __getattr__ again for the submodule before loading it)
        empirical_kernels = importlib.import_module(f"{__name__}.empirical_kernels")

        return empirical_kernels if name == "empirical_kernels" else empirical_kernels.empirical_ntk
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ForgettingReport",
    "Kernel",
    "Pipeline",
    "accumulated_regularization",
    "checks",
    "deep_linear",
    "empirical_kernels",
    "empirical_ntk",
    "forgetting",
    "gradient_descent_mse",
    "kernels",
    "linear",
    "logistic",
    "logit_scale",
    "normalized",
    "normalized_forgetting",
    "normalized_sim",
    "ntk",
    "predict_forgetting",
    "relu_mlp_kernel",
    "schedule",
    "simulate",
]
