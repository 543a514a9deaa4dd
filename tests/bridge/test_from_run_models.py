"""`initmem theory --from-run` on models beyond the ResNets (issue 37 item 10): a plug-in model
(no KeyError), a model without scale-invariant weights (said so, not "track_grad_norms = false")."""

from __future__ import annotations

import json
import textwrap

from initmem.cli import main
from tests.empirical.test_plugins import plugin_module  # noqa: F401, F811 (the fixture)


def _train(tmp_path, name: str, alpha: float, **fields) -> str:
    lines = [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    config = tmp_path / f"{name}.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            train_size = 48
            val_size = 16
            batch_size = 8
            epochs = 2
            lr = 0.05
            alpha = {alpha}
            quiet = true
            """
        )
        + "\n".join(lines)
        + "\n"
    )
    out = tmp_path / f"{name}-{alpha:g}"
    assert main(["train", "--config", str(config), "--out", str(out)]) == 0
    return str(out)


def test_plugin_model_is_predicted(plugin_module, tmp_path, capsys):  # noqa: F811
    model, data = f"{plugin_module}:small_net", f"{plugin_module}:stripes"
    fields = dict(model=model, dataset=data, alpha_groups=["scale_invariant"])
    run, ref = _train(tmp_path, "p", 4.0, **fields), _train(tmp_path, "p", 1.0, **fields)
    capsys.readouterr()
    assert main(["theory", "--from-run", run, "--reference", ref, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [row["layer"] for row in out["layers"]] == ["0.weight"]  # the GroupNorm-ed conv
    assert abs(out["predicted_memory_end"] - out["measured_memory_end"]) < 0.01


def test_a_model_without_scale_invariant_weights_is_named(tmp_path, capsys):
    fields = dict(model="mlp", dataset="synthetic", test_size=64)
    run, ref = _train(tmp_path, "m", 4.0, **fields), _train(tmp_path, "m", 1.0, **fields)
    capsys.readouterr()
    assert main(["theory", "--from-run", run, "--reference", ref]) == 2
    err = capsys.readouterr().err
    assert "no scale-invariant" in err and "track_grad_norms" not in err
