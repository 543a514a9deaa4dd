"""Forgetting time scales in closed form, each checked against simulation in the tests.

Submodules (use them as namespaces, like neural-tangents' ``nt.predict`` and ``nt.stax``):

- :mod:`~initmem.theory.linear`: least squares under GD, L2, decoupled decay, momentum, SGD.
- :mod:`~initmem.theory.deep_linear`: balance invariants, Saxe mode dynamics.
- :mod:`~initmem.theory.kernels` and :mod:`~initmem.theory.ntk`: NNGP/NTK kernels and the lazy regime.
- :mod:`~initmem.theory.normalized`: scale-invariant (BatchNorm) weights, the paper's mechanism.
- :mod:`~initmem.theory.schedule`: accumulated regularization of a schedule.
- :mod:`~initmem.theory.units`: every unit of forgetting of a pipeline (the one definition).
- :mod:`~initmem.theory.forgetting`: every mechanism's forgetting time for one pipeline.
- :mod:`~initmem.theory.simulate`, :mod:`~initmem.theory.normalized_sim`: simulators used by the tests.
"""

from . import (
    deep_linear,
    forgetting,
    kernels,
    linear,
    normalized,
    normalized_sim,
    ntk,
    schedule,
    simulate,
    units,
)
from .forgetting import ForgettingReport, Pipeline, predict_forgetting
from .kernels import Kernel, empirical_ntk, relu_mlp_kernel
from .normalized import normalized_forgetting
from .ntk import gradient_descent_mse
from .schedule import accumulated_regularization

__all__ = [
    "ForgettingReport",
    "Kernel",
    "Pipeline",
    "accumulated_regularization",
    "deep_linear",
    "empirical_ntk",
    "forgetting",
    "gradient_descent_mse",
    "kernels",
    "linear",
    "normalized",
    "normalized_forgetting",
    "normalized_sim",
    "ntk",
    "predict_forgetting",
    "relu_mlp_kernel",
    "schedule",
    "simulate",
    "units",
]
