"""``initmem theory`` and the sweep's dry run on extreme input: every numeric option range-checked
before any work (one ``error:`` line naming the option and its range), the per-step schedule bounded
before it is allocated, and a law used outside its stated range carries a caveat in the output."""

import json

import pytest

from initmem.cli import main
from initmem.theory.normalized import SGD_SMALL_STEP_LIMIT
from initmem.theory.schedule import MAX_SCHEDULE_STEPS, lr_multipliers

CONFIG = 'dataset = "cifar10"\nepochs = 10\n'


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--alpha", "1e300"], "alpha must be finite and >= 1e-06 and < 1000000.0 (got 1e+300)"),
        (["--alpha", "1e-7"], "alpha must be finite and >= 1e-06"),
        (["--alpha", "nan"], "alpha must be finite"),
        (["--set", "lr=1e300"], "lr must be finite and > 0.0 and < 1000000.0 (got 1e+300)"),
        (["--logit-scale", "0"], "logit_scale must be finite and > 0.0 (got 0.0)"),
        (["--logit-scale", "-1"], "logit_scale must be finite and > 0.0 (got -1.0)"),
        (["--equilibrium-logit-scale", "nan"], "equilibrium_logit_scale must be finite and > 0.0"),
        (["--equilibrium-logit-scale", "inf"], "equilibrium_logit_scale must be finite and > 0.0"),
        (["--equilibrium-gain", "0"], "equilibrium_gain must be finite and > 0.0"),
        (["--tol", "-1"], "tol must be finite and > 0.0"),
        (["--grad-sq-unit", "-1"], "grad_sq_unit must be finite and >= 0.0"),
    ],
)
def test_out_of_range_options_are_one_line(config_file, capsys, argv, message):
    assert main(["theory", "--config", str(config_file), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {message}")


def test_a_schedule_longer_than_the_bound_fails_before_allocating(tmp_path, capsys):
    """10^10 steps (40,000 images at batch 4 for 10^6 epochs) would need 74.5 GiB per array."""
    long = ["--set", "train_size=40000", "--set", "batch_size=4", "--set", "epochs=1000000"]
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    assert main(["theory", "--config", str(config), *long]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: total_steps must be <= {MAX_SCHEDULE_STEPS:,} (got 10,000,000,000): the schedule "
        "is expanded one float64 per step, 74.5 GiB per array here; shorten the run (epochs) or "
        "raise batch_size\n"
    )
    sweep = tmp_path / "long.toml"
    sweep.write_text(
        'name = "long"\n[base]\ndataset = "cifar10"\ntrain_size = 40000\nbatch_size = 4\n'
        "epochs = 1000000\n[grid]\nalpha = [0.5, 2.0]\n"
    )
    assert main(["sweep", "run", str(sweep), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: total_steps must be <=") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
    assert len(lr_multipliers(MAX_SCHEDULE_STEPS // 1000, 10)) == MAX_SCHEDULE_STEPS // 1000


def test_a_law_outside_its_range_carries_a_caveat(config_file, capsys):
    """SGD at lr 5 with momentum 0.9: the |w|^4 law's step exceeds its small-step limit; the caveat
    is in the output (text and JSON), once."""
    argv = ["theory", "--config", str(config_file), "--set", "lr=5", "--set", "momentum=0.9"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    caveats = [line for line in out.splitlines() if line.startswith("note: caveat:")]
    assert len(caveats) == 1 and f"exceeds {SGD_SMALL_STEP_LIMIT}" in caveats[0]
    assert main([*argv, "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert [n for n in notes if n.startswith("caveat:")] == [caveats[0][len("note: ") :]]
    assert main(["theory", "--config", str(config_file), "--json"]) == 0
    assert not [n for n in json.loads(capsys.readouterr().out)["notes"] if "caveat" in n]
