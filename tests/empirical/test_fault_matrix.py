"""Fault injection: every file of a finished and of an unfinished run, damaged four ways, read by every
command (docs/run-format.md, "Reading").

The sweep (one pipeline, 3 alphas x 2 seeds of the tiny fixture network, 2 epochs) is trained once per
session; each case copies it, damages one file of one run (cut to half, replaced by text, emptied, or
replaced by the same file of another run of the sweep) and asserts the one-line outcome: the damaged
finished run is skipped with one ``warning:`` line naming the file (report, bridge, study: through
``load_sweep``), or the command stops with one ``error:`` line naming it; never a traceback, and the
other runs' numbers are those of the undamaged sweep. The unfinished run (killed after epoch 1) is
left out of the analyses whatever its files hold, and ``sweep run`` either resumes it to the numbers
of an undamaged resume or records one error line naming the file.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from initmem.empirical import runfolder
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepSpec, prepare_sweep, read_manifest, sweep_status
from initmem.empirical.tables import finished_runs, load_epochs, load_layers, load_sweep
from initmem.empirical.trainer import train
from initmem.empirical.workers import execute_run

SWEEP = """
name = "faults"
[base]
dataset = "cifar10-fixture"
data_dir = "{data_dir}"
train_size = 16
val_size = 4
test_size = 20
width = 0.0625
batch_size = 4
epochs = 2
lr = 0.05
momentum = 0.9
eval_batch_size = 20
device = "cpu"
quiet = true
[grid]
alpha = [0.5, 1.0, 2.0]
seed = [0, 1]
"""
#: The files of a run that a reader may meet (the manifest has its own test below).
FILES = runfolder.RUN_FILES
FAULTS = ("truncated", "text", "empty", "foreign")
#: The numbers of a run that the analyses use.
NUMBERS = ("test_acc", "best_val_acc", "final_train_acc", "final_test_acc")
#: Files that no analysis of a finished run reads (the trainer's checkpoints: it never reopens a
#: finished run's checkpoints; best.pt is for the user): damage there changes no analysis.
UNREAD_WHEN_FINISHED = ("best.pt", "last.pt")


class Killed(KeyboardInterrupt):
    pass


def _kill_after_epoch_1(record):
    if record["epoch"] == 1:
        raise Killed


@pytest.fixture(scope="session")
def trained_sweep(tmp_path_factory, fixture_data_dir):
    """The sweep folder: five finished runs and the last one killed after its first epoch; and the
    numbers of that run resumed undamaged."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("faults") / "sweep"
    runs = prepare_sweep(SweepSpec.from_toml(SWEEP.format(data_dir=fixture_data_dir)), root)
    configs = [RunConfig.from_dict(run.task(root)["config"]) for run in runs]
    for config in configs[:-1]:
        train(config)
    with pytest.raises(Killed):
        train(configs[-1], callback=_kill_after_epoch_1)
    resumed = root.parent / "resumed"
    shutil.copytree(root, resumed)
    reference = train(configs[-1].replace(out_dir=str(resumed / "runs" / runs[-1].hash)))
    torch.set_num_threads(threads)
    return root, reference


@pytest.fixture
def sweep(trained_sweep, tmp_path):
    """A fresh copy of the trained sweep (the run folders' out_dir point at the copy's runs)."""
    root, _ = trained_sweep
    copy = tmp_path / "sweep"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".lock"))
    manifest = copy / "manifest.json"
    manifest.write_text(manifest.read_text().replace(str(root.resolve()), str(copy.resolve())))
    return copy


def damage(path: Path, fault: str, other: Path) -> None:
    """Damage ``path`` in one of :data:`FAULTS` (``other``: the same file of another run)."""
    if fault == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif fault == "text":
        path.write_text("this is not the file you are looking for\n")
    elif fault == "empty":
        path.write_bytes(b"")
    else:
        shutil.copyfile(other, path)


def numbers(runs: pd.DataFrame) -> dict[str, tuple]:
    return {r["hash"]: tuple(r[k] for k in NUMBERS) for _, r in finished_runs(runs).iterrows()}


