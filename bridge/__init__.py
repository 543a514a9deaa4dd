"""The bridge: forgetting measured from a sweep's logs, predicted by the theory, and fitted.

    from initmem.empirical.memory import load_sweep
    from initmem.bridge import fit
    report = fit(load_sweep("runs/demo"))      # a BridgeReport of pandas DataFrames
    print(report.summary()); report.save("runs/demo/bridge")

``initmem.bridge.fit`` is the function; it lives in :mod:`initmem.bridge.fitting` with the other fits
(``from initmem.bridge.fitting import loglog_fit``). Import direction: ``measure`` <- ``predict`` <-
``plots`` <- ``fitting`` (the report draws its figures; the figures never import the report's module).
"""

import warnings

from initmem.bridge.fitting import BridgeReport, fit, summarize
from initmem.bridge.measure import (
    BridgeDataError,
    fit_decay_time,
    function_forgetting_times,
    norm_forgetting_times,
    norm_memory_curves,
)
from initmem.bridge.predict import (
    UNITS,
    accumulated_units,
    identity_check,
    predicted_memory_curves,
    predicted_times,
)


def __getattr__(name: str):
    """``SweepError``: the deprecated name of :class:`BridgeDataError` (PEP 562)."""
    if name == "SweepError":
        warnings.warn(
            "initmem.bridge.SweepError is deprecated: use initmem.bridge.BridgeDataError",
            DeprecationWarning,
            2,
        )
        return BridgeDataError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BridgeDataError",
    "BridgeReport",
    "UNITS",
    "accumulated_units",
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
