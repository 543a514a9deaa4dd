"""Train K runs that differ only in ``alpha`` and ``seed`` at once: one forward and backward for all.

A sweep of small networks spends most of its time on per-operation overhead, not arithmetic; packing
K runs into one computation divides that overhead by K. :func:`train_packed` takes configs that
differ only in :data:`PACKABLE_FIELDS` and writes the same run folders as calling
:func:`~initmem.empirical.trainer.train` on each: equal counts, and numbers equal to float32 rounding
after one step, to each run's own rounding sensitivity after many (docs/run-format.md, "Packed runs").
The first forward is bit-identical on the AVX2 CPUs measured (not on an AVX-512 one: 2e-7 in the
first conv); the first backward sums the weight gradients in another order (2e-6 relative on the
tests' ResNet-9), and training carries that forward as it carries any rounding difference: not bit
for bit, on any CPU.

How. Each run keeps its own :class:`~initmem.empirical.trainer.Trainer` (model, optimizer, generators,
statistics), but its parameters and BatchNorm buffers become views into stacked tensors of shape
``(K, *shape)`` (:class:`PackedModels`). A training step (:meth:`Pack.train_epoch`) gathers and
augments each run's batch with its own generators, runs one packed forward/backward, and hands each
run the gradient slice of its parameters; each run's optimizer then steps on its own view. Two packed
forwards, ``mode``:

- ``"grouped"`` (default): one network K times as wide, every convolution grouped (``groups=K``),
  BatchNorm over the K x C channels, the head a batched matrix product. Run k owns channel block k,
  so the blocks never mix: the math of K separate networks.
- ``"vmap"``: ``torch.func.vmap`` of ``functional_call`` over the stacked parameters and buffers.

Evaluation, logging and checkpoints stay per run: each run is a
:class:`~initmem.empirical.trainer.RunSession`, and :func:`train_sessions` is the loop of
:func:`~initmem.empirical.trainer.train` for K sessions on one thread, the pack's epoch in place of
each session's own. Whether packing pays depends on the device: see BENCHMARKS.md (benchmark 3) for
the measured speed of both modes against the same runs one after another.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from .config import RunConfig
from .data import DataSplits, shared_splits
from .runfolder import RunResult, hold_run, read_start_step
from .trainer import Divergence, RunSession, Trainer, resolve_device, train, training_loss

#: Config fields in which packed runs may differ (everything else must be equal).
PACKABLE_FIELDS = ("alpha", "seed", "out_dir", "quiet")
PACK_MODES = ("grouped", "vmap")
#: The mode that picks for the model: ``"grouped"`` where :func:`widen` can widen it, else ``"vmap"``.
AUTO = "auto"


def check_packable(configs: Sequence[RunConfig]) -> None:
    """Raise ValueError unless ``configs`` (at least one) differ only in :data:`PACKABLE_FIELDS` and
    have distinct ``out_dir`` s."""
    if not configs:
        raise ValueError("configs must hold at least one RunConfig")
    first = configs[0].to_dict()
    for i, config in enumerate(configs[1:], start=1):
        other = config.to_dict()
        differ = [k for k in first if k not in PACKABLE_FIELDS and first[k] != other[k]]
        if differ:
            raise ValueError(
                f"configs[{i}] differs from configs[0] in {differ}; packed runs may differ only in "
                f"{list(PACKABLE_FIELDS)}"
            )
    out_dirs = [str(c.out_dir) for c in configs]
    if len(set(out_dirs)) != len(out_dirs):
        raise ValueError("configs must have distinct out_dir values (one run folder per run)")


# ==================================================================================== the wide network
class GroupedLinear(nn.Module):
    """K independent linear layers on K channel blocks: input ``(B, K * in)`` (block k = run k), output
    ``(B, K, out)``; ``weight`` ``(K, out, in)``, ``bias`` ``(K, out)`` or None."""

    def __init__(self, k: int, in_features: int, out_features: int, bias: bool):
        super().__init__()
        self.k = k
        self.weight = nn.Parameter(torch.empty(k, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(k, out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.einsum("bki,koi->bko", x.reshape(x.shape[0], self.k, -1), self.weight)
        return out if self.bias is None else out + self.bias


#: Parameter-free modules that act on each channel alone (or are containers): safe to widen around.
_CHANNELWISE = (
    nn.Sequential,
    nn.ModuleList,
    nn.ReLU,
    nn.Identity,
    nn.Flatten,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveMaxPool2d,
    nn.AdaptiveAvgPool2d,
)


def widen(model: nn.Module, k: int) -> nn.Module:
    """A copy of ``model`` on the meta device, K times as wide: every ``Conv2d`` grouped K ways, every
    ``BatchNorm2d`` over K x C channels, every ``Linear`` a :class:`GroupedLinear`. Parameter names are
    kept, so ``stacked[name].reshape(wide_shape)`` is the wide parameter. Other modules must hold no
    parameters of their own (containers and channel-wise operations); anything else raises ValueError.
    """
    wide = copy.deepcopy(model).to("meta")

    def visit(module: nn.Module, path: str) -> None:
        for name, child in list(module.named_children()):
            where = f"{path}.{name}" if path else name
            with torch.device("meta"):
                if isinstance(child, nn.Conv2d):
                    if child.padding_mode != "zeros":
                        raise ValueError(f"{where}: only zero-padded convolutions can be packed")
                    replacement = nn.Conv2d(
                        k * child.in_channels,
                        k * child.out_channels,
                        child.kernel_size,
                        child.stride,
                        child.padding,
                        child.dilation,
                        groups=k * child.groups,
                        bias=child.bias is not None,
                    )
                elif isinstance(child, nn.BatchNorm2d):
                    replacement = nn.BatchNorm2d(
                        k * child.num_features,
                        eps=child.eps,
                        momentum=child.momentum,
                        affine=child.affine,
                        track_running_stats=child.track_running_stats,
                    )
                elif isinstance(child, nn.Linear):
                    replacement = GroupedLinear(
                        k, child.in_features, child.out_features, child.bias is not None
                    )
                else:
                    own = list(child.named_parameters(recurse=False))
                    if own:
                        raise ValueError(
                            f"{where} ({type(child).__name__}) holds parameters "
                            f"{[n for n, _ in own]}: only Conv2d, BatchNorm2d and Linear layers "
                            "can be packed"
                        )
                    visit(child, where)
                    continue
            setattr(module, name, replacement)

    visit(wide, "")
    return wide


def pack_mode(model: nn.Module) -> str:
    """``"grouped"`` if :func:`widen` can widen ``model`` (Conv2d, BatchNorm2d and Linear layers
    around parameter-free ones: the BatchNorm ResNets, plain MLPs), else ``"vmap"``, which packs any
    module (LayerNorm, attention, learnable gains)."""
    try:
        widen(model, 2)
    except ValueError:
        return "vmap"
    return "grouped"


# ==================================================================================== stacked storage
class PackedModels:
    """K models of one architecture as stacked tensors, and their packed forward.

    After construction every parameter and buffer of model k is a view of ``params[name][k]`` (or
    ``buffers[name][k]``), stacks of shape ``(K, *shape)``: ``param.data`` is re-pointed, so the
    modules and the optimizers that hold them are unchanged, and an in-place update of a run's
    parameter is an update of the stack and vice versa.
    """

    def __init__(self, models: Sequence[nn.Module], mode: str = "grouped"):
        if mode not in (*PACK_MODES, AUTO):
            raise ValueError(f"mode must be one of {[*PACK_MODES, AUTO]} (got {mode!r})")
        self.mode = pack_mode(models[0]) if mode == AUTO else mode
        self.models = list(models)
        self.param_names = [n for n, _ in self.models[0].named_parameters()]
        self.buffer_names = [n for n, _ in self.models[0].named_buffers()]
        self.params: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self._template = self.models[0]
        self._restack()

    @property
    def k(self) -> int:
        return len(self.models)

    def _restack(self) -> None:
        """(Re)build the stacks from the models' current values and point the models at them."""
        named = [(dict(m.named_parameters()), dict(m.named_buffers())) for m in self.models]
        with torch.no_grad():
            self.params = {
                n: torch.stack([p[n].detach() for p, _ in named]).requires_grad_(True)
                for n in self.param_names
            }
            self.buffers = {n: torch.stack([b[n] for _, b in named]) for n in self.buffer_names}
        for i, (params, buffers) in enumerate(named):
            for n in self.param_names:
                params[n].data = self.params[n].detach()[i]
            for n in self.buffer_names:
                buffers[n].data = self.buffers[n][i]
        if self.mode == "grouped":
            self._wide = widen(self._template, self.k).train()
            self._grouped_linear = {
                f"{name}.{p}" if name else p
                for name, module in self._wide.named_modules()
                if isinstance(module, GroupedLinear)
                for p, _ in module.named_parameters(recurse=False)
            }
        else:
            self._base = copy.deepcopy(self._template).to("meta").train()

    def keep(self, indices: Sequence[int]) -> None:
        """Drop every model but ``indices`` (in that order) from the pack; the dropped ones keep their
        current values (in their own copies)."""
        dropped = [m for i, m in enumerate(self.models) if i not in set(indices)]
        for model in dropped:  # give them storage of their own before the stack goes away
            with torch.no_grad():
                for t in (*model.parameters(), *model.buffers()):
                    t.data = t.data.clone()
        self.models = [self.models[i] for i in indices]
        if self.models:
            self._restack()
        else:  # every model left (say, all diverged at one step)
            self.params, self.buffers = {}, {}

    def forward(self, images: Sequence[torch.Tensor], memory_format=torch.contiguous_format):
        """Logits ``(K, B, out)`` of model k on ``images[k]`` ``(B, C, H, W)``, in train mode (batch
        statistics, running statistics updated as each model's own BatchNorm would)."""
        if len(images) != self.k:
            raise ValueError(
                f"images must hold one batch per packed model ({self.k}, got {len(images)})"
            )
        if self.mode == "vmap":
            return vmap(self._one, randomness="error")(
                self.params, self.buffers, torch.stack(images)
            )
        b, c, h, w = images[0].shape
        x = torch.stack(images, dim=1).reshape(b, self.k * c, h, w)
        x = x.contiguous(memory_format=memory_format)
        params = {
            n: t if n in self._grouped_linear else t.reshape(-1, *t.shape[2:])
            for n, t in self.params.items()
        }
        buffers = {}
        for n, t in self.buffers.items():
            if n.endswith("num_batches_tracked"):
                t.add_(1)  # the wide BatchNorm's own counter is a scratch scalar
                buffers[n] = torch.zeros((), dtype=t.dtype, device=t.device)
            else:
                buffers[n] = t.reshape(-1)
        out = functional_call(self._wide, (params, buffers), (x,))
        return out.transpose(0, 1)

    def _one(self, params, buffers, x):
        return functional_call(self._base, (params, buffers), (x,))

    def zero_grad(self) -> None:
        for t in self.params.values():
            t.grad = None

    def share_grads(self) -> None:
        """Give each model's parameters their slice of the stacked gradient (as ``param.grad``)."""
        for i, model in enumerate(self.models):
            for n, p in model.named_parameters():
                grad = self.params[n].grad
                p.grad = None if grad is None else grad[i]


