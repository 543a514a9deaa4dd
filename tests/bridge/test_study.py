"""The unit-of-forgetting study and its document on a tiny real sweep (two alphas, two seeds, and
pipelines that differ only in alpha_groups)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from initmem.cli import main
from initmem.empirical.tables import INTERPOLATION_THRESHOLD, load_sweep

TINY_STUDY = """
name = "study-test"
[base]
dataset = "cifar10-fixture"
train_size = 16
val_size = 4
test_size = 20
width = 0.125
batch_size = 4
epochs = 6
eval_every = 2
eval_batch_size = 20
augment = false
device = "cpu"
precision = "fp32"
quiet = true
[grid]
alpha = [1.0, 2.0]
seed = [0, 1]
[[variants]]
name = "adam"
optimizer = "adam"
lr = 0.01
[[variants]]
name = "sgd"
optimizer = "sgd"
lr = 0.1
l2 = 0.01
[[variants]]
name = "adam-conv"
optimizer = "adam"
lr = 0.01
alpha_groups = ["conv"]
grid = { alpha = [2.0] }
[[variants]]
name = "adam-head"
optimizer = "adam"
lr = 0.01
alpha_groups = ["head"]
grid = { alpha = [2.0] }
"""


@pytest.fixture(scope="module")
def study_sweep(train_sweep):
    return train_sweep("study_sweep", TINY_STUDY, 12)


def test_study_document_numbers_are_the_data(study_sweep, tmp_path, capsys):
    doc = tmp_path / "docs" / "units.md"
    assert main(["study", str(study_sweep), "--doc", str(doc), "--n-boot", "20"]) == 0
    text = doc.read_text()
    for section in ("## Verdict", "## Design", "## Where the memory lives", "## Reproduce"):
        assert section in text
    assert (tmp_path / "docs" / "units" / "groups.png").is_file()
    assert "](units/groups.png)" in text
    # title, question and reproduce commands from the folder itself
    from initmem.bridge.study import framing

    assert text.startswith(f"# {framing.title(study_sweep)}\n")
    assert framing.question(study_sweep) in text
    reproduce = text[text.index("## Reproduce") :]
    assert f"initmem sweep run {study_sweep / 'sweep.toml'} --out {study_sweep}" in reproduce
    assert "--n-boot 20" in reproduce
    # the time and load the sweep recorded (one run_sweep call trained its 12 runs), and the same
    # folder gives the same document: the analysis's own time is printed, not written
    from initmem.empirical.sessions import read_sessions, sessions_sentence

    (session,) = read_sessions(study_sweep)
    assert (session.runs_before, session.runs_trained, session.ended_by) == (0, 12, "finished")
    assert sessions_sentence([session]) in reproduce and "from an empty folder" in reproduce
    assert "analysis took" in capsys.readouterr().out
    assert main(["study", str(study_sweep), "--doc", str(doc), "--n-boot", "20"]) == 0
    assert doc.read_text() == text

    runs = load_sweep(study_sweep)
    function = pd.read_csv(study_sweep / "study" / "function.csv")
    assert set(function["label"]) == {"adam", "sgd"}  # the group pipelines have one alpha
    for _, row in function.iterrows():
        mine = runs[runs["label"] == row["label"]]
        fits = mine.groupby("seed")["final_train_acc"].min() >= INTERPOLATION_THRESHOLD
        seeds = fits.index[fits]
        if len(seeds) < 2:  # the rule: fewer than 2 interpolating seeds, no function statistics
            assert np.isnan(row["spread_pp"])
            continue
        means = mine[mine["seed"].isin(seeds)].groupby("alpha")["test_acc"].mean() * 100
        assert row["spread_pp"] == pytest.approx(means.max() - means.min())
        assert f"{row['spread_pp']:.1f}" in text

    groups = pd.read_csv(study_sweep / "study" / "groups.csv")
    assert set(groups["group"]) == {"all", "conv", "head"}
    assert (groups["alphas"] == "1,2").all()  # alpha = 1 taken from the family's runs
    # the conv group's norm memory: its BN-followed convs, 2x at init, against alpha = 1
    conv = groups.set_index("group").loc["conv"]
    assert conv["n_layers"] > 0 and np.isfinite(conv["norm_memory_end"])
    head = groups.set_index("group").loc["head"]
    assert head["n_layers"] == 1  # the head: one logged layer


def test_design_table_of_a_folder_flags_interpolation(study_sweep):
    from initmem.bridge.study import unit_study

    study = unit_study(study_sweep, n_boot=10)
    design = study.design.set_index("variant")
    runs = load_sweep(study_sweep)
    for variant, row in design.iterrows():
        mine = runs[runs["variant"] == variant]
        assert row["runs_done"] == len(mine)
        assert row["runs_interpolating"] == int((mine["final_train_acc"] >= 0.995).sum())
    assert study.correlation["n_all"] == 2  # two pipelines with two alphas
    assert len(study.norm_sentences()) == 2


def test_collapse_and_group_sentences_follow_the_numbers():
    from initmem.bridge.study.unit_of_forgetting import collapse_sentences, group_sentences

    units = pd.DataFrame(
        {
            "memory": ["norm", "spread", "norm"],
            "unit": ["accumulated", "accumulated", "epochs"],
            "r2_cv": [0.9, 0.1, 0.2],
            "r2_cv_lo": [0.7, -0.5, 0.0],
            "r2_cv_hi": [0.95, 0.6, 0.3],
        }
    )
    norm, spread = collapse_sentences(units)
    assert "norm: the pipelines collapse" in norm and "0.90 [95% 0.70, 0.95]" in norm
    assert spread.startswith("spread: cannot tell")
    groups = pd.DataFrame(
        {
            "family": ["sgd"] * 3 + ["adam"] * 2,
            "group": ["all", "conv", "head", "all", "conv"],
            "spread_pp": [8.0, 6.0, 0.5, 3.0, 1.0],
            "p_value": [1 / 32, 1 / 32, 0.5, 1 / 32, 0.4],
            "p_min": [1 / 32] * 5,
        }
    )
    sgd, adam = group_sentences(groups)
    assert "carried by conv (6.0 pp, p = 0.031) (and by all parameters together" in sgd
    assert "not by head (0.5 pp, p = 0.500)" in sgd
    assert "only the combination" in adam


def _rows(text: str, header_start: str) -> dict[str, dict[str, str]]:
    """The Markdown table whose header starts with ``header_start``: {first cell: {column: cell}}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    names = [c.strip() for c in lines[start].strip("|").split("|")]
    out = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[cells[0]] = dict(zip(names, cells, strict=True))
    return out


