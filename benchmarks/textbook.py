"""The pipeline a researcher would otherwise write: the PyTorch CIFAR-10 tutorial's recipe.

A ``torchvision`` CIFAR-style dataset (:class:`ArrayCIFAR`, a ``VisionDataset`` over uint8 arrays that
hands out PIL images exactly as ``torchvision.datasets.CIFAR10.__getitem__`` does; CIFAR-10 itself
cannot be downloaded here), the standard augmentation as PIL transforms (``RandomCrop(32, padding=4)``,
``RandomHorizontalFlip``, ``ToTensor``, ``Normalize``), a ``DataLoader`` with shuffling and
``num_workers=2`` (the tutorial's choice, and the core count of the machine these numbers come from),
and an eager float32 loop in the default (NCHW) memory format::

    for images, labels in loader:
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()

The model is the toolkit's own ResNet-9 at the same width and seed, so the two pipelines differ only in
how they feed and run it.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import VisionDataset

#: CIFAR-10's per-channel mean and standard deviation (the values tutorials hard-code).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
#: DataLoader worker processes, as in the PyTorch CIFAR-10 tutorial.
TEXTBOOK_WORKERS = 2


class ArrayCIFAR(VisionDataset):
    """CIFAR-style dataset over uint8 images ``(n, 32, 32, 3)`` (HWC, as torchvision's CIFAR10 stores
    them) and integer labels; ``__getitem__`` returns ``(transform(PIL image), label)``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform=None):
        super().__init__(root="", transform=transform)
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(
                f"images must be uint8 (n, H, W, 3) (got {images.dtype} {images.shape})"
            )
        if len(images) != len(labels):
            raise ValueError(f"labels must match images ({len(labels)} != {len(images)})")
        self.data = images
        self.targets = [int(y) for y in labels]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        img, target = Image.fromarray(self.data[index]), self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def train_transform() -> transforms.Compose:
    """The tutorial's training augmentation, as PIL transforms."""
    return transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(CIFAR10_MEAN, CIFAR10_STD),
        ]
    )


class TextbookPipeline:
    """DataLoader + eager fp32 loop over ``model`` (SGD, momentum 0.9, lr 1e-3: the trainer's step).

    ``images_nchw``: uint8 ``(n, 3, 32, 32)``, the same images the toolkit trains on. Workers are
    persistent, so after the first epoch no epoch pays the worker start-up (generous to this side).
    On a GPU (``device``, where ``model`` must already be) each batch is copied over with ``.to``.
    """

    def __init__(
        self,
        model: nn.Module,
        images_nchw: np.ndarray,
        labels: np.ndarray,
        *,
        batch_size: int,
        num_workers: int = TEXTBOOK_WORKERS,
        lr: float = 1e-3,
        momentum: float = 0.9,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ):
        dataset = ArrayCIFAR(
            np.ascontiguousarray(images_nchw.transpose(0, 2, 3, 1)), labels, train_transform()
        )
        self.loader = DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=True,
            num_workers=num_workers,
            drop_last=True,
            persistent_workers=num_workers > 0,
            generator=torch.Generator().manual_seed(seed),
        )
        self.model = model.train()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        self.batch_size = batch_size
        self.device = torch.device(device)

    def train_epoch(self) -> int:
        """One pass over the data; returns the number of images trained on."""
        seen = 0
        for images, labels in self.loader:
            images, labels = images.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(images), labels)
            loss.backward()
            self.optimizer.step()
            seen += len(labels)
        return seen

    def close(self) -> None:
        """Stop the persistent workers."""
        iterator = getattr(self.loader, "_iterator", None)
        if iterator is not None:
            iterator._shutdown_workers()
