"""``initmem demo``: the quick smoke version end to end, and the verdict logic on chosen spreads."""

from __future__ import annotations

import pandas as pd
import pytest

from initmem.cli import main
from initmem.cli.demo import ADAM, LOW_LR_SGD, SGD_L2, demo_spec, demo_verdict


def test_demo_preset_has_the_three_pipelines_and_the_verdict_names():
    runs = demo_spec().expand()
    variants = {r.variant: r.config for r in runs}
    assert set(variants) == {LOW_LR_SGD, ADAM, SGD_L2}
    assert variants[LOW_LR_SGD].optimizer == "sgd" and variants[LOW_LR_SGD].l2 == 0
    assert variants[ADAM].optimizer == "adam"
    assert variants[SGD_L2].l2 > 0 and variants[SGD_L2].lr > variants[LOW_LR_SGD].lr
    assert all(c.dataset == "fashion-mnist" and c.device == "cpu" for c in variants.values())
    assert len({r.config.alpha for r in runs}) >= 3
    quick = demo_spec(quick=True).expand()
    assert len(quick) == 6 and {r.config.epochs for r in quick} == {1}


def test_quick_demo_trains_reports_and_prints_the_spread(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--quick", "--out", str(out), "--quiet", "--workers", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "6/6 done" in printed
    assert f"report: {out / 'report.md'}" in printed
    for variant in (LOW_LR_SGD, ADAM, SGD_L2):
        assert any(line.startswith(variant) for line in printed.splitlines())
    report = (out / "report.md").read_text()
    assert "Quick run" in report
    assert (out / "figures" / "accuracy_vs_alpha.png").is_file()
    assert (out / "figures" / "eff_lr.png").is_file()


def _spread(
    values: dict[str, tuple[float, float, float]], interpolated: bool = True
) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "variant": v,
                "label": v,
                "spread_pp": s,
                "ci_low_pp": lo,
                "ci_high_pp": hi,
                "interpolated": interpolated,
                "min_train_acc_pct": 100.0 if interpolated else 97.0,
            }
            for v, (s, lo, hi) in values.items()
        ]
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({LOW_LR_SGD: (9, 7, 11), ADAM: (2, 1, 4), SGD_L2: (1, 0.5, 3)}, "clearly more memory"),
        ({LOW_LR_SGD: (5, 2, 8), ADAM: (3, 1, 6), SGD_L2: (1, 0.5, 3)}, "intervals overlap"),
        ({LOW_LR_SGD: (2, 1, 3), ADAM: (4, 3, 5), SGD_L2: (1, 0.5, 3)}, "does NOT show"),
    ],
)
def test_verdict_states_the_contrast_with_its_numbers(values, expected):
    verdict = demo_verdict(_spread(values))
    assert expected in verdict
    assert f"low-lr SGD {values[LOW_LR_SGD][0]:.1f} pp" in verdict
    assert "every run interpolated" in verdict
    assert "not every run interpolated" in demo_verdict(_spread(values, interpolated=False))


def test_verdict_without_a_spread_cannot_tell():
    """A pipeline with fewer than 2 seeds that interpolate at every alpha has no spread (NaN)."""
    values = {LOW_LR_SGD: (float("nan"), float("nan"), float("nan")), ADAM: (2, 1, 4)}
    verdict = demo_verdict(_spread(values | {SGD_L2: (1, 0.5, 3)}))
    assert "cannot tell at this size" in verdict and LOW_LR_SGD in verdict
    assert "does NOT show" not in verdict
