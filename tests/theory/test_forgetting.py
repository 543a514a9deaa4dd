"""Every mechanism's forgetting time for a pipeline, against simulation (synthetic BN weight, float64)."""

import json
import math

import numpy as np
import pytest

from initmem.theory.criterion import FORGETTING
from initmem.theory.forgetting import MECHANISMS, Pipeline, predict_forgetting
from initmem.theory.normalized_sim import ScaleInvariantLoss, first_time_below, simulate_norms
from initmem.theory.schedule import lr_multipliers

DIM = 256
NOISE = ScaleInvariantLoss(dim=DIM, noise_sq=1.0)
# one synthetic group of DIM coordinates with |w_0|^2 = 1 and |g_hat|^2 = 1 per step
GROUP = {"fan_ins": [DIM], "init_sq_per_coord": 1.0 / DIM, "grad_sq_unit": 1.0}


def row(report, name):
    return report.table.set_index("mechanism").loc[name]


@pytest.mark.parametrize(
    "pipeline,sim_kwargs",
    [
        (Pipeline(lr=0.02, l2=0.0125), {"l2": 0.0125}),
        (
            Pipeline(lr=0.002, momentum=0.9, weight_decay=0.25),
            {"momentum": 0.9, "weight_decay": 0.25},
        ),
        (
            Pipeline(optimizer="adamw", lr=3e-3, weight_decay=0.1, beta2=0.99),
            {"optimizer": "adamw", "weight_decay": 0.1, "betas": (0.9, 0.99)},
        ),
    ],
)
def test_pipeline_time_against_simulation(pipeline, sim_kwargs):
    # Adam-family: the mean field (v's lag) is within 15% at the e-fold of 2 ln alpha (measured
    # 12% with AdamW); the SGD laws within 10%.
    rel = 0.10 if pipeline.optimizer == "sgd" else 0.15
    alphas = [1.0, 3.0, 0.3]
    traj = simulate_norms(
        NOISE, lr=pipeline.lr, steps=7000, alphas=alphas, record_every=10, **sim_kwargs
    )
    ratios = traj.log_ratio()
    for i, alpha in enumerate(alphas[1:], start=1):
        report = predict_forgetting(pipeline, alpha, **GROUP)
        # the shared criterion: |ln eff_lr ratio| within 1/e of its init value 2 |ln alpha|
        measured = first_time_below(
            traj.steps, ratios[i], FORGETTING.tolerance(2 * math.log(alpha))
        )
        assert report.steps == pytest.approx(measured, rel=rel), alpha


def test_memory_left_at_end_of_a_scheduled_run():
    steps, lr, l2, alpha = 3000, 0.02, 0.01, 3.0
    mults = lr_multipliers(steps, 100, "cosine", warmup_epochs=1)
    pipeline = Pipeline(lr=lr, l2=l2, total_steps=steps, steps_per_epoch=100, lr_multipliers=mults)
    report = predict_forgetting(pipeline, alpha, **GROUP)
    traj = simulate_norms(
        NOISE,
        lr=lr,
        steps=steps,
        alphas=[1.0, alpha],
        l2=l2,
        lr_multipliers=mults,
        record_every=steps,
    )
    measured = abs(traj.log_ratio()[1, -1]) / (2 * math.log(alpha))
    left = row(report, "pipeline").memory_left
    assert 0.05 < measured < 0.95  # the run ends part-way: a real test of the schedule
    assert left == pytest.approx(measured, rel=0.10)
    assert report.accumulated["explicit"] == pytest.approx(float(np.sum(lr * mults * l2)))
    assert report.epochs == pytest.approx(report.steps / 100)


