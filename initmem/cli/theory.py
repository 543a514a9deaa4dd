"""``initmem theory``: every mechanism's predicted forgetting time for a training config.

    initmem theory --config FILE [--set key=value ...] [--json] [--alpha A] [--tol T] [--groups]
    initmem theory --from-run RUN_DIR [--reference REF_DIR] [--json]

Maps the run config (``docs/run-format.md``) to :class:`initmem.theory.forgetting.Pipeline`
(steps per epoch = train_size // batch_size, the schedule expanded per step) and prints, for the
config's ``alpha`` against 1, each mechanism's forgetting time in steps and epochs, the memory left at
the end of the run, and the dominant mechanism. The BN-followed conv fan-ins come from the config's
model (built on torch's ``meta`` device, no memory), or from ``--fan-in``. ``--groups`` adds the
pre-registered table per parameter group of the config's model
(:func:`initmem.bridge.preregister.predict_groups`: which mechanism applies to the scale-invariant
weights, the head and the rest, its forgetting time in steps and epochs and the NTK memory fraction;
it builds the model and reads ``--probe-size`` images of the config's data, a few seconds). Bad
input: one line ``error: ...`` on stderr, exit status 2.

``--from-run RUN_DIR`` prints instead the run's norm memory against a reference run of its pipeline
(``--reference``; found in its sweep when omitted) predicted by the normalized-weight law from each
run's own logged gradient scale, beside the measured one
(:func:`initmem.bridge.from_run.run_prediction`): memory at the end, the first logged step at or below
the criterion's level (null when not reached), the source of the gradient scale.
"""

from __future__ import annotations

import argparse
import json
import math
import warnings

from initmem.cli import SUBCOMMANDS, add_config_arguments, fail

#: Fan-in used when the model cannot be built and no --fan-in is given (a 64-channel 3x3 conv).
FALLBACK_FAN_IN = 576


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "theory",
        help=SUBCOMMANDS["theory"],
        description="Every mechanism's predicted forgetting time of alpha (vs 1) for a run config, "
        "in steps and epochs, and which one dominates (initmem.theory.forgetting).",
    )
    add_config_arguments(parser)
    parser.add_argument(
        "--from-run",
        metavar="RUN_DIR",
        help="a trained run folder: its norm memory against --reference predicted by the law "
        "from each run's own logged gradient scale, beside the measured one",
    )
    parser.add_argument(
        "--reference",
        metavar="REF_DIR",
        help="with --from-run: a run of the same pipeline at another alpha (default: in the run's "
        "sweep, the run of its pipeline and seed with the alpha farthest from its own)",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--groups",
        action="store_true",
        help="add the per-group prediction table of the config's model (builds the model and its "
        "empirical NTK on --probe-size images of the config's data: seconds)",
    )
    parser.add_argument(
        "--probe-size",
        type=int,
        default=16,
        metavar="N",
        help="train and test images feeding the NTK of --groups (default 16)",
    )
    parser.add_argument(
        "--alpha", type=float, help="init scale to forget (default: the config's; 2 if that is 1)"
    )
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the gradient-scale probe (initmem.bridge.probe: 8 minibatches of the config's "
        "model and local data at init, at alpha and 1) and its law line",
    )
    parser.add_argument(
        "--tol",
        type=float,
        help="absolute threshold on |ln eff_lr ratio| in place of the shared criterion "
        "(default: norm memory <= 1/e, initmem.theory.criterion)",
    )
    grad = parser.add_mutually_exclusive_group()
    grad.add_argument(
        "--grad-sq-unit", type=float, help="measured |g_hat|^2 per step per filter (unit norm)"
    )
    grad.add_argument(
        "--per-example-grad-sq-unit",
        type=float,
        help="per-example gradient trace at unit filter norm (|g_hat|^2 = this / batch_size)",
    )
    parser.add_argument(
        "--fan-in",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="fan-in of a BN-followed conv (repeatable; default: from the config's model)",
    )
    head = parser.add_argument_group(
        "cross-entropy head (the logit-scale group; initmem.theory.logit_scale)"
    )
    head.add_argument(
        "--logit-scale", type=float, help="RMS logit at alpha = 1 at init (default 1)"
    )
    head.add_argument(
        "--equilibrium-logit-scale",
        type=float,
        help="RMS logit where the alpha = 1 run settles (SGD model (4); without it a decay bound)",
    )
    head.add_argument(
        "--equilibrium-gain",
        type=float,
        help="RMS BN gain where the alpha = 1 run settles (Adam + coupled L2, law (7))",
    )
    parser.set_defaults(func=run)


