"""The empirical room's deprecated names: old -> new, removed in 0.2 (:mod:`initmem.deprecation`).

Each module named on the left ends with ``__getattr__`` returning ``moved(__name__, name,
DEPRECATED)``, so the old name keeps working with a DeprecationWarning until 0.2.
"""

DEPRECATED = {
    "initmem.empirical.memory.INTERPOLATION_THRESHOLD": "initmem.empirical.tables.INTERPOLATION_THRESHOLD",
    "initmem.empirical.memory.RESULT_COLUMNS": "initmem.empirical.tables.RESULT_COLUMNS",
    "initmem.empirical.memory.FINISHED": "initmem.empirical.tables.FINISHED",
    "initmem.empirical.memory.finished_runs": "initmem.empirical.tables.finished_runs",
    "initmem.empirical.memory.interpolates": "initmem.empirical.tables.interpolates",
    "initmem.empirical.memory.load_epochs": "initmem.empirical.tables.load_epochs",
    "initmem.empirical.memory.load_layers": "initmem.empirical.tables.load_layers",
    "initmem.empirical.memory.load_sweep": "initmem.empirical.tables.load_sweep",
    "initmem.empirical.memory.pipeline_columns": "initmem.empirical.tables.pipeline_columns",
    "initmem.empirical.memory.pipeline_id": "initmem.empirical.tables.pipeline_id",
    "initmem.empirical.memory.pipeline_labels": "initmem.empirical.tables.pipeline_labels",
}

__all__ = ["DEPRECATED"]
