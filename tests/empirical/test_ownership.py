"""Whoever trains a run folder holds its lock, packed or not (docs/run-format.md): ``train``,
``train_packed`` and ``RunSession.begin`` each refuse a folder that another thread or process is
training, naming the holder, and nothing of the refused call reaches any folder."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from initmem.cli import EXIT_BUSY, main
from initmem.empirical.packing import train_packed
from initmem.empirical.runfolder import RunBusyError, lock_is_held, read_log, read_result
from initmem.empirical.trainer import RunSession, train

pytestmark = pytest.mark.usefixtures("single_thread")


def in_thread(work):
    """Run ``work()`` on another thread; return what it returned or the exception it raised."""
    outcome = {}

    def target():
        try:
            outcome["value"] = work()
        except Exception as err:  # noqa: BLE001 - handed back to the test
            outcome["value"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=300)
    return outcome["value"]


def test_train_packed_refuses_a_folder_that_train_is_training(tiny_config):
    """While ``train(a)`` trains (its callback after epoch 1), ``train_packed([a, b])`` on another
    thread raises RunBusyError naming a and writes nothing, not even b's folder; a's log is whole."""
    a = tiny_config()
    b = a.replace(out_dir=str(Path(a.out_dir).parent / "b"), alpha=2.0)
    seen = []

    def during_training(record):
        if record["epoch"] == 1:
            seen.append(in_thread(lambda: train_packed([a, b])))

    result = train(a, callback=during_training)
    (refused,) = seen
    assert isinstance(refused, RunBusyError), refused
    assert str(refused).startswith(f"{a.out_dir} is being trained by another process (")
    assert f"pid {os.getpid()} since" in str(refused)
    assert not Path(b.out_dir).exists()
    assert [r["epoch"] for r in read_log(a.out_dir)] == [0, 1, 2]
    assert result.epochs_run == 2 and not lock_is_held(a.out_dir)


def test_train_refuses_a_folder_that_a_packed_session_holds(tiny_config, tmp_path, capsys):
    """Sessions opened for packing (``RunSession.begin``, here on another thread) hold their folders
    until they finish: ``train`` and ``initmem train --resume`` (exit 3, one line naming this process)
    are refused; once the packed runs finish, each folder holds one whole run."""
    from initmem.empirical.packing import train_sessions

    a = tiny_config()
    b = a.replace(out_dir=str(tmp_path / "b"), alpha=2.0)
    sessions = in_thread(lambda: [RunSession.begin(c) for c in (a, b)])
    with pytest.raises(RunBusyError, match=f"pid {os.getpid()} since"):
        train(a)
    config_file = tmp_path / "c.toml"
    fields = ("dataset", "data_dir", "width", "batch_size", "epochs", "lr", "momentum")
    config_file.write_text("".join(f"{k} = {json.dumps(getattr(a, k))}\n" for k in fields))
    argv = ["train", "--config", str(config_file), "--out", a.out_dir, "--resume", "--quiet"]
    assert main(argv) == EXIT_BUSY == 3
    err = capsys.readouterr().err
    assert err.startswith(f"error: {a.out_dir} is being trained by another process (")
    assert f"pid {os.getpid()} since" in err and err.count("\n") == 1
    train_sessions(sessions)
    for config in (a, b):
        assert [r["epoch"] for r in read_log(config.out_dir)] == [0, 1, 2]
        assert read_result(config.out_dir, complete=True)["epochs_run"] == 2
        assert not lock_is_held(config.out_dir)
    assert [r.epochs_run for r in train_packed([a, b])] == [2, 2]  # finished, the locks free


def test_a_refused_session_releases_nothing_it_did_not_take(tiny_config):
    """A busy folder stops ``train_packed`` before its first folder is touched, and the locks it had
    taken are released (a second call succeeds once the holder is gone)."""
    a = tiny_config()
    b = a.replace(out_dir=str(Path(a.out_dir).parent / "b2"), alpha=2.0)
    holder = RunSession.begin(b)
    try:
        refused = in_thread(lambda: train_packed([a, b]))
        assert isinstance(refused, RunBusyError) and str(b.out_dir) in str(refused)
        assert not (Path(a.out_dir) / "config.json").exists()
        assert not lock_is_held(a.out_dir)
    finally:
        holder.close()
    results = train_packed([a, b])
    assert [r.epochs_run for r in results] == [2, 2]
