"""torchvision data sets by name (``torchvision:MNIST``) read from a local copy in torchvision's own
on-disk format, and heads whose width follows the data's classes (a 13-class plug-in data set)."""

from __future__ import annotations

import struct
import textwrap

import numpy as np
import pytest

from initmem.empirical import memory, tables
from initmem.empirical.config import ConfigError, RunConfig
from initmem.empirical.data import DataNotFoundError, load_splits, num_classes
from initmem.empirical.models import default_model, parameter_groups
from initmem.empirical.plugins import PluginError
from initmem.empirical.sweep import SweepSpec, run_sweep

pytestmark = pytest.mark.usefixtures("single_thread")


def write_idx(path, array: np.ndarray) -> None:
    """An unsigned-byte IDX file (the MNIST format), written here from its definition: two zero
    bytes, type 0x08, the number of dimensions, big-endian int32 sizes, the bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def fake_mnist(tmp_path):
    """60 training and 20 test 28x28 grey images with labels 0..9, where torchvision's MNIST looks
    for them: ``ROOT/MNIST/raw/<name>-ubyte``, uncompressed."""
    rng = np.random.default_rng(3)
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    data = {}
    for prefix, n in (("train", 60), ("t10k", 20)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        data[prefix] = (images, labels)
    return tmp_path / "mnist", data


def mnist_config(root, **changes) -> RunConfig:
    values = dict(dataset="torchvision:MNIST", data_dir=str(root), train_size=40, val_size=10)
    return RunConfig.from_dict(values | dict(test_size=20, batch_size=4) | changes)


def test_torchvision_mnist_is_read_from_its_local_copy(fake_mnist):
    root, data = fake_mnist
    splits = load_splits(mnist_config(root))
    images, labels = data["train"]
    assert splits.train.images.shape == (40, 3, 32, 32) and len(splits.val) == 10
    idx = splits.train.indices.numpy()
    np.testing.assert_array_equal(splits.train.labels.numpy(), labels[idx])
    # the image: zero-padded by 2 on each side, the same in all 3 channels, then normalized
    padded = np.pad(images[idx[0]], 2).astype(np.float64)
    mean, std = splits.mean[0], splits.std[0]
    expected = (padded / 255.0 - mean) / std
    got = splits.train.images[0].double().numpy()
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    np.testing.assert_array_equal(got[0], got[2])
    assert splits.classes[0].startswith("0") and num_classes(mnist_config(root)) == 10
    test_idx = splits.test.indices.numpy()
    np.testing.assert_array_equal(splits.test.labels.numpy(), data["t10k"][1][test_idx])


def test_a_missing_torchvision_copy_names_where_it_looked(tmp_path):
    config = mnist_config(tmp_path / "empty")
    with pytest.raises(DataNotFoundError, match="torchvision MNIST not found, looked in") as err:
        load_splits(config)
    assert str(tmp_path / "empty" / "MNIST" / "raw") in str(err.value)


def test_a_truncated_torchvision_file_is_named_as_damaged(fake_mnist):
    """A local MNIST copy whose training images were cut short (an interrupted download): the
    error names that file, says truncated with its size against the header's, and says the fix."""
    root, _ = fake_mnist
    path = root / "MNIST" / "raw" / "train-images-idx3-ubyte"
    expected = path.stat().st_size  # 4 + 4 * 3 + 60 * 28 * 28 = 47056
    assert expected == 16 + 60 * 28 * 28
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataNotFoundError) as err:
        load_splits(mnist_config(root))
    assert str(err.value) == (
        f"torchvision MNIST: {path} is damaged (truncated: 1000 bytes, its header says {expected} "
        "(60 x 28 x 28)); delete it and download it again (or point data_dir at a good copy)"
    )


