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
- :mod:`~initmem.theory.schedule`: a run's schedule (per-step lr factors, checks).
- :mod:`~initmem.theory.units`: every unit of forgetting of a pipeline (the one definition).
- :mod:`~initmem.theory.criterion`: what "forgotten" means (``FORGETTING``: norm memory <= 1/e), shared by every room.
- :mod:`~initmem.theory.forgetting`: every mechanism's forgetting time for one pipeline.
- :mod:`~initmem.theory.simulate`, :mod:`~initmem.theory.normalized_sim`: simulators used by the tests.
"""

import importlib

#: Submodules, loaded on first use (PEP 562): ``import initmem.theory`` (and ``initmem.theory.schedule``,
#: which RunConfig's validation uses) loads neither pandas nor torch.
_SUBMODULES = (
    "checks",
    "criterion",
    "deep_linear",
    "empirical_kernels",
    "forgetting",
    "kernels",
    "linear",
    "logistic",
    "logit_scale",
    "normalized",
    "normalized_sim",
    "ntk",
    "schedule",
    "simulate",
    "units",
)
#: Public name -> the submodule that defines it.
_HOMES = {
    "FORGETTING": "criterion",
    "ForgettingCriterion": "criterion",
    "ForgettingReport": "forgetting",
    "Pipeline": "forgetting",
    "predict_forgetting": "forgetting",
    "Kernel": "kernels",
    "relu_mlp_kernel": "kernels",
    "normalized_forgetting": "normalized",
    "gradient_descent_mse": "ntk",
    "accumulated_units": "units",
    "empirical_ntk": "empirical_kernels",
}


def __getattr__(name: str):
    """Submodules and their public names, loaded on first use (PEP 562); ``empirical_ntk`` and
    ``empirical_kernels`` import torch (seconds), the others numpy, scipy and pandas."""
    if name in _SUBMODULES:
        # import_module: a `from . import` would ask this __getattr__ again before loading it
        return importlib.import_module(f"{__name__}.{name}")
    if name in _HOMES:
        value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "FORGETTING",
    "ForgettingCriterion",
    "ForgettingReport",
    "Kernel",
    "Pipeline",
    "accumulated_units",
    "checks",
    "criterion",
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
    "units",
]
