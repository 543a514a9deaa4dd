"""Memory against ln(alpha) (initmem.bridge.study.alpha_grid, G1-G3) on a synthetic sweep whose
BN-followed convs follow the exact SGD norm recursion at alphas 1, 2 and 4: each number against its
direct computation from the run folders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.measure import prepare_runs
from initmem.bridge.study.alpha_grid import alpha_grid_sentences, alpha_grid_table
from initmem.bridge.study.equivalence import decide_differences
from initmem.empirical.tables import load_layers, load_sweep
from tests.bridge.synthetic import SyntheticPipeline, write_synthetic_sweep

ALPHAS = (1.0, 2.0, 4.0)
#: Two SGD pipelines whose decay (lr wd 4e-4 and 5e-4 per step over 1,200 steps) leaves the norm
#: memory between 0.2 and 0.8 at the end (the recursion's norms, not tau_norm, set it).
PIPELINES = [
    SyntheticPipeline(0.02, 0.02, tau_norm=1e3, tau_acc=1e3, tau_dis=800.0),
    SyntheticPipeline(0.05, 0.01, tau_norm=1e3, tau_acc=1e3, tau_dis=800.0),
]


@pytest.fixture(scope="module")
def grid_sweep(tmp_path_factory):
    return write_synthetic_sweep(
        tmp_path_factory.mktemp("alpha_grid"),
        PIPELINES,
        alphas=ALPHAS,
        seeds=(0, 1, 2),
        norms="sgd",
    )


@pytest.fixture(scope="module")
def grid(grid_sweep):
    runs = prepare_runs(load_sweep(grid_sweep))
    layers = load_layers(runs)
    return runs, layers, alpha_grid_table(runs, layers)


def _direct_norm_memory(runs, layers, pipeline, alpha) -> np.ndarray:
    """M4 of the pair (1, alpha) per seed, straight from the layer logs: per BN-followed conv the
    log-ratio of the norms at the last evaluation over that at init, mean over the convs."""
    out = []
    mine = runs[runs["pipeline"] == pipeline]
    for seed in sorted(mine["seed"].unique()):
        at = mine[mine["seed"] == seed].set_index("alpha")["hash"]
        lo = layers[layers["hash"] == at[1.0]]
        hi = layers[layers["hash"] == at[alpha]]
        per_layer = []
        for name in lo.loc[lo["scale_invariant"].astype(bool), "layer"].unique():
            a = lo[lo["layer"] == name].sort_values("epoch")["weight_norm"].to_numpy()
            b = hi[hi["layer"] == name].sort_values("epoch")["weight_norm"].to_numpy()
            per_layer.append(np.log(b[-1] / a[-1]) / np.log(b[0] / a[0]))
        out.append(np.mean(per_layer))
    return np.array(out)


def test_one_row_per_alpha_above_the_smallest(grid):
    runs, _, table = grid
    assert len(table) == runs["pipeline"].nunique() * (len(ALPHAS) - 1)
    assert set(table["alpha"]) == {2.0, 4.0} and set(table["alpha_low"]) == {1.0}
    np.testing.assert_allclose(table["ln_ratio"], np.log(table["alpha"]), rtol=1e-12)


def test_norm_memory_is_the_log_ratio_of_the_logged_norms(grid):
    """G1 against the layer logs, to rounding (tol 1e-9)."""
    runs, layers, table = grid
    for _, row in table.iterrows():
        direct = _direct_norm_memory(runs, layers, row["pipeline"], row["alpha"])
        assert row["norm_end"] == pytest.approx(direct.mean(), abs=1e-9)
        assert row["n_seeds"] == direct.size
        assert row["norm_lo"] < row["norm_end"] < row["norm_hi"]


def test_the_law_reproduces_the_exact_sgd_recursion(grid):
    """G2: the synthetic convs follow the SGD norm recursion with the logged G, which is the law,
    so the law's memory is the measured one (tol 2e-3; the logs are rounded per evaluation)."""
    _, _, table = grid
    assert np.isfinite(table["law_end"]).all()
    np.testing.assert_allclose(table["law_end"], table["norm_end"], atol=2e-3)


def test_function_memory_is_the_seed_paired_difference(grid):
    """G3 against the runs' validation-selected test accuracy, and the equivalence rules' verdict."""
    runs, _, table = grid
    for _, row in table.iterrows():
        mine = runs[runs["pipeline"] == row["pipeline"]]
        acc = mine.pivot_table(index="seed", columns="alpha", values="test_acc") * 100
        d = (acc[row["alpha"]] - acc[1.0]).to_numpy()
        assert row["diff_pp"] == pytest.approx(d.mean(), abs=1e-9)
        assert row["verdict"] == decide_differences(d)["verdict"]


