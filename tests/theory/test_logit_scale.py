"""The logit scale of a softmax head on BatchNorm features: the balance identity (torch, float64,
1e-10), its decay, and the relaxation model (4) of initmem.theory.logit_scale against simulation
(fixed random features, float64; on this one draw 15% at alpha >= 4 and 25% at alpha = 2; the
band over random draws is test_logit_scale_panel's)."""

import math

import numpy as np
import pytest

from initmem.theory import logit_scale as ls
from initmem.theory.simulate import simulate_logit_scale


def features(n=64, p=32, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.standard_normal((n, p))
    phi = (phi - phi.mean(0)) / phi.std(0)  # what BatchNorm hands the affine
    return phi, rng.integers(0, classes, n), classes


def batchnorm_mlp(alpha):
    """A float64 6-16-BN(8)-3 MLP (torch seed 0), alpha on the head and the BN affine.

    Its init is drawn in float64: torch's float32 uniform kernel rounds differently under another CPU
    capability (1e-8 relative), and the SGD runs below carry such a difference to a 4% change of the
    logit scale by step 500; float64 draws agree to 1e-16 on every kernel set."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    f64 = {"dtype": torch.float64}
    net = torch.nn.Sequential(
        torch.nn.Linear(6, 16, **f64),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 8, **f64),
        torch.nn.BatchNorm1d(8, **f64),
        torch.nn.Linear(8, 3, **f64),
    )
    with torch.no_grad():
        for t in (net[3].weight, net[3].bias, net[4].weight):
            t.mul_(alpha)
    return net


def test_balance_one_step_identity_in_a_batchnorm_mlp(single_thread):
    torch = pytest.importorskip("torch")
    net = batchnorm_mlp(3.0)
    bn, head = net[3], net[4]
    with torch.no_grad():
        bn.bias.add_(0.1)
    x, labels = torch.randn(32, 6, dtype=torch.float64), torch.randint(0, 3, (32,))
    lr, l2 = 0.05, 0.01
    opt = torch.optim.SGD(net.parameters(), lr=lr, weight_decay=l2)

    def state():
        return [t.detach().numpy().copy() for t in (head.weight, bn.weight, bn.bias)]

    def step_and_predict(balance):
        """One torch SGD step; the balance that identity (3) predicts from the step's gradients."""
        loss = torch.nn.functional.cross_entropy(net(x), labels)
        opt.zero_grad()
        loss.backward()
        grads = [t.grad.numpy().copy() for t in (head.weight, bn.weight, bn.bias)]
        opt.step()
        return grads, ls.balance_after_step(
            balance, grads[0], grads[1], lr, l2=l2, grad_beta=grads[2]
        )

    W, g, b = state()
    grads, predicted = step_and_predict(ls.balance(W, g, b))
    np.testing.assert_allclose(ls.balance(*state()), predicted, rtol=1e-10, atol=1e-12)
    # Gradient-flow conservation: the cross terms cancel, W_j . G_Wj = g_j G_gj + b_j G_bj.
    lhs = np.sum(W * grads[0], axis=0)
    np.testing.assert_allclose(lhs, g * grads[1] + b * grads[2], rtol=1e-10, atol=1e-14)
    # 100 more steps: (3) step by step stays exact, and the decay alone, a^(2T), carries the
    # init's balance to within 5% (the lr^2 term is small at this lr).
    start = ls.balance(*state())
    predicted = start.copy()
    for _ in range(100):
        _, predicted = step_and_predict(predicted)
    end = ls.balance(*state())
    np.testing.assert_allclose(end, predicted, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(end, (1 - lr * l2) ** 200 * start, rtol=0.05)


@pytest.mark.parametrize("lr,momentum", [(0.1, 0.0), (0.01, 0.9)])
def test_balance_decays_at_the_predicted_rate(lr, momentum):
    """Mean field for momentum: lr / (1 - mu) = 0.1 here (at 1.0 the e-fold time is ~2x longer)."""
    phi, labels, k = features()
    l2 = 0.02
    run = simulate_logit_scale(phi, labels, k, 3.0, lr, 1500, l2=l2, momentum=momentum)
    total = np.abs(run.balance).sum(axis=1)
    late = (run.steps >= 300) & (run.steps <= 1500)
    measured = -1.0 / np.polyfit(run.steps[late], np.log(total[late]), 1)[0]
    assert measured == pytest.approx(
        ls.balance_forgetting_steps(lr, l2, momentum=momentum), rel=0.1
    )
    assert ls.balance_forgetting_steps(lr) == math.inf


@pytest.mark.parametrize("lr,momentum", [(0.3, 0.0), (0.03, 0.9)])
def test_logit_scale_memory_relaxation_model(lr, momentum):
    """Model (4) with s_0, s* from the alpha = 1 run: 15% at alpha >= 4, 25% at alpha = 2."""
    phi, labels, k = features()
    l2, tol = 0.01, 0.1
    runs = {
        a: simulate_logit_scale(
            phi, labels, k, a, lr, 1500, l2=l2, momentum=momentum, record_every=5
        )
        for a in (1.0, 2.0, 4.0, 8.0)
    }
    ref = runs[1.0].scale
    s0, s_eq = ref[0], ref[-1]
    for alpha, rel in ((2.0, 0.25), (4.0, 0.15), (8.0, 0.15)):
        memory = np.abs(np.log(runs[alpha].scale / ref))
        above = np.flatnonzero(memory > tol)
        measured = runs[alpha].steps[above[-1] + 1]
        predicted = ls.logit_scale_forgetting_steps(
            alpha, lr, l2=l2, momentum=momentum, init_scale=s0, equilibrium_scale=s_eq, tol=tol
        )
        assert measured == pytest.approx(predicted, rel=rel)
        bound = ls.logit_scale_forgetting_steps(alpha, lr, l2=l2, momentum=momentum, tol=tol)
        assert bound >= predicted
    assert ls.logit_scale_forgetting_steps(2.0, lr) == math.inf


# ---------------------------------------------------------------------------------------------
# Adam-family: the simulator against torch, identities (5)-(6), law (7) and where no law holds


def memory_time(run, ref, tol=0.1):
    """First recorded step after which |ln(s(alpha) / s(1))| stays <= tol."""
    above = np.flatnonzero(np.abs(np.log(run.scale / ref.scale)) > tol)
    return run.steps[above[-1] + 1] if above.size else 0


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_adam_simulation_matches_torch(optimizer):
    torch = pytest.importorskip("torch")
    phi, labels, k = features(n=16, p=6, classes=3)
    alpha, lr, l2, wd = 2.0, 0.05, 0.1, 0.3
    decay = dict(l2=l2) if optimizer == "adam" else dict(weight_decay=wd)
    run = simulate_logit_scale(
        phi, labels, k, alpha, lr, 5, optimizer=optimizer, record_every=1, **decay
    )
    rng = np.random.default_rng(0)  # the simulator's init, seed 0
    W = torch.tensor(alpha * rng.uniform(-1.0, 1.0, (k, 6)) / math.sqrt(6), requires_grad=True)
    gamma = torch.full((6,), alpha, dtype=torch.float64, requires_grad=True)
    opt = (
        torch.optim.Adam([W, gamma], lr=lr, weight_decay=l2)
        if optimizer == "adam"
        else torch.optim.AdamW([W, gamma], lr=lr, weight_decay=wd)
    )
    x, y = torch.tensor(phi), torch.tensor(labels)
    for step in range(6):
        z = (x * gamma) @ W.T
        assert run.scale[step] == pytest.approx(z.pow(2).mean().sqrt().item(), rel=1e-10)
        balance = (W.pow(2).sum(0) - gamma.pow(2)).detach().numpy()
        np.testing.assert_allclose(run.balance[step], balance, rtol=1e-10, atol=1e-12)
        assert run.gain[step] == pytest.approx(gamma.pow(2).mean().sqrt().item(), rel=1e-10)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(z, y).backward()
        opt.step()


def test_adam_excess_recursion_is_adam_on_any_quadratic(single_thread):
    """Identities (5)-(6): torch Adam (eps = 0) on c x^2 / 2 follows the c-free path, to 1e-10."""
    torch = pytest.importorskip("torch")
    lr, steps = 0.01, 300
    path = ls.adam_excess_path(3.0, lr, steps)
    for curvature in (0.1, 10.0):
        x = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([x], lr=lr, eps=0.0)
        for t in range(steps):
            opt.zero_grad()
            (0.5 * curvature * x * x).sum().backward()
            opt.step()
            assert x.item() == pytest.approx(path[t + 1], rel=1e-10)
    np.testing.assert_allclose(ls.adam_excess_path(6.0, 2 * lr, steps), 2 * path, rtol=1e-12)
    # The first phase moves lr per step (u = 1), then v's lag slows it below the linear phase.
    assert path[10] == pytest.approx(3.0 - 10 * lr, rel=1e-3)
    assert path[steps] > 3.0 - steps * lr


@pytest.mark.parametrize("lr,l2,steps", [(1e-2, 0.1, 2500), (1e-2, 0.03, 2000)])
def test_adam_l2_logit_scale_law(lr, l2, steps):
    """Law (7) with gamma* from the alpha = 1 run: 15% for alpha in {2, 4, 8} (fixed features)."""
    phi, labels, k = features()
    runs = {
        a: simulate_logit_scale(
            phi, labels, k, a, lr, steps, optimizer="adam", l2=l2, record_every=10
        )
        for a in (1.0, 2.0, 4.0, 8.0)
    }
    gamma_eq = runs[1.0].gain[-1]
    for alpha in (2.0, 4.0, 8.0):
        predicted = ls.adam_logit_scale_forgetting_steps(
            alpha, lr, l2=l2, equilibrium_gain=gamma_eq, tol=0.1
        )
        assert memory_time(runs[alpha], runs[1.0]) == pytest.approx(predicted, rel=0.15)
        # The linear phase alone, (alpha - gamma*) / lr, is too short by 1.3x or more (v's lag).
        assert predicted > 1.3 * (alpha - gamma_eq) / lr
    with pytest.raises(ValueError, match="l2 must be > 0"):
        ls.adam_logit_scale_forgetting_steps(4.0, lr, l2=0.0, equilibrium_gain=gamma_eq)
    with pytest.raises(ValueError, match="AdamW"):
        ls.adam_logit_scale_forgetting_steps(
            4.0, lr, l2=l2, weight_decay=0.1, equilibrium_gain=gamma_eq
        )


def test_adamw_logit_scale_memory_outlives_the_decay_time():
    """No AdamW law: after 10 / (lr wd) steps the memory at alpha = 4 is still above 5 tol, where
    contraction of the runs' difference by (1 - lr wd) per step would leave e^-10 of it."""
    phi, labels, k = features()
    lr, wd = 1e-2, 1.0
    steps = round(10 / (lr * wd))
    runs = {
        a: simulate_logit_scale(
            phi, labels, k, a, lr, steps, optimizer="adamw", weight_decay=wd, record_every=100
        )
        for a in (1.0, 4.0)
    }
    memory = np.abs(np.log(runs[4.0].scale / runs[1.0].scale))
    assert memory[-1] > 0.5
    assert memory[-1] > 0.1 * memory[0]  # not even one e-fold of the initial 2 ln 4 forgotten


def batchnorm_mlp_scales(alpha, optimizer, lr, steps, l2, momentum=0.0):
    """RMS logit and RMS BN gain per step of a 6-16-BN(8)-3 MLP, alpha on the head and BN affine."""
    torch = pytest.importorskip("torch")
    net = batchnorm_mlp(alpha)
    bn = net[3]
    data = torch.Generator().manual_seed(1)
    x = torch.randn(64, 6, generator=data, dtype=torch.float64)
    labels = torch.randint(0, 3, (64,), generator=data)
    opt = (
        torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=l2)
        if optimizer == "sgd"
        else torch.optim.Adam(net.parameters(), lr=lr, weight_decay=l2)
    )
    scales, gains = [], []
    for t in range(steps + 1):
        z = net(x)
        scales.append(z.detach().pow(2).mean().sqrt().item())
        gains.append(bn.weight.detach().pow(2).mean().sqrt().item())
        if t < steps:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(z, labels).backward()
            opt.step()
    return np.asarray(scales), np.asarray(gains)


def mlp_memory_time(scales, ref, tol=0.1):
    above = np.flatnonzero(np.abs(np.log(scales / ref)) > tol)
    return above[-1] + 1 if above.size else 0


def test_logit_scale_laws_in_a_batchnorm_mlp_adam(single_thread):
    """Law (7) with features trained jointly: an upper bound within 40% (measured 0.74-0.75)."""
    lr, l2, steps = 2e-2, 0.1, 800
    ref, gains = batchnorm_mlp_scales(1.0, "adam", lr, steps, l2)
    for alpha in (4.0, 8.0):
        measured = mlp_memory_time(batchnorm_mlp_scales(alpha, "adam", lr, steps, l2)[0], ref)
        predicted = ls.adam_logit_scale_forgetting_steps(
            alpha, lr, l2=l2, equilibrium_gain=gains[-1], tol=0.1
        )
        assert 0.6 * predicted <= measured <= predicted


def test_logit_scale_laws_in_a_batchnorm_mlp_sgd(single_thread):
    """Model (4) with features trained jointly: only a lower bound (measured 5.1-7.1x longer)."""
    lr, momentum, l2, steps = 0.03, 0.9, 0.05, 1000
    ref, _ = batchnorm_mlp_scales(1.0, "sgd", lr, steps, l2, momentum)
    for alpha in (4.0, 8.0):
        scales, _ = batchnorm_mlp_scales(alpha, "sgd", lr, steps, l2, momentum)
        measured = mlp_memory_time(scales, ref)
        predicted = ls.logit_scale_forgetting_steps(
            alpha,
            lr,
            l2=l2,
            momentum=momentum,
            init_scale=ref[0],
            equilibrium_scale=ref[-1],
            tol=0.1,
        )
        assert predicted <= measured < steps  # forgotten within the run, later than (4) says
