"""One training run: ``train(config) -> RunResult``, writing the run folder of docs/run-format.md.

The loop
--------
:func:`train` is the whole story of a run, in the spirit of Flax's ``examples/mnist/train.py``::

    session = RunSession.begin(config)   open the run folder: fresh, or resumed from its last.pt
    session.evaluate()                   at init (epoch 0), when nothing is logged yet
    while not session.done:
        session.train_epoch()            one pass over a seeded permutation of the training split
        session.end_epoch()              evaluate and checkpoint when due
    session.finish()                     result.json, last

One epoch (:meth:`Trainer.train_epoch`), for each batch: gather it on the device, augment it
(seeded), forward (bf16 autocast where asked), backward, the per-layer step statistics
(:class:`IntervalStats`), coupled L2 / decoupled decay, the optimizer step; every
``DIVERGENCE_CHECK_EVERY`` steps, a divergence check. An evaluation (every ``eval_every`` epochs and
after the last): validation, test and un-augmented training accuracy in eval mode, per-layer norms and
the statistics since the previous evaluation; the best-validation model is kept (its test accuracy is
the run's answer). A checkpoint (every ``checkpoint_every`` epochs and after the last): tables,
predictions, best.pt and last.pt.

The pieces, in the order of this file
-------------------------------------
- :func:`train`: the loop above.
- :class:`RunSession`: one run and its folder: a :class:`Trainer`, its :class:`RunFiles`, the best
  model so far and the clock. ``empirical.packing`` drives K sessions on one thread, their epochs
  trained as one computation; a benchmark may drive one itself.
- :class:`Trainer`: the moving parts of the optimization (data on the device, model, optimizer,
  generators, step counter) and one epoch of training, split into the pieces that packing drives for
  K trainers at once. It writes nothing.
- :class:`IntervalStats`: what the log reports about the steps since the last evaluation; the one
  place where per-step, per-layer statistics are accumulated.

Conventions
-----------
Every random draw is seeded from ``config.seed`` (model init, data order, augmentation), so two runs
of one config on the CPU give identical logs, and a killed run resumed from ``last.pt`` ends with
exactly the numbers of an uninterrupted one (last.pt holds everything the next step depends on, the
interval statistics included). A non-finite loss or a weight norm above ``max_weight_norm`` stops the
run with status ``diverged`` (no exception). ``wall_time`` counts data loading and model building and
carries on across a resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shlex
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from initmem.theory.units import update_contraction

from .config import NON_HASHED_FIELDS, RESIDUAL_STREAM_LAYER, ConfigError, RunConfig
from .data import DataSplits, ImageSplit, augment_batch, shared_splits
from .models import (
    INVARIANCE_RTOL,
    JOINT,
    build_model,
    group_sizes,
    residual_stream_check,
    residual_stream_parameters,
    scale_invariance_check,
    scale_invariant_parameters,
)
from .optim import (
    DecoupledDecay,
    add_coupled_l2,
    build_optimizer,
    handles_coupled_l2,
    handles_decoupled_decay,
    set_lr,
)
from .plugins import PluginError, is_plugin
from .provenance import plugin_change
from .runfolder import (
    DamagedFileError,
    RunFiles,
    RunResult,
    hold_run,
    load_result,
    read_result,
)

#: Optimizer steps between divergence checks (each check syncs with the device once).
DIVERGENCE_CHECK_EVERY = 25


class RunFolderError(ValueError):
    """The run folder holds another run (or a different config) and we were not told to replace it."""


class DataChangedError(RunFolderError):
    """A resume found another data set than the one the run started on (config.json's record)."""


@dataclass(frozen=True)
class Divergence:
    """Where and why a run stopped: ``step`` counts the optimizer steps done before the evidence."""

    step: int
    reason: str


# ==================================================================================== the loop
def train(
    config: RunConfig,
    *,
    resume: bool | None = None,
    data: DataSplits | None = None,
    download: bool | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    allow_other_data: bool = False,
) -> RunResult:
    """Train one run and write its folder ``config.out_dir`` (docs/run-format.md); return its result.

    ``resume``: None (default) picks up whatever the folder holds for this same config: a finished run
    is returned as is, an unfinished one continues from ``last.pt``, an empty folder starts fresh.
    True does the same but is explicit (the CLI's ``--resume``). False starts fresh and refuses a folder
    that already holds a run (:class:`RunFolderError`). A folder holding a different config (another
    hash) is always refused. ``data``: splits already loaded for this config (saves reloading in a
    sweep). ``download``: let torchvision fetch a missing data set (None: unless
    ``INITMEM_OFFLINE=1``). ``callback(record)`` is called after each evaluation and its checkpoint,
    e.g. to stop a run from outside by raising. A resume compares the data set with the one the run
    started on (config.json's ``data``: sizes, mean/std, digests of the split indices and labels; not
    where the copy lives) and raises :class:`DataChangedError` if it differs, unless
    ``allow_other_data``.

    The run folder is owned by this thread while it trains (the session's lock, :func:`runfolder.hold_run`):
    another process or thread training it raises :class:`~initmem.empirical.runfolder.RunBusyError`. Interrupted between
    two epochs (KeyboardInterrupt: Ctrl-C, or SIGTERM / SIGUSR2 turned into one by ``initmem train``),
    the run first checkpoints what it has not yet saved; interrupted inside an epoch it keeps its last
    checkpoint. Either way the folder resumes.
    """
    config.validate()
    with RunSession.begin(
        config, resume=resume, data=data, download=download, allow_other_data=allow_other_data
    ) as session:
        if session.result is not None:  # finished before: returned as it is
            return session.result
        if session.at_init:
            session.evaluate()  # no checkpoint yet: a run killed before its first one starts over
        divergence = None
        between_epochs = False  # the log and the trainer agree: a checkpoint may be taken
        try:
            with session.running():  # the progress bar; cudnn autotuning on CUDA
                while not session.done:
                    between_epochs = False
                    divergence = session.train_epoch()
                    if divergence is not None:
                        break
                    record = session.end_epoch()  # the evaluation and the checkpoint, when due
                    between_epochs = True
                    if record is not None and callback is not None:
                        callback(record)
        except KeyboardInterrupt:
            if between_epochs and session.checkpointed_epoch != session.trainer.epoch:
                session.checkpoint()
            raise
        return session.finish(divergence)


# ==================================================================================== one run and its folder
class RunSession:
    """One run and its folder: the :class:`Trainer`, the :class:`RunFiles` it writes, the best model
    so far (selected on validation accuracy) and the wall clock.

    :meth:`begin` opens it; then :meth:`evaluate` at init when :attr:`at_init`, and until
    :attr:`done`: :meth:`train_epoch` and :meth:`end_epoch`; :meth:`finish` last. :meth:`checkpoint`
    may be called between epochs at any time (it is what a resume starts from). A session of a run
    that had already finished holds only its :attr:`result` (no trainer).

    Ownership: from :meth:`begin` until :meth:`finish` or :meth:`close` the session holds its folder's
    lock (:func:`runfolder.hold_run`, re-entrant within a thread), so no other process or thread can
    train the folder meanwhile; ``with RunSession.begin(...) as session:`` closes it on the way out.
    """

    def __init__(self, config: RunConfig, files: RunFiles, trainer: Trainer | None, started: float):
        self.config = config
        self._owner = contextlib.ExitStack()  # the folder's lock, held from begin to finish/close
        self.files = files
        self.trainer = trainer
        self.best = _Best()
        #: the run's result: set by :meth:`finish` (or by :meth:`begin` for a finished run)
        self.result: RunResult | None = None
        self._started = started
        self._clock_offset = 0.0  # the wall time of the attempts before a resume
        #: the epoch of the last checkpoint written or resumed from (None: none yet)
        self.checkpointed_epoch: int | None = None
        self._bar: tqdm | None = None

    @classmethod
    def begin(
        cls,
        config: RunConfig,
        *,
        resume: bool | None = None,
        data: DataSplits | None = None,
        download: bool | None = None,
        allow_other_data: bool = False,
    ) -> RunSession:
        """Open the run folder ``config.out_dir`` (``resume``, ``data``, ``download``,
        ``allow_other_data``: see
        :func:`train`): a finished run's session holds its result; an unfinished one's trainer is
        restored from ``last.pt`` and its log cut back to that checkpoint; otherwise the folder starts
        fresh (``config.json``). The session holds the folder's lock from here
        (:class:`~initmem.empirical.runfolder.RunBusyError`, naming the holder, if another process or
        thread has it); a finished run's session releases it at once."""
        config.validate()
        owner = contextlib.ExitStack()
        with owner:
            owner.enter_context(hold_run(config.out_dir))
            files = RunFiles(config.out_dir, config.hash)
            _check_run_folder(files, config, resume)
            if read_result(files.dir, complete=True, discard_damaged=True) is not None:
                session = cls(config, files, None, time.perf_counter())
                session.result = load_result(config.out_dir)
                return session  # nothing to train: the lock is released on leaving the block
            started = time.perf_counter()  # wall time counts data loading and model building too
            state = files.load_torch("last.pt") if files.path("last.pt").is_file() else None
            config = pin_threads(config, None if state is None else state.get("threads"))
            session = cls(config, files, Trainer(config, data, download=download), started)
            if state is not None:
                _check_same_data(files, session.trainer.data.describe(), allow_other_data)
                session._restore(state)
            else:
                files.start(
                    config,
                    session.trainer.data.describe(),
                    session.trainer.describe_model(),
                    device=str(session.trainer.device),
                )
            session._owner = owner.pop_all()  # the session holds the lock from now on
        return session

    def close(self) -> None:
        """Release the folder's lock (idempotent; :meth:`finish` calls it)."""
        self._owner.close()

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _restore(self, state: dict[str, Any]) -> None:
        cfg, last = self.config, self.files.path("last.pt")
        if state.get("hash", cfg.hash) != cfg.hash:
            raise DamagedFileError(
                last,
                f"holds the checkpoint of run {state['hash']}, not of {cfg.hash}",
                f"remove it (rm {shlex.quote(str(last))}) and rerun: the run restarts from the beginning",
            )
        trainer = self.trainer
        trainer.load_state_dict(state["trainer"])
        self.best = _Best(**state["best"])
        if self.best.model_state is None:  # the best model was the checkpoint's own model
            self.best.model_state = _cpu_state(trainer.model)
        self._clock_offset = state["wall_time"]
        self.checkpointed_epoch = trainer.epoch
        evaluated = [
            e for e in range(trainer.epoch + 1) if e % cfg.eval_every == 0 or e == cfg.total_epochs
        ]
        self.files.reopen(
            trainer.epoch, len(trainer.data.test), evaluated, state.get("logged_wall_time")
        )
        self.files.save_torch("best.pt", self.best.model_state)  # a kill may have left a later one

    # ------------------------------------------------------------------ where the run stands
    @property
    def at_init(self) -> bool:
        """Nothing trained or logged yet: the evaluation at init is due."""
        return self.trainer.epoch == 0 and not self.files.records

    @property
    def done(self) -> bool:
        """Every epoch of the config trained."""
        return self.trainer.epoch >= self.config.total_epochs

    def wall_time(self) -> float:
        """Seconds since :meth:`begin`, plus those of the attempts before a resume."""
        return self._clock_offset + time.perf_counter() - self._started

    # ------------------------------------------------------------------ the steps of the loop
    def train_epoch(self) -> Divergence | None:
        """One epoch (:meth:`Trainer.train_epoch`); a :class:`Divergence` if the run must stop."""
        return self.trainer.train_epoch()

    def evaluate(self) -> dict[str, Any]:
        """Evaluate (:meth:`Trainer.evaluate`), append the record (and the test predictions) to the
        log, offer the model as the best; returns the record."""
        record, test_pred = self.trainer.evaluate(self.wall_time())
        self.files.append(record, test_pred if self.config.save_predictions else None)
        self.best.offer(record, test_pred, self.trainer.model)
        return record

    def end_epoch(self) -> dict[str, Any] | None:
        """After an epoch: :meth:`evaluate` every ``eval_every`` epochs and after the last,
        :meth:`checkpoint` every ``checkpoint_every`` epochs and after the last, advance the progress
        bar. Returns the evaluation's record (None when none was due)."""
        cfg, epoch = self.config, self.trainer.epoch
        last = epoch == cfg.total_epochs
        record = None
        if epoch % cfg.eval_every == 0 or last:
            record = self.evaluate()
            if self._bar is not None:
                self._bar.set_postfix(_progress(record), refresh=False)
        if epoch % cfg.checkpoint_every == 0 or last:
            self.checkpoint()
        if self._bar is not None:
            self._bar.update(1)
        return record

    def checkpoint(self) -> None:
        """Write the tables, the predictions, best.pt (if a better model came since) and last.pt: the
        state a resume starts from. Call it between epochs."""
        cfg, trainer, best = self.config, self.trainer, self.best
        self.files.write_tables()
        if cfg.save_predictions:
            self.files.write_predictions(_labels(trainer.data.test), best.test_pred)
        self._save_best()
        state = {
            "trainer": trainer.state_dict(),
            "best": vars(best) | {"model_state": _stored_best_model(best, trainer.epoch)},
            "wall_time": self.wall_time(),
            "hash": cfg.hash,
            # the clock reading of the last evaluation logged: a resume checks the log is this run's
            "logged_wall_time": self.files.records[-1]["wall_time"] if self.files.records else None,
            "threads": cfg.threads,
        }
        self.files.save_torch("last.pt", state)
        self.checkpointed_epoch = trainer.epoch

    def _save_best(self) -> None:
        """best.pt, if a better model came since it was last written (written at checkpoints only: a
        run killed in between resumes with the best of its checkpoint and rewrites best.pt)."""
        if self.best.unsaved:
            self.files.save_torch("best.pt", self.best.model_state)
            self.best.unsaved = False

    def finish(self, divergence: Divergence | None = None) -> RunResult:
        """Write ``result.json`` (after the tables, predictions and best.pt of a diverged run, which
        stopped between checkpoints) and return the result: status ``diverged`` if ``divergence``."""
        cfg, trainer, best, files = self.config, self.trainer, self.best, self.files
        if divergence is not None:
            files.write_tables()
            if cfg.save_predictions and best.test_pred is not None:
                files.write_predictions(_labels(trainer.data.test), best.test_pred)
            self._save_best()
        final = files.records[-1]
        self.result = RunResult(
            status="diverged" if divergence is not None else "completed",
            best_val_acc=best.val_acc,
            test_acc=best.test_acc,
            best_epoch=best.epoch,
            final_train_acc=final["train_eval_acc"],
            final_test_acc=final["test_acc"],
            epochs_run=trainer.epoch,
            steps_run=trainer.step,
            diverged_step=None if divergence is None else divergence.step,
            reason=None if divergence is None else divergence.reason,
            wall_time=self.wall_time(),
            hash=cfg.hash,
            run_dir=str(cfg.out_dir),
        )
        files.write_result(self.result)
        files.path(RunFiles.RAW_PREDICTIONS).unlink(missing_ok=True)  # packed in predictions.npz
        self.close()
        return self.result

    @contextlib.contextmanager
    def running(self) -> Iterator[RunSession]:
        """While training: the progress bar (epochs) and, on CUDA, this run's cudnn flags (restored
        on the way out)."""
        bar = tqdm(
            total=self.config.total_epochs,
            initial=self.trainer.epoch,
            desc=f"run {self.config.hash[:8]}",
            unit="epoch",
            disable=self.config.quiet,
            dynamic_ncols=True,
        )
        with bar, _cudnn_flags(self.config, self.trainer.device):
            self._bar = bar
            try:
                yield self
            finally:
                self._bar = None


@dataclass
class _Best:
    """The validation-selected predictor so far."""

    val_acc: float = -1.0
    epoch: int = 0
    test_acc: float = float("nan")
    test_pred: np.ndarray | None = None
    model_state: dict[str, torch.Tensor] | None = None
    unsaved: bool = False  # best.pt does not hold model_state yet

    def offer(self, record: dict[str, Any], test_pred: np.ndarray, model: torch.nn.Module) -> bool:
        """Take the record (and a CPU copy of the model) if its validation accuracy beats the best;
        ties keep the earlier epoch."""
        if record["val_acc"] > self.val_acc:
            self.val_acc, self.epoch = record["val_acc"], record["epoch"]
            self.test_acc, self.test_pred = record["test_acc"], test_pred
            self.model_state = _cpu_state(model)
            self.unsaved = True
            return True
        return False


def _cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _stored_best_model(best: _Best, epoch: int) -> dict[str, torch.Tensor] | None:
    """The best model's state for last.pt; None when it is the checkpoint's own model (saves space)."""
    return None if best.epoch == epoch else best.model_state


def _check_run_folder(files: RunFiles, config: RunConfig, resume: bool | None) -> None:
    recorded = files.recorded_hash()
    if recorded is not None and recorded != config.hash:
        if change := _plugin_change(files, config):
            raise RunFolderError(
                f"{files.dir} holds a run of an older version of a plug-in ({change}); the edited "
                "plug-in makes another run: choose another out_dir (or restore the plug-in to "
                "resume or read this one)"
            )
        raise RunFolderError(
            f"{files.dir} holds a run of another config ({files.path('config.json')} records hash "
            f"{recorded}, this one is {config.hash}); choose another out_dir"
        )
    if resume is False and files.holds_run() and not _finished(files):
        raise RunFolderError(
            f"{files.dir} already holds an unfinished run; resume it (--resume) or choose another "
            "out_dir"
        )


def _plugin_change(files: RunFiles, config: RunConfig) -> str | None:
    """How the plug-in sources recorded in the folder's config.json differ from ``config``'s now,
    when the recorded config is otherwise this one; None otherwise."""
    try:
        payload = json.loads(files.path("config.json").read_text())
    except (OSError, ValueError):
        return None
    recorded = payload.get("config") if isinstance(payload, dict) else None
    if not isinstance(recorded, dict) or _numbers_fields(recorded) != _numbers_fields(
        config.to_dict()
    ):
        return None
    return plugin_change(payload, config.to_dict())


def _numbers_fields(values: dict[str, Any]) -> dict[str, Any]:
    """A config dict without the fields that change no number (:data:`.config.NON_HASHED_FIELDS`)."""
    return {k: v for k, v in values.items() if k not in NON_HASHED_FIELDS}


def _check_same_data(files: RunFiles, description: dict[str, Any], allow: bool) -> None:
    """Refuse to resume on another data set than the run started on, unless ``allow`` (then the new
    one is recorded in config.json, the old under ``data_before``)."""
    change = files.data_change(description)
    if change is None:
        return
    if not allow:
        raise DataChangedError(
            f"{files.dir} was trained on another data set than the one found now "
            f"({description.get('source')}): {change}; resume with the data copy it started on "
            "(data_dir), or pass allow_other_data=True (initmem train --allow-other-data) to go on "
            "with this one"
        )
    files.record_data(description)


def _finished(files: RunFiles) -> bool:
    """Whether the folder holds a trusted result (a damaged one reads as unfinished)."""
    try:
        return read_result(files.dir) is not None
    except DamagedFileError:
        return False


def _labels(split: ImageSplit) -> np.ndarray:
    return split.labels.cpu().numpy()


def _progress(record: dict[str, Any]) -> dict[str, str]:
    return {
        "loss": f"{record['train_loss']:.3f}",
        "acc": f"{record['train_acc']:.3f}",
        "val": f"{record['val_acc']:.3f}",
        "test": f"{record['test_acc']:.3f}",
    }


def _cudnn_flags(config: RunConfig, device: torch.device):
    """cudnn autotuning for this run only (restored afterwards); nothing to do on the CPU."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return torch.backends.cudnn.flags(
        enabled=True, benchmark=config.cudnn_benchmark, deterministic=False
    )


# ==================================================================================== the optimization
def pin_threads(config: RunConfig, recorded: int | None = None) -> RunConfig:
    """Fix this process's torch thread count for one run; return the config recording it.

    The count is ``config.threads`` when set, else ``recorded`` (the count of the run's first start,
    kept in ``last.pt``: a resumed run computes on the threads it started on), else the process's
    current count (what a sweep's backend gave its worker). On one machine a run's numbers depend
    on its thread count (the order of floating-point reductions), so a run that keeps it gives the
    same bits however often it was interrupted.
    """
    threads = config.threads or recorded or torch.get_num_threads()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return config if config.threads == threads else dataclasses.replace(config, threads=threads)


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA if available, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device = 'cuda' but CUDA is not available here (use 'auto' or 'cpu')")
    return torch.device(device)


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on CUDA, ``fp32`` on the CPU; ``fp32``, ``bf16`` and ``fp64`` as given."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


@dataclass
class EpochPlan:
    """One epoch's work: ``steps`` optimizer steps over ``batches`` (steps x batch_size training
    indices, on the device); ``losses`` collects each step's loss; ``first_step`` counts the steps
    done before it."""

    steps: int
    batches: torch.Tensor
    losses: torch.Tensor
    first_step: int


def training_loss(
    name: str, logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """The loss ``name`` (:data:`~.config.LOSSES`) of ``logits`` (B, K) against integer ``labels`` (B,),
    averaged (``"mean"``) or summed (``"sum"``) over the images.

    ``cross_entropy``: softmax cross-entropy. ``mse``: per image ``|f - e_y|^2 / (2 K)``, the squared
    error against the one-hot target over twice the number of classes, so the mean over images is
    ``theory/ntk.py``'s ``L = |f(X) - Y|^2 / (2 N)`` with ``N = n K`` the number of target entries
    (the lazy-regime results hold for this loss).
    """
    if name == "cross_entropy":
        return F.cross_entropy(logits, labels, reduction=reduction)
    if name != "mse":
        raise ValueError(f"loss must be one of ['cross_entropy', 'mse'] (got {name!r})")
    targets = F.one_hot(labels.long(), logits.shape[1]).to(logits.dtype)
    per_image = (logits - targets).square().mean(dim=1) / 2
    return per_image.mean() if reduction == "mean" else per_image.sum()


class Trainer:
    """The moving parts of one run: data on the device, model, optimizer, generators, the step and
    epoch counters and the statistics since the last evaluation (:attr:`interval`). It writes
    nothing: :class:`RunSession` keeps the run folder. Benchmarks may call :meth:`train_epoch`
    directly; ``empirical.packing`` drives its pieces (:meth:`start_epoch` ... :meth:`end_epoch`)."""

    def __init__(
        self, config: RunConfig, data: DataSplits | None = None, *, download: bool | None = None
    ):
        self.config = config
        self.device = resolve_device(config.device)
        self.data = (
            data if data is not None else shared_splits(config, self.device, download=download)
        )
        _check_data(self.data, config, self.device)
        precision = resolve_precision(config.precision, self.device)
        self.autocast_dtype = torch.bfloat16 if precision == "bf16" else None
        #: parameters, images and loss: float64 for ``fp64``, float32 otherwise (bf16 autocasts)
        self.dtype = torch.float64 if precision == "fp64" else torch.float32
        self.memory_format = (
            torch.channels_last if config.channels_last else torch.contiguous_format
        )

        self.model = build_model(config).to(self.device, memory_format=self.memory_format)
        if is_plugin(config.model):  # before the run folder is written: one error line, no folder
            check_plugin_model(self.model, config, self.data, self.memory_format)
        self.model.to(self.dtype)  # float64 for precision = "fp64" (the same initial values)
        self.forward = torch.compile(self.model) if config.compile else self.model
        # frozen parameters (requires_grad False) are not trained: no gradient, no optimizer state
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        if not named:
            total = sum(1 for _ in self.model.parameters())
            if total == 0:
                raise ValueError(f"model {config.model!r} has no parameters: nothing to train")
            raise ValueError(
                f"model {config.model!r} has no trainable parameter ({total} parameter tensors, all "
                "frozen: requires_grad False); unfreeze at least one"
            )
        self.frozen = [n for n, p in self.model.named_parameters() if not p.requires_grad]
        self.names = [name for name, _ in named]
        self.params = [p for _, p in named]
        self.scale_invariant = set(scale_invariant_parameters(self.model))
        if RESIDUAL_STREAM_LAYER in self.names:
            raise ValueError(
                f"model {config.model!r}: a parameter is named {RESIDUAL_STREAM_LAYER!r}, the layer "
                "logs' name of the joint residual-stream entry; rename it"
            )
        stream = set(residual_stream_parameters(self.model))
        #: indices and names of the trained parameters of the ``residual_stream`` group (jointly
        #: scale-invariant)
        self.joint_index = [i for i, n in enumerate(self.names) if n in stream]
        self.residual_stream = [self.names[i] for i in self.joint_index]
        #: layers whose angular update per step is logged: the scale-invariant conv weights
        self.angle_layers = [
            config.track_grad_norms and name in self.scale_invariant for name in self.names
        ]
        self.init_params = [p.detach().clone() for p in self.params]

        self.optimizer = build_optimizer(self.params, config)
        self.decoupled = (
            None
            if handles_decoupled_decay(config)
            else DecoupledDecay(self.params, config.weight_decay)
        )
        order_seed, augment_seed = np.random.SeedSequence(config.seed).generate_state(2)
        self.order_generator = torch.Generator().manual_seed(int(order_seed))
        self.augment_generator = torch.Generator(device=self.device).manual_seed(int(augment_seed))
        self.step = 0
        #: the schedule's multiplier of lr at every optimizer step (theory.schedule.lr_multipliers)
        self.lr_factors = config.lr_multipliers()
        self.epoch = 0
        self.interval = IntervalStats(self.params, self.angle_layers, self.joint_index)

    def describe_model(self) -> dict[str, Any]:
        """What ``config.json`` records of the model at init: its parameter count, and for each weight
        found scale-invariant the relative change of the output when it is scaled by 3 (the numeric
        check of :func:`~initmem.empirical.models.scale_invariance_check`; float64 rounding where the
        invariance holds), and the same for the ``residual_stream`` group scaled together and each
        member alone (:func:`~initmem.empirical.models.residual_stream_check`). A weight, or the
        group, that fails the check is named in a warning."""
        names = [n for n in self.names if n in self.scale_invariant]
        changes = scale_invariance_check(self.model, names)
        failed = [n for n, change in changes.items() if not change <= INVARIANCE_RTOL]
        if failed:
            warnings.warn(
                f"{self.config.model}: weights found scale-invariant change the output when scaled "
                f"by 3 (relative change above {INVARIANCE_RTOL:g}): {failed}",
                stacklevel=2,
            )
        stream = residual_stream_check(self.model, self.residual_stream)
        if stream and not stream[JOINT] <= INVARIANCE_RTOL:
            warnings.warn(
                f"{self.config.model}: the residual_stream group changes the output when scaled by "
                f"3 together (relative change {stream[JOINT]:.3g} > {INVARIANCE_RTOL:g})",
                stacklevel=2,
            )
        return {
            "parameters": sum(p.numel() for p in self.params),
            "frozen_parameters": sum(p.numel() for p in self.model.parameters())
            - sum(p.numel() for p in self.params),
            "parameter_groups": group_sizes(self.model),
            "scale_invariant": changes,
            "residual_stream": stream,
        }

    # ------------------------------------------------------------------ training
    def current_lr(self) -> float:
        """The learning rate of the last step taken (of the first step before any)."""
        return self.config.lr * float(self.lr_factors[max(self.step - 1, 0)])

    def train_epoch(self) -> Divergence | None:
        """One pass over the training split (fewer steps in a final partial epoch of a step-length run).
        Returns a :class:`Divergence` if the run must stop, else None."""
        plan = self.start_epoch()
        for i in range(plan.steps):
            lr = self.next_lr()
            loss, correct = self._train_step(plan.batches[i], lr)
            divergence = self.record_step(plan, i, loss, correct)
            if divergence is not None:
                return divergence
        self.end_epoch(plan)
        return None

    # The pieces of an epoch, also driven in lock step for several runs by empirical.packing.
    def start_epoch(self) -> EpochPlan:
        """This epoch's batches (a seeded permutation of the training split) and loss buffer."""
        cfg = self.config
        steps = min(cfg.steps_per_epoch, cfg.total_steps - self.step)
        order = torch.randperm(len(self.data.train), generator=self.order_generator)
        batches = order[: steps * cfg.batch_size].view(steps, cfg.batch_size).to(self.device)
        self.model.train()
        losses = torch.zeros(steps, dtype=self.dtype, device=self.device)
        return EpochPlan(steps, batches, losses, self.step)

    def next_lr(self) -> float:
        """The learning rate of the next step (the schedule at ``self.step``)."""
        return self.config.lr * float(self.lr_factors[self.step])

    def next_batch(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Images (augmented, in the run's memory format) and labels of the training indices ``batch``."""
        images = self.data.train.images.index_select(0, batch)  # 8x faster than [batch] on a CPU
        labels = self.data.train.labels.index_select(0, batch)
        if self.config.augment:
            images = augment_batch(images, self.augment_generator)
        return images.to(self.dtype).contiguous(memory_format=self.memory_format), labels

    def record_step(
        self, plan: EpochPlan, i: int, loss: torch.Tensor, correct: torch.Tensor
    ) -> Divergence | None:
        """Count step ``i`` of ``plan`` (its loss and correct predictions); every
        ``DIVERGENCE_CHECK_EVERY`` steps and at the epoch's end, check for divergence."""
        plan.losses[i] = loss
        self.interval.correct += correct
        self.step += 1
        if (i + 1) % DIVERGENCE_CHECK_EVERY == 0 or i == plan.steps - 1:
            return self._check_divergence(plan.losses[: i + 1], plan.first_step)
        return None

    def end_epoch(self, plan: EpochPlan) -> None:
        self.interval.add_epoch(plan.losses, plan.steps * self.config.batch_size)
        self.epoch += 1

    def _train_step(self, batch: torch.Tensor, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = self.next_batch(batch)
        with self._autocast():
            logits = self.forward(images)
        loss = training_loss(self.config.loss, logits.to(self.dtype), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.apply_gradients(lr)
        correct = (logits.detach().argmax(dim=1) == labels).sum()
        return loss.detach(), correct

    def apply_gradients(self, lr: float) -> None:
        """The update from the loss gradients in ``param.grad``: the step's statistics, coupled L2,
        decoupled decay and the optimizer step, at learning rate ``lr``."""
        cfg = self.config
        set_lr(self.optimizer, lr)
        # a parameter the loss does not reach has no gradient: count it as zero (torch's optimizers
        # skip it)
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in self.params]
        decay = 1.0 - lr * (cfg.l2 + cfg.weight_decay)
        self.interval.add_step(grads if cfg.track_grad_norms else None, lr, decay, self.params)
        if not handles_coupled_l2(cfg):
            add_coupled_l2(self.params, grads, cfg.l2)
        if self.decoupled is not None:
            self.decoupled.before_step(lr)
        self.optimizer.step()
        if self.decoupled is not None:
            self.decoupled.after_step()
        if cfg.track_grad_norms and cfg.optimizer != "sgd":
            self.interval.add_preconditioned(grads, self.optimizer)
        contraction = update_contraction(
            lr,
            optimizer=cfg.optimizer,
            momentum=cfg.momentum,
            l2=cfg.l2,
            weight_decay=cfg.weight_decay,
        )
        self.interval.add_angles(self.params, lr, contraction, int(cfg.optimizer == "sgd"))

    def _check_divergence(self, losses: torch.Tensor, first_step: int) -> Divergence | None:
        finite = torch.isfinite(losses)
        if not bool(finite.all()):
            bad = int((~finite).nonzero()[0, 0])
            value = float(losses[bad])
            return Divergence(
                first_step + bad, f"non-finite training loss ({value}) at step {first_step + bad}"
            )
        norm = self.total_weight_norm()
        if not norm <= self.config.max_weight_norm:
            return Divergence(
                self.step,
                f"weight norm {norm:.4g} exceeds max_weight_norm {self.config.max_weight_norm:.4g} "
                f"after {self.step} steps",
            )
        return None

    def total_weight_norm(self) -> float:
        with torch.no_grad():
            return float(torch.stack(torch._foreach_norm(self.params)).double().norm())

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate_split(self, split: ImageSplit) -> tuple[float, float, np.ndarray]:
        """(mean loss: the run's ``loss``, accuracy, predicted labels int16) on ``split`` in eval mode."""
        self.model.eval()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        cfg_loss = self.config.loss
        preds = []
        for start in range(0, len(split), self.config.eval_batch_size):
            images = split.images[start : start + self.config.eval_batch_size]
            images = images.to(self.dtype).contiguous(memory_format=self.memory_format)
            labels = split.labels[start : start + self.config.eval_batch_size]
            with self._autocast():
                logits = self.forward(images)
            loss_sum += training_loss(
                cfg_loss, logits.to(self.dtype), labels, reduction="sum"
            ).double()
            preds.append(logits.argmax(dim=1))
        self.model.train()
        pred = torch.cat(preds)
        accuracy = float((pred == split.labels).double().mean())
        return float(loss_sum) / len(split), accuracy, pred.to(torch.int16).cpu().numpy()

    def evaluate(self, wall_time: float) -> tuple[dict[str, Any], np.ndarray]:
        """One log record (docs/run-format.md) and the test predictions; starts a new interval."""
        cfg, interval = self.config, self.interval
        val_loss, val_acc, _ = self.evaluate_split(self.data.val)
        test_loss, test_acc, test_pred = self.evaluate_split(self.data.test)
        _, train_eval_acc, _ = self.evaluate_split(self.data.train)
        lr = self.current_lr()
        trained = interval.images_seen > 0
        with torch.no_grad():
            norms = torch.stack(torch._foreach_norm(self.params)).double()
            dist = torch.stack(
                torch._foreach_norm(torch._foreach_sub(self.params, self.init_params))
            )
        norms, dist = (t.double().cpu().numpy() for t in (norms, dist))
        since = interval.layer_fields(self.params)
        nan = float("nan")
        layers = {}
        for i, (name, param) in enumerate(zip(self.names, self.params, strict=True)):
            layers[name] = {
                "numel": param.numel(),
                "scale_invariant": name in self.scale_invariant,
                "weight_norm": float(norms[i]),
                "eff_lr": lr / float(norms[i]) ** 2 if norms[i] > 0 else nan,
                "dist_from_init": float(dist[i]),
                **since[i],
            }
        if self.joint_index:
            layers[RESIDUAL_STREAM_LAYER] = self._joint_layer(norms, dist, since, lr)
        record = {
            "epoch": self.epoch,
            "step": self.step,
            "lr": lr,
            "weight_decay": cfg.weight_decay,
            "l2": cfg.l2,
            "train_loss": float(interval.loss_sum) / (interval.images_seen / cfg.batch_size)
            if trained
            else nan,
            "train_acc": float(interval.correct) / interval.images_seen if trained else nan,
            "train_eval_acc": train_eval_acc,
            "val_loss": val_loss,
            "val_acc": val_acc,
            "test_loss": test_loss,
            "test_acc": test_acc,
            "weight_norm": float(np.sqrt((norms**2).sum())),
            "dist_from_init": float(np.sqrt((dist**2).sum())),
            "norm_sq_decay": interval.norm_sq_decay if trained else nan,
            "wall_time": wall_time,
            "layers": layers,
        }
        self.interval = IntervalStats(self.params, self.angle_layers, self.joint_index)
        return record, test_pred

    def _joint_layer(self, norms, dist, since, lr: float) -> dict[str, Any]:
        """The layer logs' entry of the ``residual_stream`` group as one layer: its norms are the
        joint norms over the group's tensors (``|w|^2`` summed), its gradient sums summed, ``G`` the
        joint one (:meth:`IntervalStats.joint_fields`)."""
        index = self.joint_index
        norm_sq = float((norms[index] ** 2).sum())
        return {
            "numel": sum(self.params[i].numel() for i in index),
            "scale_invariant": False,  # jointly, not per tensor: per-layer laws must not take it
            "weight_norm": math.sqrt(norm_sq),
            "eff_lr": lr / norm_sq if norm_sq > 0 else float("nan"),
            "dist_from_init": float(np.sqrt((dist[index] ** 2).sum())),
            **self.interval.joint_fields(since),
        }

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything that the next step depends on (the interval statistics included). Tensors are
        the trainer's own: a packed run's parameters, views of the pack's stack, are copied."""
        return {
            "model": {k: _own_storage(v) for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "order_generator": self.order_generator.get_state(),
            "augment_generator": self.augment_generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "interval": self.interval.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = state["step"]
        self.epoch = state["epoch"]
        self.order_generator.set_state(state["order_generator"])
        self.augment_generator.set_state(state["augment_generator"])
        torch.set_rng_state(state["torch_rng"])
        self.interval.load_state_dict(state["interval"], self.params)


def check_plugin_model(
    model: torch.nn.Module,
    config: RunConfig,
    data: DataSplits,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> None:
    """A plug-in model's contract, checked on two training images before anything is written:
    float32 parameters, and logits of shape ``(batch, classes)`` with at least one output per class
    of the data (more: a warning, the extra outputs are never a label). :class:`PluginError` names
    the model and what is wrong."""
    where = f"model = {config.model!r}"
    if other := sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32}):
        raise PluginError(
            f"{where}: parameters must be float32 (found {', '.join(other)}); drop .double() / "
            "dtype= from the model (precision = 'bf16' trains in bfloat16 by autocast)"
        )
    classes = len(data.classes)
    images = data.train.images[:2].contiguous(memory_format=memory_format)
    was_training = model.training
    model.eval()  # no BatchNorm statistics updated, no dropout drawn: the run's numbers stay as they are
    try:
        with torch.no_grad():
            logits = model(images)
    except Exception as err:  # noqa: BLE001 - any failure of the user's forward: one line
        raise PluginError(
            f"{where}: its forward fails on a batch of images {tuple(images.shape)} "
            f"({type(err).__name__}: {' '.join(str(err).split())[:200]})"
        ) from None
    finally:
        model.train(was_training)
    shape = tuple(getattr(logits, "shape", ()))
    if not isinstance(logits, torch.Tensor) or len(shape) != 2 or shape[0] != len(images):
        raise PluginError(
            f"{where}: must return logits of shape (batch, classes) = ({len(images)}, {classes}) "
            f"for images {tuple(images.shape)} (got {type(logits).__name__} {shape})"
        )
    if shape[1] < classes:
        raise PluginError(
            f"{where}: returns {shape[1]} outputs, fewer than the {classes} classes of dataset "
            f"{config.dataset!r}"
        )
    if shape[1] > classes:
        warnings.warn(
            f"{where}: returns {shape[1]} outputs for the {classes} classes of dataset "
            f"{config.dataset!r}; the extra {shape[1] - classes} are never a label",
            stacklevel=3,
        )


def _check_data(data: DataSplits, config: RunConfig, device: torch.device) -> None:
    expected = (config.resolved_train_size, config.resolved_val_size)
    found = (len(data.train), len(data.val))
    if data.dataset != config.dataset or found != expected:
        raise ValueError(
            f"data holds {data.dataset} with train/val sizes {found}; the config asks for "
            f"{config.dataset} with {expected}"
        )
    if data.train.images.device.type != device.type:
        raise ValueError(f"data lives on {data.train.images.device}, the run on {device}")


def _own_storage(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or a copy of it when it is a view into a larger storage (saved alone)."""
    return tensor if tensor.untyped_storage().nbytes() == tensor.nbytes else tensor.clone()


# ==================================================================================== per-step statistics
#: Per-layer keys the joint group's entry does not measure (per-tensor angles and update forms).
_NOT_MEASURED_JOINTLY = (
    "update_sq_unit_sum",
    "update_radial_unit_sum",
    "angular_update",
    "filter_angular_update",
)


class IntervalStats:
    """What the log reports about the optimizer steps since the last evaluation (docs/run-format.md):
    the training loss and accuracy, and per layer the gradient sums, the discounted drift of the
    squared norm, the decay product and the weights at the interval's start.

    The one place for per-step, per-layer statistics: a new one is accumulated in :meth:`add_step`,
    reported by :meth:`layer_fields` and carried across a resume by :meth:`state_dict`.
    """

    def __init__(
        self,
        params: list[torch.Tensor],
        angles: list[bool] | None = None,
        joint: list[int] | None = None,
    ):
        """``angles``: per layer, whether to measure its angular update per step (scale-invariant
        conv weights; one filter is a row of ``weight.reshape(out_channels, -1)``). ``joint``: the
        layers of the ``residual_stream`` group, whose joint ``G`` is summed too."""
        n, device = len(params), params[0].device
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)
        self.images_seen = 0
        self.tracked_steps = 0
        self.grad_sq_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.lr_sq_grad_sq_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.grad_sq_unit_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.joint = torch.tensor(joint or [], dtype=torch.long, device=device)
        self.joint_grad_sq_unit_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.precond_grad_sq_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.precond_steps = 0
        self.update_sq_unit_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.update_radial_unit_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.norm_sq_drift = torch.zeros(n, dtype=torch.float64, device=device)
        self.norm_sq_decay = 1.0
        self.start = [p.detach().clone() for p in params]
        self.angle_layers = [i for i, on in enumerate(angles or []) if on]
        self.angle_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.filter_angle_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.angle_steps = 0
        # the weights before the next step (== the current weights between steps: never stored)
        self.previous = [params[i].detach().clone() for i in self.angle_layers]

    def add_step(
        self,
        grads: list[torch.Tensor] | None,
        lr: float,
        decay: float,
        params: list[torch.Tensor] | None = None,
    ) -> None:
        """One optimizer step at learning rate ``lr`` with decay factor ``decay`` = c_t =
        1 - lr_t (l2 + weight_decay): the decay product of the squared norm, and (when ``grads``,
        the loss gradients before L2, are given) per layer |g_t|^2 into the sums and the discounted
        drift ``d <- c_t^2 d + lr_t^2 |g_t|^2``; with ``params`` (the weights before the step) also
        the gradient scale ``|g_t|^2 |w_t|^2`` (``G_t``: for a scale-invariant weight a function of its
        direction and of the other parameters, the BN gains and the head that alpha may scale too;
        ``theory.normalized`` (1)), and for the joint group ``(sum |g_i|^2) (sum |w_i|^2)`` over its
        tensors (the same identity for the concatenated vector, jointly scale-invariant)."""
        self.norm_sq_decay *= decay * decay
        if grads is None:
            return
        grad_sq = torch.stack(torch._foreach_norm(grads)).double().square()
        self.grad_sq_sum += grad_sq
        if params is not None:
            with torch.no_grad():
                norm_sq = torch.stack(torch._foreach_norm(params)).double().square()
            self.grad_sq_unit_sum += grad_sq * norm_sq
            if len(self.joint):
                self.joint_grad_sq_unit_sum += grad_sq[self.joint].sum() * norm_sq[self.joint].sum()
        self.lr_sq_grad_sq_sum += lr * lr * grad_sq
        self.norm_sq_drift.mul_(decay * decay).add_(grad_sq, alpha=lr * lr)
        self.tracked_steps += 1

    def add_preconditioned(self, grads: list[torch.Tensor], optimizer) -> None:
        """After an Adam / AdamW / RMSprop step: per layer ``sum_i (g_i / (sqrt(v_hat_i) + eps))^2``
        (the squared preconditioned gradient, the ``|w|^2`` injection of the adaptive norm law,
        ``theory.normalized``: ``E delta|w|^2 = lr^2 sum_i g_i^2 / v_i``), from the optimizer's
        second moment after the step (Adam's bias-corrected ``v_hat``; RMSprop's ``square_avg``)."""
        group = optimizer.param_groups[0]
        eps = group["eps"]
        values = []
        with torch.no_grad():
            for p, g in zip(group["params"], grads, strict=True):
                state = optimizer.state.get(p, {})
                if g is None or not state:
                    values.append(torch.zeros((), dtype=torch.float64, device=p.device))
                    continue
                if "exp_avg_sq" in state:
                    beta2 = group["betas"][1]
                    step = float(state["step"])
                    v = state["exp_avg_sq"] / (1.0 - beta2**step)
                else:
                    v = state["square_avg"]
                values.append((g.double() / (v.double().sqrt() + eps)).square().sum())
        self.precond_grad_sq_sum += torch.stack(values)
        self.precond_steps += 1

    def add_angles(
        self, params: list[torch.Tensor], lr: float = 0.0, decay: float = 1.0, power: int = 1
    ) -> None:
        """After a step: per measured layer the angle between its weights before and after the
        step, whole tensor and per filter (mean over filters), added to the interval's sums
        (``theory.normalized.angular_update``'s cancellation-free form, float64). With ``lr`` > 0
        also the update form of the step, ``w' = decay w - lr u``: ``|u|^2 |w|^(2 power)`` and
        ``<w, u> |w|^(power - 1)``, free of the weight's scale for an update that scales as
        ``|w|^-power`` (SGD's gradient: power 1; an adaptive update: power 0)."""
        if not self.angle_layers:
            return
        with torch.no_grad():
            whole, per_filter, unit_sq, radial = [], [], [], []
            for k, i in enumerate(self.angle_layers):
                after = params[i].detach()
                a = self.previous[k].reshape(after.shape[0], -1).double()
                if lr > 0:
                    u = (decay * a - after.reshape(a.shape).double()) / lr
                    norm_sq = (a * a).sum()
                    unit_sq.append((u * u).sum() * norm_sq**power)
                    radial.append((a * u).sum() * norm_sq ** ((power - 1) / 2))
                d = after.reshape(after.shape[0], -1).double() - a
                aa, dd, ad = (a * a).sum(1), (d * d).sum(1), (a * d).sum(1)
                cross = (aa * dd - ad * ad).clamp_min(0.0).sqrt()
                per_filter.append(torch.atan2(cross, aa + ad).mean())
                whole_cross = (aa.sum() * dd.sum() - ad.sum() ** 2).clamp_min(0.0).sqrt()
                whole.append(torch.atan2(whole_cross, aa.sum() + ad.sum()))
                self.previous[k].copy_(after)
            index = torch.tensor(self.angle_layers, device=self.angle_sum.device)
            self.angle_sum.index_add_(0, index, torch.stack(whole))
            self.filter_angle_sum.index_add_(0, index, torch.stack(per_filter))
            if unit_sq:
                self.update_sq_unit_sum.index_add_(0, index, torch.stack(unit_sq))
                self.update_radial_unit_sum.index_add_(0, index, torch.stack(radial))
        self.angle_steps += 1

    def add_epoch(self, losses: torch.Tensor, images: int) -> None:
        """An epoch's step losses (their sum) and the number of training images it saw."""
        self.loss_sum += losses.double().sum()
        self.images_seen += images

    def layer_fields(self, params: list[torch.Tensor]) -> list[dict[str, float]]:
        """Per layer (in the order of ``params``, the current weights): ``update_norm`` (distance
        from the interval's start), ``grad_norm`` (RMS over the tracked steps), ``grad_sq_sum``,
        ``lr_sq_grad_sq_sum``, ``norm_sq_drift``, ``grad_sq_unit_sum``, ``precond_grad_sq_sum`` (adaptive
        optimizers); NaN where no step was trained (tracked)."""
        with torch.no_grad():
            update = torch.stack(torch._foreach_norm(torch._foreach_sub(params, self.start)))
        update = update.double().cpu().numpy()
        trained, tracked = self.images_seen > 0, self.tracked_steps > 0
        grad_sq = self.grad_sq_sum.cpu().numpy()
        lr_sq_grad_sq = self.lr_sq_grad_sq_sum.cpu().numpy()
        drift = self.norm_sq_drift.cpu().numpy()
        grad_sq_unit = self.grad_sq_unit_sum.cpu().numpy()
        precond = self.precond_grad_sq_sum.cpu().numpy()
        preconditioned = self.precond_steps > 0
        update_sq = self.update_sq_unit_sum.cpu().numpy()
        update_radial = self.update_radial_unit_sum.cpu().numpy()
        nan = float("nan")
        steps = self.angle_steps
        angle = (self.angle_sum / max(steps, 1)).cpu().numpy()
        filter_angle = (self.filter_angle_sum / max(steps, 1)).cpu().numpy()
        measured = set(self.angle_layers) if steps else set()
        return [
            {
                "update_norm": float(update[i]) if trained else nan,
                "grad_norm": math.sqrt(grad_sq[i] / self.tracked_steps) if tracked else nan,
                "grad_sq_sum": float(grad_sq[i]) if tracked else nan,
                "lr_sq_grad_sq_sum": float(lr_sq_grad_sq[i]) if tracked else nan,
                "norm_sq_drift": float(drift[i]) if tracked else nan,
                "grad_sq_unit_sum": float(grad_sq_unit[i]) if tracked else nan,
                "precond_grad_sq_sum": float(precond[i]) if preconditioned else nan,
                "update_sq_unit_sum": float(update_sq[i]) if i in measured else nan,
                "update_radial_unit_sum": float(update_radial[i]) if i in measured else nan,
                "angular_update": float(angle[i]) if i in measured else nan,
                "filter_angular_update": float(filter_angle[i]) if i in measured else nan,
            }
            for i in range(len(params))
        ]

    def joint_fields(self, since: list[dict[str, float]]) -> dict[str, float]:
        """The joint group's entries of :meth:`layer_fields` (``since``: its per-layer output): the
        update norm as the joint vector's, the gradient sums, drift and preconditioned sums summed
        over the group's tensors (each is a sum of squares), ``grad_norm`` the joint RMS,
        ``grad_sq_unit_sum`` the joint ``G``; the angles and update forms not measured (NaN)."""
        nan = float("nan")
        rows = [since[i] for i in self.joint.tolist()]

        def total(key: str) -> float:
            return float(sum(row[key] for row in rows))

        tracked = self.tracked_steps > 0
        return {
            "update_norm": math.sqrt(sum(row["update_norm"] ** 2 for row in rows)),
            "grad_norm": math.sqrt(total("grad_sq_sum") / self.tracked_steps) if tracked else nan,
            "grad_sq_sum": total("grad_sq_sum"),
            "lr_sq_grad_sq_sum": total("lr_sq_grad_sq_sum"),
            "norm_sq_drift": total("norm_sq_drift"),
            "grad_sq_unit_sum": float(self.joint_grad_sq_unit_sum) if tracked else nan,
            "precond_grad_sq_sum": total("precond_grad_sq_sum"),
            **dict.fromkeys(_NOT_MEASURED_JOINTLY, nan),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "loss_sum": self.loss_sum,
            "correct": self.correct,
            "images_seen": self.images_seen,
            "tracked_steps": self.tracked_steps,
            "grad_sq_sum": self.grad_sq_sum,
            "lr_sq_grad_sq_sum": self.lr_sq_grad_sq_sum,
            "norm_sq_drift": self.norm_sq_drift,
            "grad_sq_unit_sum": self.grad_sq_unit_sum,
            "joint_grad_sq_unit_sum": self.joint_grad_sq_unit_sum,
            "precond_grad_sq_sum": self.precond_grad_sq_sum,
            "precond_steps": self.precond_steps,
            "update_sq_unit_sum": self.update_sq_unit_sum,
            "update_radial_unit_sum": self.update_radial_unit_sum,
            "norm_sq_decay": self.norm_sq_decay,
            "angle_sum": self.angle_sum,
            "filter_angle_sum": self.filter_angle_sum,
            "angle_steps": self.angle_steps,
            # right after an evaluation the interval starts at the current weights: not stored
            "interval_start": self.start if self.images_seen else None,
        }

    def load_state_dict(self, state: dict[str, Any], params: list[torch.Tensor]) -> None:
        """Restore from :meth:`state_dict`; ``params``: the current weights (the interval's start
        when the state has none)."""
        device = self.loss_sum.device
        for key in ("images_seen", "tracked_steps", "norm_sq_decay"):
            setattr(self, key, state[key])
        if "angle_sum" in state:  # checkpoints written before the angular update was logged lack it
            self.angle_steps = state["angle_steps"]
            self.angle_sum = state["angle_sum"].to(device)
            self.filter_angle_sum = state["filter_angle_sum"].to(device)
        self.previous = [params[i].detach().clone() for i in self.angle_layers]
        for key in ("loss_sum", "correct", "grad_sq_sum", "lr_sq_grad_sq_sum", "norm_sq_drift"):
            setattr(self, key, state[key].to(device))
        if "grad_sq_unit_sum" in state:  # checkpoints written before G was logged lack it
            self.grad_sq_unit_sum = state["grad_sq_unit_sum"].to(device)
            self.precond_grad_sq_sum = state["precond_grad_sq_sum"].to(device)
            self.precond_steps = state["precond_steps"]
            self.update_sq_unit_sum = state["update_sq_unit_sum"].to(device)
            self.update_radial_unit_sum = state["update_radial_unit_sum"].to(device)
        if "joint_grad_sq_unit_sum" in state:  # checkpoints before the joint group lack it
            self.joint_grad_sq_unit_sum = state["joint_grad_sq_unit_sum"].to(device)
        start = state["interval_start"]
        self.start = (
            [p.detach().clone() for p in params] if start is None else [t.to(device) for t in start]
        )


__all__ = [
    "DIVERGENCE_CHECK_EVERY",
    "DataChangedError",
    "Divergence",
    "EpochPlan",
    "IntervalStats",
    "RunFolderError",
    "RunSession",
    "Trainer",
    "resolve_device",
    "resolve_precision",
    "train",
]