def test_the_norm_memory_falls_towards_the_smallest_alpha_under_decay(grid):
    """Under explicit decay with the same G at every alpha the memory of a larger alpha is closer
    to 1 (module docstring): the sentence says it rises with ln(alpha), and counts the law inside
    the interval at both alphas."""
    _, _, table = grid
    for _, group in table.groupby("pipeline"):
        assert group.sort_values("alpha")["norm_end"].is_monotonic_increasing
    lines = alpha_grid_sentences(table)
    assert len(lines) == 2
    assert all("rises with ln(alpha)" in line for line in lines)
    assert all("inside the measured 95% interval at 2 of 2 alphas" in line for line in lines)


@pytest.mark.parametrize(
    "values, shape",
    [
        ([0.2, 0.3, 0.5], "rises with ln(alpha)"),
        ([0.5, 0.3, 0.2], "falls with ln(alpha)"),
        ([0.3, 0.5, 0.2], "is not monotone in ln(alpha)"),
    ],
)
def test_sentences_follow_the_numbers(values, shape):
    table = pd.DataFrame(
        {
            "pipeline": "p",
            "label": "sgd",
            "alpha_low": 1.0,
            "alpha": [2.0, 4.0, 8.0],
            "norm_end": values,
            "norm_lo": np.array(values) - 0.05,
            "norm_hi": np.array(values) + 0.05,
            "law_end": [values[0], values[1] + 0.2, np.nan],
            "preregistered_end": [np.nan, np.nan, values[2] + 0.1],
            "verdict": ["gone", "cannot tell", "kept"],
        }
    )
    (line,) = alpha_grid_sentences(table)
    assert shape in line
    assert "inside the measured 95% interval at 1 of 3 alphas" in line
    assert f"at alpha 8: {values[2] + 0.1:.2f}, outside the measured" in line
    assert "gone at alpha 2, cannot tell at alpha 4, kept at alpha 8" in line


def test_a_sweep_of_two_alphas_has_no_grid(law_sweep):
    runs = prepare_runs(load_sweep(law_sweep))
    assert alpha_grid_table(runs, load_layers(runs)).empty


def test_the_study_document_shows_the_grid(grid_sweep, tmp_path):
    from initmem.cli import main

    doc = tmp_path / "study.md"
    args = ["study", str(grid_sweep), "--doc", str(doc), "--n-boot", "20"]
    assert main([*args, "--out", str(tmp_path / "tables")]) == 0
    text = doc.read_text()
    section = text[text.index("## Memory against ln(alpha)") :]
    written = pd.read_csv(tmp_path / "tables" / "alpha_grid.csv")
    assert len(written) == 4
    for _, row in written.iterrows():
        assert f"{row['alpha']:g} vs {row['alpha_low']:g}" in section
        assert f"{row['norm_end']:.2f} [{row['norm_lo']:.2f}, {row['norm_hi']:.2f}]" in section
    assert (tmp_path / "study" / "alphas.png").is_file()
    assert "](study/alphas.png)" in text


def test_every_pipeline_is_compared_at_the_alphas_most_ran():
    """at_common_alphas: a pipeline with more alphas than most is cut to theirs (with a note); one
    without all of them keeps its own."""
    from initmem.bridge.study.alpha_grid import at_common_alphas, common_alphas

    alphas = {"p": (1.0, 4.0), "q": (1.0, 4.0), "r": (1.0, 2.0, 4.0, 8.0), "s": (1.0, 2.0)}
    runs = pd.DataFrame(
        [
            {"pipeline": p, "label": p, "alpha": a, "seed": seed}
            for p, values in alphas.items()
            for a in values
            for seed in (0, 1)
        ]
    )
    assert common_alphas(runs) == (1.0, 4.0)
    cut, notes = at_common_alphas(runs)
    kept = cut.groupby("pipeline")["alpha"].unique().map(lambda a: tuple(sorted(a)))
    assert kept.to_dict() == {"p": (1.0, 4.0), "q": (1.0, 4.0), "r": (1.0, 4.0), "s": (1.0, 2.0)}
    (note,) = notes
    assert note.startswith("r ran alphas 1, 2, 4, 8") and "at alphas 1, 4" in note