# ==================================================================================== the packed epoch
class Pack:
    """K :class:`Trainer` s trained in lock step: each step one packed forward/backward, then each
    run's own update (gradient tracking, L2, decoupled decay, optimizer) on its own slice.

    All trainers must be at the same step (fresh, or resumed from one epoch).
    """

    def __init__(self, trainers: Sequence[Trainer], mode: str = "grouped"):
        check_packable([t.config for t in trainers])
        steps = {t.step for t in trainers}
        if len(steps) != 1:
            raise ValueError(
                f"packed trainers must be at the same step (got steps {sorted(steps)})"
            )
        self.trainers = list(trainers)
        self.packed = PackedModels([t.model for t in trainers], mode)
        config = trainers[0].config
        self._forward = (
            torch.compile(self.packed.forward) if config.compile else self.packed.forward
        )

    def leave(self, trainer: Trainer) -> None:
        """Drop ``trainer`` from the pack; it keeps its current state (in tensors of its own)."""
        keep = [i for i, t in enumerate(self.trainers) if t is not trainer]
        if len(keep) < len(self.trainers):
            self.packed.keep(keep)
            self.trainers = [self.trainers[i] for i in keep]

    def train_epoch(self) -> list[Divergence | None]:
        """One epoch of every trainer still in the pack; returns each one's Divergence (or None) in
        the order of :attr:`trainers`. Diverged trainers leave the pack (their last state is kept)."""
        active = list(self.trainers)
        plans = {id(t): t.start_epoch() for t in active}
        outcome: dict[int, Divergence | None] = {id(t): None for t in active}
        steps = plans[id(active[0])].steps
        lead = active[0]
        for i in range(steps):
            lrs = [t.next_lr() for t in active]
            batches = [t.next_batch(plans[id(t)].batches[i]) for t in active]
            with lead._autocast():
                logits = self._forward([images for images, _ in batches], lead.memory_format)
            losses = [
                training_loss(lead.config.loss, logits[j].to(lead.dtype), labels)
                for j, (_, labels) in enumerate(batches)
            ]
            self.packed.zero_grad()
            torch.stack(losses).sum().backward()
            self.packed.share_grads()
            stopped = []
            for j, t in enumerate(active):
                t.apply_gradients(lrs[j])
                correct = (logits[j].detach().argmax(dim=1) == batches[j][1]).sum()
                divergence = t.record_step(plans[id(t)], i, losses[j].detach(), correct)
                if divergence is not None:
                    outcome[id(t)] = divergence
                    stopped.append(j)
            if stopped:
                keep = [j for j in range(len(active)) if j not in stopped]
                active = [active[j] for j in keep]
                self.packed.keep(keep)
                if not active:
                    break
        for t in active:
            t.end_epoch(plans[id(t)])
        self.trainers = active
        return [outcome[key] for key in plans]


