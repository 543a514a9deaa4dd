"""``initmem theory``: config -> pipeline mapping, JSON and table output, errors."""

import json
import math
import re

import pytest

from initmem.cli import main

PAPER_LOW_LR = """
dataset = "cifar10"
model = "resnet9"
optimizer = "sgd"
lr = 1e-3
batch_size = 128
epochs = 300
alpha = 4.0
"""


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(PAPER_LOW_LR)
    return path


def run_json(capsys, *argv):
    assert main(["theory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def rows(out):
    return {row["mechanism"]: row for row in out["mechanisms"]}


def test_paper_low_lr_run(config_file, capsys):
    out = run_json(capsys, "--config", str(config_file))
    assert out["steps_per_epoch"] == 40_000 // 128
    assert out["total_steps"] == 300 * 312
    assert out["accumulated"]["sgd_noise"] == pytest.approx(7.3e-4, rel=5e-3)
    assert out["accumulated"]["explicit"] == 0.0
    assert out["dominant"] == "sgd_noise"
    by_name = rows(out)
    assert by_name["gradient_flow"]["steps"] == "inf"
    assert by_name["pipeline"]["steps"] == out["steps"]
    assert out["epochs"] == pytest.approx(out["steps"] / 312)
    # ResNet-9's BN-followed convs: fan-ins 3*9, 64*9, 128*9, 256*9, 512*9
    assert out["assumptions"]["fan_ins"] == "27,576,1152,2304,4608"
    # no decay, tiny lr: the memory of alpha survives the 300 epochs almost untouched
    assert by_name["pipeline"]["memory_left"] > 0.9


def test_overrides_switch_the_dominant_mechanism(config_file, capsys):
    out = run_json(capsys, "--config", str(config_file), "--set", "lr=1e-2", "--set", "l2=1e-2")
    assert out["dominant"] == "explicit_decay"
    assert out["accumulated"]["explicit"] == pytest.approx(9.4, rel=5e-3)
    decay = rows(out)["explicit_decay"]
    # |w|^4 relaxes with time constant -1 / (4 ln(1 - lr l2)) steps (an e-fold time, not compared)
    tau = -1 / (4 * math.log1p(-1e-4))
    assert decay["e_fold_steps"] == pytest.approx(tau, rel=1e-9)
    # its forgetting time: the relaxation from equilibrium by (5) of normalized, tol 2 ln alpha / e
    alpha = out["alpha"]
    r = math.exp(2 * 2 * math.log(alpha) / math.e)
    assert decay["steps"] == pytest.approx(tau * math.log((alpha**4 - 1) / (r - 1)), rel=1e-9)
    assert decay["steps"] < rows(out)["sgd_noise"]["steps"]
    assert rows(out)["pipeline"]["memory_left"] < 1e-3

    out = run_json(capsys, "--config", str(config_file), "--set", "optimizer=adamw")
    assert out["dominant"] == "adaptive"
    assert rows(out)["sgd_noise"]["acts"] is False


def test_explicit_arguments(config_file, capsys):
    out = run_json(
        capsys,
        "--config",
        str(config_file),
        "--fan-in",
        "576",
        "--alpha",
        "0.5",
        "--grad-sq-unit",
        "0.02",
        "--tol",
        "0.2",
    )
    assert out["alpha"] == 0.5
    assert out["assumptions"] == {
        "forgetting": "|ln eff_lr ratio| <= tol = 0.2 (absolute)",
        "tol": 0.2,
        "grad_sq_unit": 0.02,
        "grad_sq_unit_source": "given",
        "init_sq_per_coord": "1 / (3 fan_in)",
        "fan_ins": "576",
    }
    # without decay: |w|^4 grows by 2 lr^2 G per step; forgotten when it outgrows K (K / D steps)
    z0, r = (1 / 3) ** 2, math.exp(-2 * 0.2)
    k = z0 * (r - 0.5**4) / (1 - r)
    assert out["steps"] == pytest.approx(k / (2 * 1e-6 * 0.02), rel=1e-9)


def test_alpha_one_is_the_reference(config_file, capsys):
    out = run_json(capsys, "--config", str(config_file), "--set", "alpha=1.0")
    assert out["alpha"] == 2.0
    assert any("reference" in note for note in out["notes"])


def test_table_output(config_file, capsys):
    assert main(["theory", "--config", str(config_file), "--set", "schedule=cosine"]) == 0
    text = capsys.readouterr().out
    for name in ("gradient_flow", "sgd_noise", "explicit_decay", "adaptive", "pipeline"):
        assert name in text
    # the cosine schedule ends long before the drift's time: none forgets within the run, and
    # the printed time says so with the memory the run leaves (never "never" for a schedule)
    assert "dominant (shortest forgetting time): none" in text
    assert (
        "predicted forgetting time (norm memory m <= 1/e (e-fold time); each mechanism's slowest "
        "layer, G as below): not within the run: the schedule ends with memory 0.999" in text
    )
    assert "sgd_noise       yes          inf       inf        99.9%  not within the run" in text
    assert "cosine schedule" in text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--set", "lr=-1"], "lr"),
        (["--set", "optimizer=lion"], "optimizer"),
        (["--fan-in", "0"], "fan_ins"),
        (["--tol", "0"], "tol"),
    ],
)
def test_bad_input_is_one_line_and_status_2(config_file, capsys, argv, message):
    assert main(["theory", "--config", str(config_file), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def groups(out):
    return {row["group"]: row for row in out["groups"]}


def test_head_group_options_reach_the_logit_scale_laws(config_file, capsys):
    """--equilibrium-gain gives Adam + L2 law (7), equal to initmem.theory.logit_scale's value;
    alpha on the head only (alpha_groups) is passed on: law (7) then has no prediction."""
    from initmem.theory.logit_scale import adam_logit_scale_forgetting_steps

    adam = ["--config", str(config_file), "--set", "optimizer=adam", "--set", "l2=5e-4"]
    out = run_json(capsys, *adam, "--equilibrium-gain", "1.5")
    head = groups(out)["head_logit_scale"]
    from initmem.theory.criterion import FORGETTING

    expected = adam_logit_scale_forgetting_steps(
        4.0,
        1e-3,
        l2=5e-4,
        equilibrium_gain=1.5,
        betas=(0.9, 0.999),
        tol=FORGETTING.tolerance(2 * math.log(4.0)),  # the shared criterion: one e-fold of 2 ln 4
    )
    assert head["prediction"] is True and head["steps"] == pytest.approx(expected, rel=1e-12)
    assert out["forgets_last"] in groups(out)

    out = run_json(capsys, *adam, "--equilibrium-gain", "1.5", "--set", "alpha_groups=head")
    assert groups(out)["head_logit_scale"]["prediction"] is False
    assert "head only" in groups(out)["head_logit_scale"]["formula"]

    out = run_json(capsys, *adam, "--set", "alpha_groups=conv")
    assert any("does not scale the head" in note for note in out["notes"])
    assert main(["theory", *adam, "--equilibrium-gain", "1.5"]) == 0
    assert "forgets last:" in capsys.readouterr().out


MOMENTUM_PIPELINE = """
dataset = "cifar10-fixture"
width = 0.125
batch_size = 4
epochs = 30
optimizer = "{optimizer}"
lr = 0.05
momentum = 0.9
l2 = 1e-3
alpha = 4.0
"""


@pytest.mark.parametrize("optimizer", ["sgd", "rmsprop"])
def test_theory_prints_the_accumulated_regularization_of_the_dry_run(tmp_path, capsys, optimizer):
    """One accumulated regularization (theory.units): initmem theory and sweep run --dry-run agree
    for a heavy-ball pipeline, number for number, and in the printed text."""
    text = MOMENTUM_PIPELINE.format(optimizer=optimizer)
    (tmp_path / "run.toml").write_text(text)
    (tmp_path / "sweep.toml").write_text(
        f'name = "m"\n[base]\n{text}\n[grid]\nalpha = [1.0, 4.0]\n'
    )
    out = run_json(capsys, "--config", str(tmp_path / "run.toml"))

    from initmem.bridge.units import design_table
    from initmem.empirical.sweep import SweepSpec

    spec = SweepSpec.from_file(tmp_path / "sweep.toml")
    design = design_table([r.config for r in spec.iter_runs()], init="expected").iloc[0]
    for unit in ("epochs", "steps", "explicit", "sgd_noise", "adam", "accumulated"):
        assert out["accumulated"][unit] == pytest.approx(design[unit], rel=1e-12), unit
    # momentum counts: 1 / (1 - mu) on coupled L2, 1 / (1 - mu)^2 on the noise (16 images / 4)
    steps = 30 * 4
    assert out["accumulated"]["explicit"] == pytest.approx(steps * 0.05 * 1e-3 / 0.1, rel=1e-12)
    assert out["accumulated"]["sgd_noise"] == pytest.approx(steps * (0.05 / 0.1) ** 2 / 4)

    assert main(["theory", "--config", str(tmp_path / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert (
        main(
            [
                "sweep",
                "run",
                str(tmp_path / "sweep.toml"),
                "--out",
                str(tmp_path / "o"),
                "--dry-run",
            ]
        )
        == 0
    )
    dry = capsys.readouterr().out
    lines = dry.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["variant", "alphas"])
    columns = fixed_width_cells(lines[header], lines[header + 1])
    assert f"accumulated = {columns['accumulated']} " in printed
    # the noise unit the optimizer does not have is left blank (SGD: adam; RMSprop: sgd_noise)
    blank = {"sgd": "adam", "rmsprop": "sgd_noise"}[optimizer]
    assert columns[blank] == ""
    for unit in {"explicit", "sgd_noise", "adam"} - {blank}:
        assert f"{unit} = {columns[unit]}" in printed, unit


def fixed_width_cells(header: str, row: str) -> dict[str, str]:
    """The cells of one row of a right-aligned fixed-width table: under each header name, the text
    from the previous name's end to its own (a blank cell is "")."""
    ends = [m.end() for m in re.finditer(r"\S+", header)]
    starts = [0, *ends[:-1]]
    return {
        name: row[start:end].strip()
        for name, start, end in zip(header.split(), starts, ends, strict=True)
    }


def test_theory_names_its_gradient_scale_and_probes_it(tmp_path, capsys):
    """The mechanism table says its G is a placeholder; the probed law's line and JSON name the
    probe (bridge.probe), and agree with law_forgetting called directly."""
    from initmem.bridge.probe import law_forgetting
    from initmem.empirical.config import RunConfig

    path = tmp_path / "run.toml"
    path.write_text(
        'dataset = "cifar10-fixture"\ntrain_size = 16\nbatch_size = 4\nepochs = 20\n'
        'width = 0.125\noptimizer = "adamw"\nlr = 0.01\nweight_decay = 0.5\nalpha = 8.0\n'
        'device = "cpu"\n'
    )
    out = run_json(capsys, "--config", str(path))
    assert out["g_source"].startswith("placeholder")
    expected = law_forgetting(RunConfig.from_file(path), [1.0, 8.0])
    assert out["law"]["state"] == expected["state"]
    assert out["law"]["memory_end"] == pytest.approx(expected["memory_end"], rel=1e-12)
    assert out["law"]["g_source"].startswith("probe at init: 8 minibatches of 4")
    assert main(["theory", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    assert "normalized-weight laws with G probed at alpha 8 and 1" in text
    assert "g_source: probe at init" in text
    assert "law" not in run_json(capsys, "--config", str(path), "--no-probe")
