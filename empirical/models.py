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
- ``residual_stream``: a pre-LN network's embedding and residual writers
  (:func:`residual_stream_parameters`): the function is unchanged (every LayerNorm divides the scale
  out); empty in the ResNets.
"""

from __future__ import annotations

import copy
import math
import operator
from collections import OrderedDict
from collections.abc import Iterable

import torch
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from .architectures import ARCHITECTURES
from .config import ALPHA_GROUPS, ConfigError, RunConfig
from .data import num_classes
from .plugins import PluginError, call_plugin, is_plugin, resolve_plugin
from .shapes import NUM_CLASSES, scaled_channels

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


#: Built-in models by name (:data:`.config.MODELS`); a ``"package.module:function"`` string names a
#: plug-in (:mod:`.plugins`).
MODEL_BUILDERS = {"resnet9": resnet9, "resnet18": resnet18, **ARCHITECTURES}


def default_model(config: RunConfig) -> nn.Module:
    """The config's model with its default init drawn from ``config.seed`` (the global RNG is left as
    it was), before any init scaling: a built-in builder at ``config.width`` with a head of
    :func:`~.data.num_classes` outputs (10 for the built-in data sets), or a plug-in's
    ``function(config, **config.model_args)``."""
    if is_plugin(config.model):
        builder = resolve_plugin(config.model, "model")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            model = call_plugin(builder, config, config.model_args, "model")
        if not isinstance(model, nn.Module):
            raise PluginError(
                f"model = {config.model!r} returned {type(model).__name__}, not a torch.nn.Module"
            )
        return model
    classes = num_classes(config)  # the head's width follows the data (10 for the built-in sets)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return MODEL_BUILDERS[config.model](config.width, classes)


def build_model(config: RunConfig) -> nn.Module:
    """:func:`default_model`, then scaled by ``config.alpha`` on ``config.alpha_groups``.

    A group of ``alpha_groups`` that holds no parameter of the model (``norm`` on a model without
    normalization, ``head`` on one without a linear layer) would leave alpha without effect, silently:
    that is a :class:`~.config.ConfigError` naming the group and the model, unless
    ``config.allow_empty_alpha_groups``."""
    model = default_model(config)
    if not config.allow_empty_alpha_groups:
        check_alpha_groups(model, config)
    apply_init_scale(model, config.alpha, config.alpha_groups)
    return model


def group_sizes(model: nn.Module) -> dict[str, int]:
    """Parameters (scalars) in each group of :data:`.config.ALPHA_GROUPS` (:func:`parameter_groups`)."""
    numel = {name: p.numel() for name, p in model.named_parameters()}
    return {group: sum(numel[n] for n in names) for group, names in parameter_groups(model).items()}


def check_alpha_groups(model: nn.Module, config: RunConfig) -> None:
    """Raise :class:`~.config.ConfigError` if a group of ``config.alpha_groups`` holds no parameter
    of ``model`` (then alpha would change nothing there)."""
    sizes = group_sizes(model)
    if sizes["all"] == 0:
        raise ConfigError(
            f"model {config.model!r} has no parameters: there is nothing to train or to scale by "
            "alpha (does its function return the module it builds, with its layers?)"
        )
    empty = [group for group in config.alpha_groups if sizes.get(group, 0) == 0]
    if empty:
        held = [g for g in ALPHA_GROUPS if sizes.get(g, 0) > 0]
        raise ConfigError(
            f"alpha_groups: group {empty[0]!r} holds no parameter of model {config.model!r}, so "
            f"alpha = {config.alpha:g} would change nothing there; its non-empty groups are {held} "
            "(set allow_empty_alpha_groups = true to train anyway)"
        )


# ---------------------------------------------------------------------------------- parameter groups
#: Normalization layers: their affine parameters form the ``norm`` group, and a weight whose output
#: they normalize is scale-invariant (:func:`scale_invariant_parameters`).
NORM_LAYERS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


def head_module(model: nn.Module) -> str | None:
    """The name of the final linear layer: the module called ``head`` if there is one, else the last
    ``nn.Linear`` in module order (None if the model has none)."""
    linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    named = [name for name in linears if name.split(".")[-1] == "head"]
    return named[-1] if named else (linears[-1] if linears else None)


def parameter_groups(model: nn.Module) -> dict[str, list[str]]:
    """Parameter names by group, for any model:

    - ``scale_invariant``: the weights :func:`scale_invariant_parameters` finds;
    - ``conv``: every convolution weight (in the BatchNorm ResNets, exactly the scale-invariant ones);
    - ``norm``: the affine parameters of normalization layers (BatchNorm, LayerNorm, GroupNorm);
      ``bn`` is the same group (its name from the BatchNorm-only days);
    - ``head``: the final linear layer's parameters (:func:`head_module`);
    - ``residual_stream``: the parameters :func:`residual_stream_parameters` finds (jointly
      scale-invariant; empty where the model has no normalized residual stream);
    - ``all``: every parameter.
    """
    groups: dict[str, list[str]] = {"conv": [], "norm": [], "head": []}
    head = head_module(model)
    for module_name, module in model.named_modules():
        prefix = f"{module_name}." if module_name else ""
        own = [prefix + name for name, _ in module.named_parameters(recurse=False)]
        if isinstance(module, nn.modules.conv._ConvNd):
            groups["conv"] += [n for n in own if n.endswith(".weight") or n == "weight"]
        elif isinstance(module, NORM_LAYERS):
            groups["norm"] += own
        if module_name == head and head is not None:
            groups["head"] += own
    groups["bn"] = list(groups["norm"])
    groups["scale_invariant"] = scale_invariant_parameters(model)
    groups["residual_stream"] = residual_stream_parameters(model)
    groups["all"] = [name for name, _ in model.named_parameters()]
    return groups


def apply_init_scale(model: nn.Module, alpha: float, groups: Iterable[str] = ("all",)) -> nn.Module:
    """Multiply, in place, the parameters of ``groups`` (any of :data:`.config.ALPHA_GROUPS`) by
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


