"""The bridge: forgetting measured from a sweep's logs, predicted by the theory, and fitted.

    from initmem.empirical.tables import load_sweep
    from initmem.bridge import fit
    report = fit(load_sweep("runs/demo"))      # a BridgeReport of pandas DataFrames
    print(report.summary()); report.save("runs/demo/bridge")

``initmem.bridge.fit`` is the function; it lives in :mod:`initmem.bridge.fitting` with the other fits
(``from initmem.bridge.fitting import loglog_fit``). The core's import direction: ``fits`` <-
``measure`` <- ``predict`` <- ``plots`` <- ``fitting`` (the report draws its figures; the figures
never import the report's module). The publication layer above it, the studies with their documents,
calibration, synthetic sweeps and seed counts, is :mod:`initmem.bridge.study`; the core imports
nothing of it. The names below are loaded on first use (PEP 562), so ``import initmem.bridge``
imports neither pandas nor the study; ``docs/architecture.md`` maps the modules.
"""

import importlib

#: Public name -> the module of this package that defines it.
_HOMES = {
    "fit_decay_time": "fits",
    "BridgeReport": "fitting",
    "fit": "fitting",
    "summarize": "fitting",
    "BridgeDataError": "measure",
    "function_forgetting_times": "measure",
    "norm_forgetting_times": "measure",
    "identity_check": "predict",
    "predicted_memory_curves": "predict",
    "predicted_times": "predict",
    "UNITS": "units",
    "evaluation_units": "units",
    "unit_study": "study.unit_of_forgetting",
    "architecture_study": "study.architectures",
}
#: Names of other rooms that this package re-exports (home module by full name).
_ELSEWHERE = {"norm_memory_curves": "initmem.empirical.curves"}

__all__ = sorted([*_HOMES, *_ELSEWHERE], key=str.lower)


def __getattr__(name: str):
    if name in _HOMES:
        home = f"{__name__}.{_HOMES[name]}"
    elif name in _ELSEWHERE:
        home = _ELSEWHERE[name]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
