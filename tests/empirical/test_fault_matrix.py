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

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from initmem.empirical import runfolder
from initmem.empirical.config import NON_HASHED_FIELDS, RunConfig
from initmem.empirical.sweep import (
    SweepError,
    SweepSpec,
    prepare_sweep,
    read_manifest,
    sweep_status,
)
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


# ------------------------------------------------------------------------------ plug-in faults
#: A plug-in module of faulty models and data (issue 37): each name below is one case.
FAULTY_PLUGIN = '''
import numpy as np
import torch
from torch import nn


def stripes(config):
    """Images whose class (0-9) is the row of a bright stripe."""
    rng = np.random.default_rng(0)

    def draw(n):
        y = np.arange(n) % 10
        x = rng.integers(0, 60, (n, 3, 32, 32)).astype(np.uint8)
        for i, label in enumerate(y):
            x[i, :, 3 * label : 3 * label + 2, :] = 250
        return x, y

    return (*draw(24), *draw(10))


def one_class(config):
    x, y, tx, ty = stripes(config)
    return x, np.zeros_like(y), tx, np.zeros_like(ty)


def net(config, outputs=10):
    c = WIDTH
    return nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1, bias=False), nn.GroupNorm(1, c), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, outputs),
    )


WIDTH = 4


def frozen(config):
    model = net(config)
    model[0].weight.requires_grad_(False)
    return model


def all_frozen(config):
    model = net(config)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def few_outputs(config):
    return net(config, outputs=3)


def many_outputs(config):
    return net(config, outputs=12)


def wrong_input(config):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 28 * 28, 10))


def three_d(config):
    return nn.Sequential(net(config), nn.Unflatten(1, (10, 1)))


def float64(config):
    return net(config).double()


def plain_mlp(config):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))


def no_parameters(config):
    return nn.Sequential(nn.Flatten(), nn.Identity())


def raises(config):
    raise ValueError("width must be a power of two")
'''

PLUGIN_RUN = """
dataset = "faulty_plugin:{data}"
model = "{model}"
train_size = 16
val_size = 4
batch_size = 4
epochs = 1
lr = 0.05
quiet = true
"""