# ---------------------------------------------------------------------------------- scale invariance
#: Operations that only move values around: a weight's output that passes through them into a
#: normalization layer is still normalized as a whole.
_SHAPE_METHODS = {"view", "reshape", "flatten", "permute", "transpose", "contiguous", "unflatten"}
_SHAPE_FUNCTIONS = {torch.flatten, torch.reshape, torch.permute, torch.transpose}
_WEIGHTED = (nn.modules.conv._ConvNd, nn.Linear)


def _normalized_by(node, modules: dict[str, nn.Module]) -> bool:
    """Whether every path from ``node``'s output reaches a normalization layer through shape-only
    operations (and at least one does)."""
    if not node.users:
        return False
    for user in node.users:
        if user.op == "call_module" and isinstance(modules[user.target], NORM_LAYERS):
            continue
        shape_only = (user.op == "call_method" and user.target in _SHAPE_METHODS) or (
            user.op == "call_function" and user.target in _SHAPE_FUNCTIONS
        )
        if not (
            shape_only and user.args and user.args[0] is node and _normalized_by(user, modules)
        ):
            return False
    return True


def _invariant_weight(module: nn.Module, calls: list, modules: dict[str, nn.Module]) -> bool:
    """Identity (A) of :func:`scale_invariant_parameters` for one module called at ``calls``."""
    if getattr(module, "standardizes_weight", False):
        return True
    if not isinstance(module, _WEIGHTED) or not calls:
        return False
    for call in calls:
        if not _normalized_by(call, modules):
            return False
        norms = _norms_reached(call, modules)
        bias_cancels = all(isinstance(n, nn.modules.batchnorm._BatchNorm) for n in norms)
        if module.bias is not None and not bias_cancels:
            return False
    return True


def _norms_reached(node, modules: dict[str, nn.Module]) -> list[nn.Module]:
    found = []
    for user in node.users:
        if user.op == "call_module" and isinstance(modules[user.target], NORM_LAYERS):
            found.append(modules[user.target])
        else:
            found += _norms_reached(user, modules)
    return found


