"""Architectures beyond BatchNorm ResNets, for CIFAR-shaped inputs ``(B, 3, 32, 32)`` and 10 classes.

Each builder takes ``(width, num_classes)`` like the ResNets of :mod:`.models`; ``width`` multiplies
every hidden size (``scaled_channels``). What each one says about the init scale alpha:

- :func:`vit_tiny`: a pre-LayerNorm Vision Transformer (Dosovitskiy et al. 2021) with 4 x 4 patches
  (64 tokens), width 192 x ``width``, 4 blocks of 3-head self-attention and a 2x MLP, a final
  LayerNorm, mean pooling and a linear ``head``. Pre-LN blocks normalize the residual stream, which is
  a sum of every branch, so no single weight is scale-invariant; but the patch and position
  embeddings and every branch's output layer, the writers of the stream, are scale-invariant jointly
  (the ``residual_stream`` group, :func:`.models.residual_stream_parameters`): scaled together they
  scale the stream, which every LayerNorm divides out.
- :func:`mlp_mixer`: an MLP-Mixer (Tolstikhin et al. 2021) on the same 64 patches, width 128 x
  ``width``, 4 pre-LN blocks of token mixing (hidden 64) and channel mixing (hidden 2x): no
  scale-invariant weight either, and a ``residual_stream`` group as the ViT's (without the
  token-mixing output biases: per-token constants that every channel LayerNorm subtracts, they do not
  enter the function).
- :func:`nf_resnet`: a normalization-free ResNet with SkipInit (De & Smith 2020): the ResNet-9 layout
  without BatchNorm, every residual branch multiplied by a learnable scalar that starts at 0, convs
  with biases. Nothing is normalized, nothing is scale-invariant; at large alpha the network is
  closest to the lazy (NTK) regime (Chizat, Oyallon & Bach 2019).
- :func:`mlp` and :func:`mlp_ln`: a 3-hidden-layer ReLU MLP (width 512 x ``width``) on the flattened
  image; in ``mlp_ln`` every hidden linear layer is bias-free and followed by LayerNorm, so each of
  those weights is scale-invariant per example (``LN(c W x) = LN(W x)``), the LayerNorm counterpart of
  a BatchNorm-followed conv; the first layer's weight is too, and the head is not.

Which weights are scale-invariant is not declared here: :func:`.models.scale_invariant_parameters`
finds them from the module graph, and the tests check each answer numerically.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn

from .shapes import NUM_CLASSES, scaled_channels

PATCH = 4
TOKENS = (32 // PATCH) ** 2


class Attention(nn.Module):
    """Multi-head self-attention from one bias-carrying ``qkv`` linear layer and an output ``proj``."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be a multiple of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class PreNorm(nn.Module):
    """``x + body(LayerNorm(x))``: a pre-LN residual block."""

    def __init__(self, dim: int, body: nn.Module):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(self.norm(x))


class Tokens(nn.Module):
    """Image -> ``(B, tokens, dim)``: a ``PATCH``-strided conv (one linear map per patch)."""

    def __init__(self, dim: int, position: bool):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, PATCH, stride=PATCH)
        self.position = nn.Parameter(torch.randn(1, TOKENS, dim) * 0.02) if position else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        return tokens if self.position is None else tokens + self.position


class MeanTokens(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=1)


