"""Sweeps for the bridge tests: synthetic ones with known forgetting, and one tiny real sweep."""

from __future__ import annotations

import pytest

from tests.bridge.synthetic import known_pipelines, write_synthetic_sweep

#: A real sweep small enough for a test: 20 CIFAR-10 images, a width-1/8 ResNet-9, 4 steps per epoch.
TINY_SWEEP = """
name = "bridge-test"
[base]
dataset = "cifar10-fixture"
train_size = 16
val_size = 4
test_size = 20
width = 0.125
alpha_groups = ["conv"]
batch_size = 4
epochs = 5
eval_batch_size = 20
augment = false
device = "cpu"
precision = "fp32"
quiet = true
[grid]
alpha = [0.5, 2.0]
seed = [0]
[[variants]]
name = "sgd-wd"
optimizer = "sgd"
lr = 0.2
weight_decay = 0.1
[[variants]]
name = "sgd-l2"
optimizer = "sgd"
lr = 0.05
l2 = 0.05
[[variants]]
name = "adam"
optimizer = "adam"
lr = 0.01
"""


@pytest.fixture(scope="session")
def synthetic_sweep(tmp_path_factory):
    """Five SGD pipelines, 2 alphas x 3 seeds, exponential memories with known times."""
    return write_synthetic_sweep(tmp_path_factory.mktemp("synthetic"), known_pipelines())


@pytest.fixture(scope="session")
def law_sweep(tmp_path_factory):
    """The same pipelines with BN-followed convs on the exact SGD norm recursion."""
    return write_synthetic_sweep(
        tmp_path_factory.mktemp("law"), known_pipelines(), seeds=(0, 1), norms="sgd"
    )


@pytest.fixture(scope="session")
def train_sweep(tmp_path_factory):
    """``train_sweep(name, toml, runs)``: train the sweep file ``toml`` into a fresh folder with two
    worker processes, check that all ``runs`` finished and return the folder."""
    from initmem.empirical.sweep import SweepSpec, run_sweep

    def train(name: str, toml: str, runs: int):
        root = tmp_path_factory.mktemp(name)
        status = run_sweep(SweepSpec.from_toml(toml), root, workers=2, progress=False)
        assert status.done == runs, status.summary()
        return root

    return train


@pytest.fixture(scope="session")
def tiny_sweep(train_sweep):
    """A real sweep folder: 3 pipelines x 2 alphas, trained by two worker processes."""
    return train_sweep("tiny_sweep", TINY_SWEEP, 6)
