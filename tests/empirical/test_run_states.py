"""The states of a run folder and what each command does in each (docs/run-format.md): a damaged
result is never trusted, a damaged checkpoint or manifest is one line naming the file and the fix, one
process at a time trains a folder, and a stop signal leaves a folder that resumes to the same run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from initmem.cli import EXIT_BUSY, interrupt_on, main
from initmem.empirical.memory import spread_table
from initmem.empirical.runfolder import (
    DamagedFileError,
    DamagedRunWarning,
    RunBusyError,
    hold_run,
    lock_is_held,
    read_log,
    read_result,
    result_problem,
    run_lock,
    run_state,
)
from initmem.empirical.sweep import run_sweep, sweep_status
from initmem.empirical.tables import load_sweep
from initmem.empirical.trainer import train
from tests.empirical.fake_trainer import FAKE
from tests.empirical.test_memory import make_sweep
from tests.empirical.test_sweep import REPO, journal, write_sweep

GOOD = {
    "status": "completed",
    "best_val_acc": 0.5,
    "test_acc": 0.5,
    "best_epoch": 1,
    "final_train_acc": 0.9,
    "final_test_acc": 0.5,
    "epochs_run": 1,
    "steps_run": 4,
    "diverged_step": None,
    "reason": None,
    "wall_time": 1.0,
    "hash": "0123456789abcdef",
    "run_dir": "runs/x",
}


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({}, "status None is not one of ['completed', 'diverged']"),
        (GOOD | {"status": "done"}, "status 'done' is not one of"),
        ({"status": "completed"}, "no test_acc"),
        (GOOD | {"test_acc": "0.5"}, "test_acc is '0.5', not an integer or a number"),
        (GOOD | {"test_acc": 1.5}, "test_acc is 1.5, not a fraction in [0, 1]"),
        (GOOD | {"test_acc": float("nan")}, "not a fraction"),
        (GOOD | {"epochs_run": True}, "epochs_run is True, not an integer"),
        ([1, 2], "a JSON list, not an object"),
    ],
)
def test_result_schema_names_the_problem(values, problem):
    assert problem in result_problem(values)


def test_result_schema_accepts_what_trainers_write():
    assert result_problem(GOOD) is None and result_problem(GOOD, complete=True) is None
    diverged = GOOD | {"status": "diverged", "test_acc": float("nan"), "diverged_step": 3}
    assert result_problem(diverged) is None
    assert result_problem({"status": "completed", "test_acc": 0.3}) is None  # a custom trainer's
    assert "no best_val_acc" in result_problem(
        {"status": "completed", "test_acc": 0.3}, complete=True
    )


def _damage(sweep: Path, text: str, index: int = 0) -> Path:
    path = sorted(sweep.glob("runs/*/result.json"))[index]
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", ["{}", '{"status": "bogus", "test_acc": 0.5}', '{"status": "comp'])
def test_damaged_result_is_listed_skipped_and_retrained(tmp_path, capsys, text):
    sweep = make_sweep(tmp_path / "sweep")
    path = _damage(sweep, text)
    run_dir = path.parent
    assert run_state(run_dir) == "damaged"
    with pytest.raises(DamagedFileError, match="result.json is damaged"):
        read_result(run_dir)

    status = sweep_status(sweep)
    assert (status.completed, status.damaged) == (11, 1)
    ((hash_, _, damage),) = status.damages
    assert (
        hash_ == run_dir.name and str(path) in damage and "`initmem sweep run` trains it" in damage
    )

    assert main(["sweep", "status", str(sweep)]) == 0
    printed = capsys.readouterr().out
    assert "damaged   1" in printed and f"damaged {run_dir.name} (" in printed

    with pytest.warns(DamagedRunWarning, match=f"skipping damaged run {run_dir.name}"):
        runs = load_sweep(sweep)
    assert (runs["status"] == "damaged").sum() == 1
    spread = spread_table(runs, n_boot=10).set_index("variant")
    variant = runs.loc[runs["hash"] == run_dir.name, "variant"].item()
    assert spread.loc[variant, "n_runs"] == 5  # counted out, not as a completed run

    if text == "{}":  # the report (figures: a few seconds) once
        assert (
            main(
                [
                    "report",
                    str(sweep),
                    "--n-boot",
                    "10",
                    "--out",
                    str(tmp_path / "r"),
                    "--no-groups",
                ]
            )
            == 0
        )
        err = capsys.readouterr().err
        assert err.count(f"warning: skipping damaged run {run_dir.name}") == 1  # once, one line


SMALL = """
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 3
[grid]
alpha = [0.5, 2.0]
"""


def test_sweep_run_trains_a_damaged_run_again(tmp_path):
    sweep_file = write_sweep(tmp_path, SMALL)
    out = tmp_path / "out"
    run_sweep(sweep_file, out, trainer=FAKE, workers=1, progress=False)
    path = _damage(out, "{}", index=1)
    assert sweep_status(out).damaged == 1
    status = run_sweep(sweep_file, out, trainer=FAKE, workers=1, progress=False)  # its worker warns
    assert status.damaged == 0 and status.done == status.total
    assert json.loads(path.read_text())["status"] == "completed"
    assert journal(path.parent)[-1] == "done" and len(journal(path.parent)) == 4  # trained twice


def test_damaged_manifest_says_to_update(tmp_path, capsys):
    sweep_file = write_sweep(tmp_path, SMALL)
    out = tmp_path / "out"
    run_sweep(sweep_file, out, trainer=FAKE, workers=1, progress=False)
    manifest = out / "manifest.json"
    manifest.write_text(manifest.read_text()[:60])
    for argv in (["sweep", "status", str(out)], ["report", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {manifest} is damaged (") and err.count("\n") == 1
        assert f"initmem sweep run {out / 'sweep.toml'} --out {out} --update" in err
    args = ["sweep", "run", str(out / "sweep.toml"), "--out", str(out), "--update"]
    assert main([*args, "--trainer", FAKE, "--quiet", "--no-predictions"]) == 0
    assert sweep_status(out).done == 2  # the runs already finished are kept


# ------------------------------------------------------------------------------ one owner at a time
def test_a_held_run_folder_is_busy_naming_its_holder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from initmem.empirical.runfolder import hold_run\n"
            f"with hold_run({str(run_dir)!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusyError, match=f"pid {holder.pid}"):
            with hold_run(run_dir):
                pass
        argv = ["train", "--set", "dataset=cifar10-fixture", "--set", "batch_size=4"]
        assert main([*argv, "--out", str(run_dir)]) == EXIT_BUSY == RunBusyError.exit_status == 3
        err = capsys.readouterr().err
        assert err.startswith(f"error: {run_dir} is being trained by another process (")
        assert f"pid {holder.pid} since" in err and err.count("\n") == 1
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with hold_run(run_dir), run_lock(run_dir) as again:  # free now; re-entrant in one process
        assert again and lock_is_held(run_dir)
    assert not lock_is_held(run_dir)


TRAIN = (
    "import sys\nfrom initmem.cli import main\n"
    "sys.exit(main(['train', '--config', sys.argv[1], '--out', sys.argv[2], '--quiet']))"
)


def test_two_train_processes_on_one_folder(tmp_path, fixture_data_dir):
    """Two ``initmem train`` at once on one --out: one trains, the other exits 3 (or, if it started
    after the first finished, reports the result); every evaluation is logged once."""
    config = tmp_path / "run.toml"
    config.write_text(
        f'dataset = "cifar10-fixture"\ndata_dir = "{fixture_data_dir}"\nwidth = 0.0625\n'
        "batch_size = 4\nepochs = 3\nlr = 0.05\ndevice = 'cpu'\ntrack_grad_norms = false\n"
    )
    out = tmp_path / "run"
    env = os.environ | {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TRAIN, str(config), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    codes = sorted(p.wait(timeout=300) for p in procs)
    errors = [p.stderr.read() for p in procs]
    assert codes in ([0, 0], [0, 3]), errors
    if codes == [0, 3]:
        assert any("is being trained by another process" in e for e in errors)
    assert [r["epoch"] for r in read_log(out)] == [0, 1, 2, 3]
    assert read_result(out, complete=True)["epochs_run"] == 3


# ------------------------------------------------------------------------------ damaged checkpoint
def test_damaged_last_pt_names_the_file_and_the_fix(tiny_config, capsys, single_thread):
    config = tiny_config(epochs=1)
    train(config)
    run_dir = Path(config.out_dir)
    (run_dir / "result.json").unlink()
    (run_dir / "last.pt").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(DamagedFileError, match="last.pt is damaged"):
        train(config)
    argv = ["train", "--resume", "--out", str(run_dir)]
    for field, value in config.to_dict().items():
        if field not in ("out_dir",) and value is not None:
            argv += ["--set", f"{field}={json.dumps(value)}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run_dir / 'last.pt'} is damaged (") and err.count("\n") == 1
    assert f"remove it (rm {run_dir / 'last.pt'}) and rerun: the run restarts" in err
    assert not lock_is_held(run_dir)
    (run_dir / "last.pt").unlink()
    assert train(config).status == "completed"  # the fix works


# ------------------------------------------------------------------------------ stop signals
def test_sigterm_checkpoints_releases_and_resumes_to_the_same_run(tiny_config, single_thread):
    """SIGTERM between epochs (checkpoint_every = 2: epoch 1 not yet saved) under ``interrupt_on``:
    the run checkpoints epoch 1, frees its folder, and the resumed run logs what an uninterrupted
    one logs."""
    whole = train(tiny_config(epochs=3, checkpoint_every=2))
    config = tiny_config(epochs=3, checkpoint_every=2)

    def preempt(record):
        if record["epoch"] == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(KeyboardInterrupt) as stopped, interrupt_on(signal.SIGTERM):
        train(config, callback=preempt)
    assert stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler is given back
    assert not lock_is_held(config.out_dir) and run_state(config.out_dir) == "pending"
    import torch

    assert torch.load(Path(config.out_dir) / "last.pt", weights_only=False)["trainer"]["epoch"] == 1
    resumed = train(config)
    assert resumed.status == "completed" and resumed.epochs_run == 3

    def numbers(run_dir):
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in read_log(run_dir)]

    assert numbers(config.out_dir) == numbers(whole.run_dir)


def test_sigterm_in_the_cli_says_how_to_resume(tmp_path, capsys, monkeypatch):
    def preempted(config, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the signal stops the run first")

    monkeypatch.setattr("initmem.empirical.trainer.train", preempted)
    monkeypatch.delenv("INITMEM_DEBUG", raising=False)
    out = tmp_path / "run"
    argv = ["train", "--set", "dataset=cifar10-fixture", "--set", "batch_size=4"]
    code = main([*argv, "--out", str(out)])
    assert code == 128 + signal.SIGTERM == 143
    err = capsys.readouterr().err
    assert (
        err.startswith("interrupted by SIGTERM; resume with: initmem train") and "--resume" in err
    )
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
