"""Train K runs that differ only in ``alpha`` and ``seed`` at once: one forward and backward for all.

A sweep of small networks spends most of its time on per-operation overhead, not arithmetic; packing
K runs into one computation divides that overhead by K. :func:`train_packed` takes configs that
differ only in :data:`PACKABLE_FIELDS` and writes the same run folders, with the same numbers up to
float rounding, as calling :func:`~initmem.empirical.train.train` on each (docs/run-format.md).

How. Each run keeps its own :class:`~initmem.empirical.train.Trainer` (model, optimizer, generators,
logs), but its parameters and BatchNorm buffers become views into stacked tensors of shape
``(K, *shape)`` (:class:`PackedModels`). A training step gathers and augments each run's batch with
its own generators, runs one packed forward/backward, and hands each run the gradient slice of its
parameters; each run's optimizer then steps on its own view. Two packed forwards, ``mode``:

- ``"grouped"`` (default): one network K times as wide, every convolution grouped (``groups=K``),
  BatchNorm over the K x C channels, the head a batched matrix product. Run k owns channel block k,
  so the blocks never mix: the math of K separate networks.
- ``"vmap"``: ``torch.func.vmap`` of ``functional_call`` over the stacked parameters and buffers.

Whether packing pays depends on the device: see BENCHMARKS.md (benchmark 3) for the measured speed of
both modes against the same runs one after another. Evaluation, logging and checkpoints stay per run
(each run's ``train()`` runs in its own thread; the packed epoch runs when all of them are waiting for
it, and their evaluations run one at a time on the caller's thread, which does all the torch work).
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from .config import RunConfig
from .data import DataSplits, shared_splits
from .runfolder import RunResult, read_start_step
from .train import Divergence, Trainer, resolve_device, train

#: Config fields in which packed runs may differ (everything else must be equal).
PACKABLE_FIELDS = ("alpha", "seed", "out_dir", "quiet")
PACK_MODES = ("grouped", "vmap")


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


# ==================================================================================== stacked storage
class PackedModels:
    """K models of one architecture as stacked tensors, and their packed forward.

    After construction every parameter and buffer of model k is a view of ``params[name][k]`` (or
    ``buffers[name][k]``), stacks of shape ``(K, *shape)``: ``param.data`` is re-pointed, so the
    modules and the optimizers that hold them are unchanged, and an in-place update of a run's
    parameter is an update of the stack and vice versa.
    """

    def __init__(self, models: Sequence[nn.Module], mode: str = "grouped"):
        if mode not in PACK_MODES:
            raise ValueError(f"mode must be one of {list(PACK_MODES)} (got {mode!r})")
        self.mode = mode
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
        self._restack()

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
                F.cross_entropy(logits[j].float(), labels) for j, (_, labels) in enumerate(batches)
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
class _Coordinator:
    """The thread that does a pack's torch work. Each run's train() lives in its own thread; this one
    (the caller's) runs the packed epoch once every run still training has asked for it, and runs the
    runs' evaluations one at a time as they ask. Keeping the compute on one thread matters: every thread
    that enters torch's OpenMP regions gets its own team of threads, and K teams on a few cores made
    the same evaluations 1.5x slower (BENCHMARKS.md, benchmark 3)."""

    def __init__(self, pack: Pack):
        self.pack = pack
        self.cond = threading.Condition()
        self.active = set(id(t) for t in pack.trainers)
        self.waiting: set[int] = set()
        self.calls: deque[tuple[int, Callable[[], Any]]] = deque()
        self.answers: dict[int, tuple[bool, Any]] = {}  # run -> (ok, value or exception)

    def _ask(self, trainer: Trainer) -> Any:
        """Wait (holding ``cond``) for the answer to ``trainer``'s request; return it or raise it."""
        self.cond.notify_all()
        self.cond.wait_for(lambda: id(trainer) in self.answers)
        ok, value = self.answers.pop(id(trainer))
        if not ok:
            raise value
        return value

    def request_epoch(self, trainer: Trainer) -> Divergence | None:
        with self.cond:
            self.waiting.add(id(trainer))
            return self._ask(trainer)

    def call(self, trainer: Trainer, fn: Callable[[], Any]) -> Any:
        """``fn()`` run on the coordinator's thread, for ``trainer``'s thread."""
        with self.cond:
            self.calls.append((id(trainer), fn))
            return self._ask(trainer)

    def leave(self, trainer: Trainer) -> None:
        with self.cond:
            self.active.discard(id(trainer))
            self.waiting.discard(id(trainer))
            self.cond.notify_all()

    def serve(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(
                    lambda: self.calls or not self.active or self.active <= self.waiting
                )
                call = self.calls.popleft() if self.calls else None
                if call is None and not self.active:
                    return
                if call is None:
                    self.waiting.clear()
            answers = self._run_call(*call) if call is not None else self._run_epoch()
            with self.cond:
                self.answers.update(answers)
                self.cond.notify_all()

    @staticmethod
    def _run_call(key: int, fn: Callable[[], Any]) -> dict[int, tuple[bool, Any]]:
        try:
            return {key: (True, fn())}
        except BaseException as err:  # noqa: BLE001 - raised in the run's thread
            return {key: (False, err)}

    def _run_epoch(self) -> dict[int, tuple[bool, Any]]:
        members = [t for t in self.pack.trainers if id(t) in self.active]
        if len(members) != len(self.pack.trainers):  # some left (diverged elsewhere or failed)
            positions = {id(t): i for i, t in enumerate(self.pack.trainers)}
            self.pack.packed.keep([positions[id(t)] for t in members])
            self.pack.trainers = members
        try:
            outcomes = self.pack.train_epoch()
        except Exception as err:  # noqa: BLE001 - handed to every run's thread
            return {id(t): (False, err) for t in members}
        return {id(t): (True, outcome) for t, outcome in zip(members, outcomes, strict=True)}


class PackMember(Trainer):
    """A run's Trainer inside a pack: its epochs are the pack's, its evaluations run on the pack's
    thread one at a time, and its checkpoint holds its own tensors (not views of the whole stack)."""

    coordinator: _Coordinator | None = None

    def train_epoch(self) -> Divergence | None:
        if self.coordinator is None:
            return super().train_epoch()
        return self.coordinator.request_epoch(self)

    def evaluate(self, wall_time: float):
        if self.coordinator is None:
            return super().evaluate(wall_time)
        return self.coordinator.call(self, lambda: super(PackMember, self).evaluate(wall_time))

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["model"] = {k: v.clone() for k, v in state["model"].items()}
        return state


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
    loaded for these configs; ``download`` as in :func:`train`. If any run fails, raises the first
    run's exception after every other run has finished.
    """
    configs = list(configs)
    check_packable(configs)
    if mode not in PACK_MODES:
        raise ValueError(f"mode must be one of {list(PACK_MODES)} (got {mode!r})")
    for config in configs:
        config.validate()
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
        results.update(_train_group([configs[i] for i in indices], indices, mode, data, resume))
    return [results[i] for i in range(len(configs))]


def _train_group(configs, indices, mode, data, resume) -> dict[int, RunResult]:
    trainers = [PackMember(config, data) for config in configs]
    coordinator = _Coordinator(Pack(trainers, mode))
    for trainer in trainers:
        trainer.coordinator = coordinator
    results: dict[int, RunResult] = {}
    errors: list[BaseException] = []

    def run(position: int) -> None:
        # This thread's own torch work (checkpoints) is light. Give it one OpenMP thread: a thread that
        # enters a parallel region gets a team of its own, and with K idle teams on a few cores the
        # OpenMP runtime stops spinning, which made the packed epochs 1.4x slower (BENCHMARKS.md, 3).
        torch.set_num_threads(1)
        try:
            results[indices[position]] = train(
                configs[position], resume=resume, data=data, trainer=trainers[position]
            )
        except BaseException as err:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(err)
        finally:
            coordinator.leave(trainers[position])

    threads = [
        threading.Thread(target=run, args=(p,), name=f"packed-run-{p}", daemon=True)
        for p in range(len(configs))
    ]
    for thread in threads:
        thread.start()
    coordinator.serve()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


__all__ = [
    "GroupedLinear",
    "PACKABLE_FIELDS",
    "PACK_MODES",
    "Pack",
    "PackMember",
    "PackedModels",
    "check_packable",
    "train_packed",
    "widen",
]
