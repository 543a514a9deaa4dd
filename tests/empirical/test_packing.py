"""Packed training: K runs trained together write the run folders of the same runs trained one by one.

Tolerance. fp32 on the CPU: a grouped (or vmapped) convolution and a BatchNorm over K x C channels
sum in another order than K separate ones, so packed and unpacked runs agree to float rounding, which
training carries forward and can amplify: at lr 0.05 the tiny networks below are chaotic enough that
one run in a few drifts apart by 1e-4 to 1e-2 within 8 steps. At ``LR`` = 0.002 (momentum 0.9) the
differences stayed below 4e-7 relative over 8 steps for 9 seeds x 3 alphas x both modes; the test
allows ``RTOL`` = 1e-4, relative to the largest magnitude in each tensor (``ATOL`` for all-zero
ones). Accuracies, predictions, epochs, steps and statuses must be equal.
"""

import json

import numpy as np
import pytest
import torch
from torch import nn

from initmem.empirical.packing import (
    PACK_MODES,
    PackedModels,
    check_packable,
    train_packed,
    widen,
)
from initmem.empirical.runfolder import read_log, read_predictions
from initmem.empirical.trainer import train

RTOL = 1e-4
ATOL = 1e-6
LR = 0.002
#: alpha and seed of the packed runs (everything else equal).
RUNS = ((0.5, 0), (2.0, 1), (1.0, 2))
EXACT_KEYS = ("epoch", "step", "train_acc", "train_eval_acc", "val_acc", "test_acc", "lr")

pytestmark = pytest.mark.usefixtures("single_thread")


def assert_close(actual, desired, where):
    scale = float(np.max(np.abs(desired))) if np.size(desired) else 0.0
    np.testing.assert_allclose(actual, desired, rtol=0, atol=max(ATOL, RTOL * scale), err_msg=where)


def assert_same_run(solo_dir, packed_dir):
    """Logs (scalar and per-layer), predictions and checkpoints of two run folders agree."""
    solo, packed = read_log(solo_dir), read_log(packed_dir)
    assert len(solo) == len(packed)
    for a, b in zip(solo, packed, strict=True):
        epoch = a["epoch"]
        for key, value in a.items():
            if key in ("wall_time", "layers"):
                continue
            if key in EXACT_KEYS:
                assert value == b[key] or (np.isnan(value) and np.isnan(b[key])), (key, epoch)
            else:
                assert_close(b[key], value, f"{key} at epoch {epoch}")
        assert a["layers"].keys() == b["layers"].keys()
        for layer, values in a["layers"].items():
            for key, value in values.items():
                assert_close(b["layers"][layer][key], value, f"{layer}.{key} at epoch {epoch}")
    pred_a, pred_b = read_predictions(solo_dir), read_predictions(packed_dir)
    for key in pred_a:
        np.testing.assert_array_equal(pred_a[key], pred_b[key], err_msg=key)
    for name in ("best.pt", "last.pt"):
        state_a = torch.load(f"{solo_dir}/{name}", weights_only=False)
        state_b = torch.load(f"{packed_dir}/{name}", weights_only=False)
        model_a = state_a if name == "best.pt" else state_a["trainer"]["model"]
        model_b = state_b if name == "best.pt" else state_b["trainer"]["model"]
        for key, tensor in model_a.items():
            assert_close(model_b[key].float().numpy(), tensor.float().numpy(), f"{name}:{key}")
            # each run's checkpoint holds its own tensors, not the whole stack
            assert model_b[key].untyped_storage().nbytes() == tensor.untyped_storage().nbytes()


@pytest.fixture(scope="module")
def solo_runs(tmp_path_factory, fixture_data_dir):
    """The reference: each run trained alone by train()."""
    from initmem.empirical.config import RunConfig

    root = tmp_path_factory.mktemp("solo")
    results = []
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
                momentum=0.9,
                eval_batch_size=8,
                alpha=alpha,
                seed=seed,
                out_dir=str(root / f"a{alpha}-s{seed}"),
                quiet=True,
            )
        )
        results.append(train(config))
    return results