@pytest.fixture
def faulty_plugin(tmp_path, monkeypatch, capsys):
    """The module ``faulty_plugin`` (and two modules that cannot be imported) on the path; returns
    ``train(model, data="stripes", *extra)``: the exit status, stderr's lines and the run folder."""
    import sys

    from initmem.cli import main

    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "faulty_plugin.py").write_text(FAULTY_PLUGIN)
    (folder / "raises_on_import.py").write_text("raise RuntimeError('no GPU found')\n")
    (folder / "bad_syntax.py").write_text("def net(config)\n    return None\n")
    monkeypatch.syspath_prepend(str(folder))
    for name in ("faulty_plugin", "raises_on_import", "bad_syntax"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    counter = iter(range(100))

    def train(model, data="stripes", *extra, out=None):
        run_file = tmp_path / "run.toml"
        model = model if ":" in model else f"faulty_plugin:{model}"
        run_file.write_text(PLUGIN_RUN.format(model=model, data=data))
        out = out or tmp_path / f"run{next(counter)}"
        argv = ["train", "--config", str(run_file), "--out", str(out), *extra]
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            status = main(argv)
        return status, capsys.readouterr().err.splitlines(), out

    train.folder = folder
    return train


ERRORS = {
    # model (or data): the one error line's words
    "all_frozen": "has no trainable parameter (5 parameter tensors, all frozen",
    "few_outputs": "returns 3 outputs, fewer than the 10 classes",
    "wrong_input": "its forward fails on a batch of images (2, 3, 32, 32)",
    "three_d": "must return logits of shape (batch, classes) = (2, 10)",
    "float64": "parameters must be float32 (found torch.float64)",
    "raises": "model = 'faulty_plugin:raises': the plug-in raised ValueError: width must be",
    "no_parameters": "model 'faulty_plugin:no_parameters' has no parameters: there is nothing to",
}


@pytest.mark.parametrize("model", sorted(ERRORS))
def test_a_faulty_plugin_model_is_one_error_line_before_the_folder_is_written(faulty_plugin, model):
    status, err, out = faulty_plugin(model)
    assert status == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert ERRORS[model] in err[0]
    assert not (out / "config.json").exists()  # no folder left "unfinished"


@pytest.mark.parametrize(
    ("plugin", "words"),
    [
        ("raises_on_import:net", "importing module 'raises_on_import' raised RuntimeError: no GPU"),
        ("bad_syntax:net", "module 'bad_syntax' has a syntax error (expected ':'"),
    ],
)
def test_a_plugin_module_that_cannot_be_imported_is_one_error_line(faulty_plugin, plugin, words):
    status, err, _ = faulty_plugin(plugin)
    assert status == 2 and len(err) == 1 and words in err[0], err


def test_a_one_class_data_set_is_an_error_and_extra_outputs_a_warning(faulty_plugin):
    status, err, _ = faulty_plugin("net", "one_class")
    assert status == 2 and len(err) == 1
    assert "train_y holds one class ([0]); a data set needs at least 2 classes" in err[0]
    status, err, out = faulty_plugin("many_outputs")
    assert status == 0 and (out / "result.json").is_file()
    warned = [line for line in err if line.startswith("warning:")]
    assert len(warned) == 1 and "returns 12 outputs for the 10 classes" in warned[0], err


def test_a_plugin_model_with_a_frozen_parameter_trains_it_not(faulty_plugin):
    """Issue 37, 3: the frozen conv weight keeps its init; the rest trains; config.json records it."""
    import torch

    status, err, out = faulty_plugin("frozen")
    assert status == 0, err
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["model"]["frozen_parameters"] == 4 * 3 * 3 * 3
    assert recorded["model"]["parameters"] == 4 + 4 + 4 * 10 + 10  # GroupNorm and the head
    last = torch.load(out / "last.pt", weights_only=False)["trainer"]["model"]
    config = RunConfig.from_dict(recorded["config"])
    from initmem.empirical.models import build_model

    init = build_model(config).state_dict()
    torch.testing.assert_close(last["0.weight"], init["0.weight"], rtol=0, atol=0)
    assert not torch.equal(last["5.weight"], init["5.weight"])


def test_alpha_on_an_empty_group_is_an_error_naming_group_and_model(faulty_plugin):
    """Issue 37, 1: ``norm`` on a model without normalization; allowed explicitly, it trains, and
    config.json records each group's size."""
    status, err, out = faulty_plugin(
        "plain_mlp", "stripes", "--set", "alpha=8", "--set", "alpha_groups=norm"
    )
    assert status == 2 and len(err) == 1 and not (out / "config.json").exists()
    assert (
        "alpha_groups: group 'norm' holds no parameter of model 'faulty_plugin:plain_mlp'" in err[0]
    )
    assert "allow_empty_alpha_groups = true" in err[0]
    status, err, out = faulty_plugin(
        "plain_mlp",
        "stripes",
        "--set",
        "alpha=8",
        "--set",
        "alpha_groups=norm",
        "--set",
        "allow_empty_alpha_groups=true",
    )
    assert status == 0, err
    groups = json.loads((out / "config.json").read_text())["model"]["parameter_groups"]
    assert groups["norm"] == 0 and groups["all"] == groups["head"] == 3 * 32 * 32 * 10 + 10


def test_an_edited_plugin_is_another_run_and_says_so(faulty_plugin):
    """Issue 37, 4: the same ``initmem train`` after the plug-in's source changed: one error line
    naming the plug-in, not the stale result; the hash of the config changed with the source, and
    config.json records the digest and the versions."""
    import hashlib

    status, _, out = faulty_plugin("net")
    assert status == 0
    recorded = json.loads((out / "config.json").read_text())
    source = faulty_plugin.folder / "faulty_plugin.py"
    plugin = recorded["provenance"]["plugins"]["model"]
    assert plugin["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert {"torch", "numpy", "python", "device", "initmem_version", "git_commit"} <= set(
        recorded["provenance"]
    )
    before = RunConfig.from_dict(recorded["config"]).hash
    assert before == recorded["hash"]
    source.write_text(source.read_text().replace("WIDTH = 4", "WIDTH = 16"))
    assert RunConfig.from_dict(recorded["config"]).hash != before
    status, err, _ = faulty_plugin("net", out=out)
    assert status == 2 and len(err) == 1, err
    assert (
        "holds a run of an older version of a plug-in (model 'faulty_plugin:net': its source"
        in err[0]
    )


def test_a_builtin_run_keeps_its_hash():
    """Provenance changes no built-in run's identity: the default config's hash is the SHA-256 of
    its hashed fields alone (no provenance, no plug-in digest), computed here by hand. (The value
    itself changed once, with the rename step_milestones -> milestone_epochs: CHANGELOG.md.)"""
    values = {k: v for k, v in RunConfig().to_dict().items() if k not in NON_HASHED_FIELDS}
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=list)
    assert RunConfig().hash == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert not any(key in values for key in ("provenance", "plugin_sources"))