def scale_invariant_parameters(model: nn.Module) -> list[str]:
    """Names of the weights ``w`` whose scale the train-mode function ignores: ``f(c w) = f(w)`` for
    every ``c > 0``, so ``<w, grad> = 0`` and the effective learning rate is ``lr / |w|^2``
    (theory/normalized.py).

    Identity (A), read off the module graph (``torch.fx``): the weight of a convolution or linear
    layer whose output reaches, through shape-only operations alone, nothing but normalization layers
    (BatchNorm in train mode, LayerNorm, GroupNorm), which divide out any scale of their input. A bias
    is cancelled by BatchNorm's per-channel mean (it is constant over the normalized axes) but not by
    LayerNorm or GroupNorm: there the layer must be bias-free. A module whose ``standardizes_weight``
    attribute is true (weight standardization: it normalizes its own weight) counts as well. A weight
    that also feeds anything else (a residual sum, an activation before the norm) is not invariant.

    Derived here; the BatchNorm case is van Laarhoven (2017) and Arora, Li & Lyu (2019). Exact up to
    the norm layers' ``eps``. Models that ``torch.fx`` cannot trace fall back to the numeric check
    (:func:`scale_invariance_check`). The trainer verifies the answer numerically at init and records
    it in ``config.json`` (docs/run-format.md).
    """
    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception:  # noqa: BLE001 - any tracing failure: decide numerically instead
        changes = scale_invariance_check(model)
        return [name for name, change in changes.items() if change <= INVARIANCE_RTOL]
    modules = dict(traced.named_modules())
    calls: dict[str, list] = {}
    for node in traced.graph.nodes:
        if node.op == "call_module":
            calls.setdefault(node.target, []).append(node)
    names = []
    for module_name, module in model.named_modules():
        if "weight" in dict(module.named_parameters(recurse=False)) and _invariant_weight(
            module, calls.get(module_name, []), modules
        ):
            names.append(f"{module_name}.weight" if module_name else "weight")
    return names


#: Largest relative change of the float64 output (norm eps ~ 0) that still counts as invariant.
INVARIANCE_RTOL = 1e-9
#: The norm layers' eps in the check (BatchNorm refuses 0): its effect, eps / variance, is far below
#: float64 rounding.
PROBE_EPS = 1e-30
#: The factor each weight is scaled by in the check.
CHECK_FACTOR = 3.0


def scale_invariance_check(
    model: nn.Module, names: Iterable[str] | None = None, *, batch: int = 4, seed: int = 0
) -> dict[str, float]:
    """For each parameter of ``names`` (default: every weight with two or more dimensions), the
    relative change ``max |f(3 w) - f(w)| / max |f(w)|`` of the train-mode output on a seeded probe
    batch ``(batch, 3, 32, 32)``, computed on a float64 copy with every norm layer's ``eps`` set to :data:`PROBE_EPS`
    (so an invariant weight gives float64 rounding, about 1e-15, and :data:`INVARIANCE_RTOL` separates
    the two). ``model`` itself is not changed."""
    if names is None:
        names = [n for n, p in model.named_parameters() if p.dim() >= 2]
    return output_changes(model, {name: [name] for name in names}, batch=batch, seed=seed)


def output_changes(
    model: nn.Module, subsets: dict[str, list[str]], *, batch: int = 4, seed: int = 0
) -> dict[str, float]:
    """For each key of ``subsets``, the relative change ``max |f(3 theta_S) - f(theta)| / max |f|`` of
    the train-mode output when every parameter of its subset ``S`` is scaled by :data:`CHECK_FACTOR`
    together (the others held), on the float64, eps-free copy of :func:`scale_invariance_check`.
    ``model`` itself is not changed."""
    probe_model = copy.deepcopy(model).double().train()
    for module in probe_model.modules():
        if isinstance(module, NORM_LAYERS):
            module.eps = PROBE_EPS
    params = dict(probe_model.named_parameters())
    device = next(iter(params.values())).device if params else torch.device("cpu")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, 32, 32, generator=generator, dtype=torch.float64).to(device)
    state = {k: v.clone() for k, v in probe_model.state_dict().items()}
    changes = {}
    with torch.no_grad():
        base = probe_model(x)
        scale = float(base.abs().max())
        for key, names in subsets.items():
            probe_model.load_state_dict(state)  # BatchNorm's running statistics back as they were
            for name in names:
                params[name].mul_(CHECK_FACTOR)
            changes[key] = float((probe_model(x) - base).abs().max()) / max(scale, 1e-300)
        probe_model.load_state_dict(state)
    return changes


#: The key of :func:`residual_stream_check`'s answer for the whole group scaled together.
JOINT = "joint"


