"""The calibration's rival truths (issue 39, item 3), each checked against its closed form, and the
verdict's error stated as its worst over the truths."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from initmem.bridge.study import calibrate, synthetic
from initmem.bridge.unit_decision import unit_values
from tests.bridge.synthetic import sgd_design

QUIET = dict(sigma_norm=0.0, sigma_acc=0.0, sigma_seed=0.0)


def _design(n_seeds: int = 2) -> synthetic.Design:
    """SGD pipelines, alpha 1 vs 4: three with weight decay at two run lengths, and one without
    any decay (explicit decay 0 throughout)."""
    return sgd_design([(1e-3, 8), (1e-2, 4), (3e-3, 8), (0.0, 8)], n_seeds=n_seeds)


def _draw(name: str, design=None, seed: int = 0, **changes):
    truth = synthetic.named_truths(**(QUIET | changes))[name]
    return synthetic.draw(design or _design(), truth, np.random.default_rng(seed))


def test_the_design_carries_explicit_decay_beside_the_deciding_units():
    design = _design()
    for p in design.pipelines:
        lr_wd = p.config.lr * p.config.weight_decay
        assert p.units["explicit"] == pytest.approx(lr_wd * p.steps)  # constant lr, no L2
        assert p.units["accumulated"][-1] > p.units["explicit"][-1]  # + the SGD noise term
    assert [synthetic.has_decay(p) for p in design.pipelines] == [True, True, True, False]
    cubes = synthetic.replica_cubes(_draw("accumulated", design))
    # the decision's pair and the parts of the rival units (unit_values sums those)
    assert set(cubes["norm"][0].units) == set(synthetic.DESIGN_UNITS)
    for cube, p in zip(cubes["norm"], design.pipelines, strict=True):
        np.testing.assert_array_equal(cube.units["steps"], p.steps)
        np.testing.assert_allclose(
            unit_values(cube.units, "explicit_sgd_noise", p.steps.size),
            p.units["accumulated"],
            rtol=1e-12,
        )  # SGD pipelines: accumulated regularization is explicit decay + the SGD noise term


def test_explicit_decay_only_forgets_in_explicit_decay_and_names_no_deciding_unit():
    design = _design()
    replica = _draw("explicit decay only", design, scale=0.05)
    for p, norm in zip(design.pipelines, replica.norm, strict=True):
        assert norm[0] == pytest.approx(np.exp(-p.units["explicit"] / 0.05))
    assert replica.norm[3] == pytest.approx(np.ones_like(replica.norm[3]))  # no decay: kept
    assert replica.truth.right == "cannot tell"
    assert synthetic.right_verdict("explicit decay only") == "cannot tell"


def test_epochs_for_the_decay_pipelines_only():
    design = _design()
    replica = _draw("epochs, decay only", design, scale=3.0)
    for p, norm in zip(design.pipelines, replica.norm, strict=True):
        expected = np.exp(-p.units["epochs"] / 3.0) if synthetic.has_decay(p) else 1.0
        assert norm[0] == pytest.approx(np.broadcast_to(expected, norm[0].shape))
    assert replica.truth.right == "cannot tell"
    # the default scale is the median over the decay pipelines only (8, 4, 8 epochs -> 8)
    default = _draw("epochs, decay only", design)
    assert default.memory[0][-1] == pytest.approx(math.exp(-1.0))


def test_a_spread_that_first_rises_then_decays():
    """f(t) = m(t) (1 - r exp(-(t / T) / 0.25)): with m slow, the spread rises from (1 - r) of the
    gap, peaks inside the run, then falls; the truth at the end is that product's."""
    design = _design()
    r = 0.5
    replica = _draw("accumulated, spread rising first", design, scale=1.0)
    truth = replica.truth
    for p, m, acc in zip(design.pipelines, replica.memory, replica.accuracy, strict=True):
        fraction = p.steps / p.steps[-1]
        expected = m * (1 - r * np.exp(-fraction / synthetic.RISE_FRACTION))
        spread = acc[0, 1] - acc[0, 0]  # alpha 4 minus alpha 1, no noise: gap f(t)
        assert spread == pytest.approx(truth.gap * expected)
        assert replica.norm[design.pipelines.index(p)][0] == pytest.approx(m)  # norm unchanged
    assert synthetic.true_spread_end(design, truth) == pytest.approx(
        [100 * truth.gap * f[-1] for f in replica.true_fraction]
    )
    # a fine time grid: rises first, then falls (a maximum strictly inside the run)
    p = design.pipelines[0]
    t = np.linspace(0, p.steps[-1], 401)
    m = np.exp(-np.interp(t, p.steps, p.units["accumulated"]) / 0.5)
    f = m * (1 - r * np.exp(-(t / t[-1]) / synthetic.RISE_FRACTION))
    peak = int(np.argmax(f))
    assert 0 < peak < t.size - 1 and f[peak] > f[0] and f[peak] > f[-1]