@pytest.mark.parametrize("mode", PACK_MODES)
def test_packed_runs_write_the_runs_of_unpacked_training(solo_runs, tiny_config, mode):
    configs = [tiny_config(alpha=alpha, seed=seed, lr=LR) for alpha, seed in RUNS]
    packed = train_packed(configs, mode=mode)
    for solo, result, config in zip(solo_runs, packed, configs, strict=True):
        assert result.run_dir == config.out_dir
        assert result.hash == solo.hash
        assert (result.status, result.best_epoch, result.epochs_run, result.steps_run) == (
            solo.status,
            solo.best_epoch,
            solo.epochs_run,
            solo.steps_run,
        )
        assert (result.best_val_acc, result.test_acc) == (solo.best_val_acc, solo.test_acc)
        assert json.loads(open(f"{config.out_dir}/result.json").read())["status"] == "completed"
        assert_same_run(solo.run_dir, result.run_dir)


def test_a_diverging_run_leaves_the_pack_and_the_others_go_on(tiny_config):
    """alpha = 1000 puts the weight norm above max_weight_norm: that run stops at the first check
    (the end of epoch 1), exactly as alone; its pack-mate trains on to the end, exactly as alone."""
    pair = [(1.0, 0), (1000.0, 0)]
    solo = [train(tiny_config(alpha=a, seed=s, lr=LR, max_weight_norm=500.0)) for a, s in pair]
    packed = train_packed(
        [tiny_config(alpha=a, seed=s, lr=LR, max_weight_norm=500.0) for a, s in pair]
    )
    assert [r.status for r in solo] == ["completed", "diverged"]
    for a, b in zip(solo, packed, strict=True):
        assert (b.status, b.steps_run, b.diverged_step, b.epochs_run) == (
            a.status,
            a.steps_run,
            a.diverged_step,
            a.epochs_run,
        )
    assert_same_run(solo[0].run_dir, packed[0].run_dir)


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
    finished = tiny_config(alpha=RUNS[0][0], seed=RUNS[0][1], lr=LR, out_dir=solo_runs[0].run_dir)
    fresh = [tiny_config(alpha=a, seed=s, lr=LR) for a, s in RUNS[1:]]
    results = train_packed([finished, *fresh])
    assert results[0] == solo_runs[0]
    for solo, result in zip(solo_runs[1:], results[1:], strict=True):
        assert_same_run(solo.run_dir, result.run_dir)


class Killed(Exception):
    """Raised from a callback to stop a run after an evaluation, as a kill would."""


def test_killed_runs_resume_packed_and_end_like_uninterrupted_ones(solo_runs, tiny_config):
    """Two runs killed after epoch 1 resume together from their last.pt (the checkpoint is loaded
    into the views of the stack); the third, fresh, trains alone: all end as the uninterrupted runs."""
    configs = [tiny_config(alpha=a, seed=s, lr=LR) for a, s in RUNS]

    def kill_after_epoch_1(record):
        if record["epoch"] == 1:
            raise Killed

    for config in configs[:2]:
        with pytest.raises(Killed):
            train(config, callback=kill_after_epoch_1)
    results = train_packed(configs)
    for solo, result in zip(solo_runs, results, strict=True):
        assert (result.status, result.steps_run) == (solo.status, solo.steps_run)
        assert_same_run(solo.run_dir, result.run_dir)


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
        assert_close(logits[i].detach().numpy(), expected[i].detach().numpy(), f"logits {i}")
        assert_close(model.stem.bn.running_mean.numpy(), stats[i].numpy(), f"running mean {i}")
        assert int(model.stem.bn.num_batches_tracked) == 1
        vector = torch.nn.utils.parameters_to_vector(model.parameters())
        np.testing.assert_array_equal(vector.detach().numpy(), reference[i].detach().numpy())
    stack = packed.params["stem.conv.weight"].untyped_storage().data_ptr()
    assert models[0].stem.conv.weight.untyped_storage().data_ptr() == stack