def head_and_bn_scaled(config) -> bool:
    """Whether the config's alpha scales both the head and the BN affine (logits ~ alpha^2)."""
    groups = set(config.alpha_groups)
    return "all" in groups or {"head", "bn"} <= groups


def model_fan_ins(config) -> list[int]:
    """Distinct fan-ins of the config's scale-invariant weights (any model, plug-ins too); [] if
    unavailable."""
    try:
        import torch

        from initmem.empirical.models import default_model, scale_invariant_parameters
    except ImportError:
        return []
    with torch.device("meta"):
        model = default_model(config)
    params = dict(model.named_parameters())
    shapes = [params[name].shape for name in scale_invariant_parameters(model)]
    return sorted({math.prod(shape[1:]) for shape in shapes})


def model_inv_init_sq(config) -> float | None:
    """``d / |w_0|^2`` of the config's model at alpha = 1, as the dry run computes it
    (:func:`initmem.bridge.units.design_inv_init_sq`: expected for the ResNets, drawn for other
    models); None where the model cannot be built or has no scale-invariant weight (NaN)."""
    try:
        from initmem.bridge.units import design_inv_init_sq  # other models: built with torch
    except ImportError:
        return None
    value = design_inv_init_sq(config)
    return value if math.isfinite(value) else None


def run(args: argparse.Namespace) -> int:
    """Print the prediction table (or JSON). Returns 0, or 2 for a bad config or argument."""
    from initmem.bridge.measure import BridgeDataError
    from initmem.bridge.preregister import pipeline_of
    from initmem.empirical.config import ConfigError, RunConfig
    from initmem.theory.forgetting import predict_forgetting

    if args.from_run is not None:
        return run_from_run(args)
    if args.reference is not None:
        return fail("--reference goes with --from-run RUN_DIR")
    try:
        config = RunConfig.from_file(args.config, args.overrides)
        notes = []
        placeholder = []
        if args.grad_sq_unit is None and args.per_example_grad_sq_unit is None:
            placeholder.append(PLACEHOLDER_WARNING)
        alpha = config.alpha if args.alpha is None else args.alpha
        if alpha == 1.0 and args.alpha is None:
            alpha = 2.0
            notes.append("alpha = 1 is the reference: showing alpha = 2 (use --alpha)")
        fan_ins = list(args.fan_in) or model_fan_ins(config)
        grad_sq_unit = args.grad_sq_unit
        if not fan_ins:
            fan_ins = [FALLBACK_FAN_IN]
            notes.append(f"model unavailable: fan-in {FALLBACK_FAN_IN} assumed (use --fan-in)")
        if not {"all", "conv"} & set(config.alpha_groups):
            notes.append(
                f"alpha_groups = {list(config.alpha_groups)} does not scale the BN-followed convs: "
                "only linear_decay applies to the scaled weights"
            )
        if not {"all", "head"} & set(config.alpha_groups):
            notes.append(
                f"alpha_groups = {list(config.alpha_groups)} does not scale the head: the "
                "head_logit_scale row is what a scaled head would do"
            )
        if config.nesterov:
            notes.append("nesterov is treated as heavy ball (same long-run effective rate)")
        with warnings.catch_warnings(record=True) as caveats:  # a law used outside its range
            warnings.simplefilter("always")
            report = predict_forgetting(
                pipeline_of(config),
                alpha,
                fan_ins=fan_ins,
                inv_init_sq_per_coord=model_inv_init_sq(config),
                grad_sq_unit=grad_sq_unit,
                per_example_grad_sq_unit=args.per_example_grad_sq_unit,
                tol=args.tol,
                logit_scale=args.logit_scale,
                equilibrium_logit_scale=args.equilibrium_logit_scale,
                head_and_bn_scaled=head_and_bn_scaled(config),
                equilibrium_gain=args.equilibrium_gain,
            )
        notes += list(dict.fromkeys(f"caveat: {' '.join(str(w.message).split())}" for w in caveats))
        groups = group_predictions(config, alpha, args.probe_size) if args.groups else None
        law = None if args.no_probe else probed_law(config, alpha)
    except (ConfigError, BridgeDataError, ValueError, OSError) as err:
        return fail(" ".join(str(err).split()))
    except OverflowError:
        return fail(
            f"the prediction overflows float64 for alpha {alpha:g} and lr {config.lr:g}; choose "
            "values nearer 1"
        )
    if args.json:
        out = report.to_dict()
        out.update(
            steps_per_epoch=config.steps_per_epoch,
            total_steps=config.total_steps,
            warnings=placeholder,
            notes=notes,
            config=config.to_dict(),
            g_source=g_source(args),
        )
        if law is not None:
            out["law"] = {k: _clean(v) for k, v in law.items()}
        if groups is not None:
            out["parameter_groups"] = groups_dict(groups)
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        text = format_report(config, report, notes)
        if law is not None:
            text += "\n" + format_law(config, alpha, law)
        if groups is not None:
            text += "\n\n" + format_groups(groups)
        print("\n".join([*(f"warning: {w}" for w in placeholder), text]))
    return 0


