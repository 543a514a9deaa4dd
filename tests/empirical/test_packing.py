"""Packed training: K runs trained together write the run folders of the same runs trained one by one.

What equality holds (docs/run-format.md, "Packed runs", has the measurements). Packed and unpacked
training are the same arithmetic in another reduction order: the first forward is bit-identical on the
AVX2 CPUs measured (on an AVX-512 one it differs at 2e-7), the first backward is not (the first conv's
weight gradient sums B x H x W = 4,096 terms in another order: 2e-6 relative). So one float32 step is
checked to float32 rounding, and whole runs are trained in float64 (``precision = "fp64"``), where the
packed and the unpacked run agree to float64 rounding carried through training (``RUN_RTOL``): tolerances
derived from the computation (tests/empirical/rounding.py), not a constant that happens to pass on one
CPU. (Whole float32 runs used to be checked against each run's batch-permuted twins: two more trainings
per run, and a tolerance that followed each CPU's near-ties.)
"""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from initmem.empirical.packing import (
    PACK_MODES,
    Pack,
    PackedModels,
    check_packable,
    pack_mode,
    train_packed,
    widen,
)
from initmem.empirical.runfolder import read_log
from initmem.empirical.trainer import Trainer, train
from tests.empirical.rounding import (
    ONE_STEP_RTOL,
    Reference,
    assert_same_result,
    assert_same_run,
    one_step_rtol,
    reference_of,
    relative_gap,
)

LR = 0.002
#: alpha and seed of the packed runs (everything else equal).
RUNS = ((0.5, 0), (2.0, 1), (1.0, 2))
#: whole runs are compared in float64 (the module docstring)
FP64 = dict(lr=LR, precision="fp64")

pytestmark = pytest.mark.usefixtures("single_thread")


def train_alone(config) -> Reference:
    """``config`` trained alone by train(): the reference of a packed run."""
    result = train(config)
    return reference_of(result.run_dir, result)


@pytest.fixture(scope="module")
def solo_runs(tmp_path_factory, fixture_data_dir):
    """The references: each run trained alone by train(), in float64."""
    from initmem.empirical.config import RunConfig

    root = tmp_path_factory.mktemp("solo")
    references = []
    torch.set_num_threads(1)
    for alpha, seed in RUNS:
        config = RunConfig.from_dict(
            dict(
                dataset="cifar10-fixture",
                data_dir=str(fixture_data_dir),
                width=1 / 16,
                batch_size=4,
                epochs=2,
                lr=LR,
                precision="fp64",
                momentum=0.9,
                eval_batch_size=8,
                alpha=alpha,
                seed=seed,
                out_dir=str(root / f"a{alpha}-s{seed}"),
                quiet=True,
            )
        )
        references.append(train_alone(config))
    return references


@pytest.mark.parametrize("mode", PACK_MODES)
def test_one_packed_step_is_each_runs_step_to_float32_rounding(tiny_config, mode):
    """The first step, piece by piece: logits, BatchNorm running statistics, every gradient and every
    parameter after the optimizer's update, packed against each run's own step, within
    ``ONE_STEP_RTOL``."""
    configs = [tiny_config(alpha=a, seed=s, lr=LR) for a, s in RUNS]
    solo = [Trainer(c) for c in configs]
    packed = [Trainer(c) for c in configs]
    pack = Pack(packed, mode)
    expected = []
    for t in solo:
        plan = t.start_epoch()
        images, labels = t.next_batch(plan.batches[0])
        logits = t.model(images)
        t.optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(logits, labels).backward()
        grads = [p.grad.clone() for p in t.params]
        t.apply_gradients(t.next_lr())
        expected.append((logits.detach(), grads))
    plans = [t.start_epoch() for t in packed]
    batches = [t.next_batch(plan.batches[0]) for t, plan in zip(packed, plans, strict=True)]
    logits = pack.packed.forward([images for images, _ in batches])
    losses = [F.cross_entropy(logits[k], labels) for k, (_, labels) in enumerate(batches)]
    pack.packed.zero_grad()
    torch.stack(losses).sum().backward()
    pack.packed.share_grads()
    gaps = {}
    for k, t in enumerate(packed):
        gaps[f"logits {k}"] = relative_gap(logits[k], expected[k][0])
        for name, p, g in zip(t.names, t.params, expected[k][1], strict=True):
            gaps[f"grad {k} {name}"] = relative_gap(p.grad, g)
        t.apply_gradients(t.next_lr())
        for name, p, q in zip(t.names, t.params, solo[k].params, strict=True):
            gaps[f"param {k} {name}"] = relative_gap(p, q)
        mine, theirs = dict(t.model.named_buffers()), dict(solo[k].model.named_buffers())
        for name in mine:
            if not name.endswith("num_batches_tracked"):
                gaps[f"buffer {k} {name}"] = relative_gap(mine[name], theirs[name])
    worst = max(gaps, key=gaps.get)
    assert gaps[worst] <= ONE_STEP_RTOL, (worst, gaps[worst])


