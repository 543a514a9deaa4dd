"""Scale-invariant weights: exact identities (1e-10 relative) and norm laws (10%) against simulation.

Simulations: the synthetic loss ``L(w) = f(w / |w|)`` of ``initmem.theory.normalized_sim`` (numpy
float64, noise-dominated gradients with E|g_hat|^2 = noise_sq) and a small BatchNorm convnet in torch
float64 trained by the real ``torch.optim`` optimizers.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from initmem.theory import normalized as nz
from initmem.theory.normalized_sim import ScaleInvariantLoss, first_time_below, simulate_norms

IDENTITY_RTOL = 1e-10
LAW_RTOL = 0.10
DIM = 256
NOISE = ScaleInvariantLoss(dim=DIM, noise_sq=1.0)


def measured_forgetting(traj, tol=None):
    """First recorded step with |log-ratio| <= tol for each alpha != 1 (row 0 is alpha = 1);
    ``tol`` None: each alpha's shared criterion (norm memory <= 1/e), the laws' default."""
    ratios = traj.log_ratio()
    return [
        first_time_below(traj.steps, ratios[i], nz.log_ratio_tolerance(traj.alphas[i], tol))
        for i in range(1, len(traj.alphas))
    ]


# ------------------------------------------------------------------ exact identities, synthetic loss
@pytest.mark.parametrize(
    "optimizer,l2,weight_decay",
    [("sgd", 0.0, 0.0), ("sgd", 0.05, 0.0), ("sgd", 0.0, 0.05), ("adamw", 0.0, 0.05)],
)
def test_one_step_identity_synthetic(optimizer, l2, weight_decay):
    loss = ScaleInvariantLoss(dim=50, noise_sq=0.3, curvature=2.0, seed=1)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 50)) * 0.7
    lr = 0.1
    _, g = loss.loss_and_grad(w, loss.draw_noise(rng, 1))
    assert abs(float(np.sum(w * g))) < 1e-14 * np.linalg.norm(w) * np.linalg.norm(g)  # <w, g> = 0
    if optimizer == "sgd":
        w_new = (1 - lr * (l2 + weight_decay)) * w - lr * g
        predicted = nz.sgd_norm_sq_after_step(
            float(np.sum(w * w)), float(np.sum(g * g)), lr, l2=l2, weight_decay=weight_decay
        )
    else:  # one AdamW step from a fresh state: u = g / (|g| + eps) per coordinate
        u = g / (np.abs(g) + 1e-8)
        w_new = (1 - lr * weight_decay) * w - lr * u
        predicted = nz.norm_sq_after_step(
            float(np.sum(w * w)),
            float(np.sum(w * u)),
            float(np.sum(u * u)),
            lr,
            1 - lr * weight_decay,
        )
    assert predicted == pytest.approx(float(np.sum(w_new * w_new)), rel=IDENTITY_RTOL)


def test_scale_invariance_of_synthetic_gradient():
    loss = ScaleInvariantLoss(dim=20, noise_sq=0.5, curvature=1.0)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1, 20))
    noise = loss.draw_noise(rng, 1)
    _, g1 = loss.loss_and_grad(w, noise)
    _, g3 = loss.loss_and_grad(3.0 * w, noise)
    np.testing.assert_allclose(g3, g1 / 3.0, rtol=1e-12)
    # finite differences of the loss match the analytic gradient
    e = rng.standard_normal(20)
    h = 1e-6
    lp, _ = loss.loss_and_grad(w + h * e, noise)
    lm, _ = loss.loss_and_grad(w - h * e, noise)
    assert float((lp - lm)[0] / (2 * h)) == pytest.approx(float((g1 @ e)[0]), rel=1e-6)


# --------------------------------------------------------------- exact identities, BatchNorm convnet
def bn_convnet(seed, eps=1e-12):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=False),
        nn.BatchNorm2d(4, eps=eps),
        nn.ReLU(),
        nn.Conv2d(4, 6, 3, padding=1, bias=False),
        nn.BatchNorm2d(6, eps=eps),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 3),
    ).double()


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny float64 convs: one thread is fastest (and immune to a loaded machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def batches():
    gen = torch.Generator().manual_seed(0)
    xs = torch.randn(6, 16, 3, 8, 8, generator=gen, dtype=torch.float64)
    ys = torch.randint(0, 3, (6, 16), generator=gen)
    return list(zip(xs, ys, strict=True))


def grad_step(model, batch):
    model.zero_grad()
    x, y = batch
    nn.functional.cross_entropy(model(x), y).backward()


BN_CONVS = (0, 3)


def test_bn_conv_gradient_orthogonal(batches):
    model = bn_convnet(0, eps=1e-5)
    grad_step(model, batches[0])
    for i in BN_CONVS:
        w, g = model[i].weight, model[i].weight.grad
        w = w.detach()
        per_filter = (w * g).sum((1, 2, 3)) / (
            (w * w).sum((1, 2, 3)) * (g * g).sum((1, 2, 3))
        ).sqrt()
        assert per_filter.abs().max().item() < 1e-3  # BN eps = 1e-5 breaks invariance slightly
    model = bn_convnet(0)
    grad_step(model, batches[0])
    for i in BN_CONVS:
        w, g = model[i].weight.detach(), model[i].weight.grad
        assert abs(float((w * g).sum())) < 1e-10 * float((w.norm() * g.norm()).detach())


@pytest.mark.parametrize("l2,momentum", [(0.0, 0.0), (5e-2, 0.0), (0.0, 0.9), (5e-2, 0.9)])
def test_torch_sgd_identities(batches, l2, momentum):
    """|w'|^2 from identity (2)/(3) with <w, g> = 0, against torch.optim.SGD, over several steps."""
    model = bn_convnet(1)
    lr = 0.3
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=l2)
    states = {
        i: nz.MomentumNormState(float((model[i].weight.detach() ** 2).sum())) for i in BN_CONVS
    }
    bufs = {i: torch.zeros_like(model[i].weight) for i in BN_CONVS}
    for batch in batches:
        grad_step(model, batch)
        before = {}
        for i in BN_CONVS:
            w, g = model[i].weight.detach().clone(), model[i].weight.grad.detach().clone()
            before[i] = float((w * w).sum())
            if momentum == 0:
                predicted = nz.sgd_norm_sq_after_step(before[i], float((g * g).sum()), lr, l2=l2)
            else:
                states[i] = nz.momentum_state_after_step(
                    states[i], float((g * g).sum()), float((bufs[i] * g).sum()), lr, momentum, l2=l2
                )
                predicted = states[i].norm_sq
            before[i] = predicted
        opt.step()
        for i in BN_CONVS:
            actual = float((model[i].weight.detach() ** 2).sum())
            assert before[i] == pytest.approx(actual, rel=IDENTITY_RTOL)
            if momentum:
                bufs[i] = opt.state[model[i].weight]["momentum_buffer"].detach().clone()
                assert states[i].buf_norm_sq == pytest.approx(
                    float((bufs[i] ** 2).sum()), rel=IDENTITY_RTOL
                )