def g_source(args) -> str:
    """Where the mechanism table's gradient scale comes from, in words."""
    if args.grad_sq_unit is not None or args.per_example_grad_sq_unit is not None:
        return "given: --grad-sq-unit / --per-example-grad-sq-unit"
    return "placeholder: |g_hat|^2 = 1 per example / batch_size per filter, not a measurement"


def probed_law(config, alpha: float) -> dict:
    """The normalized-weight laws with G probed at ``alpha`` and 1, decided by the one rule
    (:func:`initmem.bridge.probe.law_forgetting`); where the probe cannot run (no local data, a
    model that fails) its reason in ``g_source`` and NaN."""
    from initmem.bridge.probe import failed_law, law_forgetting  # torch: the model and its data

    try:
        return law_forgetting(config, [1.0, alpha])
    except Exception as err:  # the model, its data or a law: said in the output, not a stop
        return failed_law(err)


def format_law(config, alpha: float, law: dict) -> str:
    """One line: the probed law's decision (theory.criterion) and its G source."""
    state = law["state"]
    if state == "forgotten":
        said = (
            f"forgotten at {law['forgetting_steps']:.0f} steps "
            f"({law['forgetting_epochs']:.3g} epochs)"
        )
    elif state == "not forgotten":
        said = f"not within the run: the schedule ends with memory {law['memory_end']:.3g}"
    elif state == "reversed":
        said = f"reversed: memory {law['memory_end']:.3g} at the end"
    else:
        said = state or "undefined"
    return (
        f"normalized-weight laws with G probed at alpha {alpha:g} and 1, layer mean, one decision "
        f"(theory.criterion): {said}; g_source: {law['g_source']}"
    )


def group_predictions(config, alpha: float, probe_size: int):
    """:func:`initmem.bridge.preregister.predict_groups` for ``config`` at ``alpha`` (vs 1)."""
    if probe_size < 1:
        raise ValueError(f"--probe-size must be >= 1 (got {probe_size})")
    from initmem.bridge.preregister import predict_groups  # torch, the model and its data

    with warnings.catch_warnings():  # torch's own performance notes on the NTK's vmap
        warnings.simplefilter("ignore", UserWarning)
        return predict_groups(config, alpha=alpha, probe_size=probe_size)


def _clean(value):
    """A JSON-ready number: None for NaN, "inf" for infinity."""
    if isinstance(value, str):
        return value
    value = float(value)
    return None if math.isnan(value) else ("inf" if math.isinf(value) else value)


