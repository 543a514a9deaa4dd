"""The bridge room's deprecated names: old -> new, removed in 0.2 (:mod:`initmem.deprecation`).

Each module named on the left ends with ``__getattr__`` returning ``moved(__name__, name,
DEPRECATED)``, so the old name keeps working with a DeprecationWarning until 0.2.
"""

DEPRECATED = {
    "initmem.bridge.SweepError": "initmem.bridge.BridgeDataError",
    "initmem.bridge.measure.SweepError": "initmem.bridge.measure.BridgeDataError",
    "initmem.bridge.measure.accuracy_table": "initmem.empirical.curves.accuracy_curves",
    "initmem.bridge.measure.DecayFit": "initmem.bridge.fits.DecayFit",
    "initmem.bridge.measure.fit_decay_time": "initmem.bridge.fits.fit_decay_time",
    "initmem.bridge.measure.SCALE_INVARIANT_MEAN": "initmem.empirical.curves.SCALE_INVARIANT_MEAN",
    "initmem.bridge.measure.SCALED_FRACTION": "initmem.empirical.curves.SCALED_FRACTION",
    "initmem.bridge.measure.norm_memory_curves": "initmem.empirical.curves.norm_memory_curves",
    "initmem.bridge.measure.spread_curves": "initmem.empirical.curves.spread_curves",
    "initmem.bridge.measure.disagreement_curves": "initmem.empirical.curves.disagreement_curves",
    "initmem.bridge.stats.spread_null": "initmem.empirical.memory.spread_null",
    "initmem.bridge.stats.disagreement_excess": "initmem.empirical.memory.disagreement_excess",
    "initmem.bridge.stats.mean_interval": "initmem.empirical.memory.mean_interval",
    "initmem.bridge.study.function_memory": "initmem.empirical.memory.function_memory",
    "initmem.bridge.study.norm_memory_end": "initmem.empirical.memory.norm_memory_end",
    "initmem.bridge.study.norm_sentences": "initmem.empirical.memory.norm_sentences",
    "initmem.bridge.study.FORGOTTEN_LEVEL": "initmem.empirical.memory.FORGOTTEN_LEVEL",
    "initmem.bridge.study.ALPHA_LEVEL": "initmem.empirical.memory.ALPHA_LEVEL",
    "initmem.bridge.study.FUNCTION_COLUMNS": "initmem.empirical.memory.FUNCTION_COLUMNS",
    "initmem.bridge.predict.unit_increments": "initmem.bridge.units.run_unit_increments",
    "initmem.bridge.predict.accumulated_units": "initmem.bridge.units.evaluation_units",
    "initmem.bridge.predict.init_scale": "initmem.bridge.units.init_scale",
    "initmem.bridge.predict.steps_to_unit": "initmem.bridge.units.steps_to_unit",
    "initmem.bridge.predict.phase_boundary": "initmem.bridge.units.phase_boundary",
    "initmem.bridge.design.design_table": "initmem.bridge.units.design_table",
    "initmem.bridge.design.design_correlation": "initmem.bridge.units.design_correlation",
    "initmem.bridge.design.format_design": "initmem.bridge.units.format_design",
    "initmem.bridge.design.init_inv_norm_sq": "initmem.bridge.units.init_inv_norm_sq",
    "initmem.bridge.design.config_units": "initmem.bridge.units.config_units",
    "initmem.bridge.accumulated_units": "initmem.bridge.units.evaluation_units",
}

__all__ = ["DEPRECATED"]
