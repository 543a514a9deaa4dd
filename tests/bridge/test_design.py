"""The units preset's design, in units of forgetting, before training (what the dry run prints)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.units import (
    NO_NORM_MEMORY,
    design_correlation,
    design_counts,
    design_table,
    format_design,
    init_inv_norm_sq,
    predicted_forgetting,
)
from initmem.cli import main
from initmem.empirical.architectures import ARCHITECTURES
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec


def _design(preset: str) -> pd.DataFrame:
    runs = SweepSpec.from_file(preset).expand()
    return design_table([r.config for r in runs], [r.variant for r in runs], init="expected")


@pytest.fixture(scope="module")
def units_design():
    return _design("units-v2")


def test_units_preset_isolates_each_mechanism():
    """Issue 39's third design: >= 3 SGD pipelines without any decay (alpha on the scale-invariant
    convs and on every parameter), >= 2 Adam pipelines without decay, short / long pairs with and
    without augmentation, >= 3 levels within a family, >= 2 pipelines at >= 3 alphas, explicit-decay,
    noise-only and Adam-only pipelines overlapping in accumulated regularization 2-30, a fit
    threshold fixed in the file, and |r(ln epochs, ln accumulated)| < 0.3."""
    spec = SweepSpec.from_file("units")
    runs = spec.expand()
    design = _design("units")
    augment = {r.variant: r.config.augment for r in runs}
    design["augment"] = design["variant"].map(augment)
    no_decay = (design["l2"] == 0) & (design["weight_decay"] == 0) & (design["momentum"] == 0)
    sgd = design[no_decay & (design["optimizer"] == "sgd")]
    adam = design[no_decay & (design["optimizer"] == "adam")]
    assert len(sgd) >= 3 and len(adam) >= 2
    assert {"scale_invariant", "all"} <= set(sgd["alpha_groups"])
    assert sgd.groupby(["lr", "batch_size"]).ngroups >= 3 and adam["lr"].nunique() >= 3
    settings = ["optimizer", "lr", "batch_size", "alpha_groups", "augment"]
    pairs = [g for _, g in design.groupby(settings) if len(g) == 2]
    assert all(g["epochs"].max() == 2 * g["epochs"].min() for g in pairs)
    assert {bool(g["augment"].iloc[0]) for g in pairs} == {True, False}
    assert (design["alphas"].str.count(",") >= 2).sum() >= 2
    explicit = design[design["explicit"] > 10 * design["sgd_noise"]]
    for kind in (explicit[explicit["optimizer"] == "sgd"], sgd, adam):
        assert ((kind["accumulated"] >= 2) & (kind["accumulated"] <= 30)).any()
    assert abs(design_correlation(design)["r"]) < 0.3
    assert 0 < spec.study["interpolation"] < 1


def test_units_v2_preset_covers_the_transition_and_separates_the_units(units_design):
    """Issue 18's design: accumulated regularization 0.03-50 densely (>= 4 pipelines a decade, >= 6
    between 1 and 30), each level at two run lengths a factor >= 2 apart, |r| < 0.3, the four
    optimizer families at two batch sizes, alpha 1 vs 8, and >= 6 pipelines predicted to forget."""
    compared = units_design[units_design["alphas"] == "1,8"]
    assert len(compared) == len(units_design) >= 16
    accumulated = compared["accumulated"].to_numpy()
    assert accumulated.min() <= 0.035 and accumulated.max() >= 45
    for low in (0.01, 0.1, 1.0, 10.0):
        assert np.sum((accumulated >= low) & (accumulated < 10 * low)) >= 4, low
    assert np.sum((accumulated >= 1) & (accumulated <= 30)) >= 6
    corr = design_correlation(units_design)
    direct = np.corrcoef(np.log(compared["epochs"]), np.log(compared["accumulated"]))[0, 1]
    assert corr["r"] == pytest.approx(direct) and abs(direct) < 0.3
    # each regularization level at a short and a long run, a factor >= 2 apart
    settings = ["optimizer", "lr", "momentum", "l2", "weight_decay", "schedule", "batch_size"]
    for _, level in compared.groupby(settings):
        assert len(level) == 2 and level["epochs"].max() >= 2 * level["epochs"].min()
    kinds = set(
        zip(compared["optimizer"], compared["momentum"] > 0, compared["l2"] > 0, strict=True)
    )
    assert {("sgd", False, False), ("sgd", True, False), ("adam", False, True)} <= kinds
    assert "adamw" in set(compared["optimizer"]) and compared["batch_size"].nunique() >= 2
    counts = design_counts(units_design)
    assert counts["forget"] >= 6 and counts["forget"] + counts["censored"] == len(compared)
    forget = compared[np.isfinite(compared["predicted_forgetting_epochs"])]
    # predicted well inside the run: before 80% of it
    assert np.all(forget["predicted_forgetting_epochs"] < 0.8 * forget["epochs"])


def test_units_v1_preset_keeps_the_first_design():
    design = _design("units-v1")
    compared = design[design["alphas"] == "1,4"]
    assert len(compared) == 12
    corr = design_correlation(design)
    assert abs(corr["r"]) < 0.5 and corr["decades"] >= 3
    assert sorted(np.round(compared["epochs"]).unique()) == [24, 48]
    groups = design[design["alphas"] == "4"]["alpha_groups"]
    assert {"conv", "bn", "head"} <= set(groups)
    # the law predicts what units-v1 measured: 2 of 12 pipelines forgotten by e within the run
    assert design_counts(design)["forget"] == 2


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
    assert main(["sweep", "run", "units-v2", "--out", "unused", "--dry-run", "--no-probe"]) == 0
    out = capsys.readouterr().out
    assert "g_source: none, a G-free proxy" in out and "law g_source" not in out
    assert "Pearson r of ln(epochs) and ln(accumulated)" in out
    assert "adamw-high-long" in out
    assert "pipelines per decade of accumulated regularization:" in out
    assert "pipelines with accumulated regularization from 1 to 30:" in out
    assert "predicted to forget by e within the run:" in out


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
    """``initmem sweep run units --dry-run --no-probe`` in a fresh interpreter: the design (the
    G-free proxy), and no torch."""
    import subprocess
    import sys

    code = (
        "import sys; from initmem.cli import main; "
        f"rc = main(['sweep', 'run', 'units', '--out', {str(tmp_path / 'unused')!r}, '--dry-run', "
        "'--no-probe']); "
        "print('torch loaded' if 'torch' in sys.modules else 'no torch', rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "Pearson r of ln(epochs) and ln(accumulated)" in out
    assert out.strip().endswith("no torch 0")


def _hand_made_design() -> pd.DataFrame:
    """Seven pipelines, six with two alphas; counts by hand in the test below."""
    inf = np.inf
    return pd.DataFrame(
        {
            "variant": ["a", "b", "c", "d", "e", "f", "groups"],
            "pipeline": ["a", "b", "c", "d", "e", "f", "g"],
            "alphas": ["1,8", "1,8", "1,8", "1,8", "1,8", "1,8", "8"],
            "epochs": [24.0, 48.0, 16.0, 32.0, 24.0, 48.0, 48.0],
            "steps": [744.0, 1488.0, 496.0, 992.0, 744.0, 1488.0, 1488.0],
            "accumulated": [0.05, 0.08, 0.5, 2.0, 30.0, 31.0, 5.0],
            "explicit": [0.0, 0.0, 0.1, 1.0, 0.3, 0.6, 0.0],
            "sgd_noise": [0.05, 0.08, 0.4, 1.0, 0.0, 0.0, 5.0],
            "adam": [500.0, 800.0, 0.0, 0.0, 29.7, 30.4, 0.0],
            "predicted_memory_end": [0.99, 0.98, 0.9, 0.3, 0.2, 0.1, np.nan],
            "predicted_forgetting_steps": [inf, inf, inf, 900.0, 300.0, 310.0, np.nan],
            "predicted_forgetting_epochs": [inf, inf, inf, 900 / 31, 300 / 31, 310 / 31, np.nan],
        }
    )


def test_design_counts_on_a_hand_made_design():
    counts = design_counts(_hand_made_design())
    # by hand: decades of 0.05, 0.08 | 0.5 | 2.0 | 30, 31 (the single-alpha pipeline left out)
    assert counts["n"] == 6
    assert counts["per_decade"] == {-2: 2, -1: 1, 0: 1, 1: 2}
    assert counts["in_band"] == 2  # 2.0 and 30.0; 31 lies above 30
    assert counts["forget"] == 3 and counts["censored"] == 3
    text = format_design(_hand_made_design())
    assert "[0.01, 0.1): 2, [0.1, 1): 1, [1, 10): 1, [10, 100): 2" in text
    assert "from 1 to 30: 2" in text
    assert "predicted to forget by e within the run: 3 of 6 (predicted censored: 3)" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines()}
    assert rows["a"][-2:] == ["0.99", "censored"] and rows["e"][-2:] == ["0.20", f"{300 / 31:.1f}"]
    assert rows["groups"][-2:] == ["-", "-"]


def test_predicted_forgetting_is_the_closed_form_of_a_constant_adamw_run():
    """AdamW at a constant lr: explicit e = lr wd and growth g = lr^2 d / |w_0|^2 per step, so
    n_t = q^t n_0 + g (1 - q^t) / (1 - q) with q = (1 - e)^2 (theory.units (U1)), computed here."""
    config = RunConfig(
        optimizer="adamw", lr=1e-2, weight_decay=0.1, epochs=20, batch_size=16,
        train_size=500, width=0.125, device="cpu",
    )  # fmt: skip
    inv = 700.0
    got = predicted_forgetting(config, [1.0, 8.0], inv)
    e, g = config.lr * config.weight_decay, config.lr**2 * inv
    t = np.arange(1, config.total_steps + 1)
    q = (1 - e) ** 2
    grown = g * (1 - q**t) / (1 - q)
    memory = np.log((64 * q**t + grown) / (q**t + grown)) / np.log(64)
    assert got["memory_end"] == pytest.approx(memory[-1], rel=1e-9)
    first = np.flatnonzero(memory <= np.exp(-1))[0] + 1
    assert got["forgetting_steps"] == first
    assert got["forgetting_epochs"] == pytest.approx(first / config.steps_per_epoch)
    assert np.isnan(predicted_forgetting(config, [8.0], inv)["memory_end"])


@pytest.mark.parametrize("model", [*sorted(ARCHITECTURES), "resnet9"])
@pytest.mark.parametrize("optimizer", ["adam", "adamw", "rmsprop"])
def test_dry_run_of_every_architecture_with_an_adaptive_pipeline(
    tmp_path, capsys, model, optimizer
):
    """Issue 40 item 1: a model without scale-invariant weights has no norm memory, so no Adam unit
    (d / |w_0|^2 is NaN) and no norm law; the dry run exits 0, prints the design and says so, and
    never turns the undefined unit into a number (0 or a prediction)."""
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'name = "arch"\n[base]\nmodel = "{model}"\ndataset = "cifar10-fixture"\nwidth = 0.125\n'
        f'train_size = 16\nbatch_size = 4\nepochs = 2\noptimizer = "{optimizer}"\nlr = 0.001\n'
        f'weight_decay = 0.01\ndevice = "cpu"\n[grid]\nalpha = [1.0, 8.0]\nseed = [0]\n'
    )
    out = tmp_path / "out"
    assert main(["sweep", "run", str(sweep), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "design in units of forgetting" in text
    config = SweepSpec.from_file(sweep).expand()[0].config
    invariant = np.isfinite(init_inv_norm_sq(config))
    row = design_table([config, config.replace(alpha=8.0)])
    memory, state = row["predicted_memory_end"].iloc[0], row["predicted_state"].iloc[0]
    if invariant:  # the ResNets: a law and a number in (0, 1]
        assert 0 < memory <= 1 and state in ("forgotten", "not forgotten")
    else:
        assert np.isnan(memory) and state == NO_NORM_MEMORY
        assert np.isnan(row["adam"].iloc[0]) and np.isnan(row["accumulated"].iloc[0])
        assert "no scale-invariant weights (no per-layer norm law in this table" in text