def test_report_bridge_and_study_print_one_spread(law_sweep, tmp_path):
    """M2 has one owner: the report's table, the bridge's pipelines table and the study document show
    the same spread, interval, p-value and seeds for every pipeline of a sweep."""
    from initmem.bridge.study import unit_study
    from initmem.empirical.report import write_report

    report = _rows(write_report(law_sweep, out=tmp_path).read_text(), "| pipeline | seeds used |")
    study = unit_study(law_sweep, n_boot=20)
    doc = _rows(study.markdown(), "| pipeline | seeds | spread pp")
    # the bridge's tables name pipelines by label (their ids only in the CSVs)
    bridge = _rows(study.bridge.markdown(), "| label | n_seeds_used |")
    runs = load_sweep(law_sweep)
    assert len(report) == len(doc) == len(bridge) == runs["pipeline"].nunique() == 5
    for label, row in bridge.items():
        mine, theirs = report[label], doc[label]
        assert theirs["spread pp [95%]"] == f"{mine['spread (pp)']} {mine['95% CI (pp)']}"
        assert theirs["seeds"] == mine["seeds used"] == "2"
        # 2 seeds: the permutation p cannot go below 1/2, so the study does not print it
        assert theirs["p"] == "– (smallest attainable p 0.5)" and float(mine["p"]) >= 0.5
        assert float(row["spread_pp"]) == pytest.approx(float(mine["spread (pp)"]), abs=0.05)
        assert float(row["p_value"]) == pytest.approx(float(mine["p"]), abs=5e-4)


