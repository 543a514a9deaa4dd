"""Fake trainers for the sweep machinery's tests, importable by spawned workers as
``tests.empirical.fake_trainer:<name>``.

This module imports no torch (nor any test module that does): a sweep worker imports its trainer's
module, and a worker that imported torch for a fake run spent 3.6 s of CPU on it, against 0.2 s.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from initmem.empirical.config import RunConfig
from initmem.empirical.runfolder import write_atomic

FAKE = "tests.empirical.fake_trainer:fake_train"


def fake_train(config: RunConfig) -> dict:
    """A resumable fake run of ``config.epochs`` steps, ``FAKE_STEP_S`` seconds each.

    Appends ``start <step>`` and ``done`` to ``journal.txt``; checkpoints its step in ``last.pt``;
    raises for ``lr == 0.5``; kills its process for ``lr == 0.125``; reports ``diverged`` for ``alpha >= 100``; test accuracy 0.5 + seed/100
    - |log2 alpha| / 10 (0 at least).
    """
    run_dir = Path(config.out_dir)
    checkpoint = run_dir / "last.pt"
    step = int(checkpoint.read_text()) if checkpoint.is_file() else 0
    with open(run_dir / "journal.txt", "a") as fh:
        fh.write(f"start {step} pid {os.getpid()}\n")
    if config.lr == 0.5:
        raise RuntimeError("fake failure for lr = 0.5")
    if config.lr == 0.125:
        os._exit(3)  # the worker process dies (as if killed, or out of memory)
    delay = float(os.environ.get("FAKE_STEP_S", "0"))
    while step < config.epochs:
        time.sleep(delay)
        step += 1
        write_atomic(checkpoint, str(step))
    status = "diverged" if config.alpha >= 100 else "completed"
    result = {
        "status": status,
        "test_acc": max(0.0, 0.5 + config.seed / 100 - abs(math.log2(config.alpha)) / 10),
        "best_val_acc": 0.5,
        "final_train_acc": 1.0,
        "steps_run": step,
        "env_gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "env_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    write_atomic(run_dir / "result.json", json.dumps(result))
    with open(run_dir / "journal.txt", "a") as fh:
        fh.write("done\n")
    return result


def fake_train_no_result_file(config: RunConfig) -> dict:
    """A trainer that returns its result instead of writing result.json."""
    return {"test_acc": config.alpha / 10}


def torch_threads_train(config: RunConfig) -> dict:
    """A trainer that imports torch itself (as the real one does, with the worker's first task) and
    returns 1 / torch's intra-op thread count as its ``test_acc``."""
    import torch

    return {"test_acc": 1.0 / torch.get_num_threads()}
