"""The gradient scale G of a config's model before training: a short probe at each alpha, stated.

Setting. The normalized-weight laws (:mod:`initmem.theory.normalized`) need ``G = |g|^2 |w|^2`` per
scale-invariant layer, the squared loss gradient at unit weight norm, and it depends on alpha: with
``alpha_groups = ["all"]`` alpha also scales the BatchNorm gains and the head, so the alpha-8 run's G
is thousands of times the alpha-1 run's (issue 35). Before any run exists, G comes from a **probe**:
the loss gradients of :data:`PROBE_STEPS` minibatches of the config's own trainer (model at init,
data, batch size, augmentation, train-mode BatchNorm) at each alpha, on the CPU in float32, the
weights held at init (no optimizer step: G at init, independent of the optimizer, so one probe serves
every pipeline that shares the model, data and batch).

The ``residual_stream`` group (:func:`initmem.empirical.models.residual_stream_parameters`: a pre-LN
network's embedding and residual writers, jointly scale-invariant) is probed as one layer on its joint
norm: ``G = (sum_i |g_i|^2) (sum_i |w_i|^2)`` over its tensors, the same identity for the
concatenated vector (the trainer logs the same, the layer logs' ``residual_stream`` entry).

Conventions. G per layer is measured exactly as the bridge reads it from a run's logs
(:func:`initmem.bridge.predict.per_step` over ``grad_sq_unit_sum``): the trainer's per-interval sum of ``|g_t|^2``
(:class:`initmem.empirical.trainer.IntervalStats`, the loss gradient before L2) times the mean of
``|w|^2`` at the probe's two ends (here both the init's), divided by its minibatches. ``source`` names it in every output (the
``g_source`` column of predictions, a phrase in printed text); probes are cached per model, init draw,
data, batch, alpha and alpha groups (:func:`probe_key`).

Derivation (:func:`law_forgetting`, derived here). For each scale-invariant layer and each of the two
alphas, the law of the config's optimizer (:func:`_law_norm_sq`: the SGD
heavy-ball law with the probed G held for the whole run, or the adaptive mean field) is integrated
over the run's schedule from ``alpha^2 |w_0(1)|^2``; the per-layer memory (criterion (1)) is combined
by :data:`initmem.theory.criterion.LAYER_RULE` and decided by :func:`initmem.theory.criterion.decide`.
Assumption stated with it: G at init holds over the run (it changes as the network learns; the
bridge, after training, uses the logged G per interval). Where it fails, measured on the second
``units`` design at seed 0 (24 pipelines, alpha 8 vs 1, ``alpha_groups = ["all"]``): the logged
G(alpha 8) / G(alpha 1), summed over the scale-invariant layers, is about 1.1e3 over the first
evaluation interval (120-186 steps), 5 over the second and 1-8 after (the BatchNorm gains and the
head, scaled by alpha, adapt first), while the probe holds its init ratio (about alpha^4) for the
whole run. The probed law so over-injects noise at the large alpha: its memory at the end is within
0.2 of the measured one in 18 of the 24 pipelines, and the six it misses are SGD + momentum + L2
(predicted 1.07-1.09, measured 0.04-0.54) and the long runs of the two strongest AdamW decays (off
by 0.34 and 0.38: measured reversed, -0.16 and -0.21). The same laws with the runs' logged G per
interval (:mod:`initmem.bridge.predict`, forms ``gradient`` and ``adaptive``) are within 0.06 in all
20 pipelines they cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from initmem.bridge.units import law_decision, step_lrs
from initmem.empirical.config import RESIDUAL_STREAM_LAYER, RunConfig
from initmem.empirical.curves import SCALED_FRACTION
from initmem.theory import normalized
from initmem.theory.criterion import combine_layers

#: Minibatches of a probe.
PROBE_STEPS = 8
#: Config fields of the model, its init draw and the data (the pre-registration's NTK depends on
#: these alone, :data:`initmem.bridge.preregister.MEMORY_FIELDS`).
DRAW_FIELDS = (
    "model",
    "width",
    "seed",
    "dataset",
    "data_dir",
    "train_size",
    "val_size",
    "test_size",
    "split_seed",
)
#: Config fields a probe depends on (besides alpha): the model, its draw, the data and the batch.
PROBE_FIELDS = (*DRAW_FIELDS, "batch_size", "augment", "alpha_groups")


@dataclass(frozen=True)
class GradientScale:
    """A probe's result: ``layers`` (one row per scale-invariant layer, and one for the
    ``residual_stream`` group's joint norm where the model has one: ``group``, ``layer``, ``numel``,
    ``init_norm_sq`` at this alpha, ``grad_sq_unit`` = G), the ``alpha`` and ``steps`` it ran, and
    ``source``, the phrase every prediction that uses it prints."""

    alpha: float
    steps: int
    layers: pd.DataFrame
    source: str


def probe_key(config: RunConfig, alpha: float, steps: int = PROBE_STEPS) -> tuple:
    """The key of a probe cache: :data:`PROBE_FIELDS`, alpha and the steps."""
    values = config.to_dict()
    return (*(str(values.get(name)) for name in PROBE_FIELDS), float(alpha), int(steps))


def probe_gradient_scale(
    config: RunConfig, alpha: float, *, steps: int = PROBE_STEPS, cache: dict | None = None
) -> GradientScale:
    """G per scale-invariant layer of ``config``'s model at ``alpha``, from ``steps`` minibatches of
    its own trainer at init (module docstring). ``cache``: a dict keyed by :func:`probe_key` (a
    failure is kept and raised again). Raises ValueError for ``steps < 1``; the model's or data's
    own errors pass through."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    key = probe_key(config, alpha, steps)
    if cache is not None and key in cache:
        if isinstance(cache[key], Exception):  # a probe that failed fails once per key
            raise cache[key]
        return cache[key]
    try:
        result = _probe(config, float(alpha), steps)
    except Exception as err:  # kept to be raised again without another try, then passed on
        if cache is not None:
            cache[key] = err
        raise
    if cache is not None:
        cache[key] = result
    return result


