"""Models: exact parameter counts, width rounding, seeded init, and what alpha does to the function."""

import pytest
import torch

from initmem.empirical.config import RunConfig
from initmem.empirical.models import (
    apply_init_scale,
    build_model,
    parameter_groups,
    resnet9,
    resnet18,
    scale_invariant_parameters,
    scaled_channels,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _resnet9_count_by_hand(width: float) -> int:
    c1, c2, c3, c4 = (max(1, int(c * width + 0.5)) for c in (64, 128, 256, 512))
    convs = 9 * (3 * c1 + c1 * c2 + 2 * c2 * c2 + c2 * c3 + c3 * c4 + 2 * c4 * c4)
    batchnorms = 2 * (c1 + 3 * c2 + c3 + 3 * c4)  # weight + bias per channel
    head = 10 * c4  # bias-free
    return convs + batchnorms + head


def _resnet18_count_by_hand(width: float) -> int:
    c = [max(1, int(ch * width + 0.5)) for ch in (64, 128, 256, 512)]
    total = 9 * 3 * c[0] + 2 * c[0]  # stem conv + BN
    c_in = c[0]
    for c_out in c:
        # first block: conv3x3 (c_in -> c_out), conv3x3, two BNs, 1x1 shortcut + BN if the shape changes
        total += 9 * c_in * c_out + 9 * c_out * c_out + 4 * c_out
        if c_in != c_out:
            total += c_in * c_out + 2 * c_out
        total += 18 * c_out * c_out + 4 * c_out  # second block
        c_in = c_out
    return total + 10 * c[3] + 10  # head with bias


@pytest.mark.parametrize("width", [1.0, 0.5, 1 / 8, 1 / 16])
def test_parameter_counts(width):
    assert _count(resnet9(width)) == _resnet9_count_by_hand(width)
    assert _count(resnet18(width)) == _resnet18_count_by_hand(width)


def test_published_sizes():
    assert _count(resnet9()) == 6_573_120
    assert _count(resnet18()) == 11_173_962


def test_width_rounds_half_up_and_keeps_one_channel():
    assert scaled_channels(64, 1 / 16) == 4
    assert scaled_channels(128, 5 / 256) == 3  # 2.5 -> 3 (Python's round would give 2)
    assert scaled_channels(64, 0.001) == 1
    with pytest.raises(ValueError, match="width"):
        scaled_channels(64, 0.0)


def test_outputs_and_resnet9_logit_scale():
    x = torch.randn(4, 3, 32, 32)
    for model in (resnet9(1 / 16), resnet18(1 / 16)):
        assert model(x).shape == (4, 10)
    model = resnet9(1 / 16).eval()
    features = model[:-2](x)
    torch.testing.assert_close(model(x), 0.125 * model.head(features))


def test_init_depends_on_seed_only_and_leaves_global_rng_alone():
    config = RunConfig(model="resnet9", width=1 / 16)
    rng_before = torch.get_rng_state()
    first, second = build_model(config), build_model(config)
    assert torch.equal(torch.get_rng_state(), rng_before)
    other = build_model(config.replace(seed=1))
    for (name, a), b, c in zip(
        first.named_parameters(), second.parameters(), other.parameters(), strict=True
    ):
        assert torch.equal(a, b), name
        if name.endswith("conv.weight"):
            assert not torch.equal(a, c), name


@pytest.mark.parametrize("groups", [("all",), ("conv",), ("bn",), ("head",), ("conv", "head")])
def test_alpha_scales_exactly_the_chosen_groups(groups):
    alpha = 0.3
    base = build_model(RunConfig(width=1 / 16))
    scaled = build_model(RunConfig(width=1 / 16, alpha=alpha, alpha_groups=groups))
    chosen = {name for g in groups for name in parameter_groups(base)[g]}
    assert parameter_groups(base)["head"] == ["head.weight"]
    for (name, p0), p in zip(base.named_parameters(), scaled.parameters(), strict=True):
        expected = alpha * p0 if name in chosen else p0
        torch.testing.assert_close(p, expected, rtol=0, atol=0, msg=name)


def _double_model(kind: str, alpha: float, groups) -> torch.nn.Module:
    """A width-1/16 model in float64, train mode, BatchNorm eps 1e-30 (so invariances are exact)."""
    model = build_model(RunConfig(model=kind, width=1 / 16)).double()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.eps = 1e-30
    return apply_init_scale(model, alpha, groups).train()


@pytest.mark.parametrize("kind", ["resnet9", "resnet18"])
@pytest.mark.parametrize("alpha", [0.25, 3.0])
def test_what_each_group_does_to_the_function_at_init(kind, alpha):
    """conv: unchanged; head: logits x alpha; bn: ResNet-9 logits x alpha, ResNet-18 W f x alpha;
    all: ResNet-9 logits x alpha^2, ResNet-18 alpha (alpha W f + b)."""
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(0)).double()
    reference = _double_model(kind, 1.0, ("all",))(x)
    bias = (
        reference.new_zeros(10) if kind == "resnet9" else _double_model(kind, 1, ("all",)).head.bias
    )
    bias = bias.detach()
    linear_part = reference - bias  # W f
    expected = {
        "conv": reference,
        "head": alpha * reference,
        "bn": alpha * linear_part + bias,
        "all": alpha * (alpha * linear_part + bias),
    }
    for group, want in expected.items():
        got = _double_model(kind, alpha, (group,))(x)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12, msg=group)


def test_scale_invariant_weights_are_exactly_the_bn_followed_convs():
    model = _double_model("resnet18", 1.0, ("all",))
    names = scale_invariant_parameters(model)
    conv_weights = [n for n in parameter_groups(model)["conv"]]
    assert names == conv_weights and len(names) == 20  # 17 3x3 convs + 3 shortcuts
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(1)).double()
    y = torch.arange(8) % 10
    torch.nn.functional.cross_entropy(model(x), y).backward()
    params = dict(model.named_parameters())
    for name in names:  # d/dc L(c w) at c = 1 is <w, g> = 0
        w, g = params[name].detach(), params[name].grad
        assert abs(float((w * g).sum())) <= 1e-9 * float(w.norm() * g.norm()), name
    head, head_grad = params["head.weight"].detach(), params["head.weight"].grad
    assert abs(float((head * head_grad).sum())) > 1e-3 * float(head.norm() * head_grad.norm())


def test_conv_scaling_divides_the_gradient_by_alpha():
    """Scale invariance: g(alpha w) = g(w) / alpha, so lr / |w|^2 shrinks by alpha^2."""
    alpha = 4.0
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(2)).double()
    y = torch.arange(8) % 10
    grads = {}
    for a in (1.0, alpha):
        model = _double_model("resnet9", a, ("conv",))
        torch.nn.functional.cross_entropy(model(x), y).backward()
        grads[a] = {n: p.grad.clone() for n, p in model.named_parameters()}
    for name in scale_invariant_parameters(model):
        torch.testing.assert_close(
            grads[alpha][name], grads[1.0][name] / alpha, rtol=1e-8, atol=1e-14
        )
    torch.testing.assert_close(
        grads[alpha]["head.weight"], grads[1.0]["head.weight"], rtol=1e-8, atol=0
    )


def test_bad_init_scale_arguments_name_the_argument():
    model = resnet9(1 / 16)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        apply_init_scale(model, 0.0)
    with pytest.raises(ValueError, match="alpha_groups"):
        apply_init_scale(model, 2.0, ("fc",))
