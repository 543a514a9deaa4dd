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
    "initmem.empirical.sweep.FINISHED_STATES": "initmem.empirical.runfolder.FINISHED_STATES",
    "initmem.empirical.sweep.RUN_STATES": "initmem.empirical.runfolder.RUN_STATES",
    "initmem.empirical.sweep.lock_is_held": "initmem.empirical.runfolder.lock_is_held",
    "initmem.empirical.sweep.read_result": "initmem.empirical.runfolder.read_result",
    "initmem.empirical.sweep.run_lock": "initmem.empirical.runfolder.run_lock",
    "initmem.empirical.sweep.run_state": "initmem.empirical.runfolder.run_state",
    "initmem.empirical.sweep.write_atomic": "initmem.empirical.runfolder.write_atomic",
    "initmem.empirical.sweep.execute_pack": "initmem.empirical.workers.execute_pack",
    "initmem.empirical.sweep.execute_run": "initmem.empirical.workers.execute_run",
    "initmem.empirical.sweep.execute_task": "initmem.empirical.workers.execute_task",
    "initmem.empirical.sweep.fail_task": "initmem.empirical.workers.fail_task",
    "initmem.empirical.sweep.record_failure": "initmem.empirical.workers.record_failure",
    "initmem.empirical.sweep.task_runs": "initmem.empirical.workers.task_runs",
    "initmem.empirical.runlog.RUN_FILES": "initmem.empirical.runfolder.RUN_FILES",
    "initmem.empirical.runlog.RunFiles": "initmem.empirical.runfolder.RunFiles",
    "initmem.empirical.runlog.RunResult": "initmem.empirical.runfolder.RunResult",
    "initmem.empirical.runlog.load_result": "initmem.empirical.runfolder.load_result",
    "initmem.empirical.runlog.read_log": "initmem.empirical.runfolder.read_log",
    "initmem.empirical.runlog.read_predictions": "initmem.empirical.runfolder.read_predictions",
}

__all__ = ["DEPRECATED"]
