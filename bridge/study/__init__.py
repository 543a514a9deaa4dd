"""The bridge's publication layer: the studies of a sweep and what they publish.

Above the bridge core (:mod:`initmem.bridge`: fits, measure, units, predict, the unit decision,
fitting, plots, preregister, from_run), which imports nothing of it:

* :mod:`~initmem.bridge.study.unit_of_forgetting`: the unit-of-forgetting study (``unit_study``),
  written by :mod:`~initmem.bridge.study.document` and drawn by :mod:`~initmem.bridge.study.figures`;
* :mod:`~initmem.bridge.study.architectures`: the study of a sweep that trains several models
  (``architecture_study``), written by :mod:`~initmem.bridge.study.architecture_document`;
* :mod:`~initmem.bridge.study.calibrate` scores every verdict on synthetic sweeps of a design
  (:mod:`~initmem.bridge.study.synthetic`); :mod:`~initmem.bridge.study.seeds` the spread decision at
  each seed count; :mod:`~initmem.bridge.study.framing` what a study says of its own sweep;
  :mod:`~initmem.bridge.study.equivalence` function memory kept, gone or cannot tell;
  :mod:`~initmem.bridge.study.accuracy` the accuracy levels.

The two entry points are loaded on first use (PEP 562).
"""

from initmem.lazy import lazy_names

#: Public name -> the module of this package that defines it.
_HOMES = {
    "UnitStudy": "unit_of_forgetting",
    "unit_study": "unit_of_forgetting",
    "ArchitectureStudy": "architectures",
    "architecture_study": "architectures",
}

__all__ = sorted(_HOMES, key=str.lower)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)