def test_torch_adamw_identity(batches):
    """Identity (2) with u = Adam's update, against torch.optim.AdamW (decoupled decay)."""
    model = bn_convnet(2)
    lr, wd, (b1, b2), eps = 0.05, 0.1, (0.9, 0.999), 1e-8
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    for t, batch in enumerate(batches, start=1):
        grad_step(model, batch)
        predicted = {}
        for i in BN_CONVS:
            p = model[i].weight
            state = opt.state[p]
            g = p.grad.detach()
            m = (state["exp_avg"] * b1 if state else 0) + (1 - b1) * g
            v = (state["exp_avg_sq"] * b2 if state else 0) + (1 - b2) * g * g
            u = (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps)
            w = p.detach()
            predicted[i] = nz.norm_sq_after_step(
                float((w * w).sum()), float((w * u).sum()), float((u * u).sum()), lr, 1 - lr * wd
            )
        opt.step()
        for i in BN_CONVS:
            assert predicted[i] == pytest.approx(
                float((model[i].weight.detach() ** 2).sum()), rel=IDENTITY_RTOL
            )


def test_bn_convnet_norm4_law(batches):
    """SGD on the BN convnet: |w_T|^4 = |w_0|^4 + 2 lr^2 sum |g_hat|^2 (+ the positive lr^4 term)."""
    for alpha in (0.5, 2.0):
        model = bn_convnet(3)
        with torch.no_grad():
            model[3].weight.mul_(alpha)
        lr = 0.05
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        w0 = float((model[3].weight.detach() ** 2).sum())
        total = 0.0
        for _ in range(5):
            for batch in batches:
                grad_step(model, batch)
                w, g = model[3].weight.detach(), model[3].weight.grad
                total += float((g * g).sum() * (w * w).sum())
                opt.step()
        w_t = float((model[3].weight.detach() ** 2).sum())
        predicted = nz.sgd_norm4_after_steps(w0, lr, total)
        assert w_t**2 >= predicted * (1 - 1e-12)  # exact lower bound
        assert w_t**2 == pytest.approx(predicted, rel=1e-2)


