"""The ResNets' BN-followed conv shapes without torch, and the init number they give in expectation.

:func:`conv_shapes` lists, in the order of :func:`initmem.empirical.models.scale_invariant_parameters`,
the weight shape ``(c_out, c_in, k, k)`` of every conv followed by BatchNorm of ``resnet9`` /
``resnet18`` at a width multiplier (the architectures of :mod:`initmem.empirical.models`, whose
channel rule :func:`scaled_channels` is this module's). :func:`expected_inv_init_sq_per_coord` is the
mean over these layers of ``d / E|w_0|^2`` under PyTorch's default conv init, so ``initmem sweep run
--dry-run`` computes the ``adam`` unit of forgetting without building a model.

PyTorch's default ``Conv2d`` init is ``kaiming_uniform_(a = sqrt(5))``: ``U(-b, b)`` with
``b = gain sqrt(3 / fan_in)``, ``gain = sqrt(2 / (1 + a^2)) = 1 / sqrt(3)``, so ``b = 1 / sqrt(fan_in)``
and ``Var w = b^2 / 3 = 1 / (3 fan_in)`` (``fan_in = c_in k^2``). Then ``E|w_0|^2 = d / (3 fan_in)``
and ``d / E|w_0|^2 = 3 fan_in`` per layer (derived here; a drawn init differs by the fluctuation of
``|w_0|^2``, relative standard deviation ``sqrt(0.8 / d)``).
"""

from __future__ import annotations

import numpy as np

#: Classes every architecture's head predicts.
NUM_CLASSES = 10
#: The models this table knows (others, built-in or plug-in, are measured on a built model).
RESNETS = ("resnet9", "resnet18")
#: Channel counts of the ResNets at width 1.
BASE_CHANNELS = (64, 128, 256, 512)


def scaled_channels(channels: int, width: float) -> int:
    """``max(1, floor(channels * width + 0.5))``: the channel count at width multiplier ``width``."""
    if not width > 0:
        raise ValueError(f"width must be > 0 (got {width})")
    return max(1, int(channels * width + 0.5))


def conv_shapes(model: str, width: float) -> list[tuple[int, int, int, int]]:
    """Weight shapes of the BN-followed convs of ``model`` ("resnet9" or "resnet18") at ``width``."""
    c64, c128, c256, c512 = (scaled_channels(c, width) for c in BASE_CHANNELS)
    if model == "resnet9":
        pairs = [(3, c64), (c64, c128), (c128, c128), (c128, c128), (c128, c256)]
        pairs += [(c256, c512), (c512, c512), (c512, c512)]
        return [(c_out, c_in, 3, 3) for c_in, c_out in pairs]
    if model != "resnet18":
        raise ValueError(f"model must be 'resnet9' or 'resnet18' (got {model!r})")
    shapes = [(c64, 3, 3, 3)]
    c_in = c64
    for c_out, stride in zip((c64, c128, c256, c512), (1, 2, 2, 2), strict=True):
        for block_stride in (stride, 1):  # two BasicBlocks per stage
            shapes += [(c_out, c_in, 3, 3), (c_out, c_out, 3, 3)]
            if block_stride != 1 or c_in != c_out:
                shapes.append((c_out, c_in, 1, 1))  # the 1x1 shortcut
            c_in = c_out
    return shapes


def expected_inv_init_sq_per_coord(model: str, width: float) -> float:
    """Mean over the BN-followed convs of ``d / E|w_0|^2 = 3 fan_in`` at alpha = 1 (module
    docstring): the expected value of :func:`initmem.theory.units.inv_init_sq_per_coord`."""
    fan_in = np.array([c_in * k * k for _, c_in, k, _ in conv_shapes(model, width)], dtype=float)
    return float(np.mean(3.0 * fan_in))


__all__ = [
    "BASE_CHANNELS",
    "NUM_CLASSES",
    "RESNETS",
    "conv_shapes",
    "expected_inv_init_sq_per_coord",
    "scaled_channels",
]