def residual_stream_check(
    model: nn.Module, names: Iterable[str] | None = None, *, batch: int = 4, seed: int = 0
) -> dict[str, float]:
    """The numeric check of :func:`residual_stream_parameters` (``names``; default: found on
    ``model``): the relative output change of :func:`output_changes` with the whole group scaled by 3
    together (key :data:`JOINT`: float64 rounding, at most :data:`INVARIANCE_RTOL`, where the joint
    invariance holds) and with each member scaled alone (its name: well above rounding, since a
    member alone changes the stream's direction). Empty for an empty group."""
    names = residual_stream_parameters(model) if names is None else list(names)
    if not names:
        return {}
    subsets = {JOINT: names, **{name: [name] for name in names}}
    return output_changes(model, subsets, batch=batch, seed=seed)


# ---------------------------------------------------------------------------------- residual stream
#: Operations that add their two operands (a residual sum, an embedding plus a position table).
_ADD_FUNCTIONS = {operator.add, torch.add}
#: Layers whose output is linear in their own parameters (weight and bias): a stream's writers.
_WRITERS = (*_WEIGHTED, nn.Embedding)
#: Queries of a tensor's shape: they read no value, so a stream node may feed them.
_SHAPE_QUERIES = {"size", "dim"}


def _is_add(node) -> bool:
    return (node.op == "call_function" and node.target in _ADD_FUNCTIONS) or (
        node.op == "call_method" and node.target in ("add", "__add__")
    )


def _is_shape_only(node) -> bool:
    return (node.op == "call_method" and node.target in _SHAPE_METHODS) or (
        node.op == "call_function" and node.target in _SHAPE_FUNCTIONS
    )


def _is_shape_query(user, node) -> bool:
    """``node.shape`` or ``node.size()``: reads the shape, not the values."""
    if user.op == "call_method" and user.target in _SHAPE_QUERIES:
        return True
    return (
        user.op == "call_function"
        and user.target is getattr
        and len(user.args) == 2
        and user.args[1] in ("shape", "ndim")
    )


def _stream_sources(node, modules: dict[str, nn.Module], params: dict[str, nn.Parameter]):
    """The operands that ``node``, a value of the residual stream, is built from, and its role:
    ``("sum", [a, b])`` for an addition of two graph values, ``("move", [x])`` for a shape-only
    operation, ``("writer", [])`` for a call of a linear, convolution or embedding layer (the
    residual branch's last layer, or the embedding), ``("attr", [])`` for a parameter read directly (a position
    table); None for anything else (then it is not a stream of the kind of
    :func:`residual_stream_parameters`)."""
    if _is_add(node):
        operands = [a for a in node.args if isinstance(a, torch.fx.Node)]
        return ("sum", operands) if len(operands) == 2 == len(node.args) else None
    if _is_shape_only(node) and node.args and isinstance(node.args[0], torch.fx.Node):
        return "move", [node.args[0]]
    if node.op == "call_module" and isinstance(modules[node.target], _WRITERS):
        return "writer", []
    if node.op == "get_attr" and node.target in params:
        return "attr", []
    return None


def residual_stream_parameters(model: nn.Module) -> list[str]:
    """Names of the parameters of a normalized residual stream (the ``residual_stream`` group): the
    embedding (a linear / convolution layer's weight and bias, a position table) and every residual
    writer (the last linear layer of each branch added into the stream), with their biases. Scaling
    all of them together by ``c > 0`` leaves the train-mode function unchanged; scaling one alone
    does not.

    Derivation (derived here). Read off the ``torch.fx`` graph: start at the input of every
    normalization layer (BatchNorm, LayerNorm, GroupNorm) and walk back through additions of two
    values and shape-only operations; the walk must end, on every path, at a call of a linear or
    convolution layer (a *writer*) or at a parameter read directly (a position table). Every value
    on the walk (the *stream*) is then a sum of writer outputs ``W_k x_k + b_k`` and parameters, each
    ``x_k`` computed from the network input and normalized values only; so scaling every writer's
    weight and bias and every such parameter by ``c`` multiplies every stream value by ``c``,
    provided the ``x_k`` do not change. They do not: the stream is read only by normalization
    layers, which divide the scale out (``LN(c s) = LN(s)``, up to ``eps``), by further additions
    and shape-only operations of the stream, and by shape queries; this is checked for every use of
    every stream value, and a writer must write only into the stream (each of its calls is on the
    walk). By induction along the graph every normalized value, and so the output (which the head
    computes from a normalized value), is unchanged. The connected pieces of the walk that contain an
    addition form the group (a piece without one is a single normalized weight, the
    ``scale_invariant`` group's). In a pre-LN Transformer or MLP-Mixer this is the patch (and
    position) embedding and the output projection of each attention / token-mixing / MLP branch.
    Exact up to the norm layers' ``eps``. A model that ``torch.fx`` cannot trace gets an empty group
    (no graph to read); the trainer checks the answer numerically at init
    (:func:`residual_stream_check`) and records it in ``config.json``.
    """
    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception:  # noqa: BLE001 - any tracing failure: no graph, no group
        return []
    modules = dict(traced.named_modules())
    params = dict(model.named_parameters())
    role, pieces = _stream_pieces(traced, modules, params)
    calls: dict[str, list] = {}
    for node in traced.graph.nodes:
        if node.op == "call_module":
            calls.setdefault(node.target, []).append(node)
    valid = [nodes for nodes in pieces if _valid_piece(nodes, role, modules, calls)]
    shapes = _node_shapes(traced, params) if valid else {}
    names: set[str] = set()
    for nodes in valid:
        names |= _piece_parameters(nodes, role, modules, shapes)
    return [name for name in params if name in names]


