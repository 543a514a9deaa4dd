"""Sweeps: expansion, validation, the sweep folder, locks, resume after kill -9, and the backends.

The machinery is tested with fake trainers (tests/empirical/fake_trainer.py, importable by spawned
workers without torch) that keep a per-run journal of starts and
completions; one shared smoke test trains real tiny runs on every backend.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from initmem.empirical.config import RunConfig
from initmem.empirical.runfolder import lock_is_held, run_lock, run_state
from initmem.empirical.sessions import Session, read_sessions, sessions_sentence
from initmem.empirical.sweep import (
    SweepError,
    SweepSpec,
    list_presets,
    pack_tasks,
    prepare_sweep,
    read_manifest,
    run_sweep,
    sweep_status,
)
from initmem.empirical.workers import execute_pack, execute_run
from tests.empirical.fake_trainer import FAKE
from tests.empirical.rounding import assert_same_run, reference_of

REPO = Path(__file__).resolve().parents[2]

SWEEP = """
name = "fake"
[base]
dataset = "cifar10-fixture"
batch_size = 4
epochs = 3
[grid]
alpha = [0.5, 1.0, 2.0]
seed = [0, 1]
[[variants]]
name = "sgd"
optimizer = "sgd"
[[variants]]
name = "adam"
optimizer = "adam"
lr = 0.01
grid = { seed = [0] }
"""


def journal(run_dir: Path) -> list[str]:
    path = run_dir / "journal.txt"
    return path.read_text().split("\n")[:-1] if path.is_file() else []


@pytest.fixture
def importable(monkeypatch):
    """Let processes started by submitit/ray/subprocess import ``tests.empirical.test_sweep``."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def write_sweep(tmp_path: Path, text: str = SWEEP) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(text))
    return path


# ====================================================================== the sweep file
def test_expansion_is_variants_times_grid_in_order():
    spec = SweepSpec.from_toml(SWEEP)
    runs = spec.expand()
    assert len(runs) == 3 * 2 + 3 * 1
    assert [r.variant for r in runs] == ["sgd"] * 6 + ["adam"] * 3
    # first grid axis slowest: alpha, then seed
    assert [(r.config.alpha, r.config.seed) for r in runs[:6]] == [
        (0.5, 0),
        (0.5, 1),
        (1.0, 0),
        (1.0, 1),
        (2.0, 0),
        (2.0, 1),
    ]
    expected = RunConfig(
        dataset="cifar10-fixture",
        batch_size=4,
        epochs=3,
        alpha=2.0,
        seed=0,
        optimizer="adam",
        lr=0.01,
    )
    assert runs[-1].config == expected
    assert runs[-1].hash == expected.hash
    assert len({r.hash for r in runs}) == len(runs)


