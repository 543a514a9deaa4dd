"""Data: the official-format reader and fixture, the IDX reader, splits, normalization, augmentation."""

import gzip
import importlib.util
import pickle
import struct
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from initmem.empirical.config import RunConfig
from initmem.empirical.data import (
    CIFAR10_FOLDER,
    DEBIAN_FASHION_MNIST,
    DataNotFoundError,
    augment_batch,
    find_cifar10,
    find_fashion_mnist,
    load_splits,
    pad_to_cifar_shape,
    read_cifar10,
    read_fashion_mnist,
    read_idx,
    shared_splits,
    split_indices,
    write_cifar10_fixture,
)

#: Labels of the first 20 images of CIFAR-10's official test_batch (stated in the shared notes).
FIRST_TWENTY_TEST_LABELS = [3, 8, 8, 0, 6, 6, 1, 6, 3, 1, 0, 9, 5, 7, 9, 8, 5, 7, 8, 6]

pytestmark = pytest.mark.usefixtures("single_thread")


# ------------------------------------------------------------------------------------- CIFAR-10
def test_fixture_holds_the_first_twenty_official_test_images(cifar_fixture_root):
    train_x, train_y, test_x, test_y = read_cifar10(cifar_fixture_root / CIFAR10_FOLDER)
    assert test_x.shape == (20, 3, 32, 32) and test_x.dtype == np.uint8
    assert test_y.tolist() == FIRST_TWENTY_TEST_LABELS
    # the five training files hold the same 20 images, four each, in order
    np.testing.assert_array_equal(train_x, test_x)
    np.testing.assert_array_equal(train_y, test_y)
    # real photographs: every channel uses most of the 0..255 range
    assert (test_x.reshape(20, 3, -1).max(-1) - test_x.reshape(20, 3, -1).min(-1)).min() > 60


def test_fixture_files_have_the_official_layout(cifar_fixture_root):
    folder = cifar_fixture_root / CIFAR10_FOLDER
    with (folder / "data_batch_1").open("rb") as fh:
        batch = pickle.load(fh, encoding="bytes")
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (4, 3072)
    assert batch[b"labels"] == FIRST_TWENTY_TEST_LABELS[:4]
    # channel-major rows: the first 1024 values are the red plane of image 0
    red = batch[b"data"][0, :1024].reshape(32, 32)
    _, _, test_x, _ = read_cifar10(folder)
    np.testing.assert_array_equal(red, test_x[0, 0])
    with (folder / "batches.meta").open("rb") as fh:
        meta = pickle.load(fh, encoding="bytes")
    assert meta[b"label_names"][3] == b"cat"


def test_full_copy_with_wrong_md5_is_refused(cifar_fixture_root, tmp_path):
    folder = tmp_path / CIFAR10_FOLDER
    folder.mkdir()
    for path in (cifar_fixture_root / CIFAR10_FOLDER).iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    fake = {b"data": np.zeros((10_000, 3072), np.uint8), b"labels": [0] * 10_000}
    (folder / "data_batch_1").write_bytes(pickle.dumps(fake, protocol=2))
    with pytest.raises(ValueError, match="md5"):
        read_cifar10(folder)


def test_reader_refuses_pickles_that_are_not_data(cifar_fixture_root, tmp_path):
    folder = tmp_path / CIFAR10_FOLDER
    folder.mkdir()
    for path in (cifar_fixture_root / CIFAR10_FOLDER).iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": OrderedDict()}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="collections.OrderedDict"):
        read_cifar10(folder)


def test_missing_cifar10_error_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("INITMEM_DATA", str(tmp_path / "cache"))
    with pytest.raises(DataNotFoundError) as err:
        find_cifar10(download=False)
    message = str(err.value)
    assert f"in: {tmp_path / 'cache' / CIFAR10_FOLDER}, {tmp_path / 'cache'};" in message
    assert "cifar-10-python.tar.gz" in message


