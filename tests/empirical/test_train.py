"""Training: schedules and decays against closed forms, the run-folder contract, determinism, exact
resume, the norm identity the bridge relies on, divergence, and the switchable CPU/CUDA paths."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from initmem.empirical.config import RunConfig
from initmem.empirical.data import load_splits
from initmem.empirical.models import build_model
from initmem.empirical.optim import (
    DecoupledDecay,
    add_coupled_l2,
    build_optimizer,
    set_lr,
)
from initmem.empirical.runfolder import RunResult, load_result, read_log, read_predictions
from initmem.empirical.trainer import RunFolderError, train
from tests.empirical.rounding import assert_same_run, reference_of

SCALAR_KEYS = {
    "epoch",
    "step",
    "lr",
    "weight_decay",
    "l2",
    "train_loss",
    "train_acc",
    "train_eval_acc",
    "val_loss",
    "val_acc",
    "test_loss",
    "test_acc",
    "weight_norm",
    "dist_from_init",
    "norm_sq_decay",
    "wall_time",
}
LAYER_KEYS = {
    "numel",
    "scale_invariant",
    "weight_norm",
    "eff_lr",
    "dist_from_init",
    "update_norm",
    "grad_norm",
    "grad_sq_sum",
    "lr_sq_grad_sq_sum",
    "norm_sq_drift",
    "grad_sq_unit_sum",
    "precond_grad_sq_sum",
    "update_sq_unit_sum",
    "update_radial_unit_sum",
    "angular_update",
    "filter_angular_update",
}

pytestmark = pytest.mark.usefixtures("single_thread")


def _without_wall_time(records):
    return json.dumps([{k: v for k, v in r.items() if k != "wall_time"} for r in records])


class Killed(Exception):
    """Raised from a callback to simulate a run killed after some evaluation."""


# ------------------------------------------------------------------------------ schedules, decays
@pytest.mark.parametrize(
    ("changes", "step", "expected"),
    [
        ({}, 17, 1.0),
        ({"warmup_epochs": 1.0}, 0, 0.25),  # 4 steps per epoch: (step + 1) / 4
        ({"warmup_epochs": 1.0}, 2, 0.75),
        ({"warmup_epochs": 1.0}, 4, 1.0),
        ({"schedule": "step", "milestone_epochs": [3, 6], "step_gamma": 0.5}, 11, 1.0),
        ({"schedule": "step", "milestone_epochs": [3, 6], "step_gamma": 0.5}, 12, 0.5),
        ({"schedule": "step", "milestone_epochs": [3, 6], "step_gamma": 0.5}, 24, 0.25),
        ({"schedule": "cosine"}, 0, 1.0),
        ({"schedule": "cosine"}, 20, 0.5),  # halfway through 40 steps
        ({"schedule": "cosine"}, 39, (1 + math.cos(math.pi * 39 / 40)) / 2),
        ({"schedule": "cosine", "warmup_epochs": 1.0}, 4, 1.0),
        ({"schedule": "cosine", "warmup_epochs": 1.0}, 22, 0.5),  # 18 of the 36 steps after warmup
    ],
)
def test_schedule_factor_closed_forms(tiny_config, changes, step, expected):
    config = tiny_config(epochs=10, **changes)  # 16 images, batch 4: 40 steps
    assert config.total_steps == 40
    assert config.lr_multipliers()[step] == pytest.approx(expected, rel=1e-12)


def _one_step(config: RunConfig, w0: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """One trainer-style optimizer step on a single tensor with the given loss gradient."""
    w = torch.nn.Parameter(w0.clone())
    optimizer = build_optimizer([w], config)
    decay = DecoupledDecay([w], 0.0 if config.optimizer == "adamw" else config.weight_decay)
    w.grad = g.clone()
    if config.optimizer == "adamw":
        add_coupled_l2([w], [w.grad], config.l2)
    set_lr(optimizer, config.lr)
    decay.before_step(config.lr)
    optimizer.step()
    decay.after_step()
    return w.detach()


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "rmsprop"])
def test_decoupled_and_coupled_decay_in_one_step(optimizer):
    """SGD: w1 = (1 - lr (l2 + wd)) w0 - lr g. Adam: w1 = (1 - lr wd) w0 - lr g'/(|g'| + eps) with
    g' = g + l2 w0 (first bias-corrected step). RMSprop: w1 = (1 - lr wd) w0 - lr g'/(sqrt((1-b) g'^2) + eps)."""
    lr, l2, wd = 0.1, 0.3, 0.2
    config = RunConfig(optimizer=optimizer, lr=lr, l2=l2, weight_decay=wd, batch_size=1)
    gen = torch.Generator().manual_seed(0)
    w0, g = torch.randn(50, generator=gen).double(), torch.randn(50, generator=gen).double()
    coupled = g + l2 * w0
    if optimizer == "sgd":
        expected = (1 - lr * (l2 + wd)) * w0 - lr * g
    elif optimizer == "adam":
        expected = (1 - lr * wd) * w0 - lr * coupled / (coupled.abs() + config.eps)
    else:
        rms = torch.sqrt((1 - config.betas[1]) * coupled**2)
        expected = (1 - lr * wd) * w0 - lr * coupled / (rms + config.eps)
    torch.testing.assert_close(_one_step(config, w0, g), expected, rtol=1e-12, atol=1e-14)


def test_adamw_takes_l2_through_the_gradient_and_decay_outside():
    lr, l2, wd = 0.1, 0.3, 0.2
    config = RunConfig(optimizer="adamw", lr=lr, l2=l2, weight_decay=wd, batch_size=1)
    gen = torch.Generator().manual_seed(1)
    w0, g = torch.randn(50, generator=gen).double(), torch.randn(50, generator=gen).double()
    coupled = g + l2 * w0
    expected = (1 - lr * wd) * w0 - lr * coupled / (coupled.abs() + config.eps)
    torch.testing.assert_close(_one_step(config, w0, g), expected, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------ the run folder
def test_run_folder_log_and_result_follow_the_contract(tiny_config):
    config = tiny_config(epochs=3, lr=0.02)
    result = train(config)
    run_dir = config.out_dir
    assert isinstance(result, RunResult) and result.status == "completed"
    assert load_result(run_dir) == result
    saved = json.loads(open(f"{run_dir}/config.json").read())
    assert saved["hash"] == config.hash == result.hash
    # every field as given, and the thread count it ran on recorded (config.threads None: the
    # process's count)
    assert saved["config"]["threads"] == torch.get_num_threads()
    assert RunConfig.from_dict(saved["config"]) == config.replace(threads=torch.get_num_threads())
    assert saved["data"]["train_size"] == 16 and saved["data"]["val_size"] == 4

    records = read_log(run_dir)
    assert [r["epoch"] for r in records] == [0, 1, 2, 3]
    assert [r["step"] for r in records] == [0, 4, 8, 12]
    assert all(set(r) == SCALAR_KEYS | {"layers"} for r in records)
    names = [name for name, _ in build_model(config).named_parameters()]
    assert all(list(r["layers"]) == names for r in records)
    assert all(set(v) == LAYER_KEYS for r in records for v in r["layers"].values())
    first = records[0]
    assert math.isnan(first["train_loss"]) and math.isnan(first["train_acc"])
    assert first["dist_from_init"] == 0.0
    assert all(math.isnan(v["grad_sq_sum"]) for v in first["layers"].values())
    for record in records:
        for key in ("train_eval_acc", "val_acc", "test_acc"):
            assert 0.0 <= record[key] <= 1.0
        weight_norms = np.array([v["weight_norm"] for v in record["layers"].values()])
        assert record["weight_norm"] == pytest.approx(np.sqrt((weight_norms**2).sum()), rel=1e-12)
        layer = record["layers"]["prep.conv.weight"]
        assert layer["eff_lr"] == pytest.approx(record["lr"] / layer["weight_norm"] ** 2, rel=1e-12)
        assert layer["scale_invariant"] and not record["layers"]["head.weight"]["scale_invariant"]

    # parquet tables hold the same numbers
    metrics = pd.read_parquet(f"{run_dir}/metrics.parquet")
    assert list(metrics["val_acc"]) == [r["val_acc"] for r in records]
    layers = pd.read_parquet(f"{run_dir}/layers.parquet")
    assert len(layers) == len(records) * len(names)
    row = layers[(layers.epoch == 2) & (layers.layer == "head.weight")].iloc[0]
    assert row["grad_sq_sum"] == records[2]["layers"]["head.weight"]["grad_sq_sum"]

    # the validation-selected predictor and its predictions
    val = [r["val_acc"] for r in records]
    assert result.best_epoch == records[int(np.argmax(val))]["epoch"]
    assert result.best_val_acc == max(val)
    assert result.test_acc == records[int(np.argmax(val))]["test_acc"]
    assert result.final_train_acc == records[-1]["train_eval_acc"]
    assert result.final_test_acc == records[-1]["test_acc"]
    preds = read_predictions(run_dir)
    assert preds["test_pred"].shape == (4, 20) and preds["test_pred"].dtype == np.int16
    assert list(preds["epochs"]) == [0, 1, 2, 3]
    accuracy = (preds["test_pred"] == preds["test_labels"]).mean(axis=1)
    np.testing.assert_allclose(accuracy, [r["test_acc"] for r in records], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds["best_test_pred"], preds["test_pred"][int(np.argmax(val))])

    # best.pt reproduces the best predictions
    model = build_model(config)
    model.load_state_dict(torch.load(f"{run_dir}/best.pt", weights_only=True))
    data = load_splits(config)
    with torch.no_grad():
        best_pred = model.eval()(data.test.images).argmax(1).numpy()
    np.testing.assert_array_equal(best_pred, preds["best_test_pred"])


def test_two_runs_of_one_config_are_identical(tiny_config):
    first = train(tiny_config(epochs=2))
    second = train(tiny_config(epochs=2))
    assert _without_wall_time(read_log(first.run_dir)) == _without_wall_time(
        read_log(second.run_dir)
    )
    np.testing.assert_array_equal(
        read_predictions(first.run_dir)["test_pred"], read_predictions(second.run_dir)["test_pred"]
    )


@pytest.mark.parametrize(("kill_after", "checkpoint_every"), [(2, 1), (3, 2), (1, 2)])
def test_resumed_run_ends_exactly_like_an_uninterrupted_one(
    tiny_config, kill_after, checkpoint_every
):
    """Killed after the evaluation of epoch ``kill_after``; with checkpoint_every 2 and a kill at
    epoch 3 (1) the work of epoch 3 (1) is lost and redone from the epoch-2 (epoch-0) checkpoint."""
    reference = train(tiny_config(epochs=4, weight_decay=0.01))
    config = tiny_config(epochs=4, weight_decay=0.01, checkpoint_every=checkpoint_every)

    def kill(record):
        if record["epoch"] == kill_after:
            raise Killed

    with pytest.raises(Killed):
        train(config, callback=kill)
    assert not Path(config.out_dir, "result.json").exists()
    resumed = train(config, resume=True)
    assert _without_wall_time(read_log(resumed.run_dir)) == _without_wall_time(
        read_log(reference.run_dir)
    )
    fields = ("status", "best_val_acc", "test_acc", "best_epoch", "final_train_acc", "steps_run")
    assert [getattr(resumed, f) for f in fields] == [getattr(reference, f) for f in fields]
    ref_preds, new_preds = read_predictions(reference.run_dir), read_predictions(resumed.run_dir)
    for key in ("epochs", "test_pred", "best_test_pred"):
        np.testing.assert_array_equal(ref_preds[key], new_preds[key])
    ref_model = torch.load(f"{reference.run_dir}/last.pt", weights_only=False)["trainer"]["model"]
    new_model = torch.load(f"{resumed.run_dir}/last.pt", weights_only=False)["trainer"]["model"]
    ref_best = torch.load(f"{reference.run_dir}/best.pt", weights_only=True)
    new_best = torch.load(f"{resumed.run_dir}/best.pt", weights_only=True)
    for key, value in ref_model.items():
        assert torch.equal(value, new_model[key]), key
        assert torch.equal(ref_best[key], new_best[key]), key


def test_norm_sq_drift_gives_the_exact_norm_identity_for_plain_sgd(tiny_config):
    """For a scale-invariant weight under SGD without momentum, per evaluation interval:
    |w_end|^2 = norm_sq_decay * |w_start|^2 + norm_sq_drift (float32 training: relative 1e-4)."""
    config = tiny_config(
        epochs=3,
        lr=0.2,
        momentum=0.0,
        l2=0.05,
        weight_decay=0.1,
        schedule="cosine",
        warmup_epochs=0.5,
    )
    train(config)
    records = read_log(config.out_dir)
    invariant_errors, head_errors = [], []
    for start, end in zip(records[:-1], records[1:], strict=True):
        for name, layer in end["layers"].items():
            w0, w1 = start["layers"][name]["weight_norm"], layer["weight_norm"]
            predicted = end["norm_sq_decay"] * w0**2 + layer["norm_sq_drift"]
            error = abs(w1**2 - predicted) / w1**2
            if layer["scale_invariant"]:
                invariant_errors.append(error)
            elif name == "head.weight":
                head_errors.append(error)
        # decay product of c_t^2 = (1 - lr_t (l2 + wd))^2 over the interval's steps
        steps = range(start["step"], end["step"])
        factors = config.lr_multipliers()
        c = [1 - config.lr * factors[s] * (config.l2 + config.weight_decay) for s in steps]
        assert end["norm_sq_decay"] == pytest.approx(np.prod(np.square(c)), rel=1e-12)
    assert max(invariant_errors) < 1e-4
    assert min(head_errors) > 1e-3  # the identity needs scale invariance: the head breaks it


def test_gradient_sums_are_consistent_under_a_constant_lr(tiny_config):
    config = tiny_config(epochs=1, lr=0.03)
    train(config)
    layer = read_log(config.out_dir)[1]["layers"]["layer1.conv.conv.weight"]
    assert layer["grad_norm"] == pytest.approx(math.sqrt(layer["grad_sq_sum"] / 4), rel=1e-12)
    assert layer["lr_sq_grad_sq_sum"] == pytest.approx(0.03**2 * layer["grad_sq_sum"], rel=1e-9)
    assert layer["update_norm"] == pytest.approx(layer["dist_from_init"], rel=1e-6)  # one interval


# ------------------------------------------------------------------------------ divergence
@pytest.mark.parametrize(
    ("optimizer", "lr", "reason"),
    [("sgd", 1e6, "weight norm"), ("adam", 1e37, "non-finite training loss")],
)
def test_divergence_stops_the_run_without_an_exception(tiny_config, optimizer, lr, reason):
    """SGD at lr 1e6: BatchNorm keeps the loss finite while the norm explodes. Adam at lr 1e37 moves
    every weight by about 1e37 in one step: the next forward overflows float32."""
    config = tiny_config(epochs=6, optimizer=optimizer, lr=lr, momentum=0.0)
    result = train(config)
    assert result.status == "diverged" and reason in result.reason
    assert isinstance(result.diverged_step, int) and 0 <= result.diverged_step <= result.steps_run
    assert result.steps_run < config.total_steps
    assert load_result(config.out_dir).status == "diverged"
    records = read_log(config.out_dir)
    assert records[-1]["epoch"] == result.epochs_run  # the log ends at the last full epoch


# ------------------------------------------------------------------------------ lengths and paths
def test_length_in_steps_ends_with_a_partial_epoch(tiny_config):
    result = train(tiny_config(steps=6))
    records = read_log(result.run_dir)
    assert (result.epochs_run, result.steps_run) == (2, 6)
    assert [r["step"] for r in records] == [0, 4, 6]


@pytest.mark.parametrize(
    "changes",
    [
        {"optimizer": "adam", "lr": 1e-3},
        {"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.1, "l2": 0.01},
        {"optimizer": "rmsprop", "lr": 1e-3},
        {"optimizer": "sgd", "nesterov": True},
    ],
)
def test_every_optimizer_trains(tiny_config, changes):
    result = train(tiny_config(epochs=1, **changes))
    assert result.status == "completed"
    assert read_log(result.run_dir)[-1]["dist_from_init"] > 0


def test_cpu_variants_of_the_cuda_path(tiny_config):
    """bf16 autocast without channels_last, evaluation every 2 epochs, no gradient tracking, no
    predictions, no augmentation: all switchable, all run on the CPU."""
    config = tiny_config(
        epochs=3,
        precision="bf16",
        channels_last=False,
        eval_every=2,
        track_grad_norms=False,
        save_predictions=False,
        augment=False,
        cudnn_benchmark=False,
    )
    result = train(config)
    records = read_log(result.run_dir)
    assert result.status == "completed"
    assert [r["epoch"] for r in records] == [0, 2, 3]  # the last epoch is always evaluated
    assert all(math.isnan(v["grad_norm"]) for r in records for v in r["layers"].values())
    assert not (Path(result.run_dir) / "predictions.npz").exists()


@pytest.mark.slow
def test_compiled_model_gives_the_same_run_as_eager(tiny_config):
    """A compiled model fuses operations (another rounding): in float64 its run is the eager run's
    within float64 rounding carried through the run (``RUN_RTOL``, tests/empirical/rounding.py);
    only the config hash its predictions carry differs (``compile`` is hashed)."""
    eager = train(tiny_config(epochs=1, precision="fp64"))
    compiled = train(tiny_config(epochs=1, precision="fp64", compile=True))
    assert_same_run(reference_of(eager.run_dir), compiled.run_dir, differ=("pred:run_hash",))


# ------------------------------------------------------------------------------ run-folder guards
def test_run_folder_guards(tiny_config):
    config = tiny_config(epochs=1)
    result = train(config)
    stamp = (Path(config.out_dir) / "result.json").stat().st_mtime_ns
    assert train(config) == result  # finished: returned as is, nothing retrained
    assert (Path(config.out_dir) / "result.json").stat().st_mtime_ns == stamp
    assert train(config, resume=False) == result  # finished: reported, not refused (nor retrained)
    (Path(config.out_dir) / "result.json").unlink()
    with pytest.raises(RunFolderError, match="already holds an unfinished run"):
        train(config, resume=False)
    with pytest.raises(RunFolderError, match="another config"):
        train(config.replace(alpha=2.0))


def test_preloaded_data_gives_the_same_run(tiny_config):
    config = tiny_config(epochs=1)
    direct = train(config)
    other = tiny_config(epochs=1)
    reused = train(other, data=load_splits(other))
    assert _without_wall_time(read_log(direct.run_dir)) == _without_wall_time(
        read_log(reused.run_dir)
    )
    with pytest.raises(ValueError, match="train/val sizes"):
        train(tiny_config(train_size=8), data=load_splits(other))


@pytest.mark.gpu
def test_cuda_path_trains(tiny_config):
    """bf16 autocast, channels_last, data and augmentation on the GPU, cudnn autotuning."""
    result = train(tiny_config(epochs=2, device="cuda"))
    assert result.status == "completed"
    record = read_log(result.run_dir)[-1]
    assert record["dist_from_init"] > 0 and 0 <= record["test_acc"] <= 1


def test_mse_loss_is_the_lazy_regimes_squared_error():
    """``training_loss("mse")`` is |f - onehot|^2 / (2 n K) (theory/ntk.py's L), computed in numpy."""
    from initmem.empirical.trainer import training_loss

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 3))
    labels = np.array([0, 2, 1, 1, 0])
    onehot = np.eye(3)[labels]
    expected = ((logits - onehot) ** 2).sum() / (2 * logits.size)
    got = training_loss("mse", torch.tensor(logits), torch.tensor(labels))
    assert float(got) == pytest.approx(expected, rel=1e-12)
    summed = training_loss("mse", torch.tensor(logits), torch.tensor(labels), reduction="sum")
    assert float(summed) == pytest.approx(expected * 5, rel=1e-12)


def test_an_mse_run_trains_and_logs_its_own_loss(tiny_config):
    """A run with ``loss = "mse"``: its logged losses are the squared error, and it fits the data."""
    result = train(tiny_config(loss="mse", epochs=3, lr=0.5, momentum=0.0, augment=False))
    log = read_log(result.run_dir)
    assert result.status == "completed"
    # the error against one-hot targets at init is near |e_y|^2 / (2K) = 1/20 for small logits;
    # cross-entropy at init is near ln 10 = 2.3
    assert 0.02 < log[0]["val_loss"] < 0.5
    assert log[-1]["train_loss"] < log[1]["train_loss"]
    ce = train(tiny_config(epochs=1))
    assert read_log(ce.run_dir)[0]["val_loss"] > 1.5
