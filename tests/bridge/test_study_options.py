"""``initmem study``'s options and its document's Markdown: ``--out`` and ``--doc`` (with or without a
suffix) checked before any work, the sweep folder only read, sweep.toml optional, an unfinished sweep
and damaged runs named in the document, ``|`` escaped in its tables, figure links URL-encoded and the
printed commands shell-quoted."""

from __future__ import annotations

import json
import shlex
import shutil

import pandas as pd
import pytest

from initmem.bridge.study import unit_study
from initmem.cli import main
from tests.bridge.synthetic import known_pipelines, write_synthetic_sweep


@pytest.fixture
def odd_sweep(tiny_sweep, tmp_path):
    """A copy of the tiny sweep with a ``|`` in a variant name, no sweep.toml, one run unfinished
    (its result.json removed) and one run damaged (a garbage metrics table)."""
    copy = tmp_path / "sweep folder"
    shutil.copytree(tiny_sweep, copy, ignore=shutil.ignore_patterns(".lock", "study", "report*"))
    (copy / "sweep.toml").unlink()
    manifest = json.loads((copy / "manifest.json").read_text())
    for entry in manifest:
        entry["variant"] = entry["variant"].replace("sgd-wd", "sgd|wd")
        entry["config"]["out_dir"] = str((copy / "runs" / entry["hash"]).resolve())
    (copy / "manifest.json").write_text(json.dumps(manifest))
    adam = [e["hash"] for e in manifest if e["variant"] == "adam"]
    (copy / "runs" / adam[0] / "result.json").unlink()
    (copy / "runs" / adam[1] / "metrics.parquet").write_bytes(b"PAR1 garbage")
    return copy, adam


def test_study_writes_where_told_and_names_what_it_could_not_use(odd_sweep, tmp_path, capsys):
    sweep, (unfinished, damaged) = odd_sweep
    out, doc = tmp_path / "tables", tmp_path / "my docs" / "the study"  # no suffix, spaces
    argv = ["study", str(sweep), "--out", str(out), "--doc", str(doc), "--n-boot", "20"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        next(line for line in err.splitlines() if damaged in line)
    ]
    assert not (sweep / "study").exists()  # the sweep folder is only read
    assert (out / "design.csv").is_file()
    text = (tmp_path / "my docs" / "the study.md").read_text()
    assert (tmp_path / "my docs" / "the study").is_dir()
    assert "](the%20study/" in text and "](the study/" not in text
    tables = [line for line in text.splitlines() if line.startswith("|")]
    assert any("sgd\\|wd" in line for line in tables)
    assert not any("sgd|wd" in line.replace("sgd\\|wd", "") for line in tables)
    assert f"initmem study {shlex.quote(str(sweep))} --doc {shlex.quote(str(doc) + '.md')}" in text
    assert "This sweep is not finished (5/6 done (" in text  # one pending (status reads results)
    skipped = next(line for line in text.splitlines() if "Skipped as damaged" in line)
    assert skipped.startswith(f"- Skipped as damaged (1): {damaged} (adam): ")
    assert "metrics.parquet is damaged" in skipped and unfinished not in skipped


@pytest.mark.parametrize("where", ["doc-is-a-folder", "out-is-a-file", "figures-is-a-file"])
def test_unwritable_outputs_fail_before_any_work(tiny_sweep, tmp_path, capsys, where):
    doc, out = tmp_path / "doc.md", tmp_path / "out"
    if where == "doc-is-a-folder":
        doc.mkdir()
    elif where == "out-is-a-file":
        out.write_text("")
    else:
        (tmp_path / "doc").write_text("")
    argv = ["study", str(tiny_sweep), "--out", str(out), "--doc", str(doc), "--n-boot", "20"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: ") and "choose another path" in captured.err
    assert not (out / "design.csv").exists()


def test_calibrate_on_a_design_without_a_unit_decision_says_so(tmp_path, capsys):
    """``--calibrate 30`` on one pipeline: no unit decision exists, so nothing is calibrated; the
    command says so in one line with the reason (not "pass --calibrate 200"), and so does the
    document's calibration section; a study whose bridge has no sentence at all says why in its
    Verdict instead of leaving it empty."""
    root = write_synthetic_sweep(tmp_path / "sweep", known_pipelines()[:1])
    doc = tmp_path / "study.md"
    args = ["study", str(root), "--doc", str(doc), "--n-boot", "20", "--calibrate", "30"]
    assert main([*args, "--out", str(tmp_path / "tables")]) == 0
    reason = "1 pipeline: the decision compares pipelines and needs 3 or more"
    out = capsys.readouterr().out.splitlines()
    said = f"--calibrate 30: nothing to calibrate, this design has no unit decision ({reason})"
    assert said in out
    assert not any("calibration took" in line for line in out)
    text = doc.read_text()
    section = text[
        text.index("## How often would this verdict be wrong?") : text.index("## Design")
    ]
    assert f"Nothing to calibrate: this design has no unit decision ({reason})." in section
    assert "--calibrate 200" not in section

    study = unit_study(root, n_boot=20)
    assert study.no_decision == reason and study.bridge.decision.empty
    study.bridge.units = pd.DataFrame()  # no memory measured at all: the bridge has no sentence
    assert list(study.bridge.verdict) == []
    assert study.verdict() == [f"No verdict: this design has no unit decision ({reason})."]
    verdict = study.markdown()
    verdict = verdict[verdict.index("## Verdict") : verdict.index("Memories:")]
    assert f"- No verdict: this design has no unit decision ({reason})." in verdict
