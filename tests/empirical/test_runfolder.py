"""The run folder module against files written by hand: atomic writes, tolerant reads, state, resume.

The trainer's round trip (a real run written and read back) is tested in test_train.py; here each
reader and writer is checked on its own, with the expected content built independently.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from initmem.empirical import runfolder
from initmem.empirical.runfolder import (
    RunFiles,
    atomic_file,
    clear_failure,
    failure_message,
    load_result,
    lock_taken_at,
    read_layers,
    read_log,
    read_metrics,
    read_predictions,
    read_start_step,
    run_lock,
    run_state,
    write_atomic,
    write_failure,
    write_result,
)


def record(epoch: int) -> dict:
    return {
        "epoch": epoch,
        "step": 10 * epoch,
        "test_acc": epoch / 10,
        "layers": {"conv": {"weight_norm": 1.0 + epoch}, "head": {"weight_norm": 2.0 * epoch}},
    }


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "result.json"
    write_atomic(path, "old\n")
    with pytest.raises(RuntimeError), atomic_file(path, durable=True) as fh:
        fh.write(b"half of the new")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    write_atomic(path, "new\n")
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_the_log_reader_skips_a_line_cut_by_a_kill(tmp_path):
    lines = [json.dumps(record(e)) for e in range(3)]
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + '\n{"epoch": 3, "st')
    assert read_log(tmp_path) == [record(e) for e in range(3)]
    assert read_log(tmp_path / "absent") == []


def test_resume_after_a_kill_mid_line_keeps_the_checkpointed_records(tmp_path):
    """A run killed while appending its log resumes: the cut line and the records after the
    checkpoint's epoch are dropped (the old strict reader raised on the cut line)."""
    files = RunFiles(tmp_path)
    for epoch in range(4):
        files.append(record(epoch), np.full(5, epoch))
    with (tmp_path / "log.jsonl").open("a") as fh:
        fh.write('{"epoch": 4, "ste')
    kept = RunFiles(tmp_path).reopen(last_epoch=2, n_test=5)
    assert kept == [record(e) for e in range(3)]
    assert read_log(tmp_path) == kept
    raw = np.fromfile(tmp_path / runfolder.RAW_PREDICTIONS, dtype="<i2").reshape(-1, 5)
    np.testing.assert_array_equal(raw, np.repeat(np.arange(3), 5).reshape(3, 5))


def test_tables_read_from_parquet_or_fall_back_to_the_log(tmp_path):
    files = RunFiles(tmp_path)
    for epoch in range(3):
        files.append(record(epoch))
    from_log = read_metrics(tmp_path), read_layers(tmp_path)
    files.write_tables()
    from_parquet = read_metrics(tmp_path), read_layers(tmp_path)
    for metrics, layers in (from_log, from_parquet):
        assert metrics["epoch"].tolist() == [0, 1, 2] and metrics["test_acc"].tolist() == [
            0,
            0.1,
            0.2,
        ]
        assert "layers" not in metrics
        assert layers["layer"].tolist() == ["conv", "head"] * 3
        assert layers["weight_norm"].tolist() == [1.0, 0.0, 2.0, 2.0, 3.0, 4.0]
    # tables are replaced atomically: an unreadable one is damage, not a table being rewritten
    (tmp_path / "metrics.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(
        runfolder.DamagedFileError, match="metrics.parquet is damaged .not a readable"
    ):
        read_metrics(tmp_path)
    assert read_metrics(tmp_path / "empty") is None and read_layers(tmp_path / "empty") is None


def test_predictions_packed_and_read_back_by_key(tmp_path):
    files = RunFiles(tmp_path)
    labels = np.arange(6) % 3
    for epoch in range(2):
        files.append(record(epoch), (labels + epoch) % 3)
    files.write_predictions(labels, best_test_pred=labels)
    everything = read_predictions(tmp_path)
    assert sorted(everything) == ["best_test_pred", "epochs", "test_labels", "test_pred"]
    np.testing.assert_array_equal(everything["test_pred"], [labels, (labels + 1) % 3])
    np.testing.assert_array_equal(everything["epochs"], [0, 1])
    some = read_predictions(tmp_path, keys=("best_test_pred", "not_saved"))
    assert list(some) == ["best_test_pred"]
    with pytest.raises(FileNotFoundError):
        read_predictions(tmp_path / "absent")


def test_state_follows_the_files_failure_lock_and_result(tmp_path):
    assert run_state(tmp_path) == "pending" and failure_message(tmp_path) == ""
    assert write_failure(tmp_path, "Traceback\n  ...\nValueError: boom\n") == "ValueError: boom"
    assert run_state(tmp_path) == "failed" and failure_message(tmp_path) == "ValueError: boom"
    before = time.time()
    with run_lock(tmp_path) as acquired:
        assert acquired and run_state(tmp_path) == "running"
    assert lock_taken_at(tmp_path) >= before - 1  # file time stamps use a coarse clock
    clear_failure(tmp_path)
    assert run_state(tmp_path) == "pending"
    with pytest.raises(FileNotFoundError):
        load_result(tmp_path)
    write_result(tmp_path, {"status": "diverged", "test_acc": 0.25})
    assert run_state(tmp_path) == "diverged"
    assert lock_taken_at(tmp_path / "never-locked") is None


def test_start_step_none_when_finished_else_the_checkpoint_step(tmp_path):
    assert read_start_step(tmp_path) == 0
    RunFiles(tmp_path).save_torch("last.pt", {"trainer": {"step": 37}})
    assert read_start_step(tmp_path) == 37
    assert runfolder.has_checkpoint(tmp_path)
    write_result(tmp_path, {"status": "completed"})
    assert read_start_step(tmp_path) is None


def test_every_run_records_what_made_it(tiny_config):
    """Issue 37, 4: config.json's provenance holds the versions, the device and, from a git
    checkout, the commit (checked against git itself); the study documents' Reproduce sentence
    states them; the hash stays the config's (no version in it)."""
    import platform
    import subprocess

    import numpy
    import torch

    from initmem.empirical.config import config_hash
    from initmem.empirical.provenance import provenance_sentence
    from initmem.empirical.trainer import train

    config = tiny_config(epochs=1)
    train(config)
    payload = json.loads((Path(config.out_dir) / "config.json").read_text())
    record = payload["provenance"]
    assert (record["torch"], record["numpy"]) == (torch.__version__, numpy.__version__)
    assert record["python"] == platform.python_version() and record["device"] == "cpu"
    assert record["plugins"] == {} and payload["started_at"].endswith("Z")
    repo = Path(__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert record["git_commit"] == head
    assert payload["hash"] == config_hash(payload["config"])  # nothing of the provenance hashed
    sentence = provenance_sentence([config.out_dir, Path(config.out_dir).parent / "none"])
    assert f"torch {torch.__version__}" in sentence and f"git commit {head[:10]}" in sentence
    assert "(1 of the 2 runs record no provenance)" in sentence