# ---------------------------------------------------------------------------------------- laws
def test_gradient_flow_conserves_norm():
    """At fixed continuous time lr * T, GD's drift of |w|^2 vanishes linearly in lr (the flow limit)."""
    loss = ScaleInvariantLoss(dim=30, noise_sq=0.0, curvature=5.0, seed=2)
    drifts = []
    for lr in (0.04, 0.02, 0.01):
        traj = simulate_norms(loss, lr=lr, steps=int(round(4.0 / lr)), record_every=10**6)
        x0, xt = traj.norm_sq[0, 0], traj.norm_sq[0, -1]
        drifts.append(xt / x0 - 1)
        predicted = (
            math.sqrt(nz.sgd_norm4_after_steps(x0, lr, traj.grad_sq_unit_sum[0, -1])) / x0 - 1
        )
        assert drifts[-1] == pytest.approx(predicted, rel=1e-2)
    assert drifts[0] > 0
    assert drifts[1] / drifts[0] == pytest.approx(0.5, rel=LAW_RTOL)
    assert drifts[2] / drifts[1] == pytest.approx(0.5, rel=LAW_RTOL)


def test_sgd_without_decay_norm4_growth():
    lr = 0.02
    traj = simulate_norms(NOISE, lr=lr, steps=5000, alphas=[1.0, 2.0, 0.5], record_every=1000)
    predicted = nz.sgd_norm4_after_steps(traj.norm_sq[:, :1] ** 1, lr, traj.grad_sq_unit_sum)
    np.testing.assert_allclose(traj.norm_sq**2, predicted, rtol=1e-2)
    # and with the mean-field G = noise_sq: the NormLaw
    law = nz.sgd_norm_law(lr, NOISE.noise_sq)
    for i, alpha in enumerate(traj.alphas):
        np.testing.assert_allclose(
            traj.norm_sq[i], law.norm_sq(traj.steps, alpha**2), rtol=LAW_RTOL
        )


@pytest.fixture(scope="module")
def sgd_l2_run():
    lr, l2 = 0.02, 0.0125
    traj = simulate_norms(NOISE, lr=lr, steps=8000, alphas=[1.0, 3.0, 0.3], l2=l2, record_every=10)
    return lr, l2, traj


def test_sgd_l2_equilibrium_and_relaxation(sgd_l2_run):
    lr, l2, traj = sgd_l2_run
    equilibrium = nz.sgd_equilibrium_norm_sq(lr, NOISE.noise_sq, l2=l2)
    tail = traj.norm_sq[:, traj.steps > 6000]
    assert tail.mean() == pytest.approx(equilibrium, rel=LAW_RTOL)
    # alpha-independent: every run ends at the same norm
    np.testing.assert_allclose(tail.mean(axis=1), equilibrium, rtol=LAW_RTOL)
    # time constant of |w|^4 -> y*: fit the decay of |y_t - y*| on the alpha = 3 run
    tau = nz.sgd_relaxation_steps(lr, l2)
    assert tau == pytest.approx(1 / (4 * lr * l2), rel=1e-3)
    y = traj.norm_sq[1] ** 2
    y_star = equilibrium**2
    window = (traj.steps >= 200) & (traj.steps <= 2500)
    slope = np.polyfit(traj.steps[window], np.log(y[window] - y_star), 1)[0]
    assert -1 / slope == pytest.approx(tau, rel=LAW_RTOL)


