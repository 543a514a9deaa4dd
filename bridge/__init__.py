"""The bridge: forgetting measured from a sweep's logs, predicted by the theory, and fitted.

    from initmem.empirical.tables import load_sweep
    from initmem.bridge import fit
    report = fit(load_sweep("runs/demo"))      # a BridgeReport of pandas DataFrames
    print(report.summary()); report.save("runs/demo/bridge")

``initmem.bridge.fit`` is the function; it lives in :mod:`initmem.bridge.fitting` with the other fits
(``from initmem.bridge.fitting import loglog_fit``). Import direction: ``measure`` <- ``predict`` <-
``plots`` <- ``fitting`` (the report draws its figures; the figures never import the report's module).
"""

from initmem.bridge.fits import fit_decay_time
from initmem.bridge.fitting import BridgeReport, fit, summarize
from initmem.bridge.measure import (
    BridgeDataError,
    function_forgetting_times,
    norm_forgetting_times,
)
from initmem.bridge.predict import identity_check, predicted_memory_curves, predicted_times
from initmem.bridge.units import UNITS, evaluation_units
from initmem.empirical.curves import norm_memory_curves

__all__ = [
    "BridgeDataError",
    "BridgeReport",
    "UNITS",
    "evaluation_units",
    "fit",
    "fit_decay_time",
    "function_forgetting_times",
    "identity_check",
    "norm_forgetting_times",
    "norm_memory_curves",
    "predicted_memory_curves",
    "predicted_times",
    "summarize",
]