def groups_dict(predictions) -> dict:
    """JSON-ready: the per-group table with its alpha and config hash."""
    rows = [
        {k: (v if isinstance(v, str) else _clean(v)) for k, v in row.items()}
        for row in predictions.table.to_dict("records")
    ]
    for row in rows:
        row["parameters"], row["tensors"] = int(row["parameters"]), int(row["tensors"])
    return {"alpha": predictions.alpha, "hash": predictions.hash, "groups": rows}


def format_groups(predictions) -> str:
    """The per-group table of ``predict_groups``: group, size, mechanism, steps, epochs, memory
    fraction, law."""
    lines = [
        f"per parameter group of the model (bridge.preregister, alpha {predictions.alpha:g} vs 1, "
        f"config {predictions.hash}):",
        f"{'group':<17}{'params':>9}{'steps':>10}{'epochs':>10}{'memory':>9}  mechanism: law",
    ]
    for row in predictions.table.to_dict("records"):
        lines.append(
            f"{row['group']:<17}{row['parameters']:>9}{_num(row['steps']):>10}"
            f"{_num(row['epochs']):>10}{_num(row['memory_fraction']):>9}  "
            f"{row['mechanism']}: {row['law']}"
        )
    lines.append(
        "memory: |m| / |f0| of the NTK memory term on the probe images (the part of the initial "
        "function the kernel cannot reach); inf: not reached (no decay erases it, or the "
        "schedule ends first: the mechanism table above says which)"
    )
    return "\n".join(lines)


#: Printed first when the SGD times rest on the placeholder gradient scale.
PLACEHOLDER_WARNING = (
    "no run given: the SGD-noise and adaptive times rest on a placeholder gradient scale (|g_hat|^2 = 1 per example / "
    "batch_size per filter, not a measurement; over 0.01-10 per example the time moves severalfold); "
    "give --grad-sq-unit G measured at this alpha (G depends on alpha where alpha scales the BN "
    "gains or the head), or predict a trained run with --from-run RUN_DIR"
)


def run_from_run(args: argparse.Namespace) -> int:
    """``--from-run``: the run against its reference (module docstring). Returns 0, or 2 with one
    ``error:`` line."""
    from initmem.bridge.from_run import prediction_dict, run_prediction  # pandas: only here
    from initmem.bridge.measure import BridgeDataError
    from initmem.empirical.runfolder import DamagedFileError

    given = [
        flag
        for flag, value in (
            ("--config", args.config),
            ("--set", args.overrides),
            ("--grad-sq-unit", args.grad_sq_unit),
            ("--per-example-grad-sq-unit", args.per_example_grad_sq_unit),
            ("--alpha", args.alpha),
            ("--tol", args.tol),
            ("--fan-in", args.fan_in),
            ("--groups", args.groups),
        )
        if value
    ]
    if given:
        return fail(
            f"--from-run takes the run's own config and logged gradient scale: leave out {given}"
        )
    try:
        prediction = run_prediction(args.from_run, args.reference)
    except (BridgeDataError, DamagedFileError, ValueError, OSError) as err:
        return fail(" ".join(str(err).split()))
    if args.json:
        print(json.dumps(prediction_dict(prediction), indent=2, allow_nan=False))
    else:
        print(format_from_run(prediction))
    return 0


def format_from_run(prediction) -> str:
    """The predicted norm memory beside the measured one, the forgetting steps and G's source."""

    def step(value):
        return "not reached within the logs" if value is None else f"step {value:.0f}"

    lines = [
        f"from the run {prediction.run_dir} (alpha {prediction.config.alpha:g}) against "
        f"{prediction.reference_dir} (alpha {prediction.reference_alpha:g})",
        f"gradient scale: {prediction.g_source}",
        f"norm memory at the end: predicted {prediction.predicted_memory_end:.4g}, measured "
        f"{prediction.measured_memory_end:.4g}",
        f"forgotten ({prediction.forgetting}, first logged step): predicted "
        f"{step(prediction.predicted_forgetting_step)}, measured "
        f"{step(prediction.measured_forgetting_step)}; e-fold fit of the predicted curve "
        f"(extrapolated): {_num(prediction.tau_fit_steps)} steps",
        f"{'step':>8}{'predicted m':>14}{'measured m':>13}",
    ]
    for row in prediction.curve.itertuples(index=False):
        lines.append(f"{row.step:>8.0f}{_num(row.predicted):>14}{_num(row.measured):>13}")
    if not prediction.finished:
        lines.append(
            "unfinished: "
            + ", ".join(prediction.unfinished)
            + " (the logs so far; the run's end is not reached)"
        )
    return "\n".join(lines)