def test_dominant_mechanism_and_limits():
    # plain SGD: only the noise drift forgets, and the pipeline time is its time
    plain = predict_forgetting(Pipeline(lr=1e-3), 4.0, **GROUP)
    assert plain.dominant == "sgd_noise"
    assert plain.steps == pytest.approx(row(plain, "sgd_noise").steps)
    assert math.isinf(row(plain, "gradient_flow").steps)
    assert math.isinf(row(plain, "linear_decay").steps)  # null space kept forever

    # decay much slower than the drift: still the drift, pipeline time ~ T_noise
    weak = predict_forgetting(Pipeline(lr=1e-2, l2=1e-9), 4.0, **GROUP)
    assert weak.dominant == "sgd_noise"
    assert weak.steps == pytest.approx(row(weak, "sgd_noise").steps, rel=1e-2)

    # strong decay: explicit decay dominates and the time is ~ tau ln(T_noise / tau)
    strong = predict_forgetting(Pipeline(lr=1e-2, l2=1e-2), 4.0, **GROUP)
    assert strong.dominant == "explicit_decay"
    tau, t_noise = row(strong, "explicit_decay").e_fold_steps, row(strong, "sgd_noise").steps
    assert strong.steps == pytest.approx(tau * math.log(t_noise / tau), rel=0.10)
    assert row(strong, "explicit_decay").steps < strong.steps < t_noise

    adam = predict_forgetting(Pipeline(optimizer="adam", lr=1e-3), 4.0, **GROUP)
    assert adam.dominant == "adaptive"
    assert not row(adam, "sgd_noise").acts
    adamw = predict_forgetting(Pipeline(optimizer="adamw", lr=1e-3, weight_decay=1.0), 4.0, **GROUP)
    assert adamw.dominant == "explicit_decay"
    assert row(adamw, "explicit_decay").e_fold_steps == pytest.approx(1 / (2e-3), rel=1e-3)


def test_slowest_layer_sets_the_time():
    """Adam's time ~ alpha^2 |w_0|^2 / (lr^2 fan_in): with torch's init (1/3 per filter) the
    smallest fan-in is slowest, and each mechanism reports the slowest layer."""
    report = predict_forgetting(Pipeline(optimizer="adam", lr=1e-3), 4.0, fan_ins=[27, 576, 4608])
    per_layer = report.layers[report.layers.mechanism == "adaptive"].set_index("fan_in").steps
    assert per_layer[27] > per_layer[576] > per_layer[4608]
    assert row(report, "adaptive").steps == per_layer[27]

    # lag-free limit T ~ K / (lr^2 d), K = |w0|^2 (alpha^2 - e^tol) / (e^tol - 1), tol = 2 ln 4 / e
    # (the shared criterion): reached where
    # lr^2 d / (1 - beta2) << |w0|^2 (fan-in 27); v's lag slows the big layers' growth.
    tol = FORGETTING.tolerance(2 * math.log(4.0))

    def limit(fan_in):
        return (1 / 3) * (16 - math.exp(tol)) / (math.exp(tol) - 1) / (1e-6 * fan_in)

    assert per_layer[27] == pytest.approx(limit(27), rel=0.10)
    assert per_layer[4608] > 2 * limit(4608)


