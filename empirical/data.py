"""Data sets as tensors on the training device: reading, splitting, normalizing, augmenting.

Every data set becomes three :class:`ImageSplit` s (train, validation, test) of normalized float32 images
of shape ``(n, 3, 32, 32)`` held whole on the device, so the training loop only indexes tensors:

- ``cifar10``: the official python-pickle copy (``cifar-10-batches-py``), read by our own reader (full
  copies are md5-checked against the official files); torchvision downloads it where the machine is
  online. 50,000 official training images -> ``train_size`` / ``val_size`` by ``split_seed``; the
  official 10,000 test images are the test set.
- ``fashion-mnist``: IDX files (the Debian package ``dataset-fashion-mnist``, a user copy, or
  torchvision's download), zero-padded from 28x28 to 32x32 and repeated to 3 channels.
- ``cifar10-fixture``: foolbox's 20 real CIFAR-10 test images written in the official format
  (:func:`write_cifar10_fixture`), for tests and demos that must run anywhere.
- ``synthetic``: random CIFAR-shaped images and labels drawn from ``split_seed``, for benchmarks.
- ``torchvision:NAME`` (e.g. ``torchvision:MNIST``, ``torchvision:CIFAR100``): the class ``NAME`` of
  ``torchvision.datasets`` reading a local copy under ``data_dir`` in its own on-disk format (never
  downloaded; :func:`torchvision_pools`); 28x28 grey images padded and repeated as Fashion-MNIST's.
- a plug-in ``package.module:function`` (:func:`plugin_pools`).

The number of classes follows the data (:func:`num_classes`): 10 for the built-in sets, the
torchvision class's ``classes`` or one more than the largest label of a plug-in's.

Normalization is per channel, with the mean and standard deviation of the data set's official training
pool (recorded in :attr:`DataSplits.mean` / :attr:`DataSplits.std`). Augmentation
(:func:`augment_batch`) is a random crop from a 4-pixel reflect-padded image plus a horizontal flip,
done for a whole batch at once by one gather on the device.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import os
import pickle
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .config import DATASETS, TEST_POOL_SIZES, RunConfig
from .plugins import PluginError, call_plugin, is_plugin, resolve_plugin
from .shapes import NUM_CLASSES

#: Where the Debian package ``dataset-fashion-mnist`` puts the IDX files.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
#: The official folder name of CIFAR-10's python version.
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
#: md5 of the official python files (as listed in torchvision/datasets/cifar.py); checked for full copies.
CIFAR10_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
#: Images per file in the official copy (a file this size is md5-checked).
CIFAR10_IMAGES_PER_FILE = 10_000
#: Crop padding of the augmentation, in pixels (the standard CIFAR recipe).
AUGMENT_PAD = 4


class DataNotFoundError(FileNotFoundError):
    """No usable copy of a data set was found; the message lists where we looked and how to get one."""


@dataclass(frozen=True)
class ImageSplit:
    """One split: ``images`` float32 ``(n, 3, 32, 32)`` normalized, ``labels`` int64 ``(n,)``, both on
    the device; ``indices`` int64 ``(n,)`` on the CPU, the images' positions in their official set."""

    images: torch.Tensor
    labels: torch.Tensor
    indices: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class DataSplits:
    """Train, validation and test splits of one data set, plus where they came from."""

    dataset: str
    train: ImageSplit
    val: ImageSplit
    test: ImageSplit
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    classes: tuple[str, ...]
    source: str

    def describe(self) -> dict:
        """A JSON-ready summary (recorded in the run's config.json)."""
        return {
            "dataset": self.dataset,
            "source": self.source,
            "train_size": len(self.train),
            "val_size": len(self.val),
            "test_size": len(self.test),
            "mean": list(self.mean),
            "std": list(self.std),
            "train_indices_sha256": _indices_digest(self.train.indices),
            "val_indices_sha256": _indices_digest(self.val.indices),
            "test_indices_sha256": _indices_digest(self.test.indices),
            "train_labels_sha256": _indices_digest(self.train.labels.cpu()),
            "val_labels_sha256": _indices_digest(self.val.labels.cpu()),
            "test_labels_sha256": _indices_digest(self.test.labels.cpu()),
        }


