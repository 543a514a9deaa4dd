"""Everything that trains: data, BatchNorm ResNets, the training loop, sweeps, memory metrics, reports.

``initmem.empirical.train(config)`` is the training function (module ``trainer``). The names below are loaded on first use
(PEP 562), so ``import initmem.empirical`` and its light modules (``config``, ``sweep``, ``runfolder``)
do not import torch; ``docs/architecture.md`` maps the modules.
"""

from initmem.lazy import lazy_names

#: Public name -> the module of this package that defines it.
_HOMES = {
    "ConfigError": "config",
    "RunConfig": "config",
    "DataNotFoundError": "data",
    "DataSplits": "data",
    "clear_data_cache": "data",
    "load_splits": "data",
    "shared_splits": "data",
    "write_cifar10_fixture": "data",
    "accuracy_table": "memory",
    "disagreement_table": "memory",
    "load_epochs": "tables",
    "load_layers": "tables",
    "load_runs": "tables",
    "load_sweep": "tables",
    "pipeline_columns": "tables",
    "spread_table": "memory",
    "apply_init_scale": "models",
    "build_model": "models",
    "resnet9": "models",
    "resnet18": "models",
    "scale_invariant_parameters": "models",
    "scale_invariance_check": "models",
    "residual_stream_parameters": "models",
    "residual_stream_check": "models",
    "default_model": "models",
    "PluginError": "plugins",
    "train_packed": "packing",
    "write_report": "report",
    "RunResult": "runfolder",
    "load_result": "runfolder",
    "SweepSpec": "sweep",
    "list_presets": "sweep",
    "run_sweep": "sweep",
    "sweep_status": "sweep",
    "RunFolderError": "trainer",
    "Trainer": "trainer",
    "train": "trainer",
}

__all__ = sorted(_HOMES, key=str.lower)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)