def test_linear_decay_row_against_null_space_simulation():
    """GD + L2 on least squares with d > n: the alpha-part of the null-space component shrinks to tol."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((5, 12)), rng.standard_normal(5)
    w0 = rng.standard_normal(12)
    lr, l2, alpha, tol = 0.05, 0.02, 3.0, 0.1
    report = predict_forgetting(Pipeline(lr=lr, l2=l2), alpha, tol=tol, **GROUP)
    steps = row(report, "linear_decay").steps
    _, _, vt = np.linalg.svd(X)
    null = vt[5:].T @ vt[5:]

    def train(w, n_steps):
        for _ in range(n_steps):
            w = w - lr * (X.T @ (X @ w - y) / len(y) + l2 * w)
        return w

    n = math.ceil(steps)
    gap = null @ (train(alpha * w0, n) - train(w0, n))
    assert np.linalg.norm(gap) <= tol * np.linalg.norm(null @ w0) * (1 + 1e-9)
    gap_before = null @ (train(alpha * w0, n - 1) - train(w0, n - 1))
    assert np.linalg.norm(gap_before) > tol * np.linalg.norm(null @ w0)


def test_report_is_strict_json():
    pipeline = Pipeline(optimizer="adam", lr=1e-3, l2=5e-4, total_steps=500, steps_per_epoch=50)
    report = predict_forgetting(pipeline, 2.0, fan_ins=[576])
    text = json.dumps(report.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert [m["mechanism"] for m in back["mechanisms"]] == list(MECHANISMS)
    assert back["dominant"] in {"sgd_noise", "explicit_decay", "adaptive", "none"}
    assert back["mechanisms"][0]["steps"] == "inf"


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: Pipeline(optimizer="lbfgs"), "optimizer"),
        (lambda: Pipeline(optimizer="SGD"), "lower case: 'sgd'"),
        (lambda: Pipeline(optimizer="nadam"), "optimizer"),
        (lambda: Pipeline(momentum=1.0), "momentum"),
        (lambda: predict_forgetting(Pipeline(), -2.0), "alpha"),
        (lambda: predict_forgetting(Pipeline(), math.inf), "alpha"),
        (lambda: predict_forgetting(Pipeline(), 2.0, init_sq_per_coord=-1.0), "init_sq_per_coord"),
        (lambda: predict_forgetting(Pipeline(), 2.0, logit_scale=math.nan), "logit_scale"),
        (
            lambda: predict_forgetting(Pipeline(total_steps=10), 2.0, inv_init_sq_per_coord=-3.0),
            "inv_init_sq_per_coord",
        ),
        (lambda: Pipeline(lr=0.0), "lr"),
        (lambda: Pipeline(weight_decay=-1.0), "weight_decay"),
        (lambda: Pipeline(total_steps=10, lr_multipliers=np.ones(9)), "lr_multipliers"),
        (lambda: predict_forgetting(Pipeline(), 0.0), "alpha"),
        (lambda: predict_forgetting(Pipeline(), 2.0, fan_ins=[0]), "fan_ins"),
        (lambda: predict_forgetting(Pipeline(lr=10.0, l2=1.0), 2.0), "lr"),
    ],
)
def test_bad_inputs_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_reported_times_follow_the_schedule():
    # Cosine + warmup, SGD lr 1e-2, L2 1e-2, alpha 3: the times once ignored the schedule (23,087
    # steps, the constant-lr value) while memory_left and normalized_forgetting used it (never).
    from initmem.theory.normalized import normalized_forgetting

    total, per_epoch = 3000, 100
    mults = lr_multipliers(total, per_epoch, "cosine", warmup_epochs=2)
    pipeline = Pipeline(
        lr=1e-2, l2=1e-2, steps_per_epoch=per_epoch, total_steps=total, lr_multipliers=mults
    )
    report = predict_forgetting(pipeline, 3.0)
    expected = normalized_forgetting(3.0, lr=1e-2, l2=1e-2, fan_in=576, lr_multipliers=mults)
    assert report.steps == expected.steps == math.inf
    assert row(report, "pipeline").epochs == math.inf
    left = row(report, "pipeline").memory_left
    assert 0 < left < 1
    assert report.verdict == f"not within the run: the schedule ends with memory {left:.3g}"
    constant = predict_forgetting(Pipeline(lr=1e-2, l2=1e-2), 3.0)
    assert 1e4 < constant.steps < math.inf
    # A constant schedule is the constant-lr law (its time may lie past the run's end).
    flat = Pipeline(lr=1e-2, l2=1e-2, total_steps=100, lr_multipliers=np.ones(100))
    assert predict_forgetting(flat, 3.0).steps == constant.steps
    # Ones, then a last step at half the lr: the first whole step at or after the constant time.
    long = int(max(constant.steps, row(constant, "linear_decay").steps)) + 10
    mults = np.concatenate([np.ones(long - 1), [0.5]])
    ones = Pipeline(lr=1e-2, l2=1e-2, total_steps=long, lr_multipliers=mults)
    assert predict_forgetting(ones, 3.0).steps == math.ceil(constant.steps)
    linear_row = row(predict_forgetting(ones, 3.0), "linear_decay")
    assert linear_row.steps == pytest.approx(row(constant, "linear_decay").steps, abs=1.0)
    # nothing forgets within the cosine run: none dominates (times only), and each row says
    # what its schedule leaves
    assert report.dominant == "none"
    for name in ("sgd_noise", "explicit_decay", "pipeline", "linear_decay"):
        assert row(report, name).verdict.startswith("not within the run"), name
    assert row(report, "gradient_flow").verdict.startswith("never")


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_zero_multiplier_is_a_step_that_does_nothing(optimizer):
    ones = np.ones(400)
    with_zero = np.concatenate([ones[:100], [0.0], ones[100:]])
    kwargs = dict(optimizer=optimizer, lr=0.05, l2=0.01 if optimizer == "sgd" else 0.0)
    base = predict_forgetting(
        Pipeline(total_steps=400, lr_multipliers=ones, **kwargs), 2.0, **GROUP
    )
    zero = predict_forgetting(
        Pipeline(total_steps=401, lr_multipliers=with_zero, **kwargs), 2.0, **GROUP
    )
    left = row(zero, "pipeline").memory_left
    assert left == pytest.approx(
        row(base, "pipeline").memory_left, rel=1e-6 if optimizer == "sgd" else 0.05
    )


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"batch_size": 1.5}, "batch_size"),
        ({"steps_per_epoch": 2.5}, "steps_per_epoch"),
        ({"total_steps": 0}, "total_steps"),
        ({"lr_multipliers": []}, "lr_multipliers"),
    ],
)
def test_pipeline_rejects_non_integer_sizes(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Pipeline(**kwargs)


def test_groups_rank_the_predicted_and_mark_the_rest():
    from initmem.theory import logit_scale

    sgd = Pipeline(lr=2e-2, momentum=0.9, l2=1e-2, batch_size=32, steps_per_epoch=31)
    report = predict_forgetting(sgd, 4.0, fan_ins=[72, 144])
    groups = report.groups.set_index("group")
    assert list(groups.index) == [
        "bn_conv_weights",
        "head_logit_scale",
        "non_bn_weights",
        "inner_bn_affine",
    ]
    assert not groups.loc["inner_bn_affine"].prediction
    assert math.isnan(groups.loc["inner_bn_affine"].steps) and math.isnan(
        groups.loc["inner_bn_affine"]["rank"]
    )
    assert "no prediction" in groups.loc["inner_bn_affine"].formula
    tol = FORGETTING.tolerance(2 * math.log(4.0))  # alpha on head and gain: logits ~ alpha^2
    head = logit_scale.logit_scale_forgetting_steps(4.0, 2e-2, l2=1e-2, momentum=0.9, tol=tol)
    assert groups.loc["head_logit_scale"].steps == pytest.approx(head, rel=1e-12)
    assert groups.loc["bn_conv_weights"].steps == report.steps
    predicted = groups[groups.prediction]
    assert sorted(predicted["rank"]) == [1.0, 2.0, 3.0]
    assert report.forgets_last == predicted.steps.idxmax()
    assert groups.loc["head_logit_scale"].epochs == pytest.approx(head / 31)
    # With the logit scales measured: model (4), shorter than the decay-only bound.
    measured = predict_forgetting(sgd, 4.0, logit_scale=0.6, equilibrium_logit_scale=2.6)
    modelled = logit_scale.logit_scale_forgetting_steps(
        4.0, 2e-2, l2=1e-2, momentum=0.9, init_scale=0.6, equilibrium_scale=2.6, tol=tol
    )
    assert measured.groups.set_index("group").loc["head_logit_scale"].steps == pytest.approx(
        modelled
    )
    assert modelled < head
    # Adam without decay: the head has no prediction; SGD without decay keeps it (inf).
    adam = predict_forgetting(Pipeline(optimizer="adam", lr=1e-3), 4.0).groups.set_index("group")
    assert not adam.loc["head_logit_scale"].prediction
    plain = predict_forgetting(Pipeline(lr=1e-3), 4.0).groups.set_index("group")
    assert plain.loc["head_logit_scale"].steps == math.inf
    # SGD + decay with alpha on the head only: no law (logit_scale refuses it), an explicit row.
    head_only = predict_forgetting(sgd, 4.0, head_and_bn_scaled=False).groups.set_index("group")
    row = head_only.loc["head_logit_scale"]
    assert not row.prediction and math.isnan(row.steps) and "head only" in row.formula
    json.dumps(report.to_dict(), allow_nan=False)


def test_adam_head_group_uses_law_7_where_it_applies():
    """Adam + coupled L2 with the equilibrium gain: law (7) (tested against simulation in
    test_logit_scale); every other Adam-family head gets an explicit row saying why not."""
    from initmem.theory import logit_scale

    tol = FORGETTING.tolerance(2 * math.log(4.0))  # the shared criterion for logits ~ alpha^2
    adam_l2 = Pipeline(optimizer="adam", lr=1e-2, l2=0.1, beta2=0.99, steps_per_epoch=50)
    report = predict_forgetting(adam_l2, 4.0, equilibrium_gain=0.23)
    head = report.groups.set_index("group").loc["head_logit_scale"]
    law = logit_scale.adam_logit_scale_forgetting_steps(
        4.0, 1e-2, l2=0.1, equilibrium_gain=0.23, betas=(0.9, 0.99), tol=tol
    )
    assert head.prediction and head.steps == law and head.epochs == pytest.approx(law / 50)
    assert head["rank"] >= 1 and "law (7)" in head.formula
    json.dumps(report.to_dict(), allow_nan=False)

    # Over a schedule: the first step of recursion (6) at lr_t within tol gamma*, inf if none.
    mults = lr_multipliers(3000, 100, "cosine", warmup_epochs=1)
    scheduled = Pipeline(optimizer="adam", lr=1e-2, l2=0.1, total_steps=3000, lr_multipliers=mults)
    path = logit_scale.adam_excess_path(4.0 - 0.23, 1e-2, 3000, lr_multipliers=mults)
    first = np.flatnonzero(np.abs(path) <= tol * 0.23)[0]
    got = predict_forgetting(scheduled, 4.0, equilibrium_gain=0.23).groups.set_index("group")
    assert got.loc["head_logit_scale"].steps == first
    short = Pipeline(optimizer="adam", lr=1e-2, l2=0.1, total_steps=300, lr_multipliers=mults[:300])
    got = predict_forgetting(short, 4.0, equilibrium_gain=0.23).groups.set_index("group")
    assert got.loc["head_logit_scale"].steps == math.inf

    cases = {
        "equilibrium_gain": (adam_l2, {}),
        "AdamW": (Pipeline(optimizer="adamw", lr=1e-2, weight_decay=0.1), {}),
        "algebraically": (Pipeline(optimizer="adam", lr=1e-2), {}),
        "head only": (adam_l2, {"head_and_bn_scaled": False}),
        "RMSprop": (Pipeline(optimizer="rmsprop", lr=1e-2, l2=0.1), {}),
    }
    for reason, (pipeline, extra) in cases.items():
        groups = predict_forgetting(
            pipeline, 4.0, **({"equilibrium_gain": 0.23} if extra else {}), **extra
        ).groups.set_index("group")
        row = groups.loc["head_logit_scale"]
        assert not row.prediction and math.isnan(row.steps) and math.isnan(row["rank"])
        assert reason in row.formula and row.formula.startswith("no prediction")
    with pytest.raises(ValueError, match="equilibrium_gain"):
        predict_forgetting(adam_l2, 4.0, equilibrium_gain=0.0)


#: Every schedule the config supports (``RunConfig.schedule``, warmup on or off), as the trainer
#: expands it: 4,000 steps of 100.
SCHEDULE_CASES = [
    ("constant", {}),
    ("constant", {"warmup_epochs": 5}),
    ("step", {"milestone_epochs": (10, 25)}),
    ("step", {"milestone_epochs": (15,), "warmup_epochs": 2, "step_gamma": 0.3}),
    ("cosine", {}),
    ("cosine", {"warmup_epochs": 5}),
]


def test_schedule_cases_cover_every_schedule():
    from initmem.theory.schedule import SCHEDULES

    assert {name for name, _ in SCHEDULE_CASES} == set(SCHEDULES)
    assert any("warmup_epochs" in kw for _, kw in SCHEDULE_CASES)


@pytest.mark.parametrize("schedule,kwargs", SCHEDULE_CASES)
@pytest.mark.parametrize(
    "optimizer,decay",
    [("sgd", {"l2": 1e-2, "momentum": 0.9}), ("sgd", {}), ("adamw", {"weight_decay": 0.5})],
)
def test_predict_forgetting_agrees_with_normalized_on_every_schedule(
    schedule, kwargs, optimizer, decay
):
    """The issue's case (SGD lr 1e-2, L2 1e-2, alpha 3, cosine with warmup: 21,536 steps against
    never) came from two defaults: normalized_forgetting's absolute tol 0.1 against the shared
    1/e. Now both default to the criterion and agree exactly on every schedule, pipeline row and
    decay row alike (the same law, the same steps)."""
    from initmem.theory.normalized import normalized_forgetting

    total, per_epoch = 4000, 100
    mults = lr_multipliers(total, per_epoch, schedule, **kwargs)
    lr = 1e-2 if optimizer == "sgd" else 1e-3
    pipeline = Pipeline(
        optimizer=optimizer,
        lr=lr,
        batch_size=128,
        total_steps=total,
        steps_per_epoch=per_epoch,
        lr_multipliers=mults,
        **decay,
    )
    report = predict_forgetting(pipeline, 3.0, **GROUP)
    lr_used, mults_used = pipeline.time_schedule
    alone = normalized_forgetting(
        3.0,
        lr=lr_used,
        fan_in=DIM,
        optimizer=optimizer,
        init_sq_per_coord=1.0 / DIM,
        grad_sq_unit=1.0,
        lr_multipliers=mults_used,
        **decay,
    )
    assert report.steps == alone.steps
    if decay.get("l2") or decay.get("weight_decay"):
        assert row(report, "explicit_decay").steps == alone.decay_steps
    if math.isinf(report.steps):
        assert report.verdict.startswith("not within the run: the schedule ends with memory")
    else:
        assert report.verdict == f"forgotten at step {report.steps:.6g}"


def test_decay_time_is_the_relaxation_from_equilibrium():
    """(5) of normalized against simulation: both runs start at the SGD + L2 equilibrium norm (the
    alpha run at alpha^2 times it); the first step whose simulated memory is at or below 1/e
    matches the decay's own time within 10% (the mean field's noise)."""
    from initmem.theory import normalized as nz

    lr, l2, alpha = 0.02, 0.0125, 3.0
    law = nz.sgd_norm_law(lr, NOISE.noise_sq, l2=l2)
    start = law.equilibrium_norm_sq()
    traj = simulate_norms(
        NOISE, lr=lr, steps=3000, alphas=[1.0, alpha], l2=l2, init_norm_sq=start, record_every=5
    )
    measured = first_time_below(
        traj.steps, traj.log_ratio()[1], FORGETTING.tolerance(2 * math.log(alpha))
    )
    predicted = nz.decay_forgetting_steps(alpha, math.log(law.contraction), 2)
    assert predicted == pytest.approx(measured, rel=0.10)
    report = predict_forgetting(Pipeline(lr=lr, l2=l2), alpha, **GROUP)
    assert row(report, "explicit_decay").steps == pytest.approx(predicted, rel=1e-12)