@pytest.mark.parametrize("mode", PACK_MODES)
def test_packed_runs_write_the_runs_of_unpacked_training(solo_runs, tiny_config, mode):
    configs = [tiny_config(alpha=alpha, seed=seed, **FP64) for alpha, seed in RUNS]
    packed = train_packed(configs, mode=mode)
    for reference, result, config in zip(solo_runs, packed, configs, strict=True):
        assert result.run_dir == config.out_dir
        assert_same_result(reference, result)
        assert json.loads(open(f"{config.out_dir}/result.json").read())["status"] == "completed"
        assert_same_run(reference, result.run_dir)


def test_a_diverging_run_leaves_the_pack_and_the_others_go_on(tiny_config):
    """alpha = 1000 puts the weight norm above max_weight_norm: that run stops at the first check
    (the end of epoch 1), exactly as alone; its pack-mate trains on to the end as alone (float64:
    every number within ``RUN_RTOL`` of the run alone's)."""
    pair = [(1.0, 0), (1000.0, 0)]
    configs = [tiny_config(alpha=a, seed=s, max_weight_norm=500.0, **FP64) for a, s in pair]
    solo = [train(c.replace(out_dir=f"{c.out_dir}-solo")) for c in configs]
    packed = train_packed(configs)
    assert [r.status for r in solo] == ["completed", "diverged"]
    for a, b in zip(solo, packed, strict=True):
        assert (b.status, b.steps_run, b.diverged_step, b.epochs_run) == (
            a.status,
            a.steps_run,
            a.diverged_step,
            a.epochs_run,
        )
    assert_same_run(reference_of(solo[0].run_dir), packed[0].run_dir)


def test_a_pack_whose_runs_all_diverge_at_one_step_ends_them_as_alone(tiny_config):
    """alpha = 1000 and 2000 both exceed max_weight_norm at the first check (step 4): each run ends
    diverged at that step, as alone (the pack empties at once; it used to fail on an empty stack)."""
    configs = [tiny_config(alpha=a, lr=LR, max_weight_norm=500.0) for a in (1000.0, 2000.0)]
    solo = [train(c.replace(out_dir=f"{c.out_dir}-solo")) for c in configs]
    packed = train_packed(configs)
    for a, b in zip(solo, packed, strict=True):
        assert (a.status, a.steps_run, a.diverged_step, a.epochs_run) == ("diverged", 4, 4, 0)
        assert (b.status, b.steps_run, b.diverged_step, b.epochs_run) == ("diverged", 4, 4, 0)
        assert b.reason.startswith("weight norm") and b.best_val_acc == a.best_val_acc
        assert [r["epoch"] for r in read_log(b.run_dir)] == [0]


def test_finished_runs_are_returned_and_the_rest_are_trained(solo_runs, tiny_config):
    finished = tiny_config(alpha=RUNS[0][0], seed=RUNS[0][1], out_dir=solo_runs[0].run_dir, **FP64)
    fresh = [tiny_config(alpha=a, seed=s, **FP64) for a, s in RUNS[1:]]
    results = train_packed([finished, *fresh])
    assert results[0] == solo_runs[0].result
    for reference, result in zip(solo_runs[1:], results[1:], strict=True):
        assert_same_result(reference, result)
        assert_same_run(reference, result.run_dir)


class Killed(Exception):
    """Raised from a callback to stop a run after an evaluation, as a kill would."""


