"""Run configuration: one dataclass, loaded from TOML plus ``key=value`` overrides, validated before work.

A :class:`RunConfig` fully describes one training run. Its :attr:`RunConfig.hash` is a content hash of
the fields that change the numbers (paths and presentation are left out), so a sweep can key runs by it.

Example::

    cfg = RunConfig.from_file("run.toml", ["alpha=0.5", "optimizer=adam"])
    cfg.validate()  # raises ConfigError naming the field and its allowed range
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .plugins import PLUGIN_PATTERN
from .provenance import plugin_sources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DATASETS = ("cifar10", "fashion-mnist", "cifar10-fixture", "synthetic")
MODELS = ("resnet9", "resnet18", "vit-tiny", "mlp-mixer", "nf-resnet", "mlp", "mlp-ln")
OPTIMIZERS = ("sgd", "adam", "adamw", "rmsprop")
SCHEDULES = ("constant", "step", "cosine")
ALPHA_GROUPS = ("all", "conv", "scale_invariant", "residual_stream", "norm", "bn", "head")
#: The layer logs' name of the ``residual_stream`` group's joint entry: one "layer" whose norms are
#: the joint norms over the group's tensors (docs/run-format.md).
RESIDUAL_STREAM_LAYER = "residual_stream"
DEVICES = ("auto", "cpu", "cuda")
#: Training losses: softmax cross-entropy on the labels, or the squared error of the logits against
#: one-hot targets (mean over classes and images: the lazy / NTK setting of ``theory/ntk.py``).
LOSSES = ("cross_entropy", "mse")
#: Fields holding keyword arguments for a plug-in (``model_args.depth = 4``: ``function(config,
#: depth=4)``): tables of TOML values, part of the run's identity (hashed).
ARGS_FIELDS = ("model_args", "dataset_args")
#: Fields added after run hashes were published, with their defaults: left out of the content hash
#: while they hold them, so every run hashed before they existed keeps its hash.
HASH_DEFAULTS: dict[str, Any] = {"model_args": {}, "dataset_args": {}, "loss": "cross_entropy"}
PRECISIONS = ("auto", "fp32", "bf16", "fp64")

#: Images in each data set's official training set (before the train/validation split).
TRAIN_POOL_SIZES = {
    "cifar10": 50_000,
    "fashion-mnist": 60_000,
    "cifar10-fixture": 20,
    "synthetic": 50_000,
}
#: Images in each data set's official test set (``test_size`` picks a subset).
TEST_POOL_SIZES = {
    "cifar10": 10_000,
    "fashion-mnist": 10_000,
    "cifar10-fixture": 20,
    "synthetic": 10_000,
}
#: Fraction of the official training set held out for validation when ``val_size`` is not given
#: (the paper's 40,000 / 10,000 split of CIFAR-10).
DEFAULT_VAL_FRACTION = 0.2

#: Fields that do not change a run's numbers: left out of the content hash.
NON_HASHED_FIELDS = (
    "out_dir",
    "data_dir",
    "quiet",
    "checkpoint_every",
    "eval_batch_size",
    "threads",
    "allow_empty_alpha_groups",
)
#: Seeds (``seed``, ``split_seed``) lie in ``0 <= seed < SEED_LIMIT`` (what every RNG we seed accepts).
SEED_LIMIT = 2**32
#: Names from other libraries that users write for a field: ``{alias: explanation}`` (did-you-mean).
FIELD_ALIASES = {
    "learning_rate": "'lr'",
    "bs": "'batch_size'",
    "wd": "'l2' (coupled: torch SGD's weight_decay, added to the gradient) or 'weight_decay' "
    "(decoupled: w <- w - lr * weight_decay * w, as AdamW)",
}
FIELD_ALIASES["batchsize"] = FIELD_ALIASES["bs"]
FIELD_ALIASES["lr_rate"] = FIELD_ALIASES["learning_rate"]


class ConfigError(ValueError):
    """A configuration value is unknown or out of its allowed range; the message names the field."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one training run. Lengths are in epochs unless the name says steps.

    Data: ``dataset`` in :data:`DATASETS`, a plug-in ``package.module:function`` or
    ``torchvision:NAME`` (a local copy under ``data_dir``, which it requires); ``data_dir`` where to
    look (None: the defaults);
    ``train_size`` a subset of the training split (None: all of it); ``val_size`` images held out of the
    official training set for validation (None: 20%); ``test_size`` a subset of the official test set
    (None: all); ``split_seed`` fixes the train/validation split and the subsets.

    Model: ``model`` in :data:`MODELS`, ``width`` channel multiplier (1.0 = the published widths),
    ``alpha`` the init scale multiplying the default PyTorch init of the parameter groups in
    ``alpha_groups`` (any of :data:`ALPHA_GROUPS`).

    Optimizer: ``optimizer`` in :data:`OPTIMIZERS`, ``lr``, ``momentum`` (heavy ball, SGD; also RMSprop's
    momentum), ``nesterov``, ``l2`` coupled L2 added to the gradient (``torch.optim`` ``weight_decay`` of
    SGD/Adam/RMSprop), ``weight_decay`` decoupled decay (w <- w - lr * weight_decay * w, as AdamW),
    ``betas`` and ``eps`` for Adam-family and RMSprop (``betas[1]`` is RMSprop's smoothing constant).

    Schedule: ``schedule`` in :data:`SCHEDULES` over the whole run, ``warmup_epochs`` of linear warmup,
    ``milestone_epochs`` (epochs from the start of the run) and ``step_gamma`` for the step schedule. Length: ``epochs``, or
    ``steps`` (optimizer steps; overrides ``epochs`` when set). One epoch is ``train_size // batch_size``
    steps (the last partial batch is dropped).

    Training loop: ``augment`` (random crop with 4-pixel padding + horizontal flip, on the device),
    ``eval_every`` and ``checkpoint_every`` (epochs), ``eval_batch_size``, ``track_grad_norms`` (per-layer
    per-step gradient norms for the norm laws), ``save_predictions`` (per-evaluation test predictions),
    ``max_weight_norm`` (a larger total weight norm counts as divergence).

    Device: ``device`` in :data:`DEVICES`; ``precision`` in :data:`PRECISIONS` ("auto": bf16 autocast on
    CUDA, fp32 on the CPU; "fp64": float64 parameters, images and loss, for the tests' comparisons of
    two computations of one run); ``channels_last``; ``compile`` (torch.compile); ``cudnn_benchmark``;
    ``threads`` the run's CPU thread count (torch's intra-op threads; None: the count at the run's
    first start, recorded in config.json and last.pt and kept on resume, which a sweep worker gets as
    cpus // workers). Not hashed: on one machine the same thread count gives the same bits, and
    ``threads`` fixes it.

    Output: ``out_dir`` the run folder; ``quiet`` no progress bar.

    Checks: ``allow_empty_alpha_groups`` lets a group of ``alpha_groups`` hold no parameter of the
    model (alpha then does nothing there); by default that is an error naming the group and the
    model (:func:`~.models.build_model`). Not hashed.

    Plug-in arguments and loss: ``dataset_args`` / ``model_args`` keyword arguments passed to a plug-in
    data set / model (``function(config, **model_args)``; tables of TOML values; ``model_args.depth=4``
    on the command line); ``loss`` in :data:`LOSSES` (``"mse"``: squared error against one-hot
    targets). Hashed, except while they hold their defaults (:data:`HASH_DEFAULTS`).
    """

    dataset: str = "fashion-mnist"
    data_dir: str | None = None
    train_size: int | None = None
    val_size: int | None = None
    test_size: int | None = None
    split_seed: int = 0
    dataset_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    model: str = "resnet9"
    width: float = 1.0
    alpha: float = 1.0
    alpha_groups: tuple[str, ...] = ("all",)
    model_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    optimizer: str = "sgd"
    lr: float = 1e-3
    momentum: float = 0.0
    nesterov: bool = False
    l2: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    loss: str = "cross_entropy"
    batch_size: int = 128
    epochs: int = 10
    steps: int | None = None
    schedule: str = "constant"
    warmup_epochs: float = 0.0
    milestone_epochs: tuple[int, ...] = ()
    step_gamma: float = 0.1
    augment: bool = True
    seed: int = 0
    eval_every: int = 1
    checkpoint_every: int = 1
    eval_batch_size: int = 256
    track_grad_norms: bool = True
    save_predictions: bool = True
    max_weight_norm: float = 1e6
    device: str = "auto"
    precision: str = "auto"
    channels_last: bool = True
    compile: bool = False
    cudnn_benchmark: bool = True
    threads: int | None = None
    out_dir: str = "runs/run"
    quiet: bool = False
    # ---- reliability (issue 37): not hashed, it changes no number
    allow_empty_alpha_groups: bool = False

    # ---------------------------------------------------------------- construction
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(_fields(cls))

    @classmethod
    def from_dict(cls, values: dict[str, Any], *, validate: bool = True) -> RunConfig:
        """Build from a plain mapping (e.g. parsed TOML); unknown keys and bad types raise ConfigError."""
        known = _fields(cls)
        kwargs = {}
        for key, value in fold_dotted_args(values).items():
            if key not in known:
                raise ConfigError(unknown_field_message(key))
            kwargs[key] = _coerce(key, known[key].type, value)
        cfg = cls(**kwargs)
        if validate:
            cfg.validate()
        return cfg

    @classmethod
    def from_file(
        cls, path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
    ) -> RunConfig:
        """Load a TOML file (top-level keys are fields; None: defaults), then apply ``key=value`` overrides."""
        values = load_toml(path) if path is not None else {}
        values.update(parse_overrides(overrides))
        return cls.from_dict(values)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with some fields changed, coerced and validated."""
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (tuples become lists; argument tables are copies)."""
        values = {name: getattr(self, name) for name in _fields(type(self))}
        return {
            k: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, dict) else v
            for k, v in values.items()
        }

    def __hash__(self) -> int:  # the argument tables are dicts: hash the content hash instead
        return hash(self.hash)

    @property
    def hash(self) -> str:
        """Content hash (16 hex digits) of the fields that change the numbers, and of the source of
        any plug-in the config names (:func:`identity`)."""
        return config_hash(identity(self.to_dict()))

    # ---------------------------------------------------------------- derived sizes
    @property
    def train_pool_size(self) -> int:
        """Images in the official training set before the validation split (for a plug-in data set,
        whose pool is known only once read: ``train_size + val_size``, the part of it the run uses)."""
        if ":" in self.dataset:
            return (self.train_size or 0) + (self.val_size or 0)
        return TRAIN_POOL_SIZES[self.dataset]

    @property
    def resolved_val_size(self) -> int:
        if self.val_size is not None:
            return self.val_size
        return int(round(DEFAULT_VAL_FRACTION * self.train_pool_size))

    @property
    def resolved_train_size(self) -> int:
        """Training images actually used (the subset, or all that the split leaves)."""
        available = self.train_pool_size - self.resolved_val_size
        return available if self.train_size is None else self.train_size

    @property
    def steps_per_epoch(self) -> int:
        return self.resolved_train_size // self.batch_size

    @property
    def total_steps(self) -> int:
        return self.steps if self.steps is not None else self.epochs * self.steps_per_epoch

    def lr_multipliers(self):
        """The schedule's learning-rate multiplier at each optimizer step (numpy, length ``total_steps``).

        ``lr * lr_multipliers()`` is the learning rate of every step as the trainer applies it.
        """
        # deferred: numpy-backed schedule code only when a schedule is checked
        from initmem.theory.schedule import lr_multipliers

        return lr_multipliers(
            self.total_steps,
            self.steps_per_epoch,
            self.schedule,
            warmup_epochs=self.warmup_epochs,
            milestone_epochs=self.milestone_epochs,
            step_gamma=self.step_gamma,
        )

    @property
    def total_epochs(self) -> int:
        """Epochs run, counting a final partial epoch when the length is given in steps."""
        return math.ceil(self.total_steps / self.steps_per_epoch)

    # ---------------------------------------------------------------- validation
    def validate(self) -> RunConfig:
        """Check every field against its allowed range; raise ConfigError naming the first bad one."""
        plugin_data = ":" in self.dataset  # a plug-in (empirical/plugins.py): its shape only
        if plugin_data:
            if not PLUGIN_PATTERN.match(self.dataset):
                raise ConfigError(
                    f"dataset {self.dataset!r} is not one of {list(DATASETS)} nor of the form "
                    "'package.module:function'"
                )
            if self.train_size is None or self.val_size is None:
                raise ConfigError(
                    f"dataset {self.dataset!r} is a plug-in: give train_size and val_size (its pool "
                    "sizes are known only once it is read)"
                )
            if self.dataset.startswith("torchvision:") and self.data_dir is None:
                raise ConfigError(
                    f"dataset {self.dataset!r} reads a local copy: give data_dir (the folder "
                    "torchvision's class takes as root; nothing is downloaded)"
                )
        else:
            _choice("dataset", self.dataset, DATASETS)
        if ":" in self.model:  # a plug-in (empirical/plugins.py): checked here for its shape only
            if not PLUGIN_PATTERN.match(self.model):
                raise ConfigError(
                    f"model {self.model!r} is not one of {list(MODELS)} nor of the form "
                    "'package.module:function'"
                )
        else:
            _choice("model", self.model, MODELS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("schedule", self.schedule, SCHEDULES)
        _choice("device", self.device, DEVICES)
        _choice("precision", self.precision, PRECISIONS)
        _choice("loss", self.loss, LOSSES)
        for name, plugin_field in zip(ARGS_FIELDS, ("model", "dataset"), strict=True):
            _check_args(name, getattr(self, name), plugin_field, getattr(self, plugin_field))
        if not self.alpha_groups:
            raise ConfigError(f"alpha_groups must name at least one of {list(ALPHA_GROUPS)}")
        for group in self.alpha_groups:
            _choice("alpha_groups", group, ALPHA_GROUPS)
        _positive("width", self.width)
        _positive("alpha", self.alpha)
        _positive("lr", self.lr)
        _positive("eps", self.eps)
        _positive("max_weight_norm", self.max_weight_norm)
        _in_range("momentum", self.momentum, 0.0, 1.0, "0 <= momentum < 1", upper_open=True)
        _in_range("l2", self.l2, 0.0, math.inf, "l2 >= 0")
        _in_range("weight_decay", self.weight_decay, 0.0, math.inf, "weight_decay >= 0")
        _in_range("warmup_epochs", self.warmup_epochs, 0.0, math.inf, "warmup_epochs >= 0")
        _in_range("step_gamma", self.step_gamma, 0.0, 1.0, "0 < step_gamma <= 1", lower_open=True)
        for name in ("seed", "split_seed"):
            _in_range(
                name, getattr(self, name), 0, SEED_LIMIT, f"0 <= {name} < 2**32", upper_open=True
            )
        if not self.out_dir.strip():
            raise ConfigError("out_dir must name a folder (got an empty path)")
        if self.data_dir is not None and not self.data_dir.strip():
            raise ConfigError("data_dir must name a folder or be left out (got an empty path)")
        if len(self.betas) != 2:
            raise ConfigError(f"betas must hold two numbers (got {list(self.betas)})")
        for beta in self.betas:
            _in_range("betas", beta, 0.0, 1.0, "0 <= beta < 1", upper_open=True)
        if self.nesterov and (self.optimizer != "sgd" or self.momentum == 0):
            raise ConfigError("nesterov needs optimizer = 'sgd' and momentum > 0")
        for name in ("batch_size", "epochs", "eval_every", "checkpoint_every", "eval_batch_size"):
            _positive_int(name, getattr(self, name))
        for name in ("train_size", "test_size", "steps", "threads"):
            if getattr(self, name) is not None:
                _positive_int(name, getattr(self, name))
        if self.val_size is not None:
            _positive_int("val_size", self.val_size)
        pool = self.train_pool_size
        if not 0 < self.resolved_val_size < pool:
            raise ConfigError(
                f"val_size must be between 1 and {pool - 1} for {self.dataset} "
                f"(got {self.resolved_val_size})"
            )
        available = pool - self.resolved_val_size
        if self.train_size is not None and self.train_size > available:
            raise ConfigError(
                f"train_size must be at most {available} for {self.dataset} with val_size "
                f"{self.resolved_val_size} (got {self.train_size})"
            )
        test_pool = math.inf if plugin_data else TEST_POOL_SIZES[self.dataset]
        if self.test_size is not None and self.test_size > test_pool:
            raise ConfigError(
                f"test_size must be at most {test_pool} for {self.dataset} (got {self.test_size})"
            )
        if self.batch_size > self.resolved_train_size:
            raise ConfigError(
                f"batch_size must be at most the training set size {self.resolved_train_size} "
                f"(got {self.batch_size})"
            )
        # deferred: numpy-backed schedule code only when a schedule is checked
        from initmem.theory.schedule import check_schedule

        try:  # warmup within the run, milestones positive (the schedule's own check)
            check_schedule(
                self.total_steps / self.steps_per_epoch,
                self.schedule,
                self.warmup_epochs,
                self.milestone_epochs,
            )
        except ValueError as err:
            raise ConfigError(" ".join(str(err).split())) from None
        if self.milestone_epochs and self.schedule != "step":
            raise ConfigError(
                f"milestone_epochs {list(self.milestone_epochs)} need schedule = 'step' "
                f"(got schedule = {self.schedule!r}); set schedule = 'step' or drop the milestones"
            )
        return self


# -------------------------------------------------------------------- helpers (also used by sweeps)
@functools.cache
def _fields(cls: type) -> dict[str, dataclasses.Field]:
    """A dataclass's fields by name, in order (looked up once per class: sweeps build many configs)."""
    return {f.name: f for f in dataclasses.fields(cls)}


def config_hash(values: dict[str, Any]) -> str:
    """16-hex-digit SHA-256 of a config dict, ignoring :data:`NON_HASHED_FIELDS` and the fields of
    :data:`HASH_DEFAULTS` that hold their defaults."""
    payload = {
        k: v
        for k, v in sorted(values.items())
        if k not in NON_HASHED_FIELDS and not (k in HASH_DEFAULTS and v == HASH_DEFAULTS[k])
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -------------------------------------------------------------------- run identity (provenance)
def identity(values: dict[str, Any]) -> dict[str, Any]:
    """What a run's hash is taken of: the config dict ``values``, plus, when it names a plug-in model
    or data set, the SHA-256 of each plug-in's source file under ``plugin_sources``
    (:func:`~.provenance.plugin_sources`): an edited plug-in makes another run. A config of built-in
    names is returned as it is, so its hash is the one it always had."""
    sources = plugin_sources(values)
    return values | {"plugin_sources": sources} if sources else values


def unknown_field_message(key: str, where: str = "") -> str:
    """The error for a key that is no :class:`RunConfig` field, with a did-you-mean: a known alias
    (:data:`FIELD_ALIASES`) or the closest field name."""
    known = RunConfig.field_names()
    if key in FIELD_ALIASES:
        suggestion = f" (did you mean {FIELD_ALIASES[key]}?)"
    else:
        hint = difflib.get_close_matches(key, known, n=1)
        suggestion = f" (did you mean '{hint[0]}'?)" if hint else ""
    return f"{where + ': ' if where else ''}unknown config field '{key}'{suggestion}"


def load_toml(path: str | Path) -> dict[str, Any]:
    """The top-level keys of a TOML config file; a missing, unreadable, invalid or empty file
    (no field set) raises ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        with path.open("rb") as fh:
            values = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a UTF-8 text file ({err.reason})") from None
    if not values:
        raise ConfigError(
            f"config file {path} sets no field (empty); write the fields to change, e.g. "
            "alpha = 0.5, or leave --config out to train with every default"
        )
    return values


def fold_dotted_args(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with dotted keys of an argument table (``"model_args.depth": 4``, from
    ``--set model_args.depth=4`` or a sweep grid) merged into that table (over the table's own keys);
    other keys unchanged. ``model_args.block.width`` sets a nested table."""
    folded = {
        k: v for k, v in values.items() if k.partition(".")[0] not in ARGS_FIELDS or "." not in k
    }
    for key, value in values.items():
        head, dot, tail = key.partition(".")
        if not dot or head not in ARGS_FIELDS:
            continue
        table = folded.get(head) or {}
        if not isinstance(table, dict):
            raise ConfigError(f"{head} must be a table of keyword arguments (got {table!r})")
        table = folded[head] = dict(table)
        *parents, leaf = tail.split(".")
        for part in parents:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(f"{key}: {head}.{part} is not a table")
        table[leaf] = value
    return folded


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse ``key=value`` strings; values are TOML literals (``0.5``, ``true``, ``[1, 2]``), else strings.

    A comma-separated value (``alpha_groups=conv,bn``) becomes a list.
    """
    values: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override must look like key=value (got '{item}')")
        values[key] = parse_value(raw.strip())
    return values


def parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    if raw.lower() in ("none", "null"):
        return None
    if "," in raw:
        return [parse_value(part.strip()) for part in raw.split(",") if part.strip()]
    return raw


def _coerce(name: str, annotation: str, value: Any) -> Any:
    """Coerce a parsed value to the field's annotated type (annotations are strings here)."""
    ann = str(annotation)
    optional = "None" in ann
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} cannot be empty")
    base = ann.replace(" | None", "")
    if base.startswith("dict"):
        if not isinstance(value, dict):
            raise ConfigError(
                f"{name} must be a table of keyword arguments, e.g. {name}.depth = 4 (got {value!r})"
            )
        return dict(value)
    try:
        if base.startswith("tuple"):
            items = value if isinstance(value, (list, tuple)) else [value]
            inner = float if "float" in base else int if "int" in base else str
            return tuple(_scalar(name, inner, v) for v in items)
        return _scalar(name, {"int": int, "float": float, "bool": bool, "str": str}[base], value)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{name}: {err}") from None


def _scalar(name: str, kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{name} must be true or false (got {value!r})")
    if kind is int:
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ):
            raise ConfigError(f"{name} must be an integer (got {value!r})")
        return int(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number (got {value!r})")
        if not math.isfinite(value):
            raise ConfigError(f"{name} must be finite (got {value!r})")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string (got {value!r})")
    return value


def _check_args(name: str, args: dict[str, Any], plugin_field: str, plugin: str) -> None:
    """An argument table: keys that are Python identifiers, TOML values, and a plug-in to take them."""
    if not args:
        return
    if ":" not in plugin or plugin.startswith("torchvision:"):
        raise ConfigError(
            f"{name} are passed to a plug-in {plugin_field} ('package.module:function'); "
            f"{plugin_field} = {plugin!r} takes none (got {name} = {args!r})"
        )
    for key, value in args.items():
        if not (isinstance(key, str) and key.isidentifier()):
            raise ConfigError(
                f"{name}: {key!r} is not a keyword argument name (a Python identifier)"
            )
        if not _toml_value(value):
            raise ConfigError(
                f"{name}.{key} must be a string, number, boolean, list or table (got {value!r})"
            )


def _toml_value(value: Any) -> bool:
    """Whether ``value`` is what TOML can hold (and JSON can record): the argument tables' values."""
    if isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_toml_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _toml_value(v) for k, v in value.items())
    return False


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {list(allowed)} (got {value!r})")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0 (got {value})")


def _positive_int(name: str, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer (got {value})")


def _in_range(name, value, low, high, text, *, lower_open=False, upper_open=False) -> None:
    too_low = value <= low if lower_open else value < low
    too_high = value >= high if upper_open else value > high
    if too_low or too_high:
        raise ConfigError(f"{name} must satisfy {text} (got {value})")


__all__ = [
    "ALPHA_GROUPS",
    "RESIDUAL_STREAM_LAYER",
    "ARGS_FIELDS",
    "ConfigError",
    "DATASETS",
    "MODELS",
    "OPTIMIZERS",
    "RunConfig",
    "SCHEDULES",
    "TEST_POOL_SIZES",
    "FIELD_ALIASES",
    "HASH_DEFAULTS",
    "LOSSES",
    "SEED_LIMIT",
    "TRAIN_POOL_SIZES",
    "config_hash",
    "identity",
    "fold_dotted_args",
    "load_toml",
    "parse_overrides",
    "unknown_field_message",
]
