"""Optimizers, learning-rate schedules and the two kinds of weight decay, as the trainer uses them.

Conventions (docs/run-format.md): ``l2`` is coupled, added to the loss gradient (``l2 * w``) before the
optimizer sees it; ``weight_decay`` is decoupled, ``w <- w - lr_t * weight_decay * w`` outside the
optimizer's statistics (AdamW's own ``weight_decay``). Both act on every parameter. A schedule multiplies
``lr`` (and so the decoupled decay ``lr_t * weight_decay``); ``l2`` is not scheduled.

One SGD step without momentum is then, for every parameter,

    w_{t+1} = c_t w_t - lr_t g_t,   c_t = 1 - lr_t (l2 + weight_decay),

with ``g_t`` the loss gradient at ``w_t``: the decoupled decay is computed from the pre-step weights and
subtracted after the optimizer step (:class:`DecoupledDecay`), so that both decays see the same ``w_t``.
"""

from __future__ import annotations

import torch

from .config import RunConfig


def build_optimizer(params: list[torch.nn.Parameter], config: RunConfig) -> torch.optim.Optimizer:
    """The config's optimizer over ``params``. Coupled ``l2`` is torch's ``weight_decay`` of SGD, Adam
    and RMSprop; for AdamW, torch's ``weight_decay`` is the decoupled one and the trainer adds ``l2``
    to the gradients itself (:func:`add_coupled_l2`). RMSprop's smoothing constant is ``betas[1]``."""
    name = config.optimizer
    if name == "sgd":
        return torch.optim.SGD(
            params,
            lr=config.lr,
            momentum=config.momentum,
            nesterov=config.nesterov,
            weight_decay=config.l2,
        )
    if name == "adam":
        return torch.optim.Adam(
            params, lr=config.lr, betas=config.betas, eps=config.eps, weight_decay=config.l2
        )
    if name == "adamw":
        return torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=config.betas,
            eps=config.eps,
            weight_decay=config.weight_decay,
        )
    if name == "rmsprop":
        return torch.optim.RMSprop(
            params,
            lr=config.lr,
            alpha=config.betas[1],
            eps=config.eps,
            momentum=config.momentum,
            weight_decay=config.l2,
        )
    raise ValueError(f"optimizer must be one of sgd, adam, adamw, rmsprop (got {name!r})")


def handles_decoupled_decay(config: RunConfig) -> bool:
    """True when the optimizer applies ``weight_decay`` itself (AdamW)."""
    return config.optimizer == "adamw"


def handles_coupled_l2(config: RunConfig) -> bool:
    """True when the optimizer adds ``l2 * w`` to the gradient itself (all but AdamW)."""
    return config.optimizer != "adamw"


def add_coupled_l2(params: list[torch.Tensor], grads: list[torch.Tensor], l2: float) -> None:
    """``g <- g + l2 * w`` in place (for optimizers whose own ``weight_decay`` is decoupled)."""
    if l2 > 0:
        torch._foreach_add_(grads, params, alpha=l2)


class DecoupledDecay:
    """Decoupled weight decay by hand for SGD, Adam and RMSprop: ``w <- w - lr_t * wd * w_t``.

    Call :meth:`before_step` before ``optimizer.step()`` (it takes ``lr_t * wd * w_t`` from the pre-step
    weights) and :meth:`after_step` after it (it subtracts that amount).
    """

    def __init__(self, params: list[torch.Tensor], weight_decay: float):
        self.params = params
        self.weight_decay = weight_decay
        self._pending: list[torch.Tensor] | None = None

    def before_step(self, lr: float) -> None:
        if self.weight_decay > 0:
            with torch.no_grad():
                self._pending = torch._foreach_mul(self.params, lr * self.weight_decay)

    def after_step(self) -> None:
        if self._pending is not None:
            with torch.no_grad():
                torch._foreach_sub_(self.params, self._pending)
            self._pending = None


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


__all__ = [
    "DecoupledDecay",
    "add_coupled_l2",
    "build_optimizer",
    "handles_coupled_l2",
    "handles_decoupled_decay",
    "set_lr",
]
