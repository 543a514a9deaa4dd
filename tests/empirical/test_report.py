"""The sweep report: its tables carry the metrics' numbers and every figure it links is a real PNG."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from initmem.empirical.memory import accuracy_table, spread_table
from initmem.empirical.report import write_report
from initmem.empirical.sweep import SweepSpec, prepare_sweep
from initmem.empirical.tables import load_sweep
from tests.empirical.test_memory import make_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    sweep = make_sweep(tmp_path_factory.mktemp("report") / "sweep")
    return write_report(sweep, notes=["**Verdict**: a note from the caller."], n_boot=200)


def test_report_links_existing_readable_figures(report):
    text = report.read_text()
    links = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", text)
    expected = {"spread", "accuracy_vs_alpha", "training_curves", "eff_lr", "eff_lr_layers_0"}
    assert expected <= {Path(link).stem for link in links}
    for link in links:
        width, height = png_size(report.parent / link)
        assert width >= 400 and height >= 200, link


def spread_cells(text: str, label: str) -> dict[str, str]:
    """The cells of ``label``'s row of the report's spread table, by column name."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| pipeline | seeds used |"))
    row = next(line for line in lines if line.startswith(f"| {label} |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    return dict(zip(names, [c.strip() for c in row.strip("|").split("|")], strict=True))


def test_report_tables_hold_the_metric_values(report):
    text = report.read_text()
    runs = load_sweep(report.parent)
    spread = spread_table(runs, n_boot=200).set_index("label")
    assert spread["spread_pp"].notna().any() and spread["spread_pp"].isna().any()
    for label, row in spread.iterrows():
        cells = spread_cells(text, label)
        assert cells["seeds used"] == str(row["n_seeds_used"])
        if np.isfinite(row["spread_pp"]):
            assert float(cells["spread (pp)"]) == pytest.approx(row["spread_pp"], abs=0.05)
            assert float(cells["p"]) == pytest.approx(row["p_value"], abs=5e-4)
        else:  # M1: fewer than 2 seeds interpolate at every alpha
            assert cells["spread (pp)"] == "– (1 of 2 seeds interpolate at every alpha)"
        assert cells["interpolated"] == ("yes" if row["interpolated"] else "no")
    accuracy = accuracy_table(runs)
    mean = accuracy[(accuracy["label"] == "sgd") & (accuracy["alpha"] == 2.0)][
        "test_acc_pct"
    ].item()
    row = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert f"{mean:.1f} ±" in row
    assert "**Verdict**: a note from the caller." in text
    assert "12/12 done" in text


def test_report_of_a_sweep_with_no_finished_run(tmp_path):
    sweep = make_sweep(tmp_path / "sweep")
    for result in sweep.glob("runs/*/result.json"):
        result.unlink()
    text = write_report(sweep).read_text()
    assert "No finished runs yet" in text
    assert "0/12 done" in text and "12 pending" in text
    assert np.isnan(load_sweep(sweep)["test_acc"]).all()


def _keep_runs(sweep: Path, keep) -> None:
    """Leave in the manifest only the runs whose entry satisfies ``keep``."""
    path = sweep / "manifest.json"
    path.write_text(json.dumps([e for e in json.loads(path.read_text()) if keep(e)]))


def test_report_out_leaves_the_sweep_folder_untouched(tmp_path):
    sweep = make_sweep(tmp_path / "sweep")
    before = sorted(p.relative_to(sweep) for p in sweep.rglob("*"))
    report = write_report(sweep, n_boot=20, out=tmp_path / "elsewhere")
    assert report == tmp_path / "elsewhere" / "report.md"
    assert (tmp_path / "elsewhere" / "figures" / "spread.png").is_file()
    assert sorted(p.relative_to(sweep) for p in sweep.rglob("*")) == before


def test_variant_names_with_a_bar_keep_the_tables_whole(tmp_path):
    sweep = make_sweep(tmp_path / "sweep")
    path = sweep / "manifest.json"
    path.write_text(path.read_text().replace('"variant": "sgd"', '"variant": "sgd | low lr"'))
    text = write_report(sweep, n_boot=20).read_text()
    row = next(line for line in text.splitlines() if line.startswith("| sgd \\| low lr |"))
    header = next(line for line in text.splitlines() if line.startswith("| pipeline |"))
    assert len(re.findall(r"(?<!\\)\|", row)) == len(re.findall(r"(?<!\\)\|", header))


def test_one_alpha_or_one_seed_says_so_instead_of_a_spread(tmp_path):
    sweep = make_sweep(tmp_path / "one_alpha")
    _keep_runs(sweep, lambda e: e["config"]["alpha"] == 1.0)
    text = write_report(sweep, n_boot=20).read_text()
    cells = spread_cells(text, "sgd")
    assert cells["spread (pp)"] == "– (one alpha)" and cells["95% CI (pp)"] == "– (one alpha)"

    sweep = make_sweep(tmp_path / "one_seed")
    _keep_runs(sweep, lambda e: e["config"]["seed"] == 0)
    text = write_report(sweep, n_boot=20).read_text()
    cells = spread_cells(text, "sgd")  # one seed: no noise floor, so no spread (M1)
    assert cells["spread (pp)"] == "– (one seed)" and cells["95% CI (pp)"] == "– (one seed)"


def test_report_of_a_sweep_without_runs(tmp_path):
    spec = SweepSpec(name="nothing", variants=())
    prepare_sweep(spec, tmp_path / "empty")
    assert load_sweep(tmp_path / "empty").empty
    text = write_report(tmp_path / "empty", n_boot=20).read_text()
    assert "0/0 done" in text and "No finished runs yet" in text


def test_report_figures_leave_pyplot_alone(tmp_path, pyplot_forbidden):
    import matplotlib

    report = write_report(make_sweep(tmp_path / "sweep"), n_boot=20)
    pngs = sorted((report.parent / "figures").glob("*.png"))
    assert len(pngs) >= 5 and all(png_size(p)[0] >= 400 for p in pngs)
    assert matplotlib.get_backend() == "svg"
    assert pyplot_forbidden.get_fignums() == []


def test_effective_lr_section_states_convergence_from_the_data(report):
    """One computed sentence per pipeline: the norm memory at the end with its interval, and a
    state that follows from it (converged below 1/e, apart above, else cannot tell)."""
    from initmem.empirical.curves import norm_memory_curves
    from initmem.empirical.memory import norm_memory_end
    from initmem.empirical.tables import load_layers

    text = report.read_text()
    runs = load_sweep(report.parent)
    table = norm_memory_end(norm_memory_curves(runs, load_layers(runs)), runs)
    assert not table.empty
    for _, row in table.iterrows():
        line = next(line for line in text.splitlines() if line.startswith(f"- {row['label']}:"))
        assert f"norm memory at the end {row['memory_end']:.2f}" in line
        if row["hi"] < np.exp(-1):
            assert "converged" in line and "cannot tell" not in line
        elif row["lo"] > np.exp(-1):
            assert "stayed apart" in line
        else:
            assert "cannot tell" in line


def test_report_of_run_folders(tmp_path, capsys):
    """``initmem report RUN RUN ...``: the report of a sweep's runs copied out of it holds the same
    spread as the sweep's own, and says which folders it read."""
    import shutil

    from initmem.cli import main

    sweep = make_sweep(tmp_path / "sweep")
    for run in load_sweep(sweep).itertuples():  # the trainer's config.json (make_sweep has none)
        config = json.loads((sweep / "manifest.json").read_text())
        entry = next(e for e in config if e["hash"] == run.hash)
        Path(run.run_dir, "config.json").write_text(json.dumps(entry))
        shutil.copytree(run.run_dir, tmp_path / "moved" / run.hash)
    folders = sorted(str(p) for p in (tmp_path / "moved").iterdir())
    assert (
        main(["report", *folders, "--out", str(tmp_path / "out"), "--n-boot", "50", "--no-groups"])
        == 0
    )
    printed = capsys.readouterr().out
    text = (tmp_path / "out" / "report.md").read_text()
    assert "12/12 done" in text and f"`{folders[0]}`" in text
    spread = spread_table(load_sweep(sweep), n_boot=50)
    finite = spread[np.isfinite(spread["spread_pp"])]
    assert len(finite) >= 1
    for value in finite["spread_pp"]:
        assert f"{value:.1f}" in printed


def table_headers(text: str) -> list[list[str]]:
    """The header cells of every pipe table of ``text`` (a line after which comes ``|---``)."""
    lines = text.splitlines()
    return [
        [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        for line, below in zip(lines, lines[1:], strict=False)
        if line.startswith("|") and below.startswith("|---")
    ]


def test_report_tables_show_at_most_max_columns_and_the_csv_keeps_the_rest(report):
    import pandas as pd

    from initmem.empirical.markdown import MAX_COLUMNS
    from initmem.empirical.tables import INTERPOLATION_THRESHOLD

    text = report.read_text()
    headers = table_headers(text)
    assert len(headers) >= 3 and all(len(h) <= MAX_COLUMNS for h in headers)
    # every table's CSV holds every column; the memory table has more than Markdown shows
    for name in ("memory", "accuracy", "pipelines"):
        assert (report.parent / "tables" / f"{name}.csv").is_file()
    memory = pd.read_csv(report.parent / "tables" / "memory.csv", dtype=str, keep_default_na=False)
    assert len(memory.columns) > MAX_COLUMNS
    shown = next(h for h in headers if h[:2] == ["pipeline", "seeds used"])
    assert shown == list(memory.columns[:MAX_COLUMNS])
    hidden = list(memory.columns[MAX_COLUMNS:])
    columns = "column" if len(hidden) == 1 else "columns"
    assert f"_{len(hidden)} more {columns} in tables/memory.csv: {', '.join(hidden)}._" in text
    # the column left to the CSV holds its number: sample std over the seeds used, mean over alphas
    runs = load_sweep(report.parent)
    for _, row in memory.iterrows():
        mine = runs[runs["label"] == row["pipeline"]]
        fits = mine.groupby("seed")["final_train_acc"].min() >= INTERPOLATION_THRESHOLD
        used = mine[mine["seed"].isin(fits.index[fits])]
        if used["seed"].nunique() < 2:
            assert row["seed std (pp)"] == "–"
            continue
        acc = used.pivot_table(index="seed", columns="alpha", values="test_acc") * 100
        assert float(row["seed std (pp)"]) == pytest.approx(acc.std(ddof=1).mean(), abs=0.05)
