"""Model (4) of initmem.theory.logit_scale over a panel of random feature draws, each against the
float64 simulation (simulate_logit_scale): the band of measured / predicted forgetting times that
the module docstring states, per alpha, asserted with a margin of 0.03 on each side.

Panel: 16 draws of fixed normalized Gaussian features, 6 shapes n x p (48-80 examples), K = 2..5
classes, one seed each; SGD lr 0.3 with l2 0.01 on every draw, heavy ball (lr 0.03, momentum 0.9)
on four; 1,500 full-batch steps; s_0 and s* from each draw's alpha = 1 run; tol 0.1. Head only
(alpha on the head, the gain at 1): (4) with k = 1 (solved here by bisection, as the module refuses
it) against the same panel, the band the refusal states.
"""

import numpy as np
import pytest

from initmem.theory import logit_scale as ls
from initmem.theory.simulate import simulate_logit_scale
from tests.theory.test_logit_scale_checks import model_4_time

#: (n, p, classes, seed) of the panel.
DRAWS = [
    (48, 16, 3, 5),
    (48, 16, 2, 1),
    (48, 16, 5, 2),
    (48, 16, 4, 11),
    (48, 24, 3, 13),
    (48, 24, 4, 14),
    (56, 32, 2, 18),
    (64, 32, 4, 0),
    (64, 32, 2, 3),
    (64, 32, 3, 4),
    (64, 32, 5, 6),
    (80, 24, 2, 7),
    (80, 24, 3, 8),
    (80, 24, 4, 9),
    (80, 24, 5, 10),
    (80, 40, 3, 17),
]
#: Draws also run with heavy ball.
MOMENTUM_DRAWS = [(48, 16, 3, 5), (64, 32, 4, 0), (80, 24, 2, 7), (48, 24, 4, 14)]
#: The band of measured / predicted that the module docstring states, per alpha (both = True).
BAND = {2.0: (0.44, 1.28), 4.0: (0.60, 1.11), 8.0: (0.69, 1.05)}
#: Head only: measured / (4) with k = 1, over every draw and alpha (the refusal's message).
HEAD_ONLY_BAND = (0.07, 0.92)
MARGIN = 0.03
#: The largest change of measured - predicted (steps) between alpha = 2 and 8 on one draw
#: (asserted with 10 steps, two records, of margin).
OFFSET_SPREAD = 83
#: measured - predicted (steps) over the panel at alpha = 2, 4, 8 (10 steps of margin).
OFFSETS = (-308, 98)
STEPS, L2, TOL = 1500, 0.01, 0.1


def panel_features(n, p, classes, seed):
    rng = np.random.default_rng(seed)
    phi = rng.standard_normal((n, p))
    return (phi - phi.mean(0)) / phi.std(0), rng.integers(0, classes, n)


def measured_and_predicted(draw, lr, momentum, both=True):
    """{alpha: (measured, predicted)} for alpha in BAND; measured: the step after the last recorded
    one with memory > tol.

    Predicted: logit_scale_forgetting_steps (both), or (4) with k = 1 by bisection (head only).
    """
    n, p, classes, seed = draw
    phi, labels = panel_features(n, p, classes, seed)

    def run(alpha):
        return simulate_logit_scale(
            phi,
            labels,
            classes,
            alpha,
            lr,
            STEPS,
            l2=L2,
            momentum=momentum,
            both=both,
            record_every=5,
        )

    ref = run(1.0)
    s0, s_eq = ref.scale[0], ref.scale[-1]
    out = {}
    for alpha in BAND:
        memory = np.abs(np.log(run(alpha).scale / ref.scale))
        last = np.flatnonzero(memory > TOL)[-1]
        assert last + 1 < len(ref.steps), "not forgotten within the run: lengthen STEPS"
        if both:
            predicted = ls.logit_scale_forgetting_steps(
                alpha, lr, l2=L2, momentum=momentum, init_scale=s0, equilibrium_scale=s_eq, tol=TOL
            )
        else:
            kappa = ls.decay_per_step(lr, L2, momentum=momentum)
            predicted = model_4_time(alpha, kappa, s0, s_eq, TOL, k=1)
        out[alpha] = (float(ref.steps[last + 1]), predicted)
    return out


CASES = [(d, 0.3, 0.0) for d in DRAWS] + [(d, 0.03, 0.9) for d in MOMENTUM_DRAWS]


@pytest.mark.parametrize("draw, lr, momentum", CASES)
def test_model_4_within_the_stated_band(draw, lr, momentum):
    times = measured_and_predicted(draw, lr, momentum)
    for alpha, (measured, predicted) in times.items():
        low, high = BAND[alpha]
        assert low - MARGIN <= measured / predicted <= high + MARGIN, (alpha, measured, predicted)
    # The error is mostly an alpha-free offset in steps: measured - predicted spans up to 308 steps
    # over the panel but changes by at most 83 between alpha = 2 and 8 on any one draw.
    offsets = [measured - predicted for measured, predicted in times.values()]
    assert max(offsets) - min(offsets) <= OFFSET_SPREAD + 10
    assert OFFSETS[0] - 10 <= min(offsets) and max(offsets) <= OFFSETS[1] + 10


def test_head_only_is_refused_and_the_refusal_states_the_panel_band():
    ratios = [
        m / p for d in DRAWS for m, p in measured_and_predicted(d, 0.3, 0.0, both=False).values()
    ]
    low, high = HEAD_ONLY_BAND
    assert low - MARGIN <= min(ratios) and max(ratios) <= high + MARGIN
    assert f"{low:.2f}-{high:.2f}" in ls.HEAD_ONLY_REFUSAL
    with pytest.raises(ValueError, match="no law"):
        ls.logit_scale_forgetting_steps(4.0, 0.3, l2=L2, both=False)