def test_any_field_can_be_an_axis_and_list_fields_take_lists():
    spec = SweepSpec.from_toml(
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        [grid]
        alpha_groups = [["conv"], ["conv", "bn"]]
        optimizer = ["sgd", "adamw"]
        width = [0.25, 0.5]
        """
    )
    runs = spec.expand()
    assert len(runs) == 8
    assert {r.config.alpha_groups for r in runs} == {("conv",), ("conv", "bn")}
    assert {r.variant for r in runs} == {"v0"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[base]\nalpah = 1.0\n", "did you mean 'alpha'"),
        ("[base]\nbs = 4\n", "base: unknown config field 'bs' (did you mean 'batch_size'?)"),
        ("", "defines no runs (no [base], [grid] or [[variants]])"),
        ("# a comment\nname = 'x'\n", "defines no runs"),
        ("colour = 1\n", "unknown top-level key"),
        ("[grid]\nalpha = 1.0\n", "grid.alpha must be a non-empty list"),
        ("[grid]\nalpha = []\n", "grid.alpha must be a non-empty list"),
        ("[grid]\nalpha = [1.0]\n[[variants]]\nalpha = 2.0\n", "which the sweep grid also sets"),
        ("[[variants]]\nname = 'a'\n[[variants]]\nname = 'a'\n", "unique"),
        ("[sweep]\nworkerz = 2\n", "unknown [sweep] option"),
        ("[study]\nn_boots = 20\n", "unknown [study] option(s) ['n_boots']"),
        ("[study]\ncalibrate = -1\n", "[study] calibrate must be an integer >= 0 (got -1)"),
        ("[base\n", "invalid TOML"),
        (
            "[base]\ndataset='cifar10-fixture'\nbatch_size=4\n[grid]\nlr=[0.1, -1.0]\n"
            "[[variants]]\nname='bad'\n",
            "variant 'bad', lr=-1.0): lr must be > 0",
        ),
        (
            "[base]\ndataset='cifar10-fixture'\nbatch_size=4\n[grid]\nalpha=[1.0]\n"
            "[[variants]]\nname='a'\n[[variants]]\nname='b'\n",
            "repeats a run of variant 'a'",
        ),
    ],
)
def test_invalid_sweep_fails_before_any_run(tmp_path, text, message):
    path = write_sweep(tmp_path, text)
    out = tmp_path / "out"
    with pytest.raises(SweepError, match=_escape(message)):
        run_sweep(path, out, trainer=FAKE, progress=False)
    assert not out.exists()


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_overrides_and_grid_changes_survive_a_toml_round_trip():
    spec = (
        SweepSpec.from_toml(SWEEP).with_overrides({"epochs": 1, "lr": 0.2}).with_grid({"seed": [7]})
    )
    again = SweepSpec.from_toml(spec.to_toml())
    assert [r.hash for r in again.expand()] == [r.hash for r in spec.expand()]
    runs = spec.expand()
    assert len(runs) == 6 and {r.config.seed for r in runs} == {7}
    # the analysis's settings travel with the file and change no run
    studied = SweepSpec.from_toml(SWEEP + "\n[study]\ncalibrate = 40\nn_boot = 50\n")
    assert studied.study == {"calibrate": 40, "n_boot": 50}
    assert SweepSpec.from_toml(studied.with_overrides({}).to_toml()).study == studied.study
    assert [r.hash for r in studied.expand()] == [
        r.hash for r in SweepSpec.from_toml(SWEEP).expand()
    ]
    assert {r.config.lr for r in runs} == {0.2} and {r.config.epochs for r in runs} == {1}


def test_presets_are_listed_and_valid():
    presets = list_presets()
    assert {"demo", "paper-resnet9"} <= set(presets)
    assert all(presets.values()), "every preset has a description"
    for name in presets:
        runs = SweepSpec.from_file(name).expand()
        assert len(runs) > 1
    paper = {r.variant: r.config for r in SweepSpec.from_file("paper-resnet9").expand()}
    assert paper["sgd-lr1e-3"].lr == 1e-3 and paper["sgd-lr1e-3"].epochs == 300
    assert paper["sgd-lr1e-3"].batch_size == 128 and paper["sgd-lr1e-3"].dataset == "cifar10"
    assert paper["sgd-lr1e-3-5000ep"].epochs == 5000
    assert (paper["sgd-lr1e-2-l2"].lr, paper["sgd-lr1e-2-l2"].l2) == (1e-2, 1e-2)
    assert paper["adam"].optimizer == "adam" and paper["adamw"].optimizer == "adamw"


def test_architectures_v1_preset_crosses_every_architecture_with_the_same_four_pipelines():
    """Issue 19's study: ResNet-9 and the four new architectures, each under the same 4 pipelines
    (only model and width differ between architectures), alpha 1 and 8 on every parameter, 4 seeds."""
    runs = SweepSpec.from_file("architectures-v1").expand()
    assert len(runs) == 5 * 4 * 2 * 4
    models = {r.config.model for r in runs}
    assert models == {"resnet9", "vit-tiny", "mlp-mixer", "nf-resnet", "mlp"}
    pipeline_fields = ("optimizer", "lr", "momentum", "l2", "weight_decay", "schedule", "epochs")
    pipelines: dict[str, set] = {}
    for r in runs:
        assert r.variant.startswith(r.config.model + "-")
        pipeline = r.variant[len(r.config.model) + 1 :]
        pipelines.setdefault(pipeline, set()).add(
            tuple(getattr(r.config, f) for f in pipeline_fields)
        )
        assert r.config.alpha_groups == ("all",) and r.config.dataset == "fashion-mnist"
    assert sorted(pipelines) == ["adam", "adamw", "sgd", "sgd-l2"]
    assert all(len(settings) == 1 for settings in pipelines.values()), pipelines
    for variant in {r.variant for r in runs}:
        points = {(r.config.alpha, r.config.seed) for r in runs if r.variant == variant}
        assert points == set(itertools.product((1.0, 8.0), range(4)))


#: The second design's intervention per architecture: (alphas, alpha_groups, run length in steps).
ARCHITECTURES_V2 = {
    "resnet9": ((1.0, 8.0), ("all",), 640),
    "vit-tiny": ((1.0, 4.0), ("residual_stream",), 640),
    "mlp-mixer": ((1.0, 8.0), ("residual_stream",), 640),
    "nf-resnet": ((1.0, 4.0), ("all",), 640),
    "mlp": ((1.0, 4.0), ("all",), 960),
}


def test_architectures_preset_gives_each_architecture_a_keep_and_a_forget_pipeline():
    """Issue 40's second design: per architecture one pipeline without decay (predicted to keep)
    and one AdamW pipeline (predicted to forget), the intervention fixed per architecture, 14 seeds,
    the fit threshold and the calibration in its [study] table."""
    spec = SweepSpec.from_file("architectures")
    runs = spec.expand()
    assert len(runs) == 5 * 2 * 2 * 14
    for model, (alphas, groups, steps) in ARCHITECTURES_V2.items():
        mine = [r for r in runs if r.config.model == model]
        variants = sorted({r.variant for r in mine})
        assert len(variants) == 2, variants
        decays = {r.variant: r.config.weight_decay + r.config.l2 for r in mine}
        assert sorted(v > 0 for v in decays.values()) == [False, True]
        for r in mine:
            assert r.config.alpha_groups == groups and r.config.total_steps == steps
        for variant in variants:
            points = {(r.config.alpha, r.config.seed) for r in mine if r.variant == variant}
            assert points == set(itertools.product(alphas, range(14)))
    assert spec.study == {"interpolation": 0.85, "calibrate": 2000}


# ====================================================================== the sweep folder
def test_manifest_records_hash_variant_and_run_folder(tmp_path):
    runs = prepare_sweep(SweepSpec.from_toml(SWEEP), tmp_path / "s")
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert [(e["hash"], e["variant"]) for e in manifest] == [(r.hash, r.variant) for r in runs]
    assert manifest[0]["config"]["out_dir"] == str(
        (tmp_path / "s" / "runs" / runs[0].hash).resolve()
    )
    assert RunConfig.from_dict(manifest[0]["config"]).hash == runs[0].hash
    assert (tmp_path / "s" / "sweep.toml").read_text() == SWEEP
    assert [r.hash for r in read_manifest(tmp_path / "s")] == [r.hash for r in runs]
    changed = SweepSpec.from_toml(SWEEP).with_grid({"seed": [5]})
    with pytest.raises(SweepError, match="holds a different sweep"):
        prepare_sweep(changed, tmp_path / "s")
    assert len(prepare_sweep(changed, tmp_path / "s", update=True)) == 6


def test_failures_and_divergence_are_recorded_and_the_sweep_goes_on(tmp_path):
    path = write_sweep(
        tmp_path,
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        epochs = 2
        [grid]
        alpha = [1.0, 100.0]
        lr = [0.1, 0.5]
        """,
    )
    out = tmp_path / "out"
    status = run_sweep(path, out, trainer=FAKE, workers=2, progress=False)
    assert (status.total, status.completed, status.diverged, status.failed) == (4, 1, 1, 2)
    assert status.pending == status.running == 0
    failed = [r for r in read_manifest(out) if r.config.lr == 0.5]
    for run in failed:
        assert "fake failure for lr = 0.5" in (run.run_dir(out) / "error.txt").read_text()
        assert run_state(run.run_dir(out)) == "failed"
    assert {f[2] for f in status.failures} == {"RuntimeError: fake failure for lr = 0.5"}
    # a rerun retries the failed runs only
    start = time.monotonic()
    run_sweep(path, out, trainer=FAKE, workers=2, progress=False)
    outer_s = time.monotonic() - start
    first, second = read_sessions(out)  # one record per call: what it found, trained, took
    assert (first.runs_before, first.runs_trained, first.ended_by) == (0, 4, "finished")
    assert (second.runs_before, second.runs_trained) == (2, 2)
    assert 0 < second.wall_s <= outer_s + 0.1
    assert 0 <= second.load_mean <= second.load_max and second.load_samples >= 2
    for run in read_manifest(out):
        starts = [line for line in journal(run.run_dir(out)) if line.startswith("start")]
        assert len(starts) == (2 if run.config.lr == 0.5 else 1)


