"""``initmem bridge DIR``: tables and figures for a sweep folder, and clear errors."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from initmem.cli import main
from initmem.empirical.curves import SCALE_INVARIANT_MEAN
from tests.bridge.synthetic import STEPS_PER_EPOCH, known_pipelines, write_synthetic_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return write_synthetic_sweep(
        tmp_path_factory.mktemp("cli_sweep"), known_pipelines()[:3], seeds=(0, 1)
    )


def test_bridge_writes_fit_and_units(sweep, tmp_path, capsys):
    out = tmp_path / "bridge"
    assert main(["bridge", str(sweep), "--out", str(out), "--n-boot", "10"]) == 0
    printed = capsys.readouterr().out
    assert "norm-memory forgetting time" in printed and "unit of forgetting" in printed
    fits = pd.read_csv(out / "fit.csv")
    assert {"relation", "slope", "intercept", "r2"} <= set(fits.columns)
    # 3 pipelines with norm times tau = 4 / (lr wd) steps, logged every STEPS_PER_EPOCH steps: the
    # one decision (the first evaluation at or below 1/e) finds each within one evaluation of tau
    # (seed noise at the threshold decides which side), and its interval holds tau
    times = pd.read_csv(out / "norm_times.csv")
    times = times[times["layer"] == SCALE_INVARIANT_MEAN].merge(
        pd.read_csv(out / "pipelines.csv")[["pipeline", "lr", "weight_decay"]], on="pipeline"
    )
    tau = 4.0 / (times["lr"] * times["weight_decay"])
    assert len(times) == 3 and (times["state"] == "forgotten").all()
    assert (abs(times["tau_steps"] - tau) <= STEPS_PER_EPOCH + 1e-9).all()
    assert ((times["tau_lo_steps"] <= tau + 1e-9) & (tau - 1e-9 <= times["tau_hi_steps"])).all()
    # so the norm ~ accumulated fit has slope 1 within the grid's error: ln-error at most
    # ln(1 + 40 / 200) per time, over the ln 2 that the predicted times span
    row = fits[(fits["measured"] == "norm") & (fits["predicted"] == "accumulated")].iloc[-1]
    grid_error = 2 * np.log(1 + STEPS_PER_EPOCH / tau.min()) / np.log(tau.max() / tau.min())
    assert row["slope"] == pytest.approx(1.0, abs=grid_error)
    units = pd.read_csv(out / "units.csv")
    assert {"unit", "r2", "memory"} <= set(units.columns)
    assert {"epochs", "steps", "explicit", "sgd_noise", "accumulated"} <= set(units["unit"])
    assert (out / "report.md").is_file() and (out / "norm_memory.png").is_file()


def test_default_out_is_inside_the_sweep(sweep, capsys):
    assert main(["bridge", str(sweep), "--n-boot", "0", "--no-figures", "--no-groups"]) == 0
    assert (sweep / "bridge" / "units.csv").is_file()
    assert not list((sweep / "bridge").glob("*.png"))


def test_one_alpha_says_what_is_missing(tmp_path, capsys):
    root = write_synthetic_sweep(tmp_path / "s", known_pipelines()[:1], alphas=(1.0,), seeds=(0,))
    assert main(["bridge", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "only one alpha" in err and "add a second alpha" in err


def test_not_a_sweep_folder(tmp_path, capsys):
    assert main(["bridge", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    assert main(["bridge", str(tmp_path), "--n-boot", "-1"]) == 2


def test_every_run_diverged_at_its_first_epoch_is_one_line(tmp_path, capsys):
    """Diverged runs whose logs end at the evaluation at init: nothing to fit, one line."""
    root = write_synthetic_sweep(tmp_path / "s", known_pipelines()[:2], seeds=(0, 1))
    for path in root.glob("runs/*/result.json"):
        result = json.loads(path.read_text()) | {"status": "diverged", "reason": "loss is nan"}
        path.write_text(json.dumps(result))
    for path in root.glob("runs/*/*.parquet"):
        table = pd.read_parquet(path)
        table[table["epoch"] == 0].to_parquet(path)
    for path in root.glob("runs/*/log.jsonl"):  # every file of the run ends at init
        path.write_text(path.read_text().splitlines(keepends=True)[0])
    for path in root.glob("runs/*/predictions.npz"):
        path.unlink()
    assert main(["bridge", str(root), "--n-boot", "0", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no run has an evaluation after init (8 finished runs, 8 diverged")
    assert err.count("\n") == 1


def test_bridge_of_run_folders_fits_as_of_their_sweep(sweep, tmp_path, capsys):
    """``initmem bridge RUN RUN ...``: the sweep's run folders, moved out of it, give the same fit."""
    moved = tmp_path / "moved"
    for run_dir in (sweep / "runs").iterdir():
        shutil.copytree(run_dir, moved / run_dir.name)
    folders = [str(p) for p in sorted(moved.iterdir())]
    out = tmp_path / "from_runs"
    assert (
        main(
            ["bridge", *folders, "--out", str(out), "--n-boot", "0", "--no-figures", "--no-groups"]
        )
        == 0
    )
    assert (
        main(["bridge", str(sweep), "--out", str(tmp_path / "b"), "--n-boot", "0", "--no-groups"])
        == 0
    )
    capsys.readouterr()
    key = ["measured", "predicted", "relation"]
    fits = [pd.read_csv(d / "fit.csv").sort_values(key) for d in (out, tmp_path / "b")]
    np.testing.assert_allclose(fits[0]["slope"], fits[1]["slope"], rtol=1e-9)