# ---------------------------------------------------------------------------------- the entry point
def load_splits(
    config: RunConfig, device: str | torch.device = "cpu", *, download: bool | None = None
) -> DataSplits:
    """The train/validation/test splits that ``config`` asks for, as tensors on ``device``.

    ``download``: let torchvision fetch a missing data set (only tried after every local place);
    None: yes, unless the environment sets ``INITMEM_OFFLINE=1``.
    Raises :class:`DataNotFoundError` when no copy is found.
    """
    pool_x, pool_y, test_x, test_y, (mean, std), source = _read_pools(config, download=download)
    if not is_plugin(config.dataset) and len(pool_y) != config.train_pool_size:
        raise DataNotFoundError(
            f"{source} holds {len(pool_y)} training images, expected {config.train_pool_size} for "
            f"dataset '{config.dataset}' (a partial copy?)"
        )
    train_idx, val_idx = split_indices(
        len(pool_y), config.resolved_val_size, config.train_size, config.split_seed
    )
    test_idx = subset_indices(len(test_y), config.test_size, config.split_seed)
    classes = (
        FASHION_MNIST_CLASSES
        if config.dataset == "fashion-mnist"
        else class_names(config)
        if is_plugin(config.dataset)
        else CIFAR10_CLASSES
    )

    def to_split(images: np.ndarray, labels: np.ndarray, idx: torch.Tensor) -> ImageSplit:
        picked = torch.from_numpy(images[idx.numpy()])
        return ImageSplit(
            images=normalize(picked.to(device), mean, std),
            labels=torch.from_numpy(labels[idx.numpy()].astype(np.int64)).to(device),
            indices=idx,
        )

    return DataSplits(
        dataset=config.dataset,
        train=to_split(pool_x, pool_y, train_idx),
        val=to_split(pool_x, pool_y, val_idx),
        test=to_split(test_x, test_y, test_idx),
        mean=mean,
        std=std,
        classes=classes,
        source=source,
    )


def shared_splits(
    config: RunConfig, device: str | torch.device = "cpu", *, download: bool | None = None
) -> DataSplits:
    """:func:`load_splits`, kept in memory for the next call that asks for the same splits.

    The runs of a sweep that share a worker process mostly share their data (same data set, sizes and
    ``split_seed``): indexing and normalizing thousands of images per run is a measurable part of a
    short run's cost (BENCHMARKS.md, benchmark 5). The cache holds one entry per process, keyed by the
    config's data fields, the device and the data folder's files (names, sizes, modification times),
    so a changed folder is read again; :func:`clear_data_cache` empties it.

    The returned tensors are shared by every caller that gets the same entry: read them, never modify
    them in place (the trainer does not).
    """
    device = torch.device(device)
    located = _locate_pools(config, download=download)
    key = (
        config.dataset,
        json.dumps(config.dataset_args, sort_keys=True),
        config.train_size,
        config.resolved_val_size,
        config.test_size,
        config.split_seed,
        str(device),
        None if located is None else (located[0], str(located[1]), _folder_signature(located[1])),
    )
    if key not in _SHARED_SPLITS:
        _SHARED_SPLITS.clear()  # one entry: a worker holds one data set on its device
        _SHARED_SPLITS[key] = load_splits(config, device, download=download)
    return _SHARED_SPLITS[key]


#: The entry of :func:`shared_splits` (per process).
_SHARED_SPLITS: dict[tuple, DataSplits] = {}


def clear_data_cache() -> None:
    """Forget the data sets this process keeps in memory (:func:`shared_splits` and decoded pools)."""
    _SHARED_SPLITS.clear()
    _read_folder.cache_clear()


def _locate_pools(config: RunConfig, *, download: bool | None) -> tuple[str, Path] | None:
    """(reader, folder) of ``config``'s data set, None for synthetic data; writes the CIFAR-10
    fixture where it is missing and downloads where allowed (see the ``find_*`` functions)."""
    if config.dataset == "cifar10":
        return "cifar10", find_cifar10(config.data_dir, download=download)
    if config.dataset == "cifar10-fixture":
        root = Path(config.data_dir) if config.data_dir else default_cache_dir()
        folder = root / "cifar10-fixture" / CIFAR10_FOLDER
        if not (folder / "batches.meta").is_file():  # the file the writer writes last
            write_cifar10_fixture(root / "cifar10-fixture")
        return "cifar10", folder
    if config.dataset == "fashion-mnist":
        return "fashion-mnist", find_fashion_mnist(config.data_dir, download=download)
    if config.dataset == "synthetic" or is_plugin(config.dataset):
        return None
    raise ValueError(f"dataset must be one of {list(DATASETS)} (got {config.dataset!r})")