def test_sgd_l2_trajectory_and_forgetting(sgd_l2_run):
    lr, l2, traj = sgd_l2_run
    law = nz.sgd_norm_law(lr, NOISE.noise_sq, l2=l2)
    for i, alpha in enumerate(traj.alphas):
        np.testing.assert_allclose(traj.norm_sq[i], law.norm_sq(traj.steps, alpha**2), rtol=0.05)
    measured = measured_forgetting(traj)
    predicted = [law.forgetting_steps(a, 1.0) for a in traj.alphas[1:]]
    np.testing.assert_allclose(measured, predicted, rtol=LAW_RTOL)


@pytest.mark.parametrize("decay", ["l2", "weight_decay"])
def test_momentum_effective_rates(decay):
    """Heavy ball mu = 0.9: the laws hold with lr / (1 - mu) and kappa = lr l2 / (1 - mu) (or lr wd)."""
    lr, mu = 0.002, 0.9
    kwargs = {"l2": 0.025} if decay == "l2" else {"weight_decay": 0.25}
    traj = simulate_norms(
        NOISE, lr=lr, steps=6000, alphas=[1.0, 3.0, 0.3], momentum=mu, record_every=10, **kwargs
    )
    assert nz.decay_rate(lr, momentum=mu, **kwargs) == pytest.approx(5e-4)
    law = nz.sgd_norm_law(lr, NOISE.noise_sq, momentum=mu, **kwargs)
    late = traj.steps >= 100  # after the buffer's warm-up of ~ 1 / (1 - mu) steps
    for i, alpha in enumerate(traj.alphas):
        np.testing.assert_allclose(
            traj.norm_sq[i, late], law.norm_sq(traj.steps[late], alpha**2), rtol=0.05
        )
    predicted = [law.forgetting_steps(a, 1.0) for a in traj.alphas[1:]]
    np.testing.assert_allclose(measured_forgetting(traj), predicted, rtol=LAW_RTOL)


def test_momentum_recursion_mean_field():
    """Expected recursion (3) with E<b, g> = 0 reproduces the effective rate lr / (1 - mu)."""
    lr, mu, g_hat_sq = 1e-3, 0.9, 1.0
    state = nz.MomentumNormState(1.0)
    steps = 4000
    for _ in range(steps):
        state = nz.momentum_state_after_step(state, g_hat_sq / state.norm_sq, 0.0, lr, mu)
    predicted = nz.sgd_norm_law(lr, g_hat_sq, momentum=mu).norm_sq(steps, 1.0)
    assert state.norm_sq == pytest.approx(float(predicted), rel=1e-2)


def test_adam_law_in_its_regime():
    """|w|^2 grows by lr^2 per coordinate per step, whatever the gradient's size (lag small)."""
    lr = 1e-3
    for noise_sq in (1.0, 1e-4):
        loss = ScaleInvariantLoss(dim=DIM, noise_sq=noise_sq)
        traj = simulate_norms(
            loss, optimizer="adam", lr=lr, steps=4000, alphas=[3.0, 5.0], record_every=1000
        )
        x0 = traj.norm_sq[:, :1]
        predicted = nz.adaptive_norm_sq_after_steps(x0, lr, DIM, traj.steps)
        growth, predicted_growth = traj.norm_sq - x0, predicted - x0
        np.testing.assert_allclose(growth[:, 1:], predicted_growth[:, 1:], rtol=LAW_RTOL)


@pytest.mark.parametrize(
    "optimizer,lr,kwargs",
    [
        ("adam", 3e-3, {}),
        ("adamw", 3e-3, {"weight_decay": 0.1}),
        ("adam", 3e-3, {"l2": 0.05}),
        ("rmsprop", 3e-3, {}),
        ("rmsprop", 1e-3, {"l2": 0.05, "momentum": 0.5}),
    ],
)
def test_adaptive_mean_field_against_simulation(optimizer, lr, kwargs):
    """The (|w|^2, v) mean field, lag of v included, against Adam / AdamW / RMSprop (beta2 = 0.99)."""
    traj = simulate_norms(
        NOISE,
        optimizer=optimizer,
        lr=lr,
        steps=6000,
        alphas=[1.0, 1.4, 0.7] if not kwargs else [1.0, 3.0, 0.3],
        betas=(0.9, 0.99),
        record_every=50,
        **kwargs,
    )
    field = nz.AdaptiveMeanField(
        optimizer,
        lr,
        DIM,
        beta2=0.99,
        momentum=kwargs.get("momentum", 0.0),
        l2=kwargs.get("l2", 0.0),
        weight_decay=kwargs.get("weight_decay", 0.0),
        grad_sq_unit=NOISE.noise_sq,
    )
    late = traj.steps >= 500
    np.testing.assert_allclose(
        traj.norm_sq[:, late], field.norm_sq(traj.steps[late], traj.alphas**2), rtol=LAW_RTOL
    )
    # an absolute tolerance of 0.1: the crossing lies past the first 500 steps, where the record
    # grid (50 steps) is fine against the time
    predicted = [field.forgetting_steps(a, 1.0, tol=0.1) for a in traj.alphas[1:]]
    np.testing.assert_allclose(measured_forgetting(traj, 0.1), predicted, rtol=LAW_RTOL)


