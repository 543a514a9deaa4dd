"""Synthetic architecture sweeps with a planted answer, in the layout of docs/run-format.md.

One cell per (model, pipeline) of :class:`Cell`: the test accuracy of the largest alpha is
``gap_pp`` points below the smallest at the end (+ seed noise ``noise_pp``, independent per run); the
scale-invariant layers (models with ``invariant``), and the joint ``residual_stream`` entry of a
pre-LN model (``stream``), log ``log|w|(t) = log n0 + log(alpha) exp(-t / tau_norm)``, so the norm
memory is ``exp(-t / tau_norm)``; the other layers carry no invariance. The
pre-registered predictions are written as ``initmem sweep run`` writes them
(``predictions/index.csv`` and per pipeline ``predictions.csv``), with the planted ``predicted_steps``
for the deciding group. Numpy only, no training.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.preregister import prediction_folders, sweep_pipelines
from initmem.bridge.study.synthetic import layer_frame, write_run_logs
from initmem.empirical import runfolder
from initmem.empirical.config import RESIDUAL_STREAM_LAYER, RunConfig
from initmem.empirical.sweep import SweepRun, write_sweep_folder

TRAIN_SIZE, BATCH, EPOCHS, N_TEST = 1280, 32, 30, 400
STEPS_PER_EPOCH = TRAIN_SIZE // BATCH  # 40; 1200 steps in all


@dataclass(frozen=True)
class Cell:
    model: str
    variant: str
    lr: float
    weight_decay: float
    invariant: bool  # the model has scale-invariant weights
    gap_pp: float  # planted end-of-run accuracy gap between the alphas
    noise_pp: float  # seed-to-seed noise of each run's accuracy
    tau_norm: float  # steps (only for invariant models)
    predicted_steps: float  # the deciding group's planted prediction
    stream: bool = False  # a pre-LN model: the joint residual_stream norm carries the memory


def write_architecture_sweep(
    root: Path, cells: list[Cell], alphas=(1.0, 8.0), seeds=(0, 1, 2, 3), *, predictions=True
) -> Path:
    """Write run folders, manifest.json, sweep.toml and (with ``predictions``) the predictions."""
    rng = np.random.default_rng(7)
    root = Path(root)
    runs = []
    epochs = np.arange(EPOCHS + 1)
    steps = epochs * STEPS_PER_EPOCH
    labels = rng.integers(0, 10, N_TEST).astype(np.int16)
    for cell in cells:
        for seed in seeds:
            n0 = 1.0 + 0.5 * rng.random()
            for alpha in alphas:
                cfg = RunConfig(
                    dataset="synthetic",
                    model=cell.model,
                    train_size=TRAIN_SIZE,
                    val_size=200,
                    test_size=N_TEST,
                    width=0.125,
                    alpha=alpha,
                    optimizer="sgd",
                    lr=cell.lr,
                    weight_decay=cell.weight_decay,
                    batch_size=BATCH,
                    epochs=EPOCHS,
                    seed=seed,
                    quiet=True,
                )
                run_dir = root / "runs" / cfg.hash
                run_dir.mkdir(parents=True)
                cfg = cfg.replace(out_dir=str(run_dir.resolve()))
                share = math.log(alpha / min(alphas)) / math.log(max(alphas) / min(alphas))
                acc = 0.8 - share * cell.gap_pp / 100 + cell.noise_pp / 100 * rng.standard_normal()
                test_acc = np.full(steps.size, acc)
                layers = _layers(cell, alpha, n0, steps, epochs)
                _write_run(run_dir, cfg, steps, epochs, test_acc, layers)
                preds = labels.copy()
                flip = int(round(N_TEST * share * cell.gap_pp / 100))
                preds[:flip] = (labels[:flip] + 1) % 10
                np.savez(
                    run_dir / "predictions.npz",
                    epochs=epochs.astype(np.int64),
                    test_pred=np.repeat(preds[None], len(epochs), axis=0),
                    test_labels=labels,
                    best_test_pred=preds,
                )
                result = runfolder.RunResult.completed(
                    run_dir,
                    cfg.hash,
                    test_acc=acc,
                    epochs_run=EPOCHS,
                    steps_run=steps[-1],
                    best_val_acc=0.85,
                    wall_time=2.0,
                )
                runfolder.write_result(run_dir, result)
                runs.append(SweepRun(cfg.hash, cell.variant, cfg))
    source = "# synthetic sweep (tests/bridge/architecture_synthetic.py)\n"
    write_sweep_folder(root, source, runs)
    if predictions:
        _write_predictions(root, runs, {c.variant: c for c in cells})
    return root


def _layers(cell: Cell, alpha, n0, steps, epochs) -> pd.DataFrame:
    names = {"block.weight": (2304, cell.invariant), "head.weight": (640, False)}
    if (
        cell.stream
    ):  # the joint entry the trainer logs for a pre-LN model (not per-tensor invariant)
        names[RESIDUAL_STREAM_LAYER] = (2304, False)
    frames = []
    for name, (numel, invariant) in names.items():
        decays = invariant or name == RESIDUAL_STREAM_LAYER
        decay = np.exp(-steps / cell.tau_norm) if decays else np.ones(steps.size)
        norm = np.exp(np.log(n0) + np.log(alpha) * decay)
        frames.append(
            layer_frame(epochs, steps, name, numel, invariant, norm, cell.lr, grad_norm=0.0)
        )
    return pd.concat(frames, ignore_index=True).sort_values(["epoch", "layer"], ignore_index=True)


def _write_run(run_dir, cfg, steps, epochs, test_acc, layers) -> None:
    metrics = pd.DataFrame(
        {
            "epoch": epochs,
            "step": steps,
            "lr": cfg.lr,
            "weight_decay": cfg.weight_decay,
            "l2": 0.0,
            "train_loss": np.where(epochs == 0, np.nan, 0.01),
            "train_acc": np.where(epochs == 0, np.nan, 1.0),
            "train_eval_acc": 1.0,
            "val_loss": 1.0,
            "val_acc": 0.85,
            "test_loss": 1.0,
            "test_acc": test_acc,
            "weight_norm": 10.0,
            "dist_from_init": 0.0,
            "norm_sq_decay": 1.0,
            "wall_time": epochs.astype(float),
        }
    )
    write_run_logs(run_dir, cfg, metrics, layers)


def _write_predictions(root: Path, runs: list[SweepRun], cells: dict[str, Cell]) -> None:
    """The files of ``preregister_sweep``, with the planted times in place of the theory's."""
    pipelines = sweep_pipelines(runs)
    folders = prediction_folders(pipelines)
    index = []
    for p in pipelines:
        cell = cells[p.variant]
        config = p.config.replace(alpha=p.alpha)
        has_group = {"scale_invariant": cell.invariant, "residual_stream": cell.stream}
        deciding = next((g for g, has in has_group.items() if has), "other")
        rows = []
        for group in ("scale_invariant", "residual_stream", "head", "other"):
            has = has_group.get(group, True)
            steps = cell.predicted_steps if group == deciding else (math.inf if has else math.nan)
            rows.append(
                {
                    "group": group,
                    "parameters": 2304 if group != "head" else 640,
                    "tensors": 1 if has else 0,
                    "mechanism": f"planted ({group})",
                    "steps": steps,
                    "epochs": steps / STEPS_PER_EPOCH,
                    "memory_fraction": 0.25 if group == "other" else math.nan,
                    "law": "planted",
                }
            )
        folder = root / "predictions" / folders[p.pipeline]
        folder.mkdir(parents=True)
        pd.DataFrame(rows).to_csv(folder / "predictions.csv", index=False)
        (folder / "predictions.json").write_text(
            json.dumps({"alpha": p.alpha, "hash": config.hash, "config": config.to_dict()})
        )
        index.append(
            {
                "pipeline": p.pipeline,
                "variant": p.variant,
                "alpha": p.alpha,
                "hash": config.hash,
                "folder": folders[p.pipeline],
                "note": "",
                "written_at": "2026-01-01T00:00:00Z",
                "runs_started_before": 0,  # written before any run started: pre-registered
                "first_run_started_at": None,
            }
        )
    pd.DataFrame(index).to_csv(root / "predictions" / "index.csv", index=False)