def _probe(config: RunConfig, alpha: float, steps: int) -> GradientScale:
    """One probe: the trainer's minibatch gradients at init into its interval sums, read out (torch:
    loaded here only)."""
    import torch  # deferred: the model and its trainer

    from initmem.empirical.trainer import Trainer

    probe = config.replace(
        alpha=alpha, device="cpu", precision="fp32", compile=False, channels_last=False,
        track_grad_norms=True,
    )  # fmt: skip
    trainer = Trainer(probe, download=False)  # a probe never downloads: local data or a clear error
    index = [i for i, name in enumerate(trainer.names) if name in trainer.scale_invariant]
    start = _norms_sq(trainer.params)
    done = 0
    while done < steps:
        plan = trainer.start_epoch()
        for i in range(min(plan.steps, steps - done)):
            lr = trainer.next_lr()
            images, labels = trainer.next_batch(plan.batches[i])
            loss = torch.nn.functional.cross_entropy(trainer.forward(images).float(), labels)
            trainer.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # the statistics the trainer logs (IntervalStats.add_step), no step taken
            trainer.interval.add_step([p.grad for p in trainer.params], lr, 1.0)
            done += 1
    grad_sq = trainer.interval.grad_sq_sum.cpu().numpy()
    end = _norms_sq(trainer.params)
    pieces = [("scale_invariant", trainer.names[i], [i]) for i in index]
    if trainer.joint_index:  # the joint norm of the residual stream: one layer of all its tensors
        pieces.append(("residual_stream", RESIDUAL_STREAM_LAYER, trainer.joint_index))
    rows = []
    for group, layer, members in pieces:
        norm_sq = [float(start[members].sum()), float(end[members].sum())]
        rows.append(
            {
                "group": group,
                "layer": layer,
                "numel": int(sum(trainer.params[i].numel() for i in members)),
                "init_norm_sq": norm_sq[0],
                "grad_sq_unit": float(grad_sq[members].sum()) * 0.5 * sum(norm_sq) / done,
            }
        )
    source = (
        f"probe at init: {done} minibatches of {config.batch_size} ({config.model}, "
        f"{config.dataset}; initmem.bridge.probe)"
    )
    columns = ["group", "layer", "numel", "init_norm_sq", "grad_sq_unit"]
    return GradientScale(alpha, done, pd.DataFrame(rows, columns=columns), source)


def _norms_sq(params) -> np.ndarray:
    """``|w|^2`` of each tensor, float64."""
    return np.array([float(p.detach().double().pow(2).sum()) for p in params])


#: What :func:`law_forgetting` says for a model without the group, per group.
_NO_GROUP = {
    "scale_invariant": ("no scale-invariant weights", "no scaled scale-invariant layer"),
    "residual_stream": ("no normalized residual stream", "residual stream not scaled by alpha"),
}