def _stream_pieces(traced, modules: dict[str, nn.Module], params: dict) -> tuple[dict, list[list]]:
    """The walk of :func:`residual_stream_parameters`: from the input of every norm layer back through
    sums and shape-only operations. Returns each value's role (:func:`_stream_sources`; None: not a
    stream value) and the walk's connected pieces (lists of values)."""
    roots = [
        node.args[0]
        for node in traced.graph.nodes
        if node.op == "call_module"
        and isinstance(modules[node.target], NORM_LAYERS)
        and node.args
        and isinstance(node.args[0], torch.fx.Node)
    ]
    role: dict = {}
    piece: dict = {node: node for node in roots}  # value -> a value of its piece (union-find)

    def find(node):
        while piece[node] is not node:
            piece[node] = piece[piece[node]]
            node = piece[node]
        return node

    todo = list(roots)
    while todo:
        node = todo.pop()
        if node in role:
            continue
        found = _stream_sources(node, modules, params)
        role[node] = None if found is None else found[0]
        for operand in [] if found is None else found[1]:
            piece.setdefault(operand, operand)
            piece[find(operand)] = find(node)
            todo.append(operand)
    members: dict = {}
    for node in role:
        members.setdefault(find(node), []).append(node)
    return role, list(members.values())


def _valid_piece(nodes: list, role: dict, modules: dict[str, nn.Module], calls: dict) -> bool:
    """Whether a connected piece of the walk is a normalized residual stream: every value has a role,
    at least one is a sum, every use of every value is the stream's own, a norm layer's or a shape
    query, and every writer module is called only inside the piece."""
    inside = set(nodes)
    if any(role[n] is None for n in nodes) or not any(role[n] == "sum" for n in nodes):
        return False
    for node in nodes:
        for user in node.users:
            normalized = user.op == "call_module" and isinstance(modules[user.target], NORM_LAYERS)
            if not (user in inside or normalized or _is_shape_query(user, node)):
                return False
        if role[node] == "writer" and not set(calls[node.target]) <= inside:
            return False
    return True


def _piece_parameters(
    nodes: list, role: dict, modules: dict[str, nn.Module], shapes: dict
) -> set[str]:
    """The parameters of a valid piece: each writer's own (weight and bias) and each parameter read,
    less the biases that every norm reading them cancels (:func:`_bias_cancelled`: they do not enter
    the function at all, so they belong to no symmetry's test)."""
    names, inside = set(), set(nodes)
    for node in nodes:
        if role[node] == "writer":
            module = modules[node.target]
            for name, _ in module.named_parameters(recurse=False):
                if name == "bias" and _bias_cancelled(node, module, inside, modules, shapes):
                    continue
                names.add(f"{node.target}.{name}")
        elif role[node] == "attr":
            names.add(node.target)
    return names