def plugin_pools(config: RunConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pools of a plug-in data set (``dataset = "package.module:function"``, :mod:`.plugins`):
    ``function(config, **config.dataset_args)`` must return ``(train_x, train_y, test_x, test_y)``, uint8 images
    ``(n, 3, 32, 32)`` (numpy or torch) and integer labels ``0 .. K-1`` (``K`` classes, at least 2;
    :func:`num_classes`); the training pool must hold at least ``train_size + val_size`` images.
    Anything else raises :class:`~.plugins.PluginError` naming the data set and what is wrong.
    ``torchvision:NAME`` is read by :func:`torchvision_pools`."""
    if is_torchvision(config.dataset):
        pools = torchvision_pools(config.dataset, config.data_dir)[:4]
        needed = config.resolved_train_size + config.resolved_val_size
        if len(pools[1]) < needed:
            raise PluginError(
                f"dataset = {config.dataset!r}: the training pool holds {len(pools[1])} images, "
                f"fewer than train_size + val_size = {needed}"
            )
        return pools
    function = resolve_plugin(config.dataset, "dataset")
    with torch.device("cpu"):  # a caller building a model on the meta device still reads real data
        returned = call_plugin(function, config, config.dataset_args, "dataset")
    where = f"dataset = {config.dataset!r}"
    if not (isinstance(returned, tuple | list) and len(returned) == 4):
        raise PluginError(f"{where} must return (train_x, train_y, test_x, test_y)")
    arrays = [np.asarray(a.cpu() if hasattr(a, "cpu") else a) for a in returned]
    return _checked_pools(where, arrays, config.resolved_train_size + config.resolved_val_size)


def _checked_pools(where: str, arrays: list[np.ndarray], needed: int) -> tuple:
    """Images uint8 ``(n, 3, 32, 32)``, labels integers in ``0 ..`` (int64), a training pool of at
    least ``needed`` (train_size + val_size) images; read-only. :class:`~.plugins.PluginError`
    otherwise."""
    for name, images in (("train_x", arrays[0]), ("test_x", arrays[2])):
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (3, 32, 32):
            raise PluginError(
                f"{where}: {name} must be uint8 images (n, 3, 32, 32) (got {images.dtype} "
                f"{images.shape})"
            )
    for name, labels, images in (
        ("train_y", arrays[1], arrays[0]),
        ("test_y", arrays[3], arrays[2]),
    ):
        if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
            raise PluginError(f"{where}: {name} must hold one integer label per image")
        if labels.size and labels.min() < 0:
            raise PluginError(
                f"{where}: {name} must be class indices 0, 1, ... (got {labels.min()})"
            )
    if len(arrays[1]) < needed:
        raise PluginError(
            f"{where}: the training pool holds {len(arrays[1])} images, fewer than train_size + "
            f"val_size = {needed}"
        )
    if len(arrays[3]) == 0:
        raise PluginError(f"{where}: test_y is empty; the test pool must hold at least one image")
    if len(classes := np.unique(arrays[1])) < 2:
        raise PluginError(
            f"{where}: train_y holds one class ({classes.tolist()}); a data set needs at least 2 "
            "classes (a one-class set trains to a trivial accuracy of 1)"
        )
    out = [arrays[0], arrays[1].astype(np.int64), arrays[2], arrays[3].astype(np.int64)]
    for array in out:
        array.setflags(write=False)
    return tuple(out)


def is_torchvision(dataset: str) -> bool:
    """Whether ``dataset`` names a torchvision data set class (``torchvision:NAME``)."""
    return dataset.startswith("torchvision:")


@functools.lru_cache(maxsize=2)
def torchvision_pools(dataset: str, data_dir: str | None) -> tuple:
    """(train images, labels, test images, labels, class names) of ``dataset = "torchvision:NAME"``:
    the class ``NAME`` of ``torchvision.datasets``, built as ``NAME(data_dir, train=..., download=False)``
    on the local copy in its own on-disk format (e.g. ``DATA_DIR/MNIST/raw/train-images-idx3-ubyte``
    for MNIST, ``DATA_DIR/cifar-100-python/`` for CIFAR100). Grey ``(n, 28, 28)`` images are padded to
    32x32 and repeated to 3 channels (as Fashion-MNIST's); colour ``(n, 32, 32, 3)`` ones are
    transposed. Kept in memory for the next run of the process (two data sets). Raises
    :class:`DataNotFoundError` naming where it looked, or the damaged file and the fix when the copy
    is there but a file of it is truncated (:func:`_damaged_torchvision_files`),
    :class:`~.plugins.PluginError` for a name
    torchvision does not have or a class without ``train=``."""
    from torchvision import datasets  # deferred: torchvision loads only for its own data sets

    name = dataset.split(":", 1)[1]
    where = f"dataset = {dataset!r}"
    cls = getattr(datasets, name, None)
    if not isinstance(cls, type):
        raise PluginError(f"{where}: torchvision.datasets has no data set class {name!r}")
    root = Path(data_dir) if data_dir else Path(".")
    looked = [root / name / "raw", root / name, root]
    splits = []
    for train in (True, False):
        try:
            split = cls(str(root), train=train, download=False)
        except TypeError as err:
            raise PluginError(
                f"{where}: {name} takes no train= argument ({err}); wrap it in a plug-in data set"
            ) from None
        except (RuntimeError, OSError, EOFError) as err:
            damaged = _damaged_torchvision_files(cls, looked)
            if damaged:
                path, why = damaged[0]
                raise DataNotFoundError(
                    f"torchvision {name}: {path} is damaged ({why}); delete it and download it "
                    "again (or point data_dir at a good copy)"
                ) from None
            raise DataNotFoundError(
                f"torchvision {name} not found, looked in {', '.join(str(p) for p in looked)} "
                f"({' '.join(str(err).split())}); put a copy there in torchvision's on-disk format "
                "or point data_dir at one"
            ) from None
        images = np.asarray(split.data)
        splits += [_as_cifar_shape(where, images), np.asarray(split.targets)]
    names = tuple(str(c) for c in getattr(split, "classes", ()))
    pools = _checked_pools(where, splits, 2)  # the run's own sizes: checked when split
    return (*pools, names)


#: Bytes per item of each IDX type code (the MNIST file format: LeCun et al., "THE MNIST DATABASE
#: of handwritten digits", yann.lecun.com/exdb/mnist, section "FILE FORMATS FOR THE MNIST DATABASE").
_IDX_ITEM_BYTES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}


def _damaged_torchvision_files(cls, folders: list[Path]) -> list[tuple[Path, str]]:
    """The files of a local torchvision copy that are damaged, each with why: an IDX file (MNIST and
    its kin, ``*-idx*``, uncompressed) shorter or longer than its header says (4 + 4 x dimensions +
    product of the sizes x item bytes), or a file that ``cls`` lists with an MD5 (``train_list`` /
    ``test_list`` under ``base_folder``, as CIFAR's) whose MD5 differs. Read only after torchvision
    failed, to tell a damaged copy from a missing one."""
    from torchvision.datasets.utils import check_integrity  # torchvision: only once it failed

    damaged = []
    for path in sorted({p for f in folders if f.is_dir() for p in f.glob("*-idx*")}):
        if path.suffix == ".gz" or not path.is_file():
            continue
        why = _idx_damage(path)
        if why:
            damaged.append((path, why))
    listed = [*getattr(cls, "train_list", ()), *getattr(cls, "test_list", ())]
    base = getattr(cls, "base_folder", None)
    for folder in folders if isinstance(base, str) else ():
        for entry in listed:
            path = folder / base / entry[0]
            if path.is_file() and not check_integrity(str(path), entry[1]):
                damaged.append((path, "its MD5 differs from torchvision's"))
    return damaged


def _idx_damage(path: Path) -> str:
    """Why the IDX file ``path`` is damaged ("" when its size is what its header says)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(4)
        if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in _IDX_ITEM_BYTES:
            return f"truncated or not an IDX file: {size} bytes, no valid IDX header"
        sizes = handle.read(4 * head[3])
    if len(sizes) < 4 * head[3]:
        return f"truncated: {size} bytes, shorter than its own header"
    shape = np.frombuffer(sizes, dtype=">u4")
    expected = 4 + 4 * head[3] + int(np.prod(shape, dtype=np.int64)) * _IDX_ITEM_BYTES[head[2]]
    if size != expected:
        kind = "truncated" if size < expected else "too long"
        return f"{kind}: {size} bytes, its header says {expected} ({' x '.join(map(str, shape))})"
    return ""


def _as_cifar_shape(where: str, images: np.ndarray) -> np.ndarray:
    """uint8 ``(n, 3, 32, 32)`` from grey ``(n, 28, 28)`` (zero-padded, repeated) or ``(n, 32, 32)``,
    or colour ``(n, 32, 32, 3)``; :class:`~.plugins.PluginError` for other shapes."""
    images = np.asarray(images, dtype=np.uint8)
    if images.ndim == 3 and images.shape[1:] == (28, 28):
        images = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    if images.ndim == 3 and images.shape[1:] == (32, 32):
        return np.ascontiguousarray(np.repeat(images[:, None], 3, axis=1))
    if images.ndim == 4 and images.shape[1:] == (32, 32, 3):
        return np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    raise PluginError(
        f"{where}: images of shape {images.shape[1:]}; the models take 28x28 or 32x32 (grey or RGB)"
    )


def num_classes(config: RunConfig) -> int:
    """The number of classes of ``config``'s data, the width of every model's head: 10 for the
    built-in data sets; for ``torchvision:NAME`` its class names (or one more than its largest
    label); for a plug-in, one more than its largest label (its pools are read)."""
    if is_torchvision(config.dataset):
        *pools, names = torchvision_pools(config.dataset, config.data_dir)
        return len(names) or int(max(pools[1].max(), pools[3].max())) + 1
    if is_plugin(config.dataset):
        pools = plugin_pools(config)
        return int(max(pools[1].max(initial=0), pools[3].max(initial=0))) + 1
    return NUM_CLASSES


def class_names(config: RunConfig) -> tuple[str, ...]:
    """The class names of a plug-in or torchvision data set (their indices where it has none)."""
    if is_torchvision(config.dataset):
        names = torchvision_pools(config.dataset, config.data_dir)[4]
        if names:
            return names
    return tuple(str(c) for c in range(num_classes(config)))


def _read_pools(config: RunConfig, *, download: bool | None):
    """(train pool images, labels, test images, labels, (mean, std), source text); images uint8
    ``(n, 3, 32, 32)``, read-only; (mean, std) the training pool's channel statistics."""
    located = _locate_pools(config, download=download)
    if is_plugin(config.dataset):
        pools = plugin_pools(config)
        return (*pools, channel_stats(pools[0]), f"plug-in {config.dataset}")
    if located is None:
        return (
            *synthetic_pools(config),
            SYNTHETIC_STATS,
            f"synthetic (split_seed={config.split_seed})",
        )
    kind, folder = located
    return (*_read_folder(kind, str(folder), _folder_signature(folder)), str(folder))


@functools.lru_cache(maxsize=2)
def _read_folder(kind: str, folder: str, signature: tuple) -> tuple:
    """The decoded pools of a data folder and its training pool's channel statistics, kept in memory
    for the next call: the runs of a sweep that share a worker process read, decode and count a data
    set once (about 1 s for Fashion-MNIST on one CPU core, more than a demo-size epoch). ``signature``
    (names, sizes and modification times of the folder's files) keys the cache, so a changed folder is
    read again. The arrays are read-only: callers index copies out of them."""
    reader = read_fashion_mnist if kind == "fashion-mnist" else read_cifar10
    arrays = reader(folder)
    for array in arrays:
        array.setflags(write=False)
    return (*arrays, channel_stats(arrays[0]))


def _folder_signature(folder: str | Path) -> tuple:
    return tuple(
        sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder))
    )


def downloads_allowed(download: bool | None) -> bool:
    """``download`` if given, else True unless the environment sets ``INITMEM_OFFLINE=1``."""
    if download is not None:
        return download
    return os.environ.get("INITMEM_OFFLINE", "").lower() not in ("1", "true", "yes")


def default_cache_dir() -> Path:
    """``$INITMEM_DATA`` if set, else ``~/.cache/initmem``: where data is downloaded and fixtures built."""
    return Path(os.environ.get("INITMEM_DATA", Path.home() / ".cache" / "initmem"))


# ---------------------------------------------------------------------------------- splits
def split_indices(
    pool_size: int, val_size: int, train_size: int | None, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded split of an official training set of ``pool_size`` images into (train, validation).

    One permutation from ``seed``: its first ``val_size`` entries are the validation set, the next
    ``train_size`` (None: all the rest) the training set. A smaller ``train_size`` is therefore a prefix
    of a larger one, and the validation set does not depend on ``train_size``.
    """
    if not 0 < val_size < pool_size:
        raise ValueError(f"val_size must be in [1, {pool_size - 1}] (got {val_size})")
    available = pool_size - val_size
    train_size = available if train_size is None else train_size
    if not 0 < train_size <= available:
        raise ValueError(f"train_size must be in [1, {available}] (got {train_size})")
    perm = torch.randperm(pool_size, generator=torch.Generator().manual_seed(seed))
    return perm[val_size : val_size + train_size].clone(), perm[:val_size].clone()


def subset_indices(pool_size: int, size: int | None, seed: int) -> torch.Tensor:
    """All of ``range(pool_size)`` (size None), else a seeded random subset of ``size`` in sorted order."""
    if size is None:
        return torch.arange(pool_size)
    if not 0 < size <= pool_size:
        raise ValueError(f"test_size must be in [1, {pool_size}] (got {size})")
    perm = torch.randperm(pool_size, generator=torch.Generator().manual_seed(seed + 1))
    return perm[:size].sort().values


def _indices_digest(indices: torch.Tensor) -> str:
    return hashlib.sha256(indices.numpy().astype("<i8").tobytes()).hexdigest()[:16]


# ---------------------------------------------------------------------------------- normalization
def channel_stats(images: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and standard deviation of uint8 images ``(n, C, H, W)``, in units of 1/255.

    Exact, from each channel's histogram of the 256 byte values (no float copy of the images).
    """
    values = np.arange(256, dtype=np.float64) / 255.0
    means, stds = [], []
    for channel in range(images.shape[1]):
        plane = torch.from_numpy(np.ascontiguousarray(images[:, channel])).reshape(-1)
        counts = torch.bincount(plane, minlength=256).double().numpy()
        p = counts / counts.sum()
        mean = float(p @ values)
        means.append(mean)
        stds.append(max(float(np.sqrt(max(p @ values**2 - mean**2, 0.0))), 1e-8))
    return tuple(means), tuple(stds)


def normalize(images: torch.Tensor, mean, std) -> torch.Tensor:
    """uint8 ``(n, 3, H, W)`` -> float32 ``(x / 255 - mean) / std`` per channel."""
    m = torch.tensor(mean, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=images.device).view(1, -1, 1, 1)
    return ((images.float() / 255.0) - m) / s


# ---------------------------------------------------------------------------------- augmentation
def augment_batch(
    images: torch.Tensor, generator: torch.Generator, pad: int = AUGMENT_PAD
) -> torch.Tensor:
    """Random crop of a ``pad``-pixel reflect-padded image plus a horizontal flip with probability 1/2.

    Each image gets its own offsets ``(dy, dx)`` uniform in ``{0..2 pad}`` and its own flip; all drawn
    from ``generator`` (which must live on ``images``' device). The crop and the flip are one
    ``torch.gather`` of the padded batch along its flattened pixels, so there is no per-image Python
    work (a gather is about 6x faster on the CPU than the equivalent 4-index advanced indexing).
    """
    n, c, h, w = images.shape
    device = images.device
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad), mode="reflect")
    dy = torch.randint(0, 2 * pad + 1, (n,), device=device, generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (n,), device=device, generator=generator)
    flip = torch.randint(0, 2, (n,), device=device, generator=generator).bool()
    rows = dy[:, None] + torch.arange(h, device=device)
    cols = dx[:, None] + torch.arange(w, device=device)
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    pixels = (rows[:, :, None] * (w + 2 * pad) + cols[:, None, :]).reshape(n, 1, h * w)
    flat = padded.reshape(n, c, -1).gather(2, pixels.expand(n, c, h * w))
    return flat.reshape(n, c, h, w)