def test_adam_lag_regime_torch_default_init():
    """torch's default init (|w_0|^2 = 1/3 per filter) with lr^2 d = 4.6e-3 (lr 1e-3, fan-in 4608):
    v's lag dominates, the closed-form limit is several times too fast, the mean field is not."""
    lr = math.sqrt(1e-6 * 4608 / DIM)  # same lr^2 d as lr = 1e-3 on 4608 coordinates
    traj = simulate_norms(
        NOISE,
        optimizer="adam",
        lr=lr,
        steps=13000,
        alphas=[1.0, 2.0],
        init_norm_sq=1 / 3,
        record_every=50,
    )
    # absolute tolerance 0.1 (memory 0.07): the law is tested late in the run, where its mean
    # field holds (at the shared 1/e, step ~550, it is 17% late: the early v transient)
    measured = measured_forgetting(traj, 0.1)[0]
    field = nz.AdaptiveMeanField("adam", lr, DIM)
    assert field.forgetting_steps(2.0, 1 / 3, tol=0.1) == pytest.approx(measured, rel=LAW_RTOL)
    assert nz.adaptive_norm_law(lr, DIM).forgetting_steps(2.0, 1 / 3, tol=0.1) < measured / 3


def test_adamw_equilibrium_and_time_constant():
    lr, wd = 3e-3, 0.1
    traj = simulate_norms(
        NOISE,
        optimizer="adamw",
        lr=lr,
        steps=10000,
        alphas=[4.0],
        weight_decay=wd,
        betas=(0.9, 0.99),
        record_every=50,
    )
    equilibrium = nz.adamw_equilibrium_norm_sq(lr, wd, DIM)
    assert equilibrium == pytest.approx(lr * DIM / (2 * wd), rel=1e-3)
    assert traj.norm_sq[0, -40:].mean() == pytest.approx(equilibrium, rel=LAW_RTOL)
    tau = nz.adamw_relaxation_steps(lr, wd)
    assert tau == pytest.approx(1 / (2 * lr * wd), rel=1e-3)
    x = traj.norm_sq[0]
    window = (traj.steps >= 500) & (traj.steps <= 4000)
    slope = np.polyfit(traj.steps[window], np.log(x[window] - equilibrium), 1)[0]
    assert -1 / slope == pytest.approx(tau, rel=LAW_RTOL)


def test_forgetting_time_scalings():
    """At a fixed absolute tolerance, without decay T grows like alpha^4 (SGD) and alpha^2 (Adam);
    with decay like ln(alpha)."""
    sgd = nz.sgd_norm_law(0.01, 1.0)
    adam = nz.adaptive_norm_law(1e-3, 100)
    decayed = nz.sgd_norm_law(0.01, 1.0, l2=0.01)
    tol = 0.1
    for alpha in (100.0, 200.0):
        assert sgd.forgetting_steps(2 * alpha, 1.0, tol) / sgd.forgetting_steps(
            alpha, 1.0, tol
        ) == pytest.approx(16, rel=1e-3)
        assert adam.forgetting_steps(2 * alpha, 1.0, tol) / adam.forgetting_steps(
            alpha, 1.0, tol
        ) == pytest.approx(4, rel=1e-3)
        gap = decayed.forgetting_steps(2 * alpha, 1.0, tol) - decayed.forgetting_steps(
            alpha, 1.0, tol
        )
        assert gap == pytest.approx(math.log(16) / -math.log(decayed.contraction), rel=1e-3)
    assert sgd.forgetting_steps(1.02, 1.0, tol) == 0.0  # |2 ln alpha| <= tol: nothing to forget


