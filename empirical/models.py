"""BatchNorm ResNets for CIFAR-shaped inputs, and the init scale alpha applied by parameter group.

Models (every convolution bias-free and followed by BatchNorm, default PyTorch initialization):

- :func:`resnet9`: the DAWNBench ResNet-9 of David Page ("How to train your ResNet", 2018), as in
  airbench: prep conv(64) -> layer1 conv(128) + max-pool + residual(2 x conv 128) -> layer2 conv(256) +
  max-pool -> layer3 conv(512) + max-pool + residual(2 x conv 512) -> global max-pool -> bias-free
  linear(10) -> logits x 0.125. Every "conv" is conv3x3 + BatchNorm + ReLU; a residual block is
  ``x + f(f(x))``. We keep Page's fixed output scale 0.125 (a constant, not a parameter: alpha never
  touches it). 6,573,120 parameters at width 1.
- :func:`resnet18`: the CIFAR variant of He et al. (2016): conv3x3(64) stem, no max-pool, BasicBlocks
  [2, 2, 2, 2] with 64-128-256-512 channels and strides 1-2-2-2, a 1x1 conv + BatchNorm shortcut where
  the shape changes, global average pool, linear(10) with bias. 11,173,962 parameters at width 1.

Width multiplier: every channel count ``c`` becomes ``max(1, floor(c * width + 0.5))`` (round half up,
at least one channel); the 10 outputs are never scaled.

Init scale (:func:`apply_init_scale`): theta_0(alpha) = alpha * theta_0_default on the chosen groups,
with the same default draw for every alpha (the draw depends only on the seed). What each group does to
the network at initialization, in train mode (BatchNorm uses batch statistics):

- ``conv``: every conv weight is followed by BatchNorm, so the function is unchanged (up to BatchNorm's
  eps); each conv weight's gradient is divided by alpha and its effective learning rate
  ``lr / |w|^2`` by alpha^2. Only the training dynamics change.
- ``bn``: BatchNorm weights become alpha (biases start at 0 and stay 0). With zero biases ReLU,
  max-pool and residual sums are positively homogeneous, so every block output is multiplied by alpha:
  ResNet-9's logits are multiplied by alpha; ResNet-18's features are, and its logits become
  ``alpha * W f + b``.
- ``head``: the final linear layer (weight, and bias where there is one) is multiplied by alpha, so the
  logits are multiplied by alpha.
- ``all``: every parameter, i.e. all three: ResNet-9's logits are multiplied by alpha^2.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import torch
from torch import nn

from .config import ALPHA_GROUPS, RunConfig
from .shapes import scaled_channels

NUM_CLASSES = 10
#: Page's fixed logit scale for ResNet-9.
RESNET9_OUTPUT_SCALE = 0.125


class ConvBN(nn.Sequential):
    """conv3x3 (or 1x1), bias-free, then BatchNorm, then ReLU unless ``relu=False``.

    The conv weight is scale-invariant in train mode: BatchNorm divides out its norm.
    """

    def __init__(
        self, c_in: int, c_out: int, *, kernel: int = 3, stride: int = 1, relu: bool = True
    ):
        layers = [
            ("conv", nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, bias=False)),
            ("bn", nn.BatchNorm2d(c_out)),
        ]
        if relu:
            layers.append(("relu", nn.ReLU(inplace=True)))
        super().__init__(OrderedDict(layers))


class Residual(nn.Module):
    """``x + body(x)``."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class Scale(nn.Module):
    """Multiply by a fixed constant (not a parameter)."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor}"


def resnet9(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """Page's DAWNBench ResNet-9 (see the module docstring) at channel multiplier ``width``."""
    c64, c128, c256, c512 = (scaled_channels(c, width) for c in (64, 128, 256, 512))
    return nn.Sequential(
        OrderedDict(
            prep=ConvBN(3, c64),
            layer1=nn.Sequential(
                OrderedDict(
                    conv=ConvBN(c64, c128),
                    pool=nn.MaxPool2d(2),
                    res=Residual(nn.Sequential(ConvBN(c128, c128), ConvBN(c128, c128))),
                )
            ),
            layer2=nn.Sequential(OrderedDict(conv=ConvBN(c128, c256), pool=nn.MaxPool2d(2))),
            layer3=nn.Sequential(
                OrderedDict(
                    conv=ConvBN(c256, c512),
                    pool=nn.MaxPool2d(2),
                    res=Residual(nn.Sequential(ConvBN(c512, c512), ConvBN(c512, c512))),
                )
            ),
            pool=nn.AdaptiveMaxPool2d(1),
            flatten=nn.Flatten(),
            head=nn.Linear(c512, num_classes, bias=False),
            scale=Scale(RESNET9_OUTPUT_SCALE),
        )
    )