def _search_roots(name: str, data_dir: str | Path | None, defaults: list[Path]) -> list[Path]:
    """Where to look for a data set: the named ``data_dir`` only (it must exist), else ``defaults``."""
    if not data_dir:
        return defaults
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise DataNotFoundError(
            f"{name} not found: data_dir {root} {what}. Fix the path, create the folder (downloads "
            f"go into it unless INITMEM_OFFLINE=1), or leave data_dir out to use the default places"
        )
    return [root]


# ---------------------------------------------------------------------------------- CIFAR-10
def find_cifar10(data_dir: str | Path | None = None, *, download: bool | None = None) -> Path:
    """The ``cifar-10-batches-py`` folder to read: under ``data_dir`` (or ``data_dir`` itself) when it is
    given, else under the cache dir; else torchvision's download into ``data_dir`` (or the cache dir).
    Raises :class:`DataNotFoundError` naming every place looked at (a ``data_dir`` that does not exist
    is an error: no silent fallback to another copy)."""
    roots = _search_roots("CIFAR-10", data_dir, [default_cache_dir()])
    candidates = list(dict.fromkeys(c for root in roots for c in (root / CIFAR10_FOLDER, root)))
    for folder in candidates:
        if all((folder / name).is_file() for name in (*CIFAR10_TRAIN_FILES, "test_batch")):
            return folder
    target = roots[0]
    if downloads_allowed(download):
        try:
            # deferred: torchvision loads only to read this data set
            import torchvision

            torchvision.datasets.CIFAR10(str(target), train=True, download=True)
            return target / CIFAR10_FOLDER
        except Exception as err:  # offline, refused, disk full: reported below
            failure = f"torchvision's download into {target} failed ({err})"
    else:
        failure = "download not attempted (offline: download=False or INITMEM_OFFLINE=1)"
    looked = ", ".join(str(p) for p in candidates)
    raise DataNotFoundError(
        f"CIFAR-10 not found. Looked for {CIFAR10_FOLDER}/ (data_batch_1..5, test_batch) in: {looked}; "
        f"{failure}. Get it from https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, unpack it "
        f"and pass its parent folder as data_dir (or set INITMEM_DATA); or use dataset "
        f"'fashion-mnist' offline."
    )


