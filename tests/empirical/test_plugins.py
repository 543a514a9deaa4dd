"""Models beyond BatchNorm ResNets: their scale-invariant weights checked numerically, and plug-in models
and data sets ("package.module:function") trained, swept, reported and bridged like the built-ins."""

import copy
import json
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from initmem.cli import main
from initmem.empirical.architectures import SkipInit
from initmem.empirical.config import ConfigError, RunConfig
from initmem.empirical.models import (
    MODEL_BUILDERS,
    NORM_LAYERS,
    build_model,
    parameter_groups,
    scale_invariant_parameters,
)
from initmem.empirical.plugins import PluginError, resolve_plugin

pytestmark = pytest.mark.usefixtures("single_thread")

#: How many weights each shipped architecture has that its train-mode function ignores the scale of.
EXPECTED_INVARIANT = {
    "resnet9": 8,  # every conv (each followed by BatchNorm)
    "resnet18": 20,  # 17 convs + 3 shortcut convs
    "vit-tiny": 0,  # pre-LN: the norms see the residual stream, a sum of every branch
    "mlp-mixer": 0,
    "nf-resnet": 0,  # nothing normalized
    "mlp": 0,
    "mlp-ln": 3,  # the bias-free hidden layers, each followed by LayerNorm
}


def output_change(model: nn.Module, name: str, x: torch.Tensor) -> float:
    """max |f(3 w) - f(w)| / max |f(w)| in train mode, float64, with every norm's eps shrunk to 1e-30
    (an exact invariance then shows as float64 rounding). Written here, independently of the library's
    own check."""
    model = copy.deepcopy(model).double().train()
    for module in model.modules():
        if isinstance(module, NORM_LAYERS):
            module.eps = 1e-30
        if isinstance(module, SkipInit):  # a zero gain hides its branch at init: open it
            module.gain.data.fill_(0.5)
    state = copy.deepcopy(model.state_dict())
    with torch.no_grad():
        base = model(x)
        model.load_state_dict(state)
        dict(model.named_parameters())[name].mul_(3.0)
        return float((model(x) - base).abs().max() / base.abs().max())


@pytest.mark.parametrize("architecture", sorted(MODEL_BUILDERS))
def test_scale_invariant_weights_are_exactly_those_whose_scale_the_output_ignores(architecture):
    torch.manual_seed(0)
    model = MODEL_BUILDERS[architecture](0.125)
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    reported = scale_invariant_parameters(model)
    assert len(reported) == EXPECTED_INVARIANT[architecture]
    for name, param in model.named_parameters():
        change = output_change(model, name, x)
        if name in reported:
            assert change < 1e-12, (name, change)  # float64 rounding
        elif param.dim() >= 2:
            assert change > 1e-4, (name, change)  # a weight not reported changes the function


def test_the_graph_rules_for_groupnorm_layernorm_biases_and_weight_standardization():
    """GroupNorm after a bias-free conv: invariant; LayerNorm after a linear layer with a bias: not
    (the bias is not cancelled); a conv that standardizes its own weight: invariant with no norm after
    it; a weight that also feeds a residual sum: not."""

    class StandardizedConv(nn.Conv2d):
        standardizes_weight = True

        def forward(self, x):
            w = self.weight - self.weight.mean(dim=(1, 2, 3), keepdim=True)
            w = w / w.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
            return nn.functional.conv2d(x, w, self.bias, padding=1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = StandardizedConv(3, 4, 3)
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.gn = nn.GroupNorm(2, 4)
            self.skip = nn.Conv2d(4, 4, 1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4, 6)
            self.ln = nn.LayerNorm(6)
            self.head = nn.Linear(6, 10)

        def forward(self, x):
            h = torch.relu(self.gn(self.conv(torch.relu(self.ws(x)))))
            s = self.skip(h)
            h = self.bn(s) + s  # the skip conv's output also bypasses the norm
            return self.head(self.ln(self.fc(h.mean(dim=(2, 3)))))

    torch.manual_seed(0)
    model = Net()
    assert scale_invariant_parameters(model) == ["ws.weight", "conv.weight"]
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert output_change(model, "ws.weight", x) < 1e-12
    assert output_change(model, "conv.weight", x) < 1e-12
    assert output_change(model, "skip.weight", x) > 1e-4
    assert output_change(model, "fc.weight", x) > 1e-4


@pytest.mark.parametrize("architecture", ["vit-tiny", "mlp-mixer", "nf-resnet", "mlp", "mlp-ln"])
def test_groups_of_the_new_architectures(architecture):
    torch.manual_seed(0)
    model = MODEL_BUILDERS[architecture](0.125)
    groups = parameter_groups(model)
    assert groups["head"] == ["head.weight", "head.bias"]
    norms = [m for m in model.modules() if isinstance(m, NORM_LAYERS)]
    assert len(groups["norm"]) == 2 * len(norms) and groups["bn"] == groups["norm"]
    assert groups["scale_invariant"] == scale_invariant_parameters(model)
    logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 10)


