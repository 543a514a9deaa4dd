"""The benchmark runner at tiny sizes: it runs and writes results.json in its schema (speed is never
asserted here; the numbers live in BENCHMARKS.md)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import RESULT_KEYS, BenchResult, format_table, interleaved

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "benchmarks" / "run.py"
MACHINE_KEYS = {"cpu", "cpu_count", "torch_threads", "python", "torch", "platform", "cuda"}


def run_quick(tmp_path: Path, groups: list[str]) -> list[dict]:
    out = tmp_path / "results.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, str(RUNNER), "--quick", "--threads", "1", "--only", ",".join(groups)]
    done = subprocess.run(
        [*cmd, "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "benchmark" in done.stdout and "ratio" in done.stdout  # the printed table
    return json.loads(out.read_text())


def check_entry(entry: dict) -> None:
    assert tuple(entry) == RESULT_KEYS
    assert isinstance(entry["name"], str) and entry["name"]
    assert isinstance(entry["description"], str) and entry["description"]
    assert entry["better"] in ("higher", "lower")
    figures = entry["figures"]
    assert isinstance(figures, dict)
    if entry["ratio"] is not None:
        assert math.isfinite(entry["ratio"])
    if entry["measured"]:
        assert isinstance(figures["repeats"], int) and figures["repeats"] >= 1
        assert entry["ratio"] is not None
    if not entry["measured"] or entry["target"] is None:
        assert entry["met"] is None
    elif entry["better"] == "higher":
        assert entry["met"] == (entry["ratio"] >= entry["target"])
    else:
        assert entry["met"] == (entry["ratio"] <= entry["target"])
    context = entry["context"]
    assert context["quick"] is True
    assert MACHINE_KEYS <= set(context["machine"])
    assert context["machine"]["torch_threads"] == 1
    assert len(context["load_average_before"]) == 3


def test_quick_run_writes_the_schema(tmp_path):
    """The flops, sweep and cli groups, and benchmarks/gpu.py's three parts at tiny sizes on the CPU,
    reported as not measured (its parts call the throughput and packing benchmarks, so their code
    runs too). The NTK group, which starts JAX, runs in the slow test below."""
    entries = run_quick(tmp_path, ["flops", "sweep", "cli", "gpu"])
    for entry in entries:
        check_entry(entry)
    names = [e["name"] for e in entries]
    assert names[0] == "flop_efficiency_w0.0625"
    flops = entries[0]["figures"]
    assert flops["flop_per_image"] > 0 and flops["conv_gemm_flop_per_s"] > 0
    assert entries[0]["ratio"] == pytest.approx(
        flops["achieved_flop_per_s"]
        / max(flops["matmul_flop_per_s"], flops["conv_gemm_flop_per_s"])
    )
    sweep = next(e for e in entries if e["name"] == "sweep_overhead")["figures"]
    assert sweep["runs_timed"] == 1 and 0 < sweep["compute_s"] < sweep["sweep_wall_s"]
    cli = {e["name"]: e["figures"] for e in entries if e["name"].startswith("cli_startup_")}
    assert sorted(cli) == ["cli_startup_help", "cli_startup_status"]
    assert cli["cli_startup_status"]["runs_in_folder"] == 24  # the demo preset's runs
    assert cli["cli_startup_help"]["help_s"] > 0 and cli["cli_startup_status"]["status_s"] > 0
    gpu = [e for e in entries if e["name"].startswith("gpu_smoke_")]
    assert {e["name"] for e in gpu} == {
        "gpu_smoke_gpu_resnet9_w0.0625_b16_eager",
        "gpu_smoke_gpu_resnet9_w0.0625_b32_eager",
        "gpu_smoke_train_throughput_w0.0625",
        "gpu_smoke_packed_runs",
    }
    assert all(not e["measured"] and e["met"] is None for e in gpu)
    packed = next(e for e in gpu if e["name"] == "gpu_smoke_packed_runs")["figures"]
    assert packed["faster_mode"] in ("grouped", "vmap")


@pytest.mark.slow
def test_quick_run_of_every_benchmark(tmp_path):
    entries = run_quick(tmp_path, ["throughput", "flops", "packing", "ntk", "sweep", "cli", "gpu"])
    for entry in entries:
        check_entry(entry)
    names = {e["name"] for e in entries}
    assert {
        "train_throughput_w0.0625",
        "flop_efficiency_w0.0625",
        "packed_runs",
        "ntk_empirical",
        "ntk_predictor",
        "sweep_overhead",
    } <= names
    ntk = next(e for e in entries if e["name"] == "ntk_empirical")["figures"]
    assert ntk["kernel_max_rel_diff"] < 1e-4  # ours and neural-tangents compute the same kernel


@pytest.mark.parametrize(
    ("ratio", "target", "better", "measured", "met"),
    [
        (2.0, 1.5, "higher", True, True),
        (1.2, 1.5, "higher", True, False),
        (0.03, 0.05, "lower", True, True),
        (0.2, 0.05, "lower", True, False),
        (0.2, None, "higher", True, None),
        (2.0, 1.5, "higher", False, None),
        (float("nan"), 1.5, "higher", True, None),
    ],
)
def test_met_follows_the_target_and_its_direction(ratio, target, better, measured, met):
    result = BenchResult("b", "d", ratio=ratio, target=target, better=better, measured=measured)
    assert result.met is met
    assert tuple(result.to_dict()) == RESULT_KEYS


def test_bad_direction_is_refused():
    with pytest.raises(ValueError, match="better must be"):
        BenchResult("b", "d", better="faster")


def test_interleaving_alternates_the_order_after_the_warmup():
    calls = []
    sides = {name: (lambda n=name: calls.append(n) or len(calls)) for name in ("A", "B")}
    measured = interleaved(sides, repeats=3, warmup=1)
    assert calls == ["A", "B", "A", "B", "B", "A", "A", "B"]
    assert measured == {"A": [3, 6, 7], "B": [4, 5, 8]}
    with pytest.raises(ValueError, match="repeats"):
        interleaved(sides, repeats=0)


def test_table_shows_ratio_target_and_verdict():
    table = format_table(
        [
            BenchResult("fast", "d", ratio=2.0, target=1.5),
            BenchResult("lean", "d", ratio=0.2, target=0.05, better="lower"),
            BenchResult("gpu", "d", measured=False),
        ]
    )
    lines = table.splitlines()
    assert lines[0].split() == ["benchmark", "ratio", "target", "met"]
    assert lines[2].split() == ["fast", "2", ">=", "1.5", "yes"]
    assert lines[3].split() == ["lean", "0.2", "<=", "0.05", "NO"]
    assert lines[4].split() == ["gpu", "not", "measured", "-", "-"]


def test_runner_refuses_unknown_benchmarks():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from benchmarks.run import parse_args

    assert parse_args(["--only", "ntk,sweep"]).only == ["ntk", "sweep"]
    with pytest.raises(SystemExit):
        parse_args(["--only", "ntk,speed"])
    with pytest.raises(SystemExit):
        parse_args(["--threads", "0"])
