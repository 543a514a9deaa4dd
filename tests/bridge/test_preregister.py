"""Predictions per parameter group before training (bridge/preregister.py): each law against an
independent computation."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import functional_call, jacrev

from initmem.bridge.preregister import (
    lazy_decay_steps,
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


@pytest.mark.parametrize(
    ("optimizer", "momentum", "l2", "wd", "expected"),
    [
        ("sgd", 0.9, 5e-3, 0.0, 1 / (0.05 * 5e-3 / 0.1)),
        ("sgd", 0.0, 0.0, 1e-2, 1 / (0.05 * 1e-2)),
        ("adam", 0.0, 1e-3, 0.0, 1 / (0.05 * 1e-3)),
        ("sgd", 0.9, 0.0, 0.0, math.inf),
    ],
)
def test_lazy_decay_time_is_the_e_fold_time_of_the_decay(
    tmp_path, optimizer, momentum, l2, wd, expected
):
    """(P2)'s time against a simulation of the decay alone: the init's part of a linearized model
    under heavy-ball gradient descent with only the decay acting (no data gradient: the unseen
    directions) falls by e at the predicted step (within 2%, the heavy-ball transient)."""
    c = config(tmp_path, optimizer=optimizer, momentum=momentum, l2=l2, weight_decay=wd)
    steps = lazy_decay_steps(c)
    assert steps == pytest.approx(expected, rel=1e-12)
    if not math.isfinite(steps) or optimizer != "sgd":
        return
    w, velocity, t = 1.0, 0.0, 0  # torch.optim.SGD's heavy ball on the decay's gradient alone
    while w > math.exp(-1):
        velocity = momentum * velocity + l2 * w
        w = w - c.lr * velocity - c.lr * wd * w
        t += 1
    assert t == pytest.approx(steps, rel=0.02)


@pytest.mark.parametrize("model", ["resnet9", "mlp", "mlp-ln", "nf-resnet"])
def test_every_parameter_is_in_one_group_and_each_group_has_its_law(tmp_path, model):
    c = config(tmp_path, model=model)
    table = predict_groups(c, probe_size=4).table.set_index("group")
    built = default_model(c)
    groups = parameter_groups(built)
    total = sum(p.numel() for p in built.parameters())
    assert table["parameters"].sum() == total
    assert table.loc["scale_invariant", "tensors"] == len(groups["scale_invariant"])
    assert table.loc["other", "steps"] == pytest.approx(lazy_decay_steps(c))
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
    assert list(table["group"]) == ["scale_invariant", "head", "other"]
    assert (tmp_path / "pre" / "predictions.json").read_text().count(c.hash) == 1
