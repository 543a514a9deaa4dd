"""The logit scale of a softmax head on BatchNorm features: the balance identity (torch, float64,
1e-10), its decay, and the relaxation model (4) of initmem.theory.logit_scale against simulation
(fixed random features, float64; 20% for alpha >= 2, its stated regime)."""

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


def test_balance_one_step_identity_in_a_batchnorm_mlp():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(6, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 8),
        torch.nn.BatchNorm1d(8),
        torch.nn.Linear(8, 3),
    ).double()
    bn, head = net[3], net[4]
    with torch.no_grad():  # alpha = 3 on the head and the BN affine
        for t in (bn.weight, bn.bias, head.weight):
            t.mul_(3.0)
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
