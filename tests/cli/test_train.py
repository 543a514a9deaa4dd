"""``initmem train``: config file + overrides -> a run folder; bad input -> one line and status 2."""

import argparse
import json

import pytest
import torch

from initmem.cli import main
from initmem.cli import train as train_cli
from initmem.empirical.data import write_cifar10_fixture


@pytest.fixture
def parser():
    parser = argparse.ArgumentParser(prog="initmem")
    train_cli.register(parser.add_subparsers(dest="command"))
    return parser


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_cifar10_fixture(root / "cifar10-fixture")
    return root


@pytest.fixture
def config_file(tmp_path, data_dir):
    path = tmp_path / "run.toml"
    path.write_text(
        'dataset = "cifar10-fixture"\n'
        f'data_dir = "{data_dir}"\n'
        "width = 0.0625\nbatch_size = 4\nepochs = 1\nlr = 0.05\n"
    )
    return path


@pytest.fixture(autouse=True)
def single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(parser, argv):
    """``initmem ARGV`` through the command's error wrapper (``parser`` parses it the same way)."""
    parser.parse_args(argv)
    return main(argv)


def test_train_writes_the_run_and_prints_its_result(parser, config_file, tmp_path, capsys):
    out = tmp_path / "my run"
    argv = [
        "train",
        "--config",
        str(config_file),
        "--set",
        "alpha=0.5",
        "--out",
        str(out),
        "--quiet",
    ]
    assert _run(parser, argv) == 0
    printed = capsys.readouterr().out
    assert "completed after 1 epochs" in printed and str(out) in printed
    result = json.loads((out / "result.json").read_text())
    config = json.loads((out / "config.json").read_text())["config"]
    assert result["status"] == "completed" and result["epochs_run"] == 1
    assert config["alpha"] == 0.5 and config["out_dir"] == str(out) and config["quiet"] is True

    # a plain rerun reports the finished run (nothing retrained), as does --resume
    stamp = (out / "result.json").stat().st_mtime_ns
    for again in (argv, [*argv, "--resume"]):
        assert _run(parser, again) == 0
        assert "completed after 1 epochs" in capsys.readouterr().out
    assert (out / "result.json").stat().st_mtime_ns == stamp
    # an unfinished run is refused without --resume
    (out / "result.json").unlink()
    assert _run(parser, argv) == 2
    assert "already holds an unfinished run; resume it (--resume)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("alpha=0", "alpha"),
        ("lr=-1", "lr"),
        ("optimizer=lion", "optimizer"),
        ("alpha_groups=conv,fc", "alpha_groups"),
        ("batch_size=64", "batch_size"),  # the fixture's training split holds 16 images
        ("learning_rate=0.1", "learning_rate"),
        ("loss=l1", "loss"),
        ("model_args.depth=4", "model_args"),  # resnet9 is no plug-in: it takes no arguments
    ],
)
def test_bad_config_is_one_line_naming_the_field(
    parser, config_file, tmp_path, capsys, override, field
):
    out = tmp_path / "never"
    argv = ["train", "--config", str(config_file), "--set", override, "--out", str(out)]
    assert _run(parser, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and field in err
    assert not out.exists()  # nothing was started


def test_train_with_the_squared_error(parser, config_file, tmp_path, capsys):
    """``initmem train --set loss=mse`` trains; the run records the loss and its hash differs."""
    argv = ["train", "--config", str(config_file), "--set", "loss=mse", "--quiet"]
    assert _run(parser, [*argv, "--out", str(tmp_path / "mse")]) == 0
    assert "completed after 1 epochs" in capsys.readouterr().out
    mse = json.loads((tmp_path / "mse" / "config.json").read_text())
    assert mse["config"]["loss"] == "mse"
    log = [json.loads(line) for line in (tmp_path / "mse" / "log.jsonl").read_text().splitlines()]
    assert 0.02 < log[0]["val_loss"] < 0.5  # |f - e_y|^2 / 2K at init, near 1/20; not ln 10


def test_missing_data_is_an_error_not_a_traceback(parser, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("INITMEM_DATA", str(tmp_path / "cache"))
    monkeypatch.setattr("initmem.empirical.data.DEBIAN_FASHION_MNIST", tmp_path / "none")
    monkeypatch.setenv("INITMEM_OFFLINE", "1")
    (tmp_path / "empty").mkdir()
    argv = ["train", "--set", f"data_dir={tmp_path / 'empty'}", "--out", str(tmp_path / "run")]
    assert _run(parser, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Fashion-MNIST not found") and "dataset-fashion-mnist" in err
