"""The shared argument checks: one clear line per bad input (issue 35 item 7)."""

import math

import numpy as np
import pytest

from initmem.theory import checks


@pytest.mark.parametrize(
    "name,message",
    [
        (
            "SGD",
            "optimizer must be one of ['sgd', 'adam', 'adamw', 'rmsprop'] (got 'SGD'); "
            "names are lower case: 'sgd'",
        ),
        ("AdamW", "(got 'AdamW'); names are lower case: 'adamw'"),
        ("nadam", "(got 'nadam')"),
        (3, "(got 3)"),
    ],
)
def test_optimizer_names_are_exact(name, message):
    """A mis-cased or unknown name is refused with one line (never read as SGD)."""
    with pytest.raises(ValueError) as err:
        checks.check_optimizer(name)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("memory", [math.nan, [0.2, math.nan], math.inf])
def test_memory_must_be_finite(memory):
    with pytest.raises(ValueError, match="memory must be finite .* neither forgotten nor kept"):
        checks.check_memory("memory", memory)


def test_a_signed_memory_passes_unchanged():
    """Reversed memories (below 0) are values, not errors: the caller decides what they mean."""
    assert checks.check_memory("memory", -0.16) == -0.16
    np.testing.assert_array_equal(checks.check_memory("memory", [1.0, -0.2]), [1.0, -0.2])


@pytest.mark.parametrize(
    "value,name",
    [(-1.0, "init_sq_per_coord"), (math.nan, "alpha"), (math.inf, "inv_init_sq_per_coord")],
)
def test_numbers_name_the_field_and_range(value, name):
    with pytest.raises(ValueError, match=rf"^{name} must be finite and > 0"):
        checks.check_number(name, value, strict=True)


def test_the_criterion_refuses_a_nan_memory():
    """A NaN memory is neither forgotten nor kept: the criterion raises instead of answering False."""
    from initmem.theory.criterion import FORGETTING

    assert FORGETTING.forgotten(0.3) and not FORGETTING.forgotten(0.5)
    with pytest.raises(ValueError, match="neither forgotten nor kept"):
        FORGETTING.forgotten(math.nan)
