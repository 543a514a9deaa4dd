"""The one decision of "forgotten" (theory.criterion.decide) against first crossings computed here."""

import math

import numpy as np
import pytest

from initmem.theory.criterion import (
    FORGETTING,
    combine_layers,
    decide,
    evaluation_states,
    interval_state,
)

T = np.arange(0.0, 1001.0, 50.0)


def test_first_crossing_of_an_exponential_and_its_interval():
    tau = 300.0
    mean = np.exp(-T / tau)
    half = 0.1
    decision = decide(T, mean, mean - half, mean + half)
    assert decision.forgotten and decision.step == 300.0  # the first t >= tau on the grid
    # the interval reaches 1/e when exp(-t/tau) - 0.1 <= 1/e, lies below it when + 0.1 <= 1/e
    lo = T[np.flatnonzero(mean - half <= math.exp(-1))[0]]
    hi = T[np.flatnonzero(mean + half <= math.exp(-1))[0]]
    assert (decision.step_lo, decision.step_hi) == (lo, hi)
    assert lo < 300.0 < hi
    assert math.isnan(decision.extrapolated)  # forgotten: no extrapolation kept
    assert decision.text() == "forgotten at 300 steps [250, 400]"


def test_not_forgotten_keeps_the_fit_only_as_extrapolated():
    mean = 0.465 + 0.535 * np.exp(-T / 90.0)
    decision = decide(T, mean, extrapolated=509.0)
    assert decision.state == "not forgotten" and decision.step == math.inf
    assert decision.reported_step == 1000.0 and decision.extrapolated == 509.0
    assert "not within the run" in decision.text() and "extrapolated" in decision.text()


def test_reversed_is_not_forgotten_and_nan_is_not_kept():
    mean = np.linspace(1.0, -0.16, T.size)
    assert decide(T, mean, mean - 0.01, mean + 0.02).state == "reversed"
    # an interval that includes 0 at the end is not reversed: forgotten where |mean| <= 1/e
    wide = decide(T, mean, mean - 0.3, mean + 0.3)
    assert wide.state == "forgotten" and wide.step == T[np.flatnonzero(mean <= math.exp(-1))[0]]
    assert decide(T, np.full(T.size, np.nan)).state == "undefined"
    states = evaluation_states([0.9, 0.2, -0.1, np.nan], hi=[0.95, 0.3, -0.05, np.nan])
    assert list(states) == ["kept", "forgotten", "reversed", "undefined"]


def test_interval_state_and_layers():
    level = FORGETTING.level
    assert interval_state(0.1, 0.0, 0.2) == "forgotten"
    assert interval_state(0.6, 0.5, 0.7) == "kept"
    assert interval_state(-0.16, -0.17, -0.14) == "reversed"
    # above 1 with an interval excluding 1: overshoot (kept, and further apart than at init)
    assert interval_state(1.02, 1.005, 1.03) == "overshoot"
    assert interval_state(1.02, 0.99, 1.03) == "kept"  # the interval reaches 1
    assert interval_state(-0.16, -0.3, 0.01) == "forgotten"  # |m| decides: within [-1/e, 1/e]
    assert interval_state(-0.5, -0.7, 0.1) == "cannot tell"
    assert interval_state(0.3, 0.2, level + 0.01) == "cannot tell"
    assert interval_state(0.3, math.nan, math.nan) == "cannot tell"
    assert interval_state(math.nan, math.nan, math.nan) == "undefined"
    np.testing.assert_allclose(combine_layers([[0.2, 0.6], [1.0, 0.0]]), [0.4, 0.5])
    assert np.isnan(combine_layers([[0.2, np.nan]])[0])
    with pytest.raises(ValueError, match="one non-zero length"):
        decide(T, np.ones(3))
