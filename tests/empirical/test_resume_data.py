"""A resume trains on the data set the run started on: another copy with changed labels is refused
(one line naming the field), an identical copy elsewhere is fine, and ``allow_other_data`` goes on
with the new one, recording the old in config.json."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from initmem.cli import main
from initmem.empirical.data import CIFAR10_FOLDER
from initmem.empirical.runfolder import read_log
from initmem.empirical.trainer import DataChangedError, train

pytestmark = pytest.mark.usefixtures("single_thread")


class Killed(KeyboardInterrupt):
    pass


def kill_after(epoch):
    def callback(record):
        if record["epoch"] == epoch:
            raise Killed

    return callback


def copy_with_labels_changed(source: Path, target: Path) -> Path:
    """A copy of the fixture's data_dir whose training labels are shifted by one class."""
    shutil.copytree(source, target)
    for batch in (target / "cifar10-fixture" / CIFAR10_FOLDER).glob("data_batch_*"):
        values = pickle.loads(batch.read_bytes())
        values[b"labels"] = [(label + 1) % 10 for label in values[b"labels"]]
        batch.write_bytes(pickle.dumps(values))
    return target


def test_resume_on_changed_labels_is_refused_unless_allowed(
    tiny_config, fixture_data_dir, tmp_path, capsys
):
    config = tiny_config(epochs=3)
    with pytest.raises(Killed):
        train(config, callback=kill_after(1))
    changed = copy_with_labels_changed(fixture_data_dir, tmp_path / "changed")
    other = config.replace(data_dir=str(changed))
    with pytest.raises(DataChangedError, match="train_labels_sha256: recorded '[0-9a-f]{16}', now"):
        train(other)
    assert [r["epoch"] for r in read_log(config.out_dir)] == [0, 1]  # nothing trained

    toml = tmp_path / "run.toml"
    fields = ("dataset", "width", "batch_size", "epochs", "lr", "momentum", "eval_batch_size")
    toml.write_text("".join(f"{k} = {json.dumps(getattr(other, k))}\n" for k in fields))
    argv = ["train", "--config", str(toml), "--set", f'data_dir="{changed}"']
    argv += ["--out", config.out_dir, "--resume", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: {config.out_dir} was trained on another data set")
        and err.count("\n") == 1
    )
    assert "--allow-other-data" in err

    same = tmp_path / "same"
    shutil.copytree(fixture_data_dir, same)  # the same data in another place: resumes
    with pytest.raises(Killed):
        train(config.replace(data_dir=str(same)), callback=kill_after(2))
    assert [r["epoch"] for r in read_log(config.out_dir)] == [0, 1, 2]

    result = train(other, allow_other_data=True)
    assert result.epochs_run == 3
    recorded = json.loads((Path(config.out_dir) / "config.json").read_text())
    assert len(recorded["data_before"]) == 1
    assert (
        recorded["data"]["train_labels_sha256"] != recorded["data_before"][0]["train_labels_sha256"]
    )
