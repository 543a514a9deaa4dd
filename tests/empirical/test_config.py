"""RunConfig: loading, overrides, hashing and validation (errors name the field and its range)."""

import json

import pytest

from initmem.empirical.config import ConfigError, RunConfig, config_hash, parse_overrides


def test_from_file_and_overrides(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'dataset = "cifar10"\nalpha = 2.0\nalpha_groups = ["conv", "head"]\nlr = 0.01\n'
    )
    cfg = RunConfig.from_file(path, ["alpha=0.5", "optimizer=adam", "betas=[0.8, 0.99]"])
    assert cfg.dataset == "cifar10"
    assert cfg.alpha == 0.5
    assert cfg.alpha_groups == ("conv", "head")
    assert cfg.optimizer == "adam"
    assert cfg.betas == (0.8, 0.99)
    assert cfg.lr == 0.01


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0.5", 0.5),
        ("3", 3),
        ("true", True),
        ("adam", "adam"),
        ("conv,bn", ["conv", "bn"]),
        ("[1, 2]", [1, 2]),
        ("none", None),
    ],
)
def test_override_values(raw, expected):
    assert parse_overrides([f"x={raw}"]) == {"x": expected}


def test_paper_split_sizes():
    cfg = RunConfig(dataset="cifar10", batch_size=128, epochs=300)
    assert (cfg.resolved_train_size, cfg.resolved_val_size) == (40_000, 10_000)
    assert cfg.steps_per_epoch == 40_000 // 128
    assert cfg.total_steps == 300 * 312


def test_steps_override_epochs():
    cfg = RunConfig(dataset="cifar10-fixture", batch_size=4, steps=10)
    assert cfg.steps_per_epoch == 4
    assert (cfg.total_steps, cfg.total_epochs) == (10, 3)


def test_hash_ignores_paths_and_presentation():
    a = RunConfig(out_dir="a", quiet=True)
    b = RunConfig(out_dir="b", quiet=False, data_dir="/elsewhere")
    assert a.hash == b.hash
    assert RunConfig(alpha=2.0).hash != a.hash
    assert a.hash == config_hash(json.loads(json.dumps(a.to_dict())))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["lr=-0.1"], "lr must be > 0"),
        (["lr=0"], "lr must be > 0"),
        (["alpha=0"], "alpha must be > 0"),
        (["lrr=0.1"], "unknown config field 'lrr' (did you mean 'lr'?)"),
        (["optimizer=adagrad"], "optimizer must be one of"),
        (["alpha_groups=conv,weights"], "alpha_groups must be one of"),
        (
            ["train_size=100", "batch_size=128"],
            "batch_size must be at most the training set size 100",
        ),
        (["momentum=1.0"], "momentum must satisfy 0 <= momentum < 1"),
        (["l2=-1e-4"], "l2 must satisfy l2 >= 0"),
        (["epochs=2.5"], "epochs must be an integer"),
        (["nesterov=true"], "nesterov needs"),
        (["dataset=cifar10", "train_size=45000"], "train_size must be at most 40000"),
        (["augment=maybe"], "augment must be true or false"),
        (["seed=-1"], "seed must satisfy 0 <= seed < 2**32 (got -1)"),
        (["epochs=2", "warmup_epochs=3"], "warmup_epochs must be in [0, 2]"),
        (["steps=10", "batch_size=4", "dataset='cifar10-fixture'", "warmup_epochs=3"], "[0, 2.5]"),
        (["split_seed=4294967296"], "split_seed must satisfy 0 <= split_seed < 2**32"),
        (["milestone_epochs=[3]"], "milestone_epochs [3] need schedule = 'step'"),
        (["schedule='cosine'", "milestone_epochs=[3]"], "(got schedule = 'cosine')"),
        (["learning_rate=0.1"], "unknown config field 'learning_rate' (did you mean 'lr'?)"),
        (["bs=64"], "unknown config field 'bs' (did you mean 'batch_size'?)"),
        (["wd=5e-4"], "did you mean 'l2' (coupled: torch SGD's weight_decay"),
        (["wd=5e-4"], "or 'weight_decay' (decoupled"),
        (["out_dir=''"], "out_dir must name a folder (got an empty path)"),
        (["data_dir=''"], "data_dir must name a folder or be left out"),
    ],
)
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_file(None, overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        RunConfig.from_file(tmp_path / "nope.toml")


@pytest.mark.parametrize("text", ["", "\n# only a comment\n"])
def test_empty_config_file_is_an_error(tmp_path, text):
    path = tmp_path / "empty.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"empty.toml sets no field \(empty\)"):
        RunConfig.from_file(path)