def test_killed_runs_resume_packed_and_end_like_uninterrupted_ones(solo_runs, tiny_config):
    """Two runs killed after epoch 1 resume together from their last.pt (the checkpoint is loaded
    into the views of the stack); the third, fresh, trains alone: all end as the uninterrupted runs."""
    configs = [tiny_config(alpha=a, seed=s, **FP64) for a, s in RUNS]

    def kill_after_epoch_1(record):
        if record["epoch"] == 1:
            raise Killed

    for config in configs[:2]:
        with pytest.raises(Killed):
            train(config, callback=kill_after_epoch_1)
    results = train_packed(configs)
    for reference, result in zip(solo_runs, results, strict=True):
        assert_same_result(reference, result)
        assert_same_run(reference, result.run_dir)


def test_only_alpha_and_seed_may_differ(tiny_config):
    with pytest.raises(ValueError, match=r"differs .* in \['lr'\]"):
        check_packable([tiny_config(), tiny_config(lr=0.1)])
    same_dir = tiny_config()
    with pytest.raises(ValueError, match="distinct out_dir"):
        check_packable([same_dir, same_dir.replace(alpha=2.0)])
    with pytest.raises(ValueError, match="at least one"):
        check_packable([])
    with pytest.raises(ValueError, match="mode must be one of"):
        train_packed([tiny_config()], mode="threads")


def test_widen_refuses_layers_it_cannot_pack():
    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * self.scale[:, None, None]

    with pytest.raises(ValueError, match=r"1 \(Affine\) holds parameters \['scale'\]"):
        widen(nn.Sequential(nn.Conv2d(3, 3, 3), Affine()), 2)


@pytest.mark.parametrize("mode", PACK_MODES)
def test_packed_forward_is_each_models_forward(mode):
    """Logits and BatchNorm running statistics of a packed forward equal each model's own forward
    (train mode); the models' parameters are views into the stack."""
    from initmem.empirical.models import resnet18

    torch.manual_seed(0)
    models = [resnet18(width=1 / 16) for _ in range(3)]
    reference = [torch.nn.utils.parameters_to_vector(m.parameters()) for m in models]
    images = [torch.randn(5, 3, 32, 32) for _ in models]
    expected = []
    stats = []
    for model, x in zip(models, images, strict=True):
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        expected.append(model(x))
        stats.append(model.stem.bn.running_mean.clone())
        model.load_state_dict(saved)
    packed = PackedModels(models, mode)
    logits = packed.forward(images)
    for i, model in enumerate(models):
        # ResNet-18: 18 layers in the chain, BatchNorm statistics over 5 x 32 x 32 positions
        rtol = one_step_rtol(18, 5 * 32 * 32)
        assert relative_gap(logits[i], expected[i]) <= rtol, f"logits {i}"
        assert relative_gap(model.stem.bn.running_mean, stats[i]) <= rtol, f"running mean {i}"
        assert int(model.stem.bn.num_batches_tracked) == 1
        vector = torch.nn.utils.parameters_to_vector(model.parameters())
        np.testing.assert_array_equal(vector.detach().numpy(), reference[i].detach().numpy())
    stack = packed.params["stem.conv.weight"].untyped_storage().data_ptr()
    assert models[0].stem.conv.weight.untyped_storage().data_ptr() == stack


@pytest.mark.parametrize(
    ("architecture", "expected"),
    [
        ("resnet9", "grouped"),
        ("mlp", "grouped"),
        ("mlp-ln", "vmap"),
        ("vit-tiny", "vmap"),
        ("nf-resnet", "vmap"),
    ],
)
def test_auto_mode_packs_grouped_where_it_can_and_with_vmap_otherwise(architecture, expected):
    from initmem.empirical.models import MODEL_BUILDERS

    assert pack_mode(MODEL_BUILDERS[architecture](1 / 16)) == expected


def test_a_layernorm_model_packs_with_vmap_and_writes_the_runs_of_unpacked_training(tiny_config):
    """The auto mode (what a packed sweep uses) on a model grouped packing cannot widen."""
    configs = [tiny_config(model="mlp-ln", alpha=a, seed=s, **FP64) for a, s in RUNS[:2]]
    references = [train_alone(c.replace(out_dir=f"{c.out_dir}-solo")) for c in configs]
    for reference, result in zip(references, train_packed(configs, mode="auto"), strict=True):
        assert_same_result(reference, result)
        assert_same_run(reference, result.run_dir)
