"""The theory's predictions for one run's model, per parameter group, before anything trains.

Setting. A run config (any model: a BatchNorm ResNet, a LayerNorm or normalization-free network, a
plug-in) and its pipeline. alpha multiplies the default init on ``config.alpha_groups``; the question
is, for each parameter group, which mechanism the theory says erases the memory of alpha, and when.

Conventions. Times in optimizer steps (and epochs, ``steps_per_epoch`` of the config); ``inf``: never
within gradient flow or any run length (P1: not within the run); NaN: no closed form (the row says
why). Every row names the gradient scale it rests on (``g_source``: the probe, or "none" for a law
that takes none). Groups, as
:func:`initmem.empirical.models.parameter_groups` finds them in the model:

- ``scale_invariant``: weights whose scale the train-mode function ignores;
- ``residual_stream``: a pre-LN network's embedding and residual writers, whose scale the function
  ignores jointly (:func:`initmem.empirical.models.residual_stream_parameters`);
- ``head``: the final linear layer;
- ``other``: every other parameter (weights without invariance, norm layers' affine parameters).

The groups are disjoint and hold every parameter once.

Derivation, one law per group (each one's source is the theory module it calls):

- (P1) ``scale_invariant``: alpha sets the effective learning rate ``lr / |w|^2`` only, and the
  normalized-weight laws (:mod:`initmem.theory.normalized`) give the norm of each layer at alpha and
  at 1, integrated over the run's schedule with the gradient scale G **probed at each of the two
  alphas** on the config's own model and data (:func:`initmem.bridge.probe.law_forgetting`; its
  ``g_source`` is a column of the table), the layers combined and decided by the one rule of
  :mod:`initmem.theory.criterion` (``steps``: the first step with the layer-mean norm memory at most
  1/e; ``memory_end``: that memory at the run's end). An empty group has a row saying so.
- (P1) ``residual_stream``: the same laws on the group's **joint** norm (the concatenated vector is
  scale-invariant, so ``<w, g> = 0`` for it and the identity behind each law holds for its
  ``|w|^2``; derived here), one layer of all its tensors, with ``G = (sum_i |g_i|^2) (sum_i |w_i|^2)``
  probed at both alphas the same way (:func:`~initmem.bridge.probe.law_forgetting` with ``group``
  ``residual_stream``). An empty group (no normalized residual stream) has a row saying so.
- (P2) ``other``, in the lazy (NTK) regime: the converged linearized predictor keeps the memory term
  ``m(x) = f0(x) - K_xX K^-1 f0(X)`` (Lee et al. 2019; :func:`initmem.theory.ntk.memory_term`) at any
  training length under gradient flow, so without decay the time is ``inf``; coupled L2 and decoupled
  decay contract the decayed parameters by ``1 - kappa_t``, ``kappa_t = lr_t (l2 / (1 - mu) + wd)``,
  at each step of the config's schedule (``lr_t``: ``lr`` times ``config.lr_multipliers()``; momentum's
  heavy-ball factor for SGD), and a network of effective degree ``L`` in them keeps the memory
  ``prod_t (1 - kappa_t)^L`` (identity (L1), :func:`initmem.theory.ntk.lazy_forgetting`); ``steps`` is
  the first step with that at most 1/e, ``inf`` when no decay acts or the schedule ends first (the
  law then says "not within the run" with the memory the schedule leaves), NaN for Adam-family with
  coupled L2 (no closed form). ``L`` is measured on the model: Euler's identity's ratio
  ``<J theta_0, f_0> / |f_0|^2`` over the probe outputs with only this group trainable
  (:func:`initmem.theory.ntk.homogeneity_degree`, :func:`lazy_degree`), a positive real number
  (exactly the layer count for a bias-free ReLU MLP); a non-positive one gives NaN with the reason.
  The row also gives ``memory_fraction``, ``|m| / |f0|`` on a
  probe set, from the empirical NTK of this group's parameters at init (``torch.func``), computed in
  eval mode (BatchNorm with its initial running statistics): how much of the initial function the
  kernel cannot reach, the size of what (P2) says is kept. The lazy regime is the large-alpha limit
  (Chizat, Oyallon & Bach 2019); at small alpha the network leaves it and (P2) is an idealization.
- (P3) ``head``: the logit-scale laws (:mod:`initmem.theory.logit_scale`) as ``predict_forgetting``'s
  ``head_logit_scale`` group gives them (model (4) for SGD with decay, law (7) for Adam with coupled L2,
  an explicit no-prediction row where no law exists).

:func:`write_predictions` writes the table (``predictions.csv``) and its inputs (``predictions.json``:
the config's hash and every field) before training: a pre-registered prediction, compared with what the
runs measure afterwards. :func:`preregister_sweep` does it for every pipeline of a sweep, into
``DIR/predictions/<variant>/`` with an index (``DIR/predictions/index.csv``; docs/run-format.md),
before ``initmem sweep run`` trains anything; :func:`read_sweep_predictions` reads them back.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.probe import DRAW_FIELDS, law_forgetting
from initmem.empirical.config import ConfigError, RunConfig
from initmem.empirical.plugins import PluginError
from initmem.empirical.provenance import utc_now

#: Parameter groups of the table, in order.
PREDICTION_GROUPS = ("scale_invariant", "residual_stream", "head", "other")
#: The (P1) rows' texts per group: mechanism, where the law acts, how layers combine, and the
#: mechanism and law of an empty group.
P1_TEXTS = {
    "scale_invariant": (
        "normalized-weight laws (P1)",
        "per layer",
        "layer mean, ",
        "none: no weight is scale-invariant",
        "no scale-invariant weight in this model",
    ),
    "residual_stream": (
        "normalized-weight laws on the joint norm (P1)",
        "on the joint norm of the embedding and residual writers",
        "",
        "none: no normalized residual stream",
        "no pre-LN residual stream in this model",
    ),
}


@dataclass(frozen=True)
class GroupPredictions:
    """The table of :func:`predict_groups` (one row per group: ``group``, ``parameters`` (count),
    ``tensors``, ``mechanism``, ``steps``, ``epochs``, ``memory_fraction``, ``law``, ``memory_end``
    (P1's norm memory at the run's end), ``g_source``) and what it was computed for (``alpha``, the
    config's ``hash``)."""

    alpha: float
    hash: str
    table: pd.DataFrame


def pipeline_of(config: RunConfig):
    """The theory's :class:`~initmem.theory.forgetting.Pipeline` for a ``RunConfig``."""
    from initmem.theory.forgetting import Pipeline  # pandas: loaded on first use

    return Pipeline(
        optimizer=config.optimizer,
        lr=config.lr,
        momentum=config.momentum,
        l2=config.l2,
        weight_decay=config.weight_decay,
        batch_size=config.batch_size,
        beta2=config.betas[1],
        steps_per_epoch=config.steps_per_epoch,
        total_steps=config.total_steps,
        lr_multipliers=config.lr_multipliers(),
    )


def lazy_decay(config: RunConfig, depth: float):
    """(P2): the lazy memory term's forgetting under the config's decay and schedule,
    :func:`initmem.theory.ntk.lazy_forgetting` (identity (L1): memory ``prod_t (1 - kappa_t)^depth``
    over the config's per-step lr multipliers, forgotten at 1/e; ``inf`` when no decay acts or the
    schedule ends first). ``depth``: the effective degree of the decayed parameters
    (:func:`lazy_degree`)."""
    from initmem.theory.ntk import lazy_forgetting  # with its model-side twin below: on first use

    return lazy_forgetting(
        config.lr,
        depth=depth,
        l2=config.l2,
        weight_decay=config.weight_decay,
        momentum=config.momentum,
        optimizer=config.optimizer,
        lr_multipliers=config.lr_multipliers(),
    )


def _probe_model(model, names: list[str]):
    """A float64, eval-mode copy of ``model`` with only the parameters ``names`` trainable (the
    caller's model keeps its flags)."""
    probe = copy.deepcopy(model).double().eval()
    for name, param in probe.named_parameters():
        param.requires_grad_(name in names)
    return probe


def memory_fraction(model, names: list[str], x_train, x_test) -> float:
    """``|m| / |f0|`` on ``x_test`` (P2), over every output: the memory term of the NTK of the
    parameters ``names`` (the others held fixed), at the model's current parameters, in eval mode;
    NaN for no parameters."""
    import torch  # the model's own stack

    from initmem.theory import empirical_ntk
    from initmem.theory.ntk import memory_term

    if not names:
        return math.nan
    probe = _probe_model(model, names)
    # every output kept: rows ordered sample * k + output, as the flattened outputs below
    k_train = empirical_ntk(probe, x_train, trace_outputs=False).ntk
    k_test = empirical_ntk(probe, x_test, x_train, trace_outputs=False).ntk
    with torch.no_grad():
        f0_train = probe(x_train).reshape(-1).numpy()
        f0_test = probe(x_test).reshape(-1).numpy()
    m = memory_term(k_train, k_test, f0_train, f0_test)
    return float(np.linalg.norm(m) / max(np.linalg.norm(f0_test), 1e-300))


def lazy_degree(model, names: list[str], x) -> float:
    """(P2)'s depth: the effective degree of the outputs on ``x`` in the parameters ``names``,
    :func:`initmem.theory.ntk.homogeneity_degree` of
    :func:`initmem.theory.empirical_kernels.init_outputs` on the float64 eval-mode probe model of
    :func:`memory_fraction` (only ``names`` trainable); NaN for no parameters."""
    # torch: the model's outputs and their parameter-carried part
    from initmem.theory.empirical_kernels import init_outputs
    from initmem.theory.ntk import homogeneity_degree

    if not names:
        return math.nan
    return homogeneity_degree(*init_outputs(_probe_model(model, names), x))


def _lazy_row_law(config: RunConfig, depth: float) -> tuple[float, float, str]:
    """(P2)'s time in steps, its memory at the run's end (``memory_left`` of (L1)) and its law text
    for the effective degree ``depth``: NaN when the degree is not positive (no decay of the init's
    part to follow) or no closed form exists."""
    if not depth > 0:
        reason = f"no prediction: the effective degree of these parameters is {depth:.4g}"
        return math.nan, math.nan, reason
    lazy = lazy_decay(config, depth)
    if lazy.never:
        said = "never: no decay acts"
    elif math.isnan(lazy.steps):
        said = lazy.formula
    elif math.isinf(lazy.steps):
        said = f"not within the run: the schedule ends with memory {lazy.memory_left:.3g}"
    else:
        said = f"forgotten at step {lazy.steps:g}"
    law = (
        f"m(x) = f0(x) - K_xX K^-1 f0(X) kept by gradient flow; decay over the {config.schedule} "
        f"schedule with depth {depth:.4g} (homogeneity_degree): {lazy.formula}; {said}"
    )
    return lazy.steps, lazy.memory_left, law


def predict_groups(
    config: RunConfig,
    *,
    alpha: float | None = None,
    probe_size: int = 16,
    data=None,
    memory_cache: dict | None = None,
    probe_cache: dict | None = None,
) -> GroupPredictions:
    """The table of the module docstring for ``config``'s model and pipeline, alpha (default the
    config's; 2 when that is 1) against 1. ``probe_size`` training and test images (from ``data``,
    the config's splits, read if not given) feed the NTK of (P2). ``memory_cache``: a dict that keeps
    (P2)'s memory fraction per model, init draw and data (:func:`memory_key`), so the pipelines of a
    sweep that share them compute its NTK once (the entry: the fraction and (P2)'s effective degree); ``probe_cache`` the same for P1's probes of G
    (:func:`initmem.bridge.probe.probe_key`)."""
    # torch (the model, the data) and the theory's tables: loaded on first use
    from initmem.empirical.data import load_splits
    from initmem.empirical.models import check_alpha_groups, default_model, parameter_groups
    from initmem.theory.forgetting import predict_forgetting

    config.validate()
    alpha = config.alpha if alpha is None else float(alpha)
    if alpha == 1.0:
        alpha = 2.0
    model = default_model(config)
    if not config.allow_empty_alpha_groups:  # the trainer's check, before any run trains
        check_alpha_groups(model, config)
    groups = parameter_groups(model)
    params = dict(model.named_parameters())
    invariant, head = groups["scale_invariant"], groups["head"]
    stream = [n for n in groups["residual_stream"] if n not in set(invariant) | set(head)]
    other = [n for n in groups["all"] if n not in set(invariant) | set(head) | set(stream)]
    fan_ins = sorted({math.prod(params[n].shape[1:]) for n in invariant}) or [1]
    report = predict_forgetting(pipeline_of(config), alpha, fan_ins=fan_ins)
    data = data if data is not None else load_splits(config)
    x_train = data.train.images[:probe_size].double()
    x_test = data.test.images[:probe_size].double()
    epochs = config.steps_per_epoch

    def row(group, names, mechanism, steps, law, memory=math.nan, end=math.nan, g="none"):
        return {
            "group": group,
            "parameters": int(sum(params[n].numel() for n in names)),
            "tensors": len(names),
            "mechanism": mechanism,
            "steps": steps,
            "epochs": steps / epochs if np.isfinite(steps) else steps,
            "memory_fraction": memory,
            "law": law,
            "memory_end": end,
            "g_source": g,
        }

    table = []
    for group, names in (("scale_invariant", invariant), ("residual_stream", stream)):
        mechanism, where, combined, mechanism_none, law_none = P1_TEXTS[group]
        if not names:
            table.append(row(group, [], mechanism_none, math.nan, law_none))
            continue
        law = law_forgetting(config, [1.0, alpha], cache=probe_cache, group=group)
        table.append(
            row(
                group,
                names,
                mechanism,
                float(law["forgetting_steps"]),
                f"the {config.optimizer} law {where} with G probed at alpha {alpha:g} and 1, "
                f"{combined}{law['state']} (theory.criterion)",
                end=float(law["memory_end"]),
                g=str(law["g_source"]),
            )
        )
    head_row = report.groups.set_index("group").loc["head_logit_scale"]
    table.append(
        row(
            "head",
            head,
            "logit-scale laws (P3)" if bool(head_row["prediction"]) else "no prediction",
            float(head_row["steps"]),
            str(head_row["formula"]),
        )
    )
    key = memory_key(config, probe_size)
    if memory_cache is not None and key in memory_cache:
        memory, depth = memory_cache[key]
    else:  # neither draws random numbers
        memory = memory_fraction(model, other, x_train, x_test)
        depth = lazy_degree(model, other, x_test)
        if memory_cache is not None:
            memory_cache[key] = (memory, depth)
    steps, end, law = _lazy_row_law(config, depth)
    table.append(row("other", other, "lazy (NTK) memory term (P2)", steps, law, memory, end))
    return GroupPredictions(alpha, config.hash, pd.DataFrame(table))


#: Config fields that (P2)'s memory fraction and effective degree depend on: the model, its init draw and the probe data
#: (the NTK is taken at the default init, before alpha; the pipeline does not enter it).
MEMORY_FIELDS = DRAW_FIELDS


def memory_key(config: RunConfig, probe_size: int) -> tuple:
    """The key of :func:`predict_groups`'s ``memory_cache``: :data:`MEMORY_FIELDS` and the probe size."""
    values = config.to_dict()
    return (*(str(values.get(name)) for name in MEMORY_FIELDS), probe_size)


def write_predictions(
    config: RunConfig, folder: str | Path, *, clock: dict | None = None, **kwargs
) -> Path:
    """Write ``predictions.csv`` (the table of :func:`predict_groups`) and ``predictions.json`` (alpha,
    the config's hash and every field, and ``written_at``, UTC) into ``folder``: pre-registered
    predictions when written before training. ``clock``: what a sweep knew of its runs when they
    were written (:func:`pipeline_clock`: ``runs_started_before``, ``first_run_started_at``),
    recorded too. Returns the CSV's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    predictions = predict_groups(config, **kwargs)
    path = folder / "predictions.csv"
    predictions.table.to_csv(path, index=False)
    record = {"alpha": predictions.alpha, "hash": predictions.hash, "config": config.to_dict()}
    record |= {"written_at": utc_now(), **(clock or {})}
    (folder / "predictions.json").write_text(json.dumps(record, indent=2) + "\n")
    return path


#: The folder of a sweep's pre-registered predictions, and its index (one row per pipeline).
PREDICTIONS_FOLDER = "predictions"
INDEX_COLUMNS = [
    "pipeline",
    "variant",
    "alpha",
    "hash",
    "folder",
    "note",
    "written_at",
    "runs_started_before",
    "first_run_started_at",
]
#: The clock columns of the index (absent from an index written before they existed).
CLOCK_COLUMNS = ("written_at", "runs_started_before", "first_run_started_at")


def run_started_at(run_dir: Path) -> str | None:
    """When a run first started (UTC ISO): its config.json's ``started_at``, else the earliest
    modification time of its files; None if it never started (no file of a run)."""
    import datetime  # the clock's readers: loaded when a sweep's clock is read

    from initmem.empirical.runfolder import RAW_PREDICTIONS, RUN_FILES

    run_dir = Path(run_dir)
    try:
        started = json.loads((run_dir / "config.json").read_text()).get("started_at")
        if isinstance(started, str):
            return started
    except (ValueError, AttributeError, OSError):
        pass
    times = [
        (run_dir / name).stat().st_mtime
        for name in (*RUN_FILES, RAW_PREDICTIONS)
        if (run_dir / name).is_file()
    ]
    if not times:
        return None
    stamp = datetime.datetime.fromtimestamp(min(times), datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def pipeline_clock(runs, sweep_dir: str | Path) -> dict:
    """Of a pipeline's ``runs`` (SweepRuns) in ``sweep_dir``: how many had started
    (``runs_started_before``) and the first one's start (``first_run_started_at``, None if none)."""
    starts = [t for run in runs if (t := run_started_at(run.run_dir(sweep_dir))) is not None]
    return {"runs_started_before": len(starts), "first_run_started_at": min(starts, default=None)}


def provenance_label(runs_started_before) -> str:
    """How a pre-registration is shown: "pre-registered before training" only when no run of its
    pipeline had started when it was written; "computed after N runs had started" otherwise; and
    "pre-registered (no clock recorded)" for files written before the clock existed."""
    try:
        started = int(runs_started_before)
    except (TypeError, ValueError):
        return "pre-registered (no clock recorded)"
    if started == 0:
        return "pre-registered before training"
    return f"computed after {started} run{'s' if started != 1 else ''} had started"


@dataclass(frozen=True)
class SweepPipeline:
    """One pipeline of a sweep as the predictions see it: its id, variant, largest alpha and the
    config of its first run (the seed its model is drawn with)."""

    pipeline: str
    variant: str
    alpha: float
    config: RunConfig


def sweep_pipelines(runs) -> list[SweepPipeline]:
    """The pipelines of a sweep's runs (:class:`~initmem.empirical.sweep.SweepRun`, in order), each
    with its largest alpha: the alpha whose memory the study measures against the smallest, and the
    one predicted (against 1; 2 when the pipeline only has 1, as :func:`predict_groups`)."""
    from initmem.empirical.tables import pipeline_id  # pandas tables: loaded on first use

    firsts: dict[str, tuple[str, RunConfig]] = {}
    alphas: dict[str, float] = {}
    for run in runs:
        key = pipeline_id(run.config.to_dict())
        firsts.setdefault(key, (run.variant, run.config))
        alphas[key] = max(alphas.get(key, -math.inf), float(run.config.alpha))
    return [SweepPipeline(k, v, alphas[k], c) for k, (v, c) in firsts.items()]


def prediction_folders(pipelines: list[SweepPipeline]) -> dict[str, str]:
    """Folder name per pipeline under ``predictions/``: the variant, with ``-<pipeline id>`` when the
    variant holds several pipelines."""
    count: dict[str, int] = {}
    for p in pipelines:
        count[p.variant] = count.get(p.variant, 0) + 1
    return {
        p.pipeline: p.variant if count[p.variant] == 1 else f"{p.variant}-{p.pipeline}"
        for p in pipelines
    }


def preregister_sweep(runs, sweep_dir: str | Path, *, probe_size: int = 16) -> list[str]:
    """Write :func:`write_predictions` for every pipeline of ``runs`` into
    ``sweep_dir/predictions/<folder>/`` (:func:`prediction_folders`) and the index
    ``predictions/index.csv`` (:data:`INDEX_COLUMNS`), before any run trains. A pipeline whose
    predictions are already there for the same config hash keeps them (written before its runs
    trained); one whose predictions cannot be computed (no data, a plug-in that fails, a law that
    refuses) gets a note in the index instead. Returns one line per pipeline, for the driver."""
    from initmem.empirical.tables import pipeline_id  # pandas tables: loaded on first use

    root = Path(sweep_dir) / PREDICTIONS_FOLDER
    pipelines = sweep_pipelines(runs)
    folders = prediction_folders(pipelines)
    rows, lines, cache, probes = [], [], {}, {}
    for p in pipelines:
        folder = root / folders[p.pipeline]
        config = p.config.replace(alpha=p.alpha)
        row = {"pipeline": p.pipeline, "variant": p.variant, "alpha": p.alpha}
        row |= {"hash": config.hash, "folder": folders[p.pipeline], "note": ""}
        record = folder / "predictions.json"
        kept = record.is_file() and _recorded_hash(record) == config.hash
        if kept:
            row |= _recorded_clock(record)
            label = provenance_label(row["runs_started_before"])
            lines.append(f"predictions kept ({label}): {folder}")
        else:
            mine = [r for r in runs if pipeline_id(r.config.to_dict()) == p.pipeline]
            clock = pipeline_clock(mine, sweep_dir)
            try:
                with warnings.catch_warnings():  # the laws' range caveats: in the table's law
                    warnings.simplefilter("ignore")
                    write_predictions(
                        config, folder, clock=clock, probe_size=probe_size, memory_cache=cache,
                        probe_cache=probes,
                    )  # fmt: skip
                row |= _recorded_clock(record)
                line = f"predictions written: {folder / 'predictions.csv'}"
                if clock["runs_started_before"]:
                    line += (
                        f" ({provenance_label(clock['runs_started_before'])}: not pre-registered)"
                    )
                lines.append(line)
            except (PluginError, ConfigError) as err:  # every run would fail on it: stop now
                raise type(err)(
                    f"{' '.join(str(err).split())} (pipeline {p.variant}, found while writing its "
                    "predictions; no run was started)"
                ) from None
            except Exception as err:  # any failure of the model, data or laws: a note, not a stop
                row["note"] = f"not computed: {type(err).__name__}: {' '.join(str(err).split())}"
                lines.append(f"note: predictions for {p.variant} {row['note']}")
        rows.append(row)
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=INDEX_COLUMNS).to_csv(root / "index.csv", index=False)
    return lines


