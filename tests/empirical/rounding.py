"""Tolerances for comparing two computations of one run, derived from the computation.

Two computations of the same mathematics in another reduction order (a packed run and the same run
alone; a compiled run and an eager one; one sweep and another) agree:

- after one float32 step, to float32 rounding: :func:`one_step_rtol` = ``LAMBDA`` sqrt(n) u, the
  probabilistic bound on the rounding error of a computation of ``n`` = (layers in the chain) x
  (longest reduction) operations in unit roundoff ``u`` (Higham & Mary 2019, "A new approach to
  probabilistic rounding error analysis", Thm 3.1: the error exceeds lambda sqrt(n) u with
  probability at most 2 exp(-lambda^2 / 2) per result), relative to the largest magnitude in each
  tensor;
- over whole runs, in float64 (``precision = "fp64"``), to :data:`RUN_RTOL`. Training carries a
  first-step difference forward and can amplify it; in float32 a tiny run amplifies it past any fixed
  tolerance (two unpacked float32 runs whose batches differ only in the order of their examples are
  3e-6 apart after one step and up to 5e-2 after two, where a value crosses a ReLU or max-pool
  switching point), which is why these tests used to measure each run's sensitivity with two
  batch-permuted twins (two more trainings per run). In float64 the first-step difference is
  u64 / u32 = 2^-29 times smaller, far from any switching point (the same twins stay 1e-14 apart
  after 8 steps: docs/run-format.md, "Packed runs"), so a run's numbers are compared directly:
  counts (epochs, steps, learning rates, statuses), accuracies and predictions equal; every other
  number within ``RUN_RTOL`` of the largest magnitude it holds (``ATOL`` where that is 0), with
  ``RUN_RTOL`` = the float64 one-step bound times ``GROWTH``, the amplification allowed over a
  tests' run (derived here: 100 times the smooth growth measured over 8 float32 steps, 2e-6 to 2e-4).
  A packing or resume bug (mixed channel blocks, another batch, a stale buffer) shows at 1e-4 or more.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from initmem.empirical.runfolder import read_log, read_predictions

#: float32 and float64 unit roundoff
U32 = float(np.finfo(np.float32).eps) / 2
U64 = float(np.finfo(np.float64).eps) / 2
#: the tests' tiny ResNet-9 (width 1/16, batch 4): 9 layers in the chain (8 convs and the head); its
#: longest reduction is the first conv's weight gradient (and BatchNorm's statistics) over batch
#: 4 x 32 x 32 positions
CHAIN_LAYERS, LONGEST_REDUCTION = 9, 4 * 32 * 32
LAMBDA = 4.0


def one_step_rtol(chain_layers: int, longest_reduction: int, unit_roundoff: float = U32) -> float:
    """lambda sqrt(n) u with n = chain_layers x longest_reduction (the module docstring)."""
    return LAMBDA * float(np.sqrt(chain_layers * longest_reduction)) * unit_roundoff


ONE_STEP_RTOL = one_step_rtol(CHAIN_LAYERS, LONGEST_REDUCTION)  # 4.6e-5
GROWTH = 1e4
RUN_RTOL = GROWTH * one_step_rtol(CHAIN_LAYERS, LONGEST_REDUCTION, U64)  # 8.5e-10
ATOL = 1e-9
EQUAL_KEYS = ("epoch", "step", "lr", "train_acc", "train_eval_acc", "val_acc", "test_acc")


def run_numbers(run_dir) -> dict[str, np.ndarray]:
    """Every number a run folder holds, by name: log values (scalar and per layer) per epoch,
    predictions, and the tensors of best.pt and last.pt."""
    numbers = {}
    for record in read_log(run_dir):
        epoch = record["epoch"]
        for key, value in record.items():
            if key not in ("wall_time", "layers"):
                numbers[f"log:{key}@{epoch}"] = np.asarray(value, dtype=np.float64)
        for layer, values in record["layers"].items():
            for key, value in values.items():
                numbers[f"log:{layer}.{key}@{epoch}"] = np.asarray(value, dtype=np.float64)
    for key, value in read_predictions(run_dir).items():
        numbers[f"pred:{key}"] = value
    for name in ("best.pt", "last.pt"):
        state = torch.load(Path(run_dir) / name, weights_only=False)
        model = state if name == "best.pt" else state["trainer"]["model"]
        for key, tensor in model.items():
            numbers[f"{name}:{key}"] = tensor.double().numpy()
    return numbers


@dataclass
class Reference:
    """A float64 run trained alone: its folder, every number the folder holds, and its result
    (the :class:`~initmem.empirical.trainer.RunResult` where the test has it)."""

    run_dir: str
    numbers: dict[str, np.ndarray]
    result: object = None


def reference_of(run_dir, result=None) -> Reference:
    """The :class:`Reference` of the finished float64 run in ``run_dir`` (checked: a float32 run,
    whose rounding training amplifies past any fixed tolerance, is no reference)."""
    state = torch.load(Path(run_dir) / "best.pt", weights_only=False)
    dtypes = {t.dtype for t in state.values() if t.is_floating_point()}
    assert dtypes == {torch.float64}, f"a reference run trains with precision='fp64' ({dtypes})"
    return Reference(str(run_dir), run_numbers(run_dir), result)


def _field(key: str) -> str:
    """``log:train_acc@2`` -> ``train_acc``."""
    return key.split(":", 1)[1].split("@")[0]


def assert_same_result(reference: Reference, result) -> None:
    """The result's counts, best epoch and accuracies equal the reference's."""
    fields = ("hash", "status", "epochs_run", "steps_run", "best_epoch", "best_val_acc", "test_acc")
    solo = reference.result
    assert [getattr(result, f) for f in fields] == [getattr(solo, f) for f in fields]


def assert_same_run(reference: Reference, other_dir, differ: tuple[str, ...] = ()) -> None:
    """Every number of ``other_dir`` is the reference's (the module docstring's rule): counts,
    accuracies and predictions equal, every other number within ``RUN_RTOL`` of its scale; the keys
    in ``differ`` (say ``pred:run_hash``, for a run of another config) must differ."""
    other = run_numbers(other_dir)
    assert other.keys() == reference.numbers.keys()
    for key, value in reference.numbers.items():
        if key in differ:
            assert np.any(other[key] != value), key
        elif key.startswith("pred:") or _field(key) in EQUAL_KEYS:
            np.testing.assert_array_equal(other[key], value, err_msg=key)
        elif np.all(np.isnan(value)):
            assert np.all(np.isnan(other[key])), key
        else:
            scale = float(np.max(np.abs(value), initial=0.0))
            gap = float(np.max(np.abs(other[key] - value), initial=0.0))
            assert gap <= max(ATOL, RUN_RTOL * scale), (key, gap, scale)
    for name in (
        "best.pt",
        "last.pt",
    ):  # each run's checkpoint holds its own tensors, not the stack
        state = torch.load(Path(other_dir) / name, weights_only=False)
        model = state if name == "best.pt" else state["trainer"]["model"]
        for tensor in model.values():
            assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


def relative_gap(actual: torch.Tensor, desired: torch.Tensor) -> float:
    scale = float(desired.detach().abs().max())
    return float((actual.detach() - desired.detach()).abs().max()) / max(scale, ATOL)