def test_default_tolerance_is_the_shared_criterion():
    """Every forgetting time of normalized defaults to predict_forgetting's criterion: the law's
    log-ratio at its time is 1/e of its start (to one step's change), for SGD and the mean field."""
    law = nz.sgd_norm_law(1e-2 * np.ones(30_000), 1.0 / 128, l2=1e-2)
    steps = law.forgetting_steps(3.0, 1 / 3)
    memory = law.log_ratio(np.array([steps - 1, steps]), 3.0, 1 / 3) / (2 * math.log(3.0))
    assert memory[0] > math.exp(-1) >= memory[1]
    assert nz.log_ratio_tolerance(3.0) == pytest.approx(2 * math.log(3.0) / math.e, rel=1e-15)


def test_scheduled_law_against_simulation():
    """A cosine schedule: the per-step NormLaw against SGD + L2 simulated with the same schedule."""
    from initmem.theory.schedule import lr_multipliers

    steps, lr, l2 = 6000, 0.03, 0.0125
    mults = lr_multipliers(steps, 100, "cosine", warmup_epochs=2)
    traj = simulate_norms(
        NOISE,
        lr=lr,
        steps=steps,
        alphas=[1.0, 3.0, 0.3],
        l2=l2,
        record_every=20,
        lr_multipliers=mults,
    )
    law = nz.sgd_norm_law(lr * mults, NOISE.noise_sq, l2=l2)
    for i, alpha in enumerate(traj.alphas):
        np.testing.assert_allclose(traj.norm_sq[i], law.norm_sq(traj.steps, alpha**2), rtol=0.05)
    predicted = [law.forgetting_steps(a, 1.0) for a in traj.alphas[1:]]
    np.testing.assert_allclose(measured_forgetting(traj), predicted, rtol=LAW_RTOL)
    # constant multipliers reproduce the constant law
    flat = nz.sgd_norm_law(lr * np.ones(steps), 1.0, l2=l2)
    const = nz.sgd_norm_law(lr, 1.0, l2=l2)
    t_const = const.forgetting_steps(3.0, 1.0)
    assert flat.forgetting_steps(3.0, 1.0) == math.ceil(t_const)


def test_normalized_forgetting_defaults():
    result = nz.normalized_forgetting(4.0, lr=1e-2, fan_in=576, l2=1e-2, steps_per_epoch=312)
    assert result.init_norm_sq == pytest.approx(1 / 3)
    law = nz.sgd_norm_law(1e-2, 1.0 / 128, l2=1e-2)
    assert result.steps == pytest.approx(law.forgetting_steps(4.0, 1 / 3))
    assert result.epochs == pytest.approx(result.steps / 312)
    assert result.relaxation_steps == pytest.approx(-1 / (4 * math.log(1 - 1e-4)))


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: nz.sgd_norm_law(-0.1, 1.0), "lr"),
        (lambda: nz.sgd_norm_law(0.1, 1.0, l2=-1.0), "l2"),
        (lambda: nz.sgd_norm_law(0.1, 1.0, momentum=1.0), "momentum"),
        (lambda: nz.sgd_norm_law(1.0, 1.0, l2=2.0), "lr"),
        (lambda: nz.adaptive_norm_law(1e-3, 0), "numel"),
        (lambda: nz.normalized_forgetting(2.0, lr=1e-3, fan_in=9, optimizer="lion"), "optimizer"),
        (lambda: nz.normalized_forgetting(-2.0, lr=1e-3, fan_in=9), "alpha"),
        (lambda: nz.sgd_norm_law(1e-3, 1.0).forgetting_steps(2.0, 1.0, tol=0), "tol"),
        (lambda: ScaleInvariantLoss(dim=1), "dim"),
        (lambda: simulate_norms(NOISE, lr=0.1, steps=3, alphas=[-1.0]), "alphas"),
    ],
)
def test_bad_inputs_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_large_effective_sgd_step_warns():
    # eta^2 G / |w_0|^4 = 0.5^2 * 4 / 1 = 1 > 0.3: outside the law's small-step regime.
    with pytest.warns(nz.LargeStepWarning, match="effective SGD step"):
        nz.normalized_forgetting(2.0, lr=0.5, fan_in=10, init_sq_per_coord=0.1, grad_sq_unit=4.0)
    # alpha < 1 shrinks |w_0|: 0.05^2 * 4 / 0.5^4 = 0.16 stays quiet, alpha = 0.25 warns.
    with warnings.catch_warnings():
        warnings.simplefilter("error", nz.LargeStepWarning)
        nz.normalized_forgetting(0.5, lr=0.05, fan_in=10, init_sq_per_coord=0.1, grad_sq_unit=4.0)
    with pytest.warns(nz.LargeStepWarning):
        nz.normalized_forgetting(0.25, lr=0.05, fan_in=10, init_sq_per_coord=0.1, grad_sq_unit=4.0)