def _recorded_hash(path: Path) -> str | None:
    """The config hash a ``predictions.json`` records (None if unreadable)."""
    try:
        return str(json.loads(path.read_text())["hash"])
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _recorded_clock(path: Path) -> dict:
    """The clock a ``predictions.json`` records (:data:`CLOCK_COLUMNS`; None where it has none)."""
    try:
        record = json.loads(path.read_text())
    except (ValueError, OSError):
        record = {}
    record = record if isinstance(record, dict) else {}
    return {k: record.get(k) for k in CLOCK_COLUMNS}


def read_sweep_predictions(sweep_dir: str | Path) -> pd.DataFrame:
    """The pre-registered predictions of a sweep folder, one row per (pipeline, group): the index's
    columns and the table's (``group``, ``mechanism``, ``steps``, ``epochs``, ``memory_fraction``,
    ``law``, ``parameters``, ``memory_end``, ``g_source``: absent from files written before it),
    and ``provenance`` (:func:`provenance_label`); empty when the folder has none. An index without
    a column (written by an older initmem, or edited) reads it as empty; a damaged table raises
    :class:`~initmem.empirical.runfolder.DamagedFileError` naming it."""
    from initmem.empirical.runfolder import DamagedFileError  # only where a table is damaged

    root = Path(sweep_dir) / PREDICTIONS_FOLDER
    if not (root / "index.csv").is_file():
        return pd.DataFrame()
    fix = "remove the predictions folder (rm -r {}) and rerun `initmem sweep run` to write it again"
    try:
        index = pd.read_csv(root / "index.csv", dtype={"pipeline": str, "hash": str, "note": str})
    except (ValueError, UnicodeDecodeError) as err:  # empty, or not CSV
        problem = " ".join(str(err).split())
        raise DamagedFileError(root / "index.csv", problem, fix.format(root)) from None
    for column in INDEX_COLUMNS:
        if column not in index.columns:
            if column in ("pipeline", "folder"):
                raise DamagedFileError(
                    root / "index.csv", f"has no {column} column", fix.format(root)
                )
            index[column] = None
    index["note"] = index["note"].fillna("")
    frames = []
    for row in index.to_dict("records"):
        path = root / str(row["folder"]) / "predictions.csv"
        if row["note"] or not path.is_file():
            continue
        try:
            table = pd.read_csv(path)
        except (ValueError, UnicodeDecodeError) as err:  # 0 bytes, garbage
            raise DamagedFileError(path, " ".join(str(err).split()), fix.format(root)) from None
        if not {"group", "mechanism"} <= set(table.columns):
            raise DamagedFileError(path, "has no group and mechanism columns", fix.format(root))
        keep = ("pipeline", "variant", "alpha", "hash", *CLOCK_COLUMNS)
        frames.append(
            table.assign(
                **{k: row[k] for k in keep},
                provenance=provenance_label(row["runs_started_before"]),
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = [
    "CLOCK_COLUMNS",
    "GroupPredictions",
    "INDEX_COLUMNS",
    "MEMORY_FIELDS",
    "PREDICTIONS_FOLDER",
    "PREDICTION_GROUPS",
    "SweepPipeline",
    "prediction_folders",
    "preregister_sweep",
    "read_sweep_predictions",
    "sweep_pipelines",
    "lazy_decay",
    "lazy_degree",
    "memory_key",
    "memory_fraction",
    "pipeline_clock",
    "pipeline_of",
    "provenance_label",
    "run_started_at",
    "predict_groups",
    "write_predictions",
]