def test_named_data_dir_is_the_only_place_and_listed_once(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setenv("INITMEM_DATA", str(mine))  # the cache dir is the named folder too
    with pytest.raises(DataNotFoundError) as err:
        find_cifar10(mine, download=False)
    assert f"in: {mine / CIFAR10_FOLDER}, {mine};" in str(err.value)  # each place once


@pytest.mark.parametrize("dataset", ["cifar10", "fashion-mnist"])
def test_data_dir_that_does_not_exist_is_an_error_naming_it(tmp_path, monkeypatch, dataset):
    monkeypatch.setenv("INITMEM_DATA", str(tmp_path / "cache"))
    config = RunConfig(dataset=dataset, data_dir=str(tmp_path / "nope"), batch_size=4)
    with pytest.raises(DataNotFoundError, match=f"data_dir {tmp_path / 'nope'} does not exist"):
        load_splits(config, download=True)  # not even a download into a mistyped path


def test_cifar10_is_found_under_data_dir(cifar_fixture_root):
    assert find_cifar10(cifar_fixture_root, download=False) == cifar_fixture_root / CIFAR10_FOLDER


def test_partial_copy_under_the_cifar10_name_is_refused(cifar_fixture_root):
    config = RunConfig(dataset="cifar10", data_dir=str(cifar_fixture_root), batch_size=4)
    with pytest.raises(DataNotFoundError, match="holds 20 training images, expected 50000"):
        load_splits(config, download=False)


# ------------------------------------------------------------------------------------- splits
def test_split_is_disjoint_seeded_and_nested():
    train, val = split_indices(100, 20, None, seed=3)
    assert len(train) == 80 and len(val) == 20
    assert sorted(train.tolist() + val.tolist()) == list(range(100))
    train_again, val_again = split_indices(100, 20, None, seed=3)
    assert torch.equal(train, train_again) and torch.equal(val, val_again)
    small, val_small = split_indices(100, 20, 30, seed=3)
    assert torch.equal(small, train[:30]) and torch.equal(val_small, val)
    _, val_other = split_indices(100, 20, None, seed=4)
    assert not torch.equal(val, val_other)


def test_fixture_splits_are_normalized_per_channel(fixture_data_dir):
    config = RunConfig(dataset="cifar10-fixture", data_dir=str(fixture_data_dir), batch_size=4)
    data = load_splits(config)
    assert (len(data.train), len(data.val), len(data.test)) == (16, 4, 20)
    # train and validation together are the whole pool, whose statistics define the normalization
    pool = torch.cat([data.train.images, data.val.images]).double()
    np.testing.assert_allclose(pool.mean(dim=(0, 2, 3)).numpy(), 0.0, atol=1e-6)
    np.testing.assert_allclose(pool.std(dim=(0, 2, 3), unbiased=False).numpy(), 1.0, atol=1e-6)
    # the labels follow the recorded indices into the official files
    labels = np.array(FIRST_TWENTY_TEST_LABELS)
    assert data.train.labels.tolist() == labels[data.train.indices.numpy()].tolist()
    # undo the normalization: the raw pixels come back
    mean = torch.tensor(data.mean).view(1, 3, 1, 1)
    std = torch.tensor(data.std).view(1, 3, 1, 1)
    raw = (data.test.images * std + mean) * 255
    _, _, test_x, _ = read_cifar10(fixture_data_dir / "cifar10-fixture" / CIFAR10_FOLDER)
    np.testing.assert_allclose(raw.numpy(), test_x, atol=1e-3)


def test_synthetic_data_is_seeded():
    config = RunConfig(dataset="synthetic", train_size=64, val_size=32, test_size=16, batch_size=8)
    first, second = load_splits(config), load_splits(config)
    assert torch.equal(first.train.images, second.train.images)
    assert (len(first.train), len(first.val), len(first.test)) == (64, 32, 16)
    other = load_splits(config.replace(split_seed=1))
    assert not torch.equal(first.train.images, other.train.images)


def test_shared_splits_are_loaded_once_per_data_config(tmp_path):
    """Runs that differ only in training fields share one copy; other data fields, or a changed data
    folder, give a fresh one with the numbers of load_splits."""
    write_cifar10_fixture(tmp_path / "cifar10-fixture")
    config = RunConfig(dataset="cifar10-fixture", data_dir=str(tmp_path), batch_size=4)
    first = shared_splits(config)
    again = shared_splits(config.replace(alpha=4.0, seed=3, lr=0.5, out_dir=str(tmp_path / "r")))
    assert again is first
    fresh = load_splits(config)
    for name in ("train", "val", "test"):
        assert torch.equal(getattr(first, name).images, getattr(fresh, name).images)
        assert torch.equal(getattr(first, name).labels, getattr(fresh, name).labels)

    other = shared_splits(config.replace(split_seed=1))
    assert other is not first
    assert not torch.equal(other.val.indices, first.val.indices)

    # rewrite the official test file with inverted pixels: the next call reads the folder again
    path = tmp_path / "cifar10-fixture" / CIFAR10_FOLDER / "test_batch"
    batch = pickle.loads(path.read_bytes(), encoding="bytes")
    batch[b"data"] = 255 - batch[b"data"]
    path.write_bytes(pickle.dumps(batch))
    changed = shared_splits(config)
    assert changed is not first
    _, _, test_x, _ = read_cifar10(path.parent)
    raw = changed.test.images * torch.tensor(changed.std).view(1, 3, 1, 1)
    raw = (raw + torch.tensor(changed.mean).view(1, 3, 1, 1)) * 255
    np.testing.assert_allclose(raw.numpy(), test_x, atol=1e-3)
    assert not np.allclose(raw.numpy(), 255 - test_x, atol=1e-3)


# ------------------------------------------------------------------------------------- augmentation
def _all_crops(image: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """Every crop (dy, dx, flip) of one reflect-padded image, by plain slicing: (2 * 81, C, H, W)."""
    padded = torch.nn.functional.pad(image[None], (pad,) * 4, mode="reflect")[0]
    _, h, w = image.shape
    crops = [
        padded[:, dy : dy + h, dx : dx + w].flip(-1)
        if flip
        else padded[:, dy : dy + h, dx : dx + w]
        for flip in (False, True)
        for dy in range(2 * pad + 1)
        for dx in range(2 * pad + 1)
    ]
    return torch.stack(crops)


def test_augmentation_is_a_uniform_random_crop_and_flip():
    image = torch.randn(3, 32, 32, generator=torch.Generator().manual_seed(0))
    n = 4000
    out = augment_batch(image.expand(n, -1, -1, -1), torch.Generator().manual_seed(1))
    assert out.shape == (n, 3, 32, 32)
    candidates = _all_crops(image).flatten(1).double()
    # identify each output's crop by a random projection, then check the match pixel by pixel
    direction = torch.randn(
        candidates.shape[1], generator=torch.Generator().manual_seed(2)
    ).double()
    gap = (out.flatten(1).double() @ direction)[:, None] - (candidates @ direction)[None]
    which = gap.abs().argmin(1)
    assert torch.equal(out.flatten(1).double(), candidates[which]), "outputs must be crops"
    flip, dy, dx = which // 81, (which % 81) // 9, which % 9
    # flip fraction 1/2 +- 0.05 (6 standard deviations); each offset 1/9 of the draws +- 25% (5.5 sd)
    assert abs(flip.float().mean().item() - 0.5) < 0.05
    for offsets in (dy, dx):
        counts = torch.bincount(offsets, minlength=9).float()
        assert ((counts - n / 9).abs() < 0.25 * n / 9).all()


def test_augmentation_is_reproducible_from_its_generator():
    images = torch.randn(8, 3, 32, 32)
    first = augment_batch(images, torch.Generator().manual_seed(5))
    second = augment_batch(images, torch.Generator().manual_seed(5))
    third = augment_batch(images, torch.Generator().manual_seed(6))
    assert torch.equal(first, second) and not torch.equal(first, third)


# ------------------------------------------------------------------------------------- Fashion-MNIST
def _write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if compress else raw)


@pytest.mark.parametrize("compress", [True, False])
def test_idx_reader_round_trips(tmp_path, compress):
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / ("a.idx.gz" if compress else "a.idx")
    _write_idx(path, array, compress)
    np.testing.assert_array_equal(read_idx(path), array)
    path.write_bytes(b"\x00\x00\x0d\x01" + struct.pack(">i", 1) + b"\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="unsigned-byte IDX"):
        read_idx(path)


def test_padding_to_the_cifar_shape():
    images = np.random.default_rng(0).integers(1, 256, size=(5, 28, 28)).astype(np.uint8)
    padded = pad_to_cifar_shape(images)
    assert padded.shape == (5, 3, 32, 32)
    np.testing.assert_array_equal(padded[:, 1, 2:30, 2:30], images)
    assert (padded[:, :, :2] == 0).all() and (padded[:, :, :, 30:] == 0).all()
    np.testing.assert_array_equal(padded[:, 0], padded[:, 2])


def _write_tiny_fashion_mnist(folder):
    rng = np.random.default_rng(0)
    for stem, shape in [
        ("train-images-idx3-ubyte", (6, 28, 28)),
        ("train-labels-idx1-ubyte", (6,)),
        ("t10k-images-idx3-ubyte", (3, 28, 28)),
        ("t10k-labels-idx1-ubyte", (3,)),
    ]:
        _write_idx(folder / (stem + ".gz"), rng.integers(0, 10, size=shape), compress=True)


def test_named_empty_data_dir_does_not_fall_back_to_the_system_copy(tmp_path, monkeypatch):
    system = tmp_path / "system"
    system.mkdir()
    _write_tiny_fashion_mnist(system)
    monkeypatch.setattr("initmem.empirical.data.DEBIAN_FASHION_MNIST", system)
    assert find_fashion_mnist(download=False) == system  # the default places
    (tmp_path / "mine").mkdir()
    with pytest.raises(DataNotFoundError, match="Fashion-MNIST not found") as err:
        find_fashion_mnist(tmp_path / "mine", download=False)
    assert str(system) not in str(err.value)


def test_fashion_mnist_from_a_user_folder_comes_first(tmp_path):
    _write_tiny_fashion_mnist(tmp_path)
    assert find_fashion_mnist(tmp_path, download=False) == tmp_path
    train_x, train_y, test_x, test_y = read_fashion_mnist(tmp_path)
    assert train_x.shape == (6, 3, 32, 32) and test_y.shape == (3,)
    config = RunConfig(dataset="fashion-mnist", data_dir=str(tmp_path), batch_size=4)
    with pytest.raises(DataNotFoundError, match="holds 6 training images, expected 60000"):
        load_splits(config, download=False)


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="dataset-fashion-mnist not installed")
def test_fashion_mnist_matches_foolbox_sample():
    """Official test image 0 (an ankle boot, label 9) equals foolbox's fashionMNIST_00_9.png."""
    from PIL import Image

    _, _, test_x, test_y = read_fashion_mnist(find_fashion_mnist(download=False))
    assert test_x.shape == (10_000, 3, 32, 32) and test_y[0] == 9
    folder = Path(list(importlib.util.find_spec("foolbox").submodule_search_locations)[0]) / "data"
    sample = np.asarray(Image.open(folder / "fashionMNIST_00_9.png").convert("L"))
    np.testing.assert_array_equal(test_x[0, 0, 2:30, 2:30], sample)


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="dataset-fashion-mnist not installed")
def test_fashion_mnist_subsets():
    config = RunConfig(
        dataset="fashion-mnist", train_size=100, val_size=50, test_size=30, batch_size=10
    )
    data = load_splits(config, download=False)
    assert (len(data.train), len(data.val), len(data.test)) == (100, 50, 30)
    assert data.train.images.shape == (100, 3, 32, 32) and data.train.images.dtype == torch.float32
    assert set(data.train.indices.tolist()).isdisjoint(data.val.indices.tolist())


def test_write_fixture_returns_its_folder(tmp_path):
    folder = write_cifar10_fixture(tmp_path)
    assert folder == tmp_path / CIFAR10_FOLDER
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["batches.meta", "test_batch"] + [f"data_batch_{i}" for i in range(1, 6)]
    )
