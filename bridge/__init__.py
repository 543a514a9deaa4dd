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

from initmem.lazy import lazy_names

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
    "norm_memory_curves": "initmem.empirical.curves",  # re-exported from the empirical room
}

__all__ = sorted(_HOMES, key=str.lower)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)
