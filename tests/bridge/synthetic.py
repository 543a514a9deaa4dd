"""Synthetic sweep folders with known forgetting, in the layout of docs/run-format.md.

Each pipeline is SGD without momentum at one (lr, weight_decay); its runs differ in alpha and seed.

* ``norms="exponential"``: the scaled layers log ``log|w|(t) = log n0 + log(alpha) exp(-t / tau_norm)``
  (+ noise), so the norm memory is exactly ``exp(-t / tau_norm)``.
* ``norms="sgd"``: the BN-followed convs follow the exact SGD recursion of a scale-invariant weight,
  ``|w'|^2 = (1 - lr wd)^2 |w|^2 + lr^2 G / |w|^2`` step by step (``G`` fixed per layer), with the
  logged ``grad_sq_sum``, ``norm_sq_drift`` and ``grad_sq_unit_sum`` (G per step, summed) that this implies; the other layers stay exponential.

In both, the test accuracy of alpha is ``0.8 - gap(alpha) exp(-t / tau_acc)`` (+ noise) and the
predictions of the largest alpha disagree with the others on a fraction ``0.5 exp(-t / tau_dis)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.study.synthetic import design_of, layer_frame, write_run_logs
from initmem.empirical import runfolder
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepRun, write_sweep_folder

TRAIN_SIZE, BATCH, EPOCHS, N_TEST = 1280, 32, 30, 2000
STEPS_PER_EPOCH = TRAIN_SIZE // BATCH  # 40
#: name: (numel, scale_invariant, scaled by alpha, G = |g|^2 |w|^2 per step for the "sgd" norms)
LAYERS = {
    "conv1.weight": (432, True, True, 1.0),
    "conv2.weight": (2304, True, True, 4.0),
    "bn1.weight": (16, False, True, 0.0),
    "head.weight": (640, False, False, 0.0),
}


@dataclass(frozen=True)
class SyntheticPipeline:
    lr: float
    weight_decay: float
    tau_norm: float  # steps
    tau_acc: float  # steps
    tau_dis: float  # steps


def known_pipelines(factor: float = 4.0) -> list[SyntheticPipeline]:
    """Five pipelines whose forgetting times are ``factor / (lr * weight_decay)`` steps (x0.8 for
    the disagreement)."""
    out = []
    for lr, wd in [(0.05, 0.2), (0.1, 0.2), (0.1, 0.1), (0.2, 0.2), (0.05, 0.1)]:
        tau = factor / (lr * wd)
        out.append(SyntheticPipeline(lr, wd, tau_norm=tau, tau_acc=tau, tau_dis=0.8 * tau))
    return out


def sgd_design(settings, alphas=(1.0, 4.0), n_seeds: int = 2):
    """The synthetic design (:func:`initmem.bridge.study.synthetic.design_of`) of SGD pipelines
    ``p0, p1, ...`` at lr 0.1, batch 32 on 256 images, evaluated every 2 epochs; ``settings``:
    one ``(weight_decay, epochs)`` per pipeline, each at every alpha and seed."""
    configs, variants = [], []
    for i, (wd, epochs) in enumerate(settings):
        for alpha in alphas:
            for seed in range(n_seeds):
                configs.append(
                    RunConfig(dataset="synthetic", train_size=256, val_size=64, test_size=64,
                              width=0.125, optimizer="sgd", lr=0.1, weight_decay=wd,
                              batch_size=32, epochs=epochs, eval_every=2, alpha=alpha, seed=seed)
                )  # fmt: skip
                variants.append(f"p{i}")
    return design_of(configs, variants)


def _sgd_norms(lr, wd, grad_sq_unit, init_norm_sq, steps_total, eval_steps):
    """Exact SGD norm recursion: |w|^2 at eval_steps and per-interval grad_sq_sum, drift."""
    c2 = (1.0 - lr * wd) ** 2
    x = init_norm_sq
    norm_sq, grad_sum, drift = [x], [np.nan], [np.nan]
    g_sum = d = 0.0
    eval_set = set(int(s) for s in eval_steps[1:])
    for step in range(1, steps_total + 1):
        grad_sq = grad_sq_unit / x
        g_sum += grad_sq
        d = c2 * d + lr * lr * grad_sq
        x = c2 * x + lr * lr * grad_sq
        if step in eval_set:
            norm_sq.append(x)
            grad_sum.append(g_sum)
            drift.append(d)
            g_sum = d = 0.0
    return np.array(norm_sq), np.array(grad_sum), np.array(drift)


def write_synthetic_sweep(
    root: Path,
    pipelines: list[SyntheticPipeline],
    alphas=(0.5, 2.0),
    seeds=(0, 1, 2),
    noise: float = 0.003,
    norms: str = "exponential",
    diverged: tuple = (),
) -> Path:
    """Write run folders, manifest.json and sweep.toml under ``root``; return ``root``.
    ``diverged``: ``(pipeline index, alpha)`` pairs whose runs diverged in their first epoch (they
    log the evaluation at init only)."""
    rng = np.random.default_rng(1234)
    root = Path(root)
    runs = []
    epochs = np.arange(EPOCHS + 1)
    steps = epochs * STEPS_PER_EPOCH
    labels = rng.integers(0, 10, N_TEST).astype(np.int16)
    for p in pipelines:
        for seed in seeds:
            n0 = {name: 1.0 + 0.5 * rng.random() for name in LAYERS}
            for alpha in alphas:
                cfg = RunConfig(
                    dataset="synthetic",
                    train_size=TRAIN_SIZE,
                    val_size=1000,
                    test_size=N_TEST,
                    width=0.125,
                    alpha=alpha,
                    optimizer="sgd",
                    lr=p.lr,
                    weight_decay=p.weight_decay,
                    batch_size=BATCH,
                    epochs=EPOCHS,
                    seed=seed,
                    quiet=True,
                )
                run_dir = root / "runs" / cfg.hash
                run_dir.mkdir(parents=True)
                cfg = cfg.replace(out_dir=str(run_dir.resolve()))
                layers = _layer_table(p, alpha, n0, steps, epochs, rng, noise, norms)
                span = np.log(max(alphas) / min(alphas))
                gap = 0.1 * np.log(alpha / min(alphas)) / span if span > 0 else 0.0
                test_acc = 0.8 - gap * np.exp(-steps / p.tau_acc)
                test_acc = test_acc + noise * rng.standard_normal(steps.size)
                metrics = pd.DataFrame(
                    {
                        "epoch": epochs,
                        "step": steps,
                        "lr": p.lr,
                        "weight_decay": p.weight_decay,
                        "l2": 0.0,
                        "train_loss": np.where(epochs == 0, np.nan, 1.0 / (1 + epochs)),
                        "train_acc": np.where(epochs == 0, np.nan, 1 - 1 / (1 + epochs)),
                        "train_eval_acc": 1 - 1 / (1 + epochs),
                        "val_loss": 1.0,
                        "val_acc": np.where(epochs == 0, 0.1, 0.85),
                        "test_loss": 1.0,
                        "test_acc": test_acc,
                        "weight_norm": 10.0,
                        "dist_from_init": 0.0,
                        "norm_sq_decay": np.where(
                            epochs == 0,
                            np.nan,
                            (1 - p.lr * p.weight_decay) ** (2 * STEPS_PER_EPOCH),
                        ),
                        "wall_time": epochs.astype(float),
                    }
                )
                early = (pipelines.index(p), alpha) in diverged
                if early:  # the evaluation at init only
                    metrics, layers = metrics[metrics["epoch"] == 0], layers[layers["epoch"] == 0]
                _write_run(run_dir, cfg, metrics, layers)
                preds = np.repeat(labels[None], len(epochs), axis=0)
                if alpha == max(alphas):
                    for i, s in enumerate(steps):
                        k = int(round(N_TEST * 0.5 * np.exp(-s / p.tau_dis)))
                        preds[i, :k] = (labels[:k] + 1) % 10
                if early:
                    preds = preds[:1]
                np.savez(
                    run_dir / "predictions.npz",
                    epochs=epochs[: len(preds)].astype(np.int64),
                    test_pred=preds,
                    test_labels=labels,
                    best_test_pred=preds[-1],
                )
                result = runfolder.RunResult.completed(
                    run_dir,
                    cfg.hash,
                    test_acc=test_acc[-1],
                    epochs_run=EPOCHS,
                    steps_run=steps[-1],
                    best_val_acc=0.85,
                    wall_time=1.0,
                )
                if early:
                    result = dataclasses.replace(
                        result, status="diverged", epochs_run=0, steps_run=5, diverged_step=5,
                        reason="non-finite training loss (nan)",
                    )  # fmt: skip
                runfolder.write_result(run_dir, result)
                runs.append(SweepRun(cfg.hash, "synthetic", cfg))
    write_sweep_folder(root, "# synthetic sweep written by tests/bridge/synthetic.py\n", runs)
    return root


def _layer_table(p, alpha, n0, steps, epochs, rng, noise, norms) -> pd.DataFrame:
    frames = []
    for name, (numel, invariant, scaled, grad_sq_unit) in LAYERS.items():
        log_a = np.log(alpha) if scaled else 0.0
        grad_sum = drift = unit_sum = np.full(steps.size, np.nan)
        if norms == "sgd" and invariant:
            unit_sum = np.concatenate([[np.nan], grad_sq_unit * np.diff(steps)])
            init = (n0[name] * np.exp(log_a)) ** 2
            norm_sq, grad_sum, drift = _sgd_norms(
                p.lr, p.weight_decay, grad_sq_unit, init, int(steps[-1]), steps
            )
            norm = np.sqrt(norm_sq)
        else:
            wiggle = noise * rng.standard_normal(steps.size) * (epochs > 0)
            norm = np.exp(np.log(n0[name]) + log_a * np.exp(-steps / p.tau_norm) + wiggle)
        frames.append(
            layer_frame(
                epochs,
                steps,
                name,
                numel,
                invariant,
                norm,
                p.lr,
                grad_norm=np.sqrt(grad_sum / STEPS_PER_EPOCH),
                grad_sq_sum=grad_sum,
                lr_sq_grad_sq_sum=p.lr**2 * grad_sum,
                norm_sq_drift=drift,
                grad_sq_unit_sum=unit_sum,
            )
        )
    return pd.concat(frames, ignore_index=True).sort_values(["epoch", "layer"], ignore_index=True)


def _write_run(run_dir: Path, cfg: RunConfig, metrics: pd.DataFrame, layers: pd.DataFrame) -> None:
    write_run_logs(run_dir, cfg, metrics, layers)
