"""Synthetic sweeps with a known answer: a sweep's design, a stated forgetting truth, seed noise.

Setting
-------
A *design* is what a sweep file or folder fixes before any training: its pipelines (every hashed
config field but ``alpha`` and ``seed``) with two or more alphas, their evaluation steps, the alphas
and the seeds. Each pipeline's units of forgetting at each evaluation (accumulated regularization and
epochs) come from its config through :func:`initmem.bridge.units.run_unit_increments`, the same
function the bridge reads a folder with, so the synthetic units are the real ones.

A *truth* states how memory is forgotten, in one unit (the named truths are :data:`TRUTHS`,
their settings :data:`NAMED_TRUTHS`):

(S1) ``unit = accumulated``, ``epochs`` or ``explicit`` (explicit decay only, ``sum lr (l2/(1-mu)
     + wd)``, without the noise terms), or a rival of the unit comparison
     (:data:`~initmem.bridge.unit_decision.RIVAL_UNITS`): ``steps``, ``explicit_sgd_noise``,
     ``explicit_adam`` (explicit decay plus one noise term for every pipeline): the memory of
     pipeline p at evaluation t is
     ``m_p(t) = exp(-(U_p(t) / u0)^k)`` with ``U`` that unit (``u0`` its scale, ``k`` its shape);
     ``unit = neither``: ``m_p(t) = exp(-(t / (c_p T_p))^k)``, with ``T_p`` the pipeline's run
     length in steps and ``c_p`` drawn for every replica, log-uniform over a decade
     (:func:`neither_scales`): each pipeline forgets on its own clock, which no unit orders.
(S1') Modifiers (derived here), each a rival the data of ``docs/unit-of-forgetting.md`` could hide:
     ``decay_only``: only the pipelines with explicit decay forget, the others keep ``m_p = 1``
     ("epochs, for the pipelines with decay only": optimizer family x epochs);
     ``undershoot`` b: the norm memory is ``(1 + b) m_p(t) - b``, 1 at init and ``-b`` once
     ``m_p`` is 0 (the alphas' order reversed at the end, as two AdamW pipelines measured);
     ``spread_rise`` r: the spread follows ``m_p(t) rho_p(t)`` with ``rho_p(t) = 1 - r
     exp(-(t / T_p) / RISE_FRACTION)``, which first rises (from ``1 - r`` of the gap) then decays
     with ``m_p`` (spreads measured to grow from about 6 to 13 pp before they fall).
     The **right verdict** of the unit decision under a truth (:attr:`Truth.right`) is its unit
     when that is a deciding unit and applies to every pipeline, else "cannot tell".

Derivation (the memories of :mod:`initmem.empirical.memory` under S1, derived here)
------------------------------------------------------------------------------------
(S2) Norm memory (M4) of seed s: ``n_p(t) + sigma_norm * e_{s,t}`` (``e`` standard normal;
     ``n_p = m_p`` unless ``undershoot``, S1'), exactly 1 at ``t = 0`` (the ratio of a run's init
     norms is alpha's, by construction).
(S3) Test accuracy of seed s at alpha a: ``base + g(a) f_p(t) + sigma_seed * f_s +
     sigma_acc * e_{s,a,t}``, with ``f_p = m_p`` (times ``rho_p`` with ``spread_rise``, S1'),
     ``g(a) = gap * ln(a / a_min) / ln(a_max / a_min)`` (0 at the
     smallest alpha, ``gap`` at the largest) and ``f_s`` a seed effect shared by the seed's alphas
     (one data order). The spread (M2) at the end is then, in truth, ``100 gap f_p(T)`` pp.
     The validation-selected checkpoint is the last evaluation.

:func:`draw` samples one replica; :func:`replica_cubes` turns it into the
:class:`~initmem.bridge.unit_decision.PipelineCube` s that :func:`~initmem.bridge.unit_decision.memory_cubes` builds
from a folder, and :func:`write_folder` writes the same replica as a sweep folder in the run format
(``docs/run-format.md``), which ``load_sweep`` / ``initmem bridge`` / ``initmem study`` read unchanged.
Both paths give the same cubes (``tests/bridge/test_calibrate.py`` checks it). numpy only; no training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.bridge.unit_decision import (
    DECIDING_UNITS,
    PipelineCube,
    spread_start,
    unit_values,
)
from initmem.bridge.units import design_inv_init_sq, run_unit_increments
from initmem.empirical import runfolder, tables
from initmem.empirical.config import RunConfig
from initmem.empirical.sweep import SweepRun, write_sweep_folder

#: The units a truth can forget in (S1).
TRUTH_UNITS = (
    "accumulated",
    "epochs",
    "neither",
    "explicit",
    "steps",
    "explicit_sgd_noise",
    "explicit_adam",
)
#: The named truths of a calibration (S1, S1'): name -> the :class:`Truth` settings beside noise.
NAMED_TRUTHS = {
    "accumulated": {"unit": "accumulated"},
    "epochs": {"unit": "epochs"},
    "neither": {"unit": "neither"},
    "explicit decay only": {"unit": "explicit"},
    "epochs, decay only": {"unit": "epochs", "decay_only": True},
    "accumulated, spread rising first": {"unit": "accumulated", "spread_rise": 0.5},
    "accumulated, norm reversing": {"unit": "accumulated", "undershoot": 0.2},
}
#: The truths of the unit's rivals (S1), drawn where the comparison against the rivals is
#: calibrated (:mod:`initmem.bridge.study.calibrate`, ``rules`` with ``"rivals"``).
RIVAL_TRUTHS = {
    "steps": {"unit": "steps"},
    "explicit + SGD noise": {"unit": "explicit_sgd_noise"},
    "explicit + Adam term": {"unit": "explicit_adam"},
}
#: The truths a calibration draws, by name (S1, S1').
TRUTHS = tuple(NAMED_TRUTHS)
#: The units a design carries per evaluation (S1: the deciding pair, explicit decay, the parts of
#: the rivals; the rivals' sums are :func:`~initmem.bridge.unit_decision.unit_values`').
DESIGN_UNITS = (*DECIDING_UNITS, "explicit", "steps", "sgd_noise", "adam")
#: The fraction of the run over which a rising spread reaches 1 - 1/e of its rise (S1').
RISE_FRACTION = 0.25


# ----------------------------------------------------------------------------------- the design
@dataclass(frozen=True)
class DesignPipeline:
    """One pipeline of a design: its label, a config (alpha and seed to be set), its evaluation
    steps (from 0), every deciding unit at each of them (``units``: ``{unit: (n_evals,)}``) and
    ``inv_init_sq`` (``d / |w_0|^2`` at alpha = 1, :func:`~initmem.bridge.units.design_inv_init_sq`;
    the synthetic folder's init norms reproduce it)."""

    label: str
    config: RunConfig
    steps: np.ndarray
    units: dict
    inv_init_sq: float = float("nan")


@dataclass(frozen=True)
class Design:
    """Pipelines with two or more alphas, the alphas and the number of seeds of a sweep."""

    pipelines: tuple
    alphas: tuple
    n_seeds: int

    def scaled(self, seeds: int = 1, pipelines: int = 1) -> Design:
        """The design with ``seeds`` times the seeds and ``pipelines`` times the pipelines.

        Copy j of k of a pipeline keeps its run length and has its regularization multiplied by
        ``10 ** (0.5 (j / (k - 1) - 1/2))`` (spread over half a decade around the original, j = 0..k-1;
        every unit that grows with the regularization is scaled, epochs and steps are not). Derived
        here.
        """
        if seeds < 1 or pipelines < 1:
            raise ValueError(
                f"seeds and pipelines multipliers must be >= 1 (got {seeds}, {pipelines})"
            )
        out = []
        for p in self.pipelines:
            for j in range(pipelines):
                factor = 10 ** (0.5 * (j / (pipelines - 1) - 0.5)) if pipelines > 1 else 1.0
                units = {
                    u: v * (1.0 if u in ("epochs", "steps") else factor) for u, v in p.units.items()
                }
                label = p.label if pipelines == 1 else f"{p.label} x{factor:.2g}"
                out.append(dataclasses.replace(p, label=label, units=units))
        return Design(tuple(out), self.alphas, self.n_seeds * seeds)

    @property
    def name(self) -> str:
        """``P pipelines x S seeds x A alphas``."""
        return f"{len(self.pipelines)} pipelines x {self.n_seeds} seeds x {len(self.alphas)} alphas"


def evaluation_epochs(config: RunConfig) -> np.ndarray:
    """The epochs a run evaluates at: 0, every ``eval_every`` epochs and after the last."""
    last = config.total_epochs
    return np.array(sorted({0, *range(config.eval_every, last + 1, config.eval_every), last}))


def design_of(configs, variants=None) -> Design:
    """The design of a sweep's configs (``variants``: their variant names, the pipelines' labels).

    Keeps the pipelines with two or more alphas (the ones the unit decision is about); the alphas are
    the ones most of them ran, ``n_seeds`` the smallest number of seeds any of them has.
    """
    configs = list(configs)
    variants = list(variants) if variants is not None else [c.optimizer for c in configs]
    groups: dict[str, dict] = {}
    for config, variant in zip(configs, variants, strict=True):
        key = tables.pipeline_id(config.to_dict())
        entry = groups.setdefault(
            key, {"config": config, "label": variant, "alphas": set(), "seeds": {}}
        )
        entry["alphas"].add(float(config.alpha))
        entry["seeds"].setdefault(float(config.alpha), set()).add(int(config.seed))
    pipelines, alpha_sets, seed_counts = [], [], []
    for entry in groups.values():
        if len(entry["alphas"]) < 2:
            continue
        config = entry["config"]
        epochs = evaluation_epochs(config)
        steps = np.minimum(epochs * config.steps_per_epoch, config.total_steps)
        inv = design_inv_init_sq(config)
        sums = run_unit_increments(config, inv)[list(DESIGN_UNITS)].cumsum()
        zero = pd.DataFrame([dict.fromkeys(sums.columns, 0.0)])
        sums = pd.concat([zero, sums], ignore_index=True)
        units = {u: sums[u].to_numpy(dtype=float)[steps] for u in DESIGN_UNITS}
        pipelines.append(DesignPipeline(entry["label"], config, steps, units, inv))
        alpha_sets.append(tuple(sorted(entry["alphas"])))
        seed_counts.append(min(len(s) for s in entry["seeds"].values()))
    if len(pipelines) < 2:
        raise ValueError(
            f"the design has {len(pipelines)} pipeline(s) with two or more alphas: a synthetic "
            "sweep of the unit decision needs 2 or more"
        )
    alphas = max(set(alpha_sets), key=alpha_sets.count)
    return Design(tuple(pipelines), alphas, min(seed_counts))


def design_from(source: str | Path) -> Design:
    """The design of a sweep folder (its manifest), a sweep file or a preset name."""
    # deferred: the sweep module (file expansion, presets) loads only when a design is read
    from initmem.empirical.sweep import SweepSpec, read_manifest

    path = Path(source)
    if path.is_dir():
        runs = read_manifest(path)
    else:
        runs = SweepSpec.from_file(str(source)).expand()
    return design_of([r.config for r in runs], [r.variant for r in runs])


# ----------------------------------------------------------------------------------- the truth
@dataclass(frozen=True)
class Truth:
    """A stated forgetting (S1) and the seed noise around it (S2, S3).

    ``unit``: one of :data:`TRUTHS`; ``scale``: ``u0`` in that unit (None: the median over the
    design's pipelines of the unit at the end of the run, so that about half of them forget by
    ``exp(-1)``; for ``neither``, the median fraction of the run); ``shape``: ``k``. Noise:
    ``sigma_norm`` (norm memory, per seed and evaluation), ``sigma_acc`` (test accuracy, fraction,
    per run and evaluation), ``sigma_seed`` (a seed's accuracy offset shared by its alphas),
    ``gap`` (accuracy gap of the extreme alphas at full memory, fraction), ``base`` (accuracy).
    Modifiers (S1'): ``decay_only``, ``undershoot`` (b >= 0), ``spread_rise`` (r in [0, 1)).
    """

    unit: str = "accumulated"
    scale: float | None = None
    shape: float = 1.0
    sigma_norm: float = 0.03
    sigma_acc: float = 0.01
    sigma_seed: float = 0.01
    gap: float = 0.08
    base: float = 0.8
    decay_only: bool = False
    undershoot: float = 0.0
    spread_rise: float = 0.0

    def __post_init__(self):
        if self.unit not in TRUTH_UNITS:
            raise ValueError(f"truth unit must be one of {list(TRUTH_UNITS)} (got {self.unit!r})")
        for name in ("sigma_norm", "sigma_acc", "sigma_seed", "gap", "undershoot"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        if not 0 <= self.spread_rise < 1:
            raise ValueError(
                f"spread_rise must satisfy 0 <= spread_rise < 1 (got {self.spread_rise})"
            )
        if self.shape <= 0 or (self.scale is not None and self.scale <= 0):
            raise ValueError(f"scale and shape must be > 0 (got {self.scale}, {self.shape})")

    @property
    def right(self) -> str:
        """The right verdict of the unit decision under this truth (S1'): its unit where that is a
        deciding unit for every pipeline, else "cannot tell"."""
        return self.unit if self.unit in DECIDING_UNITS and not self.decay_only else "cannot tell"


def right_verdict(name: str) -> str:
    """The right verdict of the unit decision under the named truth ``name`` (:attr:`Truth.right`;
    a name outside :data:`NAMED_TRUTHS` is a unit: itself if deciding, else "cannot tell")."""
    named = NAMED_TRUTHS | RIVAL_TRUTHS
    settings = named.get(name, {"unit": name if name in TRUTH_UNITS else "neither"})
    return Truth(**settings).right


def named_truths(*, rivals: bool = False, **changes) -> dict:
    """``{name: Truth}`` for every truth of :data:`TRUTHS` (:data:`NAMED_TRUTHS`; with ``rivals``
    also :data:`RIVAL_TRUTHS`), with ``changes`` (noise, gap, ...) applied to each."""
    named = NAMED_TRUTHS | (RIVAL_TRUTHS if rivals else {})
    return {name: Truth(**(settings | changes)) for name, settings in named.items()}


def neither_scales(design: Design, rng: np.random.Generator) -> np.ndarray:
    """``c_p`` of the ``neither`` truth (S1): log-uniform in [0.3, 3], one per pipeline, drawn anew
    for every replica (a truth fixed once would order the pipelines by some unit by chance, and a
    large enough design would detect that order: not "neither")."""
    return 10 ** rng.uniform(np.log10(0.3), np.log10(3.0), len(design.pipelines))


def true_memory(design: Design, truth: Truth, clocks=None) -> list[np.ndarray]:
    """``m_p(t)`` of every pipeline at its evaluations (S1); ``clocks``: the ``c_p`` of the
    ``neither`` truth (:func:`neither_scales`; required for it)."""
    if truth.unit == "neither":
        if clocks is None:
            raise ValueError("the neither truth needs its clocks c_p (neither_scales)")
        fractions = [p.steps / p.steps[-1] for p in design.pipelines]
        scale = truth.scale or 1.0
        return [
            np.exp(-((t / (scale * ci)) ** truth.shape))
            for t, ci in zip(fractions, clocks, strict=True)
        ]
    pipelines = design.pipelines
    if truth.decay_only:
        pipelines = [p for p in pipelines if has_decay(p)]
    values = [unit_values(p.units, truth.unit, p.steps.size) for p in pipelines] or [np.ones(1)]
    scale = truth.scale or float(np.median([v[-1] for v in values]))
    return [
        np.exp(-((unit_values(p.units, truth.unit, p.steps.size) / scale) ** truth.shape))
        if has_decay(p) or not truth.decay_only
        else np.ones(p.steps.size)
        for p in design.pipelines
    ]


def has_decay(pipeline: DesignPipeline) -> bool:
    """Whether a design pipeline applies explicit decay (L2 or weight decay) within its run."""
    return bool(pipeline.units["explicit"][-1] > 0) if "explicit" in pipeline.units else True


def true_norm(memory: np.ndarray, truth: Truth) -> np.ndarray:
    """The true norm memory ``n_p(t)`` of a pipeline whose memory is ``memory`` (S1', S2)."""
    return (1.0 + truth.undershoot) * memory - truth.undershoot


def true_spread_fraction(pipeline: DesignPipeline, memory: np.ndarray, truth: Truth) -> np.ndarray:
    """``f_p(t)``: the fraction of the gap the alphas' accuracies keep at each evaluation (S3)."""
    if truth.spread_rise == 0:
        return memory
    fraction = pipeline.steps / pipeline.steps[-1]
    return memory * (1.0 - truth.spread_rise * np.exp(-fraction / RISE_FRACTION))


def true_spread_end(design: Design, truth: Truth, clocks=None) -> np.ndarray:
    """The spread (M2, pp) of every pipeline at its last evaluation, in truth (S3)."""
    memories = true_memory(design, truth, clocks)
    return np.array(
        [
            100.0 * truth.gap * true_spread_fraction(p, m, truth)[-1]
            for p, m in zip(design.pipelines, memories, strict=True)
        ]
    )


# ----------------------------------------------------------------------------------- one replica
@dataclass(frozen=True)
class Replica:
    """One synthetic sweep's memories: per pipeline, ``norm`` (n_seeds, n_evals), ``accuracy``
    (n_seeds, n_alphas, n_evals, fraction), ``memory`` (the true ``m_p(t)``, S1), and the true
    norm memory ``n_p(t)`` and spread fraction ``f_p(t)`` (``true_norm``, ``true_fraction``;
    S2, S3)."""

    design: Design
    truth: Truth
    norm: list
    accuracy: list
    memory: list
    true_norm: list
    true_fraction: list


def draw(design: Design, truth: Truth, rng: np.random.Generator) -> Replica:
    """One replica of ``design`` under ``truth`` (S2, S3)."""
    alphas = np.asarray(design.alphas, dtype=float)
    span = np.log(alphas.max() / alphas.min())
    g = truth.gap * np.log(alphas / alphas.min()) / span
    norms, accs, norm_truths, fractions = [], [], [], []
    clocks = neither_scales(design, rng) if truth.unit == "neither" else None
    memories = true_memory(design, truth, clocks)
    for p, m in zip(design.pipelines, memories, strict=True):
        n = design.n_seeds
        n_true, f_true = true_norm(m, truth), true_spread_fraction(p, m, truth)
        norm = n_true[None, :] + truth.sigma_norm * rng.standard_normal((n, m.size))
        norm[:, 0] = 1.0
        seed_effect = truth.sigma_seed * rng.standard_normal((n, 1, 1))
        noise = truth.sigma_acc * rng.standard_normal((n, alphas.size, m.size))
        accs.append(truth.base + g[None, :, None] * f_true[None, None, :] + seed_effect + noise)
        norms.append(norm)
        norm_truths.append(n_true)
        fractions.append(f_true)
    return Replica(design, truth, norms, accs, memories, norm_truths, fractions)


def replica_cubes(replica: Replica) -> dict:
    """The :class:`~initmem.bridge.unit_decision.PipelineCube` s of a replica, as
    :func:`~initmem.bridge.unit_decision.memory_cubes` builds them from its folder: the norm memory at every
    evaluation, the spread from the peak of its seed-mean spread at or after the first evaluation
    after init (the pipeline has learned there; :func:`~initmem.bridge.unit_decision.spread_start`)."""
    norm, spread = [], []
    for p, values, acc in zip(
        replica.design.pipelines, replica.norm, replica.accuracy, strict=True
    ):
        deciding = {u: p.units[u] for u in DESIGN_UNITS if u in p.units}
        norm.append(PipelineCube(p.label, values, deciding))
        start = 1 + spread_start(p.steps[1:], acc[:, :, 1:])
        later = {u: v[start:] for u, v in deciding.items()}
        spread.append(PipelineCube(p.label, acc[:, :, start:], later, scale=100.0))
    return {"norm": norm, "spread": spread}


# ----------------------------------------------------------------------------------- as a folder
#: Layers of a synthetic run: name -> (numel, BN-followed conv, scaled by alpha).
FOLDER_LAYERS = {"conv1.weight": (432, True, True), "conv2.weight": (2304, True, True)}


def write_folder(root: str | Path, replica: Replica) -> Path:
    """Write ``replica`` as a sweep folder (manifest.json, sweep.toml, runs/<hash>/); return ``root``.

    Each run logs every evaluation of its pipeline: its test accuracy (S3), a validation accuracy
    that peaks at the last evaluation (so the validation-selected checkpoint is the last one), full
    train accuracy, and per layer ``log |w|(t) = log n0 + m_s(t) ln alpha`` (S2, ``n0^2`` = numel
    over the design's ``d / |w_0|^2``), so that the norm
    memory of :func:`initmem.empirical.curves.norm_memory_curves` is the replica's, seed by seed.
    """
    root = Path(root)
    runs = []
    design = replica.design
    for index, p in enumerate(design.pipelines):
        epochs = p.steps // p.config.steps_per_epoch
        for s in range(design.n_seeds):
            for a, alpha in enumerate(design.alphas):
                config = p.config.replace(alpha=float(alpha), seed=s, quiet=True)
                run_dir = root / "runs" / config.hash
                run_dir.mkdir(parents=True)
                config = config.replace(out_dir=str(run_dir.resolve()))
                acc = replica.accuracy[index][s, a]
                memory = replica.norm[index][s]
                _write_run(run_dir, config, p, epochs, acc, memory, float(alpha))
                runs.append(SweepRun(config.hash, p.label, config))
    source = f"# synthetic sweep (initmem.bridge.study.synthetic): truth {replica.truth.unit}\n"
    write_sweep_folder(root, source, runs)
    return root


def layer_frame(
    epochs, steps, layer: str, numel: int, invariant: bool, weight_norm, lr: float, **columns
) -> pd.DataFrame:
    """One synthetic layer's rows of the layer log (docs/run-format.md): ``weight_norm`` at each
    evaluation, ``eff_lr = lr / |w|^2``, no movement logged (``dist_from_init``, ``update_norm`` 0)
    and the gradient statistics NaN unless ``columns`` give them (``grad_norm``, ``grad_sq_sum``,
    ...)."""
    return pd.DataFrame(
        {
            "epoch": epochs,
            "step": steps,
            "layer": layer,
            "numel": numel,
            "scale_invariant": invariant,
            "weight_norm": weight_norm,
            "eff_lr": lr / np.asarray(weight_norm) ** 2,
            "dist_from_init": 0.0,
            "update_norm": 0.0,
            "grad_norm": np.nan,
            "grad_sq_sum": np.nan,
            "lr_sq_grad_sq_sum": np.nan,
            "norm_sq_drift": np.nan,
        }
        | columns
    )


def write_run_logs(run_dir: Path, config, metrics: pd.DataFrame, layers: pd.DataFrame) -> None:
    """Write a run folder's ``config.json``, ``log.jsonl`` (one record per evaluation, its layers
    nested), ``metrics.parquet`` and ``layers.parquet`` from the two tidy frames, through the run
    folder's writer (:class:`initmem.empirical.runfolder.RunFiles`, docs/run-format.md): what a
    synthetic run has in place of training. ``metrics`` has one row per evaluation (``epoch``,
    ``step``, ...), ``layers`` one per evaluation and layer (``epoch``, ``step``, ``layer``, ...)."""
    files = runfolder.RunFiles(run_dir, config.hash)
    files.start(config, {"dataset": config.dataset, "synthetic": True})
    for record in metrics.to_dict("records"):
        rows = layers[layers["epoch"] == record["epoch"]]
        record["layers"] = {
            r.pop("layer"): r for r in rows.drop(columns=["epoch", "step"]).to_dict("records")
        }
        files.append(record)
    files.write_tables()


def _write_run(run_dir, config, pipeline, epochs, acc, memory, alpha) -> None:
    """One run folder of :func:`write_folder`."""
    steps = pipeline.steps
    n = steps.size
    val = np.where(steps == 0, 0.1, 0.8 + 0.05 * np.arange(n) / max(n - 1, 1))
    metrics = pd.DataFrame(
        {
            "epoch": epochs,
            "step": steps,
            "lr": config.lr,
            "weight_decay": config.weight_decay,
            "l2": config.l2,
            "train_loss": 0.01,
            "train_acc": 1.0,
            "train_eval_acc": 1.0,
            "val_loss": 1.0,
            "val_acc": val,
            "test_loss": 1.0,
            "test_acc": acc,
            "weight_norm": 10.0,
            "dist_from_init": 0.0,
            "wall_time": np.arange(n, dtype=float),
        }
    )
    frames = []
    for name, (numel, invariant, scaled) in FOLDER_LAYERS.items():
        # |w_0|^2 = numel / (d / |w_0|^2) at alpha = 1: the bridge's init_scale reads it back
        inv = pipeline.inv_init_sq if np.isfinite(pipeline.inv_init_sq) else 1.0
        log_norm = 0.5 * np.log(numel / inv) + (np.log(alpha) * memory if scaled else 0.0)
        norm = np.exp(log_norm)
        frames.append(layer_frame(epochs, steps, name, numel, invariant, norm, config.lr))
    layers = pd.concat(frames, ignore_index=True).sort_values(["epoch", "layer"], ignore_index=True)
    write_run_logs(run_dir, config, metrics, layers)
    result = runfolder.RunResult.completed(
        run_dir,
        config.hash,
        test_acc=acc[-1],
        epochs_run=epochs[-1],
        steps_run=steps[-1],
        best_val_acc=val[-1],
        wall_time=1.0,
    )
    runfolder.write_result(run_dir, result)


__all__ = [
    "DESIGN_UNITS",
    "FOLDER_LAYERS",
    "NAMED_TRUTHS",
    "RISE_FRACTION",
    "TRUTHS",
    "TRUTH_UNITS",
    "Design",
    "DesignPipeline",
    "Replica",
    "Truth",
    "design_from",
    "design_of",
    "draw",
    "evaluation_epochs",
    "has_decay",
    "layer_frame",
    "named_truths",
    "RIVAL_TRUTHS",
    "right_verdict",
    "neither_scales",
    "replica_cubes",
    "true_memory",
    "true_norm",
    "true_spread_end",
    "true_spread_fraction",
    "write_folder",
    "write_run_logs",
]
