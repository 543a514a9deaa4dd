"""Deprecated alias of :mod:`initmem.empirical.runfolder`, which owns the run folder now.

``RunFiles``, ``RunResult``, ``load_result``, ``read_log``, ``read_predictions`` and ``RUN_FILES``
keep working from here with the same signatures; new code imports them from ``runfolder``.
"""

from .runfolder import RUN_FILES, RunFiles, RunResult, load_result, read_log, read_predictions

__all__ = ["RUN_FILES", "RunFiles", "RunResult", "load_result", "read_log", "read_predictions"]
