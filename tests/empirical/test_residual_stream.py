"""The ``residual_stream`` group: a pre-LN network's embedding and residual writers, jointly
scale-invariant, found from the module graph and checked here numerically, independently of the
library's own check."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from initmem.empirical.config import RESIDUAL_STREAM_LAYER as JOINT_LAYER
from initmem.empirical.config import ConfigError, RunConfig
from initmem.empirical.curves import norm_memory_curves
from initmem.empirical.models import (
    JOINT,
    MODEL_BUILDERS,
    NORM_LAYERS,
    build_model,
    parameter_groups,
    residual_stream_check,
    residual_stream_parameters,
)
from initmem.empirical.tables import load_layers, load_runs
from initmem.empirical.trainer import train

pytestmark = pytest.mark.usefixtures("single_thread")

#: The group's size in each shipped pre-LN model, counted by hand: the ViT's position table, patch
#: embedding (weight, bias) and 8 branch outputs (weight, bias); the Mixer's patch embedding, 4
#: channel-mixing outputs (weight, bias) and 4 token-mixing output weights (their biases are per-token
#: constants that every channel LayerNorm subtracts: outside the function, so outside the group).
EXPECTED_MEMBERS = {"vit-tiny": 1 + 2 + 8 * 2, "mlp-mixer": 2 + 4 * 2 + 4}


def scaled_change(model: nn.Module, names: list[str], x: torch.Tensor) -> float:
    """max |f(3 theta_S) - f(theta)| / max |f(theta)| with every parameter of ``names`` scaled by 3,
    train mode, float64, every norm's eps shrunk to 1e-30 (written here, not the library's check)."""
    model = copy.deepcopy(model).double().train()
    for module in model.modules():
        if isinstance(module, NORM_LAYERS):
            module.eps = 1e-30
    params = dict(model.named_parameters())
    with torch.no_grad():
        base = model(x)
        for name in names:
            params[name].mul_(3.0)
        return float((model(x) - base).abs().max() / base.abs().max())


def probe_images() -> torch.Tensor:
    return torch.randn(
        3, 3, 32, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )


@pytest.mark.parametrize("architecture", ["vit-tiny", "mlp-mixer"])
def test_the_stream_scaled_together_leaves_the_output_and_any_member_alone_changes_it(architecture):
    torch.manual_seed(0)
    model = MODEL_BUILDERS[architecture](0.125)
    names = residual_stream_parameters(model)
    assert len(names) == EXPECTED_MEMBERS[architecture]
    x = probe_images()
    assert scaled_change(model, names, x) < 1e-10  # float64 rounding
    for name in names:
        assert scaled_change(model, [name], x) > 1e-3, name
    # the library's record agrees with the independent computation
    check = residual_stream_check(model)
    assert check[JOINT] < 1e-10 and min(v for k, v in check.items() if k != JOINT) > 1e-3
    assert parameter_groups(model)["residual_stream"] == names


def test_the_mixer_token_mixing_biases_left_out_do_not_enter_the_function():
    """The biases the graph finds cancelled: scaled by 3 (all of them), the output moves by rounding."""
    torch.manual_seed(0)
    model = MODEL_BUILDERS["mlp-mixer"](0.125)
    members = set(residual_stream_parameters(model))
    writers = {n.rsplit(".", 1)[0] for n in members if n.startswith("blocks.")}
    left_out = [f"{w}.bias" for w in sorted(writers) if f"{w}.bias" not in members]
    assert left_out == [f"blocks.{i}.body.mlp.2.bias" for i in (0, 2, 4, 6)]
    assert scaled_change(model, left_out, probe_images()) < 1e-12


@pytest.mark.parametrize("architecture", ["resnet9", "resnet18", "nf-resnet", "mlp", "mlp-ln"])
def test_models_without_a_normalized_residual_stream_have_an_empty_group(architecture):
    torch.manual_seed(0)
    model = MODEL_BUILDERS[architecture](0.0625)
    assert residual_stream_parameters(model) == []
    assert residual_stream_check(model) == {}


class Stream(nn.Module):
    """A pre-LN stream with names unlike the shipped models' (found from the graph, not the names),
    ``torch.add`` for one residual sum; ``post_ln`` normalizes after each sum instead, ``bare_head``
    reads the stream without a final norm: neither has the joint symmetry."""

    def __init__(self, post_ln: bool = False, bare_head: bool = False):
        super().__init__()
        self.post_ln, self.bare_head = post_ln, bare_head
        self.a = nn.Linear(3 * 32 * 32, 8)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(8), nn.LayerNorm(8), nn.LayerNorm(8)
        self.f = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 8))
        self.g = nn.Linear(8, 8)
        self.out = nn.Linear(8, 10)

    def forward(self, x):
        s = self.a(x.flatten(1))
        if self.post_ln:
            s = self.ln2(self.ln1(s + self.f(s)) + self.g(s))
            return self.out(s)
        s = s + self.f(self.ln1(s))
        s = torch.add(s, self.g(self.ln2(s)))
        return self.out(s if self.bare_head else self.ln3(s))


def test_a_plugin_shaped_stream_is_found_from_its_graph_and_broken_ones_are_not():
    torch.manual_seed(0)
    model = Stream()
    names = residual_stream_parameters(model)
    assert names == ["a.weight", "a.bias", "f.2.weight", "f.2.bias", "g.weight", "g.bias"]
    x = probe_images()
    assert scaled_change(model, names, x) < 1e-10
    assert all(scaled_change(model, [n], x) > 1e-3 for n in names)
    for broken in (Stream(post_ln=True), Stream(bare_head=True)):
        assert residual_stream_parameters(broken) == []
        assert scaled_change(broken, ["a.weight", "a.bias", "g.weight", "g.bias"], x) > 1e-3


def test_residual_stream_is_an_alpha_group_scaling_exactly_its_members(tiny_config):
    one = build_model(tiny_config(model="vit-tiny", alpha=1.0, alpha_groups=["residual_stream"]))
    four = build_model(tiny_config(model="vit-tiny", alpha=4.0, alpha_groups=["residual_stream"]))
    members = set(residual_stream_parameters(one))
    for (name, a), b in zip(one.named_parameters(), four.parameters(), strict=True):
        torch.testing.assert_close(b, (4.0 if name in members else 1.0) * a, rtol=0, atol=0)
    with pytest.raises(ConfigError, match="'residual_stream' holds no parameter of model 'mlp'"):
        build_model(tiny_config(model="mlp", alpha=2.0, alpha_groups=["residual_stream"]))
    with pytest.raises(ConfigError, match=r"alpha_groups must be one of \[.*'residual_stream'"):
        RunConfig(alpha_groups=["residual"]).validate()


def test_a_tiny_run_logs_the_joint_norm_and_its_norm_memory_curve_reads(tiny_config, tmp_path):
    """Two ViT runs (alpha 1 and 2 on the group), one step per epoch: the joint entry's norm is the
    members' norms summed in square, its G the step's (sum |g|^2)(sum |w|^2) from the per-layer
    logs, config.json records the check, and the norm memory curve starts at 1 with log 2."""
    configs = [
        tiny_config(
            model="vit-tiny", alpha=alpha, alpha_groups=["residual_stream"], train_size=8,
            batch_size=8, lr=0.01, precision="fp64",
        )
        for alpha in (1.0, 2.0)
    ]  # fmt: skip
    for config in configs:
        train(config)
    runs = load_runs([c.out_dir for c in configs])
    layers = load_layers(runs)
    record = json.loads((Path(configs[0].out_dir) / "config.json").read_text())["model"]
    members = [n for n in record["residual_stream"] if n != JOINT]
    assert record["residual_stream"][JOINT] < 1e-10 and len(members) == 19
    one = layers[layers["hash"] == runs.loc[runs["alpha"] == 1.0, "hash"].item()]
    joint = one[one["layer"] == JOINT_LAYER].set_index("epoch")
    parts = one[one["layer"].isin(members)].groupby("epoch")
    assert list(joint.index) == [0, 1, 2]
    np.testing.assert_allclose(
        joint["weight_norm"],
        np.sqrt(parts["weight_norm"].apply(lambda w: (w**2).sum())),
        rtol=1e-12,
    )
    norm_sq_before = parts["weight_norm"].apply(lambda w: (w**2).sum()).shift(1)
    expected_g = parts["grad_sq_sum"].sum() * norm_sq_before  # one step per interval
    np.testing.assert_allclose(joint["grad_sq_unit_sum"][1:], expected_g[1:], rtol=1e-9)
    assert joint["grad_sq_unit_sum"][1] > 0 and not joint["scale_invariant"].any()
    curves = norm_memory_curves(runs, layers)
    curve = curves[curves["layer"] == JOINT_LAYER].set_index("epoch")
    assert list(curve.index) == [0, 1, 2]
    assert curve.loc[0, "memory"] == 1.0
    np.testing.assert_allclose(curve.loc[0, "log_ratio"], np.log(2.0), rtol=1e-12)
    assert np.isfinite(curve["memory"]).all()