def test_an_interrupted_call_is_recorded_and_the_sentence_sums_the_calls(tmp_path):
    path = write_sweep(
        tmp_path, "[base]\ndataset = 'cifar10-fixture'\nbatch_size = 4\nepochs = 1\n"
    )

    def interrupt(runs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(path, tmp_path / "out", trainer=FAKE, progress=False, before_training=interrupt)
    (record,) = read_sessions(tmp_path / "out")
    assert (record.runs_trained, record.ended_by) == (0, "interrupted")
    for _ in range(2):  # the second call finds every run finished: no record
        run_sweep(path, tmp_path / "out", trainer=FAKE, progress=False)
    first, second = read_sessions(tmp_path / "out")
    assert first == record and (second.runs_before, second.runs_trained) == (0, 1)
    # the sentence: wall time summed, load averaged over every sample, the highest load
    calls = [
        Session("2026-01-01T00:00:00+00:00", 600.0, 0, 10, 2.0, 3.0, 4, 2, "interrupted"),
        Session("2026-01-01T01:00:00+00:00", 300.0, 10, 5, 5.0, 6.5, 2, 2),
    ]
    text = sessions_sentence(calls)
    assert "took 15.0 minutes of wall time from an empty folder in 2 calls" in text
    assert "15 runs trained" in text and "load average of 3.0 on average and 6.5 at most" in text
    assert "1 of the calls ended early" in text and sessions_sentence([]) == ""
    (tmp_path / "out" / "sessions.jsonl").write_text('{"started": "x"}\nnot json\n')
    assert read_sessions(tmp_path / "out") == []  # a line cut short by a kill is skipped


def test_a_dying_worker_fails_only_the_run_it_started(tmp_path):
    """One worker, its next run queued behind the current one: when a run kills the worker, that run
    fails; the run queued behind it never started, so a fresh pool trains it (it does not fail)."""
    path = write_sweep(
        tmp_path,
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        epochs = 2
        [grid]
        lr = [0.125, 0.1]
        alpha = [1.0, 2.0, 4.0]
        """,
    )
    out = tmp_path / "out"
    status = run_sweep(path, out, trainer=FAKE, workers=1, progress=False)
    assert (status.total, status.completed, status.failed, status.pending) == (6, 3, 3, 0)
    for run in read_manifest(out):
        lines = journal(run.run_dir(out))
        assert [line.split()[0] for line in lines] == (
            ["start"] if run.config.lr == 0.125 else ["start", "done"]
        ), run.config
        if run.config.lr == 0.125:
            assert run_state(run.run_dir(out)) == "failed"
            assert "died abruptly" in (run.run_dir(out) / "error.txt").read_text()


def test_trainer_result_is_written_when_the_trainer_does_not(tmp_path):
    path = write_sweep(
        tmp_path, "[base]\ndataset='cifar10-fixture'\nbatch_size=4\n[grid]\nalpha=[3.0]\n"
    )
    status = run_sweep(
        path,
        tmp_path / "o",
        trainer="tests.empirical.fake_trainer:fake_train_no_result_file",
        progress=False,
    )
    assert status.completed == 1
    (run,) = read_manifest(tmp_path / "o")
    result = json.loads((run.run_dir(tmp_path / "o") / "result.json").read_text())
    assert result["test_acc"] == pytest.approx(0.3) and result["hash"] == run.hash


# ====================================================================== locks
def _try_lock_in_child(run_dir: Path) -> bool:
    code = (
        "import sys; from initmem.empirical.runfolder import run_lock\n"
        f"with run_lock({str(run_dir)!r}, wait_s=0.1) as ok: sys.exit(0 if ok else 3)"
    )
    return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_run_lock_excludes_other_processes_and_dies_with_its_holder(tmp_path):
    run_dir = tmp_path / "run"
    with run_lock(run_dir) as acquired:
        assert acquired
        assert lock_is_held(run_dir)
        assert not _try_lock_in_child(run_dir)
        assert run_state(run_dir) == "running"
    assert not lock_is_held(run_dir)
    assert _try_lock_in_child(run_dir)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from initmem.empirical.runfolder import run_lock\n"
            f"with run_lock({str(run_dir)!r}) as ok:\n    print(ok, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "True"
    assert lock_is_held(run_dir)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert not lock_is_held(run_dir)


def test_execute_run_skips_a_locked_run(tmp_path):
    (run,) = SweepSpec.from_toml(
        "[base]\ndataset='cifar10-fixture'\nbatch_size=4\nepochs=1\n"
    ).expand()
    task = run.task(tmp_path)
    with run_lock(task["run_dir"]):
        code = (
            "import json, sys; from initmem.empirical.workers import execute_run\n"
            f"print(json.dumps(execute_run(json.loads(sys.argv[1]), {FAKE!r})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(task)],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ | {"PYTHONPATH": str(REPO)},
        ).stdout
    assert json.loads(out)["status"] == "locked"
    assert journal(Path(task["run_dir"])) == []
    assert execute_run(task, FAKE)["status"] == "completed"
    assert execute_run(task, FAKE)["status"] == "completed"  # finished: not trained again
    assert journal(Path(task["run_dir"])) == ["start 0 pid " + str(os.getpid()), "done"]


def _start_driver(sweep: Path, out: Path, workers: int, step_s: float) -> subprocess.Popen:
    code = (
        "import sys; from initmem.empirical.sweep import run_sweep\n"
        f"run_sweep({str(sweep)!r}, {str(out)!r}, trainer={FAKE!r}, workers={workers}, "
        "progress=False)"
    )
    env = os.environ | {"PYTHONPATH": str(REPO), "FAKE_STEP_S": str(step_s)}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_kill_9_mid_sweep_then_rerun_loses_nothing_and_runs_nothing_twice(tmp_path):
    sweep = write_sweep(
        tmp_path,
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        epochs = 12
        [grid]
        alpha = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
        """,
    )
    out = tmp_path / "out"
    driver = _start_driver(sweep, out, workers=2, step_s=0.05)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once some runs are done and others half-way
        done = list(out.glob("runs/*/result.json"))
        partial = [p for p in out.glob("runs/*/last.pt") if not (p.parent / "result.json").exists()]
        if len(done) >= 2 and partial:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the sweep made no progress")
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    finished_before = {p.parent.name for p in out.glob("runs/*/result.json")}
    runs = read_manifest(out)
    deadline = time.monotonic() + 20  # the workers die with the driver and free their locks
    while any(lock_is_held(r.run_dir(out)) for r in runs):
        assert time.monotonic() < deadline, "a worker outlived the killed driver"
        time.sleep(0.05)
    status = sweep_status(out)
    assert status.done == len(finished_before) and status.running == 0
    assert status.resumable >= 1

    status = run_sweep(sweep, out, trainer=FAKE, workers=2, progress=False)
    assert status.completed == len(runs) == 6
    resumed = 0
    for run in runs:
        lines = journal(run.run_dir(out))
        starts = [int(line.split()[1]) for line in lines if line.startswith("start")]
        assert lines.count("done") == 1, (run.hash, lines)
        if run.hash in finished_before:
            assert starts == [0]
        else:
            assert 1 <= len(starts) <= 2 and starts[0] == 0
            resumed += len(starts) == 2 and starts[1] > 0
    assert resumed >= 1, "the interrupted run resumed from its checkpoint"


def test_two_drivers_on_one_folder_share_the_runs(tmp_path):
    sweep = write_sweep(
        tmp_path,
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        epochs = 5
        [grid]
        alpha = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
        """,
    )
    out = tmp_path / "out"
    prepare_sweep(SweepSpec.from_file(sweep), out)
    drivers = [_start_driver(sweep, out, workers=1, step_s=0.04) for _ in range(2)]
    assert [d.wait(timeout=120) for d in drivers] == [0, 0]
    # a run skipped as locked by one driver may still have been running when it finished: settle
    assert run_sweep(sweep, out, trainer=FAKE, workers=1, progress=False).completed == 6
    for run in read_manifest(out):
        assert journal(run.run_dir(out)).count("done") == 1
        assert sum(line.startswith("start") for line in journal(run.run_dir(out))) == 1


def test_runs_per_gpu_pins_each_worker_to_one_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("FAKE_STEP_S", "0.05")
    sweep = write_sweep(
        tmp_path,
        "[base]\ndataset='cifar10-fixture'\nbatch_size=4\nepochs=4\n"
        "[grid]\nalpha=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]\n",
    )
    out = tmp_path / "out"
    status = run_sweep(sweep, out, trainer=FAKE, runs_per_gpu=2, progress=False)
    assert status.completed == 8
    seen = [json.loads((r.run_dir(out) / "result.json").read_text()) for r in read_manifest(out)]
    assert {s["env_gpu"] for s in seen} <= {"0", "1"}  # 4 workers (2 GPUs x 2), one GPU each
    from initmem.empirical.backends import available_cpus, gpu_for_slot

    assert {s["env_threads"] for s in seen} == {str(max(1, available_cpus() // 4))}

    assert [gpu_for_slot(slot, ["0", "1"], 2) for slot in range(4)] == ["0", "0", "1", "1"]
    assert [gpu_for_slot(slot, ["3"], 3) for slot in range(3)] == ["3", "3", "3"]


# ====================================================================== backends: one smoke test
TINY = """
name = "tiny"
[base]
dataset = "cifar10-fixture"
data_dir = "{data}"
train_size = 8
val_size = 4
batch_size = 4
width = 0.0625
epochs = 1
device = "cpu"
track_grad_norms = false
[grid]
alpha = [0.5, 2.0]
"""


@pytest.mark.parametrize("backend", ["local", "submitit", "ray"])
def test_every_backend_trains_a_tiny_sweep_and_resumes(tmp_path, importable, backend):
    from initmem.empirical.data import write_cifar10_fixture

    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    sweep = write_sweep(tmp_path, TINY.format(data=tmp_path / "data"))
    out = tmp_path / "out"
    options = {"cluster": "local", "timeout_min": 10} if backend == "submitit" else {}
    status = run_sweep(
        sweep, out, backend=backend, workers=2, progress=False, backend_options=options
    )
    assert (status.completed, status.failed, status.total) == (2, 0, 2), status.failures
    for run in read_manifest(out):
        run_dir = run.run_dir(out)
        result = json.loads((run_dir / "result.json").read_text())
        assert result["hash"] == run.hash and result["epochs_run"] == 1
        assert json.loads((run_dir / "config.json").read_text())["hash"] == run.hash
        assert (run_dir / "metrics.parquet").is_file() and (run_dir / "predictions.npz").is_file()
    mtimes = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}
    status = run_sweep(
        sweep, out, backend=backend, workers=2, progress=False, backend_options=options
    )
    assert status.completed == 2
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")} == mtimes


def test_cached_data_gives_the_numbers_of_a_fresh_run(tmp_path):
    """Workers reuse the data splits of their previous run; the results must not notice."""
    from unittest import mock

    from initmem.empirical import data as data_module
    from initmem.empirical.data import write_cifar10_fixture
    from initmem.empirical.trainer import train

    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    spec = SweepSpec.from_toml(TINY.format(data=tmp_path / "data"))
    first, second = spec.expand()
    data_module.clear_data_cache()
    with mock.patch.object(data_module, "load_splits", wraps=data_module.load_splits) as loads:
        for run in (first, second):
            assert execute_run(run.task(tmp_path / "s"))["status"] == "completed"
    assert loads.call_count == 1  # loaded once, reused by the second run
    data_module.clear_data_cache()
    cached = json.loads((second.run_dir(tmp_path / "s") / "result.json").read_text())
    fresh = train(second.config.replace(out_dir=str(tmp_path / "fresh"), quiet=True))
    for key in ("best_val_acc", "test_acc", "final_train_acc", "final_test_acc", "steps_run"):
        assert cached[key] == getattr(fresh, key), key
    last_cached = journal_records(second.run_dir(tmp_path / "s"))[-1]
    last_fresh = journal_records(tmp_path / "fresh")[-1]
    assert last_cached["weight_norm"] == last_fresh["weight_norm"]  # bitwise: same data, same steps
    assert last_cached["train_loss"] == last_fresh["train_loss"]


def journal_records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


@pytest.mark.gpu
def test_runs_share_a_gpu(tmp_path, importable):
    from initmem.empirical.data import write_cifar10_fixture

    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    text = TINY.format(data=tmp_path / "data").replace('device = "cpu"', 'device = "cuda"')
    sweep = write_sweep(tmp_path, text)
    status = run_sweep(sweep, tmp_path / "out", runs_per_gpu=2, progress=False)
    assert (status.completed, status.failed) == (2, 0), status.failures


def test_submitit_packs_runs_per_gpu_into_one_array_task_and_requeues_them(tmp_path, importable):
    from initmem.empirical.backends import RunGroup

    sweep = write_sweep(
        tmp_path,
        "[base]\ndataset='cifar10-fixture'\nbatch_size=4\nepochs=2\n"
        "[grid]\nalpha=[0.5, 1.0, 2.0, 4.0]\n",
    )
    out = tmp_path / "out"
    status = run_sweep(
        sweep,
        out,
        backend="submitit",
        runs_per_gpu=2,
        trainer=FAKE,
        progress=False,
        backend_options={"cluster": "local", "timeout_min": 5},
    )
    assert (status.completed, status.failed) == (4, 0), status.failures
    # two array tasks of two runs each, each task with a pool of two workers: the runs ran outside
    # this process, in at least two processes (a fast worker may take both runs of its task)
    pids = {journal(r.run_dir(out))[0].split()[-1] for r in read_manifest(out)}
    assert str(os.getpid()) not in pids
    assert 2 <= len(pids) <= 4
    assert len(list((out / "submitit").glob("*_submitted.pkl"))) == 2
    group = RunGroup(FAKE)
    tasks = [r.task(out) for r in read_manifest(out)[:2]]
    resubmission = group.checkpoint(tasks)  # what submitit requeues on timeout or preemption
    assert resubmission.function is group and resubmission.args == (tasks,)


# ====================================================================== packed runs
def test_pack_tasks_groups_runs_that_differ_only_in_alpha_and_seed(tmp_path):
    spec = SweepSpec.from_toml(textwrap.dedent(SWEEP))
    tasks = [run.task(tmp_path) for run in spec.expand()]
    assert pack_tasks(tasks, 1) == tasks
    packed = pack_tasks(tasks, 4)
    sizes = sorted((t["variant"], len(t.get("pack", [t]))) for t in packed)
    assert sizes == [("adam", 3), ("sgd", 2), ("sgd", 4)]  # sgd: 3 alphas x 2 seeds; adam: 3 x 1
    members = [m for t in packed for m in t["pack"]]
    assert sorted(m["hash"] for m in members) == sorted(t["hash"] for t in tasks)
    for task in packed:
        first = task["pack"][0]["config"]
        for member in task["pack"]:
            differ = {k for k in first if member["config"][k] != first[k]}
            assert differ <= {"alpha", "seed", "out_dir"}
        order = [tasks.index(m) for m in task["pack"]]
        assert order == sorted(order)  # the sweep's order within a pack


def test_pack_needs_a_positive_size_and_the_default_trainer(tmp_path):
    path = write_sweep(tmp_path)
    with pytest.raises(SweepError, match="pack must be a positive integer"):
        run_sweep(path, tmp_path / "o", pack=0, progress=False)
    with pytest.raises(SweepError, match="pack > 1 trains with initmem's own trainer"):
        run_sweep(path, tmp_path / "o", pack=2, trainer=FAKE, progress=False)


def test_a_packed_sweep_writes_the_runs_of_an_unpacked_one(tmp_path, capsys):
    """pack = 2 trains the two runs of the tiny sweep as one packed computation: the same run folders
    as the unpacked sweep's, in float64 every number within float64 rounding carried through the run
    (``RUN_RTOL``, tests/empirical/rounding.py); a pack whose first run is finished trains only the
    second."""
    from initmem.empirical.data import write_cifar10_fixture

    write_cifar10_fixture(tmp_path / "data" / "cifar10-fixture")
    spec = SweepSpec.from_toml(TINY.format(data=tmp_path / "data"))
    spec = spec.with_overrides({"lr": 0.002, "precision": "fp64"})
    packed = run_sweep(spec, tmp_path / "packed", pack=2, workers=1, progress=True)
    bar = capsys.readouterr().err
    assert "2/2" in bar and "3/2" not in bar and "0/2" in bar  # the bar counts runs, not packs
    alone = run_sweep(spec, tmp_path / "alone", workers=1, progress=False)
    assert packed.completed == alone.completed == 2
    references = {}
    for run in read_manifest(tmp_path / "packed"):
        a = journal_records(run.run_dir(tmp_path / "packed"))
        b = journal_records(run.run_dir(tmp_path / "alone"))
        assert [r["epoch"] for r in a] == [r["epoch"] for r in b] == [0, 1]
        references[run.hash] = reference_of(run.run_dir(tmp_path / "alone"))
        assert_same_run(references[run.hash], run.run_dir(tmp_path / "packed"))

    first, second = read_manifest(tmp_path / "packed")
    kept = (first.run_dir(tmp_path / "packed") / "result.json").stat().st_mtime_ns
    for path in second.run_dir(tmp_path / "packed").iterdir():
        if path.is_file() and path.name != ".lock":
            path.unlink()
    task = pack_tasks([first.task(tmp_path / "packed"), second.task(tmp_path / "packed")], 2)[0]
    outcomes = execute_pack(task)
    assert [o["hash"] for o in outcomes] == [first.hash, second.hash]
    assert [o["status"] for o in outcomes] == ["completed", "completed"]
    assert (first.run_dir(tmp_path / "packed") / "result.json").stat().st_mtime_ns == kept
    assert_same_run(references[second.hash], second.run_dir(tmp_path / "packed"))


def test_expansion_is_lazy_and_counted_without_expanding(capsys):
    """A grid of 10^12 runs: counted exactly, its first runs validated without building the rest."""
    axis = list(range(10**6))
    spec = SweepSpec.from_dict(
        {
            "base": {"dataset": "cifar10-fixture", "batch_size": 4},
            "grid": {"seed": axis, "split_seed": axis},
        }
    )
    assert spec.count() == 10**12
    first = list(itertools.islice(spec.iter_runs(progress=False), 3))
    assert [(r.config.seed, r.config.split_seed) for r in first] == [(0, 0), (0, 1), (0, 2)]
    assert [r.hash for r in first] == [r.config.hash for r in first]

    small = SweepSpec.from_toml(SWEEP)
    assert [r.hash for r in small.iter_runs(progress=True)] == [r.hash for r in small.expand()]
    assert f"expanding sweep {small.name}" in capsys.readouterr().err


def test_a_script_without_the_main_guard_is_one_clear_error_not_a_restart_loop(tmp_path):
    """Issue 37, 5: ``run_sweep`` at a script's top level. The spawned worker re-imports the script,
    whose run_sweep refuses to start a sweep inside a starting worker; the driver stops after
    ``WORKER_START_ATTEMPTS`` pools with one error naming the guard (it restarted forever before)."""
    path = write_sweep(
        tmp_path,
        """
        [base]
        dataset = "cifar10-fixture"
        batch_size = 4
        epochs = 1
        [grid]
        alpha = [1.0, 2.0]
        """,
    )
    script = tmp_path / "no_guard.py"
    script.write_text(
        "from initmem.empirical.sweep import run_sweep\n"
        f"run_sweep({str(path)!r}, {str(tmp_path / 'out')!r}, trainer={FAKE!r}, workers=1, "
        "progress=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "SweepError: the sweep's worker processes died 3 times before taking any run" in last
    assert 'if __name__ == "__main__":' in last
    assert "run_sweep was called while a sweep worker process was starting" in done.stderr
    assert time.monotonic() - started < 300
    guarded = tmp_path / "guard.py"
    body = script.read_text().splitlines()
    guarded.write_text(f'{body[0]}\nif __name__ == "__main__":\n    {body[1]}\n')
    assert subprocess.run([sys.executable, str(guarded)], env=env, timeout=300).returncode == 0


def test_calls_at_the_same_time_count_their_overlap_once_and_no_run_twice(tmp_path):
    """Issue 37, Low: two concurrent ``sweep run`` calls on a 16-run sweep were stated as "28 runs
    trained" and the sum of both calls' times. The time now covers the union of the calls (an
    independent count: 0-600 s and 300-900 s cover 900 s), and a run that another driver finished
    is not counted as trained by this one."""
    calls = [
        Session("2026-01-01T00:00:00+00:00", 600.0, 0, 10, 2.0, 3.0, 4, 2),
        Session("2026-01-01T00:05:00+00:00", 600.0, 0, 6, 2.0, 3.0, 4, 2),
        Session("2026-01-01T02:00:00+00:00", 60.0, 16, 0, 2.0, 3.0, 4, 2),
    ]
    text = sessions_sentence(calls)
    assert "took 16.0 minutes of wall time" in text and "16 runs trained" in text
    assert "Some calls ran at the same time" in text
    path = write_sweep(
        tmp_path, "[base]\ndataset = 'cifar10-fixture'\nbatch_size = 4\n[grid]\nseed = [0, 1]\n"
    )
    out = tmp_path / "out"

    def other_driver(runs):  # trains the first run after this call listed it as unfinished
        execute_run(runs[0].task(out), FAKE)

    status = run_sweep(path, out, trainer=FAKE, progress=False, before_training=other_driver)
    assert status.completed == 2
    (record,) = read_sessions(out)
    assert (record.runs_before, record.runs_trained) == (0, 1)