def read_cifar10(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read an official-format ``cifar-10-batches-py`` folder -> (train images, labels, test images,
    labels); images uint8 ``(n, 3, 32, 32)``, labels uint8. Files of a full copy (10,000 images each)
    must match the official md5s."""
    folder = Path(folder)
    train = [_read_cifar10_file(folder / name) for name in CIFAR10_TRAIN_FILES]
    test_x, test_y = _read_cifar10_file(folder / "test_batch")
    train_x = np.concatenate([x for x, _ in train])
    train_y = np.concatenate([y for _, y in train])
    return train_x, train_y, test_x, test_y


def _read_cifar10_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not path.is_file():
        raise DataNotFoundError(f"CIFAR-10 file missing: {path}")
    raw = path.read_bytes()
    entry = _SafeUnpickler.loads(raw)
    entry = {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}
    data = np.asarray(entry["data"], dtype=np.uint8)
    labels = np.asarray(entry["labels"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{path}: not an official CIFAR-10 python batch (data shape {data.shape})")
    if len(data) == CIFAR10_IMAGES_PER_FILE and path.name in CIFAR10_MD5:
        digest = hashlib.md5(raw).hexdigest()
        if digest != CIFAR10_MD5[path.name]:
            raise ValueError(
                f"{path}: md5 {digest} differs from the official {CIFAR10_MD5[path.name]} "
                f"(corrupt or modified copy; download it again)"
            )
    return data.reshape(-1, 3, 32, 32), labels


class _SafeUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batches (dicts, lists, bytes, numpy arrays) and refuses anything else."""

    _ALLOWED = {
        ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name} from a data file")
        if module == "numpy.core.multiarray":  # numpy >= 2 moved numpy.core to numpy._core
            module = "numpy._core.multiarray" if hasattr(np, "_core") else module
        return super().find_class(module, name)

    @classmethod
    def loads(cls, raw: bytes):
        # deferred: only this rarely used path needs it
        import io

        return cls(io.BytesIO(raw), encoding="bytes").load()


def foolbox_cifar10_images() -> tuple[np.ndarray, np.ndarray]:
    """The 20 real CIFAR-10 test images shipped as PNGs in foolbox's ``data/`` folder (foolbox itself is
    not imported): uint8 ``(20, 3, 32, 32)`` and labels uint8 ``(20,)``, in the official test order."""
    # deferred: Pillow loads only to read the fixture's images
    from PIL import Image

    spec = importlib.util.find_spec("foolbox")
    if spec is None or not spec.submodule_search_locations:
        raise DataNotFoundError(
            "foolbox is not installed; `pip install --no-deps foolbox==3.3.4` provides the 20 CIFAR-10 "
            "images of the fixture"
        )
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    pattern = re.compile(r"cifar10_(\d+)_(\d+)\.png$")
    found = sorted(
        (int(m.group(1)), int(m.group(2)), p)
        for p in folder.iterdir()
        if (m := pattern.match(p.name))
    )
    if not found:
        raise DataNotFoundError(f"no cifar10_<index>_<label>.png images in {folder}")
    images = np.stack(
        [
            np.asarray(Image.open(p).convert("RGB"), dtype=np.uint8).transpose(2, 0, 1)
            for *_, p in found
        ]
    )
    labels = np.array([label for _, label, _ in found], dtype=np.uint8)
    return images, labels


def write_cifar10_fixture(root: str | Path, images_per_batch: int = 4) -> Path:
    """Write foolbox's 20 CIFAR-10 images as an official-format ``root/cifar-10-batches-py`` folder.

    ``data_batch_1..5`` hold consecutive groups of ``images_per_batch`` images (all 20 across the five
    files by default), ``test_batch`` holds all 20, ``batches.meta`` the class names. Each batch is a
    pickled dict with ``b'data'`` (uint8, n x 3072, channel-major), ``b'labels'``, ``b'batch_label'`` and
    ``b'filenames'``, as in the official files; ``batches.meta`` is written last. Returns the folder.
    """
    images, labels = foolbox_cifar10_images()
    folder = Path(root) / CIFAR10_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    flat = images.reshape(len(images), -1)

    def batch(label: str, rows: np.ndarray) -> dict:
        return {
            b"batch_label": label.encode(),
            b"labels": [int(v) for v in labels[rows]],
            b"data": np.ascontiguousarray(flat[rows]),
            b"filenames": [f"fixture_{i:02d}.png".encode() for i in rows],
        }

    for i, name in enumerate(CIFAR10_TRAIN_FILES):
        rows = np.arange(i * images_per_batch, (i + 1) * images_per_batch) % len(images)
        _write_pickle(folder / name, batch(f"training batch {i + 1} of 5", rows))
    _write_pickle(folder / "test_batch", batch("testing batch 1 of 1", np.arange(len(images))))
    meta = {
        b"label_names": [c.encode() for c in CIFAR10_CLASSES],
        b"num_cases_per_batch": images_per_batch,
        b"num_vis": 3072,
    }
    _write_pickle(folder / "batches.meta", meta)
    return folder


def _write_pickle(path: Path, obj) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # workers may build one fixture at once
    with tmp.open("wb") as fh:
        pickle.dump(obj, fh, protocol=2)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------- Fashion-MNIST
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def find_fashion_mnist(data_dir: str | Path | None = None, *, download: bool | None = None) -> Path:
    """The folder holding Fashion-MNIST's four IDX files (plain or ``.gz``): ``data_dir`` (or its
    ``FashionMNIST/raw``) when it is given, else the Debian package's folder or the cache dir; else
    torchvision's download. A ``data_dir`` that does not exist is an error (:class:`DataNotFoundError`),
    and a given one is the only place looked at: no silent fallback to another copy."""
    roots = _search_roots("Fashion-MNIST", data_dir, [DEBIAN_FASHION_MNIST, default_cache_dir()])
    candidates = list(
        dict.fromkeys(
            c
            for root in roots
            for c in (root, root / "FashionMNIST" / "raw", root / "fashion-mnist")
        )
    )
    for folder in candidates:
        if all(_idx_path(folder, name) is not None for name in FASHION_MNIST_FILES.values()):
            return folder
    target = Path(data_dir).expanduser() if data_dir else default_cache_dir()
    if downloads_allowed(download):
        try:
            # deferred: torchvision loads only to read this data set
            import torchvision

            torchvision.datasets.FashionMNIST(str(target), train=True, download=True)
            torchvision.datasets.FashionMNIST(str(target), train=False, download=True)
            return target / "FashionMNIST" / "raw"
        except Exception as err:  # offline or refused: report below with the places we looked
            failure = f"torchvision's download into {target} failed ({str(err).splitlines()[0]})"
    else:
        failure = "download not attempted (offline: download=False or INITMEM_OFFLINE=1)"
    looked = ", ".join(str(p) for p in candidates)
    raise DataNotFoundError(
        f"Fashion-MNIST not found. Looked for {', '.join(FASHION_MNIST_FILES.values())} (.gz or plain) "
        f"in: {looked}; {failure}. Install it offline with `sudo apt-get install dataset-fashion-mnist` "
        f"(Debian/Ubuntu) or pass data_dir holding the four IDX files."
    )


def _idx_path(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (the MNIST format; gzipped or plain) of unsigned bytes into a uint8 array.

    Format: two zero bytes, a type byte (0x08 = uint8), the number of dimensions, then each dimension as
    a big-endian int32, then the data in C order.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the file is called
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}i", raw[4 : 4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {data.size} bytes of data for shape {shape}")
    return data.reshape(shape)


