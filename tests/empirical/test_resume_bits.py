"""An interrupted and resumed sweep gives the bits of an uninterrupted one (on one machine).

A run's numbers depend on its CPU thread count (the order of floating-point reductions). The local
backend gives every worker ``cpus // workers`` threads of the workers asked, and a resumed run keeps
the count it started on (``RunConfig.threads``, recorded in config.json and last.pt), so the last
run left of a resumed sweep computes as it would have in the uninterrupted one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import read_manifest, run_sweep

REPO = Path(__file__).resolve().parents[2]
INTERRUPTING = "tests.empirical.test_resume_bits:interrupted_train"

SWEEP = """
name = "bits"
[base]
dataset = "cifar10-fixture"
data_dir = "{data}"
train_size = 8
val_size = 4
batch_size = 4
width = 0.0625
epochs = 3
lr = 0.05
momentum = 0.9
device = "cpu"
[grid]
alpha = [0.5, 1.0, 2.0]
"""
#: The run that the first attempt stops after its first epoch.
STOPPED_ALPHA = 2.0


def interrupted_train(config: RunConfig):
    """The trainer, stopped (an exception after the checkpoint of epoch 1) for alpha = STOPPED_ALPHA;
    the other runs train to the end."""
    from initmem.empirical.trainer import train

    def stop(record: dict) -> None:
        if config.alpha == STOPPED_ALPHA and record["epoch"] == 1:
            raise RuntimeError("stopped after epoch 1")

    return train(config, callback=stop)


def _log_lines(run_dir: Path) -> list[str]:
    """log.jsonl without the wall clock, one JSON text per evaluation (NaN compares as text)."""
    lines = []
    for line in (run_dir / "log.jsonl").read_text().splitlines():
        record = json.loads(line)
        record.pop("wall_time")
        lines.append(json.dumps(record, sort_keys=True))
    return lines


def test_an_interrupted_sweep_resumes_to_the_bits_of_an_uninterrupted_one(tmp_path, monkeypatch):
    from initmem.empirical.data import write_cifar10_fixture

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP.format(data=tmp_path / "data"))
    options = {"cpus": 2}  # two workers of one thread each, whatever this machine has
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"

    status = run_sweep(sweep, whole, workers=2, progress=False, backend_options=options)
    assert (status.completed, status.total) == (3, 3), status.failures
    status = run_sweep(
        sweep, resumed, workers=2, trainer=INTERRUPTING, progress=False, backend_options=options
    )
    assert (status.completed, status.failed) == (2, 1), status.failures
    stopped = next(r for r in read_manifest(resumed) if r.config.alpha == STOPPED_ALPHA)
    assert len(_log_lines(stopped.run_dir(resumed))) == 2  # epochs 0 and 1: stopped mid-run
    # the rerun has one run left, which once got a pool of one worker with both threads
    status = run_sweep(sweep, resumed, workers=2, progress=False, backend_options=options)
    assert (status.completed, status.failed) == (3, 0), status.failures

    runs = read_manifest(whole)
    differ = [
        r.config.alpha
        for r in runs
        if _log_lines(r.run_dir(whole)) != _log_lines(r.run_dir(resumed))
    ]
    assert differ == [], f"the logs of alpha {differ} differ"
    for run in runs:
        a, b = run.run_dir(whole), run.run_dir(resumed)
        assert len(_log_lines(a)) == 4
        with np.load(a / "predictions.npz") as pa, np.load(b / "predictions.npz") as pb:
            for key in pa.files:
                np.testing.assert_array_equal(pa[key], pb[key])
        recorded = [json.loads((d / "config.json").read_text())["config"] for d in (a, b)]
        assert recorded[0]["threads"] == recorded[1]["threads"] == 1


@pytest.mark.parametrize("threads", [0, -2, 1.5])
def test_threads_must_be_a_positive_integer(threads):
    from initmem.empirical.config import ConfigError

    with pytest.raises(ConfigError, match="threads"):
        RunConfig.from_dict({"threads": threads})


def test_threads_is_recorded_but_not_hashed():
    base = RunConfig()
    assert base.replace(threads=3).hash == base.hash
    assert base.replace(threads=3).to_dict()["threads"] == 3