def law_forgetting(
    config: RunConfig, alphas, *, cache: dict | None = None, group: str = "scale_invariant"
) -> dict:
    """The normalized-weight laws' prediction for a pipeline before training, with G probed at each of
    the largest and smallest of ``alphas`` (module docstring): ``memory_end``, ``forgetting_steps``
    (the one decision; ``inf``: not within the run), ``forgetting_epochs``, ``state`` and
    ``g_source``. ``group``: ``scale_invariant`` (each layer's law, layers combined) or
    ``residual_stream`` (the law of the group's joint norm, one layer). NaN, the state ``"no
    scale-invariant weights"`` (``"no normalized residual stream"``) and ``g_source`` "none" for a
    model without them; NaN and no state for fewer than two alphas."""
    if group not in _NO_GROUP:
        raise ValueError(f"group must be one of {list(_NO_GROUP)} (got {group!r})")
    alphas = sorted({float(a) for a in alphas})
    out = dict.fromkeys(("memory_end", "forgetting_steps", "forgetting_epochs"), math.nan)
    if len(alphas) < 2:
        return out | {"state": "", "g_source": "none"}
    lo, hi = (probe_gradient_scale(config, a, cache=cache) for a in (alphas[0], alphas[-1]))
    lows, highs = (r.layers[r.layers["group"] == group] for r in (lo, hi))
    if lows.empty:
        return out | {"state": _NO_GROUP[group][0], "g_source": "none"}
    steps = np.arange(0, config.total_steps + 1)
    full = 2.0 * math.log(alphas[-1] / alphas[0])
    memories = []
    for low, high in zip(lows.itertuples(), highs.itertuples(), strict=True):
        if abs(math.log(high.init_norm_sq / low.init_norm_sq)) < SCALED_FRACTION * full:
            continue  # a layer alpha does not scale has no norm memory (criterion's LAYER_RULE)
        norms = [
            _law_norm_sq(
                config, int(p.numel), np.full(config.total_steps, p.grad_sq_unit), steps,
                [p.init_norm_sq],
            )[0]
            for p in (high, low)
        ]  # fmt: skip
        memories.append(np.log(norms[0] / norms[1]) / np.log(high.init_norm_sq / low.init_norm_sq))
    if not memories:
        return out | {"state": _NO_GROUP[group][1], "g_source": "none"}
    law = law_decision(steps, combine_layers(np.stack(memories), axis=0), config.steps_per_epoch)
    joint = ", the joint norm of the residual_stream group" if group == "residual_stream" else ""
    return law | {"g_source": f"{hi.source}{joint}, at alpha {hi.alpha:g} and {lo.alpha:g}"}


def _law_norm_sq(config, numel, grad_sq_unit, steps, init_norm_sq) -> np.ndarray:
    """``|w|^2`` of the law at ``steps`` for each initial squared norm: (n_init, n_steps). SGD (any
    momentum): :func:`~initmem.theory.normalized.sgd_norm_law` with the per-step ``grad_sq_unit``;
    Adam, AdamW, RMSprop: :class:`~initmem.theory.normalized.AdaptiveMeanField` (``d = numel``)."""
    lrs = step_lrs(config)
    if config.optimizer == "sgd":
        law = normalized.sgd_norm_law(
            lrs,
            grad_sq_unit,
            momentum=config.momentum,
            l2=config.l2,
            weight_decay=config.weight_decay,
        )
        return np.stack([law.norm_sq(steps, x0) for x0 in init_norm_sq])
    field = normalized.AdaptiveMeanField(
        config.optimizer,
        config.lr,
        numel,
        beta2=config.betas[1],
        momentum=config.momentum if config.optimizer == "rmsprop" else 0.0,
        l2=config.l2,
        weight_decay=config.weight_decay,
        grad_sq_unit=float(np.mean(grad_sq_unit)),
        lr_multipliers=lrs / config.lr,
    )
    return field.norm_sq(steps, init_norm_sq)


def failed_law(err: Exception) -> dict:
    """:func:`law_forgetting`'s keys where the probe could not run: NaN, the state ``undefined``
    and the reason in ``g_source`` (one line)."""
    reason = " ".join(f"{type(err).__name__}: {err}".split())
    keys = ("memory_end", "forgetting_steps", "forgetting_epochs")
    return dict.fromkeys(keys, math.nan) | {
        "state": "undefined",
        "g_source": f"none: the probe failed ({reason})",
    }


def sweep_law_forgetting(configs, *, cache: dict | None = None) -> pd.DataFrame:
    """:func:`law_forgetting` for every pipeline of ``configs`` (RunConfigs, alpha and seed ignored;
    first-seen order): one row per pipeline with ``pipeline`` and the law's columns prefixed
    ``law_``; a pipeline whose probe fails gets NaN and its reason in ``g_source``."""
    from initmem.empirical.tables import pipeline_id  # pandas tables

    groups: dict[str, tuple[RunConfig, set]] = {}
    for config in configs:
        entry = groups.setdefault(pipeline_id(config.to_dict()), (config, set()))
        entry[1].add(config.alpha)
    cache = {} if cache is None else cache
    rows = []
    for key, (config, alphas) in groups.items():
        try:
            law = law_forgetting(config, alphas, cache=cache)
        except Exception as err:  # the model, its data or a law: said, not a stop
            law = failed_law(err)
        rows.append({"pipeline": key, **{f"law_{k}": v for k, v in law.items()}})
    return pd.DataFrame(rows)


__all__ = [
    "DRAW_FIELDS",
    "PROBE_FIELDS",
    "PROBE_STEPS",
    "GradientScale",
    "failed_law",
    "law_forgetting",
    "probe_gradient_scale",
    "probe_key",
    "sweep_law_forgetting",
]