def test_a_cut_cifar_batch_is_named_by_its_md5(tmp_path):
    """CIFAR10's copy is checked by MD5 in torchvision ("not found or corrupted"): a batch file
    present but cut short is named as damaged, not reported as missing."""
    folder = tmp_path / "cifar" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    (folder / "data_batch_1").write_bytes(b"\x80\x04 cut short")
    with pytest.raises(DataNotFoundError) as err:
        load_splits(mnist_config(tmp_path / "cifar", dataset="torchvision:CIFAR10"))
    assert str(err.value).startswith(
        f"torchvision CIFAR10: {folder / 'data_batch_1'} is damaged (its MD5 differs from "
        "torchvision's); delete it and download it again"
    )


def test_torchvision_names_are_checked(tmp_path, fake_mnist):
    with pytest.raises(ConfigError, match="reads a local copy: give data_dir"):
        RunConfig.from_dict(dict(dataset="torchvision:MNIST", train_size=4, val_size=4))
    with pytest.raises(ConfigError, match="'package.module:function'"):
        RunConfig.from_dict(dict(dataset="torchvision:", train_size=4, val_size=4, data_dir="."))
    with pytest.raises(PluginError, match="no data set class 'NoSuchSet'"):
        load_splits(mnist_config(tmp_path, dataset="torchvision:NoSuchSet"))
    with pytest.raises(PluginError, match="fewer than train_size"):
        load_splits(mnist_config(fake_mnist[0], train_size=58, val_size=10))


PLUGIN = '''
import numpy as np

CLASSES = 13


def thirteen(config):
    """Images whose mean brightness encodes the class (13 classes), 130 train and 39 test."""
    rng = np.random.default_rng(0)
    def draw(n):
        labels = np.arange(n) % CLASSES
        base = (labels * 19)[:, None, None, None]
        noise = rng.integers(0, 8, (n, 3, 32, 32))
        return (base + noise).astype(np.uint8), labels
    train_x, train_y = draw(130)
    test_x, test_y = draw(39)
    return train_x, train_y, test_x, test_y
'''


@pytest.fixture
def thirteen(tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "initmem_thirteen.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(folder))
    return "initmem_thirteen:thirteen"


def test_a_13_class_data_set_gets_a_13_output_head_and_is_measured(thirteen, tmp_path):
    base = dict(dataset=thirteen, model="mlp", width=0.0625, train_size=104, val_size=26)
    config = RunConfig.from_dict(base | dict(batch_size=26, quiet=True))
    assert num_classes(config) == 13
    model = default_model(config)
    head = dict(model.named_parameters())[parameter_groups(model)["head"][0]]
    assert head.shape[0] == 13
    assert load_splits(config).classes == tuple(str(c) for c in range(13))
    sweep = SweepSpec.from_toml(
        textwrap.dedent(
            f"""
            name = "thirteen"
            [base]
            dataset = "{thirteen}"
            model = "mlp"
            width = 0.0625
            train_size = 104
            val_size = 26
            test_size = 39
            batch_size = 26
            epochs = 2
            lr = 0.05
            quiet = true
            [grid]
            alpha = [1.0, 4.0]
            seed = [0, 1]
            """
        )
    )
    out = tmp_path / "sweep"
    status = run_sweep(sweep, out, workers=1, progress=False)
    assert status.done == 4 and status.failed == 0
    runs = tables.load_sweep(out)
    saved = tables.load_predictions(tables.finished_runs(runs))
    labels = np.concatenate(list(saved["best_test_pred"]))
    assert labels.max() < 13 and labels.min() >= 0
    # the accuracies are those of 39 test images of 13 classes: multiples of 1/39
    acc = runs["test_acc"].to_numpy() * 39
    np.testing.assert_allclose(acc, np.round(acc), atol=1e-6)
    table = memory.accuracy_table(runs)
    assert len(table) == 2 and table["n_seeds"].tolist() == [2, 2]
    disagreement = memory.disagreement_table(runs)
    assert len(disagreement) == 1 and 0 <= disagreement["disagreement"].iloc[0] <= 1