def test_a_config_json_edited_after_the_run_is_flagged(sweep, baseline):
    """Issue 37, 13: a finished run whose config.json's config no longer gives the hash it records
    (alpha edited by hand) is a damaged run, named with one warning; the others are unchanged."""
    runs = read_manifest(sweep)
    path = runs[0].run_dir(sweep) / "config.json"
    payload = json.loads(path.read_text())
    payload["config"]["alpha"] = 16.0
    path.write_text(json.dumps(payload, indent=2))
    assert "its config gives hash" in runfolder.run_damage(path.parent, runs[0].hash)
    frame, lines, _ = analyse(sweep)
    assert len(lines) == 1 and f"skipping damaged run {runs[0].hash}" in lines[0]
    assert "config.json" in lines[0] and "its config gives hash" in lines[0]
    kept = numbers(frame)
    assert kept == {h: v for h, v in baseline.items() if h != runs[0].hash}


def test_a_run_trained_on_other_data_than_its_pipeline_is_named(sweep, baseline, capsys):
    """Issue 37, 7: one run's data fingerprint (the labels' digest config.json records) differs from
    the other runs' of its pipeline, as when a plug-in's data changes between calls: report (and
    every reader of load_sweep: bridge, study) names that run in one warning; the numbers stay."""
    runs = read_manifest(sweep)
    path = runs[1].run_dir(sweep) / "config.json"
    payload = json.loads(path.read_text())
    payload["data"]["train_labels_sha256"] = "0" * 64
    path.write_text(json.dumps(payload, indent=2))
    frame, lines, categories = analyse(sweep)
    assert categories == ["MixedDataWarning"]
    assert (
        f"run {runs[1].hash}" in lines[0] and "trained on other data than the other 4" in lines[0]
    )
    assert numbers(frame) == baseline
    status, err = _cli(["report", str(sweep)], capsys)
    assert status == 0 and sum(f"run {runs[1].hash}" in line for line in err) == 1


#: The runs of PLUGIN_RUN as a sweep over alpha and seed.
PLUGIN_SWEEP = (
    'name = "plugin-faults"\n[base]'
    + PLUGIN_RUN.format(data="stripes", model="faulty_plugin:{model}")
    + "[grid]\nalpha = [1.0, 8.0]\nseed = [0, 1]\n"
)


def test_a_sweep_stops_before_any_run_when_its_predictions_find_an_empty_group(
    faulty_plugin, tmp_path, capsys
):
    """Issue 37, 1 and Low: the pre-registration builds each pipeline's model; an alpha group
    holding none of its parameters stops ``sweep run`` with one error line before any run starts
    (it launched every run, each failing alike)."""
    from initmem.cli import main

    path = tmp_path / "sweep.toml"
    path.write_text(PLUGIN_SWEEP.format(model="plain_mlp") + 'alpha_groups = [["norm"]]\n')
    out = tmp_path / "out"
    assert main(["sweep", "run", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: alpha_groups: group 'norm' holds no")
    assert "no run was started" in err[0]
    assert not list(out.glob("runs/*/config.json"))


def test_a_plugin_edited_between_sweep_calls_is_named_and_the_old_runs_still_read(
    faulty_plugin, tmp_path
):
    """Issue 37, 4 and 7: the runs of a sweep are listed under the plug-in's source digest; after
    an edit the next ``sweep run`` says which plug-in changed (one line, not "a different sweep"),
    and the folder's manifest still reads (report and study read the runs that were trained)."""
    spec = SweepSpec.from_toml(PLUGIN_SWEEP.format(model="net"))
    out = tmp_path / "out"
    before = [r.hash for r in prepare_sweep(spec, out)]
    source = faulty_plugin.folder / "faulty_plugin.py"
    source.write_text(source.read_text().replace("WIDTH = 4", "WIDTH = 16"))
    with pytest.raises(
        SweepError, match="the source of plug-in faulty_plugin:net, faulty_plugin:stripes changed"
    ):
        prepare_sweep(spec, out)
    assert [r.hash for r in read_manifest(out)] == before
    after = [r.hash for r in prepare_sweep(spec, out, update=True)]
    assert not set(after) & set(before)
