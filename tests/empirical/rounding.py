"""Tolerances for comparing two float32 computations of one run, derived from the computation.

Two computations of the same mathematics in another reduction order (a packed run and the same run
alone; one sweep and another) agree:

- after one step, to float32 rounding: :func:`one_step_rtol` = ``LAMBDA`` sqrt(n) u, the probabilistic
  bound on the rounding error of a computation of ``n`` = (layers in the chain) x (longest reduction)
  float32 operations (Higham & Mary 2019, "A new approach to probabilistic rounding error analysis",
  Thm 3.1: the error exceeds lambda sqrt(n) u with probability at most 2 exp(-lambda^2 / 2) per
  result), relative to the largest magnitude in each tensor;
- after many steps, to the rounding sensitivity of the run itself. Training carries a first-step
  difference forward and can amplify it (a value that crosses a ReLU or max-pool switching point takes
  another branch): two unpacked float32 runs whose batches differ only in the order of their examples
  (the same mathematics: BatchNorm and the mean loss do not depend on it) drift apart by 3e-6 to 5e-2
  within 8 steps, where float64 keeps them 1e-14 apart (docs/run-format.md, "Packed runs").
  :func:`train_reference` therefore trains a reference run and ``TWINS`` batch-permuted twins; a
  number of the other computation may differ from the reference by ``SENSITIVITY_FACTOR`` times the
  largest twin difference (the other computation is one more perturbation of the same size), and never
  less than the one-step tolerance (a number the twins leave bit-equal). Counts (epochs, steps,
  learning rates, statuses) must be equal; accuracies and predictions may differ only as much as the
  twins' do (not at all, where the twins agree).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from initmem.empirical.runfolder import read_log, read_predictions
from initmem.empirical.trainer import Trainer, train

#: float32 unit roundoff
U32 = float(np.finfo(np.float32).eps) / 2
#: the tests' tiny ResNet-9 (width 1/16, batch 4): 9 layers in the chain (8 convs and the head); its longest reduction is the
#: first conv's weight gradient (and BatchNorm's statistics) over batch 4 x 32 x 32 positions
CHAIN_LAYERS, LONGEST_REDUCTION = 9, 4 * 32 * 32
LAMBDA = 4.0


def one_step_rtol(chain_layers: int, longest_reduction: int) -> float:
    """lambda sqrt(n) u with n = chain_layers x longest_reduction (the module docstring)."""
    return LAMBDA * float(np.sqrt(chain_layers * longest_reduction)) * U32


ONE_STEP_RTOL = one_step_rtol(CHAIN_LAYERS, LONGEST_REDUCTION)  # 4.6e-5
ATOL = 1e-9
SENSITIVITY_FACTOR = 10.0
TWINS = 2
EQUAL_KEYS = ("epoch", "step", "lr")
ACCURACY_KEYS = ("train_acc", "train_eval_acc", "val_acc", "test_acc")


@contextmanager
def permuted_batches(twin: int) -> Iterator[None]:
    """Train with every batch's examples in another order (after augmentation, so each example keeps
    its crop and flip): the same mathematics, another float32 reduction order."""
    original = Trainer.next_batch

    def next_batch(self, batch):
        images, labels = original(self, batch)
        generator = torch.Generator().manual_seed(1000 * twin + self.step)
        order = torch.randperm(len(labels), generator=generator)
        return images[order].contiguous(memory_format=self.memory_format), labels[order]

    with mock.patch.object(Trainer, "next_batch", next_batch):
        yield


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
    """A run trained alone, its permuted twins' results, and the tolerance of every number it holds."""

    result: object
    twins: list
    numbers: dict[str, np.ndarray]
    tolerance: dict[str, float]

    @property
    def run_dir(self) -> str:
        return self.result.run_dir


def _field(key: str) -> str:
    """``log:train_acc@2`` -> ``train_acc``."""
    return key.split(":", 1)[1].split("@")[0]