@pytest.mark.parametrize(
    "optimizer,lr,momentum,l2,weight_decay,beta1",
    [
        ("sgd", 0.1, 0.0, 0.01, 0.0, 0.9),
        ("sgd", 0.1, 0.9, 0.01, 0.0, 0.9),  # Wan et al. / Kosson et al.: sqrt(2 lr l2 / (1 + mu))
        ("sgd", 0.1, 0.9, 0.0, 0.01, 0.9),  # decoupled decay: sqrt(2 lr wd (1 - mu) / (1 + mu))
        ("sgd", 0.1, 0.5, 0.005, 0.01, 0.9),
        ("adamw", 1e-2, 0.0, 0.0, 0.1, 0.0),  # sqrt(2 lr wd)
        ("adamw", 1e-2, 0.0, 0.0, 0.1, 0.9),  # sqrt(2 lr wd (1 - b1) / (1 + b1))
    ],
)
def test_equilibrium_angular_update_against_simulation(
    optimizer, lr, momentum, l2, weight_decay, beta1
):
    """Mean angle per step over steps 2000-4000, started at the predicted equilibrium norm: 1%."""
    dim = 256
    predicted = nz.equilibrium_angular_update(lr, optimizer, momentum, l2, weight_decay, beta1)
    if optimizer == "sgd":
        x0 = nz.sgd_equilibrium_norm_sq(lr, 1.0, l2, weight_decay, momentum)
    else:
        x0 = nz.adamw_equilibrium_norm_sq(lr, weight_decay, dim)
    run = simulate_norms(
        ScaleInvariantLoss(dim=dim, noise_sq=1.0),
        optimizer=optimizer,
        lr=lr,
        steps=4000,
        init_norm_sq=x0,
        momentum=momentum,
        l2=l2,
        weight_decay=weight_decay,
        betas=(beta1, 0.999),
        record_every=2000,
    )
    measured = (run.angular_update[0, -1] - run.angular_update[0, -2]) / 2000
    assert measured == pytest.approx(predicted, rel=0.01)
    if momentum == 0 and (optimizer == "sgd" or beta1 == 0):
        assert predicted == pytest.approx(math.sqrt(2 * lr * (l2 + weight_decay)), rel=0.01)


def test_angular_update_identity_and_no_prediction_cases():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 5))
    v = rng.standard_normal((3, 5))
    v -= np.sum(v * w, 1, keepdims=True) / np.sum(w * w, 1, keepdims=True) * w  # v orthogonal to w
    eps = 1e-9  # tan(theta) = eps |v| / |w| exactly; arccos of the cosine would lose it to rounding
    expected = np.arctan(eps * np.linalg.norm(v, axis=1) / np.linalg.norm(w, axis=1))
    np.testing.assert_allclose(nz.angular_update(w, w + eps * v), expected, rtol=1e-6)
    np.testing.assert_allclose(nz.angular_update(w, 2.0 * w), 0.0, atol=1e-12)
    np.testing.assert_allclose(nz.angular_update(w, -w), math.pi, rtol=1e-12)
    a, b = np.array([1.0, 0.0]), np.array([1.0, 1.0])
    assert nz.angular_update(a, b) == pytest.approx(math.pi / 4, rel=1e-12)
    assert math.isnan(nz.equilibrium_angular_update(1e-3, "adam", l2=1e-2))
    assert nz.equilibrium_angular_update(1e-3, "sgd") == 0.0
