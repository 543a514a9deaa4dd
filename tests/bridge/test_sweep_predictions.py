"""``initmem sweep run`` writes the pre-registered predictions (bridge.preregister.preregister_sweep)
into the sweep folder before any run trains, equal to ``predict_groups`` on the same config."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.preregister import predict_groups, read_sweep_predictions
from initmem.cli import main
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec, read_manifest

pytestmark = pytest.mark.usefixtures("single_thread")

TRAINER = "tests.bridge.test_sweep_predictions:checking_train"


def checking_train(config: RunConfig) -> dict:
    """A fake run that records whether the sweep's predictions index existed when it started, and
    that no run folder of the sweep had trained before (its own is the first file it writes)."""
    run_dir = Path(config.out_dir)
    sweep_dir = run_dir.parent.parent
    index = sweep_dir / "predictions" / "index.csv"
    record = {"index_existed": index.is_file()}
    if index.is_file():
        record["index_mtime"] = index.stat().st_mtime
    (run_dir / "seen.json").write_text(json.dumps(record))
    result = {"status": "completed", "test_acc": 0.5, "best_val_acc": 0.5, "final_train_acc": 1.0}
    (run_dir / "result.json").write_text(json.dumps(result))
    return result


SWEEP = """
name = "prereg"
[base]
dataset = "cifar10-fixture"
data_dir = "{data}"
model = "resnet9"
width = 0.0625
train_size = 16
val_size = 4
test_size = 20
batch_size = 4
epochs = 2
quiet = true
[grid]
alpha = [1.0, 8.0]
seed = [0]
[[variants]]
name = "sgd-l2"
optimizer = "sgd"
lr = 0.05
momentum = 0.9
l2 = 0.005
[[variants]]
name = "adamw"
optimizer = "adamw"
lr = 0.001
weight_decay = 0.05
"""


def test_the_sweep_writes_predictions_before_training(tmp_path, capsys):
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(textwrap.dedent(SWEEP).format(data=tmp_path / "data"))
    out = tmp_path / "out"
    argv = ["sweep", "run", str(sweep_file), "--out", str(out), "--trainer", TRAINER, "--quiet"]
    assert main([*argv, "--dry-run"]) == 0
    assert "predictions/<variant>/predictions.csv" in capsys.readouterr().out
    assert not out.exists()  # the dry run writes nothing
    assert main([*argv, "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("predictions written:") == 2
    index = pd.read_csv(out / "predictions" / "index.csv", dtype={"hash": str})
    assert list(index["variant"]) == ["sgd-l2", "adamw"] and set(index["note"].fillna("")) == {""}
    for run in read_manifest(out):  # every run saw the predictions, written before it started
        seen = json.loads((run.run_dir(out) / "seen.json").read_text())
        assert seen["index_existed"]
        written = (out / "predictions" / run.variant / "predictions.csv").stat().st_mtime
        assert written <= (run.run_dir(out) / "seen.json").stat().st_mtime
    # the numbers: predict_groups on the pipeline's config at its largest alpha
    for run in read_manifest(out):
        if run.config.alpha != 8.0:
            continue
        folder = out / "predictions" / run.variant
        record = json.loads((folder / "predictions.json").read_text())
        assert record["hash"] == run.config.hash and record["alpha"] == 8.0
        table = pd.read_csv(folder / "predictions.csv")
        expected = predict_groups(run.config).table
        assert list(table["group"]) == list(expected["group"])
        for column in ("steps", "epochs", "memory_fraction"):
            np.testing.assert_allclose(table[column], expected[column], rtol=1e-12)
    both = read_sweep_predictions(out)
    assert len(both) == 2 * 4 and set(both["variant"]) == {"sgd-l2", "adamw"}  # 4 groups each
    # a second call keeps what was written before the runs trained
    assert main([*argv, "--workers", "1"]) == 0
    assert capsys.readouterr().out.count("predictions kept") == 2


def test_predictions_that_cannot_be_computed_are_a_note(tmp_path, capsys):
    sweep_file = tmp_path / "sweep.toml"
    text = textwrap.dedent(SWEEP).format(data=tmp_path / "data")
    sweep_file.write_text(text.replace('"cifar10-fixture"', '"cifar10"'))  # no copy there
    out = tmp_path / "out"
    argv = ["sweep", "run", str(sweep_file), "--out", str(out), "--trainer", TRAINER, "--quiet"]
    assert main([*argv, "--workers", "1"]) == 0  # the fake runs train all the same
    printed = capsys.readouterr().out
    assert printed.count("note: predictions for") == 2 and "CIFAR-10 not found" in printed
    index = pd.read_csv(out / "predictions" / "index.csv")
    assert index["note"].str.startswith("not computed: DataNotFoundError").all()
    assert read_sweep_predictions(out).empty
    assert main([*argv, "--no-predictions"]) == 0
    assert "not written (--no-predictions)" in capsys.readouterr().out


def test_pipelines_sharing_a_model_compute_its_ntk_once(tmp_path):
    """The memory fraction depends on the model, its init draw and the probe data only: a cache
    shared by two pipelines of one model holds one entry, and gives the uncached numbers."""
    base = dict(dataset="cifar10-fixture", data_dir=str(tmp_path / "data"), model="resnet9")
    base |= dict(width=0.0625, train_size=16, val_size=4, test_size=20, batch_size=4, epochs=2)
    sgd = RunConfig.from_dict(base | dict(optimizer="sgd", lr=0.05, l2=5e-3, alpha=8.0))
    adam = RunConfig.from_dict(base | dict(optimizer="adam", lr=1e-3, alpha=8.0))
    cache: dict = {}
    tables = [predict_groups(c, probe_size=4, memory_cache=cache).table for c in (sgd, adam)]
    assert len(cache) == 1
    for config, table in zip((sgd, adam), tables, strict=True):
        expected = predict_groups(config, probe_size=4).table
        pd.testing.assert_frame_equal(table, expected)
    other = RunConfig.from_dict(base | dict(optimizer="sgd", lr=0.05, seed=1, alpha=8.0))
    predict_groups(other, probe_size=4, memory_cache=cache)
    assert len(cache) == 2  # another init draw: its own NTK


def test_predictions_written_after_runs_started_say_so_everywhere(tmp_path, capsys):
    """Issue 37, 2: predictions deleted after the sweep finished and written again by the next
    ``sweep run`` record their clock, print that they are not pre-registered, and read back (and
    into the study's table) as "computed after 2 runs had started", never "pre-registered before
    training"; the first write says "pre-registered before training"."""
    import shutil

    from initmem.bridge.study.architectures import sweep_predictions

    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(textwrap.dedent(SWEEP).format(data=tmp_path / "data"))
    out = tmp_path / "out"
    argv = ["sweep", "run", str(sweep_file), "--out", str(out), "--trainer", TRAINER, "--quiet"]
    assert main([*argv, "--workers", "1"]) == 0
    capsys.readouterr()
    first = read_sweep_predictions(out)
    assert set(first["provenance"]) == {"pre-registered before training"}
    assert set(first["runs_started_before"]) == {0}
    record = json.loads((out / "predictions" / "adamw" / "predictions.json").read_text())
    assert record["runs_started_before"] == 0 and record["written_at"].endswith("Z")
    shutil.rmtree(out / "predictions")
    assert main([*argv, "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("(computed after 2 runs had started: not pre-registered)") == 2
    again = read_sweep_predictions(out)
    assert set(again["provenance"]) == {"computed after 2 runs had started"}
    table, _ = sweep_predictions(out, read_manifest(out), compute_missing=False)
    assert set(table["source"]) == {"computed after 2 runs had started"}
    # a third call keeps them, and says what they are
    assert main([*argv, "--workers", "1"]) == 0
    assert (
        capsys.readouterr().out.count("predictions kept (computed after 2 runs had started)") == 2
    )


def test_an_index_without_its_note_column_or_a_damaged_table_is_named(tmp_path, capsys):
    """Issue 37, 11 and 13: an index.csv without ``note`` reads as no notes; a 0-byte or garbage
    predictions.csv is a DamagedFileError naming the file."""
    from initmem.empirical.runfolder import DamagedFileError

    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(textwrap.dedent(SWEEP).format(data=tmp_path / "data"))
    out = tmp_path / "out"
    argv = ["sweep", "run", str(sweep_file), "--out", str(out), "--trainer", TRAINER, "--quiet"]
    assert main([*argv, "--workers", "1"]) == 0
    index_path = out / "predictions" / "index.csv"
    index = pd.read_csv(index_path)
    index.drop(columns=["note"]).to_csv(index_path, index=False)
    assert len(read_sweep_predictions(out)) == 2 * 4  # 4 groups per pipeline
    table = out / "predictions" / "adamw" / "predictions.csv"
    for damaged in (b"", b"\x00\xff garbage\n1,2,3\n"):
        table.write_bytes(damaged)
        with pytest.raises(DamagedFileError, match="adamw/predictions.csv"):
            read_sweep_predictions(out)


def test_the_dry_run_of_several_models_prints_each_pipelines_deciding_prediction(tmp_path, capsys):
    """A sweep of several models: the dry run prints, per pipeline, the deciding group (A3 of the
    architectures study) and its predicted time from predict_groups at the largest alpha."""
    text = textwrap.dedent(SWEEP).format(data=tmp_path / "data")
    text = text.replace('name = "adamw"\n', 'name = "adamw"\nmodel = "mlp"\n')
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(text)
    assert main(["sweep", "run", str(sweep_file), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "predicted per pipeline" in printed
    after = printed.split("predicted per pipeline", 1)[1].splitlines()[1:]
    lines = {line.split()[0]: line for line in after if line.startswith("  ")}
    for variant, model, group in (
        ("sgd-l2", "resnet9", "scale_invariant"),
        ("adamw", "mlp", "other"),
    ):
        config = next(
            r.config
            for r in SweepSpec.from_file(sweep_file).expand()
            if r.variant == variant and r.config.alpha == 8.0
        )
        expected = predict_groups(config).table.set_index("group").loc[group, "steps"]
        steps = "never" if np.isinf(expected) else f"{expected:.0f}"
        line = lines[variant]
        assert model in line and group in line and f"{steps} of {config.total_steps} steps" in line