def analyse(sweep_dir: Path) -> tuple[pd.DataFrame, list[str], list[str]]:
    """What report, bridge and study read of every kept run (load_sweep, then the logs, layers and
    predictions of the finished runs); the warnings, one line each."""
    from initmem.empirical.curves import disagreement_curves
    from initmem.empirical.memory import seed_disagreement

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load_sweep(sweep_dir)
        kept = finished_runs(runs)
        epochs, layers = load_epochs(kept), load_layers(kept)
        seed_disagreement(runs.assign(pipeline="p"))
        disagreement_curves(kept)
    assert set(epochs["hash"]) == set(layers["hash"]) == set(kept["hash"])
    lines = [" ".join(str(w.message).split()) for w in caught]
    categories = [w.category.__name__ for w in caught]
    return runs, lines, categories


@pytest.fixture(scope="session")
def baseline(trained_sweep):
    root, _ = trained_sweep
    runs, lines, _ = analyse(root)
    assert lines == [] and len(finished_runs(runs)) == 5
    return numbers(runs)


CASES = [
    (kind, name, fault) for kind in ("finished", "unfinished") for name in FILES for fault in FAULTS
]


@pytest.mark.parametrize(("kind", "name", "fault"), CASES, ids=["-".join(c) for c in CASES])
def test_one_damaged_file_is_named_and_the_other_runs_are_unchanged(
    sweep, baseline, trained_sweep, kind, name, fault
):
    manifest = read_manifest(sweep)
    victim = manifest[0] if kind == "finished" else manifest[-1]
    other = manifest[2]  # another alpha, same seed
    run_dir, other_dir = victim.run_dir(sweep), other.run_dir(sweep)
    path = run_dir / name
    if kind == "unfinished" and name == "result.json" and fault != "foreign":
        path.write_text('{"status": "completed", "test_acc": 0.5, "hash": "')  # a half-written file
    elif not path.exists() and fault != "foreign":
        pytest.skip(f"a {kind} run has no {name}")
    damage(path, fault, other_dir / name)

    runs, lines, categories = analyse(sweep)
    expected = {h: v for h, v in baseline.items() if h != victim.hash}
    got = numbers(runs)
    if kind == "finished" and name in UNREAD_WHEN_FINISHED:
        assert lines == [] and got == baseline  # no analysis reads it
    elif kind == "finished" or name == "result.json":
        # skipped, one warning line naming the damaged file and the fix
        assert got == expected
        assert len(lines) == 1, lines
        (line,) = lines
        assert categories == ["DamagedRunWarning"]
        assert line.startswith(f"skipping damaged run {victim.hash} ")
        assert f"{path} is damaged (" in line or f"{run_dir / 'result.json'} is damaged (" in line
        assert "rm " in line or "initmem sweep run" in line
        assert "Traceback" not in line
    else:  # an unfinished run is left out of the analyses, whatever its files hold
        assert lines == [] and got == baseline

    status = sweep_status(sweep)  # reads result.json (and config.json's hash) only
    if kind == "finished" and name == "result.json":
        assert status.damaged == 1 and str(path) in status.damages[0][2]
    if kind == "unfinished" and name == "result.json":
        assert status.damaged == 1 and status.done == 5
    if name not in ("result.json", "config.json"):
        assert status.done == 5 and status.damaged == 0


def _sweep_run(sweep_dir: Path) -> dict:
    """What ``sweep run`` does for the unfinished run, in this process: its worker's task
    (``run_sweep`` adds worker processes, not logic)."""
    run = read_manifest(sweep_dir)[-1]
    return execute_run(run.task(sweep_dir))


#: The files of an unfinished run that a resume reads and trusts: damage there is one error line in
#: error.txt (``sweep run`` lists it); every other file is rewritten by the resume.
READ_BEFORE_RESUMING = ("config.json", "last.pt", "log.jsonl")