def _mlp(dim: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


def _pre_ln_network(
    dim: int, num_classes: int, token_mixer: Callable[[], nn.Module], position: bool
) -> nn.Sequential:
    """Patch tokens, 4 pre-LN blocks of (token mixer, 2x MLP), a final LayerNorm, mean pooling, head."""
    blocks = []
    for _ in range(4):
        blocks += [PreNorm(dim, token_mixer()), PreNorm(dim, _mlp(dim, 2 * dim))]
    return nn.Sequential(
        OrderedDict(
            tokens=Tokens(dim, position=position),
            blocks=nn.Sequential(*blocks),
            norm=nn.LayerNorm(dim),
            pool=MeanTokens(),
            head=nn.Linear(dim, num_classes),
        )
    )


def vit_tiny(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """Pre-LN ViT (module docstring); ``dim`` = 192 x width rounded to a multiple of its 3 heads."""
    heads = 3
    dim = heads * scaled_channels(64, width)
    return _pre_ln_network(dim, num_classes, lambda: Attention(dim, heads), position=True)


class TokenMixing(nn.Module):
    """The Mixer's token-mixing MLP: across tokens, shared over channels."""

    def __init__(self, hidden: int):
        super().__init__()
        self.mlp = _mlp(TOKENS, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x.transpose(1, 2)).transpose(1, 2)


def mlp_mixer(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """MLP-Mixer (module docstring) with ``dim`` = 128 x width."""
    dim = scaled_channels(128, width)
    return _pre_ln_network(dim, num_classes, lambda: TokenMixing(64), position=False)


class SkipInit(nn.Module):
    """``x + gain * body(x)`` with a learnable scalar ``gain`` that starts at 0 (De & Smith 2020)."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body
        self.gain = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.gain * self.body(x)


def _conv_relu(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        OrderedDict(conv=nn.Conv2d(c_in, c_out, 3, padding=1), relu=nn.ReLU(inplace=True))
    )


def nf_resnet(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """ResNet-9's layout without BatchNorm, residual branches SkipInit-gated (module docstring)."""
    c64, c128, c256, c512 = (scaled_channels(c, width) for c in (64, 128, 256, 512))

    def stage(c_in: int, c_out: int, residual: bool) -> nn.Sequential:
        parts = OrderedDict(conv=_conv_relu(c_in, c_out), pool=nn.MaxPool2d(2))
        if residual:
            parts["res"] = SkipInit(
                nn.Sequential(_conv_relu(c_out, c_out), _conv_relu(c_out, c_out))
            )
        return nn.Sequential(parts)

    return nn.Sequential(
        OrderedDict(
            prep=_conv_relu(3, c64),
            layer1=stage(c64, c128, True),
            layer2=stage(c128, c256, False),
            layer3=stage(c256, c512, True),
            pool=nn.AdaptiveMaxPool2d(1),
            flatten=nn.Flatten(),
            head=nn.Linear(c512, num_classes),
        )
    )


def _plain_mlp(width: float, num_classes: int, layer_norm: bool) -> nn.Sequential:
    hidden = scaled_channels(512, width)
    layers: OrderedDict[str, nn.Module] = OrderedDict(flatten=nn.Flatten())
    size = 3 * 32 * 32
    for i in range(3):
        layers[f"fc{i}"] = nn.Linear(size, hidden, bias=not layer_norm)
        if layer_norm:
            layers[f"norm{i}"] = nn.LayerNorm(hidden)
        layers[f"relu{i}"] = nn.ReLU()
        size = hidden
    layers["head"] = nn.Linear(size, num_classes)
    return nn.Sequential(layers)


def mlp(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """3 hidden ReLU layers of 512 x width on the flattened image; no normalization."""
    return _plain_mlp(width, num_classes, layer_norm=False)


def mlp_ln(width: float = 1.0, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """:func:`mlp` with every hidden layer bias-free and followed by LayerNorm."""
    return _plain_mlp(width, num_classes, layer_norm=True)


ARCHITECTURES = {
    "vit-tiny": vit_tiny,
    "mlp-mixer": mlp_mixer,
    "nf-resnet": nf_resnet,
    "mlp": mlp,
    "mlp-ln": mlp_ln,
}

__all__ = [
    "ARCHITECTURES",
    "Attention",
    "MeanTokens",
    "PreNorm",
    "SkipInit",
    "TokenMixing",
    "Tokens",
    "mlp",
    "mlp_ln",
    "mlp_mixer",
    "nf_resnet",
    "vit_tiny",
]