def test_alpha_on_the_scale_invariant_group_leaves_the_function_of_mlp_ln(tiny_config):
    """alpha = 4 on ``scale_invariant`` multiplies exactly those weights (and not the head)."""

    one = build_model(tiny_config(model="mlp-ln", alpha=1.0, alpha_groups=["scale_invariant"]))
    four = build_model(tiny_config(model="mlp-ln", alpha=4.0, alpha_groups=["scale_invariant"]))
    a, b = dict(one.named_parameters()), dict(four.named_parameters())
    for name in a:
        factor = 4.0 if name in scale_invariant_parameters(one) else 1.0
        torch.testing.assert_close(b[name], factor * a[name], rtol=0, atol=0)


# ------------------------------------------------------------------------------ plug-in strings
PLUGIN = textwrap.dedent(
    '''
    import numpy as np
    from torch import nn


    def small_net(config):
        """A conv + GroupNorm net: one scale-invariant weight, with a width knob from the config."""
        c = max(2, int(8 * config.width))
        return nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1, bias=False), nn.GroupNorm(1, c), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10),
        )


    def stripes(config):
        """Images whose class is the row of a bright stripe: learnable by any of the models."""
        rng = np.random.default_rng(config.split_seed)

        def draw(n):
            y = rng.integers(0, 10, n)
            x = rng.integers(0, 60, (n, 3, 32, 32)).astype(np.uint8)
            for i, label in enumerate(y):
                x[i, :, 3 * label : 3 * label + 2, :] = 250
            return x, y

        return (*draw(64), *draw(32))


    def deep_net(config, depth=1, channels=4):
        """``depth`` conv + GroupNorm blocks of ``channels`` channels: its size set by model_args."""
        layers, c_in = [], 3
        for _ in range(depth):
            layers += [nn.Conv2d(c_in, channels, 3, padding=1, bias=False), nn.GroupNorm(1, channels)]
            c_in = channels
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, 10))


    def flipped_stripes(config, flip_every=0):
        """:func:`stripes` with the label of every ``flip_every``-th training image changed."""
        train_x, train_y, test_x, test_y = stripes(config)
        if flip_every:
            train_y[::flip_every] = (train_y[::flip_every] + 1) % 10
        return train_x, train_y, test_x, test_y


    def not_a_model(config):
        return 3


    not_callable = 3
    '''
)


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module ``initmem_test_plugin`` on the path (spawned sweep workers inherit the path)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "initmem_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(folder))
    return "initmem_test_plugin"


def test_plugin_strings_are_checked_before_any_work(plugin_module):
    base = dict(dataset="synthetic", train_size=16, val_size=8, batch_size=4)
    with pytest.raises(ConfigError, match="'package.module:function'"):
        RunConfig.from_dict(base | {"model": "mod:with:two"})
    with pytest.raises(ConfigError, match="give train_size and val_size"):
        RunConfig.from_dict({"dataset": f"{plugin_module}:stripes", "batch_size": 4})
    with pytest.raises(PluginError, match="cannot import module 'no_such_module'"):
        resolve_plugin("no_such_module:f", "model")
    with pytest.raises(PluginError, match="has no 'missing'"):
        resolve_plugin(f"{plugin_module}:missing", "model")
    with pytest.raises(PluginError, match="is not callable"):
        resolve_plugin(f"{plugin_module}:not_callable", "dataset")


