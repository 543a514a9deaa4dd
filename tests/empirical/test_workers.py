"""Loading a sweep's trainer from its ``module:function`` string, the sweep's argument errors, and the
names that moved out of ``sweep`` (execute_run and friends are tested in test_sweep.py)."""

from __future__ import annotations

import pytest

from initmem.empirical import backends
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepError, SweepSpec, run_sweep
from initmem.empirical.tables import load_sweep
from initmem.empirical.workers import DEFAULT_TRAINER, TRAINER_ALIASES, resolve_trainer
from tests.empirical.fake_trainer import FAKE, fake_train
from tests.empirical.test_sweep import SWEEP, importable  # noqa: F401


def test_a_trainer_string_names_a_module_function_or_an_attribute_path():
    assert resolve_trainer(FAKE) is fake_train
    assert resolve_trainer(fake_train) is fake_train
    assert resolve_trainer("initmem.empirical.tables:load_sweep") is load_sweep
    # no module initmem.empirical.RunConfig: the class is an attribute of the package
    assert resolve_trainer("initmem.empirical.RunConfig:from_dict") == RunConfig.from_dict


def test_the_old_default_trainer_string_resolves_to_the_default_trainer():
    old = "initmem.empirical.train:train"
    assert resolve_trainer(old) is resolve_trainer(DEFAULT_TRAINER)
    assert callable(resolve_trainer(DEFAULT_TRAINER))


def test_an_alias_is_used_when_the_string_no_longer_resolves(monkeypatch):
    moved = "tests.empirical.no_such_module:fake_train"
    with pytest.raises(ModuleNotFoundError):
        resolve_trainer(moved)
    monkeypatch.setitem(TRAINER_ALIASES, moved, FAKE)
    assert resolve_trainer(moved) is fake_train


def test_trainer_strings_that_do_not_resolve_raise_and_the_sweep_says_why(tmp_path):
    with pytest.raises(ValueError, match="module:function"):
        resolve_trainer("no_colon")
    with pytest.raises(ModuleNotFoundError):
        resolve_trainer("no_such_package.module:train")
    with pytest.raises(AttributeError):
        resolve_trainer("initmem.empirical.config:no_such_function")
    spec = SweepSpec.from_toml(SWEEP)
    with pytest.raises(SweepError, match="cannot load trainer 'no_such_package.module:train'"):
        run_sweep(spec, tmp_path / "s", trainer="no_such_package.module:train", progress=False)
    assert not (tmp_path / "s").exists()  # refused before anything was written


def test_a_backend_whose_package_is_missing_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(backends.OPTIONAL_PACKAGES, "ray", "no_such_package_for_ray")
    assert backends.missing_package("local") is None
    spec = SweepSpec.from_toml(SWEEP)
    with pytest.raises(SweepError, match="the ray backend needs no_such_package_for_ray"):
        run_sweep(spec, tmp_path / "s", backend="ray", trainer=FAKE, progress=False)
    assert not (tmp_path / "s").exists()


@pytest.mark.usefixtures("importable")
def test_a_worker_that_imports_torch_for_its_trainer_gets_the_threads_asked(tmp_path, monkeypatch):
    """A local worker imports torch only with its trainer (a fake trainer pays no torch import);
    torch then reads the thread variables the worker set: cpus 1 // 1 worker = 1 thread, not the
    2 the driver's environment says."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    spec = SweepSpec.from_toml("[base]\ndataset='cifar10-fixture'\nbatch_size=4\n")
    trainer = "tests.empirical.fake_trainer:torch_threads_train"
    options = {"cpus": 1}
    status = run_sweep(
        spec, tmp_path / "s", trainer=trainer, workers=1, progress=False, backend_options=options
    )
    assert status.completed == 1
    assert load_sweep(tmp_path / "s")["test_acc"].tolist() == [1.0]  # 1 / threads
