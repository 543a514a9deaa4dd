"""The units preset's design, in units of forgetting, before training (what the dry run prints)."""

from __future__ import annotations

import numpy as np
import pytest

from initmem.bridge.units import design_correlation, design_table, init_inv_norm_sq
from initmem.cli import main
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec


@pytest.fixture(scope="module")
def units_design():
    runs = SweepSpec.from_file("units").expand()
    return design_table([r.config for r in runs], [r.variant for r in runs])


def test_units_preset_separates_epochs_from_accumulated_regularization(units_design):
    compared = units_design[units_design["alphas"] == "1,4"]
    assert len(compared) >= 12
    corr = design_correlation(units_design)
    assert corr["n"] == len(compared)
    assert abs(corr["r"]) < 0.5
    assert corr["decades"] >= 3
    # the same r, computed directly
    direct = np.corrcoef(np.log(compared["epochs"]), np.log(compared["accumulated"]))[0, 1]
    assert corr["r"] == pytest.approx(direct)
    kinds = set(zip(compared["optimizer"], compared["momentum"] > 0, strict=True))
    assert {("sgd", False), ("sgd", True), ("adam", False), ("adamw", False)} <= kinds
    # a short x long factorial within each regime: two lengths, a factor 2 apart
    assert sorted(np.round(compared["epochs"]).unique()) == [24, 48]
    groups = units_design[units_design["alphas"] == "4"]["alpha_groups"]
    assert {"conv", "bn", "head"} <= set(groups)


def test_init_inv_norm_sq_matches_the_default_init_in_expectation():
    """PyTorch's default conv init (kaiming uniform, a = sqrt 5) has variance 1 / (3 fan_in), so
    d / |w_0|^2 is about 3 fan_in per layer (large layers: within a few percent)."""
    from initmem.empirical.models import build_model, scale_invariant_parameters

    config = RunConfig(width=0.125, device="cpu")
    model = build_model(config)
    params = dict(model.named_parameters())
    expected = np.mean(
        [3 * params[n][0].numel() for n in scale_invariant_parameters(model)]
    )  # fan_in = in_channels * k * k
    assert init_inv_norm_sq(config) == pytest.approx(expected, rel=0.05)


def test_dry_run_prints_the_design_and_r(capsys):
    assert main(["sweep", "run", "units", "--out", "unused", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Pearson r of ln(epochs) and ln(accumulated)" in out
    assert "adamw-high-long" in out


@pytest.mark.parametrize("model", ["resnet9", "resnet18"])
@pytest.mark.parametrize("width", [0.0625, 0.125, 0.3])
def test_torch_free_shape_table_is_the_models(model, width):
    """The shape table lists the BN-followed convs of the torch model, in order, and its expected
    d / |w_0|^2 = mean 3 fan_in agrees with the drawn init (relative fluctuation sqrt(0.8 / d))."""
    from initmem.empirical.models import build_model, scale_invariant_parameters
    from initmem.empirical.shapes import conv_shapes, expected_inv_init_sq_per_coord

    config = RunConfig(model=model, width=width, device="cpu")
    torch_model = build_model(config)
    params = dict(torch_model.named_parameters())
    shapes = [tuple(params[n].shape) for n in scale_invariant_parameters(torch_model)]
    assert conv_shapes(model, width) == shapes
    expected = expected_inv_init_sq_per_coord(model, width)
    assert expected == pytest.approx(np.mean([3 * s[1] * s[2] * s[3] for s in shapes]))
    assert init_inv_norm_sq(config) == pytest.approx(expected, rel=0.06)


def test_dry_run_loads_no_torch(tmp_path):
    """``initmem sweep run units --dry-run`` in a fresh interpreter: the design, and no torch."""
    import subprocess
    import sys

    code = (
        "import sys; from initmem.cli import main; "
        f"rc = main(['sweep', 'run', 'units', '--out', {str(tmp_path / 'unused')!r}, '--dry-run']); "
        "print('torch loaded' if 'torch' in sys.modules else 'no torch', rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "Pearson r of ln(epochs) and ln(accumulated)" in out
    assert out.strip().endswith("no torch 0")
