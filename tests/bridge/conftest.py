"""Synthetic sweep folders with known forgetting times, in the layout of docs/run-format.md.

Each pipeline is SGD without momentum at one (lr, weight_decay); its runs differ in alpha and seed. The
logged norms follow ``log|w|(t) = log n0 + log(alpha) * exp(-t / tau_norm) + noise`` for the scaled
layers, the test accuracy of alpha follows ``base - gap(alpha) * exp(-t / tau_acc)``, and the
predictions of alpha_hi disagree with alpha_lo's on a fraction ``d0 * exp(-t / tau_dis)`` of the test
set, so the bridge must recover ``tau_norm``, ``tau_acc`` and ``tau_dis``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from initmem.empirical.config import RunConfig

TRAIN_SIZE, BATCH, EPOCHS, N_TEST = 1280, 32, 30, 2000
STEPS_PER_EPOCH = TRAIN_SIZE // BATCH  # 40
LAYERS = {  # name: (numel, scale_invariant, scaled by alpha)
    "conv1.weight": (432, True, True),
    "conv2.weight": (2304, True, True),
    "bn1.weight": (16, False, True),
    "head.weight": (640, False, False),
}


@dataclass(frozen=True)
class SyntheticPipeline:
    lr: float
    weight_decay: float
    tau_norm: float  # steps
    tau_acc: float  # steps
    tau_dis: float  # steps


def known_pipelines(factor: float = 4.0) -> list[SyntheticPipeline]:
    """Pipelines whose norm forgetting time is ``factor / (lr * weight_decay)`` steps."""
    out = []
    for lr, wd in [(0.05, 0.2), (0.1, 0.2), (0.1, 0.1), (0.2, 0.2), (0.05, 0.1)]:
        tau = factor / (lr * wd)
        out.append(SyntheticPipeline(lr, wd, tau_norm=tau, tau_acc=tau, tau_dis=0.8 * tau))
    return out


def write_synthetic_sweep(
    root: Path,
    pipelines: list[SyntheticPipeline],
    alphas=(0.5, 2.0),
    seeds=(0, 1, 2),
    noise: float = 0.003,
) -> Path:
    """Write run folders, manifest.json and sweep.toml under ``root``; return ``root``."""
    rng = np.random.default_rng(1234)
    manifest = []
    epochs = np.arange(EPOCHS + 1)
    steps = epochs * STEPS_PER_EPOCH
    labels = rng.integers(0, 10, N_TEST).astype(np.int16)
    for p in pipelines:
        for seed in seeds:
            n0 = {name: 1.0 + 0.5 * rng.random() for name in LAYERS}
            for alpha in alphas:
                cfg = RunConfig(
                    dataset="synthetic", train_size=TRAIN_SIZE, val_size=1000, test_size=N_TEST,
                    width=0.125, alpha=alpha, optimizer="sgd", lr=p.lr, weight_decay=p.weight_decay,
                    batch_size=BATCH, epochs=EPOCHS, seed=seed, quiet=True,
                )
                run_dir = root / "runs" / cfg.hash
                run_dir.mkdir(parents=True)
                cfg = cfg.replace(out_dir=str(run_dir))
                gap = 0.1 * np.log(alpha / min(alphas)) / np.log(max(alphas) / min(alphas))
                test_acc = 0.8 - gap * np.exp(-steps / p.tau_acc) + noise * rng.standard_normal(
                    steps.size
                )
                rows, layer_rows = [], []
                for e, s, acc in zip(epochs, steps, test_acc, strict=True):
                    row = {
                        "epoch": int(e), "step": int(s), "lr": p.lr,
                        "weight_decay": p.weight_decay, "l2": 0.0,
                        "train_loss": float(np.nan if e == 0 else 1.0 / (1 + e)),
                        "train_acc": float(np.nan if e == 0 else 1 - 1 / (1 + e)),
                        "train_eval_acc": float(1 - 1 / (1 + e)),
                        "val_loss": 1.0, "val_acc": float(0.1 if e == 0 else 0.85),
                        "test_loss": 1.0, "test_acc": float(acc), "weight_norm": 10.0,
                        "dist_from_init": 0.0, "wall_time": float(e),
                    }
                    layers = {}
                    for name, (numel, invariant, scaled) in LAYERS.items():
                        log_a = np.log(alpha) if scaled else 0.0
                        log_norm = (
                            np.log(n0[name]) + log_a * np.exp(-s / p.tau_norm)
                            + noise * rng.standard_normal() * (e > 0)
                        )
                        norm = float(np.exp(log_norm))
                        layers[name] = {
                            "numel": numel, "scale_invariant": invariant, "weight_norm": norm,
                            "eff_lr": p.lr / norm**2, "dist_from_init": 0.0, "update_norm": 0.0,
                            "grad_norm": float("nan"), "grad_sq_sum": float("nan"),
                            "lr_sq_grad_sq_sum": float("nan"), "norm_sq_drift": float("nan"),
                        }
                    rows.append({**row, "layers": layers})
                    layer_rows += [{"epoch": int(e), "step": int(s), "layer": k, **v}
                                   for k, v in layers.items()]
                with (run_dir / "log.jsonl").open("w") as fh:
                    for row in rows:
                        fh.write(json.dumps(row) + "\n")
                pd.DataFrame([{k: v for k, v in r.items() if k != "layers"} for r in rows]).to_parquet(
                    run_dir / "metrics.parquet"
                )
                pd.DataFrame(layer_rows).to_parquet(run_dir / "layers.parquet")
                preds = np.repeat(labels[None], len(epochs), axis=0)
                if alpha == max(alphas):
                    for i, s in enumerate(steps):
                        k = int(round(N_TEST * 0.5 * np.exp(-s / p.tau_dis)))
                        preds[i, :k] = (labels[:k] + 1) % 10
                np.savez(run_dir / "predictions.npz", epochs=epochs.astype(np.int64),
                         test_pred=preds, test_labels=labels, best_test_pred=preds[-1])
                (run_dir / "config.json").write_text(
                    json.dumps({"hash": cfg.hash, "config": cfg.to_dict(), "initmem_version": "0"})
                )
                result = {
                    "status": "completed", "best_val_acc": 0.85, "test_acc": float(test_acc[-1]),
                    "best_epoch": EPOCHS, "final_train_acc": 0.97, "final_test_acc": float(test_acc[-1]),
                    "epochs_run": EPOCHS, "steps_run": int(steps[-1]), "diverged_step": None,
                    "reason": None, "wall_time": 1.0, "hash": cfg.hash, "run_dir": str(run_dir),
                }
                (run_dir / "result.json").write_text(json.dumps(result))
                manifest.append({"hash": cfg.hash, "variant": "synthetic", "config": cfg.to_dict()})
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "sweep.toml").write_text("# synthetic sweep written by tests/bridge/conftest.py\n")
    return root


def load_runs(sweep_dir: Path) -> pd.DataFrame:
    """The runs table of a sweep folder (``load_sweep`` once it exists, else read here)."""
    try:
        from initmem.empirical.memory import load_sweep
    except ImportError:
        load_sweep = None
    if load_sweep is not None:
        return load_sweep(sweep_dir)
    rows = []
    for entry in json.loads((Path(sweep_dir) / "manifest.json").read_text()):
        run_dir = Path(sweep_dir) / "runs" / entry["hash"]
        result = json.loads((run_dir / "result.json").read_text())
        rows.append({**entry["config"], **result, "variant": entry["variant"], "run_dir": str(run_dir)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def synthetic_sweep(tmp_path_factory) -> Path:
    return write_synthetic_sweep(tmp_path_factory.mktemp("synthetic_sweep"), known_pipelines())
