"""A study document's title, question and reproduce commands come from its own sweep folder."""

from __future__ import annotations

import shlex

import pytest

from initmem.bridge.study import framing
from initmem.cli import main
from initmem.empirical.sweep import SweepSpec, prepare_sweep, read_manifest

USER_SWEEP = """
name = "mine"
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 3
optimizer = "sgd"
lr = 0.1
alpha_groups = ["conv"]
[grid]
alpha = [1.0, 8.0]
seed = [0, 1]
[[variants]]
name = "plain"
[[variants]]
name = "l2"
l2 = 0.01
"""


@pytest.fixture
def sweep_dir(tmp_path):
    """The user's sweep with a --set override, prepared (nothing trained)."""
    spec = SweepSpec.from_toml(USER_SWEEP).with_overrides({"lr": 0.2})
    prepare_sweep(spec, tmp_path / "mine")
    return tmp_path / "mine"


def test_title_and_question_state_what_the_sweep_varies(sweep_dir):
    assert framing.sweep_axes(sweep_dir) == {"l2": [0.0, 0.01], "alpha": [1.0, 8.0], "seed": [0, 1]}
    assert framing.title(sweep_dir) == (
        "The unit of forgetting in `mine` (2 pipelines, varying l2): epochs or accumulated "
        "regularization?"
    )
    text = framing.question(sweep_dir)
    assert text.startswith(
        "This sweep (8 runs, 2 pipelines) varies l2 0 / 0.01 across its pipelines"
    )
    assert "alpha 1 / 8 and 2 seed(s)" in text
    assert "Every run trains 3 epochs" in text and "cannot separate the two units" in text


def test_reproduce_rebuilds_the_same_runs_with_the_overrides(sweep_dir, tmp_path, capsys):
    command = framing.reproduce_command(sweep_dir, tmp_path / "doc.md", n_boot=50)
    first, second = command.splitlines()
    assert first == f"initmem sweep run {sweep_dir / 'sweep.toml'} --out {sweep_dir}"
    assert second == f"initmem study {sweep_dir} --doc {tmp_path / 'doc.md'} --n-boot 50"
    # the first command, run as printed (dry run), expands to the manifest's runs: lr = 0.2 kept
    argv = shlex.split(first)[1:]
    assert main([*argv, "--dry-run"]) == 0
    assert "8 runs" in capsys.readouterr().out
    spec = SweepSpec.from_file(sweep_dir / "sweep.toml")
    assert [r.hash for r in spec.expand()] == [r.hash for r in read_manifest(sweep_dir)]
    assert {r.config.lr for r in spec.expand()} == {0.2}


def test_reproduce_says_when_the_folder_file_no_longer_gives_its_runs(sweep_dir, tmp_path):
    (sweep_dir / "sweep.toml").write_text(USER_SWEEP)  # lr = 0.1 again: other hashes
    command = framing.reproduce_command(sweep_dir, tmp_path / "doc.md")
    assert command.splitlines()[0].startswith("# note:")


def test_the_sweep_files_study_table_sets_the_analysis_and_the_command_names_the_rest(tmp_path):
    spec = SweepSpec.from_toml(USER_SWEEP + "[study]\ncalibrate = 40\n")
    prepare_sweep(spec, tmp_path / "fixed")
    folder, doc = tmp_path / "fixed", tmp_path / "doc.md"
    assert framing.study_settings(folder) == {"n_boot": 200, "calibrate": 40}
    assert framing.study_settings(tmp_path / "nowhere") == framing.STUDY_DEFAULTS
    study = framing.reproduce_command(folder, doc).splitlines()[1]
    assert study == f"initmem study {folder} --doc {doc}"  # the file's own settings: no flags
    study = framing.reproduce_command(folder, doc, calibrate=0, n_boot=30).splitlines()[1]
    assert study.endswith("--n-boot 30 --calibrate 0")
