"""Predictions per parameter group before training (bridge/preregister.py): each law against an
independent computation."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import functional_call, jacrev

from initmem.bridge.preregister import (
    lazy_degree,
    memory_fraction,
    predict_groups,
    write_predictions,
)
from initmem.bridge.probe import law_forgetting
from initmem.empirical.config import RunConfig
from initmem.empirical.models import default_model, parameter_groups

pytestmark = pytest.mark.usefixtures("single_thread")


def config(tmp_path, **changes):
    values = dict(
        dataset="cifar10-fixture",
        data_dir=str(tmp_path / "data"),
        width=0.125,
        batch_size=4,
        epochs=10,
        lr=0.05,
        momentum=0.9,
        l2=5e-3,
        alpha=4.0,
    )
    return RunConfig.from_dict(values | changes)


def test_memory_fraction_is_the_least_squares_residual_of_the_initial_function(tmp_path):
    """(P2) by another road: the linearized network's converged test outputs keep f0_test - J_test
    pinv(J_train) f0_train (the minimum-norm least-squares step), from per-output Jacobians and a
    pseudo-inverse, against the kernel solve of memory_term; 1e-6 relative."""
    model = default_model(config(tmp_path, model="mlp", width=1 / 16)).double().eval()
    names = [n for n, _ in model.named_parameters() if not n.startswith("head")]
    torch.manual_seed(0)
    x_train, x_test = torch.randn(6, 3, 32, 32).double(), torch.randn(5, 3, 32, 32).double()
    params = {n: p.detach() for n, p in model.named_parameters()}

    def outputs(chosen, x):
        return functional_call(model, params | chosen, (x,)).reshape(-1)

    chosen = {n: params[n] for n in names}
    jac = [jacrev(outputs)(chosen, x) for x in (x_train, x_test)]
    j_train, j_test = (torch.cat([j[n].reshape(j[n].shape[0], -1) for n in names], 1) for j in jac)
    with torch.no_grad():
        f0_train, f0_test = outputs({}, x_train).numpy(), outputs({}, x_test).numpy()
    residual = f0_test - j_test.numpy() @ np.linalg.pinv(j_train.numpy()) @ f0_train
    expected = np.linalg.norm(residual) / np.linalg.norm(f0_test)
    assert memory_fraction(model, names, x_train, x_test) == pytest.approx(expected, rel=1e-6)
    assert 0 < expected < 1


@pytest.mark.parametrize(("l2", "forgets"), [(5e-2, True), (5e-3, False)])
def test_lazy_time_applies_the_schedule_and_the_measured_depth(tmp_path, l2, forgets):
    """(P2) on a tiny MLP with biases (not homogeneous) under coupled L2, heavy ball and a cosine
    schedule: the depth is Euler's ratio <J theta_0, f0> / |f0|^2 with J theta_0 taken here by a
    central difference of f((1 + s) theta_0) in the "other" parameters (1e-6 relative), and the
    row's steps are lazy_forgetting at that depth over the schedule rebuilt from its definition;
    with weak decay the schedule ends first: inf, "not within the run"."""
    from initmem.empirical.data import load_splits
    from initmem.theory.ntk import lazy_forgetting
    from initmem.theory.schedule import lr_multipliers

    c = config(tmp_path, model="mlp", epochs=30, schedule="cosine", l2=l2)
    data = load_splits(c)
    table = predict_groups(c, probe_size=4, data=data).table.set_index("group")
    model = default_model(c).double().eval()
    groups = parameter_groups(model)
    params = {n: p.detach() for n, p in model.named_parameters()}
    other = [n for n in groups["all"] if n not in set(groups["head"])]
    x = data.test.images[:4].double()

    def outputs(scale):
        scaled = {n: p * scale if n in other else p for n, p in params.items()}
        with torch.no_grad():
            return functional_call(model, scaled, (x,)).numpy()

    h = 1e-6
    f0, jtheta0 = outputs(1.0), (outputs(1.0 + h) - outputs(1.0 - h)) / (2 * h)
    depth = float(np.sum(jtheta0 * f0) / np.sum(f0 * f0))
    assert 0 < depth and abs(depth - round(depth)) > 1e-3  # biases: a real, not an integer, degree
    assert lazy_degree(model, other, x) == pytest.approx(depth, rel=1e-6)  # homogeneity_degree's
    mults = lr_multipliers(
        c.total_steps, c.steps_per_epoch, "cosine", warmup_epochs=c.warmup_epochs
    )
    expected = lazy_forgetting(c.lr, depth=depth, l2=l2, momentum=c.momentum, lr_multipliers=mults)
    row = table.loc["other"]
    assert row["steps"] == expected.steps and math.isfinite(row["steps"]) == forgets
    assert f"depth {depth:.4g} (homogeneity_degree)" in row["law"]
    if forgets:
        assert row["epochs"] == row["steps"] / c.steps_per_epoch
    else:
        left = f"not within the run: the schedule ends with memory {expected.memory_left:.3g}"
        assert left in row["law"] and math.isinf(row["epochs"])


@pytest.mark.parametrize("model", ["resnet9", "mlp", "mlp-ln", "nf-resnet"])
def test_every_parameter_is_in_one_group_and_each_group_has_its_law(tmp_path, model):
    c = config(tmp_path, model=model)
    table = predict_groups(c, probe_size=4).table.set_index("group")
    built = default_model(c)
    groups = parameter_groups(built)
    total = sum(p.numel() for p in built.parameters())
    assert table["parameters"].sum() == total
    assert table.loc["scale_invariant", "tensors"] == len(groups["scale_invariant"])
    if groups["scale_invariant"]:  # P1: the probed law, decided by the one rule
        law = law_forgetting(c, [1.0, c.alpha])
        assert table.loc["scale_invariant", "steps"] == law["forgetting_steps"]
        assert table.loc["scale_invariant", "memory_end"] == pytest.approx(law["memory_end"])
        assert 0 < law["memory_end"] < 1.5 and law["state"] in law_text(table)
        assert table.loc["scale_invariant", "g_source"].startswith("probe at init: 8 minibatches")
    else:
        assert math.isnan(table.loc["scale_invariant", "steps"])
        assert table.loc["scale_invariant", "g_source"] == "none"
    assert (table.loc[["head", "other"], "g_source"] == "none").all()
    assert 0 < table.loc["other", "memory_fraction"] < 1.5


def law_text(table) -> str:
    return str(table.loc["scale_invariant", "law"])


def test_predictions_are_written_before_training(tmp_path):
    c = config(tmp_path, model="mlp-ln")
    path = write_predictions(c, tmp_path / "pre", probe_size=4)
    table = pd.read_csv(path)
    assert list(table["group"]) == ["scale_invariant", "residual_stream", "head", "other"]
    assert (tmp_path / "pre" / "predictions.json").read_text().count(c.hash) == 1
