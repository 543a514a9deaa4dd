"""The gradient-scale probe before training (bridge.probe) against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from initmem.bridge.probe import law_forgetting, probe_gradient_scale, sweep_law_forgetting
from initmem.cli import main
from initmem.empirical.config import RunConfig
from initmem.empirical.trainer import Trainer

BASE = dict(
    dataset="cifar10-fixture", train_size=16, val_size=4, test_size=20, batch_size=4, epochs=3,
    width=0.125, augment=False, device="cpu", precision="fp32", quiet=True,
)  # fmt: skip


def config(**changes) -> RunConfig:
    return RunConfig(**(BASE | changes))


def first_batch_backward(c: RunConfig) -> Trainer:
    """The trainer of ``c`` after a forward and backward of its first minibatch at init (no step):
    the loss gradients in ``param.grad``, as a one-minibatch probe sees them."""
    trainer = Trainer(c.replace(channels_last=False))
    plan = trainer.start_epoch()
    images, labels = trainer.next_batch(plan.batches[0])
    torch.nn.functional.cross_entropy(trainer.model(images), labels).backward()
    return trainer


def test_one_minibatch_is_the_gradient_times_the_norm_at_init():
    """G of a one-minibatch probe = |g|^2 |w|^2 of each BN-followed conv on the trainer's first
    batch, computed here by a forward and backward of the same model."""
    c = config(optimizer="sgd", lr=0.05, alpha=2.0)
    probe = probe_gradient_scale(c, 2.0, steps=1)
    trainer = first_batch_backward(c)
    params = dict(trainer.model.named_parameters())
    assert len(probe.layers) == len(trainer.scale_invariant) == 8  # ResNet-9's BN-followed convs
    for row in probe.layers.itertuples():
        p = params[row.layer]
        expected = float(p.grad.double().pow(2).sum() * p.detach().double().pow(2).sum())
        assert row.grad_sq_unit == pytest.approx(expected, rel=1e-5)
        assert row.init_norm_sq == pytest.approx(float(p.detach().double().pow(2).sum()), rel=1e-9)


def test_scale_invariance_makes_g_alpha_free_only_when_alpha_scales_the_convs_alone():
    """|g(a w)| = |g(w)| / a for a scale-invariant w, so G = |g|^2 |w|^2 is the same at every alpha
    when alpha scales the convs only (up to BatchNorm's eps); with alpha on every parameter (BN gains
    and head too) it is not: the alpha-8 G is orders of magnitude larger (issue 35)."""
    convs = [probe_gradient_scale(config(alpha_groups=["conv"]), a).layers for a in (1.0, 8.0)]
    # BatchNorm's eps (1e-5 beside the channel variance) breaks the invariance a little: measured
    # 0.1% on the first conv, whose output variance is the smallest; 0.5% is the bar
    np.testing.assert_allclose(convs[1]["grad_sq_unit"], convs[0]["grad_sq_unit"], rtol=5e-3)
    np.testing.assert_allclose(convs[1]["init_norm_sq"], 64 * convs[0]["init_norm_sq"], rtol=1e-6)
    every = [probe_gradient_scale(config(alpha_groups=["all"]), a).layers for a in (1.0, 8.0)]
    assert (every[1]["grad_sq_unit"] / every[0]["grad_sq_unit"]).min() > 100


def test_law_and_cache_and_source():
    cache: dict = {}
    c = config(optimizer="adamw", lr=0.01, weight_decay=0.5, epochs=20)
    law = law_forgetting(c, [1.0, 8.0], cache=cache)
    assert len(cache) == 2 and law["g_source"].startswith("probe at init: 8 minibatches of 4")
    assert law["state"] in ("forgotten", "not forgotten") and 0 < law["memory_end"] <= 1.0
    again = law_forgetting(c.replace(lr=0.02), [1.0, 8.0], cache=cache)  # same model, data, batch
    assert len(cache) == 2 and again["memory_end"] <= law["memory_end"]  # faster forgetting
    mlp = law_forgetting(config(model="mlp", optimizer="adam", lr=1e-3), [1.0, 8.0])
    assert np.isnan(mlp["memory_end"]) and mlp["state"] == "no scale-invariant weights"
    assert mlp["g_source"] == "none"
    table = sweep_law_forgetting([c, c.replace(alpha=8.0)])
    assert len(table) == 1 and table["law_memory_end"].iloc[0] == law["memory_end"]


def test_dry_run_prints_the_probed_law(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    fields = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in BASE.items() if k != "quiet")
    fields = fields.replace("False", "false")
    sweep.write_text(
        f'name = "probe"\n[base]\n{fields}\noptimizer = "adamw"\nlr = 0.01\nweight_decay = 0.5\n'
        "[grid]\nalpha = [1.0, 8.0]\nseed = [0]\n"
    )
    assert main(["sweep", "run", str(sweep), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "law_m_end" in out and "law g_source: probe at init: 8 minibatches of 4" in out


def test_a_probe_without_local_data_says_so_once(tmp_path):
    c = config(dataset="cifar10", data_dir=str(tmp_path / "none"))
    runs = [c, c.replace(alpha=8.0), c.replace(lr=0.5), c.replace(lr=0.5, alpha=8.0)]
    cache: dict = {}
    table = sweep_law_forgetting(runs, cache=cache)
    assert len(table) == 2 and (table["law_state"] == "undefined").all()
    assert table["law_memory_end"].isna().all() and table["law_forgetting_epochs"].isna().all()
    assert table["law_g_source"].str.startswith("none: the probe failed (DataNotFoundError").all()
    assert len(cache) == 1  # the failed probe (the smaller alpha's, tried first) is not retried