# ==================================================================================== whole runs
def _start_step(config: RunConfig) -> int | None:
    """Where ``train(config)`` would start: None (finished), the step in ``last.pt``, or 0."""
    return read_start_step(config.out_dir)


def train_packed(
    configs: Sequence[RunConfig],
    *,
    mode: str = "grouped",
    data: DataSplits | None = None,
    resume: bool | None = None,
    download: bool | None = None,
) -> list[RunResult]:
    """Train runs that differ only in ``alpha``/``seed`` (and ``out_dir``) together; write each run's
    folder exactly as :func:`train` would and return their results in the order of ``configs``.

    Runs already finished are returned as they are; unfinished runs resume from their ``last.pt``
    (runs resuming from different steps are packed in separate groups, one group after another; a group
    of one is trained by :func:`train` alone). ``mode``: :data:`PACK_MODES`. ``data``: splits already
    loaded for these configs; ``download`` as in :func:`train`. ``mode="auto"`` packs grouped where the
    model can be widened and with vmap otherwise (:func:`pack_mode`). If any run fails, raises the first
    run's exception after every other run of its group has finished.

    Every run folder is owned by this thread from the start (:func:`runfolder.hold_run`, the lock
    :func:`train` takes): if another process or thread holds any of them, nothing is read or trained
    and :class:`~initmem.empirical.runfolder.RunBusyError` names that folder and its holder.
    """
    configs = list(configs)
    check_packable(configs)
    if mode not in (*PACK_MODES, AUTO):
        raise ValueError(f"mode must be one of {[*PACK_MODES, AUTO]} (got {mode!r})")
    for config in configs:
        config.validate()
    with contextlib.ExitStack() as owned:
        for config in configs:
            owned.enter_context(hold_run(config.out_dir))
        if data is None:
            data = shared_splits(configs[0], resolve_device(configs[0].device), download=download)
        groups: dict[int | None, list[int]] = {}
        for i, config in enumerate(configs):
            groups.setdefault(_start_step(config), []).append(i)
        results: dict[int, RunResult] = {}
        for start, indices in groups.items():
            if start is None or len(indices) == 1:
                for i in indices:
                    results[i] = train(configs[i], resume=resume, data=data, download=download)
                continue
            sessions = []
            with contextlib.ExitStack() as opened:
                for i in indices:
                    sessions.append(RunSession.begin(configs[i], resume=resume, data=data))
                    opened.callback(sessions[-1].close)
                train_sessions(sessions, mode)
            results.update(zip(indices, (s.result for s in sessions), strict=True))
    return [results[i] for i in range(len(configs))]