def test_plugin_model_and_data_through_train_sweep_report_and_bridge(plugin_module, tmp_path):
    model, dataset = f"{plugin_module}:small_net", f"{plugin_module}:stripes"
    common = f"""
        dataset = "{dataset}"
        model = "{model}"
        train_size = 48
        val_size = 16
        batch_size = 8
        epochs = 3
        lr = 0.05
        momentum = 0.9
        quiet = true
    """
    run_file = tmp_path / "run.toml"
    run_file.write_text(textwrap.dedent(common))
    assert main(["train", "--config", str(run_file), "--out", str(tmp_path / "one")]) == 0
    recorded = json.loads((tmp_path / "one" / "config.json").read_text())
    assert recorded["config"]["model"] == model and recorded["data"]["dataset"] == dataset
    assert list(recorded["model"]["scale_invariant"]) == ["0.weight"]  # the GroupNorm-ed conv
    assert recorded["model"]["scale_invariant"]["0.weight"] < 1e-12

    sweep_file = tmp_path / "sweep.toml"
    base = textwrap.indent(textwrap.dedent(common), "")
    sweep_file.write_text(
        f'name = "plugins"\n[base]\n{base}\n[grid]\nalpha = [1.0, 4.0]\nseed = [0, 1]\n'
        'alpha_groups = [["scale_invariant"]]\n'
    )
    out = tmp_path / "sweep"
    assert main(["sweep", "run", str(sweep_file), "--out", str(out), "--workers", "2"]) == 0
    results = [json.loads(p.read_text()) for p in out.glob("runs/*/result.json")]
    assert len(results) == 4 and {r["status"] for r in results} == {"completed"}
    assert main(["report", str(out)]) == 0
    assert "spread" in (out / "report.md").read_text().lower()
    assert main(["bridge", str(out), "--n-boot", "10", "--no-figures"]) == 0
    assert (out / "bridge" / "units.csv").is_file()


def test_a_plugin_model_that_returns_no_module_fails_clearly(plugin_module, tiny_config):

    with pytest.raises(PluginError, match="returned int, not a torch.nn.Module"):
        build_model(tiny_config(model=f"{plugin_module}:not_a_model"))


def test_plugin_data_of_the_wrong_shape_fails_clearly(tmp_path, monkeypatch):
    from initmem.empirical.data import plugin_pools

    (tmp_path / "bad_data.py").write_text(
        "import numpy as np\n"
        "def gray(config):\n"
        "    x = np.zeros((30, 1, 28, 28), np.uint8)\n"
        "    return x, np.zeros(30, int), x, np.zeros(30, int)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = RunConfig.from_dict(
        dict(dataset="bad_data:gray", train_size=16, val_size=8, batch_size=4)
    )
    with pytest.raises(PluginError, match=r"train_x must be uint8 images \(n, 3, 32, 32\)"):
        plugin_pools(config)


def test_model_args_and_dataset_args_reach_the_plugins(plugin_module, tmp_path):
    """``model_args`` / ``dataset_args``: the plug-in's keyword arguments, part of the run's hash."""
    from initmem.empirical.data import plugin_pools

    base = dict(
        dataset=f"{plugin_module}:flipped_stripes",
        model=f"{plugin_module}:deep_net",
        train_size=48,
        val_size=16,
        batch_size=8,
    )
    config = RunConfig.from_file(
        None, [f"{k}={v}" for k, v in base.items()] + ["model_args.depth=3"]
    )
    assert config.model_args == {"depth": 3}
    convs = [m for m in build_model(config).modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 3
    wide = config.replace(model_args={"depth": 2, "channels": 6})
    assert [m.out_channels for m in build_model(wide).modules() if isinstance(m, nn.Conv2d)] == [
        6,
        6,
    ]
    assert len({config.hash, wide.hash, RunConfig.from_dict(base).hash}) == 3
    plain = plugin_pools(RunConfig.from_dict(base))[1]
    flipped = plugin_pools(RunConfig.from_dict(base | {"dataset_args": {"flip_every": 4}}))[1]
    changed = np.flatnonzero(plain != flipped)
    np.testing.assert_array_equal(changed, np.arange(0, 64, 4))
    with pytest.raises(PluginError, match="model_args = .*'widht'.* does not take them"):
        build_model(config.replace(model_args={"widht": 3}))
