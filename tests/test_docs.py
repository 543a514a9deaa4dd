"""The code in the docs runs as written: the research script of docs/your-model.md and the sweep file
of docs/sweep-file.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def code_blocks(page: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of a docs page, in order."""
    text = (DOCS / page).read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_the_research_script_runs_as_written(tmp_path, monkeypatch, capsys):
    """mylab.py and study.py of docs/your-model.md, written to a folder and run there: eight runs of
    two pipelines (depth 1 and 2, model_args), read back by load_runs, the report and the per-group
    table of both pipelines."""
    plugins, script = code_blocks("your-model.md", "python")
    assert len(script.splitlines()) <= 32  # the page promises a ~30-line script
    (tmp_path / "mylab.py").write_text(plugins)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict = {"__name__": "__main__"}
    exec(compile(script, "study.py", "exec"), namespace)
    runs, groups = namespace["runs"], namespace["groups"]
    assert len(runs) == 8 and runs["pipeline"].nunique() == 2
    assert set(runs["status"]) == {"completed"}
    assert sorted(runs["model_args"].map(lambda a: a["depth"]).unique()) == [1, 2]
    assert len(groups) == 8  # 4 groups per pipeline, residual_stream empty in these models
    assert set(groups["group"]) == {"scale_invariant", "residual_stream", "head", "other"}
    assert (tmp_path / "report" / "report.md").is_file()
    printed = capsys.readouterr().out
    assert "the law predicted memory" in printed


def test_the_sweep_file_example_expands():
    """The example of docs/sweep-file.md: 2 variants x 2 depths x 3 alphas x 2 seeds."""
    from initmem.empirical.sweep import SweepSpec

    (example,) = [b for b in code_blocks("sweep-file.md", "toml") if "[base]" in b]
    spec = SweepSpec.from_toml(example)
    runs = spec.expand()
    assert len(runs) == 24
    assert {r.config.model_args["depth"] for r in runs} == {1, 2}
    assert all(r.config.model_args["channels"] == 8 for r in runs)
    assert spec.study == {"interpolation": 0.99}
    assert spec.options["logger"] == "tensorboard"


@pytest.mark.parametrize("page", ["sweep-file.md", "your-model.md"])
def test_the_readme_links_the_page(page):
    readme = (DOCS.parent / "README.md").read_text()
    assert f"(docs/{page})" in readme