def test_a_norm_memory_that_ends_below_zero_is_read_reversed_from_its_folder(tmp_path):
    """n(t) = 1.2 m(t) - 0.2: 1 at init, below 0 at the end where m is small; written as a folder
    and read by the real loader, the study's end state says reversed (item 5) and the
    calibration scores it right."""
    from initmem.bridge import measure
    from initmem.bridge.study.unit_of_forgetting import norm_end_table
    from initmem.empirical import curves
    from initmem.empirical.tables import load_sweep

    design = _design(n_seeds=4)
    replica = _draw("accumulated, norm reversing", design, scale=0.005, sigma_norm=0.01)
    b = replica.truth.undershoot
    for m, n in zip(replica.memory, replica.true_norm, strict=True):
        assert n == pytest.approx((1 + b) * m - b) and n[0] == pytest.approx(1.0)
    ends = [n[-1] for n in replica.true_norm]
    assert min(ends) < -0.1  # the strongest decay ends close to -b
    root = synthetic.write_folder(tmp_path / "sweep", replica)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = measure.prepare_runs(load_sweep(root))
    _, layers = measure.load_logs(runs)
    table = norm_end_table(curves.norm_memory_curves(runs, layers), pd.DataFrame(), runs)
    by_label = table.set_index("label")
    for p, end in zip(design.pipelines, ends, strict=True):
        row = by_label.loc[p.label]
        assert row["memory_end"] == pytest.approx(
            replica.norm[design.pipelines.index(p)][:, -1].mean(), abs=1e-9
        )
        if end < -0.1:
            assert row["state"] == "reversed"
    rows = calibrate.score_replica(replica, n_boot=20)
    norm_rows = [r for r in rows if r["verdict"] == "norm memory at the end"]
    reversed_rows = [r for r in norm_rows if r["said"] == "reversed"]
    assert reversed_rows and not any(r["wrong"] for r in reversed_rows)


def test_norm_states_are_scored_against_the_true_end():
    wrong = calibrate._norm_wrong
    assert wrong("reversed", 0.1) and not wrong("reversed", -0.1)
    assert wrong("overshoot", 0.9) and not wrong("overshoot", 1.05)
    assert wrong("converged", -0.5) and not wrong("converged", -0.2)
    assert wrong("stayed apart", -0.2) and not wrong("stayed apart", 0.8)
    assert not wrong("cannot tell", 0.5)


def test_the_verdict_error_is_its_worst_over_the_truths():
    """worst_errors: the largest fraction of wrong replicas over the truths and where, from the
    scores; the rank decision under "explicit decay only" naming accumulated counts as wrong."""
    rows = []
    plan = {"accumulated": (0, 10), "neither": (3, 10), "explicit decay only": (6, 10)}
    for truth, (k, n) in plan.items():
        for i in range(n):
            said = "accumulated" if i < k else "cannot tell"
            if truth == "accumulated":
                said = "accumulated"
            right = synthetic.right_verdict(truth)
            rows.append(
                {"verdict": "unit decision (rank)", "subject": "norm", "said": said,
                 "wrong": said not in ("cannot tell", right), "truth": truth, "replica": i}
            )  # fmt: skip
    scores = pd.DataFrame(rows)
    assert calibrate.worst_errors(scores) == {"norm": (0.6, "explicit decay only", 3)}
    allowed = calibrate.allowed_verdicts(scores)
    assert allowed["norm"]["accumulated"] == pytest.approx(0.6)


def test_the_calibration_scores_the_equivalence_rule():
    """The function-memory verdict on replicas: with the memory kept whole (true difference 8 pp,
    4x the margin) "gone" is never said and "kept" nearly always; with the memory gone (true
    difference 0) and little noise, "gone" nearly always, and never scored wrong."""
    design = _design(n_seeds=6)
    verdict = "function memory (kept / gone)"
    rates = {}
    for name, scale, sigma in (("whole", 1e4, 0.01), ("gone", 1e-4, 0.003)):
        truth = synthetic.Truth("accumulated", scale=scale, sigma_acc=sigma, sigma_seed=0.0)
        result = calibrate.calibrate(design, 10, truths={"accumulated": truth}, n_boot=20)
        part = result.scores[result.scores["verdict"] == verdict]
        assert len(part) == 10 * len(design.pipelines)
        rates[name] = part["said"].value_counts(normalize=True).to_dict()
        assert not part["wrong"].any()
    assert rates["whole"].get("gone", 0.0) == 0.0 and rates["whole"].get("kept", 0.0) >= 0.9
    assert rates["gone"].get("gone", 0.0) >= 0.9
    assert calibrate._function_wrong("gone", 2.0) and not calibrate._function_wrong("gone", 1.9)
    assert not calibrate._function_wrong("kept", 0.5) and calibrate._function_wrong("kept", 0.0)