def test_function_sentences_count_spreads_and_name_a_level_without_a_function():
    from initmem.bridge.study.document import function_sentences

    frame = pd.DataFrame(
        {
            "label": ["a", "b", "c", "d"],
            "p_value": [1 / 32, 1 / 16, 0.5, np.nan],
            "p_min": [1 / 32, 1 / 16, 1 / 16, 1 / 16],
            "excess_lo": [0.01, -0.02, -0.03, np.nan],
        }
    )
    text = " ".join(function_sentences(frame))
    # only a's seeds (6) can reach p < 0.05; b and c (5 seeds) cannot, and say so
    assert "1 of 1 pipelines whose seeds allow it have a spread above its permutation" in text
    assert "null at p < 0.05: a. 2 pipelines cannot reach p < 0.05 with their seeds" in text
    assert "(smallest attainable p 0.0625): no permutation test is printed there." in text
    assert "2 reach the smallest p-value their seeds allow" in text
    assert "disagree more than seeds do (interval above 0) in 1 of the 3 pipelines with an" in text
    assert "interval (3 or more seeds): a." in text
    # b: every seed ranks the alphas alike, alphas no further apart than seeds; c: no shift
    assert "In 1 of the pipelines whose spread is above its null or whose seeds all rank" in text
    assert text.rstrip().endswith("no more than two seeds' runs differ): b.")
    # a pipeline left with 2 seeds reaches a weaker floor (1/2), named with it
    frame.loc[2, "p_min"] = 0.5
    text = " ".join(function_sentences(frame))
    assert "3 reach the smallest p-value their seeds allow" in text
    assert "2 / 2^n): a, b (smallest attainable p 0.0625), c (smallest attainable p 0.5)." in text


def _visible_tick_labels(axis) -> list[str]:
    """The labels of ``axis``'s major ticks inside its view (what a reader of the PNG sees)."""
    low, high = sorted(axis.get_view_interval())
    locs = [x for x in axis.get_majorticklocs() if low <= x <= high]
    return [t for t in axis.get_major_formatter().format_ticks(locs) if t.strip()]


@pytest.mark.parametrize("low, ratio", [(3.0, 1.3), (6.0, 9.5), (0.055, 10.5), (1.5, 99.0)])
@pytest.mark.parametrize("extra_decades", [0, 2, 5])
def test_readable_axis_labels_three_ticks_over_any_range(low, ratio, extra_decades):
    from matplotlib.figure import Figure

    from initmem.bridge.study.figures import readable_axis

    values = np.geomspace(low, low * ratio * 10.0**extra_decades, 7)
    ax = Figure().subplots()
    ax.plot(values, values)
    readable_axis(ax, values)
    readable_axis(ax, values, which="y")
    # under a decade a log axis would show at most one power of 10: the axis is linear there
    expected = "log" if values.max() / values.min() >= 10 else "linear"
    assert (ax.get_xscale(), ax.get_yscale()) == (expected, expected)
    for axis in (ax.xaxis, ax.yaxis):
        assert len(_visible_tick_labels(axis)) >= 3, axis.get_majorticklocs()