def train_sessions(sessions: Sequence[RunSession], mode: str = "grouped") -> None:
    """The loop of :func:`train` for sessions at one step, on this thread, their epochs trained as one
    :class:`Pack`; each session keeps its own evaluations, checkpoints and result (``session.result``).

    A run that diverges leaves the pack at that step and finishes as alone. A run whose own work (an
    evaluation, a checkpoint) raises leaves the pack too; the others go on, and the first such
    exception is raised once they have finished.
    """
    todo = [s for s in sessions if s.result is None]
    if not todo:
        return
    pack = Pack([s.trainer for s in todo], mode)
    errors: list[Exception] = []

    def attempt(session: RunSession, work: Callable[[RunSession], Any]) -> None:
        try:
            work(session)
        except Exception as err:  # noqa: BLE001 - raised once the others have finished
            errors.append(err)
            stop(session)

    def stop(session: RunSession) -> None:
        if session in todo:
            todo.remove(session)
            pack.leave(session.trainer)

    with contextlib.ExitStack() as running:
        for session in list(todo):
            if session.at_init:
                attempt(session, RunSession.evaluate)
            running.enter_context(session.running())
        while todo:
            members = list(pack.trainers)
            divergences = dict(zip(map(id, members), pack.train_epoch(), strict=True))
            for session in list(todo):
                divergence = divergences[id(session.trainer)]
                if divergence is None:
                    attempt(session, RunSession.end_epoch)
                if session in todo and (divergence is not None or session.done):
                    todo.remove(
                        session
                    )  # a diverged run has left the pack; the others end together
                    attempt(session, lambda s, d=divergence: s.finish(d))
    if errors:
        raise errors[0]


__all__ = [
    "GroupedLinear",
    "PACKABLE_FIELDS",
    "PACK_MODES",
    "Pack",
    "PackedModels",
    "AUTO",
    "check_packable",
    "pack_mode",
    "train_packed",
    "train_sessions",
    "widen",
]