def train_reference(config) -> Reference:
    """Train ``config`` alone and ``TWINS`` times with permuted batches (in sibling folders)."""
    result = train(config)
    numbers = run_numbers(result.run_dir)
    twins, twin_numbers = [], []
    for twin in range(TWINS):
        with permuted_batches(twin):
            twins.append(train(config.replace(out_dir=f"{config.out_dir}-twin{twin}")))
        twin_numbers.append(run_numbers(twins[-1].run_dir))
    return Reference(result, twins, numbers, tolerances(numbers, twin_numbers))


def tolerances(numbers: dict[str, np.ndarray], others: list[dict]) -> dict[str, float]:
    """The tolerance of every number of a run, from the other computations of it in ``others``
    (the module docstring's rule): counts equal; accuracies and predictions as far apart as the
    farthest other; every other number ``SENSITIVITY_FACTOR`` times that, at least the one-step
    tolerance."""
    tolerance = {}
    for key, value in numbers.items():
        if key.startswith("pred:"):  # how many predictions another computation changed
            tolerance[key] = max(int(np.sum(t[key] != value)) for t in others)
            continue
        gap = max(float(np.max(np.abs(t[key] - value), initial=0.0)) for t in others)
        if _field(key) in EQUAL_KEYS:
            tolerance[key] = 0.0
        elif _field(key) in ACCURACY_KEYS:
            tolerance[key] = gap
        else:
            scale = float(np.max(np.abs(value), initial=0.0))
            tolerance[key] = max(ATOL, ONE_STEP_RTOL * scale, SENSITIVITY_FACTOR * gap)
    return tolerance


def widened_by(reference: Reference, other_dir) -> Reference:
    """``reference`` with the run in ``other_dir`` counted as one more twin (:func:`tolerances`).

    For a test whose subject is not packing's rounding but what else a pack may change (a pack-mate
    that diverges): ``other_dir`` holds the same run packed with a benign mate, so the tolerance
    holds the packing's own deviation. On an AVX-512 CPU that deviation can exceed the twins' (the
    packed first forward is not bit-identical there, and a near-tie at a ReLU or max-pool then
    switches: 1% of ``dist_from_init`` after 4 steps, against 3e-7 between twins; docs/run-format.md,
    "Packed runs")."""
    others = [run_numbers(t.run_dir) for t in reference.twins] + [run_numbers(other_dir)]
    tolerance = tolerances(reference.numbers, others)
    return Reference(reference.result, reference.twins, reference.numbers, tolerance)


def assert_same_result(reference: Reference, result) -> None:
    """The result's counts equal the reference's; its best epoch and accuracies too, unless a twin's
    differ (then within the twins' range)."""
    solo = reference.result
    assert (result.hash, result.status, result.epochs_run, result.steps_run) == (
        solo.hash,
        solo.status,
        solo.epochs_run,
        solo.steps_run,
    )
    for field in ("best_epoch", "best_val_acc", "test_acc"):
        seen = [getattr(r, field) for r in (solo, *reference.twins)]
        assert min(seen) <= getattr(result, field) <= max(seen), (field, seen)


def assert_same_run(reference: Reference, packed_dir) -> None:
    """Every number of ``packed_dir`` is within the reference's tolerance (docstring above)."""
    packed = run_numbers(packed_dir)
    assert packed.keys() == reference.numbers.keys()
    for key, value in reference.numbers.items():
        if key.startswith("pred:"):
            assert np.sum(packed[key] != value) <= reference.tolerance[key], key
        elif np.all(np.isnan(value)):
            assert np.all(np.isnan(packed[key])), key
        else:
            gap = float(np.max(np.abs(packed[key] - value), initial=0.0))
            assert gap <= reference.tolerance[key], (key, gap, reference.tolerance[key])
    for name in (
        "best.pt",
        "last.pt",
    ):  # each run's checkpoint holds its own tensors, not the stack
        state = torch.load(Path(packed_dir) / name, weights_only=False)
        model = state if name == "best.pt" else state["trainer"]["model"]
        for tensor in model.values():
            assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


def relative_gap(actual: torch.Tensor, desired: torch.Tensor) -> float:
    scale = float(desired.detach().abs().max())
    return float((actual.detach() - desired.detach()).abs().max()) / max(scale, ATOL)
