"""The angular update per step and per filter in the run log (docs/run-format.md, layers keys
``angular_update`` and ``filter_angular_update``), against initmem.theory.normalized.angular_update."""

import math

import numpy as np
import torch

from initmem.empirical.runfolder import read_log
from initmem.empirical.trainer import IntervalStats, train
from initmem.theory.normalized import angular_update


def test_interval_stats_angles_match_the_theory_measure():
    torch.manual_seed(0)
    conv = torch.randn(4, 3, 3, 3, dtype=torch.float32)
    gain = torch.randn(4, dtype=torch.float32)
    stats = IntervalStats([conv, gain], [True, False])
    befores, afters = [], []
    for _ in range(3):
        befores.append(conv.clone())
        conv.add_(0.05 * torch.randn_like(conv)).mul_(0.99)
        gain.add_(0.1)
        afters.append(conv.clone())
        stats.add_angles([conv, gain])
    fields = stats.layer_fields([conv, gain])
    a = np.stack([b.reshape(4, -1).double().numpy() for b in befores])
    b = np.stack([x.reshape(4, -1).double().numpy() for x in afters])
    whole = angular_update(a.reshape(3, -1), b.reshape(3, -1)).mean()
    per_filter = angular_update(a, b).mean()
    assert math.isclose(fields[0]["angular_update"], whole, rel_tol=1e-9)
    assert math.isclose(fields[0]["filter_angular_update"], per_filter, rel_tol=1e-9)
    assert math.isnan(fields[1]["angular_update"]) and math.isnan(
        fields[1]["filter_angular_update"]
    )


def test_runs_log_the_angular_update_of_scale_invariant_layers(tiny_config, single_thread):
    cfg = tiny_config(epochs=1, l2=0.01)
    train(cfg)
    log = read_log(cfg.out_dir)
    layers = log[-1]["layers"]
    measured = [k for k, v in layers.items() if v["scale_invariant"]]
    assert measured
    for values in layers.values():
        if values["scale_invariant"]:
            assert 0 < values["filter_angular_update"] < math.pi
            assert 0 < values["angular_update"] < math.pi
        else:
            assert math.isnan(values["angular_update"])
    assert all(math.isnan(v["angular_update"]) for v in log[0]["layers"].values())