def read_fashion_mnist(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fashion-MNIST from IDX files -> (train images, labels, test images, labels) with images uint8
    ``(n, 3, 32, 32)``: zero-padded by 2 pixels on each side and repeated to 3 channels."""
    folder = Path(folder)
    arrays = {key: read_idx(_idx_path(folder, stem)) for key, stem in FASHION_MNIST_FILES.items()}
    return (
        pad_to_cifar_shape(arrays["train_images"]),
        arrays["train_labels"],
        pad_to_cifar_shape(arrays["test_images"]),
        arrays["test_labels"],
    )


def pad_to_cifar_shape(images: np.ndarray) -> np.ndarray:
    """uint8 ``(n, 28, 28)`` -> ``(n, 3, 32, 32)``: 2 pixels of zeros on each side, gray repeated 3x."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    return np.repeat(padded[:, None], 3, axis=1)


# ---------------------------------------------------------------------------------- synthetic
def synthetic_pools(config: RunConfig):
    """Uniformly random uint8 images and labels drawn from ``split_seed``, for speed benchmarks without
    data files. Only the images the split uses are drawn; the rest of the pool stays zero (and the
    pool's statistics are not used: :data:`SYNTHETIC_STATS` are the uniform distribution's)."""
    rng = np.random.default_rng(config.split_seed)
    pool = config.train_pool_size
    train_idx, val_idx = split_indices(
        pool, config.resolved_val_size, config.train_size, config.split_seed
    )
    test_pool = TEST_POOL_SIZES["synthetic"]
    test_idx = subset_indices(test_pool, config.test_size, config.split_seed)

    def draw(n: int, used: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        images = np.zeros((n, 3, 32, 32), dtype=np.uint8)
        images[used.numpy()] = rng.integers(0, 256, size=(len(used), 3, 32, 32), dtype=np.uint8)
        return images, rng.integers(0, 10, size=n, dtype=np.uint8)

    return (*draw(pool, torch.cat([train_idx, val_idx])), *draw(test_pool, test_idx))


#: Per-channel mean and std (units of 1/255) of bytes uniform on 0..255: 127.5 / 255 and
#: sqrt((256^2 - 1) / 12) / 255.
SYNTHETIC_STATS = ((127.5 / 255,) * 3, (float(np.sqrt((256**2 - 1) / 12) / 255),) * 3)


__all__ = [
    "AUGMENT_PAD",
    "CIFAR10_CLASSES",
    "CIFAR10_MD5",
    "DataNotFoundError",
    "DataSplits",
    "FASHION_MNIST_CLASSES",
    "ImageSplit",
    "augment_batch",
    "channel_stats",
    "clear_data_cache",
    "default_cache_dir",
    "downloads_allowed",
    "find_cifar10",
    "find_fashion_mnist",
    "foolbox_cifar10_images",
    "load_splits",
    "normalize",
    "pad_to_cifar_shape",
    "read_cifar10",
    "read_fashion_mnist",
    "read_idx",
    "shared_splits",
    "split_indices",
    "subset_indices",
    "write_cifar10_fixture",
]
