"""``initmem theory --groups``: the per-group table of the config's model, against
``bridge.preregister.predict_groups`` on the same config."""

import json
import math

import pytest

from initmem.bridge.preregister import predict_groups
from initmem.cli import main
from initmem.empirical.config import RunConfig

pytestmark = pytest.mark.usefixtures("single_thread")


def write_config(tmp_path, model: str) -> tuple:
    values = dict(
        dataset="cifar10-fixture",
        data_dir=str(tmp_path / "data"),
        model=model,
        width=0.125,
        train_size=16,
        val_size=4,
        test_size=20,
        batch_size=4,
        epochs=3,
        optimizer="sgd",
        lr=0.05,
        momentum=0.9,
        l2=5e-3,
        alpha=8.0,
    )
    path = tmp_path / "run.toml"
    path.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + "\n")
    return path, RunConfig.from_dict(values)


@pytest.mark.parametrize("model", ["resnet9", "mlp"])
def test_groups_json_equals_predict_groups(tmp_path, capsys, model):
    path, config = write_config(tmp_path, model)
    assert main(["theory", "--config", str(path), "--groups", "--probe-size", "6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["parameter_groups"]
    expected = predict_groups(config, probe_size=6)
    assert out["alpha"] == 8.0 and out["hash"] == config.hash
    for got, want in zip(out["groups"], expected.table.to_dict("records"), strict=True):
        assert got["group"] == want["group"] and got["mechanism"] == want["mechanism"]
        assert got["parameters"] == want["parameters"]
        for key in ("steps", "epochs", "memory_fraction"):
            if math.isnan(want[key]):
                assert got[key] is None
            elif math.isinf(want[key]):
                assert got[key] == "inf"
            else:
                assert got[key] == pytest.approx(want[key], rel=1e-12)
    rows = {row["group"]: row for row in out["groups"]}
    # the model decides the mechanism: BatchNorm convs are scale-invariant, a plain MLP has none
    assert (rows["scale_invariant"]["parameters"] > 0) == (model == "resnet9")
    assert 0 < rows["other"]["memory_fraction"] < 1


def test_groups_table_prints_each_group_and_its_time(tmp_path, capsys):
    path, config = write_config(tmp_path, "resnet9")
    assert main(["theory", "--config", str(path), "--groups", "--probe-size", "4"]) == 0
    text = capsys.readouterr().out
    expected = predict_groups(config, probe_size=4).table.set_index("group")
    section = text.split("per parameter group of the model")[1]
    line = next(x for x in section.splitlines() if x.startswith("scale_invariant"))
    steps = expected.loc["scale_invariant", "steps"]
    assert f"{steps:.3g}" in line and "normalized-weight laws" in line
    assert "lazy (NTK) memory term" in section


def test_groups_without_data_is_one_line(tmp_path, capsys):
    path, _ = write_config(tmp_path, "mlp")
    text = path.read_text().replace('"cifar10-fixture"', '"cifar10"')
    path.write_text(text)
    assert main(["theory", "--config", str(path), "--groups"]) == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and "CIFAR-10" in errors[0] and "not found" in errors[0]