class BasicBlock(nn.Module):
    """He et al.'s basic block: relu(bn(conv(relu(bn(conv(x))))) + shortcut(x)); the shortcut is a
    1x1 conv + BatchNorm when the stride or the channel count changes, else the identity."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = ConvBN(c_in, c_out, stride=stride)
        self.conv2 = ConvBN(c_out, c_out, relu=False)
        self.shortcut = (
            ConvBN(c_in, c_out, kernel=1, stride=stride, relu=False)
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


def resnet18(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """The CIFAR ResNet-18 (see the module docstring) at channel multiplier ``width``."""
    channels = [scaled_channels(c, width) for c in (64, 128, 256, 512)]
    layers: OrderedDict[str, nn.Module] = OrderedDict(stem=ConvBN(3, channels[0]))
    c_in = channels[0]
    for i, (c_out, stride) in enumerate(zip(channels, (1, 2, 2, 2), strict=True), start=1):
        layers[f"layer{i}"] = nn.Sequential(
            BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)
        )
        c_in = c_out
    layers.update(
        pool=nn.AdaptiveAvgPool2d(1), flatten=nn.Flatten(), head=nn.Linear(c_in, num_classes)
    )
    return nn.Sequential(layers)


MODEL_BUILDERS = {"resnet9": resnet9, "resnet18": resnet18}


def build_model(config: RunConfig) -> nn.Module:
    """The config's model with the default init drawn from ``config.seed`` (the global RNG is left as it
    was), then scaled by ``config.alpha`` on ``config.alpha_groups``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = MODEL_BUILDERS[config.model](config.width)
    apply_init_scale(model, config.alpha, config.alpha_groups)
    return model


# ---------------------------------------------------------------------------------- parameter groups
def parameter_groups(model: nn.Module) -> dict[str, list[str]]:
    """Parameter names by group: ``conv`` (conv weights), ``bn`` (BatchNorm weights and biases), ``head``
    (the final linear layer's parameters), ``all`` (every parameter)."""
    groups: dict[str, list[str]] = {"conv": [], "bn": [], "head": []}
    kinds = ((nn.Conv2d, "conv"), (nn.modules.batchnorm._BatchNorm, "bn"), (nn.Linear, "head"))
    for module_name, module in model.named_modules():
        for kind, group in kinds:
            if isinstance(module, kind):
                prefix = f"{module_name}." if module_name else ""
                groups[group] += [
                    prefix + name for name, _ in module.named_parameters(recurse=False)
                ]
    groups["all"] = [name for name, _ in model.named_parameters()]
    return groups


def apply_init_scale(model: nn.Module, alpha: float, groups: Iterable[str] = ("all",)) -> nn.Module:
    """Multiply, in place, the parameters of ``groups`` (any of ``all``, ``conv``, ``bn``, ``head``) by
    ``alpha > 0``; see the module docstring for what each choice does to the function. Returns ``model``."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0 (got {alpha})")
    groups = tuple(groups)
    unknown = [g for g in groups if g not in ALPHA_GROUPS]
    if unknown or not groups:
        raise ValueError(
            f"alpha_groups must be a non-empty subset of {list(ALPHA_GROUPS)} (got {groups})"
        )
    by_group = parameter_groups(model)
    names = {name for group in groups for name in by_group[group]}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in names:
                param.mul_(alpha)
    return model


def scale_invariant_parameters(model: nn.Module) -> list[str]:
    """Names of the conv weights followed directly by BatchNorm (in a :class:`ConvBN`): the loss is
    invariant to ``w -> c w`` for these in train mode, so ``<w, grad> = 0`` and their effective learning
    rate is ``lr / |w|^2``."""
    names = []
    for module_name, module in model.named_modules():
        if isinstance(module, ConvBN):
            names.append(f"{module_name}.conv.weight")
    return names


__all__ = [
    "BasicBlock",
    "ConvBN",
    "MODEL_BUILDERS",
    "RESNET9_OUTPUT_SCALE",
    "Residual",
    "apply_init_scale",
    "build_model",
    "parameter_groups",
    "resnet18",
    "resnet9",
    "scale_invariant_parameters",
    "scaled_channels",
]
