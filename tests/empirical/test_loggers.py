"""The sweep's logging hook (TensorBoard event files, read back) and running runs' progress."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from initmem.empirical.loggers import event_files
from initmem.empirical.runfolder import lock_is_held, read_log
from initmem.empirical.sweep import (
    SweepError,
    prepare_sweep,
    read_manifest,
    run_sweep,
    sweep_status,
)

LOGGED = """
name = "logged"
[base]
dataset = "cifar10-fixture"
data_dir = "{data}"
train_size = 8
val_size = 4
batch_size = 4
width = 0.0625
epochs = 2
device = "cpu"
[grid]
alpha = [0.5, 2.0]
[sweep]
logger = "{logger}"
"""


def _write(tmp_path, logger="tensorboard"):
    from initmem.empirical.data import write_cifar10_fixture

    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(LOGGED.format(data=tmp_path / "data", logger=logger)))
    return path


def test_tensorboard_logger_writes_one_event_file_per_run_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "out"
    status = run_sweep(_write(tmp_path), out, workers=1, progress=False)
    assert (status.completed, status.failed) == (2, 0), status.failures
    for run in read_manifest(out):
        run_dir = run.run_dir(out)
        files = event_files(run_dir)
        assert len(files) == 1
        events = EventAccumulator(str(files[0].parent), size_guidance={"scalars": 0})
        events.Reload()
        log = read_log(run_dir)
        for key in ("test_acc", "train_loss", "weight_norm"):
            scalars = events.Scalars(key)
            expected = [(r["step"], r[key]) for r in log if np.isfinite(r[key])]
            assert [s.step for s in scalars] == [step for step, _ in expected]
            np.testing.assert_allclose(
                [s.value for s in scalars], [v for _, v in expected], rtol=1e-6
            )
        layer = next(iter(log[-1]["layers"]))
        last = events.Scalars(f"layers/{layer}/weight_norm")[-1]
        assert last.step == log[-1]["step"]
        assert last.value == pytest.approx(log[-1]["layers"][layer]["weight_norm"], rel=1e-6)
    # a rerun trains nothing and writes no second event file
    run_sweep(_write(tmp_path), out, workers=1, progress=False)
    assert all(len(event_files(r.run_dir(out))) == 1 for r in read_manifest(out))


def test_an_unknown_logger_fails_before_any_run(tmp_path):
    with pytest.raises(SweepError, match="logger must be one of"):
        run_sweep(_write(tmp_path, logger="mlflow"), tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "runs").exists() or not any(
        (tmp_path / "out" / "runs").iterdir()
    )


def test_sweep_status_shows_a_running_runs_epoch_of_its_total(tmp_path, capsys):
    from initmem.cli import main
    from initmem.empirical.sweep import SweepSpec

    out = tmp_path / "out"
    runs = prepare_sweep(SweepSpec.from_file(_write(tmp_path)), out)
    run_dir = runs[0].run_dir(out)
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"epoch": e, "step": 2 * e, "test_acc": 0.1}) for e in (0, 1)]
    (run_dir / "log.jsonl").write_text("\n".join(lines) + "\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from initmem.empirical.runfolder import run_lock\n"
            f"with run_lock({str(run_dir)!r}):\n    print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        deadline = time.monotonic() + 10
        while not lock_is_held(run_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        status = sweep_status(out)
        assert status.running == 1
        assert status.progress == ((runs[0].hash, runs[0].variant, 1, 2),)
        assert main(["sweep", "status", str(out)]) == 0
        assert f"running {runs[0].hash} ({runs[0].variant}): epoch 1 / 2" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()


def test_a_logger_broken_in_the_workers_is_named_and_a_rerun_writes_the_missing_files(
    tmp_path, monkeypatch
):
    """Issue 37, 8: TensorBoard failing in the workers only left the sweep without event files and
    without a word. Now a named warning says so and the driver writes them; a finished run without
    its event file (deleted, or a logger broken everywhere, said in a warning) gets it on a rerun."""
    pytest.importorskip("tensorboard")
    from initmem.empirical import backends, loggers, sweep, workers

    def broken(run_dir, logger="tensorboard"):
        raise ImportError("tensorboard is broken in this process")

    def in_process(tasks, *, trainer, **_):  # the local backend's outcomes, workers in this process
        for task in tasks:
            yield from workers.execute_task(task, trainer)

    monkeypatch.setattr(workers, "write_events", broken)  # the workers' logger only
    monkeypatch.setattr(backends, "get_backend", lambda name: in_process)
    out = tmp_path / "out"
    with pytest.warns(
        sweep.LoggerWarning, match=r"logger tensorboard failed in the workers of 2 runs"
    ):
        status = run_sweep(_write(tmp_path), out, progress=False)
    assert status.completed == 2
    assert all(len(event_files(r.run_dir(out))) == 1 for r in read_manifest(out))
    # the driver's logger broken too: named, and the rerun after it works writes the files
    for run in read_manifest(out):
        for path in event_files(run.run_dir(out)):
            path.unlink()
    monkeypatch.setattr(loggers, "write_events", broken)
    with pytest.warns(sweep.LoggerWarning, match="could not write the event files of 2 finished"):
        run_sweep(_write(tmp_path), out, progress=False)
    monkeypatch.undo()
    run_sweep(_write(tmp_path), out, workers=1, progress=False)
    assert all(len(event_files(r.run_dir(out))) == 1 for r in read_manifest(out))
