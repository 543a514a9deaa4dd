"""The sweep report: its tables carry the metrics' numbers and every figure it links is a real PNG."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from initmem.empirical.memory import accuracy_table, load_sweep, spread_table
from initmem.empirical.report import write_report
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


def test_report_tables_hold_the_metric_values(report):
    text = report.read_text()
    runs = load_sweep(report.parent)
    spread = spread_table(runs, n_boot=200).set_index("label")
    for label, row in spread.iterrows():
        line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[1]) == pytest.approx(row["spread_pp"], abs=0.05)
        assert cells[5] == ("yes" if row["interpolated"] else "no")
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


def test_report_figures_leave_pyplot_alone(tmp_path, pyplot_forbidden):
    import matplotlib

    report = write_report(make_sweep(tmp_path / "sweep"), n_boot=20)
    pngs = sorted((report.parent / "figures").glob("*.png"))
    assert len(pngs) >= 5 and all(png_size(p)[0] >= 400 for p in pngs)
    assert matplotlib.get_backend() == "svg"
    assert pyplot_forbidden.get_fignums() == []
