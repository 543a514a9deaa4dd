"""initmem: how much of a network's random initialization survives training, and how fast it is forgotten.

Three rooms, one package: :mod:`initmem.theory` (forgetting time scales in closed form),
:mod:`initmem.empirical` (BatchNorm ResNets, sweeps, memory metrics) and :mod:`initmem.bridge`
(measured against predicted forgetting). They are imported on first use, so ``import initmem`` is cheap.
"""

import importlib

__version__ = "0.1.0"
__all__ = ["bridge", "empirical", "theory"]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f"initmem.{name}")
    raise AttributeError(f"module 'initmem' has no attribute {name!r}")