def test_collapse_panels_have_readable_axes(synthetic_sweep, pyplot_forbidden):
    import matplotlib

    from initmem.bridge.study import unit_study
    from initmem.bridge.study.figures import MEMORY_AXIS_LABELS, UNIT_AXIS_LABELS, units_figure

    study = unit_study(synthetic_sweep, n_boot=0)
    fig = units_figure(study)
    fig.draw_without_rendering()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    points = study.bridge.unit_points
    units = [u for u in UNIT_AXIS_LABELS if u in points and points[u].notna().any()]
    assert len(panels) == points["memory"].nunique() * len(units) > 1
    for ax in panels:
        assert len(_visible_tick_labels(ax.xaxis)) >= 3, ax.get_title()
        assert len(_visible_tick_labels(ax.yaxis)) >= 3, ax.get_title()
        assert ax.get_xlabel() in UNIT_AXIS_LABELS.values()
    # one y axis per memory row, labelled with its unit in the first column
    ylabels = [ax.get_ylabel() for ax in panels if ax.get_ylabel()]
    assert sorted(ylabels) == sorted(MEMORY_AXIS_LABELS[m] for m in points["memory"].unique())
    assert matplotlib.get_backend() == "svg"
    assert pyplot_forbidden.get_fignums() == []


def test_the_document_sets_accumulated_regularization_against_each_rival(law_sweep):
    """The rivals section is rival_bootstrap on the bridge's own cubes (same resamples), one row
    per memory and rival, and its sentences follow rival_verdict; no unit is named against the
    rivals without their calibration."""
    from initmem.bridge.study import unit_study
    from initmem.bridge.unit_decision import rival_bootstrap, rival_verdict

    study = unit_study(law_sweep, n_boot=20)
    expected = rival_bootstrap(study.bridge.cubes, n_boot=20, seed=0)
    pd.testing.assert_frame_equal(study.rivals, expected)
    assert len(study.rivals) > 0
    text = study.markdown()
    assert "## The unit against its rivals" in text
    rows = _rows(text, "| memory | rival | R1 [95%]")
    assert len(rows) == len(set(study.rivals["memory"]))  # keyed by memory: the last rival each
    verdicts = rival_verdict(study.rivals).set_index("memory")
    for line in study.rival_sentences():
        memory = line.split(":")[0]
        beaten = verdicts.loc[memory, "beaten"]
        assert f"{len(beaten.split(', ')) if beaten else 0} of 6 rival units" in line
        assert "Not named the unit of forgetting against its rivals" in line
        assert line in text
    # the spread's time course: one row per spread cube, each read from its peak on
    course = study.bridge.spread_course
    assert "## The spread over time" in text and len(course) == len(study.bridge.cubes["spread"])
    for cube, (_, row) in zip(study.bridge.cubes["spread"], course.iterrows(), strict=True):
        assert cube.pipeline == row["pipeline"]
        assert cube.memory()[0] == pytest.approx(row["peak_pp"])


@pytest.mark.parametrize("error, named", [(0.02, True), (0.08, False)])
def test_the_unit_is_named_against_its_rivals_only_where_calibrated(error, named):
    """rival_sentences: a candidate that beats every rival is named only with a calibrated worst
    error of at most 5% (and the sentence states that error); without a calibration, never."""
    from initmem.bridge.study.calibrate import Calibration, StudyCalibration
    from initmem.bridge.study.unit_of_forgetting import rival_sentences
    from initmem.bridge.unit_decision import RIVAL_UNITS

    table = pd.DataFrame(
        {
            "memory": "norm",
            "candidate": "accumulated",
            "rival": list(RIVAL_UNITS),
            "rank_diff": 0.5,
            "rank_lo": 0.3,
            "rank_hi": 0.7,
            "beats": True,
            "loses": False,
            "n_pipelines": 12,
        }
    )
    calibration = StudyCalibration(
        Calibration(pd.DataFrame(), None, {}, 100, 0.0), {}, {}, pd.DataFrame(), 0.0,
        rivals={"norm": (error, "steps", 10)},
    )  # fmt: skip
    (line,) = rival_sentences(table, calibration)
    said = "Accumulated regularization is the unit of forgetting against its rivals"
    assert (said in line) is named
    assert f"wrong in at most {100 * error:.1f}% of 100 synthetic replicas" in line
    assert "under 'steps'" in line
    (plain,) = rival_sentences(table)
    assert said not in plain and "not calibrated" in plain
