"""Everything that trains: data, BatchNorm ResNets, the training loop, sweeps, memory metrics, reports.

``initmem.empirical.train(config)`` is the training function (the module is ``initmem.empirical.train``
in ``sys.modules``; import its other names from there).
"""

from .config import ConfigError, RunConfig
from .data import (
    DataNotFoundError,
    DataSplits,
    clear_data_cache,
    load_splits,
    shared_splits,
    write_cifar10_fixture,
)
from .memory import (
    accuracy_table,
    disagreement_table,
    load_epochs,
    load_layers,
    load_sweep,
    pipeline_columns,
    spread_table,
)
from .models import apply_init_scale, build_model, resnet9, resnet18, scale_invariant_parameters
from .packing import train_packed
from .report import write_report
from .runlog import RunResult, load_result
from .sweep import SweepSpec, list_presets, run_sweep, sweep_status
from .trainer import RunFolderError, Trainer, train

__all__ = [
    "ConfigError",
    "DataNotFoundError",
    "DataSplits",
    "RunConfig",
    "RunFolderError",
    "RunResult",
    "SweepSpec",
    "Trainer",
    "accuracy_table",
    "apply_init_scale",
    "build_model",
    "clear_data_cache",
    "disagreement_table",
    "list_presets",
    "load_epochs",
    "load_layers",
    "load_result",
    "load_splits",
    "load_sweep",
    "pipeline_columns",
    "resnet9",
    "resnet18",
    "run_sweep",
    "scale_invariant_parameters",
    "shared_splits",
    "spread_table",
    "sweep_status",
    "train",
    "train_packed",
    "write_cifar10_fixture",
    "write_report",
]