def _node_shapes(traced, params: dict) -> dict:
    """Each graph value's shape on one probe image ``(1, 3, 32, 32)`` (``torch.fx`` shape
    propagation in eval mode, on the parameters' device and dtype, gradients off); empty when the model does not
    run on it (then no bias counts as cancelled)."""
    first = next(iter(params.values()))
    x = torch.zeros(1, 3, 32, 32, dtype=first.dtype, device=first.device)
    training = {module: module.training for module in traced.modules()}
    traced.eval()  # BatchNorm's running statistics untouched
    try:
        with torch.no_grad():
            ShapeProp(traced).propagate(x)
    except Exception:  # noqa: BLE001 - a model that needs other inputs: no shapes, nothing cancelled
        return {}
    finally:
        for module, mode in training.items():
            module.training = mode
    return {
        node: tuple(node.meta["tensor_meta"].shape)
        for node in traced.graph.nodes
        if hasattr(node.meta.get("tensor_meta"), "shape")
    }


def _normalized_axes(module: nn.Module, ndim: int) -> set[int]:
    """The axes over which ``module`` subtracts its mean: LayerNorm's trailing ``normalized_shape``;
    BatchNorm's all but the channel axis 1; GroupNorm's spatial axes, and the channels when a group
    holds more than one."""
    if isinstance(module, nn.LayerNorm):
        return set(range(ndim - len(module.normalized_shape), ndim))
    if isinstance(module, nn.GroupNorm):
        channels = {1} if module.num_groups < module.num_channels else set()
        return channels | set(range(2, ndim))
    return set(range(ndim)) - {1}


def _bias_cancelled(writer, module: nn.Module, inside: set, modules: dict, shapes: dict) -> bool:
    """Whether a writer's bias is constant over the normalized axes of every norm the stream carries
    it to, so each of them subtracts it (derived here: a bias on axis ``a`` of the writer's output is
    constant over every other axis; followed through transposes, permutations, reshapes that keep
    the axis and broadcasting sums, it reaches each norm on some axis, and a norm whose mean runs
    over axes that exclude it removes it exactly). The MLP-Mixer's token-mixing output bias is one:
    a per-token constant that every channel LayerNorm removes. False when a shape is unknown."""
    if writer not in shapes:
        return False
    axis = len(shapes[writer]) - 1 if isinstance(module, nn.Linear) else 1
    todo, seen = [(writer, axis)], set()
    while todo:
        node, axis = todo.pop()
        if (node, axis) in seen:
            continue
        seen.add((node, axis))
        for user in node.users:
            if user.op == "call_module" and isinstance(modules[user.target], NORM_LAYERS):
                if axis in _normalized_axes(modules[user.target], len(shapes[node])):
                    return False
            elif user in inside:
                moved = _moved_axis(user, node, axis, shapes)
                if moved is None:
                    return False
                todo.append((user, moved))
    return True


def _moved_axis(user, node, axis: int, shapes: dict) -> int | None:
    """Where axis ``axis`` of ``node`` lands in ``user``'s output (a sum or a shape-only operation of
    the stream); None when unknown."""
    if user not in shapes or node not in shapes:
        return None
    before, after = shapes[node], shapes[user]
    if _is_add(user):
        return axis + len(after) - len(before)  # broadcasting aligns the trailing axes
    name = user.target if user.op == "call_method" else getattr(user.target, "__name__", "")
    rest = [a for a in user.args[1:] if not isinstance(a, torch.fx.Node)]
    if name == "transpose" and len(rest) == 2:
        i, j = (int(d) % len(before) for d in rest)
        return j if axis == i else i if axis == j else axis
    if name == "permute":
        dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest
        dims = [int(d) % len(before) for d in dims]
        return dims.index(axis) if len(dims) == len(before) else None
    if name == "contiguous":
        return axis
    # a reshape keeps the axis where the elements before it and its own size are the same
    lead = math.prod(before[:axis])
    for k in range(len(after)):
        if math.prod(after[:k]) == lead and after[k] == before[axis]:
            return k
    return None


__all__ = [
    "BasicBlock",
    "ConvBN",
    "CHECK_FACTOR",
    "INVARIANCE_RTOL",
    "JOINT",
    "MODEL_BUILDERS",
    "NORM_LAYERS",
    "RESNET9_OUTPUT_SCALE",
    "Residual",
    "apply_init_scale",
    "build_model",
    "check_alpha_groups",
    "group_sizes",
    "default_model",
    "head_module",
    "parameter_groups",
    "output_changes",
    "residual_stream_check",
    "residual_stream_parameters",
    "resnet18",
    "resnet9",
    "scale_invariance_check",
    "scale_invariant_parameters",
    "scaled_channels",
]
