"""Shared fixtures for the empirical tests: the tiny real CIFAR-10 fixture and tiny run configs."""

import pytest

from initmem.empirical.config import RunConfig
from initmem.empirical.data import write_cifar10_fixture


@pytest.fixture(scope="session")
def cifar_fixture_root(tmp_path_factory):
    """A folder holding ``cifar-10-batches-py`` built from foolbox's 20 real CIFAR-10 test images."""
    root = tmp_path_factory.mktemp("cifar")
    write_cifar10_fixture(root)
    return root


@pytest.fixture(scope="session")
def fixture_data_dir(tmp_path_factory):
    """A ``data_dir`` for ``dataset = "cifar10-fixture"`` with the fixture already built."""
    root = tmp_path_factory.mktemp("data")
    write_cifar10_fixture(root / "cifar10-fixture")
    return root


@pytest.fixture
def tiny_config(fixture_data_dir, tmp_path):
    """``tiny_config(**changes)``: a ResNet-9 of width 1/16 on the fixture's 16 training images,
    batch 4 (4 steps per epoch), 2 epochs, quiet, writing into a fresh folder under tmp_path."""
    counter = iter(range(1000))

    def make(**changes) -> RunConfig:
        values = dict(
            dataset="cifar10-fixture",
            data_dir=str(fixture_data_dir),
            width=1 / 16,
            batch_size=4,
            epochs=2,
            lr=0.05,
            momentum=0.9,
            eval_batch_size=8,
            out_dir=str(tmp_path / f"run{next(counter)}"),
            quiet=True,
        )
        values.update(changes)
        return RunConfig.from_dict(values)

    return make
