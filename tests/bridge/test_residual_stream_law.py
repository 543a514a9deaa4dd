"""The residual_stream group's probe and pre-registered law (P1 on the joint norm) against direct
computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from initmem.bridge.preregister import PREDICTION_GROUPS, predict_groups
from initmem.bridge.probe import law_forgetting, probe_gradient_scale
from initmem.empirical.config import RESIDUAL_STREAM_LAYER, RunConfig
from initmem.empirical.models import default_model, residual_stream_parameters
from tests.bridge.test_probe import first_batch_backward

pytestmark = pytest.mark.usefixtures("single_thread")

BASE = dict(
    dataset="cifar10-fixture", train_size=16, val_size=4, test_size=20, batch_size=4, epochs=3,
    width=0.125, augment=False, device="cpu", precision="fp32", quiet=True, model="vit-tiny",
)  # fmt: skip


def config(**changes) -> RunConfig:
    return RunConfig(**(BASE | changes))


def test_the_joint_g_is_the_summed_gradient_times_the_joint_norm_on_one_minibatch():
    """G of the joint row of a one-minibatch probe = (sum_i |g_i|^2)(sum_i |w_i|^2) over the group's
    tensors, from a forward and backward of the trainer's first batch computed here."""
    c = config(optimizer="sgd", lr=0.05, alpha=2.0)
    probe = probe_gradient_scale(c, 2.0, steps=1)
    trainer = first_batch_backward(c)
    params = dict(trainer.model.named_parameters())
    members = residual_stream_parameters(trainer.model)
    grad_sq = sum(float(params[n].grad.double().pow(2).sum()) for n in members)
    norm_sq = sum(float(params[n].detach().double().pow(2).sum()) for n in members)
    (row,) = probe.layers.itertuples()  # the ViT has no per-tensor scale-invariant weight
    assert (row.group, row.layer) == ("residual_stream", RESIDUAL_STREAM_LAYER)
    assert row.numel == sum(params[n].numel() for n in members)
    assert row.init_norm_sq == pytest.approx(norm_sq, rel=1e-9)
    assert row.grad_sq_unit == pytest.approx(grad_sq * norm_sq, rel=1e-5)


def test_the_preregistered_row_is_the_sgd_law_on_the_joint_norm():
    """The residual_stream row of the MLP-Mixer (SGD, no momentum, weight decay, alpha on the group
    alone): its memory at the end is the recursion y' = a^4 y + 2 a^2 lr^2 G of y = |w|^4
    (theory.normalized.sgd_norm_law, iterated here) at alpha 2 and 1 with the probed joint G, which
    the invariance makes the same at both alphas; it names its g_source; the groups partition the
    parameters."""
    c = config(
        model="mlp-mixer", optimizer="sgd", lr=0.05, momentum=0.0, weight_decay=0.5, alpha=2.0,
        alpha_groups=["residual_stream"],
    )  # fmt: skip
    cache: dict = {}
    table = predict_groups(c, probe_size=4, probe_cache=cache).table
    assert list(table["group"]) == list(PREDICTION_GROUPS)
    model = default_model(c)
    assert table["parameters"].sum() == sum(p.numel() for p in model.parameters())
    row = table.set_index("group").loc["residual_stream"]
    assert row["tensors"] == len(residual_stream_parameters(model)) == 14
    assert "joint norm of the residual_stream group" in row["g_source"]
    assert row["g_source"].startswith("probe at init: 8 minibatches")
    a = 1.0 - c.lr * c.weight_decay
    norms, gs = {}, {}
    for alpha in (1.0, 2.0):
        (joint,) = probe_gradient_scale(c, alpha, cache=cache).layers.itertuples()
        y = joint.init_norm_sq**2
        for _ in range(c.total_steps):
            y = a**4 * y + 2 * a**2 * c.lr**2 * joint.grad_sq_unit
        norms[alpha] = (joint.init_norm_sq, math.sqrt(y))
        gs[alpha] = joint.grad_sq_unit
    assert gs[2.0] == pytest.approx(gs[1.0], rel=1e-4)  # G is scale-free (float32 probe)
    expected = math.log(norms[2.0][1] / norms[1.0][1]) / math.log(norms[2.0][0] / norms[1.0][0])
    assert row["memory_end"] == pytest.approx(expected, rel=1e-9)
    assert 0 < expected < 1  # weight decay shrinks the joint norms' log ratio
    law = law_forgetting(c, [1.0, 2.0], cache=cache, group="residual_stream")
    assert row["steps"] == law["forgetting_steps"]


def test_a_model_without_a_residual_stream_has_a_row_saying_so():
    c = config(model="mlp", optimizer="sgd", lr=0.05, alpha=2.0)
    row = predict_groups(c, probe_size=4).table.set_index("group").loc["residual_stream"]
    assert row["tensors"] == 0 and row["g_source"] == "none" and np.isnan(row["steps"])
    assert row["mechanism"] == "none: no normalized residual stream"
    law = law_forgetting(c, [1.0, 2.0], group="residual_stream")
    assert law["state"] == "no normalized residual stream" and np.isnan(law["memory_end"])
    with pytest.raises(ValueError, match="group must be one of"):
        law_forgetting(c, [1.0, 2.0], group="stream")


def test_the_vit_gets_every_row_with_adamw():
    """The ViT's table (attention: its NTK and jvp run on the math kernel): four rows, the joint
    row under the adaptive law with its g_source, the groups partitioning the parameters."""
    c = config(optimizer="adamw", lr=1e-3, weight_decay=0.05, alpha=2.0)
    table = predict_groups(c, probe_size=2).table.set_index("group")
    model = default_model(c)
    assert table["parameters"].sum() == sum(p.numel() for p in model.parameters())
    row = table.loc["residual_stream"]
    assert row["tensors"] == 19 and "joint norm of the residual_stream group" in row["g_source"]
    assert 0 < row["memory_end"] <= 1.5 and "adamw law on the joint norm" in row["law"]
    assert 0 < table.loc["other", "memory_fraction"] <= 1.5