def _num(value: float, *, percent: bool = False) -> str:
    """A number for a table cell: "-" for none, "inf" for a time that is not reached (the row's
    verdict says whether never or not within the run)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{100 * value:.1f}%" if percent else f"{value:.3g}"


def format_report(config, report, notes: list[str]) -> str:
    """A readable table: mechanism, acts, steps, epochs, memory left at the end, formula."""
    lines = [
        f"initmem theory: {config.optimizer} lr={config.lr:g} momentum={config.momentum:g} "
        f"l2={config.l2:g} weight_decay={config.weight_decay:g} batch={config.batch_size}; "
        f"{config.total_steps:,} steps = {config.total_steps / config.steps_per_epoch:g} epochs "
        f"x {config.steps_per_epoch} steps ({config.schedule} schedule)",
        f"alpha = {report.alpha:g} vs 1; forgotten: {report.assumptions['forgetting']}, "
        f"|ln(eff_lr(alpha) / eff_lr(1))| <= {report.assumptions['tol']:.3g}; BN-conv fan-ins "
        f"{report.assumptions['fan_ins']} (each mechanism: its slowest layer)",
        "",
        f"{'mechanism':<16}{'acts':<6}{'steps':>10}{'epochs':>10}{'left at end':>13}  "
        "verdict; formula",
    ]
    for row in report.table.to_dict("records"):
        lines.append(
            f"{row['mechanism']:<16}{'yes' if row['acts'] else 'no':<6}{_num(row['steps']):>10}"
            f"{_num(row['epochs']):>10}{_num(row['memory_left'], percent=True):>13}  "
            f"{row['verdict']}; {row['formula']}"
        )
    time = (
        f"{_num(report.steps)} steps ({_num(report.epochs)} epochs)"
        if math.isfinite(report.steps)
        else report.verdict
    )
    lines += [
        "",
        f"dominant (shortest forgetting time): {report.dominant}",
        f"predicted forgetting time ({report.assumptions['forgetting']}; each mechanism's slowest "
        f"layer, G as below): {time}",
    ]
    if report.accumulated is not None:
        lines.append(format_accumulated(config.optimizer, report.accumulated))
    lines += [
        "",
        f"{'parameter group':<18}{'rank':>5}{'steps':>10}{'epochs':>10}  verdict; law or reason",
    ]
    for row in report.groups.to_dict("records"):
        rank = f"{row['rank']:.0f}" if row["prediction"] else "-"
        verdict = f"{row['verdict']}; " if row["prediction"] else ""
        lines.append(
            f"{row['group']:<18}{rank:>5}{_num(row['steps']):>10}{_num(row['epochs']):>10}  "
            f"{verdict}{row['formula']}"
        )
    lines.append(f"forgets last: {report.forgets_last}")
    lines.append(
        f"assumed |g_hat|^2 per step per filter: {report.assumptions['grad_sq_unit']:.3g} "
        f"({report.assumptions['grad_sq_unit_source']})"
    )
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines)


def format_accumulated(optimizer: str, totals: dict) -> str:
    """The run's accumulated regularization (:mod:`initmem.theory.units`, the numbers of
    ``sweep run --dry-run``), with the noise unit it adds."""
    from initmem.theory.units import noise_unit

    return (
        f"accumulated regularization over the run (theory.units, as sweep run --dry-run): "
        f"accumulated = {totals['accumulated']:.3g} (explicit + {noise_unit(optimizer)}); "
        f"explicit = {totals['explicit']:.3g}, sgd_noise = {totals['sgd_noise']:.3g}, "
        f"adam = {totals['adam']:.3g}"
    )
