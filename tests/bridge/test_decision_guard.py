"""The unit decision on a real sweep that cannot support it: pipelines of equal length."""

from __future__ import annotations

from initmem.bridge.fitting import fit
from initmem.empirical.tables import load_sweep


def test_equal_length_sweep_gets_cannot_tell_with_the_reason(tiny_sweep):
    """The tiny sweep's three pipelines all train 5 epochs: epochs cannot order them, so whatever
    the R^2 difference, bridge and study say "cannot tell" and why."""
    report = fit(load_sweep(tiny_sweep), n_boot=20)
    assert not report.decision.empty
    for _, row in report.decision.iterrows():
        assert row["winner"] == "cannot tell"
        assert row["reason"] == "epochs is the same for every pipeline (5)"
        assert "cannot tell at this size" in row["text"] and row["reason"] in row["text"]
    assert all("cannot tell" in line for line in report.verdict)
