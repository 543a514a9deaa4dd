"""Deprecated home of the design in units of forgetting: :mod:`initmem.bridge.units` owns it now.

Every name that lived here (``design_table``, ``design_correlation``, ``format_design``,
``init_inv_norm_sq``, ``config_units``) keeps working from here with a DeprecationWarning until 0.2
(``initmem.bridge.deprecated``).
"""

from initmem.bridge.deprecated import DEPRECATED
from initmem.deprecation import moved


def __getattr__(name: str):
    """Deprecated names of this module (``initmem.bridge.deprecated``; PEP 562)."""
    return moved(__name__, name, DEPRECATED)