@pytest.mark.parametrize(("name", "fault"), [(n, f) for n in FILES for f in FAULTS])
def test_sweep_run_resumes_an_unfinished_run_or_names_the_damaged_file(
    sweep, trained_sweep, name, fault
):
    _, reference = trained_sweep
    manifest = read_manifest(sweep)
    run_dir = manifest[-1].run_dir(sweep)
    path = run_dir / name
    if not path.exists() and name != "result.json":
        pytest.skip(f"an unfinished run has no {name}")
    if name == "result.json":
        path.write_text('{"status": "completed", "test_acc": 0.5, "hash": "')
        if fault == "foreign":
            shutil.copyfile(manifest[2].run_dir(sweep) / name, path)
    else:
        damage(path, fault, manifest[2].run_dir(sweep) / name)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        outcome = _sweep_run(sweep)
    if name in READ_BEFORE_RESUMING:  # one error line naming the file; nothing trained
        assert outcome["status"] == "failed", outcome
        error = runfolder.failure_message(run_dir)
        assert "\n" not in error and str(path) in error, error
        assert "Traceback" not in error and not (run_dir / "result.json").exists()
        return
    # the others are rewritten by the resume from last.pt, the log and the raw predictions
    assert outcome["status"] == "completed", outcome
    result = runfolder.read_result(run_dir, complete=True)
    for key in NUMBERS:
        assert result[key] == getattr(reference, key), key
    assert [r["epoch"] for r in runfolder.read_log(run_dir)] == [0, 1, 2]
    assert runfolder.run_damage(run_dir, manifest[-1].hash) == ""


# ------------------------------------------------------------------------------ the commands
def _cli(argv, capsys):
    from initmem.cli import main

    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.err.splitlines()


def test_commands_skip_a_damaged_run_with_one_line(sweep, capsys, tmp_path):
    """The issue's two cases through the command line: a predictions.npz cut to 300 bytes, and a
    finished run whose log is cut to one line and whose tables hold garbage. report, bridge and study
    exit 0 with exactly one ``warning:`` line per damaged run, naming its file; no traceback."""
    manifest = read_manifest(sweep)
    cut = manifest[0].run_dir(sweep) / "predictions.npz"
    cut.write_bytes(cut.read_bytes()[:300])
    garbage = manifest[1].run_dir(sweep)
    log = garbage / "log.jsonl"
    log.write_text(log.read_text().splitlines(keepends=True)[0])
    for name in ("metrics.parquet", "layers.parquet"):
        (garbage / name).write_bytes(b"PAR1" + bytes(range(256)) * 4)
    commands = [
        ["report", str(sweep), "--out", str(tmp_path / "report"), "--n-boot", "20"],
        ["bridge", str(sweep), "--n-boot", "0", "--no-figures"],
        ["study", str(sweep), "--n-boot", "20", "--doc", str(tmp_path / "doc" / "study.md")],
    ]
    for argv in commands:
        status, err = _cli(argv, capsys)
        warned = [line for line in err if line.startswith("warning: skipping damaged run")]
        assert status in (0, 2), (argv, err)
        assert not any("Traceback" in line for line in err)
        assert len(warned) == 2, (argv, err)
        assert f"{cut} is damaged (not a readable .npz archive" in warned[0]
        assert f"{garbage / 'metrics.parquet'} is damaged" in warned[1]
        errors = [line for line in err if line.startswith("error:")]
        assert status == 0 or len(errors) == 1, (argv, err)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_or_foreign_manifest_is_one_error_line(
    sweep, trained_sweep, tmp_path, capsys, fault
):
    other = tmp_path / "other"
    prepare_sweep(
        SweepSpec.from_toml(SWEEP.replace("[0.5, 1.0, 2.0]", "[4.0]").format(data_dir=".")), other
    )
    path = sweep / "manifest.json"
    damage(path, fault, other / "manifest.json")
    for argv in (["sweep", "status", str(sweep)], ["report", str(sweep)]):
        status, err = _cli(argv, capsys)
        assert status == 2 and len(err) == 1, err
        assert err[0].startswith(f"error: {path} is damaged (")
        assert "--update" in err[0]


def test_non_finite_values_in_a_log_are_noted_once_and_used(sweep, baseline):
    run = read_manifest(sweep)[0]
    log = run.run_dir(sweep) / "log.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"test_loss": ', '"test_loss": Infinity, "was": ', 1)
    log.write_text("".join(lines))
    runs, warned, categories = analyse(sweep)
    assert categories == ["LoggedValueWarning"]
    assert warned[0] == f"{log} logs non-finite values: test_loss=inf at epoch 1 (used as logged)"
    assert numbers(runs) == baseline  # noted, not damage: the run's numbers are kept


def test_the_fix_in_a_message_is_a_command_that_works_on_any_path(tmp_path):
    run_dir = tmp_path / "a run; with spaces"
    run_dir.mkdir()
    (run_dir / "predictions.npz").write_text("not a zip")
    with pytest.raises(runfolder.DamagedFileError) as caught:
        runfolder.read_predictions(run_dir)
    assert f"rm -r '{run_dir}'" in str(caught.value)
