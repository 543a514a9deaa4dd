"""Deprecated alias of :mod:`initmem.empirical.runfolder`, which owns the run folder now.

``RunFiles``, ``RunResult``, ``load_result``, ``read_log``, ``read_predictions`` and ``RUN_FILES``
keep working from here with a DeprecationWarning until 0.2 (``initmem.empirical.deprecated``).
"""

from initmem.deprecation import moved

from .deprecated import DEPRECATED


def __getattr__(name: str):
    """Deprecated names of this module (``initmem.empirical.deprecated``; PEP 562)."""
    return moved(__name__, name, DEPRECATED)


# the names are served by __getattr__ (with a warning), not defined here
__all__ = ["RUN_FILES", "RunFiles", "RunResult", "load_result", "read_log", "read_predictions"]  # noqa: F822
